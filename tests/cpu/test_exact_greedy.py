"""tree_method="exact": exact greedy split search on the CPU engine (dgboost/exact_greedy.py).

Oracles: a brute-force grower that tries every distinct value of every feature (integer
gradients, so its float64 gains are the engine's bit for bit), XGBoost 3.4.1's ``exact`` on
small integer-valued data (the same trees), XGBoost's metrics on moderately sized sets, and
the NumPy twin of the GPU kernels (``dgboost.testing.exact_reference``, both scan modes).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import xgboost as xgb

import dgboost as dg
from dgboost.errors import DeviceMemoryError, DGBoostValueError, ParameterError

EPS = 1e-6


# -- brute force ---------------------------------------------------------------------------
def _mid(a: np.float32, b: np.float32) -> np.float32:
    mid = np.float32(a * np.float32(0.5) + b * np.float32(0.5))
    return b if mid <= a else mid


def _end(v: np.float32, forward: bool) -> np.float32:
    gap = np.float32(np.abs(v) + np.float32(1e-6))
    return np.float32(v + gap) if forward else np.float32(v - gap)


def _gain(G, H, lam, mcw):
    return 0.0 if H < mcw or H <= 0.0 else G * G / (H + lam)


def _brute_split(X, g, h, rows, lam, mcw, forward_ok):
    """The best split of ``rows``: every boundary between two distinct present values of
    every feature, missing values right then left, ties to the first met (feature order,
    then forward ascending, forward end, backward descending, backward end)."""
    G, H = g[rows].sum(), h[rows].sum()
    parent = _gain(G, H, lam, mcw)
    best = (EPS, None)
    for f in range(X.shape[1]):
        x = X[rows, f]
        present = ~np.isnan(x)
        values = np.unique(x[present])
        candidates = []  # (left rows mask, value, default_left)
        if values.size:
            bounds = [(values[i], values[i + 1]) for i in range(values.size - 1)]
            if forward_ok[f]:
                candidates += [(present & (x <= a), _mid(a, b), False) for a, b in bounds]
                candidates.append((present, _end(values[-1], True), False))
            candidates += [(~present | (x <= a), _mid(a, b), True) for a, b in bounds[::-1]]
            candidates.append((~present, _end(values[0], False), True))
        for left, value, dl in candidates:
            GL, HL = g[rows][left].sum(), h[rows][left].sum()
            GR, HR = G - GL, H - HL
            if HL <= 0 or HR <= 0 or HL < mcw or HR < mcw:
                continue
            gain = _gain(GL, HL, lam, mcw) + _gain(GR, HR, lam, mcw) - parent
            if gain > best[0]:
                best = (gain, (f, value, dl))
    return best


def _brute_tree(X, g, h, depth, lam, mcw):
    """Nested (feature, value, default_left, gain, left, right) or ("leaf", G, H)."""
    n = X.shape[0]
    forward_ok = [np.isnan(X[:, f]).any() and np.unique(X[~np.isnan(X[:, f]), f]).size > 1 for f in range(X.shape[1])]

    def grow(rows, d):
        if d < depth:
            gain, split = _brute_split(X, g, h, rows, lam, mcw, forward_ok)
            if split is not None:
                f, value, dl = split
                x = X[rows, f]
                left = np.where(np.isnan(x), dl, x < value)
                return (f, value, dl, gain, grow(rows[left], d + 1), grow(rows[~left], d + 1))
        return ("leaf", g[rows].sum(), h[rows].sum())

    return grow(np.arange(n), 0)


def _nested(tree, node=0):
    """A dgboost Tree as the brute force's nesting (leaf sums replaced by the value)."""
    if tree.left[node] < 0:
        return ("leaf", float(tree.value[node]))
    return (
        int(tree.feature[node]),
        np.float32(tree.split_value[node]),
        bool(tree.default_left[node]),
        float(tree.gain[node]),
        _nested(tree, int(tree.left[node])),
        _nested(tree, int(tree.right[node])),
    )


def _with_leaf_values(brute, lam):
    if brute[0] == "leaf":
        return ("leaf", float(np.float32(-brute[1] / (brute[2] + lam))))
    f, value, dl, gain, left, right = brute
    return (f, value, dl, float(np.float32(gain)), _with_leaf_values(left, lam), _with_leaf_values(right, lam))


def _integer_data(seed, n=80, n_features=4, levels=6, missing=0.15):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, levels, size=(n, n_features)).astype(np.float32)
    X[rng.random(X.shape) < missing] = np.nan
    X[:, -1] = np.where(np.isnan(X[:, -1]), np.nan, 3.0)  # a constant feature
    y = rng.integers(-8, 9, size=n).astype(np.float32)
    w = rng.integers(1, 4, size=n).astype(np.float32)
    return X, y, w


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("lam, mcw", [(1.0, 1.0), (0.0, 2.0)])
def test_every_split_is_the_brute_force_best_over_every_distinct_value(seed, lam, mcw):
    X, y, w = _integer_data(seed)
    # base_score 0, squared error: g = -y w and h = w are integers, so every sum and gain is exact
    params = {"tree_method": "exact", "max_depth": 4, "eta": 1.0, "lambda": lam, "min_child_weight": mcw}
    booster = dg.train({**params, "base_score": 0.0}, dg.DMatrix(X, label=y, weight=w), 1)
    brute = _brute_tree(X, (-y * w).astype(np.float64), w.astype(np.float64), 4, lam, mcw)
    assert _nested(booster.ensemble.tree(0)) == _with_leaf_values(brute, lam)


# -- XGBoost 3.4.1 exact --------------------------------------------------------------------
def _xgb_nested(tree: dict, node: int = 0):
    if tree["left_children"][node] < 0:
        return ("leaf", np.float32(tree["split_conditions"][node]))  # a leaf's value (eta applied)
    return (
        int(tree["split_indices"][node]),
        np.float32(tree["split_conditions"][node]),
        bool(tree["default_left"][node]),
        _xgb_nested(tree, tree["left_children"][node]),
        _xgb_nested(tree, tree["right_children"][node]),
    )


def _xgb_trees(booster) -> list:
    model = json.loads(booster.save_raw("json"))
    return [_xgb_nested(t) for t in model["learner"]["gradient_booster"]["model"]["trees"]]


def _assert_same_trees(ours, theirs):
    """Same features, split values and default directions; leaf values to float32 rounding."""
    if ours[0] == "leaf" or theirs[0] == "leaf":
        assert ours[0] == theirs[0] == "leaf"
        np.testing.assert_allclose(ours[1], theirs[1], rtol=2e-6, atol=1e-7)
        return
    assert ours[:3] == theirs[:3]
    _assert_same_trees(ours[3], theirs[3])
    _assert_same_trees(ours[4], theirs[4])


CASES = {
    "squared error": {"objective": "reg:squarederror"},
    "weights, lambda, alpha": {"objective": "reg:squarederror", "lambda": 2.0, "alpha": 0.5, "weights": True},
    "min_child_weight, max_delta_step": {"objective": "reg:squarederror", "min_child_weight": 5, "max_delta_step": 0.7},
    "gamma prunes after growth": {"objective": "reg:squarederror", "gamma": 8.0},
    "logistic": {"objective": "binary:logistic"},
    "monotone": {"objective": "reg:squarederror", "monotone_constraints": "(1,-1,0,0,0)"},
}


@pytest.mark.parametrize("case", list(CASES))
def test_trees_are_xgboost_exacts_on_small_integer_valued_data(case):
    extra = dict(CASES[case])
    weighted = extra.pop("weights", False)
    rng = np.random.default_rng(7)
    n = 300
    X = rng.integers(0, 9, size=(n, 5)).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    signal = np.nan_to_num(X[:, 0]) * 1.3 - np.nan_to_num(X[:, 1]) ** 2 * 0.4 + np.nan_to_num(X[:, 2])
    y = (signal + rng.normal(size=n)).astype(np.float32)
    if extra["objective"] == "binary:logistic":
        y = (y > np.median(y)).astype(np.float32)
    w = rng.uniform(0.5, 2.0, size=n).astype(np.float32) if weighted else None
    params = {"tree_method": "exact", "max_depth": 4, "eta": 0.3, "base_score": 0.5, **extra}
    ours = dg.train(params, dg.DMatrix(X, label=y, weight=w), 4)
    theirs = xgb.train({**params, "nthread": 1}, xgb.DMatrix(X, label=y, weight=w), 4)
    for a, b in zip(_xgb_trees(ours.to_xgboost()), _xgb_trees(theirs), strict=True):
        _assert_same_trees(a, b)


LABELS = {
    "count:poisson": lambda y: np.round(np.abs(y)),
    "reg:gamma": lambda y: np.abs(y) + 0.5,
    "reg:tweedie": lambda y: np.abs(y) + 0.5,
    "reg:pseudohubererror": lambda y: y,
    "multi:softprob": lambda y: np.digitize(y, [-2, 2]).astype(np.float32),
    "rank:pairwise": lambda y: np.digitize(y, [-2, 2]).astype(np.float32),
}


@pytest.mark.parametrize("objective", list(LABELS))
def test_trees_are_xgboost_exacts_for_other_objective_families(objective):
    rng = np.random.default_rng(7)
    n = 300
    X = rng.integers(0, 9, size=(n, 5)).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    signal = np.nan_to_num(X[:, 0]) * 1.3 - np.nan_to_num(X[:, 1]) ** 2 * 0.4 + np.nan_to_num(X[:, 2])
    y = LABELS[objective]((signal + rng.normal(size=n)).astype(np.float32))
    params = {"tree_method": "exact", "max_depth": 4, "eta": 0.3, "base_score": 0.5, "objective": objective}
    if objective.startswith("multi"):
        params["num_class"] = 3
    group = [30] * 10 if objective.startswith("rank") else None
    theirs_data = xgb.DMatrix(X, label=y)
    if group is not None:
        theirs_data.set_group(group)
    ours = dg.train(params, dg.DMatrix(X, label=y, group=group), 4)
    theirs = xgb.train({**params, "nthread": 1}, theirs_data, 4)
    for a, b in zip(_xgb_trees(ours.to_xgboost()), _xgb_trees(theirs), strict=True):
        _assert_same_trees(a, b)


def _sets():
    rng = np.random.default_rng(11)
    n, f = 4000, 8
    X = rng.normal(size=(n, f)).astype(np.float32)
    X[:, :3] = np.round(X[:, :3] * 4)  # a few discrete columns: many ties of values
    X[rng.random(X.shape) < 0.05] = np.nan
    z = np.nan_to_num(X[:, 0]) + np.sin(np.nan_to_num(X[:, 3]) * 2) + np.nan_to_num(X[:, 4] * X[:, 5])
    return X, z, rng


@pytest.mark.parametrize("objective", ["reg:squarederror", "binary:logistic"])
def test_test_metrics_are_within_half_a_percent_of_xgboost_exacts(objective):
    X, z, rng = _sets()
    y = (z + rng.normal(size=z.size) * 0.5).astype(np.float32)
    if objective == "binary:logistic":
        y = (y > 0).astype(np.float32)
    train, test = slice(0, 1500), slice(1500, None)
    params = {"objective": objective, "tree_method": "exact", "max_depth": 6, "eta": 0.2, "subsample": 1.0}
    ours = dg.train(params, dg.DMatrix(X[train], label=y[train]), 15)
    theirs = xgb.train({**params, "nthread": 1}, xgb.DMatrix(X[train], label=y[train]), 15)
    p_ours = ours.predict(dg.DMatrix(X[test]))
    p_theirs = theirs.predict(xgb.DMatrix(X[test]))
    if objective == "binary:logistic":
        metric = lambda p: -np.mean(y[test] * np.log(p) + (1 - y[test]) * np.log(1 - p))  # noqa: E731
    else:
        metric = lambda p: np.sqrt(np.mean((p - y[test]) ** 2))  # noqa: E731
    assert abs(metric(p_ours) - metric(p_theirs)) <= 0.005 * metric(p_theirs)


# -- models ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def exact_model():
    X, z, rng = _sets()
    y = (z > 0).astype(np.float32)
    params = {"objective": "binary:logistic", "tree_method": "exact", "max_depth": 4, "eta": 0.3}
    return dg.train(params, dg.DMatrix(X[:1500], label=y[:1500]), 8), X[1500:2000]


def test_an_exact_model_loads_in_xgboost_and_predicts_the_same(exact_model):
    booster, X = exact_model
    theirs = booster.to_xgboost()
    np.testing.assert_allclose(booster.predict(dg.DMatrix(X)), theirs.predict(xgb.DMatrix(X)), rtol=1e-6, atol=1e-7)


def test_an_exact_model_explains_like_any_other(exact_model):
    booster, X = exact_model
    ours = booster.predict(dg.DMatrix(X), pred_contribs=True)
    theirs = booster.to_xgboost().predict(xgb.DMatrix(X), pred_contribs=True)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)
    margin = booster.predict(dg.DMatrix(X), output_margin=True)
    np.testing.assert_allclose(ours.sum(axis=1), margin, rtol=1e-5, atol=1e-5)


def test_an_exact_model_saves_and_loads_byte_for_byte(exact_model, tmp_path):
    booster, X = exact_model
    path = tmp_path / "exact.json"
    booster.save_model(path)
    again = dg.Booster(model_file=path)
    assert again.save_raw("json") == booster.save_raw("json")
    assert json.loads(booster.save_raw("json"))["learner"]["learner_model_param"]["num_target"] == "1"


@pytest.mark.parametrize(
    "extra",
    [
        {"subsample": 0.7, "colsample_bytree": 0.6, "colsample_bylevel": 0.8, "colsample_bynode": 0.8},
        {"objective": "multi:softprob", "num_class": 3},
        {"interaction_constraints": [[0, 1], [2, 3, 4]]},
        {"objective": "reg:absoluteerror"},
        {"num_parallel_tree": 3, "subsample": 0.8},
    ],
    ids=["sampling", "multiclass", "interactions", "adaptive leaves", "forest"],
)
def test_every_training_option_trains_the_same_model_twice(extra):
    X, z, rng = _sets()
    y = (z > 0).astype(np.float32) + (z > 1) if extra.get("num_class") else z.astype(np.float32)
    params = {"tree_method": "exact", "max_depth": 4, "seed": 3, **extra}
    a = dg.train(params, dg.DMatrix(X[:800], label=y[:800]), 3)
    b = dg.train(params, dg.DMatrix(X[:800], label=y[:800]), 3)
    assert a.save_raw("json") == b.save_raw("json")
    if "interaction_constraints" in extra:
        groups = [set(g) for g in extra["interaction_constraints"]]
        for tree in a.ensemble.trees():
            for leaf_path in _paths(tree):
                assert any(set(leaf_path) <= g for g in groups)


def _paths(tree, node=0, above=()):
    if tree.left[node] < 0:
        yield above
        return
    here = above + (int(tree.feature[node]),)
    yield from _paths(tree, int(tree.left[node]), here)
    yield from _paths(tree, int(tree.right[node]), here)


def test_a_monotone_constraint_holds_in_an_exact_model():
    X, z, rng = _sets()
    X = np.nan_to_num(X)
    y = (X[:, 0] * 2 + rng.normal(size=z.size)).astype(np.float32)
    booster = dg.train(
        {"tree_method": "exact", "max_depth": 5, "monotone_constraints": "(1)"}, dg.DMatrix(X[:, :1], label=y), 10
    )
    grid = np.linspace(-12, 12, 200, dtype=np.float32)[:, None]
    assert np.all(np.diff(booster.predict(dg.DMatrix(grid))) >= 0)


# -- refusals --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "extra, message",
    [
        ({"grow_policy": "lossguide", "max_leaves": 8}, "grows depthwise only"),
        ({"max_leaves": 8}, "no leaf budget"),
    ],
)
def test_exact_with_a_leaf_wise_option_is_refused_clearly(extra, message):
    with pytest.raises(ParameterError, match=message):
        dg.train({"tree_method": "exact", **extra}, dg.DMatrix(np.zeros((4, 1), np.float32), label=np.zeros(4)), 1)


def test_an_unknown_tree_method_is_refused_with_the_two_known_ones():
    with pytest.raises(ParameterError, match="'hist' \\(the default\\) or 'exact'"):
        dg.train({"tree_method": "approxx"}, dg.DMatrix(np.zeros((4, 1), np.float32), label=np.zeros(4)), 1)


def test_data_that_does_not_fit_is_refused_with_the_estimate(monkeypatch):
    from dgboost.backend import exact_engines

    monkeypatch.setattr(exact_engines, "host_available_bytes", lambda: 1000)
    X = np.ones((100, 3), np.float32)
    X[0, 0] = np.nan
    with pytest.raises(DeviceMemoryError, match=r"needs about 0\.00 GiB .* 100 rows with 299 present values"):
        dg.train({"tree_method": "exact"}, dg.DMatrix(X, label=np.zeros(100)), 1)


def test_exact_on_several_ranks_is_refused():
    from dgboost.exact_greedy import ExactGrower

    class TwoRanks:
        world_size = 2

    with pytest.raises(DGBoostValueError, match="one process only"):
        ExactGrower(None, TwoRanks(), dg.params.parse_params({"tree_method": "exact"}), None, None)


def test_the_memory_estimate_is_eight_bytes_a_present_value_plus_the_row_arrays():
    from dgboost.backend.exact_engines import exact_memory_estimate

    assert exact_memory_estimate(1000, 5000) == 8 * 5000 + 12 * 1000


def test_exact_training_computes_quantile_cuts_only_for_a_checkpoints_fingerprint(monkeypatch, tmp_path):
    from dgboost import _training_job

    X, y, _ = _random_set(11)
    params = {"tree_method": "exact", "max_depth": 3}
    expected = dg.train(params, dg.DMatrix(X, label=y), 3).save_raw("json")
    calls = []
    real = _training_job.compute_cuts
    monkeypatch.setattr(_training_job, "compute_cuts", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert dg.train(params, dg.DMatrix(X, label=y), 3).save_raw("json") == expected
    assert calls == []  # exact growth bins nothing
    dg.train(params, dg.DMatrix(X, label=y), 2, checkpoint_dir=tmp_path, checkpoint_every=1)
    assert calls == [1]  # the fingerprint a checkpoint holds
    # resuming checks the data's cuts against the checkpoint's and ends with the same model
    resumed = dg.train(params, dg.DMatrix(X, label=y), 3, checkpoint_dir=tmp_path, checkpoint_every=1, resume=True)
    assert resumed.save_raw("json") == expected
    assert calls == [1, 1]


# -- the GPU kernels' algorithm, in NumPy ----------------------------------------------------
def _random_set(seed, n=70):
    """Integer-valued columns (many ties), a constant and an empty column, missing values, weights."""
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 5, size=(n, 5)).astype(np.float32)
    X[:, 1] = rng.normal(size=n).astype(np.float32)
    X[rng.random(X.shape) < 0.2] = np.nan
    X[:, 2] = rng.integers(0, 4, size=n)  # dense: scanned backward only (missing values left)
    X[:, 3] = 2.0  # constant
    X[:, 4] = np.nan  # empty
    y = (np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) * 0.5 + rng.normal(size=n)).astype(np.float32)
    w = rng.uniform(0.5, 2, size=n).astype(np.float32)
    return X, y, w


@pytest.mark.parametrize("mode", ["interleaved", "sorted"])
@pytest.mark.parametrize("seed, depth", [(0, 1), (1, 3), (2, 5)])
def test_the_gpu_kernels_algorithm_gives_the_cpu_engines_trees(monkeypatch, mode, seed, depth):
    from dgboost import exact_greedy
    from dgboost.testing.exact_reference import TwinExactEngine

    X, y, w = _random_set(seed)
    params = {"tree_method": "exact", "max_depth": depth, "subsample": 0.8, "min_child_weight": 0.5, "seed": seed}
    expected = dg.train(params, dg.DMatrix(X, label=y, weight=w), 2).save_raw("json")
    monkeypatch.setattr(exact_greedy, "exact_engine", lambda backend, values: TwinExactEngine(values, mode))
    assert dg.train(params, dg.DMatrix(X, label=y, weight=w), 2).save_raw("json") == expected


@pytest.mark.parametrize("mode", ["interleaved", "sorted"])
def test_the_gpu_kernels_algorithm_keeps_monotone_and_interaction_constraints(monkeypatch, mode):
    from dgboost import exact_greedy
    from dgboost.testing.exact_reference import TwinExactEngine

    X, y, w = _random_set(5)
    params = {
        "tree_method": "exact",
        "max_depth": 3,
        "monotone_constraints": "(1,0,0,0,0)",
        "interaction_constraints": [[0, 1], [1, 2]],
    }
    expected = dg.train(params, dg.DMatrix(X, label=y), 2).save_raw("json")
    monkeypatch.setattr(exact_greedy, "exact_engine", lambda backend, values: TwinExactEngine(values, mode))
    assert dg.train(params, dg.DMatrix(X, label=y), 2).save_raw("json") == expected


def test_exact_with_categorical_features_is_refused_clearly():
    X = np.array([[0, 1.0], [1, 2.0], [2, 3.0], [1, 0.0]] * 10, np.float32)
    dtrain = dg.DMatrix(X, label=np.arange(40.0), feature_types=["c", "q"])
    with pytest.raises(DGBoostValueError, match="tree_method='exact' has no categorical splits"):
        dg.train({"tree_method": "exact"}, dtrain, 1)
