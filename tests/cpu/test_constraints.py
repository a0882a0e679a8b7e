"""Interaction constraints: XGBoost's rule, its trees, both growth policies, and clear errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
import xgboost as xgb  # declared test dependency: fail, never skip

import dgboost as dg
from dgboost.constraints import InteractionConstraints
from dgboost.errors import ParameterError

GROUPS = [[0, 1], [2, 3, 4]]
LOSSGUIDE = {"grow_policy": "lossguide", "max_leaves": 12, "max_depth": 0}


def _data(n=3000, seed=0):
    # integer features: both libraries' cuts are the distinct values, so the trees can be compared
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 20, size=(n, 6)).astype(np.float32)
    y = (X[:, 0] * X[:, 1] + X[:, 2] * X[:, 3] - 3 * X[:, 4] + rng.normal(size=n) * 5).astype(np.float32)
    return X, y


def _path_feature_sets(booster, tmp_path):
    path = tmp_path / "model.json"
    booster.save_model(str(path))
    trees = json.loads(path.read_text())["learner"]["gradient_booster"]["model"]["trees"]

    def walk(t, node, acc):
        if t["left_children"][node] == -1:
            return [set(acc)]
        acc = acc + [t["split_indices"][node]]
        return walk(t, t["left_children"][node], acc) + walk(t, t["right_children"][node], acc)

    return [s for t in trees for s in walk(t, 0, [])]


@pytest.mark.parametrize("policy", [{}, LOSSGUIDE], ids=["depthwise", "lossguide"])
def test_interaction_constraints_give_xgboosts_trees(policy, tmp_path):
    X, y = _data()
    params = {"objective": "reg:squarederror", "max_depth": 4, "eta": 0.3, "max_bin": 64, **policy}
    ours = dg.train({**params, "interaction_constraints": GROUPS}, dg.DMatrix(X, y), 6)
    theirs = xgb.train(
        {**params, "interaction_constraints": json.dumps(GROUPS), "tree_method": "hist"}, xgb.DMatrix(X, y), 6
    )
    assert _path_feature_sets(ours, tmp_path) == _path_feature_sets(theirs, tmp_path)
    np.testing.assert_allclose(ours.predict(dg.DMatrix(X)), theirs.predict(xgb.DMatrix(X)), rtol=1e-5, atol=1e-5)
    unconstrained = dg.train(params, dg.DMatrix(X, y), 6)
    assert np.abs(unconstrained.predict(dg.DMatrix(X)) - ours.predict(dg.DMatrix(X))).max() > 1.0


@pytest.mark.parametrize("policy", [{}, LOSSGUIDE], ids=["depthwise", "lossguide"])
def test_no_path_mixes_features_of_two_groups_with_names_and_column_sampling(policy, tmp_path):
    X, y = _data(seed=1)
    names = ["a", "b", "c", "d", "e", "f"]
    params = {
        "objective": "reg:squarederror",
        "max_depth": 5,
        "colsample_bynode": 0.7,
        "seed": 3,
        "interaction_constraints": '[["a", "b"], ["c", "d", "e"]]',
        **policy,
    }
    booster = dg.train(params, dg.DMatrix(X, y, feature_names=names), 8)
    for s in _path_feature_sets(booster, tmp_path):
        # one feature alone, or all within one group (f, in no group, can only split alone)
        assert len(s) <= 1 or s <= {0, 1} or s <= {2, 3, 4}, s


def test_the_allowed_features_follow_xgboosts_rule():
    c = InteractionConstraints(((0, 1), (1, 2, 3)), 5)
    assert c.allowed(frozenset()).all()  # the root: anything
    assert c.allowed(frozenset({1})).tolist() == [True, True, True, True, False]  # both groups hold 1
    assert c.allowed(frozenset({0})).tolist() == [True, True, False, False, False]
    assert c.allowed(frozenset({4})).tolist() == [False, False, False, False, True]  # in no group: itself
    assert c.allowed(frozenset({0, 2})).tolist() == [True, False, True, False, False]  # no group: the path only


@pytest.mark.parametrize(
    "bad,match",
    [
        ("[[0, 1], [2", "not a list of feature lists"),
        (5, "list of feature lists"),
        ([[0, 1.5]], "neither a feature index nor a name"),
        ([[0, 9]], "out of range"),
        ([["x", "zz"]], "does not have"),
    ],
)
def test_bad_interaction_constraints_are_refused_with_the_reason(bad, match):
    X, y = _data(n=200)
    with pytest.raises(ParameterError, match=match):
        dg.train({"interaction_constraints": bad}, dg.DMatrix(X, y, feature_names=list("xyzuvw")), 1)
