"""GPU TreeSHAP (``kernels/treeshap_rows.cu``) gives the CPU engine's SHAP values bit for bit.

The CPU engine is itself checked against brute-force Shapley values and XGBoost; the GPU
kernel is the CPU's kernel with one thread per row, so with the same weight-table budget
every value is bitwise the CPU's, identical over reruns and whatever the batching of the
rows. Additivity is checked against the model's margins.
"""

from __future__ import annotations

import numpy as np
import pytest

import dgboost as dg
from dgboost.datasets import make_synthetic
from dgboost.testing.shap_checks import assert_bitwise as _bitwise
from dgboost.testing.shap_checks import small_model as _model

pytestmark = pytest.mark.gpu

BUDGET = 256 << 20  # one weight-table budget for both devices (their defaults differ)


@pytest.mark.parametrize("algorithm", ["table", "path"])
@pytest.mark.parametrize(
    "objective,depth",
    [
        ("binary:logistic", 6),
        ("reg:squarederror", 10),
        ("multi:softprob", 4),
        ("binary:logistic", 1),
        ("reg:squarederror", 3),
        ("binary:logistic", 16),
    ],
)
def test_gpu_shap_values_are_bitwise_the_cpu_engines(objective, depth, algorithm):
    booster, X = _model(objective, depth)
    cpu = dg.TreeExplainer(booster, algorithm=algorithm, max_table_bytes=BUDGET)
    gpu = dg.TreeExplainer(booster, algorithm=algorithm, device="cuda", max_table_bytes=BUDGET)
    _bitwise(gpu.contributions(X), cpu.contributions(X))
    _bitwise(gpu.shap_values(X), cpu.shap_values(X))


def test_a_small_table_budget_mixes_both_methods_and_is_still_the_cpus():
    booster, X = _model(depth=8, rounds=30)
    budget = 64 << 10  # some paths get tables, the others the path method
    cpu = dg.TreeExplainer(booster, max_table_bytes=budget)
    assert 0.0 < cpu.weight_tables().coverage(cpu.table) < 1.0
    _bitwise(dg.TreeExplainer(booster, max_table_bytes=budget, device="cuda").contributions(X), cpu.contributions(X))


@pytest.mark.parametrize("objective,depth", [("multi:softprob", 16), ("binary:logistic", 8)])
def test_paths_without_a_table_take_the_quadrature_with_the_cpus_bits(objective, depth):
    booster, X = _model(objective, depth, rounds=10)
    cpu = dg.TreeExplainer(booster, max_table_bytes=0)
    assert cpu.weight_tables().coverage(cpu.table) == 0.0
    _bitwise(dg.TreeExplainer(booster, max_table_bytes=0, device="cuda").contributions(X), cpu.contributions(X))
    # chains of 16 (the quadrature's limit) and 17 distinct features (the path method), with
    # missing values and children without cover
    from dgboost.testing.shap_oracle import chain_tree, random_rows
    from dgboost.tree import Ensemble

    rng = np.random.default_rng(5)
    ens = Ensemble()
    for d in (16, 17, 12):
        ens.append(chain_tree(rng, n_features=24, depth=d, distinct=True))
    rows = random_rows(rng, 700, 24, nan_prob=0.1)
    _bitwise(
        dg.TreeExplainer(ens, max_table_bytes=0, device="cuda").contributions(rows),
        dg.TreeExplainer(ens, max_table_bytes=0).contributions(rows),
    )


@pytest.mark.filterwarnings("ignore:LightGBM binary classifier:UserWarning")
def test_imported_lightgbm_and_scikit_learn_models_are_explained_with_the_cpus_bits():
    import lightgbm as lgb
    from sklearn.ensemble import GradientBoostingClassifier, RandomForestRegressor

    X, y, _ = make_synthetic(3000, 10, task="multiclass", n_classes=3, missing_rate=0.1, seed=4)
    dense = np.nan_to_num(X)  # scikit-learn's trees take no missing values
    kw = {"n_estimators": 20, "num_leaves": 63, "verbose": -1, "random_state": 0}
    models = {
        "lightgbm regression": (lgb.LGBMRegressor(**kw).fit(X, y), X),
        "lightgbm binary": (lgb.LGBMClassifier(**kw).fit(X, y > 0), X),
        "lightgbm multiclass": (lgb.LGBMClassifier(**kw).fit(X, y), X),
        "sklearn gradient boosting multiclass": (
            GradientBoostingClassifier(n_estimators=10, max_depth=5, random_state=0).fit(dense, y),
            dense,
        ),
        "sklearn random forest": (
            RandomForestRegressor(n_estimators=5, max_depth=12, random_state=0).fit(dense, y),
            dense,
        ),
    }
    for model, rows in models.values():
        cpu = dg.TreeExplainer(model, max_table_bytes=BUDGET)
        gpu = dg.TreeExplainer(model, device="cuda", max_table_bytes=BUDGET)
        _bitwise(gpu.contributions(rows[:500]), cpu.contributions(rows[:500]))
        _bitwise(gpu.contributions(rows[:60], interactions=True), cpu.contributions(rows[:60], interactions=True))


def test_weight_tables_built_on_the_gpu_are_bitwise_the_cpus():
    from dgboost.backend._cuda_treeshap import DevicePathTable
    from dgboost.explain.tables import build_tables

    booster, _ = _model(depth=9, rounds=10)
    table = dg.TreeExplainer(booster).table
    cpu = build_tables(table, 1 << 30)
    dev = DevicePathTable(table, 1 << 30)
    _bitwise(dev.arrays["table_values"][: cpu.values.size], cpu.values)
    _bitwise(dev.arrays["table_offsets"], cpu.table_offsets)


def test_gpu_shap_values_are_identical_over_20_reruns_and_any_batching_of_the_rows():
    booster, X = _model("multi:softprob", 6, rounds=10)
    explainer = dg.TreeExplainer(booster, device="cuda")
    first = explainer.contributions(X)
    for _ in range(20):
        _bitwise(explainer.contributions(X), first)
    parts = [explainer.contributions(X[a:b]) for a, b in ((0, 1), (1, 1000), (1000, 2999), (2999, 3000))]
    _bitwise(np.concatenate(parts), first)


def test_cupy_rows_give_cupy_values_on_their_gpu_and_host_rows_give_numpy():
    import cupy

    booster, X = _model(depth=6, rounds=10)
    explainer = dg.TreeExplainer(booster, device="cuda")
    on_device = explainer.shap_values(cupy.asarray(X))
    assert isinstance(on_device, cupy.ndarray) and on_device.shape == (len(X), X.shape[1])
    on_host = explainer.shap_values(X)
    assert isinstance(on_host, np.ndarray)
    _bitwise(on_device, on_host)
    assert isinstance(explainer.predict(cupy.asarray(X)), cupy.ndarray)


def test_the_default_table_budget_is_larger_on_the_gpu_and_follows_the_device():
    booster, _ = _model(depth=4, rounds=3)
    assert dg.TreeExplainer(booster).max_table_bytes == 256 << 20
    gpu = dg.TreeExplainer(booster, device="cuda")
    assert gpu.max_table_bytes == 1 << 30
    assert gpu.with_device("cpu").max_table_bytes == 256 << 20
    assert dg.TreeExplainer(booster, max_table_bytes=4096).with_device("cuda").max_table_bytes == 4096


def test_an_explainer_on_the_cpu_given_cupy_rows_returns_numpy():
    import cupy

    booster, X = _model(depth=4, rounds=5)
    out = dg.TreeExplainer(booster).shap_values(cupy.asarray(X))
    assert isinstance(out, np.ndarray)
    _bitwise(out, dg.TreeExplainer(booster).shap_values(X))


@pytest.mark.parametrize(
    "objective,depth", [("binary:logistic", 6), ("multi:softprob", 4), ("reg:squarederror", 1), ("binary:logistic", 18)]
)
def test_gpu_interaction_values_are_bitwise_the_cpus_default_method_and_match_the_path_method(objective, depth):
    booster, X = _model(objective, depth, rounds=8)
    X = X[:400]
    cpu = dg.TreeExplainer(booster).contributions(X, interactions=True)  # quadrature
    gpu = dg.TreeExplainer(booster, device="cuda")
    got = gpu.contributions(X, interactions=True)
    if depth <= 16:
        _bitwise(got, cpu)
    else:  # paths of more than 16 elements take the path method on the GPU: rounding only
        np.testing.assert_allclose(got, cpu, rtol=1e-9, atol=1e-9)
    cpu_path = dg.TreeExplainer(booster, algorithm="path").contributions(X, interactions=True)
    np.testing.assert_allclose(got, cpu_path, rtol=1e-9, atol=1e-9)
    # rows of the matrix sum to the SHAP values
    np.testing.assert_allclose(got.sum(axis=3), gpu.contributions(X), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize(
    "objective,depth,F", [("multi:softprob", 6, 12), ("binary:logistic", 16, 45), ("reg:squarederror", 3, 70)]
)
def test_interactions_by_every_kernel_layout_are_bitwise_the_cpus(monkeypatch, objective, depth, F):
    from dgboost.backend import _cuda_treeshap as gpu

    booster, X = _model(objective, depth, rounds=6, F=F, n=2000)
    X = X[:203]  # not a whole number of warps (2 rows each)
    assert gpu._interaction_layout(F, len(X), 1)[0] == "warp-shared"
    expected = dg.TreeExplainer(booster).contributions(X, interactions=True)
    _bitwise(dg.TreeExplainer(booster, device="cuda").contributions(X, interactions=True), expected)
    for forced in (("warp-out", 8, 0), ("rows", 0, 0)):  # the layouts of features too wide for shared memory
        monkeypatch.setattr(gpu, "_interaction_layout", lambda F, n, G, forced=forced: forced)
        _bitwise(dg.TreeExplainer(booster, device="cuda").contributions(X, interactions=True), expected)


@pytest.mark.parametrize(
    "objective,depth,F", [("multi:softprob", 6, 12), ("binary:logistic", 16, 45), ("reg:squarederror", 3, 70)]
)
def test_interactions_summed_in_small_slices_are_the_cpus_bits_in_every_layout(monkeypatch, objective, depth, F):
    """Slices of 7 paths: few rows run a row's slices in parallel (half a warp or, for paths of
    at most 8 elements, a thread per row) and add them in order; the sequential layouts add
    each slice's sums to totals at its end. All give the CPU's bits."""
    from dgboost.backend import _cuda_treeshap as gpu
    from dgboost.explain import treeshap

    booster, X = _model(objective, depth, rounds=6, F=F, n=2000)
    X = X[:203]
    monkeypatch.setattr(treeshap, "INTERACTION_SLICE_PATHS", 7)
    expected = dg.TreeExplainer(booster).contributions(X, interactions=True)
    explainer = dg.TreeExplainer(booster, device="cuda")
    assert gpu.device_path_table(explainer.table, 0).slice_ptr(treeshap.interaction_slice_paths(F))[1] > 2
    _bitwise(explainer.contributions(X, interactions=True), expected)  # the slice mode
    monkeypatch.setattr(gpu, "_PARTIAL_BYTES", 1)  # one block of rows at a time
    _bitwise(explainer.contributions(X, interactions=True), expected)
    monkeypatch.setattr(gpu, "_SLICES_BELOW", 0)  # a row's slices in turn
    _bitwise(explainer.contributions(X, interactions=True), expected)
    for forced in (("warp-out", 8, 0), ("rows", 0, 0)):
        monkeypatch.setattr(gpu, "_interaction_layout", lambda F, n, G, forced=forced: forced)
        _bitwise(explainer.contributions(X, interactions=True), expected)
    # a thread per row (paths of at most 8 elements: shap_interactions_rows8) with a row's
    # slices in parallel, in chunks of one block of rows
    monkeypatch.setattr(gpu, "_SLICES_BELOW", 1 << 18)
    _bitwise(explainer.contributions(X, interactions=True), expected)


def test_features_too_wide_for_shared_accumulators_take_the_global_layouts():
    from dgboost.backend import _cuda_treeshap as gpu

    assert gpu._interaction_layout(785, 200, 10) == ("warp-out", 8, 0)
    assert gpu._interaction_layout(785, 100_000, 1)[0] == "rows"
    kind, rows, shared = gpu._interaction_layout(150, 10, 1)  # one row: 90 KB, past the default 48 KB
    assert (kind, rows) == ("warp-shared", 2) and shared == 2 * 150 * 151 // 2 * 8
    assert gpu._interaction_layout(200, 10, 1)[0] == "warp-out"  # a warp's 2 rows (321 KB) do not fit


def test_interactions_of_cupy_rows_are_cupy_and_booster_pred_interactions_runs_on_the_gpu():
    import cupy

    booster, X = _model(depth=5, rounds=6)
    X = X[:300]
    out = dg.TreeExplainer(booster, device="cuda").shap_interaction_values(cupy.asarray(X))
    assert isinstance(out, cupy.ndarray) and out.shape == (300, X.shape[1], X.shape[1])
    gpu_booster = booster.copy()
    gpu_booster.set_param({"device": "cuda"})
    got = gpu_booster.predict(dg.DMatrix(cupy.asarray(X)), pred_interactions=True)
    assert isinstance(got, cupy.ndarray)
    np.testing.assert_allclose(
        got.get(), booster.predict(dg.DMatrix(X), pred_interactions=True), rtol=1e-5, atol=1e-6
    )  # float32 outputs of float64 values that agree to 1e-9


def test_gpu_shap_values_add_up_to_the_margin():
    booster, X = _model(depth=8, rounds=30)
    contribs = dg.TreeExplainer(booster, device="cuda").contributions(X)
    margin = booster.predict(dg.DMatrix(X), output_margin=True)
    np.testing.assert_allclose(contribs.sum(axis=2)[:, 0], margin, rtol=1e-5, atol=1e-5)


def test_trees_40_levels_deep_and_deeper_are_explained_like_the_cpu():
    from sklearn.tree import DecisionTreeRegressor

    rng = np.random.default_rng(0)
    X = rng.normal(size=(4000, 6)).astype(np.float32)
    y = np.sin(X[:, 0] * 9) + X[:, 1] * X[:, 2] + rng.normal(scale=0.01, size=len(X))
    tree = DecisionTreeRegressor(max_depth=None, min_samples_leaf=1, random_state=0).fit(X, y)
    assert tree.get_depth() > 32
    for depth in (40, None):  # paths the kernel holds (<= 64 elements), and longer ones
        model = tree if depth is None else DecisionTreeRegressor(max_depth=depth, random_state=0).fit(X, y)
        cpu = dg.TreeExplainer(model, max_table_bytes=BUDGET).shap_values(X[:300])
        gpu = dg.TreeExplainer(model, device="cuda", max_table_bytes=BUDGET).shap_values(X[:300])
        if depth is None and tree.get_depth() >= 64:  # the CPU's paths added after: rounding only
            np.testing.assert_allclose(gpu, cpu, rtol=1e-12, atol=1e-12)
        else:
            _bitwise(gpu, cpu)


def test_an_imported_xgboost_model_is_explained_like_xgboost_on_the_gpu():
    import xgboost as xgb

    X, y, _ = make_synthetic(5000, 10, task="binary", missing_rate=0.1, seed=5)
    model = xgb.train({"objective": "binary:logistic", "max_depth": 7, "device": "cuda"}, xgb.DMatrix(X, y), 30)
    expected = model.predict(xgb.DMatrix(X), pred_contribs=True)
    got = dg.TreeExplainer(model, device="cuda").contributions(X)[:, 0, :]
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_no_rows_are_refused_as_on_the_cpu():
    booster, X = _model(depth=3, rounds=3)
    for device in ("cpu", "cuda"):
        with pytest.raises(dg.DGBoostValueError, match="X is empty"):
            dg.TreeExplainer(booster, device=device).contributions(X[:0])


def test_rows_too_wide_for_shared_accumulators_accumulate_in_the_output_with_the_same_bits(monkeypatch):
    from dgboost.backend import _cuda_treeshap as gpu

    booster, X = _model("multi:softprob", 4, rounds=5)
    expected = dg.TreeExplainer(booster, max_table_bytes=BUDGET).contributions(X[:500])
    monkeypatch.setattr(gpu, "_ACC_SMEM_BYTES", 8)  # no shared accumulators fit
    _bitwise(dg.TreeExplainer(booster, device="cuda", max_table_bytes=BUDGET).contributions(X[:500]), expected)


@pytest.mark.parametrize("algorithm", ["table", "path"])
@pytest.mark.parametrize(
    "objective,depth,F", [("multi:softprob", 5, 12), ("binary:logistic", 9, 12), ("reg:squarederror", 6, 250)]
)
def test_slices_of_paths_summed_in_parallel_for_few_rows_give_the_cpus_bits(
    monkeypatch, algorithm, objective, depth, F
):
    """Few rows: blocks per (rows, group, slice of paths), slice sums added in order; many rows:
    a thread per row adding its sums at each slice's end. Both must give the CPU's bits, with
    slices small enough that there are many (F=250: accumulators too wide for shared memory)."""
    from dgboost.backend import _cuda_treeshap as gpu
    from dgboost.explain import treeshap

    booster, X = _model(objective, depth, rounds=8, F=F, n=3000)
    monkeypatch.setattr(treeshap, "SLICE_PATHS", 37)
    cpu = dg.TreeExplainer(booster, algorithm=algorithm, max_table_bytes=BUDGET)
    explainer = dg.TreeExplainer(booster, algorithm=algorithm, device="cuda", max_table_bytes=BUDGET)
    n_slices = gpu.device_path_table(explainer.table, BUDGET).slice_ptr(37)[1]
    assert n_slices > 5
    few = X[:333]  # not a whole number of blocks
    _bitwise(explainer.contributions(few), cpu.contributions(few))
    monkeypatch.setattr(gpu, "_PARTIAL_BYTES", 1)  # the slice sums of one block of rows at a time
    _bitwise(explainer.contributions(few), cpu.contributions(few))
    monkeypatch.setattr(gpu, "_SLICES_BELOW", 0)  # the thread-per-row mode with its flushes
    _bitwise(explainer.contributions(X), cpu.contributions(X))


@pytest.mark.parametrize("swapped", [False, True])
def test_both_instances_of_the_rows_kernel_give_the_cpus_bits_in_both_launch_modes(monkeypatch, swapped):
    """shap_rows loads a tabled path's elements four at a time, shap_rows_loads8 eight; each
    launch mode takes one (_ROWS_KERNEL). Swapped, each runs the other's mode: paths of one
    to sixteen elements, tabled, by quadrature and by the path method, give the CPU's bits."""
    from dgboost.backend import _cuda_treeshap as gpu
    from dgboost.explain import treeshap

    if swapped:
        monkeypatch.setattr(gpu, "_ROWS_KERNEL", {mode: gpu._ROWS_KERNEL[not mode] for mode in (True, False)})
    booster, X = _model("binary:logistic", 16, rounds=8, F=30, n=3000)
    monkeypatch.setattr(treeshap, "SLICE_PATHS", 37)
    for budget in (BUDGET, 64 << 10):  # every path tabled; some tabled, the others not
        cpu = dg.TreeExplainer(booster, max_table_bytes=budget)
        explainer = dg.TreeExplainer(booster, device="cuda", max_table_bytes=budget)
        _bitwise(explainer.contributions(X[:333]), cpu.contributions(X[:333]))  # slice mode
        with monkeypatch.context() as m:
            m.setattr(gpu, "_SLICES_BELOW", 0)  # a thread a row
            _bitwise(explainer.contributions(X), cpu.contributions(X))


def test_subnormal_row_values_compare_with_thresholds_as_on_the_cpu():
    """CuPy compiles with -ftz=true; dgboost's kernels must not (a row value of -1.4e-45
    against a threshold of 0 would flush to -0 and take the other branch)."""
    from dgboost.backend import get_backend
    from dgboost.testing.shap_oracle import chain_tree
    from dgboost.tree import Ensemble

    rng = np.random.default_rng(0)
    ens = Ensemble(base_margin=0.1)
    for _ in range(3):
        ens.append(chain_tree(rng, n_features=5, depth=5, thresholds=[0.0], distinct=True))
    tiny = np.float32(1.4e-45)
    values = np.array([-tiny, tiny, -0.0, 0.0, np.nan, 1.0, -1.0], dtype=np.float32)
    X = rng.choice(values, size=(400, 5)).astype(np.float32)
    cpu = get_backend("cpu").shap_engine()
    cpu_leaves = cpu.leaves(ens, X)
    gpu_margins = get_backend("cuda").shap_engine().margins(ens, X)
    np.testing.assert_array_equal(gpu_margins.get(), cpu.margins(ens, X))
    assert len(np.unique(cpu_leaves[:, 0])) > 3
    for algorithm in ("table", "path"):
        _bitwise(
            dg.TreeExplainer(ens, algorithm=algorithm, device="cuda", max_table_bytes=BUDGET).contributions(X),
            dg.TreeExplainer(ens, algorithm=algorithm, max_table_bytes=BUDGET).contributions(X),
        )
    _bitwise(
        dg.TreeExplainer(ens, device="cuda").contributions(X, interactions=True),
        dg.TreeExplainer(ens).contributions(X, interactions=True),
    )
    background = X[:20]
    _bitwise(
        dg.TreeExplainer(ens, background, device="cuda").contributions(X),
        dg.TreeExplainer(ens, background).contributions(X),
    )
