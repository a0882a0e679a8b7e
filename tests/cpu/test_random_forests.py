"""Random forests: ``num_parallel_tree`` trees per output group and round, XGBoost's
``XGBRFRegressor`` / ``XGBRFClassifier``, and forests in model files both ways."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import xgboost

import dgboost as dg
from dgboost.errors import DGBoostValueError, ParameterError
from dgboost.testing.shap_oracle import brute_force_shap


def _regression(n=1500, seed=0, missing=0.1):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 6)).astype(np.float32)
    y = (x[:, 0] + np.sin(2 * x[:, 1]) + x[:, 2] * x[:, 3] + rng.normal(scale=0.3, size=n)).astype(np.float32)
    x[rng.random(x.shape) < missing] = np.nan
    return x, y


def _classes(n=1500, k=3, seed=1):
    x, signal = _regression(n, seed)
    y = np.digitize(signal, np.quantile(signal, np.linspace(0, 1, k + 1)[1:-1])).astype(np.float32)
    return x, y


FOREST = {"num_parallel_tree": 3, "subsample": 0.7, "colsample_bynode": 0.6, "max_depth": 3, "seed": 4}
POLICIES = {
    "depthwise": {},
    "lossguide": {"grow_policy": "lossguide", "max_depth": 0, "max_leaves": 7},
}


def _train(params, x, y, rounds=4):
    return dg.train(params, dg.DMatrix(x, y), rounds, verbose_eval=False)


@pytest.mark.parametrize("policy", list(POLICIES))
def test_each_round_grows_num_parallel_tree_trees_per_class_ordered_by_class(policy):
    x, y = _classes()
    params = {**FOREST, **POLICIES[policy], "objective": "multi:softprob", "num_class": 3}
    booster = _train(params, x, y, rounds=4)
    assert booster.num_boosted_rounds() == 4
    assert booster.ensemble.n_trees == 4 * 3 * 3
    # XGBoost's tree_info: a round's trees by class, then by tree
    assert booster.ensemble.groups().tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2] * 4
    assert booster[1:3].ensemble.n_trees == 2 * 9
    assert booster.predict(dg.DMatrix(x), pred_leaf=True).shape == (len(x), 36)


def test_the_trees_of_a_round_differ_by_their_own_row_and_column_samples():
    x, y = _regression()
    booster = _train(FOREST, x, y, rounds=1)
    trees = booster.ensemble.trees()
    assert len(trees) == 3
    # each tree's root cover is the hessian sum of its own row sample
    assert len({float(t.cover[0]) for t in trees}) == 3
    assert all(0.6 * len(x) < t.cover[0] < 0.8 * len(x) for t in trees)


def test_without_sampling_the_trees_of_a_round_are_one_tree_with_leaves_scaled_by_one_over_p():
    x, y = _regression()
    one = _train({"max_depth": 4, "eta": 0.5}, x, y, rounds=3)
    forest = _train({"max_depth": 4, "eta": 0.5, "num_parallel_tree": 4}, x, y, rounds=3)
    for r in range(3):
        single = one.ensemble.tree(r)
        for j in range(4):
            tree = forest.ensemble.tree(4 * r + j)
            np.testing.assert_array_equal(tree.feature, single.feature)
            np.testing.assert_array_equal(tree.split_value, single.split_value)
            leaves = tree.is_leaf
            np.testing.assert_allclose(tree.value[leaves] * 4, single.value[leaves], rtol=1e-6)
    dm = dg.DMatrix(x)
    np.testing.assert_allclose(forest.predict(dm), one.predict(dm), rtol=1e-5, atol=1e-6)


def test_adaptive_leaves_of_a_forest_refit_on_the_margins_before_the_round():
    # reg:absoluteerror refits every leaf to a quantile of its rows' residuals: a forest of
    # identical trees predicts as one tree only when every tree refits on the same margins
    x, y = _regression()
    params = {"objective": "reg:absoluteerror", "max_depth": 3, "eta": 0.8}
    one = _train(params, x, y, rounds=3)
    forest = _train({**params, "num_parallel_tree": 3}, x, y, rounds=3)
    dm = dg.DMatrix(x)
    np.testing.assert_allclose(forest.predict(dm), one.predict(dm), rtol=1e-5, atol=1e-5)


def test_iteration_ranges_and_slices_count_a_round_as_all_its_trees():
    x, y = _regression()
    booster = _train(FOREST, x, y, rounds=5)
    dm = dg.DMatrix(x)
    base = booster.predict(dm, output_margin=True, iteration_range=(0, 0))
    parts = [booster.predict(dm, output_margin=True, iteration_range=(r, r + 1)) for r in range(5)]
    intercept = booster[0:0].predict(dm, output_margin=True)
    np.testing.assert_allclose(sum(p - intercept for p in parts) + intercept, base, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(
        booster[1:3].predict(dm, output_margin=True), booster.predict(dm, output_margin=True, iteration_range=(1, 3))
    )


def test_one_tree_per_round_keeps_its_model_files_without_a_num_parallel_tree_key():
    x, y = _regression()
    saved = json.loads(_train({"max_depth": 3, "num_parallel_tree": 1}, x, y, rounds=2).to_json())
    assert "num_parallel_tree" not in saved["learner"]["params"]
    forest = _train(FOREST, x, y, rounds=2)
    assert json.loads(forest.to_json())["learner"]["params"]["num_parallel_tree"] == 3
    config = json.loads(forest.save_config())["learner"]["gradient_booster"]["gbtree_model_param"]
    assert config == {"num_parallel_tree": "3", "num_trees": "6"}


@pytest.mark.parametrize("value", [0, -2])
def test_num_parallel_tree_below_one_is_refused(value):
    with pytest.raises(ParameterError, match="num_parallel_tree"):
        dg.train({"num_parallel_tree": value}, dg.DMatrix(*_regression(100)), 1)


def test_continuing_a_forest_keeps_its_size_and_another_size_is_refused():
    x, y = _regression()
    first = _train(FOREST, x, y, rounds=2)
    more = dg.train(FOREST, dg.DMatrix(x, y), 2, xgb_model=first, verbose_eval=False)
    assert more.num_boosted_rounds() == 4 and more.ensemble.n_trees == 12
    with pytest.raises(DGBoostValueError, match="num_parallel_tree=3 with num_parallel_tree=2"):
        dg.train({**FOREST, "num_parallel_tree": 2}, dg.DMatrix(x, y), 1, xgb_model=first)


def test_a_learning_rate_schedule_scales_every_tree_of_a_forest_by_one_over_p():
    x, y = _regression()
    params = {"max_depth": 3, "eta": 0.3}
    one = dg.train(
        params,
        dg.DMatrix(x, y),
        3,
        verbose_eval=False,
        callbacks=[dg.callback.LearningRateScheduler(lambda r: 0.6 - 0.1 * r)],
    )
    forest = dg.train(
        {**params, "num_parallel_tree": 2},
        dg.DMatrix(x, y),
        3,
        verbose_eval=False,
        callbacks=[dg.callback.LearningRateScheduler(lambda r: 0.6 - 0.1 * r)],
    )
    for r in range(3):
        single, tree = one.ensemble.tree(r), forest.ensemble.tree(2 * r + 1)
        np.testing.assert_allclose(tree.value[tree.is_leaf] * 2, single.value[single.is_leaf], rtol=1e-6)


def test_booster_update_adds_a_round_of_the_forest():
    x, y = _regression()
    dtrain = dg.DMatrix(x, y)
    booster = dg.train(FOREST, dtrain, 2, verbose_eval=False)
    booster.update(dtrain, 2)
    assert booster.num_boosted_rounds() == 3 and booster.ensemble.n_trees == 9
    assert booster.to_json() == _train(FOREST, x, y, rounds=3).to_json()


@pytest.mark.parametrize("objective", ["reg:squarederror", "multi:softprob"])
def test_a_dgboost_forest_loads_in_xgboost_with_equal_predictions(tmp_path, objective):
    x, y = _classes() if objective.startswith("multi") else _regression()
    params = {**FOREST, "objective": objective, **({"num_class": 3} if objective.startswith("multi") else {})}
    booster = _train(params, x, y, rounds=4)
    path = tmp_path / "forest.json"
    booster.save_model(path)
    theirs = xgboost.Booster(model_file=str(path))
    assert theirs.num_boosted_rounds() == 4
    gbtree = json.loads(theirs.save_raw("json"))["learner"]["gradient_booster"]["model"]
    assert gbtree["gbtree_model_param"]["num_parallel_tree"] == "3"
    for rounds in [(0, 0), (1, 3)]:
        np.testing.assert_allclose(
            theirs.predict(xgboost.DMatrix(x), iteration_range=rounds),
            booster.predict(dg.DMatrix(x), iteration_range=rounds),
            rtol=1e-6,
            atol=1e-6,
        )


def test_an_xgboost_forest_loads_in_dgboost_with_equal_predictions_and_rounds(tmp_path):
    x, y = _regression()
    theirs = xgboost.train(
        {"num_parallel_tree": 3, "subsample": 0.8, "colsample_bynode": 0.8, "max_depth": 4},
        xgboost.DMatrix(x, y),
        4,
    )
    path = tmp_path / "xgb_forest.json"
    theirs.save_model(str(path))
    booster = dg.Booster(model_file=path)
    assert booster.num_boosted_rounds() == 4 and booster.ensemble.n_trees == 12
    for rounds in [(0, 0), (0, 1), (2, 4)]:
        np.testing.assert_allclose(
            booster.predict(dg.DMatrix(x), iteration_range=rounds),
            theirs.predict(xgboost.DMatrix(x), iteration_range=rounds),
            rtol=1e-6,
            atol=1e-6,
        )


def test_shap_values_of_a_forest_equal_the_brute_force_oracle():
    x, y = _regression(n=300)
    booster = _train({**FOREST, "max_depth": 2, "num_parallel_tree": 2}, x, y, rounds=2)
    rows = x[:40]
    contribs = booster.predict(dg.DMatrix(rows), pred_contribs=True)
    oracle = brute_force_shap(booster.ensemble, rows)[:, 0, :]
    np.testing.assert_allclose(contribs, oracle, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        contribs.sum(axis=1), booster.predict(dg.DMatrix(rows), output_margin=True), rtol=1e-5, atol=1e-5
    )


# -- scikit-learn estimators ---------------------------------------------------------------------


def _split(x, y, n_train):
    return x[:n_train], y[:n_train], x[n_train:], y[n_train:]


def _quietly(estimator, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # XGBoost 3.4 deprecates its RF estimators
        return estimator.fit(*args)


def test_xgbrfregressor_reaches_xgboosts_held_out_rmse():
    x, y = _regression(n=6000, seed=7)
    x_tr, y_tr, x_te, y_te = _split(x, y, 4500)
    ours = dg.XGBRFRegressor(n_estimators=60, max_depth=6, random_state=0).fit(x_tr, y_tr)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        theirs = xgboost.XGBRFRegressor(n_estimators=60, max_depth=6, random_state=0).fit(x_tr, y_tr)
    rmse_ours = float(np.sqrt(np.mean((ours.predict(x_te) - y_te) ** 2)))
    rmse_theirs = float(np.sqrt(np.mean((theirs.predict(x_te) - y_te) ** 2)))
    assert rmse_ours <= 1.01 * rmse_theirs, (rmse_ours, rmse_theirs)
    booster = ours.get_booster()
    assert booster.num_boosted_rounds() == 1 and booster.ensemble.n_trees == 60


def test_xgbrfclassifier_reaches_xgboosts_held_out_auc():
    from sklearn.metrics import roc_auc_score

    x, signal = _regression(n=6000, seed=8)
    y = (signal > np.median(signal)).astype(int)
    x_tr, y_tr, x_te, y_te = _split(x, y, 4500)
    ours = dg.XGBRFClassifier(n_estimators=60, max_depth=6, random_state=0).fit(x_tr, y_tr)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        theirs = xgboost.XGBRFClassifier(n_estimators=60, max_depth=6, random_state=0).fit(x_tr, y_tr)
    auc_ours = roc_auc_score(y_te, ours.predict_proba(x_te)[:, 1])
    auc_theirs = roc_auc_score(y_te, theirs.predict_proba(x_te)[:, 1])
    assert auc_ours >= auc_theirs - 0.005, (auc_ours, auc_theirs)


def test_rf_estimators_have_xgboosts_defaults_and_one_boosting_round():
    for ours, theirs in [(dg.XGBRFRegressor, xgboost.XGBRFRegressor), (dg.XGBRFClassifier, xgboost.XGBRFClassifier)]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            expected = theirs(n_estimators=7).get_params()
        model = ours(n_estimators=7)
        got = model.get_params()
        for key in ("learning_rate", "subsample", "colsample_bynode", "reg_lambda", "n_estimators", "objective"):
            assert got[key] == expected[key], key
        assert model.get_num_boosting_rounds() == 1
        assert model.get_xgb_params()["num_parallel_tree"] == 7


def test_an_rf_classifier_fits_several_classes_as_one_round_of_trees_per_class():
    x, y = _classes(n=900)
    model = dg.XGBRFClassifier(n_estimators=5, max_depth=3).fit(x, y.astype(int))
    booster = model.get_booster()
    assert booster.num_boosted_rounds() == 1
    assert booster.ensemble.groups().tolist() == [0] * 5 + [1] * 5 + [2] * 5
    assert model.predict_proba(x).shape == (900, 3)
    assert model.get_xgb_params()["objective"] == "multi:softprob"


def test_rf_estimators_refuse_early_stopping_as_xgboost_does():
    x, y = _regression(n=300)
    model = dg.XGBRFRegressor(n_estimators=3, early_stopping_rounds=2)
    with pytest.raises(DGBoostValueError, match="early_stopping_rounds"):
        model.fit(x, y, eval_set=[(x, y)])


def test_xgbmodel_is_the_base_of_every_estimator():
    assert dg.XGBModel is dg.DGBModel
    for name in ("XGBRegressor", "XGBClassifier", "XGBRanker", "XGBRFRegressor", "XGBRFClassifier"):
        assert issubclass(getattr(dg, name), dg.XGBModel)
        assert name in dg.__all__
    assert {"XGBModel", "DGBRFRegressor", "DGBRFClassifier"} <= set(dg.__all__)


_ESTIMATOR_CHECKS = [
    "check_no_attributes_set_in_init",
    "check_get_params_invariance",
    "check_set_params",
    "check_parameters_default_constructible",
    "check_dont_overwrite_parameters",
    "check_estimators_unfitted",
    "check_n_features_in_after_fitting",
    "check_estimators_pickle",
    "check_fit_idempotent",
]
# the classifier's fit sets objective="multi:softprob" for several classes, as XGBClassifier
# does: DGBClassifier's behaviour, decided and checked in test_sklearn.py
_CLASSIFIER_OWN = {"check_dont_overwrite_parameters"}


@pytest.mark.parametrize(
    "cls, check",
    [("XGBRFRegressor", c) for c in _ESTIMATOR_CHECKS]
    + [("XGBRFClassifier", c) for c in _ESTIMATOR_CHECKS if c not in _CLASSIFIER_OWN],
)
def test_rf_estimators_pass_scikit_learns_estimator_checks(cls, check):
    from sklearn.utils import estimator_checks

    estimator = getattr(dg, cls)
    getattr(estimator_checks, check)(estimator.__name__, estimator(n_estimators=3))
