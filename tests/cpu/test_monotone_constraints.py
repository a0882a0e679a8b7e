"""Monotone constraints: monotone models, XGBoost's trees, every accepted form, clear errors,
models XGBoost loads, and unconstrained training left exactly as it was."""

from __future__ import annotations

import hashlib
import json
from types import SimpleNamespace

import numpy as np
import pytest
import xgboost as xgb  # declared test dependency: fail, never skip

import dgboost as dg
from dgboost._layout import DEFAULT_LEFT, FEATURE, GAIN, LEFT_G, LEFT_H, SPLIT_BIN
from dgboost.backend.cpu import CPUBackend
from dgboost.constraints import parse_monotone_constraints, resolve_monotone_constraints
from dgboost.errors import DGBoostValueError, ParameterError
from dgboost.testing import kernel_reference as ref
from dgboost.testing.kernel_inputs import binning_data, node_records

LOSSGUIDE = {"grow_policy": "lossguide", "max_leaves": 16, "max_depth": 0}
POLICIES = {
    "depthwise": {"max_depth": 5},
    "lossguide": LOSSGUIDE,
    "lossguide-depth-limit": {"grow_policy": "lossguide", "max_leaves": 24, "max_depth": 4},
    "depthwise-max_leaves": {"max_depth": 5, "max_leaves": 12},
}
SIGNS = (1, -1, 1, 0, -1, 0)
BACKEND = CPUBackend()


def _integer_data(n=3000, seed=0):
    """Integer features: both libraries' cuts are the distinct values, so trees can be compared.
    The target rises with feature 0, falls with 1 and wiggles in 2 (so constraints bind)."""
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 20, size=(n, 6)).astype(np.float32)
    y = (
        0.5 * X[:, 0] - 0.3 * X[:, 1] + 3 * np.sin(X[:, 2]) + 0.05 * X[:, 3] * X[:, 4] + 2 * rng.normal(size=n)
    ).astype(np.float32)
    return X, y


def _real_data(n=3000, seed=1, missing=0.1):
    """Real-valued features with missing values; the target breaks monotonicity on purpose."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5)).astype(np.float32)
    y = (np.sin(3 * X[:, 0]) + X[:, 0] - X[:, 1] ** 2 + 0.5 * X[:, 2] * X[:, 3] + 0.3 * rng.normal(size=n)).astype(
        np.float32
    )
    X[rng.random(X.shape) < missing] = np.nan
    return X, y


def _sweep(predict, rows, feature, grid):
    """Predictions (len(rows), len(grid)[, outputs]) with ``feature`` set to each grid value."""
    Z = np.repeat(rows, len(grid), axis=0)
    Z[:, feature] = np.tile(grid, len(rows))
    out = predict(Z)
    return out.reshape((len(rows), len(grid)) + out.shape[1:])


def _assert_monotone(predict, rows, signs):
    grid = np.linspace(-3.5, 3.5, 57, dtype=np.float32)
    for f, sign in enumerate(signs):
        if sign:
            steps = np.diff(_sweep(predict, rows, f, grid), axis=1) * sign
            assert steps.min() >= 0.0, f"feature {f} (sign {sign}) steps the wrong way by {steps.min()}"


def _trees(booster, tmp_path):
    path = tmp_path / "model.json"
    booster.save_model(str(path))
    return json.loads(path.read_text())["learner"]["gradient_booster"]["model"]["trees"]


def _ensemble_hash(booster) -> str:
    return hashlib.sha256(json.dumps(json.loads(booster.to_json())["ensemble"], sort_keys=True).encode()).hexdigest()


# -- (1) monotone predictions --------------------------------------------------------------
@pytest.mark.parametrize("policy", list(POLICIES))
def test_predictions_rise_along_increasing_features_and_fall_along_decreasing_ones(policy):
    X, y = _real_data()
    signs = (1, -1, 0, 1, 0)
    booster = dg.train(
        {"objective": "reg:squarederror", "eta": 0.3, "monotone_constraints": signs, **POLICIES[policy]},
        dg.DMatrix(X, y),
        25,
    )
    _assert_monotone(lambda Z: booster.predict(dg.DMatrix(Z)), X[:150], signs)
    unconstrained = dg.train({"objective": "reg:squarederror", "eta": 0.3, **POLICIES[policy]}, dg.DMatrix(X, y), 25)
    with pytest.raises(AssertionError):  # the data alone would not give a monotone model
        _assert_monotone(lambda Z: unconstrained.predict(dg.DMatrix(Z)), X[:150], signs)


def test_every_class_margin_of_a_multiclass_model_is_monotone():
    X, _ = _real_data(seed=2)
    s = np.nan_to_num(X[:, 0]) - np.nan_to_num(X[:, 1]) + np.sin(4 * np.nan_to_num(X[:, 2]))
    y = np.digitize(s, [-0.7, 0.7]).astype(np.float32)
    signs = (1, -1, 1)
    booster = dg.train(
        {"objective": "multi:softprob", "num_class": 3, "max_depth": 4, "monotone_constraints": signs},
        dg.DMatrix(X, y),
        12,
    )
    _assert_monotone(lambda Z: booster.predict(dg.DMatrix(Z), output_margin=True), X[:80], signs)


def test_every_quantile_of_a_multi_quantile_model_is_monotone():
    X, y = _real_data(seed=3)
    signs = (1, -1, 0, 0, -1)
    booster = dg.train(
        {
            "objective": "reg:quantileerror",
            "quantile_alpha": [0.2, 0.8],
            "max_depth": 4,
            "grow_policy": "lossguide",
            "max_leaves": 12,
            "monotone_constraints": signs,
        },
        dg.DMatrix(X, y),
        12,
    )
    _assert_monotone(lambda Z: booster.predict(dg.DMatrix(Z)), X[:80], signs)


# -- (2) XGBoost's trees --------------------------------------------------------------------
@pytest.mark.parametrize("policy", list(POLICIES))
@pytest.mark.parametrize(
    "extra",
    [{}, {"alpha": 2.0, "max_delta_step": 0.4}, {"lambda": 3.0, "min_child_weight": 5, "gamma": 2.0}],
    ids=["plain", "alpha-max_delta_step", "lambda-mcw-gamma"],
)
def test_constrained_trees_equal_xgboost_hist_trees(policy, extra, tmp_path):
    X, y = _integer_data()
    params = {"objective": "reg:squarederror", "eta": 0.3, "max_bin": 64, **POLICIES[policy], **extra}
    ours = dg.train({**params, "monotone_constraints": SIGNS}, dg.DMatrix(X, y), 10)
    theirs = xgb.train(
        {**params, "monotone_constraints": "(1,-1,1,0,-1,0)", "tree_method": "hist"}, xgb.DMatrix(X, y), 10
    )
    for a, b in zip(_trees(ours, tmp_path), _trees(theirs, tmp_path), strict=True):
        for key in ("left_children", "split_indices", "default_left"):
            assert a[key] == b[key], key
        inner = np.asarray(a["left_children"]) >= 0
        ours_at, theirs_at = np.asarray(a["split_conditions"]), np.asarray(b["split_conditions"])
        np.testing.assert_array_equal(ours_at[inner], theirs_at[inner])  # thresholds
        np.testing.assert_allclose(ours_at[~inner], theirs_at[~inner], rtol=1e-5, atol=1e-6)  # leaf values
        np.testing.assert_allclose(a["loss_changes"], b["loss_changes"], rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(ours.predict(dg.DMatrix(X)), theirs.predict(xgb.DMatrix(X)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("policy", ["depthwise", "lossguide"])
def test_monotone_and_interaction_constraints_together_give_xgboosts_trees(policy, tmp_path):
    X, y = _integer_data(seed=2)
    params = {"objective": "reg:squarederror", "eta": 0.3, "max_bin": 64, **POLICIES[policy]}
    ours = dg.train(
        {**params, "monotone_constraints": SIGNS, "interaction_constraints": [[0, 1, 2], [2, 3, 4, 5]]},
        dg.DMatrix(X, y),
        8,
    )
    theirs = xgb.train(
        {
            **params,
            "monotone_constraints": "(1,-1,1,0,-1,0)",
            "tree_method": "hist",
            "interaction_constraints": "[[0, 1, 2], [2, 3, 4, 5]]",
        },
        xgb.DMatrix(X, y),
        8,
    )
    for a, b in zip(_trees(ours, tmp_path), _trees(theirs, tmp_path), strict=True):
        assert (a["left_children"], a["split_indices"]) == (b["left_children"], b["split_indices"])
    np.testing.assert_allclose(ours.predict(dg.DMatrix(X)), theirs.predict(xgb.DMatrix(X)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "objective, extra, signs",
    [
        ("binary:logistic", {}, (1, -1, 1, -1, 1, -1)),
        ("multi:softprob", {"num_class": 3}, (1, -1, 0, 0, 0, 0)),
        ("reg:quantileerror", {"quantile_alpha": [0.2, 0.8]}, (1, -1, 0, 0, 0, 0)),
    ],
)
def test_constrained_models_of_other_objectives_predict_as_xgboost_hist(objective, extra, signs):
    X, y = _integer_data(seed=4)
    if objective == "binary:logistic":
        y = (y > np.median(y)).astype(np.float32)
    elif objective == "multi:softprob":
        y = np.digitize(y, np.quantile(y, [0.33, 0.66])).astype(np.float32)
    params = {"objective": objective, "max_depth": 4, "eta": 0.3, "max_bin": 64, **extra}
    ours = dg.train({**params, "monotone_constraints": signs}, dg.DMatrix(X, y), 10)
    theirs = xgb.train(
        {**params, "tree_method": "hist", "monotone_constraints": str(signs).replace(" ", "")}, xgb.DMatrix(X, y), 10
    )
    np.testing.assert_allclose(
        ours.predict(dg.DMatrix(X), output_margin=True),
        theirs.predict(xgb.DMatrix(X), output_margin=True),
        rtol=1e-5,
        atol=1e-5,
    )


# -- growth modes and kernels ------------------------------------------------------------------
@pytest.mark.parametrize(
    "params",
    [
        {"max_depth": 6},
        {"max_depth": 4, "colsample_bylevel": 0.7, "subsample": 0.8},
        {"objective": "multi:softprob", "num_class": 3, "max_depth": 3},
    ],
)
def test_trees_grown_in_whole_levels_equal_trees_grown_level_by_level(params, monkeypatch):
    from dgboost import grower

    X, y = _real_data(seed=5)
    if params.get("num_class"):
        y = np.digitize(y, [-0.5, 0.5]).astype(np.float32)
    full = {"objective": "reg:squarederror", "seed": 5, "monotone_constraints": (1, -1, 0, 1, 0), **params}
    taken = []
    real = grower.TreeGrower._whole_levels
    monkeypatch.setattr(grower.TreeGrower, "_whole_levels", lambda self: taken.append(real(self)) or taken[-1])
    whole = dg.train(full, dg.DMatrix(X, y), 6)
    assert taken and all(taken)  # these parameters grow whole levels
    monkeypatch.setattr(grower.TreeGrower, "_whole_levels", lambda self: False)
    by_level = dg.train(full, dg.DMatrix(X, y), 6)
    assert whole.save_raw("json") == by_level.save_raw("json")


@pytest.mark.parametrize(
    "params", [{"max_leaves": 40, "max_depth": 5}, {"max_leaves": 63, "max_depth": 0, "subsample": 0.7}]
)
def test_lossguide_with_splits_computed_ahead_builds_the_strict_best_first_tree(params, monkeypatch):
    from dgboost.backend.base import LookaheadBudget
    from dgboost.backend.cpu import CPUBackend

    X, y = _real_data(seed=6)
    full = {"grow_policy": "lossguide", "seed": 2, "monotone_constraints": (1, -1, 0, 1, -1), **params}
    models = []
    for budget in (
        LookaheadBudget(nodes=256, levels=12, hist_bytes=256 << 20),
        LookaheadBudget(nodes=8, levels=1, hist_bytes=64 << 20),
        LookaheadBudget(nodes=1, levels=0, hist_bytes=0),
    ):
        monkeypatch.setattr(CPUBackend, "lookahead", budget)
        models.append(dg.train(full, dg.DMatrix(X, y), 5).save_raw("json"))
    assert models[0] == models[1] == models[2]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(
    "lam, alpha, mcw, mds, gamma", [(1.0, 0.0, 1.0, 0.0, 0.0), (0.0, 0.5, 0.0, 0.7, 2.0), (5.0, 0.5, 20.0, 0.0, 0.0)]
)
def test_constrained_split_evaluation_matches_the_reference(seed, lam, alpha, mcw, mds, gamma):
    rng, x, cuts = binning_data(seed, n=800)
    bins = BACKEND.bin_values(x, cuts.values, cuts.ptrs, np.dtype(np.uint8))
    scale = 2.0**26
    gpair = BACKEND.quantise(rng.normal(size=800), rng.uniform(0.1, 1.0, size=800), np.array([scale, scale]))
    hist = BACKEND.build_histograms(
        bins, cuts.ptrs, gpair, np.arange(800, dtype=np.int32), np.array([[0, 400], [0, 800], [100, 700]])
    )
    totals = np.stack([gpair[:400].sum(0), gpair.sum(0), gpair[100:700].sum(0)]).astype(np.int64)
    mask = rng.random((3, x.shape[1])) < 0.9
    p = SimpleNamespace(reg_lambda=lam, alpha=alpha, gamma=gamma, min_child_weight=mcw, max_delta_step=mds)
    monotone = rng.choice([-1, 0, 1], size=x.shape[1]).astype(np.int8)
    # unbounded, a tight band and a band that excludes every Newton weight's sign
    bounds = np.array([[-np.inf, np.inf], [-0.05, 0.02], [0.01, 0.3]])
    records = node_records([0, 0, 100], [400, 800, 700], sums=totals)
    BACKEND.evaluate_splits(
        hist, records, cuts.ptrs, mask, np.array([scale, scale]), p, bounds=bounds, monotone=monotone
    )
    want = ref.evaluate_splits(hist, totals, cuts.ptrs, mask, scale, scale, p, bounds=bounds, monotone=monotone)
    for i, (f, b, dl, gain, left) in enumerate(want):
        assert records[i, FEATURE] == f
        if f >= 0:
            assert (records[i, SPLIT_BIN], bool(records[i, DEFAULT_LEFT])) == (b, dl)
            assert records[i, GAIN : GAIN + 1].view(np.float64)[0] == pytest.approx(gain, rel=1e-9)
            assert (records[i, LEFT_G], records[i, LEFT_H]) == left
    got = BACKEND.child_bounds(records, bounds, monotone, np.array([scale, scale]), p)
    expected = ref.child_bounds(
        records[:, FEATURE], records[:, LEFT_G : LEFT_H + 1], totals, bounds, monotone, scale, scale, p
    )
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    assert (got[:, 0] <= got[:, 1]).all()


def test_leaf_values_are_clipped_into_bounds_replayed_from_the_tree():
    X, y = _real_data(seed=7)
    booster = dg.train({"monotone_constraints": (1, -1, 0, 0, 0), "max_depth": 5, "eta": 1.0}, dg.DMatrix(X, y), 3)
    ens = booster.ensemble
    off = ens.offsets()
    for t in range(ens.n_trees):
        lo, hi = int(off[t]), int(off[t + 1])
        left, right, feature, value = ens.left[lo:hi], ens.right[lo:hi], ens.feature[lo:hi], ens.value[lo:hi]

        def subtree_leaves(node):
            if left[node] < 0:
                return [float(value[node])]
            return subtree_leaves(left[node]) + subtree_leaves(right[node])

        for node in np.flatnonzero(left >= 0):
            sign = {0: 1, 1: -1}.get(int(feature[node]), 0)
            low, high = subtree_leaves(left[node]), subtree_leaves(right[node])
            if sign > 0:  # no leaf under the left child above any leaf under the right child
                assert max(low) <= min(high)
            elif sign < 0:
                assert min(low) >= max(high)


# -- (3) accepted forms and errors ----------------------------------------------------------
def test_every_accepted_form_gives_the_same_model():
    X, y = _integer_data(n=1500)
    names = ["a", "b", "c", "d", "e", "f"]
    forms = [
        SIGNS,
        list(SIGNS),
        np.array(SIGNS),
        "(1,-1,1,0,-1,0)",
        " (1, -1, 1, 0, -1, 0) ",
        "[1,-1,1,0,-1,0]",
        {"a": 1, "b": -1, "c": 1, "e": -1},
        (1, -1, 1, 0, -1),
    ]  # a shorter tuple: zeros after it
    hashes = {
        _ensemble_hash(
            dg.train({"max_depth": 4, "monotone_constraints": form}, dg.DMatrix(X, y, feature_names=names), 4)
        )
        for form in forms
    }
    assert len(hashes) == 1
    assert hashes != {_ensemble_hash(dg.train({"max_depth": 4}, dg.DMatrix(X, y, feature_names=names), 4))}


def test_the_scikit_learn_estimators_take_monotone_constraints():
    X, y = _integer_data(n=1500)
    model = dg.DGBRegressor(n_estimators=4, max_depth=4, monotone_constraints="(1,-1,1,0,-1,0)").fit(X, y)
    booster = dg.train({"max_depth": 4, "eta": 0.3, "monotone_constraints": SIGNS}, dg.DMatrix(X, y), 4)
    np.testing.assert_array_equal(model.predict(X), booster.predict(dg.DMatrix(X)))


@pytest.mark.parametrize(
    "bad, match",
    [
        ("1,0,-1", "not a parenthesised list"),
        ("(1,x,0)", r"item 1 \('x'\) is not an integer"),
        ((2, 0, 0), "item 0 is 2; each constraint must be -1"),
        ((0.5, 0, 0), "item 0 is 0.5, not an integer"),
        ((True, 0, 0), "item 0 is True, not an integer"),
        (5, "must be a sequence of -1/0/1 per feature"),
        ({"a": 2}, "feature 'a' is 2"),
        ({0: 1}, "dict keys must be feature names"),
    ],
)
def test_malformed_constraints_are_refused_before_any_data_is_read(bad, match):
    with pytest.raises(ParameterError, match=match):
        parse_monotone_constraints(bad)
    X, y = _integer_data(n=200)
    with pytest.raises(DGBoostValueError, match=match):
        dg.train({"monotone_constraints": bad}, dg.DMatrix(X, y, feature_names=list("abcdef")), 1)


@pytest.mark.parametrize(
    "bad, names, match",
    [
        (
            (1, 0, 0, 0, 0, 0, 1),
            None,
            "7 values but the data has 6 features: the size of monotone constraint should be "
            "less or equal to the number of features",
        ),
        ({"a": 1, "zz": -1}, list("abcdef"), r"names \['zz'\], which are not training data feature names"),
        ({"a": 1}, None, "the data has no feature names"),
    ],
)
def test_constraints_that_do_not_fit_the_data_are_refused_with_the_reason(bad, names, match):
    X, y = _integer_data(n=200)
    with pytest.raises(ParameterError, match=match):
        dg.train({"monotone_constraints": bad}, dg.DMatrix(X, y, feature_names=names), 1)


def test_unset_forms_mean_no_constraint():
    for unset in (None, "", "()", (), [], {}):
        assert parse_monotone_constraints(unset) is None
    assert resolve_monotone_constraints((0, 0, 0), 3) is None  # all free: the unconstrained engine
    np.testing.assert_array_equal(resolve_monotone_constraints((1,), 3), [1, 0, 0])


# -- (4) saved models -------------------------------------------------------------------------
def test_a_saved_constrained_model_loads_in_xgboost_with_the_same_predictions(tmp_path):
    X, y = _real_data(seed=8)
    booster = dg.train({"monotone_constraints": (1, -1, 0, 1, 0), "max_depth": 5}, dg.DMatrix(X, y), 10)
    path = tmp_path / "model.json"
    booster.save_model(str(path))
    loaded = xgb.Booster(model_file=str(path))
    np.testing.assert_allclose(loaded.predict(xgb.DMatrix(X)), booster.predict(dg.DMatrix(X)), rtol=1e-6, atol=1e-6)
    again = dg.Booster(model_file=str(path))
    assert again.meta["params"]["monotone_constraints"] == [1, -1, 0, 1, 0]
    np.testing.assert_array_equal(again.predict(dg.DMatrix(X)), booster.predict(dg.DMatrix(X)))


def test_the_configuration_carries_the_constraints_as_xgboost_writes_them():
    X, y = _integer_data(n=500)
    names = list("abcdef")
    by_name = dg.train({"monotone_constraints": {"b": -1, "a": 1}}, dg.DMatrix(X, y, feature_names=names), 2)
    theirs = xgb.train(
        {"tree_method": "hist", "monotone_constraints": {"b": -1, "a": 1}}, xgb.DMatrix(X, y, feature_names=names), 2
    )
    ours_text = json.loads(by_name.save_config())["learner"]["gradient_booster"]["tree_train_param"]
    theirs_text = json.loads(theirs.save_config())["learner"]["gradient_booster"]["tree_train_param"]
    assert ours_text["monotone_constraints"] == theirs_text["monotone_constraints"] == "(1,-1,0,0,0,0)"
    plain = dg.train({}, dg.DMatrix(X, y), 1)
    assert (
        json.loads(plain.save_config())["learner"]["gradient_booster"]["tree_train_param"]["monotone_constraints"]
        == "()"
    )
    # an XGBoost configuration restores them (for update/continued training)
    plain.load_config(theirs.save_config())
    assert plain.meta["params"]["monotone_constraints"] == [1, -1, 0, 0, 0, 0]


# -- (5) unconstrained training is unchanged ------------------------------------------------
def test_all_zero_constraints_train_exactly_the_unconstrained_model():
    X, y = _real_data(seed=9)
    for policy in (POLICIES["depthwise"], LOSSGUIDE):
        free = dg.train(policy, dg.DMatrix(X, y), 5)
        zeros = dg.train({**policy, "monotone_constraints": "(0,0,0,0,0)"}, dg.DMatrix(X, y), 5)
        assert _ensemble_hash(free) == _ensemble_hash(zeros)


# SHA-256 of the ensembles these parameters trained before monotone constraints existed:
# unconstrained training must keep giving these exact trees (if a deliberate change to the
# training algorithm alters them, record the new hashes with that change).
_BEFORE_MONOTONE = {
    "depthwise": ({"objective": "binary:logistic"}, "701237038be5213dcf2641e7f9293b754efae6f0e9832c9721b66b7b6f9984ec"),
    "lossguide": (
        {"objective": "binary:logistic", "grow_policy": "lossguide", "max_leaves": 20, "max_depth": 0},
        "254a97d6a213615abb61c0811e9627e093c1ad601c2b821217289ba29ec64ec8",
    ),
    "mds_alpha": (
        {"objective": "reg:squarederror", "max_delta_step": 0.5, "alpha": 1.0, "lambda": 2.0},
        "d9b379126aa172a32d5356ab0f9b8b889d585c50b8efaa522bf1f2dedc2dd4fd",
    ),
}


@pytest.mark.parametrize("case", list(_BEFORE_MONOTONE))
def test_unconstrained_trees_are_byte_identical_to_those_before_monotone_constraints(case):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(4000, 9)).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    binary = (np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) * np.nan_to_num(X[:, 2]) > 0).astype(np.float32)
    regression = (np.nan_to_num(X[:, 0]) * 2 - np.nan_to_num(X[:, 3]) + rng.normal(size=4000)).astype(np.float32)
    params, expected = _BEFORE_MONOTONE[case]
    y = binary if params["objective"] == "binary:logistic" else regression
    assert _ensemble_hash(dg.train(params, dg.DMatrix(X, y), 8)) == expected
