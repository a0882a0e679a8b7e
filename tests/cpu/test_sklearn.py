"""The scikit-learn estimators: quality against XGBoost's, label handling, early stopping,
scikit-learn's parameter protocol, feature checks, persistence and ranking."""

from __future__ import annotations

import pickle
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import xgboost
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits
from sklearn.metrics import accuracy_score, log_loss, mean_squared_error, ndcg_score
from sklearn.model_selection import GridSearchCV, train_test_split
from sklearn.utils import estimator_checks

import dgboost
from dgboost.datasets import make_synthetic
from dgboost.sklearn import DGBClassifier, DGBModel, DGBRanker, DGBRegressor

PARAMS = dict(n_estimators=40, max_depth=3, learning_rate=0.1)


@pytest.fixture(scope="module")
def diabetes():
    X, y = load_diabetes(return_X_y=True)
    return train_test_split(X, y, test_size=0.25, random_state=0)


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer(return_X_y=True)
    return train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    return train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)


@pytest.fixture(scope="module")
def fitted_cancer_model(cancer):
    Xtr, _, ytr, _ = cancer
    return DGBClassifier(**PARAMS).fit(Xtr, ytr)


# ----------------------------------------------------------------------------- quality
def test_regressor_on_diabetes_is_within_two_percent_of_xgboost_rmse(diabetes):
    Xtr, Xte, ytr, yte = diabetes
    ours = DGBRegressor(**PARAMS).fit(Xtr, ytr)
    theirs = xgboost.XGBRegressor(tree_method="hist", **PARAMS).fit(Xtr, ytr)
    rmse_ours = mean_squared_error(yte, ours.predict(Xte)) ** 0.5
    rmse_theirs = mean_squared_error(yte, theirs.predict(Xte)) ** 0.5
    assert rmse_ours <= rmse_theirs * 1.02
    assert ours.score(Xte, yte) > 0.2  # R^2 from RegressorMixin


def test_binary_classifier_on_breast_cancer_matches_xgboost_accuracy_and_logloss(cancer):
    Xtr, Xte, ytr, yte = cancer
    ours = DGBClassifier(**PARAMS).fit(Xtr, ytr)
    theirs = xgboost.XGBClassifier(tree_method="hist", **PARAMS).fit(Xtr, ytr)
    acc_ours, acc_theirs = accuracy_score(yte, ours.predict(Xte)), accuracy_score(yte, theirs.predict(Xte))
    assert acc_ours >= acc_theirs - 0.02
    assert log_loss(yte, ours.predict_proba(Xte)) <= log_loss(yte, theirs.predict_proba(Xte)) * 1.02 + 1e-3
    assert ours.score(Xte, yte) == pytest.approx(acc_ours)
    assert ours.get_booster().meta["objective"] == "binary:logistic"


def test_multiclass_classifier_on_digits_matches_xgboost_accuracy(digits):
    Xtr, Xte, ytr, yte = digits
    params = dict(n_estimators=12, max_depth=3, learning_rate=0.3)
    ours = DGBClassifier(**params).fit(Xtr, ytr)
    theirs = xgboost.XGBClassifier(tree_method="hist", **params).fit(Xtr, ytr)
    assert ours.n_classes_ == 10
    assert ours.get_booster().meta["objective"] == "multi:softprob"
    acc_ours, acc_theirs = accuracy_score(yte, ours.predict(Xte)), accuracy_score(yte, theirs.predict(Xte))
    assert acc_ours >= acc_theirs - 0.02
    proba = ours.predict_proba(Xte)
    assert proba.shape == (len(Xte), 10)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-5)


@pytest.mark.parametrize("alpha", [0.3, [0.1, 0.5, 0.9]])
def test_regressor_takes_quantile_alpha_as_xgbregressor_does_and_predicts_the_same(tmp_path, alpha):
    rng = np.random.default_rng(2)
    X = rng.integers(0, 12, size=(400, 4)).astype(np.float32)  # the same cuts in both libraries
    y = (0.3 * X[:, 0] + rng.normal(size=400)).astype(np.float32)
    kw = dict(objective="reg:quantileerror", quantile_alpha=alpha, n_estimators=6, max_depth=3)
    ours = DGBRegressor(**kw).fit(X, y)
    theirs = xgboost.XGBRegressor(tree_method="hist", **kw).fit(X, y)
    assert ours.predict(X).shape == theirs.predict(X).shape == ((400,) if np.ndim(alpha) == 0 else (400, 3))
    np.testing.assert_allclose(ours.predict(X), theirs.predict(X), rtol=1e-5, atol=1e-5)
    assert clone(ours).get_params()["quantile_alpha"] == alpha
    path = tmp_path / "q.json"
    ours.save_model(path)
    loaded = xgboost.XGBRegressor()
    loaded.load_model(str(path))
    np.testing.assert_allclose(loaded.predict(X), ours.predict(X), rtol=0, atol=1e-6)


# ----------------------------------------------------------------------------- labels
def test_string_class_labels_round_trip_through_fit_predict_and_save_load(tmp_path):
    X, y_int, _ = make_synthetic(600, n_features=6, task="multiclass", seed=3)
    names = np.array(["cat", "dog", "emu"])
    y = names[y_int]
    clf = DGBClassifier(n_estimators=10, max_depth=3).fit(X, y)
    assert list(clf.classes_) == ["cat", "dog", "emu"]
    pred = clf.predict(X)
    assert set(pred) <= set(names)
    assert accuracy_score(y, pred) > 0.6
    path = tmp_path / "clf.json"
    clf.save_model(path)
    loaded = DGBClassifier()
    loaded.load_model(path)
    assert list(loaded.classes_) == ["cat", "dog", "emu"]
    assert loaded.n_classes_ == 3
    np.testing.assert_array_equal(loaded.predict(X), pred)
    np.testing.assert_allclose(loaded.predict_proba(X), clf.predict_proba(X))


def test_binary_string_labels_and_unsorted_numeric_labels_map_back_to_originals():
    X, y01, _ = make_synthetic(400, n_features=5, task="binary", seed=1)
    y = np.where(y01 == 1, "yes", "no")
    clf = DGBClassifier(n_estimators=5).fit(X, y)
    assert list(clf.classes_) == ["no", "yes"]
    assert clf.predict_proba(X).shape == (400, 2)
    assert set(clf.predict(X)) <= {"no", "yes"}
    y_odd = np.where(y01 == 1, 7, -3)
    clf = DGBClassifier(n_estimators=5).fit(X, y_odd)
    assert list(clf.classes_) == [-3, 7]
    assert set(clf.predict(X)) <= {-3, 7}


def test_predict_proba_rows_sum_to_one_and_predict_is_their_argmax(fitted_cancer_model, cancer):
    _, Xte, _, _ = cancer
    proba = fitted_cancer_model.predict_proba(Xte)
    assert proba.shape == (len(Xte), 2)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-6)
    assert ((proba >= 0) & (proba <= 1)).all()
    np.testing.assert_array_equal(fitted_cancer_model.predict(Xte), proba.argmax(axis=1))


def test_classifier_rejects_a_single_class_and_eval_labels_never_seen_in_training():
    X = np.random.default_rng(0).normal(size=(20, 3))
    with pytest.raises(dgboost.DGBoostError, match="1 class"):
        DGBClassifier(n_estimators=2).fit(X, np.zeros(20))
    y = np.array(["a", "b"] * 10)
    with pytest.raises(dgboost.DGBoostError, match="not seen in training"):
        DGBClassifier(n_estimators=2).fit(X, y, eval_set=[(X, np.array(["a", "c"] * 10))])


# ----------------------------------------------------------------------------- early stopping
def test_early_stopping_sets_best_iteration_and_predict_uses_it():
    X, y, _ = make_synthetic(1500, n_features=8, task="regression", seed=5)
    Xtr, Xva, ytr, yva = train_test_split(X, y, test_size=0.3, random_state=0)
    model = DGBRegressor(n_estimators=300, learning_rate=0.8, max_depth=6, early_stopping_rounds=3)
    model.fit(Xtr, ytr, eval_set=[(Xva, yva)])
    booster = model.get_booster()
    rounds = booster.num_boosted_rounds()
    assert rounds < 300
    assert model.best_iteration == rounds - 1 - 3
    history = model.evals_result()["validation_0"]["rmse"]
    assert len(history) == rounds
    assert model.best_score == pytest.approx(min(history))
    assert int(np.argmin(history)) == model.best_iteration
    best = booster.predict(dgboost.DMatrix(Xva), iteration_range=(0, model.best_iteration + 1))
    full = booster.predict(dgboost.DMatrix(Xva))
    np.testing.assert_array_equal(model.predict(Xva), best)
    assert not np.array_equal(best, full)
    np.testing.assert_array_equal(model.predict(Xva, iteration_range=(0, rounds)), full)


def test_best_iteration_is_undefined_without_early_stopping(diabetes):
    Xtr, Xte, ytr, yte = diabetes
    model = DGBRegressor(n_estimators=5).fit(Xtr, ytr, eval_set=[(Xte, yte)])
    assert list(model.evals_result()) == ["validation_0"]
    assert len(model.evals_result()["validation_0"]["rmse"]) == 5
    with pytest.raises(AttributeError):
        model.best_iteration


def test_eval_metric_list_and_callable_metric_are_recorded_per_eval_set(cancer):
    Xtr, Xte, ytr, yte = cancer

    def misclassified(y_true, y_pred):
        return float(np.mean((y_pred > 0.5) != y_true))

    model = DGBClassifier(n_estimators=4, eval_metric=["logloss", "auc"]).fit(
        Xtr, ytr, eval_set=[(Xtr, ytr), (Xte, yte)]
    )
    result = model.evals_result()
    assert set(result) == {"validation_0", "validation_1"}
    assert set(result["validation_1"]) == {"logloss", "auc"}
    assert result["validation_1"]["auc"][-1] > 0.9
    model = DGBClassifier(n_estimators=4, eval_metric=misclassified).fit(Xtr, ytr, eval_set=[(Xte, yte)])
    errors = model.evals_result()["validation_0"]["misclassified"]
    assert errors[-1] == pytest.approx(1 - accuracy_score(yte, model.predict(Xte)))


# ----------------------------------------------------------------------------- sklearn protocol
def test_clone_get_params_and_set_params_round_trip_including_extra_parameters():
    model = DGBClassifier(n_estimators=7, max_depth=2, scale_pos_weight=2.0)
    params = model.get_params()
    assert params["n_estimators"] == 7 and params["max_depth"] == 2
    assert params["scale_pos_weight"] == 2.0
    assert params["objective"] == "binary:logistic"
    assert params["max_bin"] is None and params["learning_rate"] is None
    copy = clone(model)
    assert copy is not model
    assert copy.get_params() == params
    assert copy.set_params(max_depth=4, learning_rate=0.5, max_cat_to_onehot=4) is copy
    assert copy.get_params()["max_depth"] == 4
    assert copy.get_params()["max_cat_to_onehot"] == 4
    assert model.get_params()["max_depth"] == 2
    assert "max_depth=2" in repr(model) and "scale_pos_weight=2.0" in repr(model)
    assert DGBRegressor().get_params()["objective"] == "reg:squarederror"
    assert DGBRanker().get_params()["objective"] == "rank:ndcg"


def test_unknown_extra_parameter_is_rejected_at_fit_with_a_suggestion():
    X, y, _ = make_synthetic(50, n_features=3, task="regression")
    model = DGBRegressor(n_estimators=2, max_dept=3)  # typo is stored, as sklearn requires
    with pytest.raises(dgboost.ParameterError, match="max_depth"):
        model.fit(X, y)


@pytest.mark.parametrize(
    "check",
    [
        estimator_checks.check_no_attributes_set_in_init,
        estimator_checks.check_get_params_invariance,
        estimator_checks.check_set_params,
        estimator_checks.check_parameters_default_constructible,
        estimator_checks.check_dont_overwrite_parameters,
        estimator_checks.check_estimators_unfitted,
        estimator_checks.check_n_features_in_after_fitting,
        estimator_checks.check_fit2d_predict1d,
        estimator_checks.check_requires_y_none,
        estimator_checks.check_estimators_pickle,
        estimator_checks.check_fit_idempotent,
        estimator_checks.check_complex_data,
        estimator_checks.check_dtype_object,
        estimator_checks.check_supervised_y_2d,
    ],
    ids=lambda c: c.__name__,
)
@pytest.mark.parametrize("cls", [DGBRegressor, DGBClassifier], ids=lambda c: c.__name__)
def test_scikit_learn_estimator_checks_pass(check, cls):
    check(cls.__name__, cls(n_estimators=3))


@pytest.mark.parametrize(
    "check",
    [
        estimator_checks.check_sample_weight_equivalence_on_dense_data,
        estimator_checks.check_sample_weight_equivalence_on_sparse_data,
    ],
    ids=lambda c: c.__name__,
)
@pytest.mark.parametrize(
    "cls",
    [
        DGBRegressor,
        # XGBClassifier passes this check; dgboost does not yet: with 15 rows and 30 features two
        # features split the rows identically (f1 and f14, equal gain) and the weighted fit breaks
        # the tie differently from the fit on repeated rows. The fix belongs in the grower's
        # tie-breaking, not in the wrapper; strict, so that the fix shows up here.
        pytest.param(
            DGBClassifier,
            marks=pytest.mark.xfail(
                strict=True, reason="equal-gain split tie broken differently under integer weights"
            ),
        ),
    ],
    ids=lambda c: c.__name__,
)
def test_integer_sample_weights_equal_repeated_rows_in_scikit_learn_checks(check, cls):
    check(cls.__name__, cls(n_estimators=5))


def test_multiclass_classifier_reports_multi_softprob_and_num_class_after_fit():
    X = np.random.default_rng(0).normal(size=(60, 3))
    y = np.arange(60) % 3
    ref = xgboost.XGBClassifier(n_estimators=2).fit(X, y)
    clf = DGBClassifier(n_estimators=2)
    assert clf.get_xgb_params()["objective"] == "binary:logistic"  # before fit: the constructor's
    clf.fit(X, y)
    params = clf.get_xgb_params()
    assert params["objective"] == ref.get_xgb_params()["objective"] == "multi:softprob"
    assert params["num_class"] == 3
    # reported as XGBoost reports it (issue 28), while fit leaves the attribute alone (scikit-learn)
    assert clf.get_params()["objective"] == ref.get_params()["objective"] == "multi:softprob"
    assert clf.objective == "binary:logistic"
    binary = DGBClassifier(n_estimators=2).fit(X, y % 2).get_xgb_params()
    assert binary["objective"] == "binary:logistic" and "num_class" not in binary


def test_xgboost_class_names_are_top_level_aliases_of_the_dgb_estimators():
    assert dgboost.XGBClassifier is DGBClassifier
    assert dgboost.XGBRegressor is DGBRegressor
    assert dgboost.XGBRanker is DGBRanker
    assert dgboost.DGBModel is DGBModel
    names = {"XGBClassifier", "XGBRegressor", "XGBRanker", "DGBClassifier", "DGBRegressor", "DGBRanker"}
    assert names <= set(dgboost.__all__) and names <= set(dir(dgboost))
    with pytest.raises(AttributeError):
        dgboost.NoSuchEstimator


def test_importing_dgboost_does_not_import_scikit_learn():
    # scikit-learn's import is slower than the rest of dgboost's: the estimators load lazily
    code = (
        "import sys, dgboost; assert 'sklearn' not in sys.modules; "
        "from dgboost import XGBClassifier; assert 'sklearn' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_object_dtype_numbers_train_and_predict_like_floats(diabetes):
    Xtr, Xte, ytr, _ = diabetes
    plain = DGBRegressor(n_estimators=3).fit(Xtr, ytr).predict(Xte)
    obj = DGBRegressor(n_estimators=3).fit(Xtr.astype(object), ytr).predict(Xte.astype(object))
    np.testing.assert_array_equal(plain, obj)


def test_estimators_work_inside_grid_search(cancer):
    Xtr, Xte, ytr, yte = cancer
    search = GridSearchCV(DGBClassifier(n_estimators=5), {"max_depth": [2, 3]}, cv=2).fit(Xtr, ytr)
    assert search.best_params_["max_depth"] in (2, 3)
    assert search.score(Xte, yte) > 0.85


# ----------------------------------------------------------------------------- features
def test_feature_names_in_comes_from_pandas_string_columns_only(diabetes):
    Xtr, Xte, ytr, _ = diabetes
    columns = [f"feat_{i}" for i in range(Xtr.shape[1])]
    frame = pd.DataFrame(Xtr, columns=columns)
    model = DGBRegressor(n_estimators=3).fit(frame, ytr)
    assert list(model.feature_names_in_) == columns
    assert model.n_features_in_ == len(columns)
    assert model.get_booster().feature_names == columns
    # numpy input at predict is accepted; a frame with other columns is not
    model.predict(Xte)
    with pytest.raises(dgboost.DGBoostError):
        model.predict(pd.DataFrame(Xte, columns=columns[::-1]))
    refit = clone(model).fit(Xtr, ytr)
    assert not hasattr(refit, "feature_names_in_")
    assert refit.n_features_in_ == Xtr.shape[1]


def test_predicting_with_a_different_number_of_features_raises_a_dgboost_error(fitted_cancer_model, cancer):
    _, Xte, _, _ = cancer
    with pytest.raises(dgboost.DGBoostError, match="30 features"):
        fitted_cancer_model.predict(Xte[:, :5])
    with pytest.raises(dgboost.DGBoostError):
        fitted_cancer_model.predict_proba(np.hstack([Xte, Xte]))


def test_feature_importances_are_normalised_mean_gain_and_find_the_informative_features():
    X, y, _ = make_synthetic(3000, n_features=20, task="regression", seed=2)
    model = DGBRegressor(n_estimators=30, max_depth=4).fit(X, y)
    imp = model.feature_importances_
    assert imp.shape == (20,)
    assert imp.sum() == pytest.approx(1.0, rel=1e-5)
    gain = model.get_booster().get_score(importance_type="gain")
    expected = np.array([gain.get(f"f{i}", 0.0) for i in range(20)])
    np.testing.assert_allclose(imp, expected / expected.sum(), rtol=1e-5)
    # the signal lives in the first ten columns (columns 12, 16, 18 are noisy copies of them)
    total = DGBRegressor(n_estimators=30, max_depth=4, importance_type="total_gain").fit(X, y).feature_importances_
    assert total.sum() == pytest.approx(1.0, rel=1e-5)
    assert total[:10].sum() > 0.6
    assert int(np.argmax(total)) < 10


def test_apply_returns_one_leaf_index_per_tree(digits):
    Xtr, Xte, ytr, _ = digits
    model = DGBClassifier(n_estimators=3, max_depth=2).fit(Xtr, ytr)
    leaves = model.apply(Xte[:7])
    assert leaves.shape == (7, 3 * 10)
    assert np.issubdtype(leaves.dtype, np.integer)


# ----------------------------------------------------------------------------- training options
def test_sample_weight_and_base_margin_change_the_model(diabetes):
    Xtr, Xte, ytr, _ = diabetes
    plain = DGBRegressor(n_estimators=5).fit(Xtr, ytr).predict(Xte)
    w = np.where(ytr > np.median(ytr), 10.0, 1.0)
    weighted = DGBRegressor(n_estimators=5).fit(Xtr, ytr, sample_weight=w).predict(Xte)
    assert weighted.mean() > plain.mean()
    margin = np.full(len(Xtr), 100.0)
    model = DGBRegressor(n_estimators=5).fit(Xtr, ytr, base_margin=margin)
    np.testing.assert_allclose(
        model.predict(Xte, base_margin=np.full(len(Xte), 100.0)),
        model.predict(Xte, base_margin=np.zeros(len(Xte))) + 100.0,
        rtol=1e-5,
    )
    with pytest.raises(dgboost.DGBoostError, match="zero"):
        DGBRegressor(n_estimators=2).fit(Xtr, ytr, sample_weight=np.zeros(len(ytr)))


def test_training_continues_from_a_fitted_model(diabetes):
    Xtr, _, ytr, _ = diabetes
    first = DGBRegressor(n_estimators=4).fit(Xtr, ytr)
    more = DGBRegressor(n_estimators=3).fit(Xtr, ytr, xgb_model=first)
    assert more.get_booster().num_boosted_rounds() == 7


def test_custom_objective_in_the_scikit_learn_signature_trains_a_regressor(diabetes):
    Xtr, Xte, ytr, yte = diabetes

    def squared_error(y_true, y_pred):
        return y_pred - y_true, np.ones_like(y_pred)

    base = float(np.mean(ytr))
    custom = DGBRegressor(objective=squared_error, base_score=base, **PARAMS).fit(Xtr, ytr)
    builtin = DGBRegressor(base_score=base, **PARAMS).fit(Xtr, ytr)
    np.testing.assert_allclose(custom.predict(Xte), builtin.predict(Xte), rtol=1e-4, atol=1e-3)


def test_regressor_save_load_and_pickle_give_identical_predictions(tmp_path, diabetes):
    Xtr, Xte, ytr, yte = diabetes
    model = DGBRegressor(n_estimators=30, early_stopping_rounds=2, learning_rate=0.9).fit(
        Xtr, ytr, eval_set=[(Xte, yte)]
    )
    path = tmp_path / "reg.json"
    model.save_model(path)
    loaded = DGBRegressor()
    loaded.load_model(path)
    assert loaded.n_features_in_ == Xtr.shape[1]
    assert loaded.best_iteration == model.best_iteration
    np.testing.assert_array_equal(loaded.predict(Xte), model.predict(Xte))
    unpickled = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(unpickled.predict(Xte), model.predict(Xte))


def test_unfitted_estimator_raises_not_fitted():
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        DGBRegressor().get_booster()
    with pytest.raises(NotFittedError):
        DGBClassifier().predict(np.zeros((2, 2)))


def test_dgbmodel_defaults_to_squared_error_regression(diabetes):
    Xtr, Xte, ytr, _ = diabetes
    model = DGBModel(n_estimators=3).fit(Xtr, ytr)
    assert model.get_booster().meta["objective"] == "reg:squarederror"
    assert model.predict(Xte).shape == (len(Xte),)


# ----------------------------------------------------------------------------- ranking
def _mean_ndcg(y, scores, sizes, k=10):
    out, start = [], 0
    for size in sizes:
        sl = slice(start, start + size)
        start += size
        if y[sl].max() > 0:
            out.append(ndcg_score([y[sl]], [scores[sl]], k=k))
    return float(np.mean(out))


def test_ranker_with_unsorted_qid_ranks_better_than_random():
    X, y, group = make_synthetic(2000, n_features=10, task="ranking", group_size=20, seed=4)
    qid = np.repeat(np.arange(len(group)), group)
    train = qid < 70
    test = ~train
    rng = np.random.default_rng(0)
    perm = rng.permutation(int(train.sum()))  # rows of a query need not be adjacent
    Xtr, ytr, qtr = X[train][perm], y[train][perm], qid[train][perm]
    ranker = DGBRanker(n_estimators=20, max_depth=4, learning_rate=0.3)
    ranker.fit(Xtr, ytr, qid=qtr, eval_set=[(X[test], y[test])], eval_qid=[qid[test]])
    assert ranker.get_booster().meta["objective"] == "rank:ndcg"
    assert "validation_0" in ranker.evals_result()
    scores = ranker.predict(X[test])
    sizes = np.bincount(qid[test])[np.unique(qid[test])]
    ours = _mean_ndcg(y[test], scores, sizes)
    random = np.mean([_mean_ndcg(y[test], rng.random(int(test.sum())), sizes) for _ in range(5)])
    assert ours > random + 0.15
    assert ranker.score(X[test], y[test], qid=qid[test]) > 0.5


def test_ranker_with_group_sizes_and_per_query_weights_trains():
    X, y, group = make_synthetic(400, n_features=6, task="ranking", group_size=10, seed=6)
    weights = np.linspace(0.5, 2.0, len(group))
    ranker = DGBRanker(n_estimators=5).fit(X, y, group=group, sample_weight=weights)
    assert ranker.predict(X).shape == (400,)
    with pytest.raises(dgboost.DGBoostError, match="group"):
        DGBRanker(n_estimators=2).fit(X, y)
