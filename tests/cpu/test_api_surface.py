"""The rest of the API an XGBoost script touches (issue 28), checked against XGBoost 3.4.1.

DMatrix meta information (``set_info``, ``get/set_float_info``, ``get/set_uint_info``,
``slice``, ``save_binary``), ``Booster.dump_model``, ``Booster.to_xgboost`` for shap,
``QuantileDMatrix(..., ref=)`` and the scikit-learn wrapper's parameter behaviour.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
import shap  # declared test dependency: fail, never skip
import xgboost  # declared test dependency: fail, never skip

import dgboost
from dgboost.errors import DGBoostError, DGBoostValueError, ParameterError


def _data(n=300, f=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, f)).astype(np.float32)
    y = (X[:, 0] + np.sin(X[:, 1]) > 0).astype(np.float32)
    return X, y, rng.random(n).astype(np.float32) + 0.5


# -- DMatrix meta information ------------------------------------------------------------
def test_set_info_sets_the_fields_xgboost_sets_and_get_float_info_reads_them_back_as_xgboost():
    X, y, w = _data()
    margin = np.linspace(-1, 1, len(y)).astype(np.float32)
    ours, theirs = dgboost.DMatrix(X), xgboost.DMatrix(X)
    for dm in (ours, theirs):
        dm.set_info(label=y, weight=w, base_margin=margin, feature_names=list("abcde"))
    for field in ("label", "weight", "base_margin"):
        np.testing.assert_array_equal(ours.get_float_info(field), theirs.get_float_info(field))
        assert ours.get_float_info(field).dtype == np.float32
    assert ours.feature_names == theirs.feature_names == list("abcde")


def test_float_info_of_an_unset_field_is_empty_as_in_xgboost():
    X, _, _ = _data()
    for field in ("label", "weight", "base_margin"):
        assert dgboost.DMatrix(X).get_float_info(field).shape == xgboost.DMatrix(X).get_float_info(field).shape == (0,)


def test_set_float_info_and_set_uint_info_match_xgboost_group_pointers():
    X, y, w = _data(n=10)
    ours, theirs = dgboost.DMatrix(X), xgboost.DMatrix(X)
    for dm in (ours, theirs):
        dm.set_float_info("label", y)
        dm.set_float_info("weight", w)
        dm.set_uint_info("group", np.array([3, 3, 4], np.uint32))
    np.testing.assert_array_equal(ours.get_label(), theirs.get_label())
    np.testing.assert_array_equal(ours.get_weight(), theirs.get_weight())
    np.testing.assert_array_equal(ours.get_uint_info("group_ptr"), theirs.get_uint_info("group_ptr"))
    assert ours.get_uint_info("group_ptr").dtype == theirs.get_uint_info("group_ptr").dtype


def test_set_info_with_qid_gives_the_group_pointers_xgboost_gives():
    X, _, _ = _data(n=9)
    qid = np.array([0, 0, 1, 1, 1, 2, 5, 5, 5])
    ours, theirs = dgboost.DMatrix(X), xgboost.DMatrix(X)
    ours.set_info(qid=qid)
    theirs.set_info(qid=qid)
    np.testing.assert_array_equal(ours.get_uint_info("group_ptr"), theirs.get_uint_info("group_ptr"))


@pytest.mark.parametrize("field", ["label_lower_bound", "label_upper_bound", "feature_weights"])
def test_set_info_refuses_the_fields_dgboost_does_not_support_and_names_them(field):
    X, y, _ = _data()
    dm = dgboost.DMatrix(X, label=y)
    with pytest.raises(DGBoostValueError, match=field):
        dm.set_info(**{field: np.ones(len(y) if field != "feature_weights" else X.shape[1])})
    np.testing.assert_array_equal(dm.get_label(), y)


def test_a_refused_set_info_call_changes_nothing():
    X, y, _ = _data()
    dm = dgboost.DMatrix(X, label=y)
    with pytest.raises(DGBoostValueError, match="weight has 3 entries"):
        dm.set_info(label=np.zeros(len(y)), weight=np.ones(3))
    np.testing.assert_array_equal(dm.get_label(), y)


def test_unknown_info_fields_are_refused_with_the_valid_names():
    X, _, _ = _data()
    dm = dgboost.DMatrix(X)
    with pytest.raises(DGBoostValueError, match="'label'"):
        dm.get_float_info("labels")
    with pytest.raises(DGBoostValueError, match="group_ptr"):
        dm.get_uint_info("group")
    with pytest.raises(DGBoostValueError, match="'group'"):
        dm.set_uint_info("group_ptr", [1])


def test_slice_keeps_the_rows_labels_weights_and_margins_as_xgboost_slice():
    X, y, w = _data()
    margin = np.linspace(-1, 1, len(y)).astype(np.float32)
    rows = [5, 0, 7, 7, 299]
    ours = dgboost.QuantileDMatrix(X, y, weight=w, base_margin=margin, max_bin=32).slice(rows)
    theirs = xgboost.DMatrix(X, y, weight=w, base_margin=margin).slice(rows)
    assert isinstance(ours, dgboost.QuantileDMatrix) and ours.max_bin == 32
    np.testing.assert_array_equal(ours.data, X[rows])
    for field in ("label", "weight", "base_margin"):
        np.testing.assert_array_equal(ours.get_float_info(field), theirs.get_float_info(field))
    assert (ours.num_row(), ours.num_col()) == (theirs.num_row(), theirs.num_col())


def test_slice_keeps_whole_or_partial_query_groups_and_refuses_to_split_one():
    X, y, _ = _data(n=7)
    dm = dgboost.DMatrix(X, y, group=[3, 4])
    np.testing.assert_array_equal(dm.slice([3, 4, 5, 6, 0, 1]).get_group(), [4, 2])
    np.testing.assert_array_equal(dm.slice([1, 2, 4]).get_group(), [2, 1])
    with pytest.raises(DGBoostValueError, match="consecutive"):
        dm.slice([0, 3, 1])


def test_slice_refuses_rows_out_of_range():
    X, y, _ = _data(n=7)
    with pytest.raises(DGBoostValueError, match="outside 0..6"):
        dgboost.DMatrix(X, y).slice([0, 7])


def test_a_sliced_matrix_trains_the_model_of_the_same_rows_given_directly():
    X, y, w = _data()
    rows = np.arange(0, 300, 2)
    params = {"objective": "binary:logistic", "max_depth": 3}
    sliced = dgboost.train(params, dgboost.DMatrix(X, y, weight=w).slice(rows), 3)
    direct = dgboost.train(params, dgboost.DMatrix(X[rows], y[rows], weight=w[rows]), 3)
    assert sliced.save_raw(raw_format="json") == direct.save_raw(raw_format="json")


def test_save_binary_raises_a_dgboost_error_naming_the_alternative(tmp_path):
    X, y, _ = _data()
    with pytest.raises(DGBoostError, match="numpy.savez"):
        dgboost.DMatrix(X, y).save_binary(tmp_path / "train.buffer")
    assert not (tmp_path / "train.buffer").exists()


# -- Booster: dump_model and the hand-off to shap ------------------------------------------
def _booster(objective="binary:logistic", rounds=4, **extra):
    X, y, _ = _data()
    if objective.startswith("multi"):
        y = (np.digitize(X[:, 0], [-0.5, 0.5])).astype(np.float32)
        extra["num_class"] = 3
    dm = dgboost.DMatrix(X, y, feature_names=list("abcde"))
    return dgboost.train({"objective": objective, "max_depth": 3, **extra}, dm, rounds), X


@pytest.mark.parametrize("dump_format", ["text", "json"])
@pytest.mark.parametrize("with_stats", [False, True])
def test_dump_model_writes_the_file_xgboost_writes_for_the_same_model(tmp_path, dump_format, with_stats):
    booster, _ = _booster()
    ours, theirs = tmp_path / "ours.txt", tmp_path / "theirs.txt"
    booster.dump_model(ours, with_stats=with_stats, dump_format=dump_format)
    booster.to_xgboost().dump_model(str(theirs), with_stats=with_stats, dump_format=dump_format)
    assert ours.read_text(encoding="utf-8") == theirs.read_text(encoding="utf-8")


def test_dump_model_writes_to_an_open_stream_and_leaves_it_open():
    booster, _ = _booster(rounds=2)
    stream = io.StringIO()
    booster.dump_model(stream)
    assert not stream.closed
    text = stream.getvalue()
    assert text.startswith("booster[0]:\n") and "booster[1]:\n" in text
    assert text == "".join(f"booster[{i}]:\n{tree}" for i, tree in enumerate(booster.get_dump()))


@pytest.mark.parametrize("objective", ["binary:logistic", "reg:squarederror", "multi:softprob"])
def test_shap_tree_explainer_of_to_xgboost_gives_dgboost_shap_values(objective):
    booster, X = _booster(objective)
    converted = booster.to_xgboost()
    assert isinstance(converted, xgboost.Booster)
    values = np.asarray(shap.TreeExplainer(converted).shap_values(X))
    ours = booster.predict(dgboost.DMatrix(X, feature_names=list("abcde")), pred_contribs=True)
    if ours.ndim == 3:  # (n, groups, F + 1) -> shap's (n, F, groups)
        ours = np.moveaxis(ours, 1, 2)[:, :-1, :]
    else:
        ours = ours[:, :-1]
    assert values.shape == ours.shape
    np.testing.assert_allclose(values, ours, rtol=0, atol=1e-5)


def test_to_xgboost_predicts_as_the_dgboost_booster():
    booster, X = _booster()
    theirs = booster.to_xgboost().predict(xgboost.DMatrix(X, feature_names=list("abcde")))
    ours = booster.predict(dgboost.DMatrix(X, feature_names=list("abcde")))
    np.testing.assert_allclose(theirs, ours, rtol=0, atol=1e-6)


# -- QuantileDMatrix(ref=) -----------------------------------------------------------------
def test_a_validation_quantile_dmatrix_with_ref_takes_its_bins_and_is_scored_on_its_rows():
    X, y, _ = _data(n=1000)
    dtrain = dgboost.QuantileDMatrix(X[:700], y[:700], max_bin=16)
    dvalid = dgboost.QuantileDMatrix(X[700:], y[700:], ref=dtrain)
    assert dvalid.max_bin == 16
    history: dict = {}
    params = {"objective": "binary:logistic", "eval_metric": "logloss", "max_depth": 4}
    booster = dgboost.train(params, dtrain, 5, evals=[(dvalid, "valid")], evals_result=history, verbose_eval=False)
    # the training cuts: at most max_bin - 1 split values per feature, as XGBoost's hist
    e = booster.ensemble
    for f in range(X.shape[1]):
        assert len(np.unique(e.split_value[(e.left >= 0) & (e.feature == f)])) <= 15
    # the metric is that of the booster's predictions of the validation rows (XGBoost's logloss)
    p = np.clip(booster.predict(dgboost.DMatrix(X[700:])).astype(np.float64), 1e-16, 1 - 1e-16)
    logloss = -np.mean(y[700:] * np.log(p) + (1 - y[700:]) * np.log(1 - p))
    assert history["valid"]["logloss"][-1] == pytest.approx(logloss, rel=1e-5)
    # and XGBoost's binned prediction of the same rows with ref=training data agrees
    xtrain = xgboost.QuantileDMatrix(X[:700], y[:700], max_bin=16)
    xvalid = xgboost.QuantileDMatrix(X[700:], y[700:], max_bin=16, ref=xtrain)
    xgb_history: dict = {}
    xgboost.train(
        {**params, "max_bin": 16}, xtrain, 5, evals=[(xvalid, "valid")], evals_result=xgb_history, verbose_eval=False
    )
    assert history["valid"]["logloss"][-1] == pytest.approx(xgb_history["valid"]["logloss"][-1], abs=0.02)


def test_quantile_dmatrix_refuses_a_max_bin_other_than_its_refs():
    X, y, _ = _data()
    dtrain = dgboost.QuantileDMatrix(X, y, max_bin=16)
    with pytest.raises(DGBoostValueError, match="max_bin"):
        dgboost.QuantileDMatrix(X, y, max_bin=32, ref=dtrain)


# -- scikit-learn wrapper ------------------------------------------------------------------
def test_a_multiclass_fit_reports_objective_multi_softprob_as_xgboost():
    X, _, _ = _data()
    y = np.digitize(X[:, 0], [-0.5, 0.5])
    ours = dgboost.XGBClassifier(n_estimators=2).fit(X, y)
    theirs = xgboost.XGBClassifier(n_estimators=2).fit(X, y)
    assert ours.get_params()["objective"] == theirs.get_params()["objective"] == "multi:softprob"
    assert dgboost.XGBClassifier(n_estimators=2).fit(X, y > 0).get_params()["objective"] == "binary:logistic"


def test_a_misspelt_constructor_argument_gets_the_argument_as_suggestion():
    X, y, _ = _data()
    with pytest.raises(ParameterError, match="did you mean 'n_estimators'"):
        dgboost.XGBRegressor(n_estimator=3).fit(X, y)
    with pytest.raises(ParameterError, match="did you mean 'early_stopping_rounds'"):
        dgboost.XGBClassifier(early_stopping_round=3).fit(X, y)
    # a misspelt training parameter still gets the nearest training parameter
    with pytest.raises(ParameterError, match="did you mean 'scale_pos_weight'"):
        dgboost.XGBClassifier(scale_pos_weigth=3).fit(X, y)


def test_string_labels_which_xgboost_refuses_are_accepted_and_train_the_encoded_labels_model():
    X, y, _ = _data()
    names = np.array(["no", "yes"])[y.astype(int)]
    with pytest.raises(ValueError, match="Invalid classes"):
        xgboost.XGBClassifier(n_estimators=2).fit(X, names)
    ours = dgboost.XGBClassifier(n_estimators=3).fit(X, names)
    encoded = dgboost.XGBClassifier(n_estimators=3).fit(X, y.astype(int))
    assert list(ours.classes_) == ["no", "yes"]
    np.testing.assert_array_equal(ours.predict(X), np.array(["no", "yes"])[encoded.predict(X)])
    np.testing.assert_array_equal(ours.predict_proba(X), encoded.predict_proba(X))
