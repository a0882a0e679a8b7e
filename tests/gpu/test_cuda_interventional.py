"""GPU interventional TreeSHAP (``kernels/treeshap_interventional.cu``) gives the CPU engine's values bit for bit.

The CPU engine (``dgboost/explain/interventional.py``) is checked against brute-force
interventional Shapley values and shap; the GPU kernels are its kernels with one thread per
row, walking paths and background rows in the CPU's order, so every value is bitwise the
CPU's, identical over reruns and whatever the batching of the rows. Additivity is checked
against the model's margins and probabilities.
"""

from __future__ import annotations

import numpy as np
import pytest

import dgboost as dg
from dgboost.testing.shap_checks import assert_bitwise as _bitwise
from dgboost.testing.shap_checks import small_model as _model

pytestmark = pytest.mark.gpu


def _pair(model, background, **kwargs):
    """The same interventional explainer on the CPU and on the GPU."""
    cpu = dg.TreeExplainer(model, background, feature_perturbation="interventional", **kwargs)
    gpu = dg.TreeExplainer(model, background, feature_perturbation="interventional", device="cuda", **kwargs)
    return cpu, gpu


@pytest.mark.parametrize(
    "objective,depth,missing",
    [
        ("reg:squarederror", 6, 0.0),
        ("reg:squarederror", 8, 0.2),
        ("binary:logistic", 6, 0.15),
        ("binary:logistic", 1, 0.1),
        ("multi:softprob", 4, 0.15),
    ],
)
def test_gpu_interventional_values_are_bitwise_the_cpu_engines(objective, depth, missing):
    booster, X = _model(objective, depth, rounds=10, missing=missing)
    rows, background = X[:700], X[2000:2050]  # 700 rows: not a multiple of the block size
    cpu, gpu = _pair(booster, background)
    assert gpu.expected_value == pytest.approx(cpu.expected_value, rel=1e-12)
    _bitwise(gpu.contributions(rows), cpu.contributions(rows))
    _bitwise(gpu.shap_values(rows), cpu.shap_values(rows))


def test_the_gpu_engine_call_is_bitwise_the_cpu_function_with_its_bias_column():
    from dgboost.backend._cuda_interventional import shap_values_interventional_device
    from dgboost.explain.interventional import shap_values_interventional

    booster, X = _model("multi:softprob", 5, rounds=6)
    table = dg.TreeExplainer(booster).table
    for transform in (None, "logistic"):
        want = shap_values_interventional(table, X[:300], X[1000:1020], transform=transform)
        _bitwise(shap_values_interventional_device(table, X[:300], X[1000:1020], transform), want)


def test_probability_output_is_bitwise_the_cpus_and_sums_to_the_probability():
    booster, X = _model("binary:logistic", 6, rounds=15)
    rows, background = X[:500], X[2500:2540]
    cpu, gpu = _pair(booster, background, model_output="probability")
    got = gpu.contributions(rows)
    _bitwise(got, cpu.contributions(rows))
    _bitwise(gpu.shap_values(rows), cpu.shap_values(rows))  # its additivity check passes too
    prob = 1.0 / (1.0 + np.exp(-booster.predict(dg.DMatrix(rows), output_margin=True).astype(np.float64)))
    np.testing.assert_allclose(got.sum(axis=2)[:, 0], prob, rtol=1e-5, atol=1e-6)


def test_gpu_interventional_values_add_up_to_the_margin():
    booster, X = _model("reg:squarederror", 8, rounds=30)
    _, gpu = _pair(booster, X[1000:1100])
    contribs = gpu.contributions(X)
    margin = booster.predict(dg.DMatrix(X), output_margin=True)
    np.testing.assert_allclose(contribs.sum(axis=2)[:, 0], margin, rtol=1e-5, atol=1e-5)


def test_cupy_rows_give_cupy_values_and_host_rows_give_numpy_with_the_same_bits():
    import cupy

    booster, X = _model("binary:logistic", 6, rounds=10)
    rows = X[:600]
    for output in ("raw", "probability"):
        _, gpu = _pair(booster, X[2000:2030], model_output=output)
        on_device = gpu.shap_values(cupy.asarray(rows))
        assert isinstance(on_device, cupy.ndarray) and on_device.shape == rows.shape
        on_host = gpu.shap_values(rows)
        assert isinstance(on_host, np.ndarray)
        _bitwise(on_device, on_host)
        contribs = gpu.contributions(cupy.asarray(rows))
        assert isinstance(contribs, cupy.ndarray)
        _bitwise(contribs, gpu.contributions(rows))


def test_a_background_on_the_gpu_gives_the_values_of_the_same_background_on_the_host():
    import cupy

    booster, X = _model("multi:softprob", 4, rounds=6)
    background = X[2000:2025]
    on_host = dg.TreeExplainer(booster, background, device="cuda").contributions(X[:400])
    gpu = dg.TreeExplainer(booster, cupy.asarray(background), device="cuda")
    assert gpu.feature_perturbation == "interventional"
    _bitwise(gpu.contributions(X[:400]), on_host)
    # the mean over the background is a CuPy reduction here: another order of additions
    np.testing.assert_allclose(
        gpu.expected_value, dg.TreeExplainer(booster, background).expected_value, rtol=1e-12, atol=1e-12
    )


def test_gpu_interventional_values_are_identical_over_reruns_and_any_batching_of_the_rows():
    booster, X = _model("multi:softprob", 6, rounds=8)
    rows = X[:1500]
    for model, output in ((booster, "raw"), (_model("binary:logistic", 5, rounds=8)[0], "probability")):
        _, gpu = _pair(model, X[2000:2020], model_output=output)
        first = gpu.contributions(rows)
        for _ in range(5):
            _bitwise(gpu.contributions(rows), first)
        parts = [gpu.contributions(rows[a:b]) for a, b in ((0, 1), (1, 129), (129, 1000), (1000, 1499), (1499, 1500))]
        _bitwise(np.concatenate(parts), first)


def test_small_explainer_chunks_give_the_same_bits(monkeypatch):
    from dgboost.backend import _cuda_shap

    booster, X = _model("reg:squarederror", 6, rounds=8)
    _, gpu = _pair(booster, X[2000:2040])
    want = gpu.contributions(X[:1000])
    monkeypatch.setattr(_cuda_shap.CudaEngine, "chunk_rows", lambda self, *args, **kwargs: 300)
    _bitwise(gpu.contributions(X[:1000]), want)


@pytest.mark.parametrize("output", ["raw", "probability"])
def test_a_background_of_one_row_is_explained_like_the_cpu(output):
    booster, X = _model("binary:logistic", 6, rounds=10)
    cpu, gpu = _pair(booster, X[2999:3000], model_output=output)
    _bitwise(gpu.contributions(X[:500]), cpu.contributions(X[:500]))
    # a row equal to the background row gets no attribution
    np.testing.assert_array_equal(gpu.shap_values(X[2999:3000]), 0.0)


@pytest.mark.parametrize("output", ["raw", "probability"])
def test_accumulators_in_global_memory_give_the_bits_of_shared_ones(monkeypatch, output):
    from dgboost.backend import _cuda_interventional as gpu_interventional

    booster, X = _model("binary:logistic", 6, rounds=10)
    cpu, gpu = _pair(booster, X[2000:2030], model_output=output)
    want = cpu.contributions(X[:400])
    _bitwise(gpu.contributions(X[:400]), want)
    monkeypatch.setattr(gpu_interventional, "_ACC_SMEM_BYTES", 8)  # no shared accumulators fit
    _bitwise(gpu.contributions(X[:400]), want)


def test_rows_too_wide_for_shared_accumulators_are_explained_like_the_cpu():
    # 60 features: the plain kernel's accumulators (128 x 60 x 8 bytes) and the logistic
    # kernel's (twice that) exceed 48 KiB and live in global memory
    booster, X = _model("binary:logistic", 7, rounds=10, F=60)
    for output in ("raw", "probability"):
        cpu, gpu = _pair(booster, X[2000:2020], model_output=output)
        _bitwise(gpu.contributions(X[:300]), cpu.contributions(X[:300]))


def _one_hot_chain(F=75):
    """A regression tree on one-hot rows: every split isolates one row, so the tree is a chain
    of F distinct features (paths of F + 1 elements: two on-bit words)."""
    X = np.zeros((F + 5, F), np.float32)
    X[np.arange(F), np.arange(F)] = 1.0
    y = np.arange(F + 5, dtype=np.float64) ** 3
    y[F:] = 0.0
    return X, y


def test_a_deep_sklearn_tree_with_paths_longer_than_one_bit_word_is_explained_like_the_cpu():
    from sklearn.tree import DecisionTreeRegressor

    X, y = _one_hot_chain()
    tree = DecisionTreeRegressor(random_state=0).fit(X, y)
    assert tree.get_depth() > 63
    rng = np.random.default_rng(0)
    rows = np.concatenate([X, (rng.random((200, X.shape[1])) < 0.02).astype(np.float32)])
    cpu, gpu = _pair(tree, X[[75, 76, 3, 70]])
    assert cpu.table.max_length > 64  # at least one path of two words
    want = cpu.contributions(rows)
    p = int(np.argmax(cpu.table.path_lengths))
    s = cpu.table.path_offsets[p] + 1
    deep = cpu.table.feature[s + 63 : cpu.table.path_offsets[p + 1]]  # the second word's features
    assert np.any(want[:, 0, deep] != 0.0)
    _bitwise(gpu.contributions(rows), want)
    _bitwise(gpu.shap_values(rows), cpu.shap_values(rows))


@pytest.mark.parametrize("transform", [None, "logistic"])
def test_chains_of_70_distinct_features_with_a_one_leaf_tree_are_explained_like_the_cpu(transform):
    from dgboost.backend._cuda_interventional import shap_values_interventional_device
    from dgboost.explain.interventional import shap_values_interventional
    from dgboost.explain.paths import extract_paths
    from dgboost.testing.shap_oracle import chain_tree, random_rows
    from dgboost.tree import Ensemble, Tree

    rng = np.random.default_rng(17)
    ens = Ensemble(base_margin=0.3)
    ens.append(chain_tree(rng, n_features=80, depth=70, distinct=True))
    ens.append(chain_tree(rng, n_features=80, depth=70, distinct=True))
    ens.append(Tree.leaf(1.5, 10.0))
    table = extract_paths(ens)
    assert table.max_length > 64
    # rows that reach the longest path, differing from each other in both words
    p = int(np.argmax(table.path_lengths))
    s, e = int(table.path_offsets[p]) + 1, int(table.path_offsets[p + 1])
    below = np.float32(-np.inf)  # float32 neighbours: the elements compare float32 values
    z = rng.normal(size=82).astype(np.float32)
    for j in range(s, e):  # z: on for every element of the path
        lo, up = table.lower[j], table.upper[j]
        z[table.feature[j]] = lo if np.isfinite(lo) else (np.nextafter(up, below) if np.isfinite(up) else 0.0)

    def off(row, elements):
        row = row.copy()
        for j in elements:
            lo, up = table.lower[s + j], table.upper[s + j]
            row[table.feature[s + j]] = up if np.isfinite(up) else np.nextafter(lo, below)
        return row

    x, r = off(z, [64, 3]), off(z, [65, 2, 66])
    X = np.concatenate([np.stack([x, r, z]), random_rows(rng, 40, 82, nan_prob=0.05)]).astype(np.float32)
    X[-1, :5] = np.inf  # +inf behaves as the largest float
    background = np.stack([r, x, z, random_rows(rng, 1, 82)[0]])
    want = shap_values_interventional(table, X, background, transform=transform)
    assert np.any(want[0, 0, table.feature[s + 64 : e]] != 0.0)
    _bitwise(shap_values_interventional_device(table, X, background, transform), want)


def test_a_model_without_trees_explains_to_its_base_margin():
    from dgboost.backend._cuda_interventional import shap_values_interventional_device
    from dgboost.explain.interventional import shap_values_interventional
    from dgboost.explain.paths import extract_paths
    from dgboost.tree import Ensemble

    table = extract_paths(Ensemble(n_groups=3, base_margin=[0.1, 0.2, 0.3]))
    X = np.ones((4, 2))
    _bitwise(shap_values_interventional_device(table, X, X[:2]), shap_values_interventional(table, X, X[:2]))


def test_bad_inputs_are_refused_as_on_the_cpu():
    import cupy

    from dgboost.backend._cuda_interventional import shap_values_interventional_device
    from dgboost.explain.interventional import shap_values_interventional

    booster, X = _model("reg:squarederror", 3, rounds=3)
    table = dg.TreeExplainer(booster).table
    k = table.n_features - 1
    assert k >= 1
    cases = [
        (dict(rows=X[:5], background=X[:0]), "background"),
        (dict(rows=X[:5], background=X[:3, :-1]), "columns"),
        (dict(rows=X[:5, :k], background=X[:3, :k]), "columns"),
        (dict(rows=X[:5], background=X[:3], transform="probit"), "transform"),
    ]
    for kwargs, match in cases:
        transform = kwargs.pop("transform", None)
        with pytest.raises(dg.DGBoostValueError, match=match):
            shap_values_interventional(table, kwargs["rows"], kwargs["background"], transform=transform)
        with pytest.raises(dg.DGBoostValueError, match=match):
            shap_values_interventional_device(table, kwargs["rows"], kwargs["background"], transform)
        with pytest.raises(dg.DGBoostValueError, match=match):
            shap_values_interventional_device(table, cupy.asarray(kwargs["rows"]), kwargs["background"], transform)
    with pytest.raises(dg.DGBoostValueError, match="X is empty"):
        dg.TreeExplainer(booster, X[:10], device="cuda").contributions(X[:0])


def test_uploads_are_made_once_per_table_and_background():
    from dgboost.backend import _cuda_interventional as gpu_interventional

    booster, X = _model("reg:squarederror", 4, rounds=4)
    gpu_interventional._clear_cache()
    _, gpu = _pair(booster, X[2000:2010])
    for r0 in range(0, 600, 200):
        gpu.contributions(X[r0 : r0 + 200])
    assert len(gpu_interventional._PATHS) == 1 and len(gpu_interventional._BACKGROUNDS) == 1
