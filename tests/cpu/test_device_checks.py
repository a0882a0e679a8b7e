"""The device checks of ``dgboost.testing`` run on the CPU, and fail when models differ.

On the CPU every ``check_*`` helper compares the CPU with itself, so these tests mostly
exercise the helpers' code; the ``..._fails_...`` tests make sure a check cannot pass
silently when the models (or errors) really differ. ``tests/gpu/test_cuda_training.py``
calls the same helpers with ``device="cuda"``.
"""

import json

import numpy as np
import pytest

import dgboost as dg
from dgboost.datasets import make_synthetic
from dgboost.testing import (
    assert_same_trees,
    check_matches_cpu_metric,
    check_prediction_matches_reference,
    check_raises_like_cpu,
    check_same_trees_as_cpu,
    check_training_is_deterministic,
    checks,
    normalised_model_json,
    round_significant,
)

BINARY = {"objective": "binary:logistic", "max_depth": 4, "eta": 0.3, "max_bin": 64}


def _binary(n=2000, f=10, missing=0.2, seed=0):
    X, y, _ = make_synthetic(n, f, task="binary", missing_rate=missing, seed=seed)
    return X, y


def _model(params=BINARY, rounds=4, **kw):
    X, y = _binary(**kw)
    return dg.train(params, dg.DMatrix(X, y), rounds, verbose_eval=False)


@pytest.mark.parametrize(
    "params",
    [
        BINARY,
        {**BINARY, "grow_policy": "lossguide", "max_leaves": 9, "max_depth": 0},
        {
            **BINARY,
            "subsample": 0.8,
            "colsample_bytree": 0.8,
            "colsample_bylevel": 0.7,
            "colsample_bynode": 0.9,
            "alpha": 0.5,
            "max_delta_step": 0.7,
            "min_child_weight": 3,
            "seed": 5,
        },
    ],
)
def test_a_cpu_model_has_the_same_trees_as_the_cpu(params):
    X, y = _binary()
    check_same_trees_as_cpu("cpu", X, y, params, 4)


def test_the_same_trees_check_takes_weights_groups_and_several_outputs():
    X, y, group = make_synthetic(1000, 8, task="ranking", seed=1)
    check_same_trees_as_cpu("cpu", X, y, {"objective": "rank:ndcg", "max_depth": 3}, 3, group=group)
    X, y, _ = make_synthetic(1500, 8, task="multiclass", n_classes=4, seed=2)
    w = np.random.default_rng(0).uniform(0.5, 2.0, len(y)).astype(np.float32)
    model = check_same_trees_as_cpu(
        "cpu", X, y, {"objective": "multi:softprob", "num_class": 4, "max_depth": 3}, 3, weight=w
    )
    assert model.ensemble.n_trees == 12


def test_training_on_the_cpu_is_deterministic():
    X, y = _binary()
    check_training_is_deterministic("cpu", X, y, {**BINARY, "subsample": 0.7, "colsample_bynode": 0.5}, 4)


@pytest.mark.parametrize(
    "task, params",
    [
        ("binary", BINARY),
        ("multiclass", {"objective": "multi:softprob", "num_class": 3, "max_depth": 3}),
    ],
)
def test_cpu_predictions_match_the_reference_tree_walker(task, params):
    X, y, _ = make_synthetic(1500, 8, task=task, missing_rate=0.1, seed=3)
    booster = dg.train(params, dg.DMatrix(X, y), 5, verbose_eval=False)
    check_prediction_matches_reference("cpu", booster, X)


def test_the_prediction_check_leaves_the_callers_booster_alone():
    booster = _model()
    before = booster.to_json()
    check_prediction_matches_reference("cpu", booster, _binary()[0][:100])
    assert booster.to_json() == before


def test_cpu_metrics_match_the_cpu_metrics():
    X, y = _binary()
    log = check_matches_cpu_metric("cpu", X, y, {**BINARY, "eval_metric": ["logloss", "auc"]}, 3)
    assert len(log["train"]["auc"]) == 3


def test_bad_input_raises_the_same_error_on_the_cpu_twice():
    X, y = _binary(n=200)
    bad = np.where(np.arange(len(y)) == 7, np.nan, y)
    err = check_raises_like_cpu("cpu", lambda device: dg.train({**BINARY, "device": device}, dg.DMatrix(X, bad), 1))
    assert "NaN" in str(err)


# -- the checks must fail when the models differ ----------------------------------------
def test_the_tree_check_fails_for_models_of_different_depth_and_names_the_first_difference():
    shallow, deep = _model({**BINARY, "max_depth": 2}), _model({**BINARY, "max_depth": 4})
    with pytest.raises(
        AssertionError,
        match=r"^tree 0: \d+ nodes \(cuda\) vs \d+ \(cpu\); first "
        r"difference at tree 0, node \d+: left child",
    ):
        assert_same_trees(deep, shallow, names=("cuda", "cpu"))


def test_the_tree_check_fails_for_a_different_number_of_trees():
    with pytest.raises(AssertionError, match="number of trees: 3 .* vs 4"):
        assert_same_trees(_model(rounds=3), _model(rounds=4))


def test_the_tree_check_fails_for_a_different_split_value():
    a = _model()
    b = a.copy()
    inner = np.flatnonzero(b.ensemble.feature >= 0)
    b.ensemble.split_value[inner[3]] = np.nextafter(b.ensemble.split_value[inner[3]], np.float32(np.inf))
    with pytest.raises(AssertionError, match=r"tree \d+, node \d+: split value"):
        assert_same_trees(b, a)


def test_the_tree_check_fails_for_a_different_split_bin_alone():
    X, y = _binary()
    a, bins = checks._fit("cpu", X, y, BINARY, 3)
    other = [b.copy() for b in bins]
    other[2][0] += 1
    with pytest.raises(AssertionError, match=r"tree 2, node 0: split bin \d+ \(model\) vs \d+ \(reference\)"):
        assert_same_trees(a, a, split_bins=(other, bins))


def test_split_bins_recorded_in_training_equal_those_recovered_from_the_cuts():
    X, y = _binary()
    booster, recorded = checks._fit("cpu", X, y, BINARY, 3)
    recovered = checks._split_bins_from_cuts(booster, dg.DMatrix(X, y), BINARY)
    assert all(np.array_equal(a, b) for a, b in zip(recorded, recovered))
    assert all((b >= 0).sum() == (t.feature >= 0).sum() for b, t in zip(recorded, booster.ensemble.trees()))


def test_the_tree_check_fails_for_a_leaf_value_beyond_one_in_a_million():
    a = _model()
    b = a.copy()
    leaf = int(np.flatnonzero(b.ensemble.left < 0)[5])
    b.ensemble.value[leaf] *= np.float32(1 + 1e-5)
    with pytest.raises(AssertionError, match=r"tree \d+, node \d+: leaf value .* > 1e-06"):
        assert_same_trees(b, a)


def test_the_tree_check_accepts_leaf_values_equal_to_six_significant_digits():
    a = _model()
    b = a.copy()
    leaf = int(np.flatnonzero(b.ensemble.left < 0)[5])
    a.ensemble.value[leaf] = np.float32(0.12345671)
    b.ensemble.value[leaf] = np.float32(0.12345674)
    assert_same_trees(b, a)


def test_the_tree_check_fails_for_a_difference_only_the_saved_json_shows():
    a = _model()
    b = a.copy()
    b.ensemble.gain[b.ensemble.offsets()[1] + 2] += np.float32(0.5)
    with pytest.raises(AssertionError, match=r"saved JSON differs .* at ensemble\.gain\[\d+\] \(tree 1, node 2\)"):
        assert_same_trees(b, a)
    c = a.copy()
    c.meta["base_score"] = 0.25
    with pytest.raises(AssertionError, match=r"learner\.base_score"):
        assert_same_trees(c, a)


def test_the_normalised_json_ignores_the_device_and_rounds_only_leaf_values():
    booster = _model()
    doc = normalised_model_json(booster)
    raw = json.loads(booster.to_json())
    assert "device" not in doc["learner"]["params"] and "device" in raw["learner"]["params"]
    assert doc["ensemble"]["value"] == [round_significant(v) for v in raw["ensemble"]["value"]]
    assert doc["ensemble"]["gain"] == raw["ensemble"]["gain"]
    assert doc["ensemble"]["value"] != raw["ensemble"]["value"]


@pytest.mark.parametrize(
    "x, expected",
    [
        (0.123456789, 0.123457),
        (-98765.4321, -98765.4),
        (1.0000004e-12, 1e-12),
        (0.0, 0.0),
        (2.5, 2.5),
    ],
)
def test_rounding_keeps_six_significant_digits(x, expected):
    assert round_significant(x) == expected


def test_the_determinism_check_fails_when_two_runs_differ(monkeypatch):
    X, y = _binary(n=500)
    seeds = iter([1, 2])
    real_fit = checks._fit

    def fit_with_changing_seed(device, X, y, params, *args, **kwargs):
        return real_fit(device, X, y, {**params, "seed": next(seeds)}, *args, **kwargs)

    monkeypatch.setattr(checks, "_fit", fit_with_changing_seed)
    with pytest.raises(AssertionError, match="two training runs on cpu differ at ensemble"):
        check_training_is_deterministic("cpu", X, y, {**BINARY, "colsample_bytree": 0.5}, 3)


def test_the_error_check_fails_when_the_messages_or_types_differ():
    calls = iter([dg.DGBoostValueError("label contains NaN"), dg.DGBoostValueError("label has NaN")])

    def raise_next(device):
        raise next(calls)

    with pytest.raises(AssertionError, match="on cpu: DGBoostValueError"):
        check_raises_like_cpu("cpu", raise_next)
    types = iter([dg.DGBoostValueError("x"), dg.DGBoostTypeError("x")])

    def raise_type(device):
        raise next(types)

    with pytest.raises(AssertionError, match="DGBoostTypeError"):
        check_raises_like_cpu("cpu", raise_type)


def test_the_error_check_fails_when_nothing_is_raised_or_the_error_is_not_dgboosts():
    with pytest.raises(AssertionError, match="no error was raised on cpu"):
        check_raises_like_cpu("cpu", lambda device: None)
    with pytest.raises(AssertionError, match="is not a DGBoostError"):
        check_raises_like_cpu("cpu", lambda device: 1 / 0)


def test_the_prediction_check_fails_for_a_model_that_predicts_something_else(monkeypatch):
    booster = _model()
    real = checks._on_device

    def shifted(b, device):
        out = real(b, device)
        out.ensemble.base_margin = out.ensemble.base_margin + 0.01
        return out

    monkeypatch.setattr(checks, "_on_device", shifted)
    with pytest.raises(AssertionError, match="margin on cpu: row 0, output 0"):
        check_prediction_matches_reference("cpu", booster, _binary()[0][:50])
