"""Categorical input (issue 29, docs/categorical.md): category columns become codes with their
categories, bad input is refused with errors that name the column, and prediction re-codes a
frame whose categories are ordered differently. XGBoost 3.4.1 is the oracle for what it accepts
and refuses."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import xgboost as xgb

import dgboost as dg
from dgboost._category_codes import MAX_CATEGORIES, checked_categories, union_categories
from dgboost.errors import DGBoostError, DGBoostTypeError, DGBoostValueError

LETTERS = list("abcdefghijkl")


def _frame(n=600, seed=0):
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, len(LETTERS), n)
    c = pd.Categorical.from_codes(codes, categories=LETTERS)
    c[rng.random(n) < 0.05] = np.nan
    x = rng.normal(size=n)
    y = ((codes % 3 == 0) ^ (x > 0)).astype(np.float64)
    return pd.DataFrame({"c": c, "x": x, "k": rng.integers(0, 5, n)}), y


def _reordered(df, order=None):
    out = df.copy()
    out["c"] = out["c"].cat.reorder_categories(order or LETTERS[::-1])
    return out


# ----------------------------------------------------------------------------- codes and categories
def test_a_pandas_category_column_becomes_its_codes_with_its_categories():
    df, y = _frame()
    dm = dg.DMatrix(df, y)
    codes = df["c"].cat.codes.to_numpy()
    expected = np.where(codes < 0, np.nan, codes).astype(np.float32)
    np.testing.assert_array_equal(dm.data[:, 0], expected)
    np.testing.assert_array_equal(dm.data[:, 1], df["x"].to_numpy(np.float32))
    assert dm.feature_types == ["c", "float", "int"]
    assert dm.categories[0].tolist() == LETTERS and dm.categories[1] is None and dm.categories[2] is None
    assert dm.n_categories(0) == len(LETTERS) and dm.n_categories(1) == 0
    # XGBoost names the same types
    assert xgb.DMatrix(df, y, enable_categorical=True).feature_types == dm.feature_types


def test_a_numeric_frame_keeps_no_feature_types_and_no_categories():
    df, y = _frame()
    dm = dg.DMatrix(df[["x", "k"]], y)
    assert dm.feature_types is None and dm.categories is None


def test_an_arrow_table_and_a_parquet_file_with_dictionary_columns_give_the_frames_codes(tmp_path):
    df, y = _frame()
    table = pa.Table.from_pandas(df, preserve_index=False)
    assert pa.types.is_dictionary(table.schema.field("c").type)
    path = tmp_path / "data.parquet"
    pq.write_table(table, path)
    expected = dg.DMatrix(df, y)
    for data in (table, pq.read_table(path)):
        dm = dg.DMatrix(data, y)
        np.testing.assert_array_equal(dm.data, expected.data)
        assert dm.feature_types == expected.feature_types
        assert dm.categories[0].tolist() == LETTERS


def test_numpy_codes_typed_c_are_taken_as_given_with_arange_categories():
    X = np.array([[0, 1.0], [3, 2.0], [np.nan, 3.0], [1, 4.0]])
    dm = dg.DMatrix(X, feature_types=["c", "q"])
    np.testing.assert_array_equal(dm.data, X.astype(np.float32))
    assert dm.categories[0].tolist() == [0, 1, 2, 3] and dm.categories[1] is None
    assert dm.category_values() == [None, None]  # no values known: a model takes codes as they are


@pytest.mark.parametrize("bad", [-1.0, 0.5, float(1 << 24)])
def test_numpy_codes_that_are_not_small_non_negative_integers_are_refused(bad):
    X = np.array([[0, 1.0], [bad, 2.0]])
    with pytest.raises(DGBoostValueError, match=r"column 'f0' is categorical .*integers from 0 to 16777215"):
        dg.DMatrix(X, feature_types=["c", "q"])


def test_the_missing_value_marks_numeric_columns_but_never_a_category_code():
    df, y = _frame()
    dm = dg.DMatrix(df, y, missing=0.0)
    assert (dm.data[:, 0] == 0).any()  # code 0 ("a") stays a category
    assert not (dm.data[:, 2] == 0).any() and np.isnan(dm.data[df["k"].to_numpy() == 0, 2]).all()


# ----------------------------------------------------------------------------- bad input
def test_a_category_column_without_enable_categorical_names_the_column_and_the_flag():
    df, y = _frame()
    with pytest.raises(DGBoostTypeError, match=r"column 'c' is categorical.*enable_categorical=True"):
        dg.DMatrix(df, y, enable_categorical=False)
    with pytest.raises(ValueError, match="enable_categorical"):  # XGBoost refuses it too
        xgb.DMatrix(df, y, enable_categorical=False)


@pytest.mark.parametrize("enable", [True, False])
def test_a_string_column_is_refused_naming_it_and_how_to_make_it_categorical(enable):
    df, y = _frame()
    df = df.assign(s=df["c"].astype(str)).drop(columns="c")
    with pytest.raises(DGBoostTypeError, match=r"column 's' holds strings.*astype\('category'\)"):
        dg.DMatrix(df, y, enable_categorical=enable)
    with pytest.raises(ValueError):
        xgb.DMatrix(df, y, enable_categorical=True)


def test_mixed_and_floating_point_category_values_are_refused_as_xgboost_refuses_them():
    mixed = pd.DataFrame({"m": pd.Categorical(["a", 1, "b"]), "x": [1.0, 2.0, 3.0]})
    with pytest.raises(DGBoostValueError, match=r"column 'm': its categories mix types"):
        dg.DMatrix(mixed, [0, 1, 0])
    with pytest.raises(Exception, match="same type"):
        xgb.DMatrix(mixed, [0, 1, 0], enable_categorical=True)
    floats = pd.DataFrame({"f": pd.Categorical([1.5, 2.5, 1.5]), "x": [1.0, 2.0, 3.0]})
    with pytest.raises(DGBoostValueError, match=r"column 'f': its categories are floating-point"):
        dg.DMatrix(floats, [0, 1, 0])
    with pytest.raises(Exception, match="floating point"):
        xgb.DMatrix(floats, [0, 1, 0], enable_categorical=True)


def test_nan_as_a_category_value_is_refused():
    with pytest.raises(DGBoostValueError, match=r"column 'c': a category value is missing"):
        checked_categories("c", np.array(["a", None, "b"], dtype=object))
    with pytest.raises(DGBoostValueError, match=r"column 'c': NaN is one of its category values"):
        checked_categories("c", np.array([1.0, np.nan]))
    dictionary = pa.DictionaryArray.from_arrays(pa.array([0, 1, 0], pa.int32()), pa.array(["a", None]))
    table = pa.table({"c": dictionary, "x": pa.array([1.0, 2.0, 3.0])})
    with pytest.raises(DGBoostError):
        dg.DMatrix(table, [0, 1, 0])


def test_more_than_65534_categories_are_refused_naming_the_column():
    values = np.array([f"v{i}" for i in range(MAX_CATEGORIES + 1)], dtype=object)
    df = pd.DataFrame({"wide": pd.Categorical(values[:3], categories=values), "x": [1.0, 2.0, 3.0]})
    with pytest.raises(DGBoostValueError, match=r"column 'wide' has 65535 categories; at most 65534"):
        dg.DMatrix(df, [0, 1, 0])
    with pytest.raises(DGBoostValueError, match=r"column 'f0' is categorical with codes up to 65534"):
        dg.DMatrix(np.array([[65534.0], [0.0]]), feature_types=["c"])


def test_feature_types_that_contradict_a_category_column_are_refused():
    df, y = _frame()
    with pytest.raises(DGBoostValueError, match=r"column 'c' is a category column but feature_types gives it 'q'"):
        dg.DMatrix(df, y, feature_types=["q", "q", "q"])
    with pytest.raises(DGBoostValueError, match=r"unknown feature type 'x'"):
        dg.DMatrix(df, y, feature_types=["c", "x", "q"])


def test_partitions_with_strings_in_one_and_integers_in_another_cannot_agree():
    with pytest.raises(DGBoostValueError, match=r"partition 0 has string categories but partition 2 has integer"):
        union_categories("c", [(0, np.array(["a"], dtype=object)), (1, np.empty(0, object)), (2, np.array([1]))])
    agreed = union_categories("c", [(0, np.array(["b", "a"], dtype=object)), (1, np.array(["c", "a"], dtype=object))])
    assert agreed.tolist() == ["a", "b", "c"]


# ----------------------------------------------------------------------------- re-coding
def test_a_validation_matrix_with_ref_is_recoded_to_the_training_categories():
    df, y = _frame()
    train = dg.DMatrix(df, y)
    valid = dg.DMatrix(_reordered(df), y, ref=train)
    np.testing.assert_array_equal(valid.data, train.data)
    assert valid.categories[0].tolist() == LETTERS


def _booster(df, y, rounds=4):
    params = {"objective": "binary:logistic", "max_depth": 3, "max_cat_to_onehot": 1}
    return dg.train(params, dg.DMatrix(df, y), rounds, verbose_eval=False)


def test_the_booster_keeps_the_categories_and_predicts_a_reordered_frame_the_same():
    df, y = _frame()
    booster = _booster(df, y)
    assert booster.meta["categories"] == [LETTERS, None, None]
    assert booster.feature_types == ["c", "float", "int"]
    expected = booster.predict(dg.DMatrix(df))
    shuffled = _reordered(df, ["f", "a", "l", "k", "b", "c", "j", "d", "e", "i", "g", "h"])
    np.testing.assert_array_equal(booster.predict(shuffled), expected)
    np.testing.assert_array_equal(booster.predict(dg.DMatrix(shuffled)), expected)
    np.testing.assert_array_equal(booster.inplace_predict(shuffled), expected)
    np.testing.assert_array_equal(
        booster.predict(shuffled, pred_contribs=True), booster.predict(dg.DMatrix(df), pred_contribs=True)
    )


def test_a_frame_with_a_subset_of_the_categories_predicts_as_the_training_codes():
    df, y = _frame()
    booster = _booster(df, y)
    rows = df[df["c"].isin(["c", "h", "k"])].copy()
    rows["c"] = rows["c"].cat.remove_unused_categories()
    assert rows["c"].cat.categories.size < len(LETTERS)
    np.testing.assert_array_equal(booster.predict(rows), booster.predict(df[df["c"].isin(["c", "h", "k"])]))


def test_a_category_not_seen_in_training_is_refused_naming_it_as_xgboost_does():
    df, y = _frame()
    booster = _booster(df, y)
    unseen = df.iloc[:3].copy()
    unseen["c"] = pd.Categorical(["a", "zz", "b"], categories=["a", "b", "zz"])
    with pytest.raises(DGBoostValueError, match=r"column 'c': category 'zz' is not among the categories of the model"):
        booster.predict(unseen)
    reference = xgb.train({"max_depth": 2}, xgb.DMatrix(df, y, enable_categorical=True), 2)
    with pytest.raises(xgb.core.XGBoostError, match="not in the training set"):
        reference.predict(xgb.DMatrix(unseen, enable_categorical=True))


def test_numpy_codes_predict_as_the_frames_codes():
    df, y = _frame()
    booster = _booster(df, y)
    X = dg.DMatrix(df).data
    np.testing.assert_array_equal(booster.predict(X, validate_features=False), booster.predict(df))


def test_a_category_column_where_the_model_has_a_numeric_feature_is_refused():
    df, y = _frame()
    numeric = df.assign(c=df["c"].cat.codes.astype(np.float64))
    booster = _booster(numeric, y)
    with pytest.raises(DGBoostValueError, match=r"column 'c' is a category column but it is a numeric feature"):
        booster.predict(df)


def test_an_evaluation_set_with_reordered_categories_is_evaluated_on_the_training_codes():
    df, y = _frame()
    dtrain = dg.DMatrix(df, y)
    params = {"objective": "binary:logistic", "max_depth": 3, "eval_metric": "logloss"}
    same, reordered = {}, {}
    dg.train(params, dtrain, 3, evals=[(dg.DMatrix(df, y), "v")], evals_result=same, verbose_eval=False)
    dg.train(
        params, dtrain, 3, evals=[(dg.DMatrix(_reordered(df), y), "v")], evals_result=reordered, verbose_eval=False
    )
    assert reordered == same


def test_cv_folds_keep_the_category_values():
    df, y = _frame()
    result = dg.cv({"objective": "binary:logistic", "max_depth": 2}, dg.DMatrix(df, y), 2, nfold=2, seed=1)
    assert len(result["test-logloss-mean"]) == 2


# ----------------------------------------------------------------------------- scikit-learn
def test_the_sklearn_estimators_take_category_columns_and_the_categorical_parameters():
    df, y = _frame()
    model = dg.DGBClassifier(n_estimators=3, max_depth=3, max_cat_to_onehot=1, max_cat_threshold=8).fit(df, y)
    params = model.get_params()
    assert params["enable_categorical"] is True and params["max_cat_threshold"] == 8
    assert model.get_booster().meta["categories"][0] == LETTERS
    np.testing.assert_array_equal(model.predict_proba(_reordered(df)), model.predict_proba(df))
    with pytest.raises(DGBoostTypeError, match="enable_categorical=True"):
        dg.DGBClassifier(n_estimators=2, enable_categorical=False).fit(df, y)


def test_the_sklearn_feature_types_make_numpy_columns_categorical():
    df, y = _frame()
    X = dg.DMatrix(df).data
    model = dg.DGBRegressor(n_estimators=2, max_depth=2, feature_types=["c", "q", "q"]).fit(X, y)
    assert model.get_booster().feature_types == ["c", "q", "q"]


def test_continuing_a_model_on_reordered_categories_recodes_the_rows_to_the_models():
    df, y = _frame()
    params = {"objective": "binary:logistic", "max_depth": 3, "max_cat_to_onehot": 1}
    first = _booster(df, y, rounds=2)
    same = dg.train(params, dg.DMatrix(df, y), 2, xgb_model=first, verbose_eval=False)
    reordered = dg.train(params, dg.DMatrix(_reordered(df), y), 2, xgb_model=first, verbose_eval=False)
    assert reordered.save_raw("json") == same.save_raw("json")
    unseen = df.assign(c=df["c"].cat.add_categories(["zz"]))
    with pytest.raises(
        DGBoostValueError, match="category 'zz' is not among the categories of the model being continued"
    ):
        dg.train(params, dg.DMatrix(unseen, y), 1, xgb_model=first, verbose_eval=False)


def test_a_quantile_dmatrix_takes_category_columns_and_recodes_to_its_ref():
    df, y = _frame()
    train = dg.QuantileDMatrix(df, y, max_bin=64)
    assert train.feature_types == ["c", "float", "int"] and train.categories[0].tolist() == LETTERS
    valid = dg.QuantileDMatrix(_reordered(df), y, ref=train)
    np.testing.assert_array_equal(valid.data, train.data)
    with pytest.raises(DGBoostTypeError, match="enable_categorical=True"):
        dg.QuantileDMatrix(df, y, enable_categorical=False)
