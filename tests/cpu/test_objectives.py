"""Objectives: gradients against finite differences and XGBoost 3.4, exact distributed
intercepts and leaf medians, LambdaMART against a plain NumPy reference, label checks."""

from __future__ import annotations

import json

import numpy as np
import pytest
import xgboost as xgb  # declared test dependency: fail, never skip

from dgboost.comm import LocalComm, run_in_threads
from dgboost.errors import DGBoostError, DGBoostValueError, ParameterError
from dgboost.objective import (
    CustomObjective,
    exact_sum,
    get_objective,
    lambdarank_gradient,
    margin_from_score,
    score_from_margin,
    weighted_quantile,
)
from dgboost.params import parse_params

RNG_SEED = 20240611


def objective(name, **kw):
    return get_objective(parse_params(dict(objective=name, **kw)))


# ------------------------------------------------------------ textbook losses (the oracle)
def _sig(m):
    return 1.0 / (1.0 + np.exp(-m))


LOSSES = {  # per-row loss L(margin (n, k), label) in float64, written independently of the module
    "reg:squarederror": lambda m, y, p: 0.5 * (m[:, 0] - y) ** 2,
    "reg:pseudohubererror": lambda m, y, p: (
        p["huber_slope"] ** 2 * (np.sqrt(1 + ((m[:, 0] - y) / p["huber_slope"]) ** 2) - 1)
    ),
    "reg:absoluteerror": lambda m, y, p: np.abs(m[:, 0] - y),
    "binary:logistic": lambda m, y, p: (
        -np.where(y == 1, p["scale_pos_weight"], 1.0)
        * (y * np.log(_sig(m[:, 0])) + (1 - y) * np.log(1 - _sig(m[:, 0])))
    ),
    "reg:logistic": lambda m, y, p: -(y * np.log(_sig(m[:, 0])) + (1 - y) * np.log(1 - _sig(m[:, 0]))),
    "binary:logitraw": lambda m, y, p: -(y * np.log(_sig(m[:, 0])) + (1 - y) * np.log(1 - _sig(m[:, 0]))),
    "count:poisson": lambda m, y, p: np.exp(m[:, 0]) - y * m[:, 0],
    "reg:gamma": lambda m, y, p: y * np.exp(-m[:, 0]) + m[:, 0],
    "reg:tweedie": lambda m, y, p: (
        -y * np.exp((1 - p["tweedie_variance_power"]) * m[:, 0]) / (1 - p["tweedie_variance_power"])
        + np.exp((2 - p["tweedie_variance_power"]) * m[:, 0]) / (2 - p["tweedie_variance_power"])
    ),
    "multi:softprob": lambda m, y, p: -(m[np.arange(len(y)), y.astype(int)] - np.log(np.exp(m).sum(1))),
    "multi:softmax": lambda m, y, p: -(m[np.arange(len(y)), y.astype(int)] - np.log(np.exp(m).sum(1))),
}


def _cox_partial_nloglik(m, y):
    """Cox's negative partial log-likelihood (float64) for distinct times: each event i adds
    log(sum of exp(m_j) over t_j >= t_i) - m_i."""
    t = np.abs(y)
    risk = np.array([np.exp(m[t >= ti]).sum() for ti in t])
    return float(np.where(y > 0, np.log(risk) - m, 0.0).sum())


PARAMS = {
    "reg:pseudohubererror": {"huber_slope": 1.7},
    "binary:logistic": {"scale_pos_weight": 2.5},
    "count:poisson": {"max_delta_step": 0.0},
    "reg:tweedie": {"tweedie_variance_power": 1.3},
    "multi:softprob": {"num_class": 3},
    "multi:softmax": {"num_class": 3},
    "reg:quantileerror": {"quantile_alpha": [0.1, 0.5, 0.9]},
}


def labels_for(name, n, rng):
    if name.startswith("multi"):
        return rng.integers(0, 3, n).astype(np.float32)
    if name in ("binary:logistic", "binary:logitraw", "binary:hinge"):
        return (rng.random(n) < 0.4).astype(np.float32)
    if name == "reg:logistic":
        return rng.random(n).astype(np.float32)
    if name == "count:poisson":
        return rng.poisson(2.0, n).astype(np.float32)
    if name == "reg:gamma":
        return rng.gamma(2.0, 1.5, n).astype(np.float32) + 0.05
    if name == "reg:tweedie":  # compound Poisson-gamma: exact zeros and positive amounts
        return (rng.poisson(1.0, n) * rng.gamma(2.0, 1.0, n)).astype(np.float32)
    if name == "survival:cox":  # distinct times, 30% censored (negative)
        return survival_labels(n, rng, ties=False)
    return (rng.normal(size=n) * 2).astype(np.float32)


def survival_labels(n, rng, ties=True):
    """Cox labels: |y| the time (rounded to tenths when ``ties``: many tied times), positive
    for an observed event, negative for a censored one (about 30%)."""
    t = rng.exponential(2.0, n) + 0.1
    if ties:
        t = np.round(t, 1)
    return (t * np.where(rng.random(n) < 0.7, 1.0, -1.0)).astype(np.float32)


def _fd_case(name):
    rng = np.random.default_rng(RNG_SEED)
    obj = objective(name, **PARAMS.get(name, {}))
    n, k = 40, obj.n_outputs()
    y = labels_for(name, n, rng)
    m = rng.normal(size=(n, k)).astype(np.float32)
    if name == "reg:absoluteerror":  # keep away from the kink at m == y
        m[np.abs(m[:, 0] - y) < 0.05, 0] += 0.2
    return obj, m, y, {**{"huber_slope": 1.0, "scale_pos_weight": 1.0}, **PARAMS.get(name, {})}


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_gradients_match_finite_differences_of_the_loss(name):
    obj, m, y, p = _fd_case(name)
    g, _ = obj.gradient(m, y, None, None, 0)
    assert g.dtype == np.float32 and g.shape == m.shape
    eps, m64 = 1e-5, m.astype(np.float64)
    for c in range(m.shape[1]):
        up, down = m64.copy(), m64.copy()
        up[:, c] += eps
        down[:, c] -= eps
        fd = (LOSSES[name](up, y, p) - LOSSES[name](down, y, p)) / (2 * eps)
        np.testing.assert_allclose(g[:, c], fd, rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("name", sorted(set(LOSSES) - {"reg:absoluteerror"}))
def test_hessians_match_finite_differences_of_the_gradient(name):
    obj, m, y, _ = _fd_case(name)
    _, h = obj.gradient(m, y, None, None, 0)
    eps = 1e-3
    for c in range(m.shape[1]):
        up, down = m.copy(), m.copy()
        up[:, c] += eps
        down[:, c] -= eps
        fd = (
            obj.gradient(up, y, None, None, 0)[0][:, c].astype(np.float64)
            - obj.gradient(down, y, None, None, 0)[0][:, c]
        ) / (2 * eps)
        # XGBoost's softmax hessian is 2 p (1 - p): twice the diagonal second derivative
        factor = 2.0 if name.startswith("multi") else 1.0
        np.testing.assert_allclose(h[:, c], factor * fd, rtol=2e-3, atol=2e-4)


def test_cox_gradient_and_hessian_are_derivatives_of_the_partial_likelihood_one_row_at_a_time():
    # the loss couples the rows (risk sets), so each margin is moved alone; with distinct
    # times XGBoost's gradient is exactly the derivative and its hessian the diagonal
    rng = np.random.default_rng(RNG_SEED)
    n = 30
    y = labels_for("survival:cox", n, rng)
    m = rng.normal(size=(n, 1)).astype(np.float32)
    obj = objective("survival:cox")
    g, h = obj.gradient(m, y, None, None, 0)
    eps = 1e-4
    for i in range(n):
        up, down = m.astype(np.float64), m.astype(np.float64)
        up[i] += eps
        down[i] -= eps
        fd = (_cox_partial_nloglik(up[:, 0], y) - _cox_partial_nloglik(down[:, 0], y)) / (2 * eps)
        assert g[i, 0] == pytest.approx(fd, rel=1e-4, abs=1e-6)
        up[i], down[i] = m[i] + 1e-3, m[i] - 1e-3  # float32 gradients: a wider step
        fd_h = (
            obj.gradient(up.astype(np.float32), y, None, None, 0)[0][i, 0].astype(np.float64)
            - obj.gradient(down.astype(np.float32), y, None, None, 0)[0][i, 0]
        ) / 2e-3
        assert h[i, 0] == pytest.approx(fd_h, rel=2e-3, abs=1e-4)


def test_poisson_hessian_is_inflated_by_max_delta_step():
    y = np.array([0, 1, 3], np.float32)
    m = np.array([[0.1], [-0.5], [1.0]], np.float32)
    h0 = objective("count:poisson", max_delta_step=0.0).gradient(m, y, None, None, 0)[1]
    h7 = objective("count:poisson").gradient(m, y, None, None, 0)[1]  # XGBoost default 0.7
    np.testing.assert_allclose(h7, h0 * np.exp(0.7), rtol=1e-6)


@pytest.mark.parametrize("name", sorted(LOSSES) + ["rank:ndcg", "rank:pairwise", "survival:cox"])
def test_weighted_gradients_are_weight_times_unweighted(name):
    rng = np.random.default_rng(1)
    obj = objective(name, **PARAMS.get(name, {}))
    n = 30
    if name.startswith("rank"):
        y = rng.integers(0, 3, n).astype(np.float32)
        gp = np.array([0, 10, 22, 30])
        w = np.repeat(rng.random(3) + 0.5, np.diff(gp)).astype(np.float32)
        obj.weight_norm = 1.0  # compare raw weighting, not XGBoost's normalisation
    else:
        y, gp = labels_for(name, n, rng), None
        w = (rng.random(n) * 2).astype(np.float32)
    m = rng.normal(size=(n, obj.n_outputs())).astype(np.float32)
    g1, h1 = obj.gradient(m, y, None, gp, 0)
    gw, hw = obj.gradient(m, y, w, gp, 0)
    np.testing.assert_allclose(gw, g1 * w[:, None], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(hw, h1 * w[:, None], rtol=1e-6, atol=1e-7)


# ------------------------------------------------------------------ XGBoost as the oracle
def xgb_grad_hess(params, label, base_margin, weight=None, group=None):
    """XGBoost's own per-row gradient pairs: one exact-greedy round, lambda=0, one row per
    leaf (feature = row index). A leaf's sum_hessian is h and its weight is -g/h."""
    n = len(label)
    d = xgb.DMatrix(np.arange(n, dtype=np.float64)[:, None], label, weight=weight, nthread=1, base_margin=base_margin)
    if group is not None:
        d.set_group(group)
    p = dict(params, eta=1.0, max_depth=12, min_child_weight=0, gamma=0, tree_method="exact", nthread=1, base_score=0.5)
    p["lambda"] = 0.0
    b = xgb.train(p, d, 1)
    leaves = b.predict(d, pred_leaf=True).reshape(n, -1).astype(np.int64)
    trees = json.loads(b.save_raw("json"))["learner"]["gradient_booster"]["model"]["trees"]
    g, h, single = (np.zeros(leaves.shape), np.zeros(leaves.shape), np.zeros(leaves.shape, bool))
    for c in range(leaves.shape[1]):
        hs, bw = np.array(trees[c]["sum_hessian"]), np.array(trees[c]["base_weights"])
        u, cnt = np.unique(leaves[:, c], return_counts=True)
        single[:, c] = np.isin(leaves[:, c], u[cnt == 1])
        h[:, c] = hs[leaves[:, c]]
        g[:, c] = -bw[leaves[:, c]] * h[:, c]
    return g, h, single


XGB_CASES = [
    ("reg:squarederror", {}),
    ("reg:pseudohubererror", {"huber_slope": 1.5}),
    ("binary:logistic", {"scale_pos_weight": 2.5}),
    ("reg:logistic", {}),
    ("binary:logitraw", {}),
    ("count:poisson", {}),
    ("reg:gamma", {}),
    ("reg:tweedie", {"tweedie_variance_power": 1.3}),
    ("multi:softprob", {"num_class": 3}),
    ("multi:softmax", {"num_class": 3}),
    ("reg:quantileerror", {"quantile_alpha": [0.1, 0.5, 0.9]}),
    ("reg:quantileerror", {"quantile_alpha": 0.3}),
    ("survival:cox", {}),
    ("rank:ndcg", {}),
    ("rank:pairwise", {}),
    ("rank:ndcg", {"lambdarank_num_pair_per_sample": 5}),
    ("rank:ndcg", {"ndcg_exp_gain": False}),
    ("rank:pairwise", {"lambdarank_num_pair_per_sample": 3}),
]


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("name,extra", XGB_CASES)
def test_gradients_match_xgboost(name, extra, weighted):
    rng = np.random.default_rng(7)
    n = 60
    obj = objective(name, **extra)
    k = obj.n_outputs()
    group, gp = None, None
    if name.startswith("rank"):
        y = rng.integers(0, 4, n).astype(np.float32)
        group = [20, 25, 15]
        gp = np.r_[0, np.cumsum(group)]
        w = (rng.random(3) + 0.5).astype(np.float32) if weighted else None  # per group
    else:
        y = survival_labels(n, rng) if name == "survival:cox" else labels_for(name, n, rng)  # Cox: ties
        w = (rng.random(n) + 0.5).astype(np.float32) if weighted else None
    margin = rng.normal(size=(n, k)).astype(np.float32)
    g, h, single = xgb_grad_hess(dict(objective=name, **extra), y, margin.ravel(), w, group)
    ours_g, ours_h = obj.gradient(margin, y, w, gp, 0)
    if name == "count:poisson":  # XGBoost also clips the leaf step at 0.7 there
        single &= np.abs(g / h) < 0.69
    assert single.sum() >= n // 4
    np.testing.assert_allclose(ours_g[single], g[single], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(ours_h[single], h[single], rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize(
    "name",
    [
        "reg:squarederror",
        "reg:pseudohubererror",
        "binary:logistic",
        "reg:logistic",
        "binary:logitraw",
        "count:poisson",
        "reg:gamma",
        "reg:tweedie",
        "binary:hinge",
        "survival:cox",
    ],
)
def test_base_score_matches_xgboost_intercept(name, weighted):
    rng = np.random.default_rng(3)
    n = 101
    y = survival_labels(n, rng) if name == "survival:cox" else labels_for(name, n, rng)
    w = (rng.random(n) + 0.5).astype(np.float32) if weighted else None
    b = xgb.train(
        {"objective": name, "nthread": 1, "max_depth": 1},
        xgb.DMatrix(rng.normal(size=(n, 2)), y, weight=w, nthread=1),
        1,
    )
    cfg = json.loads(b.save_config())["learner"]["learner_model_param"]["base_score"]
    expected = float(json.loads(cfg)[0]) if cfg.startswith("[") else float(cfg)
    assert objective(name).base_score(y, w, LocalComm()) == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("scale_pos_weight", [3.0, 0.2])
@pytest.mark.parametrize("name", ["binary:logistic", "reg:logistic", "binary:logitraw"])
def test_base_score_with_scale_pos_weight_matches_xgboost_intercept(name, scale_pos_weight, weighted):
    # XGBoost 3.4 takes the weighted label mean only when scale_pos_weight is 1; otherwise
    # one Newton step from margin 0 on the re-weighted gradients
    rng = np.random.default_rng(11)
    n = 301
    y = (rng.random(n) < 0.3).astype(np.float64)
    w = (rng.random(n) + 0.5).astype(np.float32) if weighted else None
    params = {"objective": name, "nthread": 1, "max_depth": 1, "scale_pos_weight": scale_pos_weight}
    b = xgb.train(params, xgb.DMatrix(rng.normal(size=(n, 2)), y, weight=w, nthread=1), 1)
    cfg = json.loads(b.save_config())["learner"]["learner_model_param"]["base_score"]
    expected = float(json.loads(cfg)[0]) if cfg.startswith("[") else float(cfg)
    ours = objective(name, scale_pos_weight=scale_pos_weight).base_score(y, w, LocalComm())
    assert ours == pytest.approx(expected, rel=1e-6)
    assert ours != pytest.approx(objective(name).base_score(y, w, LocalComm()), rel=1e-3)


@pytest.mark.parametrize(
    "name,metric",
    [
        ("reg:squarederror", "rmse"),
        ("reg:pseudohubererror", "mphe"),
        ("reg:absoluteerror", "mae"),
        ("binary:logistic", "logloss"),
        ("reg:logistic", "rmse"),
        ("binary:logitraw", "logloss"),
        ("count:poisson", "poisson-nloglik"),
        ("reg:gamma", "gamma-deviance"),
        ("reg:tweedie", "tweedie-nloglik@1.3"),
        ("binary:hinge", "error"),
        ("reg:quantileerror", "quantile"),
        ("survival:cox", "cox-nloglik"),
        ("multi:softprob", "mlogloss"),
        ("rank:ndcg", "ndcg@32"),
        ("rank:pairwise", "ndcg@32"),
    ],
)
def test_default_metric_is_xgboosts(name, metric):
    assert objective(name, **PARAMS.get(name, {})).default_metric == metric
    assert objective("rank:ndcg", lambdarank_pair_method="mean").default_metric == "ndcg"


# -------------------------------------------------------------- intercepts and medians
def test_absoluteerror_base_score_is_the_median_or_lower_weighted_median():
    rng = np.random.default_rng(5)
    obj = objective("reg:absoluteerror")
    for n in (1, 2, 7, 10):
        y = rng.normal(size=n).astype(np.float32)
        assert obj.base_score(y, None, LocalComm()) == pytest.approx(float(np.median(y)), rel=1e-6)
    y = np.array([5, 1, 3, 2, 4], np.float32)
    w = np.array([1, 1, 1, 1, 4], np.float32)  # cumulative by value: 1 2 3 4 8, half of 8 -> 4
    assert obj.base_score(y, w, LocalComm()) == 4.0
    assert obj.base_score(y, np.ones(5, np.float32) * 0.5, LocalComm()) == 3.0


def _reference_quantile(v, w):
    """XGBoost's common::Quantile (w None) / WeightedQuantile at alpha 0.5, by sorting."""
    if len(v) == 0 or (w is not None and w.sum() == 0):
        return np.nan
    if w is None:
        return float(np.float32(np.median(v.astype(np.float64))))
    o = np.argsort(v, kind="stable")
    cdf = np.cumsum(w[o].astype(np.float64))
    return float(v[o][min(np.searchsorted(cdf, 0.5 * cdf[-1], "left"), len(v) - 1)])


@pytest.mark.parametrize("weighted", [False, True])
def test_leaf_values_are_xgboost_quantiles_of_each_leaf(weighted):
    rng = np.random.default_rng(11)
    n, n_leaves = 500, 7
    residual = np.round(rng.normal(size=n) * 4).astype(np.float32) / 2  # many ties
    residual[:5] = [-0.0, 0.0, -3.5, 1e-30, -1e30]
    leaf = rng.integers(-1, n_leaves - 1, n)  # leaf n_leaves-1 stays empty, -1 is ignored
    w = (rng.integers(0, 4, n) / 4).astype(np.float32) if weighted else None
    got = objective("reg:absoluteerror").leaf_values(residual, w, leaf, n_leaves, LocalComm())
    want = [_reference_quantile(residual[leaf == j], None if w is None else w[leaf == j]) for j in range(n_leaves)]
    np.testing.assert_array_equal(got, want)
    assert np.isnan(got[-1])


def _split_rows(n, world, rng):
    perm = rng.permutation(n)
    cuts = np.sort(rng.integers(0, n + 1, world - 1))
    return np.split(perm, cuts)


@pytest.mark.parametrize("world", [1, 2, 3])
def test_base_score_and_leaf_values_identical_for_any_partition(world):
    rng = np.random.default_rng(100 + world)
    n = 300
    y = (rng.normal(size=n) * 3).astype(np.float32)
    yb, yp = (rng.random(n) < 0.3).astype(np.float32), rng.poisson(3, n).astype(np.float32)
    w = (rng.random(n) * 2).astype(np.float32)
    leaf = rng.integers(-1, 5, n)
    names = [
        ("reg:squarederror", y),
        ("reg:pseudohubererror", y),
        ("reg:absoluteerror", y),
        ("binary:logistic", yb),
        ("count:poisson", yp),
    ]

    def compute(comm, rows):
        out = [objective(nm).base_score(lab[rows], ww, comm) for nm, lab in names for ww in (None, w[rows])]
        ae = objective("reg:absoluteerror")
        out.append(ae.leaf_values(y[rows], w[rows], leaf[rows], 6, comm))
        out.append(ae.leaf_values(y[rows], None, leaf[rows], 6, comm))
        out.append(exact_sum(np.stack([y[rows], w[rows]], 1), comm))
        return out

    reference = compute(LocalComm(), np.arange(n))
    parts = _split_rows(n, world, rng)
    for result in run_in_threads(world, lambda comm, r: compute(comm, parts[r])):
        for a, b in zip(result, reference):
            np.testing.assert_array_equal(a, b)  # bit-identical, not merely close


def test_exact_sum_is_accurate_and_order_free():
    rng = np.random.default_rng(0)
    v = rng.normal(size=(10_000, 2)) * np.array([1.0, 1e-8])
    s = exact_sum(v, LocalComm())
    np.testing.assert_allclose(s, np.sum(v.astype(np.longdouble), axis=0).astype(np.float64), rtol=1e-12)
    np.testing.assert_array_equal(exact_sum(v[::-1], LocalComm()), s)
    np.testing.assert_array_equal(exact_sum(np.zeros((0, 2)), LocalComm()), [0.0, 0.0])


@pytest.mark.parametrize("scale", [1.0, 1e-30, 3e30], ids=["unit", "tiny", "huge"])
def test_float32_columns_sum_bit_for_bit_as_their_float64_copies(scale):
    rng = np.random.default_rng(1)
    v = (rng.normal(size=(50_001, 3)) * scale).astype(np.float32)
    v[::7, 1] = 0.0
    np.testing.assert_array_equal(exact_sum(v, LocalComm()), exact_sum(v.astype(np.float64), LocalComm()))
    np.testing.assert_array_equal(exact_sum(v[:, 0], LocalComm()), exact_sum(v[:, :1].astype(np.float64), LocalComm()))


@pytest.mark.parametrize("shift", [0, 40, -30, -900, 1023, 1024, 1060], ids=str)
def test_host_fixed_point_terms_equal_numpys_ldexp_and_rint_for_every_shift(shift):
    from dgboost.exact import _host_fixed_point_sum

    rng = np.random.default_rng(2)
    # magnitudes whose scaled terms fit int64 (and some that round to 0 or become subnormal)
    top = float(np.ldexp(1.0, 50 - shift))
    v = rng.normal(size=(20_001, 1)) * top
    v[::5] *= 1e-12
    want = np.rint(np.ldexp(v[:, 0], shift)).astype(np.int64).sum()
    np.testing.assert_array_equal(_host_fixed_point_sum(v, np.array([shift], np.int64)), [want])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_small_host_blocks_sum_in_numpy_bit_for_bit_as_the_kernels_do(dtype, monkeypatch):
    import dgboost.exact as exact

    rng = np.random.default_rng(3)
    v = (rng.normal(size=(20_001, 3)) * np.array([1.0, 1e-30, 3e30])).astype(dtype)
    v[::7, 1] = 0.0
    monkeypatch.setattr(exact, "_KERNEL_MIN_VALUES", v.size)  # this block: NumPy
    numpy_sums = exact_sum(v, LocalComm())
    monkeypatch.setattr(exact, "_KERNEL_MIN_VALUES", v.size - 1)  # this block: the kernels
    np.testing.assert_array_equal(exact_sum(v, LocalComm()), numpy_sums)
    v[5, 2] = np.nan
    for limit in (v.size, v.size - 1):
        monkeypatch.setattr(exact, "_KERNEL_MIN_VALUES", limit)
        with pytest.raises(DGBoostValueError, match="non-finite"):
            exact_sum(v, LocalComm())


def test_unweighted_intercepts_equal_those_with_unit_weights_on_any_partitioning():
    rng = np.random.default_rng(2)
    y = (rng.random(30_001) < 0.3).astype(np.float32)
    for name in ["binary:logistic", "reg:squarederror"]:
        objective = get_objective(parse_params({"objective": name}))
        unweighted = objective.base_margins(y, None, LocalComm())
        np.testing.assert_array_equal(unweighted, objective.base_margins(y, np.ones_like(y), LocalComm()))
        parts = _split_rows(len(y), 3, rng)
        for got in run_in_threads(3, lambda comm, r: objective.base_margins(y[parts[r]], None, comm)):
            np.testing.assert_array_equal(got, unweighted)


def test_weighted_quantile_ignores_zero_weight_rows_and_reports_empty_segments():
    v = np.array([100, 1, 2, 3], np.float32)
    got = weighted_quantile(v, np.array([0, 1, 1, 1], np.float32), np.array([0, 0, 0, 0]), 2, LocalComm())
    assert got[0] == 2.0 and np.isnan(got[1])


# ------------------------------------------------------------------------ LambdaMART
M64 = (1 << 64) - 1


def _mix(x):
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def reference_lambdarank(
    pred,
    label,
    gptr,
    gweight,
    *,
    topk,
    num_pair,
    ndcg,
    exp_gain=True,
    score_normalization=True,
    normalization=True,
    seed=0,
    iteration=0,
    group_offset=0,
):
    """Plain NumPy LambdaMART (XGBoost's LambdaGrad + MakePairs), vectorised over pairs."""
    n = len(pred)
    G, H = np.zeros(n), np.zeros(n)
    for g in range(len(gptr) - 1):
        b, e = gptr[g], gptr[g + 1]
        cnt = e - b
        if cnt < 2:
            continue
        p, y = pred[b:e].astype(np.float32), label[b:e].astype(np.float64)
        rank = np.argsort(-p, kind="stable")
        yr, pr = y[rank], p[rank]
        if topk:
            ii, jj = np.triu_indices(cnt, 1)
            ii, jj = ii[ii < num_pair], jj[ii < num_pair]
        else:
            by_label = np.argsort(-yr, kind="stable")
            key = _mix(_mix(_mix(seed) ^ iteration) ^ (group_offset + g))
            pairs, i = [], 0
            while i < cnt:
                j = i + 1
                while j < cnt and yr[by_label[j]] == yr[by_label[i]]:
                    j += 1
                n_out = int(i + cnt - j)
                for s in range(num_pair if n_out else 0):
                    for d in range(i, j):
                        r = _mix(key ^ ((d * num_pair + s) & M64)) % n_out
                        pairs.append((by_label[d], by_label[r + (j - i if r >= i else 0)]))
                i = j
            ii, jj = np.array(pairs, dtype=np.int64).reshape(-1, 2).T
        hi, lo = np.where(yr[ii] >= yr[jj], ii, jj), np.where(yr[ii] >= yr[jj], jj, ii)
        keep = yr[hi] != yr[lo]
        hi, lo = hi[keep], lo[keep]
        disc = 1.0 / np.log2(np.arange(cnt) + 2.0)
        if ndcg:
            gain = 2.0**yr - 1.0 if exp_gain else yr
            top = min(cnt, num_pair) if topk else cnt
            idcg = np.sum(np.sort(gain)[::-1][:top] * disc[:top])
            delta = np.abs((gain[hi] - gain[lo]) * (disc[hi] - disc[lo])) * (1 / idcg if idcg else 0.0)
        else:
            delta = np.ones(len(hi))
        diff = (pr[hi] - pr[lo]).astype(np.float64)
        if score_normalization and pr[0] != pr[-1]:
            delta = delta / (np.abs(diff) + 0.01)
        with np.errstate(over="ignore"):
            sig = 1.0 / (1.0 + np.exp(-diff))
        lam = ((sig - 1.0) * delta).astype(np.float32).astype(np.float64)
        hes = (np.maximum(sig * (1 - sig), 1e-16) * delta * 2).astype(np.float32).astype(np.float64)
        gg, hh = np.zeros(cnt), np.zeros(cnt)
        np.add.at(gg, hi, lam)
        np.add.at(gg, lo, -lam)
        np.add.at(hh, hi, hes)
        np.add.at(hh, lo, hes)
        total = -2.0 * lam.sum()
        norm = 1.0
        if normalization:
            norm = 1.0 / num_pair if not topk else (np.log2(1 + total) / total if total > 0 else 1.0)
        G[b + rank], H[b + rank] = gg * gweight[g] * norm, hh * gweight[g] * norm
    return G.astype(np.float32), H.astype(np.float32)


def _ranking_data(rng, sizes=(0, 1, 2, 7, 40, 13, 3)):
    gptr = np.r_[0, np.cumsum(sizes)].astype(np.int64)
    n = int(gptr[-1])
    label = rng.integers(0, 4, n).astype(np.float32)
    pred = np.round(rng.normal(size=n) * 2, 1).astype(np.float32)  # ties in predictions
    pred[gptr[4] : gptr[5]][:5] = 0.0
    return pred, label, gptr, rng.random(len(sizes)) + 0.5


@pytest.mark.parametrize("topk,num_pair", [(True, 32), (True, 3), (False, 1), (False, 4)])
@pytest.mark.parametrize("ndcg,exp_gain", [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize("norms", [(True, True), (False, False), (True, False)])
def test_compiled_lambdarank_equals_numpy_reference(topk, num_pair, ndcg, exp_gain, norms):
    pred, label, gptr, gw = _ranking_data(np.random.default_rng(num_pair))
    kw = dict(
        topk=topk,
        num_pair=num_pair,
        ndcg=ndcg,
        exp_gain=exp_gain,
        score_normalization=norms[0],
        normalization=norms[1],
        seed=5,
        iteration=3,
        group_offset=11,
    )
    g, h = lambdarank_gradient(pred, label, gptr, gw, **kw)
    rg, rh = reference_lambdarank(pred, label, gptr, gw, **kw)
    np.testing.assert_allclose(g, rg, rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(h, rh, rtol=2e-6, atol=1e-7)
    assert np.all(h >= 0)


@pytest.mark.parametrize(
    "name,method", [("rank:ndcg", "topk"), ("rank:pairwise", "topk"), ("rank:ndcg", "mean"), ("rank:pairwise", "mean")]
)
def test_lambda_gradients_sum_to_zero_within_each_group(name, method):
    pred, label, gptr, _ = _ranking_data(np.random.default_rng(2))
    g, _ = objective(name, lambdarank_pair_method=method).gradient(pred[:, None], label, None, gptr, 4)
    assert np.abs(g).sum() > 0
    for b, e in zip(gptr[:-1], gptr[1:]):
        assert abs(float(g[b:e].astype(np.float64).sum())) <= 1e-6 * max(1.0, np.abs(g[b:e]).sum())


def test_mean_pair_sampling_is_a_hash_of_global_group_index_not_of_the_partition():
    pred, label, gptr, gw = _ranking_data(np.random.default_rng(9))
    kw = dict(topk=False, num_pair=2, ndcg=True, seed=1, iteration=7)
    whole = lambdarank_gradient(pred, label, gptr, gw, **kw)
    np.testing.assert_array_equal(whole[0], lambdarank_gradient(pred, label, gptr, gw, **kw)[0])
    cut = 4  # groups 0..3 on one rank, 4.. on another
    r = gptr[cut]
    first = lambdarank_gradient(pred[:r], label[:r], gptr[: cut + 1], gw[:cut], **kw)
    second = lambdarank_gradient(pred[r:], label[r:], gptr[cut:] - r, gw[cut:], group_offset=cut, **kw)
    np.testing.assert_array_equal(np.concatenate([first[0], second[0]]), whole[0])
    other = lambdarank_gradient(pred, label, gptr, gw, **dict(kw, iteration=8))
    assert not np.array_equal(other[0], whole[0])


def test_groups_with_equal_labels_get_zero_gradient():
    g, h = objective("rank:ndcg").gradient(
        np.arange(5, dtype=np.float32)[:, None], np.full(5, 2, np.float32), None, np.array([0, 5]), 0
    )
    assert not g.any() and not h.any()


def test_rank_weight_normalisation_is_agreed_over_ranks():
    obj = objective("rank:ndcg")
    gptr = np.array([0, 3, 5, 9])
    w = np.repeat(np.array([1.0, 2.0, 3.0], np.float32), np.diff(gptr))
    obj.prepare(np.zeros(9, np.float32), w, gptr, LocalComm())
    assert obj.weight_norm == pytest.approx(3 / 6)  # n_groups / sum(group weights), as XGBoost
    with pytest.raises(DGBoostValueError, match="per query group"):
        obj.validate_labels(np.zeros(9, np.float32), np.arange(9, dtype=np.float32), gptr)


# ---------------------------------------------------------------- links and validation
def test_transforms_follow_xgboost():
    m = np.array([[-2.0], [0.0], [3.0]], np.float32)
    np.testing.assert_allclose(objective("binary:logistic").transform(m), _sig(m[:, 0]), rtol=1e-6)
    np.testing.assert_allclose(objective("count:poisson").transform(m), np.exp(m[:, 0]), rtol=1e-6)
    np.testing.assert_array_equal(objective("binary:logitraw").transform(m), m[:, 0])
    mm = np.array([[1.0, 3.0, 3.0], [0.0, -1.0, 2.0]], np.float32)
    p = objective("multi:softprob", num_class=3).transform(mm)
    np.testing.assert_allclose(p.sum(1), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(objective("multi:softmax", num_class=3).transform(mm), [1.0, 2.0])


@pytest.mark.parametrize(
    "name,score",
    [("binary:logistic", 0.2), ("count:poisson", 3.0), ("reg:squarederror", -1.5), ("binary:logitraw", 0.3)],
)
def test_margin_and_score_links_are_inverse(name, score):
    assert score_from_margin(name, margin_from_score(name, score)) == pytest.approx(score, rel=1e-12)
    assert objective(name).margin_from_score(score) == margin_from_score(name, score)


def test_out_of_range_base_score_is_a_parameter_error():
    with pytest.raises(ParameterError, match=r"\(0, 1\)"):
        margin_from_score("binary:logistic", 1.0)
    with pytest.raises(ParameterError, match="> 0"):
        margin_from_score("count:poisson", 0.0)


@pytest.mark.parametrize(
    "name,kw,label,weight,group,match",
    [
        ("binary:logistic", {}, [0, 1, 2], None, None, r"\[0, 1\].*label\[2\]=2\.0"),
        ("reg:logistic", {}, [0, -0.5], None, None, r"\[0, 1\]"),
        ("multi:softprob", {"num_class": 3}, [0, 1, 3], None, None, r"0\.\.2"),
        ("multi:softmax", {"num_class": 3}, [0, 1.5], None, None, "integers"),
        ("count:poisson", {}, [1, -1], None, None, "non-negative"),
        ("reg:squarederror", {}, [1, np.nan], None, None, "finite"),
        ("reg:squarederror", {}, [1, 2], [1, -1], None, "non-negative"),
        ("reg:squarederror", {}, [1, 2], [1, 1, 1], None, "one weight per row"),
        ("rank:ndcg", {}, [0, 1, 2], None, None, "query groups"),
        ("rank:ndcg", {}, [0, 1, 2.5], None, [0, 3], "0..31"),
        ("rank:ndcg", {}, [0, 1, 40], None, [0, 3], "ndcg_exp_gain"),
        ("rank:pairwise", {}, [0, 1, 2], None, [0, 2], "group_ptr"),
    ],
)
def test_bad_labels_raise_errors_that_name_the_problem(name, kw, label, weight, group, match):
    obj = objective(name, **kw)
    with pytest.raises(DGBoostError, match=match):
        obj.validate_labels(
            np.asarray(label, np.float32),
            None if weight is None else np.asarray(weight, np.float32),
            None if group is None else np.asarray(group, np.int64),
        )


def test_unknown_objective_suggests_the_closest_name():
    p = parse_params({})
    p.objective = "binary:logistc"
    with pytest.raises(ParameterError, match="binary:logistic"):
        get_objective(p)


def test_custom_objective_gets_raw_margins_and_its_shapes_are_checked():
    seen = {}

    def fn(preds, dtrain):
        seen["shape"], seen["dtrain"] = preds.shape, dtrain
        return preds - 1.0, np.ones_like(preds)

    p = parse_params({"num_class": 3})
    obj = CustomObjective(fn, p, 3)
    obj.dtrain = "the dmatrix"
    m = np.zeros((4, 3), np.float32)
    g, h = obj.gradient(m, np.zeros(4, np.float32), None, None, 0)
    assert seen == {"shape": (4, 3), "dtrain": "the dmatrix"} and g.shape == (4, 3)
    np.testing.assert_array_equal(g, -1.0)
    one = CustomObjective(lambda pr, d: (pr.ravel(), pr.ravel()), p, 1)
    assert one.gradient(np.ones((4, 1), np.float32), np.zeros(4), None, None, 0)[0].shape == (4, 1)
    with pytest.raises(DGBoostValueError, match="shape"):
        CustomObjective(lambda pr, d: (pr[:2], pr[:2]), p, 3).gradient(m, np.zeros(4), None, None, 0)
    with pytest.raises(DGBoostValueError, match="non-finite"):
        CustomObjective(lambda pr, d: (np.full_like(pr, np.nan), pr), p, 3).gradient(m, np.zeros(4), None, None, 0)


@pytest.mark.parametrize("name", ["reg:squarederror", "reg:pseudohubererror", "reg:absoluteerror", "count:poisson"])
def test_gradients_computed_in_row_chunks_equal_those_of_all_rows_at_once(name, monkeypatch):
    from dgboost import objective as objective_module

    rng = np.random.default_rng(12)
    margin = rng.normal(size=(1000, 1)).astype(np.float32)
    label = np.abs(rng.normal(size=1000)).astype(np.float32)
    weight = rng.uniform(0.1, 3.0, size=1000).astype(np.float32)
    obj = objective(name)
    for w in (None, weight):
        whole = obj.gradient(margin, label, w, None, 0)
        monkeypatch.setattr(objective_module, "_GRADIENT_CHUNK_ROWS", 37)  # 28 chunks, the last short
        chunked = obj.gradient(margin, label, w, None, 0)
        monkeypatch.undo()
        for a, b in zip(whole, chunked):
            assert a.shape == b.shape == (1000, 1) and a.dtype == b.dtype == np.float32
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "name,label,match",
    [("reg:gamma", 0.0, "positive"), ("reg:gamma", -1.0, "positive"), ("reg:tweedie", -0.5, "non-negative")],
)
def test_gamma_and_tweedie_refuse_labels_outside_their_support(name, label, match):
    y = np.array([1.0, 2.0, label, 3.0], np.float32)
    with pytest.raises(DGBoostValueError, match=match):
        objective(name).validate_labels(y, None, None)


@pytest.mark.parametrize("rho", [0.9, 2.0, 2.5])
def test_tweedie_variance_power_outside_one_to_two_is_refused(rho):
    with pytest.raises(ParameterError, match="tweedie_variance_power"):
        parse_params({"objective": "reg:tweedie", "tweedie_variance_power": rho})


@pytest.mark.parametrize("weighted", [False, True])
def test_hinge_gradients_sum_to_xgboosts_leaf_statistics(weighted):
    # hinge gradients take two values, so XGBoost's tree keeps many rows per leaf: compare
    # each leaf's sums (XGBoost's sum_hessian H and weight -G/H, lambda 0) with ours
    rng = np.random.default_rng(9)
    n = 400
    y = (rng.random(n) < 0.4).astype(np.float32)
    w = (rng.random(n) + 0.5).astype(np.float32) if weighted else None
    margin = (rng.normal(size=n) * 1.5).astype(np.float32)
    d = xgb.DMatrix(rng.normal(size=(n, 3)), y, weight=w, base_margin=margin, nthread=1)
    params = {
        "objective": "binary:hinge",
        "eta": 1.0,
        "max_depth": 3,
        "min_child_weight": 0,
        "gamma": 0,
        "lambda": 0.0,
        "tree_method": "exact",
        "nthread": 1,
    }
    b = xgb.train(params, d, 1)
    leaf = b.predict(d, pred_leaf=True).astype(np.int64).ravel()
    tree = json.loads(b.save_raw("json"))["learner"]["gradient_booster"]["model"]["trees"][0]
    hess_sum, weight = np.array(tree["sum_hessian"]), np.array(tree["base_weights"])
    g, h = objective("binary:hinge").gradient(margin[:, None], y, w, None, 0)
    leaves = np.unique(leaf)
    assert leaves.size >= 3
    for node in leaves:
        rows = leaf == node
        ours_h = h[rows, 0].astype(np.float64).sum()
        ours_g = g[rows, 0].astype(np.float64).sum()
        assert ours_h == pytest.approx(hess_sum[node], rel=1e-5, abs=0)  # FLT_MIN hessians count too
        assert ours_g == pytest.approx(-weight[node] * hess_sum[node], rel=1e-5, abs=1e-6)


def test_weighted_hinge_keeps_xgboosts_unweighted_flt_min_hessian_outside_the_margin():
    # XGBoost's HingeObj: where s m < 1, (g, h) = (-s w, w); elsewhere (0, FLT_MIN) whatever w
    y = np.array([1, 0, 1, 0], np.float32)
    m = np.array([[2.0], [-3.0], [0.5], [0.2]], np.float32)
    w = np.array([0.25, 0.5, 2.0, 3.0], np.float32)
    g, h = objective("binary:hinge").gradient(m, y, w, None, 0)
    tiny = np.finfo(np.float32).tiny
    np.testing.assert_array_equal(g[:, 0], [0.0, 0.0, -2.0, 3.0])
    np.testing.assert_array_equal(h[:, 0], [tiny, tiny, 2.0, 3.0])


def test_hinge_predicts_one_where_the_margin_is_positive_else_zero():
    m = np.array([[-2.0], [-1e-6], [0.0], [1e-6], [3.0]], np.float32)
    np.testing.assert_array_equal(objective("binary:hinge").transform(m), [0, 0, 0, 1, 1])


# ------------------------------------------------------- reg:quantileerror and survival:cox
def _xgb_base_score(params, y, weight=None):
    """XGBoost's fitted intercept(s) (output space) after one round."""
    d = xgb.DMatrix(np.arange(len(y), dtype=np.float32)[:, None], y, weight=weight, nthread=1)
    b = xgb.train({**params, "nthread": 1, "max_depth": 1}, d, 1)
    text = json.loads(b.save_config())["learner"]["learner_model_param"]["base_score"]
    return np.array(json.loads(text) if text.startswith("[") else [text], np.float64)


@pytest.mark.parametrize("weights", ["none", "random", "equal"])
@pytest.mark.parametrize("n", [1, 7, 10, 101])
def test_quantile_intercepts_are_xgboosts_quantiles_of_the_labels(n, weights):
    # ten equal weights at alpha 0.1 or 0.3 land exactly on a cumulative weight: XGBoost's
    # float threshold decides those ties, so must ours; alpha 0 and 1 are the extremes
    rng = np.random.default_rng(n)
    y = np.round(rng.normal(size=n) * 3, 1).astype(np.float32)
    w = {"none": None, "random": (rng.random(n) * 2).astype(np.float32), "equal": np.full(n, 0.5, np.float32)}[weights]
    alpha = [0.0, 0.1, 0.25, 0.3, 0.5, 0.9, 1.0]
    want = _xgb_base_score({"objective": "reg:quantileerror", "quantile_alpha": alpha}, y, w)
    got = objective("reg:quantileerror", quantile_alpha=alpha).base_margins(y, w, LocalComm())
    np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))


def test_quantile_intercepts_and_gradients_are_identical_for_any_partition_of_the_rows():
    rng = np.random.default_rng(21)
    n = 300
    y = (rng.normal(size=n) * 3).astype(np.float32)
    w = (rng.random(n) * 2).astype(np.float32)
    margin = rng.normal(size=(n, 3)).astype(np.float32)

    def compute(comm, rows):
        obj = objective("reg:quantileerror", quantile_alpha=[0.2, 0.5, 0.7])
        obj.prepare(y[rows], w[rows], None, comm)
        return [obj.base_margins(y[rows], w[rows], comm), *obj.gradient(margin[rows], y[rows], w[rows], None, 0)]

    whole = compute(LocalComm(), np.arange(n))
    parts = _split_rows(n, 3, rng)
    results = run_in_threads(3, lambda comm, r: compute(comm, parts[r]))
    for r, (base, g, h) in enumerate(results):
        np.testing.assert_array_equal(base, whole[0])
        np.testing.assert_array_equal(g, whole[1][parts[r]])  # the scale S_j spans every rank
        np.testing.assert_array_equal(h, whole[2][parts[r]])


def test_quantile_training_on_three_ranks_gives_the_single_process_model_byte_for_byte():
    import dgboost as dg

    rng = np.random.default_rng(22)
    n = 900
    x = rng.normal(size=(n, 4)).astype(np.float32)
    y = (x[:, 0] + rng.normal(size=n)).astype(np.float32)
    w = (rng.random(n) + 0.5).astype(np.float32)
    params = {"objective": "reg:quantileerror", "quantile_alpha": [0.1, 0.9], "max_depth": 3, "max_bin": 32}
    single = dg.train(params, dg.DMatrix(x, y, weight=w), 3, verbose_eval=False).to_json()
    edges = [0, 250, 700, n]

    def rank_fn(comm, r):
        rows = slice(edges[r], edges[r + 1])
        return dg.train(
            params, dg.DMatrix(x[rows], y[rows], weight=w[rows]), 3, verbose_eval=False, comm=comm
        ).to_json()

    assert all(model == single for model in run_in_threads(3, rank_fn))


def test_quantile_gradient_is_xgboosts_smoothed_pinball_score():
    # an independent transcription of XGBoost 3.4's formulas in float32, as XGBoost computes
    rng = np.random.default_rng(4)
    n, alpha = 200, np.float32([0.25, 0.75])
    y = (rng.normal(size=n) * 2).astype(np.float32)
    w = (rng.random(n) + 0.5).astype(np.float32)
    m = rng.normal(size=(n, 2)).astype(np.float32)
    m[:3] = y[:3, None]  # zero residuals: tanh(x) / x is 1 there
    r = m - y[:, None]
    scale = np.float32((np.sum(w[:, None] * np.sqrt(np.abs(r)), 0, dtype=np.float64) / w.sum(dtype=np.float64)) ** 2)
    x = r / (np.float32(0.04) * scale)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(x == 0, np.float32(1), np.tanh(x) / x)
    want_g = w[:, None] * np.float32(0.5) * scale * (np.tanh(x) + 1 - 2 * alpha)
    want_h = w[:, None] * np.float32(12.5) * np.maximum(ratio, np.float32(3e-4))
    g, h = objective("reg:quantileerror", quantile_alpha=[0.25, 0.75]).gradient(m, y, w, None, 0)
    np.testing.assert_allclose(g, want_g, rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(h, want_h, rtol=2e-6, atol=0)
    np.testing.assert_array_equal(h[:3], np.repeat(12.5 * w[:3, None], 2, axis=1))
    # every residual zero: no scale, so no step at all (XGBoost's zero pairs)
    g0, h0 = objective("reg:quantileerror", quantile_alpha=0.5).gradient(y[:, None], y, w, None, 0)
    assert not g0.any() and not h0.any()


def test_several_quantiles_are_predicted_sorted_in_each_row_as_xgboost_transforms_them():
    m = np.array([[0.3, -1.0, 2.0], [1.0, 1.0, 0.5]], np.float32)
    obj = objective("reg:quantileerror", quantile_alpha=[0.1, 0.5, 0.9])
    np.testing.assert_array_equal(obj.transform(m), np.float32([[-1.0, 0.3, 2.0], [0.5, 1.0, 1.0]]))
    np.testing.assert_array_equal(obj.eval_transform(m), obj.transform(m))
    one = objective("reg:quantileerror", quantile_alpha=0.5).transform(m[:, :1])
    assert one.shape == (2,) and one.dtype == np.float32
    np.testing.assert_allclose(objective("survival:cox").transform(m[:, :1]), np.exp(m[:, 0]), rtol=1e-6)


@pytest.mark.parametrize(
    "alpha,match",
    [
        (1.5, r"\[0, 1\]"),
        (-0.1, r"\[0, 1\]"),
        (float("nan"), r"\[0, 1\]"),
        ([0.9, 0.1], "ascending"),
        ([], "empty"),
        ("abc", "number"),
        ([0.5, True], "number"),
    ],
)
def test_invalid_quantile_alpha_is_refused(alpha, match):
    with pytest.raises(ParameterError, match=match):
        parse_params({"objective": "reg:quantileerror", "quantile_alpha": alpha})


def test_quantile_objective_without_quantile_alpha_is_refused_before_training():
    import dgboost as dg

    with pytest.raises(ParameterError, match="needs quantile_alpha"):
        dg.train({"objective": "reg:quantileerror"}, dg.DMatrix(np.zeros((4, 1)), np.arange(4.0)), 1)


@pytest.mark.parametrize(
    "text,want",
    [
        ("0.5", (0.5,)),
        ("[0.1,0.9]", (0.1, 0.9)),
        ("(0.2, 0.3)", (0.2, 0.3)),
        (np.array([0.1, 0.5]), (0.1, 0.5)),
        (0.25, (0.25,)),
    ],
)
def test_quantile_alpha_is_read_from_numbers_lists_and_their_text(text, want):
    p = parse_params({"objective": "reg:quantileerror", "quantile_alpha": text})
    assert p.quantile_alpha == want
    assert p.to_dict()["quantile_alpha"] == list(want)  # JSON-able, as a model file keeps it


def test_cox_refuses_label_zero_and_training_on_several_workers():
    import dgboost as dg

    with pytest.raises(DGBoostValueError, match="non-zero.*label\\[1\\]=0.0"):
        objective("survival:cox").validate_labels(np.array([1.0, 0.0, -2.0], np.float32), None, None)
    x = np.arange(20, dtype=np.float32)[:, None]
    y = np.where(np.arange(20) % 3, 1.0, -1.0) * (x[:, 0] + 1)
    with pytest.raises(DGBoostValueError, match="one worker"):
        run_in_threads(
            2, lambda comm, r: dg.train({"objective": "survival:cox"}, dg.DMatrix(x[r::2], y[r::2]), 1, comm=comm)
        )


def test_cox_ties_share_one_risk_sum_and_events_count_in_row_order_as_in_xgboost():
    # times 1, 1, 2 (two tied events, one censoring) at margin 0: both tied rows have risk
    # sum 3; the first event's 1/3 reaches both rows only after the first row: XGBoost's walk
    y = np.array([1.0, 1.0, -2.0], np.float32)
    g, h = objective("survival:cox").gradient(np.zeros((3, 1), np.float32), y, None, None, 0)
    np.testing.assert_allclose(g[:, 0], [1 / 3 - 1, 2 / 3 - 1, 2 / 3], rtol=1e-6)
    np.testing.assert_allclose(h[:, 0], [1 / 3 - 1 / 9, 2 / 3 - 2 / 9, 2 / 3 - 2 / 9], rtol=1e-6)


def _integer_features(n, rng, f=4):
    """Features with few distinct values: XGBoost's and dgboost's cuts are the same."""
    return rng.integers(0, 16, size=(n, f)).astype(np.float32)


@pytest.mark.parametrize(
    "name,extra,weighted",
    [
        ("reg:quantileerror", {"quantile_alpha": 0.3}, False),
        ("reg:quantileerror", {"quantile_alpha": [0.1, 0.5, 0.9]}, True),
        ("reg:quantileerror", {"quantile_alpha": [0.45, 0.5, 0.55]}, False),  # predictions cross
        ("survival:cox", {}, False),
        ("survival:cox", {}, True),
    ],
)
def test_a_few_rounds_grow_xgboost_hists_trees_and_predictions(name, extra, weighted):
    import dgboost as dg

    rng = np.random.default_rng(17)
    n = 600
    x = _integer_features(n, rng)
    signal = 0.2 * x[:, 0] + np.sin(x[:, 1])
    if name == "survival:cox":
        t = np.round(rng.exponential(np.exp(-0.3 * signal)) * 10) + 1  # many tied times
        y = (t * np.where(rng.random(n) < 0.7, 1, -1)).astype(np.float32)
    else:
        y = (signal + rng.normal(size=n)).astype(np.float32)
    w = (rng.random(n) + 0.5).astype(np.float32) if weighted else None
    params = {"objective": name, "max_depth": 3, "eta": 0.3, **extra}
    ours_log, theirs_log = {}, {}
    ours = dg.train(
        params,
        dg.DMatrix(x, y, weight=w),
        6,
        evals=[(dg.DMatrix(x, y, weight=w), "t")],
        evals_result=ours_log,
        verbose_eval=False,
    )
    theirs = xgb.train(
        {**params, "tree_method": "hist", "nthread": 1},
        xgb.DMatrix(x, y, weight=w),
        6,
        evals=[(xgb.DMatrix(x, y, weight=w), "t")],
        evals_result=theirs_log,
        verbose_eval=False,
    )
    # the same splits in every tree (leaf values differ in float32 rounding only)
    strip = [line.split("leaf=")[0] for tree in ours.get_dump() for line in tree.splitlines()]
    assert strip == [line.split("leaf=")[0] for tree in theirs.get_dump() for line in tree.splitlines()]
    np.testing.assert_allclose(ours.ensemble.base_margin, ours.ensemble.base_margin.astype(np.float32))
    np.testing.assert_allclose(ours.predict(dg.DMatrix(x)), theirs.predict(xgb.DMatrix(x)), rtol=1e-5, atol=1e-5)
    metric = ours.meta["params"].get("eval_metric") or objective(name, **extra).default_metric
    np.testing.assert_allclose(ours_log["t"][metric], theirs_log["t"][metric], rtol=1e-6)
    if extra.get("quantile_alpha") == [0.45, 0.5, 0.55]:
        margin = ours.predict(dg.DMatrix(x), output_margin=True)
        assert (np.diff(margin, axis=1) < 0).any()  # the sorted predictions were exercised


def _softprob_gradient_by_the_formula(margin, label, weight, k):
    """multi:softprob's gradient as the textbook formulas, one temporary per operation."""
    from dgboost.objective import _EPS

    n = len(label)
    z = np.asarray(margin, np.float64).reshape(n, k)
    z = np.exp(z - z.max(axis=1, keepdims=True))
    p = z / z.sum(axis=1, keepdims=True)
    onehot = np.zeros_like(p)
    onehot[np.arange(n), label.astype(np.int64)] = 1.0
    g, h = p - onehot, np.maximum(2.0 * p * (1.0 - p), _EPS)
    if weight is not None:
        w = np.asarray(weight, np.float64)[:, None]
        g, h = g * w, h * w
    return g.astype(np.float32), h.astype(np.float32)


@pytest.mark.parametrize("scale", [0.1, 1.0, 30.0, 800.0])
@pytest.mark.parametrize("weighted", [False, True])
def test_the_in_place_softprob_gradient_has_the_bits_of_the_textbook_formulas(scale, weighted):
    rng = np.random.default_rng(int(scale) + weighted)
    n, k = 4000, 7
    margin = (rng.normal(size=n * k) * scale).astype(np.float32)
    margin[rng.random(margin.size) < 0.002] = np.float32(1e30)  # probabilities of 0 and 1, subnormal products
    label = rng.integers(0, k, n).astype(np.float32)
    weight = rng.uniform(0.0, 3.0, n).astype(np.float32) if weighted else None
    objective = get_objective(parse_params({"objective": "multi:softprob", "num_class": k}))
    before = margin.copy()
    g, h = objective.gradient(margin, label, weight, None, 0)
    want_g, want_h = _softprob_gradient_by_the_formula(margin, label, weight, k)
    assert g.tobytes() == want_g.tobytes() and h.tobytes() == want_h.tobytes()
    assert margin.tobytes() == before.tobytes()  # the margins are not written
