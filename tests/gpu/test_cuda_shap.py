"""GPU TreeSHAP (GPUTreeShap's warp kernel) gives the CPU engine's SHAP values.

The CPU engine is itself checked against brute-force Shapley values and XGBoost; here every
case compares device="cuda" with device="cpu" on the same explainer inputs (float64 sums in
another order: 1e-9 relative), and checks additivity against the model's margins.
"""
from __future__ import annotations

import numpy as np
import pytest

import dgboost as dg
from dgboost.datasets import make_synthetic

pytestmark = pytest.mark.gpu


def _model(objective="binary:logistic", depth=6, rounds=20, missing=0.15, n=3000, F=12, **extra):
    task = {"binary:logistic": "binary", "reg:squarederror": "regression"}.get(objective, "multiclass")
    X, y, _ = make_synthetic(n, F, task=task, missing_rate=missing, seed=3)
    params = {"objective": objective, "max_depth": depth, "max_bin": 64, **extra}
    if objective.startswith("multi"):
        params["num_class"] = int(y.max()) + 1
    return dg.train(params, dg.DMatrix(X, y), rounds), X


@pytest.mark.parametrize("objective,depth", [("binary:logistic", 6), ("reg:squarederror", 10),
                                             ("multi:softprob", 4), ("binary:logistic", 1)])
def test_gpu_shap_values_equal_the_cpu_engines(objective, depth):
    booster, X = _model(objective, depth)
    cpu = dg.TreeExplainer(booster)
    gpu = dg.TreeExplainer(booster, device="cuda")
    np.testing.assert_allclose(gpu.shap_values(X), cpu.shap_values(X), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(gpu.contributions(X), cpu.contributions(X), rtol=1e-9, atol=1e-9)


def test_gpu_shap_values_add_up_to_the_margin():
    booster, X = _model(depth=8, rounds=30)
    contribs = dg.TreeExplainer(booster, device="cuda").contributions(X)
    margin = booster.predict(dg.DMatrix(X), output_margin=True)
    np.testing.assert_allclose(contribs.sum(axis=2)[:, 0], margin, rtol=1e-5, atol=1e-5)


def test_paths_longer_than_a_warp_are_explained_too():
    from sklearn.tree import DecisionTreeRegressor

    rng = np.random.default_rng(0)
    X = rng.normal(size=(4000, 6)).astype(np.float32)
    y = np.sin(X[:, 0] * 9) + X[:, 1] * X[:, 2] + rng.normal(scale=0.01, size=len(X))
    tree = DecisionTreeRegressor(max_depth=None, min_samples_leaf=1, random_state=0).fit(X, y)
    assert tree.get_depth() > 32
    cpu = dg.TreeExplainer(tree).shap_values(X[:300])
    np.testing.assert_allclose(dg.TreeExplainer(tree, device="cuda").shap_values(X[:300]), cpu,
                               rtol=1e-9, atol=1e-9)


def test_an_imported_xgboost_model_is_explained_like_xgboost_on_the_gpu():
    import xgboost as xgb

    X, y, _ = make_synthetic(5000, 10, task="binary", missing_rate=0.1, seed=5)
    model = xgb.train({"objective": "binary:logistic", "max_depth": 7, "device": "cuda"},
                      xgb.DMatrix(X, y), 30)
    expected = model.predict(xgb.DMatrix(X), pred_contribs=True)
    got = dg.TreeExplainer(model, device="cuda").contributions(X)[:, 0, :]
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_no_rows_are_refused_as_on_the_cpu():
    booster, X = _model(depth=3, rounds=3)
    for device in ("cpu", "cuda"):
        with pytest.raises(dg.DGBoostValueError, match="X is empty"):
            dg.TreeExplainer(booster, device=device).contributions(X[:0])


def test_outputs_too_wide_for_a_shared_memory_tile_take_the_direct_kernel(monkeypatch):
    from dgboost.explain import gpu

    booster, X = _model("multi:softprob", 4, rounds=5)
    expected = dg.TreeExplainer(booster).contributions(X[:500])
    monkeypatch.setattr(gpu, "_TILE_BYTES", 8)  # no tile fits: shap_path_warp
    np.testing.assert_allclose(dg.TreeExplainer(booster, device="cuda").contributions(X[:500]), expected,
                               rtol=1e-9, atol=1e-9)
