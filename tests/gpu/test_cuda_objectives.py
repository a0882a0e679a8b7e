"""Objectives and metrics on CuPy arrays against the NumPy reference, from the same inputs.

The device computes the same float64 formulas; CUDA's float64 ``tanh``/``exp``/``log`` may
differ from NumPy's by an ulp, so gradients are compared to float32 rounding (rtol 1e-6) and
metric values to 1e-9 relative. Host fallbacks (ranking, custom objective, NDCG/MAP,
ranking AUC) and the exact sums must match the NumPy result exactly.
"""

from __future__ import annotations

import numpy as np
import pytest

from dgboost.comm import LocalComm, run_in_threads
from dgboost.exact import exact_sum
from dgboost.metric import get_metric
from dgboost.objective import _REGISTRY, get_objective
from dgboost.params import parse_params

pytestmark = pytest.mark.gpu

N = 2000
SEED = 20240611
ROW_OBJECTIVES = sorted(name for name in _REGISTRY if not name.startswith("rank:"))
RANK_OBJECTIVES = sorted(name for name in _REGISTRY if name.startswith("rank:"))
PARAMS = {
    "binary:logistic": {"scale_pos_weight": 2.5},
    "reg:pseudohubererror": {"huber_slope": 1.7},
    "multi:softprob": {"num_class": 3},
    "multi:softmax": {"num_class": 3},
    "reg:quantileerror": {"quantile_alpha": [0.1, 0.5, 0.9]},
}
GROUP_PTR = np.array([0, 2, 7, 40, 300, 1100, N], np.int64)


@pytest.fixture(scope="module")
def cp():
    import cupy  # a declared test dependency: a broken install fails

    return cupy


def make_objective(name):
    return get_objective(parse_params(dict(objective=name, **PARAMS.get(name, {}))))


def labels_for(name, rng):
    if name.startswith("multi"):
        return rng.integers(0, 3, N).astype(np.float32)
    if name.startswith("rank:"):
        return rng.integers(0, 4, N).astype(np.float32)
    if name in ("binary:logistic", "binary:logitraw", "binary:hinge"):
        return (rng.random(N) < 0.4).astype(np.float32)
    if name == "reg:logistic":
        return rng.random(N).astype(np.float32)
    if name == "count:poisson":
        return rng.poisson(2.0, N).astype(np.float32)
    if name == "reg:gamma":
        return rng.gamma(2.0, 1.5, N).astype(np.float32) + 0.05
    if name == "reg:tweedie":
        return (rng.poisson(1.0, N) * rng.gamma(2.0, 1.0, N)).astype(np.float32)
    if name == "survival:cox":  # times in tenths (ties), 30% censored (negative)
        return ((np.round(rng.exponential(2.0, N), 1) + 0.1) * np.where(rng.random(N) < 0.7, 1, -1)).astype(np.float32)
    return (rng.normal(size=N) * 2).astype(np.float32)


def host_case(name, weighted):
    """(objective, margin (N, k), label (N,), weight (N,) or None) as float32 NumPy arrays."""
    rng = np.random.default_rng(SEED)
    obj = make_objective(name)
    margin = (rng.normal(size=(N, obj.n_outputs())) * 2).astype(np.float32)
    margin[::13] = 0.0  # whole rows of ties: the first maximum must win on both sides
    label = labels_for(name, rng)
    weight = None
    if weighted:
        weight = rng.random(N).astype(np.float32) * 2
        if name.startswith("rank:"):  # ranking weights are per query group
            weight = np.repeat(rng.random(len(GROUP_PTR) - 1), np.diff(GROUP_PTR)).astype(np.float32)
    return obj, margin, label, weight


def upload(cp, *arrays):
    return [None if a is None else cp.asarray(a) for a in arrays]


# ------------------------------------------------------------------------------ objectives
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("name", ROW_OBJECTIVES)
def test_device_gradients_equal_host_gradients_to_float32_rounding(cp, name, weighted):
    obj, margin, label, weight = host_case(name, weighted)
    g, h = obj.gradient(margin, label, weight, None, 3)
    dg, dh = obj.gradient(*upload(cp, margin, label, weight), None, 3)
    for host, dev in ((g, dg), (h, dh)):
        assert isinstance(dev, cp.ndarray)
        assert dev.dtype == np.float32 and dev.shape == host.shape == margin.shape
        np.testing.assert_allclose(cp.asnumpy(dev), host, rtol=1e-6, atol=0)


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("name", ["binary:logistic", "reg:logistic", "binary:logitraw"])
def test_the_fused_logistic_kernel_equals_the_generic_cupy_expressions_bit_for_bit(cp, name, weighted):
    from dgboost.objective import Objective

    obj, margin, label, weight = host_case(name, weighted)
    args = upload(cp, margin, label, weight)
    fused = obj.gradient(*args, None, 3)
    generic = Objective.gradient(obj, *args, None, 3)  # the xp-generic path, as CuPy expressions
    for a, b in zip(fused, generic):
        assert a.shape == b.shape and a.dtype == b.dtype == np.float32
        np.testing.assert_array_equal(cp.asnumpy(a).view(np.uint32), cp.asnumpy(b).view(np.uint32))


@pytest.mark.parametrize("name", ROW_OBJECTIVES)
def test_device_transforms_equal_host_transforms_and_stay_on_the_device(cp, name):
    obj, margin, _, _ = host_case(name, False)
    (dm,) = upload(cp, margin)
    for transform in (obj.transform, obj.eval_transform):
        host, dev = transform(margin), transform(dm)
        assert isinstance(dev, cp.ndarray)
        assert dev.dtype == host.dtype == np.float32 and dev.shape == host.shape
        np.testing.assert_allclose(cp.asnumpy(dev), host, rtol=1e-6, atol=0)


def test_quantile_residual_scale_is_one_exact_sum_over_device_ranks(cp):
    # two ranks of device rows: S_j spans both, so each rank's gradients are those of its
    # rows in the single-rank (host) result, bit for bit up to float32 rounding of tanh
    obj, margin, label, weight = host_case("reg:quantileerror", True)
    g, h = obj.gradient(margin, label, weight, None, 0)
    cut = N // 3

    def on_rank(comm, rank):
        rows = slice(0, cut) if rank == 0 else slice(cut, N)
        ranked = make_objective("reg:quantileerror")
        ranked.prepare(None, None, None, comm)
        dg, dh = ranked.gradient(*upload(cp, margin[rows], label[rows], weight[rows]), None, 0)
        return rows, cp.asnumpy(dg), cp.asnumpy(dh)

    for rows, dg, dh in run_in_threads(2, on_rank):
        np.testing.assert_allclose(dg, g[rows], rtol=1e-6, atol=0)
        np.testing.assert_allclose(dh, h[rows], rtol=1e-6, atol=0)


def test_cox_on_the_device_sorts_ties_stably_as_the_host(cp):
    # every time tied with others: a stable sort on both sides gives the same walk
    obj = make_objective("survival:cox")
    label = np.repeat(np.array([1.0, -1.0, 2.0, 3.0, -3.0], np.float32), 40)
    margin = np.random.default_rng(SEED).normal(size=(len(label), 1)).astype(np.float32)
    g, h = obj.gradient(margin, label, None, None, 0)
    dg, dh = obj.gradient(*upload(cp, margin, label, None), None, 0)
    np.testing.assert_allclose(cp.asnumpy(dg), g, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(cp.asnumpy(dh), h, rtol=1e-6, atol=1e-7)


def test_softmax_prediction_takes_the_first_of_tied_classes_on_the_device(cp):
    obj = make_objective("multi:softmax")
    margin = np.array([[0.0, 0.0, 0.0], [1.0, 2.0, 2.0], [3.0, 1.0, 3.0]], np.float32)
    np.testing.assert_array_equal(cp.asnumpy(obj.transform(cp.asarray(margin))), [0.0, 1.0, 0.0])


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("name", RANK_OBJECTIVES)
def test_ranking_gradients_fall_back_to_the_host_and_equal_it_exactly(cp, name, weighted):
    obj, margin, label, weight = host_case(name, weighted)
    g, h = obj.gradient(margin, label, weight, GROUP_PTR, 2)
    dg, dh = obj.gradient(*upload(cp, margin, label, weight), GROUP_PTR, 2)
    assert isinstance(dg, cp.ndarray) and isinstance(dh, cp.ndarray)
    np.testing.assert_array_equal(cp.asnumpy(dg), g)
    np.testing.assert_array_equal(cp.asnumpy(dh), h)


def test_a_custom_objective_sees_numpy_margins_and_its_result_goes_to_the_device(cp):
    seen = []

    def squared(preds, dtrain):
        seen.append(type(preds))
        return preds - 1.0, np.ones_like(preds)

    obj = get_objective(parse_params(dict(objective=squared, num_class=3)))
    margin = np.random.default_rng(SEED).normal(size=(50, 3)).astype(np.float32)
    dg, dh = obj.gradient(cp.asarray(margin), cp.zeros(50, np.float32), None, None, 0)
    assert seen == [np.ndarray]
    assert isinstance(dg, cp.ndarray) and isinstance(dh, cp.ndarray)
    np.testing.assert_array_equal(cp.asnumpy(dg), margin - 1.0)
    assert isinstance(obj.transform(cp.asarray(margin)), cp.ndarray)


# ------------------------------------------------------------------------------ exact sums
def test_exact_sums_of_device_columns_are_bit_identical_to_host_sums(cp):
    rng = np.random.default_rng(SEED)
    columns = rng.normal(size=(N, 3)) * np.array([1e-3, 1.0, 1e6])
    got = exact_sum(cp.asarray(columns), LocalComm())
    assert isinstance(got, np.ndarray)
    np.testing.assert_array_equal(got, exact_sum(columns, LocalComm()))
    np.testing.assert_array_equal(exact_sum(cp.zeros((0, 2)), LocalComm()), np.zeros(2))


# --------------------------------------------------------------------------------- metrics
# metric -> the objective whose eval_transform it sees
ROW_METRICS = {
    "rmse": "reg:squarederror",
    "mae": "reg:absoluteerror",
    "mphe": "reg:pseudohubererror",
    "logloss": "binary:logistic",
    "error": "binary:logistic",
    "error@0.7": "reg:logistic",
    "poisson-nloglik": "count:poisson",
    "mlogloss": "multi:softprob",
    "merror": "multi:softmax",
    "gamma-deviance": "reg:gamma",
    "gamma-nloglik": "reg:gamma",
    "tweedie-nloglik@1.5": "reg:tweedie",
    "quantile": "reg:quantileerror",
    "cox-nloglik": "survival:cox",
}
AUC_CASES = ["binary:logistic", "binary:logitraw", "multi:softprob"]


def metric_case(metric_name, objective_name, weighted):
    obj, margin, label, weight = host_case(objective_name, weighted)
    return get_metric(metric_name, obj), obj, margin, label, weight


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("metric_name", sorted(ROW_METRICS))
def test_row_metrics_on_the_device_equal_the_host_value(cp, metric_name, weighted):
    metric, obj, margin, label, weight = metric_case(metric_name, ROW_METRICS[metric_name], weighted)
    host = metric.evaluate(margin, label, weight, None, obj, LocalComm())
    dev = metric.evaluate(*upload(cp, margin, label, weight), None, obj, LocalComm())
    assert isinstance(dev, float)
    assert dev == pytest.approx(host, rel=1e-9, abs=0)


@pytest.mark.parametrize("metric_name", ["rmse", "mlogloss"])
def test_row_metrics_on_device_partitions_of_two_ranks_equal_the_single_host_value(cp, metric_name):
    metric, obj, margin, label, weight = metric_case(metric_name, ROW_METRICS[metric_name], True)
    host = metric.evaluate(margin, label, weight, None, obj, LocalComm())
    cut = N // 3  # uneven partitions

    def on_rank(comm, rank):
        rows = slice(0, cut) if rank == 0 else slice(cut, N)
        return metric.evaluate(*upload(cp, margin[rows], label[rows], weight[rows]), None, obj, comm)

    for value in run_in_threads(2, on_rank):
        assert value == pytest.approx(host, rel=1e-9, abs=0)


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("objective_name", AUC_CASES)
def test_auc_sorted_on_the_device_equals_the_host_auc_with_ties(cp, objective_name, weighted):
    metric, obj, margin, label, weight = metric_case("auc", objective_name, weighted)
    margin = np.round(margin, 1)  # many tied predictions
    host = metric.evaluate(margin, label, weight, None, obj, LocalComm())
    dev = metric.evaluate(*upload(cp, margin, label, weight), None, obj, LocalComm())
    assert 0.0 < host < 1.0
    assert dev == pytest.approx(host, rel=1e-9, abs=0)


def test_auc_of_device_arrays_on_two_ranks_gathers_through_the_host(cp):
    metric, obj, margin, label, weight = metric_case("auc", "binary:logistic", True)
    host = metric.evaluate(margin, label, weight, None, obj, LocalComm())

    def on_rank(comm, rank):
        rows = slice(rank, None, 2)
        return metric.evaluate(*upload(cp, margin[rows], label[rows], weight[rows]), None, obj, comm)

    for value in run_in_threads(2, on_rank):  # device eval_transform: ulp-level differences allowed
        assert value == pytest.approx(host, rel=1e-9, abs=0)


@pytest.mark.parametrize("metric_name", ["ndcg", "ndcg@5", "map@3", "auc"])
def test_ranking_metrics_fall_back_to_the_host_and_equal_it_exactly(cp, metric_name):
    weighted_objective, margin, label, weight = host_case("rank:ndcg", True)
    if metric_name.startswith("map"):
        label = (label > 1).astype(np.float32)  # map needs binary relevance
    metric = get_metric(metric_name, weighted_objective)
    host = metric.evaluate(margin, label, weight, GROUP_PTR, weighted_objective, LocalComm())
    dev = metric.evaluate(*upload(cp, margin, label, weight), GROUP_PTR, weighted_objective, LocalComm())
    assert dev == host
