"""Training on the GPU gives the CPU's model: same trees, same JSON, same predictions, same errors.

Every test calls a ``dgboost.testing`` check with ``device="cuda"``; the CPU tests call the
same checks with ``"cpu"`` (``tests/cpu/test_device_checks.py``). The data sets are small
(at most 10,000 rows, 8-20 rounds) so each test takes well under two seconds on a GPU;
together they cover every growth policy, sampling option, regulariser and objective family,
missing values, weights, query groups and a table wider than one shared-memory feature
group (1,500 features x 256 bins).
"""

from functools import lru_cache

import numpy as np
import pytest

import dgboost as dg
from dgboost.datasets import make_synthetic
from dgboost.testing import (
    check_matches_cpu_metric,
    check_prediction_matches_reference,
    check_raises_like_cpu,
    check_same_trees_as_cpu,
    check_training_is_deterministic,
)

DEVICE = "cuda"


@lru_cache(maxsize=None)
def _dataset(name: str):
    """(X, y, weight, group) as NumPy arrays; built once per test session."""
    from sklearn import datasets

    weight = group = None
    if name in ("breast_cancer", "diabetes", "digits", "wine"):
        loader = {
            "breast_cancer": datasets.load_breast_cancer,
            "diabetes": datasets.load_diabetes,
            "digits": datasets.load_digits,
            "wine": datasets.load_wine,
        }[name]
        X, y = loader(return_X_y=True)
        X, y = X.astype(np.float32), y.astype(np.float32)
    elif name == "missing":  # 20% of the values missing at random
        X, y, _ = make_synthetic(10_000, 28, task="binary", missing_rate=0.2, seed=1)
    elif name == "weighted":
        X, y, _ = make_synthetic(8_000, 20, task="regression", missing_rate=0.05, seed=2)
        weight = np.random.default_rng(2).uniform(0.2, 3.0, len(y)).astype(np.float32)
    elif name == "ranking":
        X, y, group = make_synthetic(6_000, 16, task="ranking", missing_rate=0.1, seed=3, group_size=20)
    elif name == "wide":  # 1,500 x 256 bins: more than one shared-memory feature group
        X, y, _ = make_synthetic(2_000, 1_500, task="binary", missing_rate=0.05, seed=4)
    elif name == "tied":  # 4 copies of 50 columns (f, f + 50, ...): every best gain is tied
        X, y, _ = make_synthetic(3_000, 50, task="binary", missing_rate=0.1, seed=5)
        X = np.tile(X, (1, 4))  # the copies of a column fall on different lanes of a warp
    else:
        raise KeyError(name)
    return X, y, weight, group


BINARY = {"objective": "binary:logistic", "max_depth": 6, "eta": 0.3, "max_bin": 256}
REGRESSION = {"objective": "reg:squarederror", "max_depth": 6, "eta": 0.3, "max_bin": 256}
LOSSGUIDE = {"grow_policy": "lossguide", "max_depth": 0, "max_leaves": 31}
# a sign for every feature of the "missing" (28) and "weighted" (20) data sets
MONOTONE_28 = tuple([1, -1, 0, 1, 0, -1, 0] * 4)
MONOTONE_20 = tuple([1, -1, 0, 0, 1] * 4)

# (data set, parameters, rounds)
CASES = {
    "breast_cancer-depthwise": ("breast_cancer", BINARY, 20),
    "breast_cancer-lossguide": ("breast_cancer", {**BINARY, **LOSSGUIDE, "max_leaves": 12}, 20),
    "diabetes-min_child_weight": ("diabetes", {**REGRESSION, "min_child_weight": 8}, 20),
    "diabetes-absoluteerror": ("diabetes", {**REGRESSION, "objective": "reg:absoluteerror"}, 15),
    "digits-softprob": ("digits", {"objective": "multi:softprob", "num_class": 10, "max_depth": 4, "max_bin": 256}, 10),
    "wine-softprob-lossguide": (
        "wine",
        {"objective": "multi:softprob", "num_class": 3, "max_bin": 256, **LOSSGUIDE, "max_leaves": 6},
        10,
    ),
    "missing-depthwise": ("missing", BINARY, 20),
    "missing-lossguide": ("missing", {**BINARY, **LOSSGUIDE}, 20),
    "missing-lossguide-depth-limit": ("missing", {**BINARY, **LOSSGUIDE, "max_depth": 5, "max_leaves": 24}, 15),
    "missing-subsample": ("missing", {**BINARY, "subsample": 0.8, "seed": 7}, 20),
    "missing-colsample": (
        "missing",
        {**BINARY, "colsample_bytree": 0.8, "colsample_bylevel": 0.7, "colsample_bynode": 0.6, "seed": 3},
        20,
    ),
    "missing-interaction-constraints": (
        "missing",
        {**BINARY, "interaction_constraints": [[0, 1, 2, 3], [4, 5, 6, 7, 8], [9, 10]]},
        15,
    ),
    "missing-interaction-constraints-lossguide": (
        "missing",
        {**BINARY, **LOSSGUIDE, "interaction_constraints": [[0, 1, 2], [3, 4, 5, 6]]},
        12,
    ),
    # monotone constraints: whole levels (depthwise), level by level (column sampling by node),
    # best-first, and with the regularisers that change the bounded weights and gains
    "missing-monotone": ("missing", {**BINARY, "monotone_constraints": MONOTONE_28}, 15),
    "missing-monotone-bynode": (
        "missing",
        {**BINARY, "colsample_bynode": 0.7, "seed": 3, "monotone_constraints": MONOTONE_28},
        12,
    ),
    "missing-monotone-lossguide": ("missing", {**BINARY, **LOSSGUIDE, "monotone_constraints": MONOTONE_28}, 12),
    "weighted-monotone-alpha-max_delta_step": (
        "weighted",
        {**REGRESSION, "alpha": 1.0, "max_delta_step": 0.5, "monotone_constraints": MONOTONE_20},
        15,
    ),
    "wine-softprob-monotone-lossguide": (
        "wine",
        {
            "objective": "multi:softprob",
            "num_class": 3,
            "max_bin": 256,
            **LOSSGUIDE,
            "max_leaves": 6,
            "monotone_constraints": "(1,-1,0,1,-1,0,1,-1,0,1,-1,0,1)",
        },
        10,
    ),
    "missing-max_delta_step": ("missing", {**BINARY, "max_delta_step": 0.7, "min_child_weight": 4}, 20),
    "missing-gamma-lambda": ("missing", {**BINARY, "gamma": 0.5, "lambda": 4.0}, 15),
    "weighted-reg_alpha": ("weighted", {**REGRESSION, "alpha": 2.0, "lambda": 0.5}, 20),
    "weighted-absoluteerror": ("weighted", {**REGRESSION, "objective": "reg:absoluteerror", "subsample": 0.8}, 15),
    "ranking-ndcg": ("ranking", {"objective": "rank:ndcg", "max_depth": 6, "max_bin": 256}, 15),
    "ranking-ndcg-lossguide": ("ranking", {"objective": "rank:ndcg", "max_bin": 256, **LOSSGUIDE}, 10),
    # random forests: several trees a round from the same gradients, each with its own samples
    "missing-forest": ("missing", {**BINARY, "num_parallel_tree": 4, "subsample": 0.8, "colsample_bynode": 0.8}, 4),
    "wine-softprob-forest-lossguide": (
        "wine",
        {
            "objective": "multi:softprob",
            "num_class": 3,
            "max_bin": 256,
            **LOSSGUIDE,
            "num_parallel_tree": 3,
            "subsample": 0.7,
        },
        4,
    ),
    # equal gains on several features: the lowest feature wins, as in the CPU's scan
    "tied-depthwise": ("tied", BINARY, 8),
    "tied-lossguide": ("tied", {**BINARY, **LOSSGUIDE}, 8),
    # few rounds: the CPU oracle is slow on 384,000 bins
    "wide-depthwise": ("wide", {**BINARY, "max_depth": 5}, 8),
    "wide-lossguide-bynode": ("wide", {**BINARY, **LOSSGUIDE, "max_leaves": 24, "colsample_bynode": 0.5}, 8),
}


def _to_device(*arrays):
    import cupy

    return tuple(None if a is None else cupy.asarray(a) for a in arrays)


@pytest.mark.gpu
@pytest.mark.parametrize("case", list(CASES))
def test_cuda_grows_the_same_trees_as_the_cpu(case):
    name, params, rounds = CASES[case]
    X, y, weight, group = _dataset(name)
    check_same_trees_as_cpu(DEVICE, X, y, params, rounds, weight=weight, group=group)


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["missing-depthwise", "digits-softprob", "wide-depthwise"])
def test_a_last_level_taken_one_parent_at_a_time_on_the_gpu_grows_the_cpus_trees(case, monkeypatch):
    import dgboost.grower as grower

    name, params, rounds = CASES[case]
    X, y, weight, group = _dataset(name)
    monkeypatch.setattr(grower, "_BUILD_CHUNK_BYTES", 1)  # on both devices: the CPU's is unchanged by it
    check_same_trees_as_cpu(DEVICE, X, y, params, rounds, weight=weight, group=group)


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["missing-depthwise", "weighted-reg_alpha", "digits-softprob", "ranking-ndcg"])
def test_data_already_on_the_gpu_gives_the_same_trees_as_the_cpu(case):
    name, params, rounds = CASES[case]
    X, y, weight, group = _dataset(name)
    Xd, yd, wd = _to_device(X, y, weight)
    check_same_trees_as_cpu(DEVICE, Xd, yd, params, rounds, weight=wd, group=group)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "case",
    [
        "missing-subsample",
        "missing-colsample",
        "missing-lossguide",
        "ranking-ndcg",
        "wide-lossguide-bynode",
        "weighted-absoluteerror",
        "missing-monotone-lossguide",
    ],
)
def test_cuda_training_is_deterministic(case):
    name, params, rounds = CASES[case]
    X, y, weight, group = _dataset(name)
    check_training_is_deterministic(DEVICE, X, y, params, rounds, weight=weight, group=group)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "case", ["missing-depthwise", "missing-lossguide", "digits-softprob", "weighted-reg_alpha", "wide-depthwise"]
)
@pytest.mark.parametrize("on_device", [False, True], ids=["host-rows", "device-rows"])
def test_cuda_predictions_match_the_reference_tree_walker(case, on_device):
    name, params, rounds = CASES[case]
    X, y, weight, group = _dataset(name)
    booster = dg.train(
        {**params, "device": DEVICE}, dg.DMatrix(X, y, weight=weight, group=group), rounds, verbose_eval=False
    )
    rows = X[:1000]
    check_prediction_matches_reference(DEVICE, booster, _to_device(rows)[0] if on_device else rows)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "case, metrics",
    [
        ("missing-depthwise", ["logloss", "auc", "error"]),
        ("digits-softprob", ["mlogloss", "merror"]),
        ("weighted-reg_alpha", ["rmse", "mae"]),
        ("ranking-ndcg", ["ndcg@10", "ndcg"]),
    ],
)
def test_cuda_evaluation_metrics_match_the_cpu(case, metrics):
    name, params, rounds = CASES[case]
    X, y, weight, group = _dataset(name)
    check_matches_cpu_metric(
        DEVICE, X, y, {**params, "eval_metric": metrics}, min(rounds, 10), weight=weight, group=group
    )


@pytest.mark.gpu
def test_monotone_constraints_keep_whole_level_growth_and_its_host_reads():
    from dgboost.testing.cuda_probes import count_host_reads

    X, y, _, _ = _dataset("missing")
    reads = []
    for extra in ({}, {"monotone_constraints": MONOTONE_28}):
        with count_host_reads() as counted:
            dg.train({**BINARY, **extra, "device": DEVICE}, dg.DMatrix(X, y), 5, verbose_eval=False)
        reads.append(counted.syncs)
    assert reads[1] == reads[0]  # the bounds stay on the device; the leaves' are replayed on the host


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["missing-monotone", "missing-monotone-lossguide"])
def test_cuda_models_with_monotone_constraints_are_monotone(case):
    name, params, rounds = CASES[case]
    X, y, _, _ = _dataset(name)
    booster = dg.train({**params, "device": DEVICE}, dg.DMatrix(X, y), rounds, verbose_eval=False)
    rows = X[:100]
    grid = np.linspace(-3, 3, 25, dtype=np.float32)
    for f in (0, 1, 3, 5):
        sign = MONOTONE_28[f]
        Z = np.repeat(rows, len(grid), axis=0)
        Z[:, f] = np.tile(grid, len(rows))
        margin = booster.predict(dg.DMatrix(Z), output_margin=True).reshape(len(rows), len(grid))
        assert (np.diff(margin, axis=1) * sign).min() >= 0.0


# -- bad input: the same DGBoostError type and message as on the CPU ---------------------
def _rows(device, *arrays):
    return _to_device(*arrays) if device != "cpu" else arrays


@pytest.mark.gpu
def test_nan_labels_raise_the_cpu_error_on_the_gpu():
    X, y, _, _ = _dataset("breast_cancer")
    bad = np.where(np.arange(len(y)) == 11, np.float32(np.nan), y)

    def train_on(device):
        Xd, yd = _rows(device, X, bad)
        dg.train({**BINARY, "device": device}, dg.DMatrix(Xd, yd), 2, verbose_eval=False)

    err = check_raises_like_cpu(DEVICE, train_on)
    assert "NaN" in str(err)


@pytest.mark.gpu
def test_a_wrong_feature_count_at_predict_raises_the_cpu_error_on_the_gpu():
    X, y, _, _ = _dataset("breast_cancer")

    def predict_on(device):
        booster = dg.train({**BINARY, "device": device}, dg.DMatrix(X, y), 2, verbose_eval=False)
        booster.predict(dg.DMatrix(_rows(device, X[:, :-1])[0]))

    err = check_raises_like_cpu(DEVICE, predict_on)
    assert "29" in str(err) and "30" in str(err)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "params, label",
    [
        (BINARY, lambda y: y * 2),
        ({"objective": "multi:softprob", "num_class": 2, "max_bin": 256}, lambda y: y + 1),
    ],
)
def test_labels_outside_the_classes_raise_the_cpu_error_on_the_gpu(params, label):
    X, y, _, _ = _dataset("breast_cancer")

    def train_on(device):
        Xd, yd = _rows(device, X, label(y))
        dg.train({**params, "device": device}, dg.DMatrix(Xd, yd), 2, verbose_eval=False)

    check_raises_like_cpu(DEVICE, train_on)
