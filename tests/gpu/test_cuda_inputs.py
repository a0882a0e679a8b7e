"""CuPy and cuDF inputs stay on the GPU, and prediction on them gives the CPU's answers as CuPy."""

import numpy as np
import pytest

import dgboost as dg
from dgboost.quantile import compute_cuts, weighted_cut_values
from dgboost.testing.checks import check_same_trees_as_cpu

pytestmark = pytest.mark.gpu

RNG = np.random.default_rng(11)
N, F = 500, 5
X = RNG.normal(size=(N, F)).astype(np.float32)
X[RNG.random((N, F)) < 0.1] = np.nan
X[:, 3] = np.round(X[:, 3] * 2)  # few distinct values: exercises exact cuts
Y = (np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, 1]) > 0).astype(np.float32)
Y3 = (np.nan_to_num(X[:, 0]) > 0.5).astype(np.float32) + (np.nan_to_num(X[:, 1]) > 0)


@pytest.fixture(scope="module")
def cp():
    import cupy  # a declared test dependency: a broken install fails

    return cupy


@pytest.fixture(scope="module")
def binary_model():
    return dg.train(
        {"objective": "binary:logistic", "max_depth": 4, "eta": 0.3},
        dg.DMatrix(X, label=Y),
        num_boost_round=8,
        verbose_eval=False,
    )


@pytest.fixture(scope="module")
def multiclass_model():
    return dg.train(
        {"objective": "multi:softprob", "num_class": 3, "max_depth": 3},
        dg.DMatrix(X, label=Y3),
        num_boost_round=4,
        verbose_eval=False,
    )


def _on_gpu(booster):
    b = booster.copy()
    b.set_param({"device": "cuda"})
    return b


def _close(device_out, host_out):
    """GPU results against the CPU's: float32 sums and transforms may differ in the last ulp."""
    np.testing.assert_allclose(device_out.get(), host_out, rtol=2e-6, atol=2e-6)


# -- DMatrix / as_feature_matrix -----------------------------------------------------------------
def test_a_cupy_matrix_stays_on_the_device_and_equals_the_numpy_paths_matrix(cp):
    dm = dg.DMatrix(cp.asarray(X), label=cp.asarray(Y), weight=cp.ones(N))
    assert isinstance(dm.data, cp.ndarray)
    assert dm.data.dtype == cp.float32 and dm.data.flags.c_contiguous
    np.testing.assert_array_equal(dm.data.get(), dg.DMatrix(X).data)
    # labels and weights are small: they come to the host as NumPy
    assert isinstance(dm.label, np.ndarray) and isinstance(dm.weight, np.ndarray)
    np.testing.assert_array_equal(dm.label, Y)


def test_a_gpu_job_on_numpy_rows_sketches_bins_and_sums_them_on_the_device(cp, monkeypatch):
    import dgboost._training_job as job
    import dgboost.objective as objective
    from dgboost.backend.cuda import CUDABackend

    seen = []

    def recorded(name, fn, at):
        def call(*args, **kwargs):
            seen.append((name, type(args[at]).__module__.split(".")[0]))
            return fn(*args, **kwargs)

        return call

    monkeypatch.setattr(job, "compute_cuts", recorded("cuts", job.compute_cuts, 0))
    monkeypatch.setattr(objective, "exact_sum", recorded("class totals", objective.exact_sum, 0))
    monkeypatch.setattr(CUDABackend, "bin_values", recorded("bins", CUDABackend.bin_values, 1))
    params = {"objective": "multi:softprob", "num_class": 3, "max_depth": 3, "device": "cuda"}
    on_host = dg.train(params, dg.DMatrix(X, label=Y3), 3, verbose_eval=False)
    assert sorted(set(seen)) == [("bins", "cupy"), ("class totals", "cupy"), ("cuts", "cupy")]
    on_device = dg.train(params, dg.DMatrix(cp.asarray(X), label=cp.asarray(Y3)), 3, verbose_eval=False)
    assert on_host.save_raw("json") == on_device.save_raw("json")


def test_a_weighted_gpu_job_sketches_with_its_weights_on_the_device_and_saves_the_cpus_model(cp, monkeypatch):
    from dgboost.backend.cuda import CUDABackend

    given = []
    sketch = CUDABackend.sketch_cuts

    def recorded(self, values, rows, features, max_bin, block_values, weights=None):
        given.append(type(weights).__module__.split(".")[0])
        return sketch(self, values, rows, features, max_bin, block_values, weights)

    monkeypatch.setattr(CUDABackend, "sketch_cuts", recorded)
    params = {"objective": "binary:logistic", "max_depth": 4, "max_bin": 32}
    rng = np.random.default_rng(4)
    # weights of spread magnitudes (their sums added one by one), and of a narrow range (their
    # sums exact in any order: scanned in parallel)
    for weight in (10.0 ** rng.uniform(-3, 3, len(Y)), rng.uniform(0.2, 3.0, len(Y))):
        given.clear()
        check_same_trees_as_cpu("cuda", X, Y, params, 4, weight=weight.astype(np.float32))
        assert given == ["cupy"]


@pytest.mark.parametrize("dtype", ["float64", "int32", "bool"])
def test_cupy_matrices_of_other_dtypes_and_fortran_order_convert_like_numpy(cp, dtype):
    host = np.asfortranarray((np.nan_to_num(X) * 3).astype(dtype))
    dm = dg.DMatrix(cp.asarray(host, order="F"))
    assert isinstance(dm.data, cp.ndarray) and dm.data.flags.c_contiguous
    np.testing.assert_array_equal(dm.data.get(), dg.DMatrix(host).data)


def test_the_missing_value_is_replaced_by_nan_on_the_device(cp):
    sentinel = np.where(np.isnan(X), np.float32(-999.0), X)
    on_device = dg.DMatrix(cp.asarray(sentinel), missing=-999.0).data
    assert isinstance(on_device, cp.ndarray)
    np.testing.assert_array_equal(on_device.get(), dg.DMatrix(sentinel, missing=-999.0).data)
    np.testing.assert_array_equal(np.isnan(on_device.get()), np.isnan(X))


def test_infinite_values_on_the_device_raise_the_same_error_as_on_the_host(cp):
    bad = X.copy()
    bad[7, 2] = np.inf
    bad[9, 0] = -np.inf
    with pytest.raises(dg.DGBoostValueError) as on_host:
        dg.DMatrix(bad)
    with pytest.raises(dg.DGBoostValueError) as on_device:
        dg.DMatrix(cp.asarray(bad))
    assert str(on_device.value) == str(on_host.value)
    assert "row 7, column 2" in str(on_device.value)


def test_the_device_gather_and_infinity_search_reach_entries_past_2_gib(cp):
    from dgboost.backend import array_backend

    backend = array_backend(cp.empty(0))
    n, f = 40_000_000, 16  # 2.56 GB of float32: offsets past 2**31 entries' bytes
    values = cp.zeros((n, f), cp.float32)
    values[n - 2, 3] = 5.0
    values[n - 1, f - 1] = -cp.inf
    assert backend.first_infinite(values) == (n - 1) * f + f - 1
    rows = cp.asarray([n - 1, 0, n - 2], cp.int64)
    got = backend.take_matrix_rows(values, rows).get()
    assert np.array_equal(got, values[rows].get()) and got[2, 3] == 5.0 and np.isneginf(got[0, f - 1])


def test_a_ranks_device_row_blocks_are_concatenated_as_cupy_does(cp):
    from dgboost.dask._matrix import _concat_rows

    blocks = [cp.asarray(X[a:b]) for a, b in ((0, 7), (7, 7), (7, 300), (300, N))]
    assert cp.array_equal(_concat_rows(blocks), cp.concatenate(blocks), equal_nan=True)
    labels = [cp.asarray(Y[:10]), cp.asarray(Y[10:])]
    assert cp.array_equal(_concat_rows(labels), cp.asarray(Y))
    strided = [cp.asarray(X)[:, ::2], cp.asarray(X)[:5, ::2]]  # not C-contiguous: copied first
    assert cp.array_equal(_concat_rows(strided), cp.concatenate(strided), equal_nan=True)
    mixed = [cp.asarray(X[:5]), cp.asarray(X[5:], dtype=cp.float64)]  # dtypes promoted as CuPy does
    assert _concat_rows(mixed).dtype == cp.float64


def test_empty_and_one_dimensional_cupy_input_is_rejected(cp):
    with pytest.raises(dg.DGBoostValueError, match="data is empty"):
        dg.DMatrix(cp.empty((0, 3), cp.float32))
    with pytest.raises(dg.DGBoostValueError, match="must be 2-D"):
        dg.DMatrix(cp.ones(5))
    with pytest.raises(dg.DGBoostTypeError, match="complex"):
        dg.DMatrix(cp.ones((2, 2), cp.complex64))


# -- quantile sketch -----------------------------------------------------------------------------
@pytest.mark.parametrize("sample_rows", [1024, 1 << 18])  # sampled, and every row
def test_compute_cuts_on_a_cupy_matrix_equals_compute_cuts_on_its_numpy_copy(cp, sample_rows):
    values = np.repeat(X, 8, axis=0)  # 4000 rows: more than the 1024-row sample
    weight = RNG.random(values.shape[0]).astype(np.float32)
    for w in (None, weight):
        on_host = compute_cuts(values, w, 32, seed=3, sample_rows=sample_rows)
        on_device = compute_cuts(cp.asarray(values), w, 32, seed=3, sample_rows=sample_rows)
        np.testing.assert_array_equal(on_device.values, on_host.values)
        np.testing.assert_array_equal(on_device.ptrs, on_host.ptrs)


def test_cuts_sorted_on_the_device_are_the_host_cuts_bit_for_bit_block_by_block(cp, monkeypatch):
    from dgboost import quantile

    rng = np.random.default_rng(31)
    n = 6000
    columns = [
        rng.normal(size=n),
        np.round(rng.normal(size=n), 1),
        rng.integers(-3, 3, n).astype(float),
        np.full(n, np.nan),
        np.full(n, 2.5),
        rng.choice([-np.inf, -0.0, 0.0, 1.0, np.inf], n),
        rng.exponential(size=n),
    ]
    values = np.stack(columns, axis=1).astype(np.float32)
    values[rng.random(values.shape) < 0.3] = np.nan
    # a few features a block, so that blocks and their boundaries are exercised
    # (about 4,200 values a feature: two features a block of every row, all in one of a sample)
    monkeypatch.setattr(quantile, "_DEVICE_SORT_VALUES", 9 * 1024)
    for max_bin, sample_rows in ((256, 1 << 18), (16, 1024)):
        on_host = compute_cuts(values, None, max_bin, seed=5, sample_rows=sample_rows)
        for layout in (cp.asarray(values), cp.asfortranarray(cp.asarray(values))):  # the kernels take strides
            on_device = compute_cuts(layout, None, max_bin, seed=5, sample_rows=sample_rows)
            assert on_device.values.tobytes() == on_host.values.tobytes()  # -0.0 and 0.0 told apart
            np.testing.assert_array_equal(on_device.ptrs, on_host.ptrs)


def _same_cuts(got: np.ndarray, want: np.ndarray) -> bool:
    """Equal bits, -0.0 told from 0.0; a NaN (the last cut above a top of -inf) equals any
    NaN: its payload is the platform's (x86 and the GPU make different ones)."""
    nan = np.isnan(got)
    return (
        got.shape == want.shape and np.array_equal(nan, np.isnan(want)) and got[~nan].tobytes() == want[~nan].tobytes()
    )


SKETCH_SAMPLES = {
    "continuous": lambda rng, n: rng.normal(size=n),
    "few distinct values": lambda rng, n: rng.integers(-5, 5, size=n),
    "constant": lambda rng, n: np.full(n, 2.5),
    "ties and both zeros": lambda rng, n: np.where(rng.random(n) < 0.2, -0.0, np.round(rng.normal(size=n), 1)),
    "infinities and zeros": lambda rng, n: rng.choice([-np.inf, -0.0, 0.0, 1.0, np.inf], size=n),
}


def test_the_device_cut_kernels_give_every_features_host_cuts_bit_for_bit(cp):
    """The kernels against the host's unit-weight sketch of each feature: ties, both zeros,
    infinities, empty and constant features, max_bin 2 to 256, sampled rows, a feature range
    not starting at 0, and one feature, a few, or all of them a block."""
    from dgboost.backend import array_backend
    from dgboost.backend._cuda_sketch import cut_values

    rng = np.random.default_rng(5)
    kinds = list(SKETCH_SAMPLES.values())
    for trial in range(60):
        max_bin = int(rng.choice([2, 3, 16, 256]))
        n_rows = int(rng.choice([1, 5, 300, 3000]))
        F = int(rng.integers(1, 12))
        matrix = np.full((n_rows, F), np.nan, np.float32)
        for f in range(F):
            present = rng.random(n_rows) < rng.choice([0.0, 0.5, 1.0])
            matrix[present, f] = kinds[int(rng.integers(len(kinds)))](rng, int(present.sum()))
        rows = None if trial % 2 else np.sort(rng.choice(n_rows, size=max(1, n_rows // 2), replace=False))
        first = int(rng.integers(0, F))
        block = int(rng.choice([1, 200, 1 << 20]))
        values = cp.asarray(matrix)
        got = cut_values(
            array_backend(values), values, None if rows is None else cp.asarray(rows), range(first, F), max_bin, block
        )
        sample = matrix if rows is None else matrix[rows]
        for f, cuts in zip(range(first, F), got):
            column = sample[:, f][~np.isnan(sample[:, f])]
            want = weighted_cut_values(column, np.ones(column.size), max_bin)
            assert _same_cuts(cuts, want), (trial, f, cuts, want)


SKETCH_WEIGHTS = {
    "spread": lambda rng, n: (10.0 ** rng.uniform(-8, 8, n)).astype(np.float32),
    "few values": lambda rng, n: rng.choice(np.float32([0.25, 1.0, 3.0, 1e3]), size=n),
    "with zeros": lambda rng, n: np.where(rng.random(n) < 0.3, 0.0, rng.random(n) + 0.01).astype(np.float32),
    "all equal": lambda rng, n: np.full(n, 0.7, np.float32),
}


def test_the_weighted_device_cut_kernels_give_every_features_host_cuts_bit_for_bit(cp):
    """The weighted kernels against the host's weighted sketch (``compute_cuts``' host path:
    the sample's float32 weights in float64, zero weights dropped): the sample kinds above,
    weights of spread magnitudes (the order of the additions shows), ties of weights, zeros,
    all equal; runs of one value past 4,096 rows (summed by a block)."""
    from dgboost.backend import array_backend
    from dgboost.backend._cuda_sketch import cut_values

    rng = np.random.default_rng(15)
    kinds, weight_kinds = list(SKETCH_SAMPLES.values()), list(SKETCH_WEIGHTS.values())
    for trial in range(40):
        max_bin = int(rng.choice([2, 3, 16, 256]))
        n_rows = int(rng.choice([1, 5, 300, 3000, 20_000]))
        F = int(rng.integers(1, 9))
        matrix = np.full((n_rows, F), np.nan, np.float32)
        for f in range(F):
            present = rng.random(n_rows) < rng.choice([0.0, 0.5, 1.0])
            matrix[present, f] = kinds[int(rng.integers(len(kinds)))](rng, int(present.sum()))
        if trial % 4 == 0:  # one value on most rows
            matrix[rng.random(n_rows) < 0.7, 0] = 0.5
        weights = weight_kinds[trial % len(weight_kinds)](rng, n_rows)
        rows = None if trial % 2 else np.sort(rng.choice(n_rows, size=max(1, n_rows // 2), replace=False))
        first = int(rng.integers(0, F))
        block = int(rng.choice([4, 8000, 1 << 22]))  # (half of it sorted at once)
        values = cp.asarray(matrix)
        got = cut_values(
            array_backend(values),
            values,
            None if rows is None else cp.asarray(rows),
            range(first, F),
            max_bin,
            block,
            cp.asarray(weights),
        )
        sample, w = (matrix, weights) if rows is None else (matrix[rows], weights[rows])
        w = w.astype(np.float64)
        for f, cuts in zip(range(first, F), got):
            keep = ~np.isnan(sample[:, f]) & (w > 0)
            want = weighted_cut_values(sample[keep, f], w[keep], max_bin)
            assert _same_cuts(cuts, want), (trial, f, cuts, want)


def test_a_negative_zero_never_becomes_a_cut_value_on_the_device(cp):
    from dgboost.backend import array_backend
    from dgboost.backend._cuda_sketch import cut_values

    values = cp.asarray([[-1.0], [-0.0], [-0.0], [2.0]], dtype=cp.float32)
    (cuts,) = cut_values(array_backend(values), values, None, range(1), 256, 8)
    zero = cuts[cuts == 0]
    assert zero.size == 1 and not np.signbit(zero[0])


# -- prediction ----------------------------------------------------------------------------------
@pytest.mark.parametrize("output_margin", [False, True])
def test_predict_on_cupy_returns_cupy_equal_to_the_cpu_prediction(cp, binary_model, output_margin):
    expected = binary_model.predict(dg.DMatrix(X), output_margin=output_margin)
    out = _on_gpu(binary_model).predict(dg.DMatrix(cp.asarray(X)), output_margin=output_margin)
    assert isinstance(out, cp.ndarray) and out.shape == expected.shape and out.dtype == cp.float32
    _close(out, expected)


def test_cupy_input_is_predicted_on_the_gpu_even_for_a_cpu_booster(cp, binary_model):
    out = binary_model.predict(dg.DMatrix(cp.asarray(X)))
    assert isinstance(out, cp.ndarray)
    _close(out, binary_model.predict(dg.DMatrix(X)))


def test_inplace_predict_on_cupy_returns_cupy_as_xgboost_does(cp, binary_model):
    sentinel = np.where(np.isnan(X), np.float32(-1e6), X)
    gpu = _on_gpu(binary_model)
    for predict_type in ("value", "margin"):
        expected = binary_model.inplace_predict(X, predict_type=predict_type)
        out = gpu.inplace_predict(cp.asarray(sentinel), predict_type=predict_type, missing=-1e6)
        assert isinstance(out, cp.ndarray)
        _close(out, expected)


def test_numpy_input_with_device_cuda_is_predicted_on_the_gpu_and_returns_numpy(binary_model):
    out = _on_gpu(binary_model).predict(dg.DMatrix(X))
    assert isinstance(out, np.ndarray)
    np.testing.assert_allclose(out, binary_model.predict(dg.DMatrix(X)), rtol=2e-6, atol=2e-6)


def test_multiclass_predictions_strict_shape_and_iteration_range_match_the_cpu(cp, multiclass_model):
    gpu = _on_gpu(multiclass_model)
    for kwargs in ({}, {"output_margin": True}, {"iteration_range": (1, 3)}, {"strict_shape": True}):
        expected = multiclass_model.predict(dg.DMatrix(X), **kwargs)
        out = gpu.predict(dg.DMatrix(cp.asarray(X)), **kwargs)
        assert isinstance(out, cp.ndarray) and out.shape == expected.shape
        _close(out, expected)


def test_leaf_indices_on_cupy_are_cupy_and_identical_to_the_cpu(cp, multiclass_model):
    expected = multiclass_model.predict(dg.DMatrix(X), pred_leaf=True)
    out = _on_gpu(multiclass_model).predict(dg.DMatrix(cp.asarray(X)), pred_leaf=True)
    assert isinstance(out, cp.ndarray) and out.dtype == cp.int32
    np.testing.assert_array_equal(out.get(), expected)


def test_a_cupy_base_margin_is_added_and_left_unchanged(cp, binary_model):
    base = RNG.normal(size=N).astype(np.float32)
    given = cp.asarray(base)
    expected = binary_model.predict(dg.DMatrix(X, base_margin=base), output_margin=True)
    out = _on_gpu(binary_model).predict(dg.DMatrix(cp.asarray(X), base_margin=given), output_margin=True)
    _close(out, expected)
    np.testing.assert_array_equal(given.get(), base)


def test_shap_values_of_cupy_input_are_computed_on_the_gpu_and_returned_as_cupy_equal_to_the_cpus(cp, binary_model):
    expected = binary_model.predict(dg.DMatrix(X), pred_contribs=True)
    out = _on_gpu(binary_model).predict(dg.DMatrix(cp.asarray(X)), pred_contribs=True)
    assert isinstance(out, cp.ndarray) and out.dtype == cp.float32
    np.testing.assert_array_equal(out.get(), expected)  # the GPU kernel is the CPU's, bit for bit
    host_in = _on_gpu(binary_model).predict(dg.DMatrix(X), pred_contribs=True)
    assert isinstance(host_in, np.ndarray)
    np.testing.assert_array_equal(host_in, expected)


def test_shap_frames_of_a_cudf_frame_are_cudf_frames_with_the_cpus_values(cp, binary_model):
    cudf = pytest.importorskip("cudf")  # an optional extra
    import pandas as pd

    host = pd.DataFrame(X, columns=[f"f{i}" for i in range(F)])
    expected = dg.TreeExplainer(binary_model).shap_frame(host)
    got = dg.TreeExplainer(binary_model, device="cuda").shap_frame(cudf.from_pandas(host))
    assert type(got).__module__.split(".")[0] == "cudf"
    assert list(got.columns) == list(expected.columns)
    np.testing.assert_array_equal(got.to_pandas().to_numpy(), expected.to_numpy())


# -- cuDF ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cudf():
    return pytest.importorskip("cudf")  # an optional extra: the only skip allowed here


def _frame_with_nulls(cudf):
    import pandas as pd

    a = pd.array([1, None, 3, 4, None, 6], dtype="Int64")
    b = pd.array([0.5, 1.5, None, 2.5, np.nan, -1.0], dtype="Float64")
    c = pd.array([True, False, None, True, True, False], dtype="boolean")
    host = pd.DataFrame({"a": a, "b": b, "c": c})
    expected = np.array(
        [[1, 0.5, 1], [np.nan, 1.5, 0], [3, np.nan, np.nan], [4, 2.5, 1], [np.nan, np.nan, 1], [6, -1.0, 0]],
        dtype=np.float32,
    )
    return cudf.from_pandas(host), expected


def test_a_cudf_frame_with_nulls_stays_on_the_device_and_equals_numpy_with_nan(cp, cudf):
    frame, expected = _frame_with_nulls(cudf)
    dm = dg.DMatrix(frame, label=cudf.Series([0.0, 1, 0, 1, 0, 1]))
    assert isinstance(dm.data, cp.ndarray) and dm.data.flags.c_contiguous
    np.testing.assert_array_equal(dm.data.get(), expected)
    np.testing.assert_array_equal(dm.data.get(), dg.DMatrix(expected).data)
    assert dm.feature_names == ["a", "b", "c"]
    assert isinstance(dm.label, np.ndarray)


def test_non_numeric_cudf_columns_are_named_in_the_error(cudf):
    frame = cudf.DataFrame({"ok": [1.0, 2.0], "city": ["a", "b"]})
    with pytest.raises(dg.DGBoostTypeError, match="'city'"):
        dg.DMatrix(frame)
    with pytest.raises(dg.DGBoostValueError, match="cuDF Series"):
        dg.DMatrix(frame["ok"])


def test_predict_on_a_cudf_frame_returns_cupy_equal_to_numpy_with_nan(cp, cudf, binary_model):
    import pandas as pd

    host = pd.DataFrame(X, columns=[f"f{i}" for i in range(F)]).astype("Float64")
    frame = cudf.from_pandas(host)  # NaN in the pandas frame: nulls in cuDF
    named = binary_model.copy()
    named.feature_names = list(host.columns)
    out = named.inplace_predict(frame)
    assert isinstance(out, cp.ndarray)
    _close(out, named.predict(dg.DMatrix(host)))


def test_gpu_training_on_a_cudf_frame_with_nulls_equals_training_on_numpy_with_nan(cp, cudf):
    import pandas as pd

    rng = np.random.default_rng(31)
    x = rng.normal(size=(4000, 6)).astype(np.float32)
    x[rng.random(x.shape) < 0.15] = np.nan
    y = (np.nan_to_num(x[:, 0]) + np.nan_to_num(x[:, 1]) > 0).astype(np.float32)
    names = [f"c{i}" for i in range(6)]
    frame = cudf.from_pandas(pd.DataFrame(x, columns=names).astype("Float64"))  # NaN -> null
    assert int(frame.isnull().sum().sum()) == int(np.isnan(x).sum())
    params = {"objective": "binary:logistic", "max_depth": 5, "device": "cuda", "seed": 1}
    from_frame = dg.train(params, dg.DMatrix(frame, label=cudf.Series(y)), 6, verbose_eval=False)
    from_numpy = dg.train(params, dg.DMatrix(x, label=y, feature_names=names), 6, verbose_eval=False)
    assert from_frame.save_raw("json") == from_numpy.save_raw("json")
