"""GPU TreeSHAP of trees with categorical splits is bitwise the CPU engine's.

The CPU engine is checked against brute force and XGBoost in tests/cpu/test_categorical_shap.py;
the GPU kernels (kernels/treeshap_rows.cu, treeshap_interventional.cu) read the same category
sets (kernels/path_element.cuh) and so must give the same bits: SHAP values by the table, the
quadrature and the path method, interaction values in every kernel layout, interventional values,
for hand-built models (one-hot and partition splits, repeated splits on a feature, a 4,000
category feature, invalid and unseen codes, NaN) and for models trained on category columns.
"""

from __future__ import annotations

import numpy as np
import pytest

import dgboost as dg
from dgboost.testing.shap_checks import assert_bitwise as _bitwise
from dgboost.testing.shap_oracle import random_categorical_ensemble, random_categorical_rows

pytestmark = pytest.mark.gpu

BUDGET = 256 << 20  # one weight-table budget for both devices (their defaults differ)

# (seed, categories per feature (0: numeric), trees, depth, groups)
CASES = [
    (0, [5, 0, 2, 40], 20, 6, 1),
    (1, [4000, 0, 12, 0, 3], 15, 8, 1),  # a tailnum-sized feature: 125-word sets
    (2, [70, 70, 0, 9], 10, 5, 3),
    (3, [2, 2, 2, 2, 100, 0], 8, 16, 1),  # deep: paths of up to 16 elements
]


def _case(seed, n_categories, n_trees, depth, groups, n_rows=900, finite=False):
    rng = np.random.default_rng(seed)
    ens = random_categorical_ensemble(rng, n_categories, n_trees=n_trees, max_depth=depth, n_groups=groups)
    X = random_categorical_rows(rng, n_rows, n_categories)
    background = random_categorical_rows(rng, 40, n_categories)
    if finite:  # the explainer refuses infinite values; the engines take them (an invalid category)
        X[np.isinf(X)] = 1e30
        background[np.isinf(background)] = -1e30
    return ens, X, background


# the engines, on rows with +-inf, huge, negative, non-integer and unseen codes and NaN
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("budget,quad_max_k", [(BUDGET, None), (0, None), (0, 0)])
def test_gpu_shap_values_of_categorical_trees_are_bitwise_the_cpus(case, budget, quad_max_k):
    from dgboost.backend._cuda_treeshap import shap_values_device
    from dgboost.explain import extract_paths, shap_values_path, shap_values_table

    ens, X, _ = _case(*case)
    table = extract_paths(ens)
    assert table.has_categorical
    if quad_max_k == 0:  # the path method everywhere
        want = shap_values_path(table, X)
    else:  # weight tables where the budget holds them, the quadrature for the other paths
        want = shap_values_table(table, X, max_table_bytes=budget)
    _bitwise(shap_values_device(table, X, budget, quad_max_k=quad_max_k), want)


@pytest.mark.parametrize("case", CASES)
def test_gpu_shap_values_of_few_rows_summed_by_slices_are_the_cpus(case):
    from dgboost.backend._cuda_treeshap import shap_values_device
    from dgboost.explain import extract_paths, shap_values_table

    ens, X, _ = _case(*case, n_rows=7)
    table = extract_paths(ens)
    _bitwise(shap_values_device(table, X, BUDGET), shap_values_table(table, X, max_table_bytes=BUDGET))


@pytest.mark.parametrize("case", CASES)
def test_gpu_interaction_values_of_categorical_trees_are_bitwise_the_cpus(case):
    from dgboost.backend._cuda_treeshap import shap_interactions_device
    from dgboost.explain import extract_paths, shap_interactions

    ens, X, _ = _case(*case, n_rows=300)
    table = extract_paths(ens)
    _bitwise(shap_interactions_device(table, X), shap_interactions(table, X))


@pytest.mark.parametrize("layout", [None, ("warp-out", 8, 0), ("rows", 0, 0)])
@pytest.mark.parametrize("F", [6, 45])
def test_interactions_in_every_kernel_layout_are_the_cpus(monkeypatch, F, layout):
    from dgboost.backend import _cuda_treeshap

    if layout is not None:
        monkeypatch.setattr(_cuda_treeshap, "_interaction_layout", lambda F, n, G: layout)
    n_categories = [0] * F
    n_categories[0], n_categories[3], n_categories[F - 1] = 300, 5, 2
    ens, X, _ = _case(4, n_categories, 10, 7, 2, n_rows=260, finite=True)
    cpu = dg.TreeExplainer(ens).contributions(X, interactions=True)
    _bitwise(dg.TreeExplainer(ens, device="cuda").contributions(X, interactions=True), cpu)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("transform", [None, "logistic"])
def test_gpu_interventional_values_of_categorical_trees_are_bitwise_the_cpus(case, transform):
    from dgboost.backend._cuda_interventional import shap_values_interventional_device
    from dgboost.explain import extract_paths, shap_values_interventional

    ens, X, background = _case(*case, n_rows=500)
    if transform is not None and ens.n_groups > 1:
        pytest.skip("the logistic transform explains one output")
    table = extract_paths(ens)
    want = shap_values_interventional(table, X, background, transform=transform)
    _bitwise(shap_values_interventional_device(table, X, background, transform), want)


@pytest.mark.parametrize("case", CASES[:2])
def test_explainers_of_categorical_trees_on_the_gpu_are_the_cpus(case):
    ens, X, background = _case(*case, finite=True)
    for kw in ({}, {"algorithm": "path"}, {"data": background}):
        cpu = dg.TreeExplainer(ens, max_table_bytes=BUDGET, **kw)
        gpu = dg.TreeExplainer(ens, device="cuda", max_table_bytes=BUDGET, **kw)
        _bitwise(gpu.contributions(X), cpu.contributions(X))


def _trained(objective="binary:logistic", n=4000, seed=0):
    import pandas as pd

    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "distance": rng.normal(size=n),
            "carrier": pd.Categorical(rng.choice([f"c{i}" for i in range(16)], size=n)),
            "origin": pd.Categorical(rng.choice(["EWR", "JFK", "LGA"], size=n)),
            "tailnum": pd.Categorical(rng.choice([f"N{i}" for i in range(3000)], size=n)),
        }
    )
    frame.loc[rng.random(n) < 0.1, "tailnum"] = np.nan
    signal = frame["distance"] + frame["carrier"].cat.codes % 3 + (frame["tailnum"].cat.codes % 11 == 0)
    y = (signal + 0.3 * rng.normal(size=n) > 1.5).astype(np.float64)
    params = {"objective": objective, "max_depth": 8, "max_cat_to_onehot": 4}
    return dg.train(params, dg.DMatrix(frame, label=y, enable_categorical=True), 30), frame


def test_a_model_trained_on_category_columns_is_explained_on_the_gpu_like_the_cpu():
    booster, frame = _trained()
    cpu = dg.TreeExplainer(booster, max_table_bytes=BUDGET)
    gpu = dg.TreeExplainer(booster, device="cuda", max_table_bytes=BUDGET)
    assert cpu.table.has_categorical
    _bitwise(gpu.shap_values(frame), cpu.shap_values(frame))
    _bitwise(gpu.shap_interaction_values(frame.iloc[:300]), cpu.shap_interaction_values(frame.iloc[:300]))
    background = frame.iloc[:50]
    _bitwise(
        dg.TreeExplainer(booster, data=background, device="cuda").shap_values(frame.iloc[:400]),
        dg.TreeExplainer(booster, data=background).shap_values(frame.iloc[:400]),
    )
    margin = booster.predict(frame, output_margin=True)
    np.testing.assert_allclose(gpu.shap_values(frame).sum(1) + gpu.expected_value, margin, rtol=1e-5, atol=1e-5)


def test_booster_predict_contributions_of_a_categorical_model_run_on_the_gpu_with_the_cpus_bits():
    import cupy

    booster, frame = _trained()
    rows = frame.iloc[:500]
    gpu_booster = booster.copy()
    gpu_booster.set_param({"device": "cuda"})
    for kw in ({"pred_contribs": True}, {"pred_interactions": True}):
        got = gpu_booster.predict(rows, **kw)
        got = got.get() if isinstance(got, cupy.ndarray) else got
        _bitwise(got, booster.predict(rows, **kw))  # float32 of bitwise-equal float64 values
