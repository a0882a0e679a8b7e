"""``predict(pred_contribs=True, approx_contribs=True)``: XGBoost's approximate (Saabas)
contributions, held to XGBoost 3.4.1's own output on the same trees."""

from __future__ import annotations

import numpy as np
import pytest
import xgboost

import dgboost as dg
from dgboost.datasets import make_synthetic
from dgboost.explain.saabas import node_mean_values


def _xgboost_model(task: str, classes: int = 1, rounds: int = 6, depth: int = 4):
    extra = {"n_classes": classes} if classes > 1 else {}
    X, y, _ = make_synthetic(600, 7, task=task, missing_rate=0.15, seed=4, **extra)
    objective = {"regression": "reg:squarederror", "binary": "binary:logistic", "multiclass": "multi:softprob"}[task]
    params = {"objective": objective, "max_depth": depth, "tree_method": "hist", "seed": 0}
    if classes > 1:
        params["num_class"] = classes
    model = xgboost.train(params, xgboost.DMatrix(X, y), rounds)
    return model, X.astype(np.float32)


@pytest.mark.parametrize("task,classes", [("regression", 1), ("binary", 1), ("multiclass", 3)])
def test_approximate_contributions_are_xgboosts_on_the_same_trees(task, classes):
    model, X = _xgboost_model(task, classes)
    ours = dg.Booster.from_xgboost(model).predict(dg.DMatrix(X), pred_contribs=True, approx_contribs=True)
    theirs = model.predict(xgboost.DMatrix(X), pred_contribs=True, approx_contribs=True)
    assert ours.dtype == np.float32 and ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    # approximate, not SHAP: the exact values differ on these trees
    exact = model.predict(xgboost.DMatrix(X), pred_contribs=True)
    assert np.abs(exact - theirs).max() > 1e-3


def test_approximate_contributions_take_the_base_margin_and_the_tree_range_as_xgboost():
    model, X = _xgboost_model("binary", rounds=8)
    margin = np.linspace(-1.0, 1.0, len(X)).astype(np.float32)
    ours = dg.Booster.from_xgboost(model).predict(
        dg.DMatrix(X, base_margin=margin), pred_contribs=True, approx_contribs=True, iteration_range=(0, 5)
    )
    theirs = model.predict(
        xgboost.DMatrix(X, base_margin=margin), pred_contribs=True, approx_contribs=True, iteration_range=(0, 5)
    )
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_approximate_interaction_values_are_xgboosts_the_contributions_on_the_diagonal():
    model, X = _xgboost_model("multiclass", classes=3)
    ours = dg.Booster.from_xgboost(model).predict(dg.DMatrix(X[:50]), pred_interactions=True, approx_contribs=True)
    theirs = model.predict(xgboost.DMatrix(X[:50]), pred_interactions=True, approx_contribs=True)
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_approximate_contributions_of_a_dgboost_model_sum_to_its_margins_and_match_its_xgboost_copy():
    X, y, _ = make_synthetic(800, 6, task="regression", missing_rate=0.1, seed=7)
    booster = dg.train({"objective": "reg:squarederror", "max_depth": 5}, dg.DMatrix(X, y), 10, verbose_eval=False)
    ours = booster.predict(dg.DMatrix(X), pred_contribs=True, approx_contribs=True)
    margin = booster.predict(dg.DMatrix(X), output_margin=True)
    np.testing.assert_allclose(ours.sum(axis=1), margin, rtol=1e-5, atol=1e-5)
    theirs = booster.to_xgboost().predict(xgboost.DMatrix(X), pred_contribs=True, approx_contribs=True)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_a_node_mean_value_is_the_cover_weighted_mean_of_its_childrens_in_float32():
    # one tree: root 0 -> (1, 2), node 1 -> (3, 4); leaves 2, 3, 4
    left = np.array([1, 3, -1, -1, -1])
    right = np.array([2, 4, -1, -1, -1])
    parent = np.array([-1, 0, 0, 1, 1])
    cover = np.array([10.0, 6.0, 4.0, 2.0, 4.0])
    value = np.array([0.0, 0.0, 0.5, -1.0, 2.0])
    mean = node_mean_values(cover, value, left, right, parent, np.array([0, 5]))
    node1 = np.float32((np.float32(-1.0) * np.float32(2.0) + np.float32(2.0) * np.float32(4.0)) / np.float32(6.0))
    root = np.float32((node1 * np.float32(6.0) + np.float32(0.5) * np.float32(4.0)) / np.float32(10.0))
    assert mean.dtype == np.float32
    assert mean.tolist() == [root, node1, 0.5, -1.0, 2.0]
