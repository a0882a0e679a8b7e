"""A small GPU TreeSHAP job for compute-sanitizer: weight tables built on the device, the table,
quadrature and path methods, a mixed budget, outputs too wide for shared accumulators, interaction values by
quadrature (half a warp or, for paths of at most 8 elements, a thread per row) and by the path method
(paths longer than 16), paths summed by slice (few rows: in
parallel), and interventional SHAP on the GPU
(kernels/treeshap_interventional.cu: margins and probabilities, shared and global accumulators),
and the SHAP, interaction and interventional kernels on trees with categorical splits.
``tests/gpu/run_sanitizer.sh`` runs it under memcheck and racecheck."""

import numpy as np

import dgboost
from dgboost.backend import _cuda_interventional as gpu_interventional
from dgboost.backend import _cuda_treeshap as gpu
from dgboost.datasets import make_synthetic
from dgboost.explain import treeshap

for params, task, extra in [
    ({"objective": "binary:logistic", "max_depth": 6}, "binary", {}),
    ({"objective": "multi:softprob", "num_class": 3, "max_depth": 4}, "multiclass", {"n_classes": 3}),
    ({"objective": "reg:squarederror", "max_depth": 18, "min_child_weight": 0}, "regression", {}),
]:
    X, y, _ = make_synthetic(1500, 10, task=task, missing_rate=0.2, seed=2, **extra)
    booster = dgboost.train({**params, "max_bin": 32}, dgboost.DMatrix(X, y), 4, verbose_eval=False)
    rows = X[:97]  # not a multiple of any block size
    for algorithm, budget in (("table", 1 << 28), ("path", 0), ("table", 0), ("auto", 16 << 10)):
        explainer = dgboost.TreeExplainer(booster, device="cuda", algorithm=algorithm, max_table_bytes=budget)
        explainer.contributions(rows)
    explainer = dgboost.TreeExplainer(booster, device="cuda")
    explainer.contributions(rows[:33], interactions=True)
    background = X[500:540]
    dgboost.TreeExplainer(booster, background, device="cuda").contributions(rows[:41])
    if task == "binary":
        dgboost.TreeExplainer(booster, background, device="cuda", model_output="probability").contributions(rows[:41])
        binary, binary_background, binary_rows = booster, background, rows

saved = gpu._ACC_SMEM_BYTES
gpu._ACC_SMEM_BYTES = 8  # every output accumulates in global memory
dgboost.TreeExplainer(booster, device="cuda").contributions(rows)
treeshap.SLICE_PATHS = 5  # many slices: few rows by slice (shared and global accumulators), many by row
dgboost.TreeExplainer(booster, device="cuda").contributions(rows)
gpu._ACC_SMEM_BYTES = saved
dgboost.TreeExplainer(booster, device="cuda").contributions(rows)
gpu._SLICES_BELOW = 0
dgboost.TreeExplainer(booster, device="cuda").contributions(rows)
treeshap.SLICE_PATHS = 1 << 14
gpu._SLICES_BELOW = 1 << 18
treeshap.INTERACTION_SLICE_PATHS = 5  # interactions by slice in every layout
for layout in (None, ("warp-out", 8, 0), ("rows", 0, 0)):
    chosen = gpu._interaction_layout
    if layout is not None:
        gpu._interaction_layout = lambda F, n, G, layout=layout: layout
    dgboost.TreeExplainer(booster, device="cuda").contributions(rows[:33], interactions=True)
    gpu._interaction_layout = chosen
chosen = gpu._interaction_layout
gpu._interaction_layout = lambda F, n, G: ("rows", 0, 0)
for below in (1 << 18, 0):  # paths of at most 8 elements: a thread per row, slices in blocks.z or in turn
    gpu._SLICES_BELOW = below
    dgboost.TreeExplainer(binary, device="cuda").contributions(binary_rows[:33], interactions=True)
gpu._interaction_layout = chosen
gpu._SLICES_BELOW = 0
dgboost.TreeExplainer(booster, device="cuda").contributions(rows[:33], interactions=True)
treeshap.INTERACTION_SLICE_PATHS = 1 << 12
gpu_interventional._ACC_SMEM_BYTES = 8  # interventional accumulators in global memory too
for output in ("raw", "probability"):
    dgboost.TreeExplainer(binary, binary_background, device="cuda", model_output=output).contributions(binary_rows[:41])
# categorical splits: category sets read from the pool by every kernel (kernels/path_element.cuh),
# on rows with unseen, negative, non-integer and infinite codes and NaN
from dgboost.explain import extract_paths  # noqa: E402
from dgboost.testing.shap_oracle import random_categorical_ensemble, random_categorical_rows  # noqa: E402

rng = np.random.default_rng(4)
cats = [4000, 0, 5, 70]
table = extract_paths(random_categorical_ensemble(rng, cats, n_trees=6, max_depth=7))
cat_rows = random_categorical_rows(rng, 97, cats)
cat_background = random_categorical_rows(rng, 23, cats)
for budget, quad in ((1 << 28, None), (0, None), (0, 0)):
    gpu.shap_values_device(table, cat_rows, budget, quad_max_k=quad)
gpu.shap_interactions_device(table, cat_rows[:33])
for transform in (None, "logistic"):
    gpu_interventional.shap_values_interventional_device(table, cat_rows[:41], cat_background, transform)
print("sanitized SHAP finished", np.__version__)
