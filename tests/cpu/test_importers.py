"""Importers (``to_ensemble``): scikit-learn, LightGBM, XGBoost and model files, checked
against the models' own predictions and against ``shap.TreeExplainer``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import sklearn.ensemble as sk_ens
import sklearn.tree as sk_tree
from hypothesis import given, settings
from hypothesis import strategies as st

from dgboost import DGBoostError, ModelFormatError, TreeExplainer
from dgboost.explain import UnsupportedModelError, to_ensemble
from dgboost.explain.importers import ThresholdEncoder, sklearn_split_values


def make_data(n=600, F=5, seed=0, missing=0.0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, F)).astype(dtype)
    X[:, 3] = np.round(X[:, 3])  # ties on thresholds
    z = X[:, 0] * X[:, 1] + X[:, 2] + 0.5 * X[:, 3]
    if missing:
        X[rng.random(X.shape) < missing] = np.nan
    y = z + 0.1 * rng.normal(size=n)
    return X, y, (y > 0).astype(int), np.digitize(y, [-0.5, 0.5])


def output_of(model, X):
    """What the explainer explains: probabilities of sklearn tree classifiers, decision
    functions of boosting classifiers, predictions of regressors; (n, k) or (n,)."""
    name = type(model).__name__
    if name in ("GradientBoostingClassifier", "HistGradientBoostingClassifier"):
        return model.decision_function(X)
    if hasattr(model, "predict_proba") and "LGBM" not in name:
        return model.predict_proba(X)
    if "LGBM" in name:
        return model.predict(X, raw_score=True)
    return model.predict(X)


def assert_additive(explainer, X, model):
    phi = explainer.shap_values(X)
    total = phi.sum(axis=1) + explainer.expected_value
    out = output_of(model, X)
    np.testing.assert_allclose(total, out, rtol=1e-5, atol=1e-5 * (1 + np.abs(out).max()))


X, Y, YC, Y3 = make_data()
SKLEARN = {
    "decision tree regressor": lambda: sk_tree.DecisionTreeRegressor(max_depth=6).fit(X, Y),
    "decision tree classifier": lambda: sk_tree.DecisionTreeClassifier(max_depth=6).fit(X, Y3),
    "random forest regressor": lambda: sk_ens.RandomForestRegressor(10, max_depth=6, random_state=0).fit(X, Y),
    "random forest classifier": lambda: sk_ens.RandomForestClassifier(10, max_depth=6, random_state=0).fit(X, Y3),
    "extra trees regressor": lambda: sk_ens.ExtraTreesRegressor(10, max_depth=6, random_state=0).fit(X, Y),
    "extra trees classifier": lambda: sk_ens.ExtraTreesClassifier(10, max_depth=6, random_state=0).fit(X, YC),
    "gradient boosting regressor": lambda: sk_ens.GradientBoostingRegressor(
        n_estimators=15, max_depth=4, random_state=0
    ).fit(X, Y),
    "gradient boosting classifier": lambda: sk_ens.GradientBoostingClassifier(
        n_estimators=15, max_depth=4, random_state=0
    ).fit(X, YC),
}


# ---------------------------------------------------------------------------------------
# scikit-learn against shap
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", list(SKLEARN))
def test_sklearn_models_match_shap_path_dependent_and_interventional(kind):
    import shap

    model = SKLEARN[kind]()
    Xq, bg = X[:40], X[300:340]
    for data in (None, bg):
        ref_e = shap.TreeExplainer(model, data=data)
        ref = np.asarray(ref_e.shap_values(Xq, check_additivity=False))
        e = TreeExplainer(model, data=data)
        got = e.shap_values(Xq)
        assert got.shape == ref.shape
        scale = np.abs(ref).max()
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-5 * scale)
        np.testing.assert_allclose(e.expected_value, ref_e.expected_value, rtol=0, atol=1e-5 * scale)
    assert_additive(TreeExplainer(model), X[:200], model)


def test_sklearn_interaction_values_match_shap():
    import shap

    model = SKLEARN["random forest regressor"]()
    ref = shap.TreeExplainer(model).shap_interaction_values(X[:10])
    np.testing.assert_allclose(TreeExplainer(model).shap_interaction_values(X[:10]), ref, rtol=0, atol=1e-6)


def test_sklearn_trees_with_missing_values_follow_missing_go_to_left():
    import shap

    Xn, y, _, y3 = make_data(missing=0.2, seed=3)
    for model in (
        sk_tree.DecisionTreeClassifier(max_depth=7).fit(Xn, y3),
        sk_ens.RandomForestRegressor(8, max_depth=7, random_state=0).fit(Xn, y),
    ):
        e = TreeExplainer(model)
        assert_additive(e, Xn[:200], model)
        ref = shap.TreeExplainer(model).shap_values(Xn[:50], check_additivity=False)
        np.testing.assert_allclose(e.shap_values(Xn[:50]), ref, rtol=0, atol=1e-6)


def test_trees_deeper_than_32_work_on_the_cpu():
    Xd, yd, _, _ = make_data(n=5000, F=8, seed=4)
    model = sk_tree.DecisionTreeRegressor(random_state=0).fit(Xd, yd)  # max_depth=None
    assert model.get_depth() > 32
    e = TreeExplainer(model)
    assert_additive(e, Xd[:300], model)
    np.testing.assert_allclose(
        TreeExplainer(model, algorithm="path").shap_values(Xd[:100]), e.shap_values(Xd[:100]), rtol=0, atol=1e-9
    )
    import shap

    ref = shap.TreeExplainer(model).shap_values(Xd[:100])
    np.testing.assert_allclose(e.shap_values(Xd[:100]), ref, rtol=0, atol=1e-5 * np.abs(ref).max())
    inter = e.shap_interaction_values(Xd[:3])
    np.testing.assert_allclose(inter.sum(axis=2), e.shap_values(Xd[:3]), rtol=0, atol=1e-9)


def test_paths_with_more_than_32_distinct_features_work_on_the_cpu():
    from dgboost.testing.shap_oracle import chain_tree, predict_margin
    from dgboost.tree import Ensemble

    rng = np.random.default_rng(8)
    ens = Ensemble(1, 0.5)
    for _ in range(2):
        ens.append(chain_tree(rng, 40, 40, distinct=True))
    e = TreeExplainer((ens, {}))
    assert e.table.max_length == 41  # 40 distinct features + the bias element
    Xc = rng.normal(size=(50, 40)).astype(np.float32)
    Xc[rng.random(Xc.shape) < 0.1] = np.nan
    margin = predict_margin(ens, Xc)[:, 0]
    for explainer in (e, TreeExplainer((ens, {}), algorithm="path"), TreeExplainer((ens, {}), data=Xc[:7])):
        phi = explainer.shap_values(Xc)
        np.testing.assert_allclose(phi.sum(1) + explainer.expected_value, margin, rtol=1e-9, atol=1e-9)


def test_multi_output_regressors_get_one_output_per_target():
    Y2 = np.column_stack([Y, X[:, 0] - Y])
    for model in (
        sk_tree.DecisionTreeRegressor(max_depth=5).fit(X, Y2),
        sk_ens.RandomForestRegressor(5, max_depth=5, random_state=0).fit(X, Y2),
    ):
        e = TreeExplainer(model)
        assert e.shap_values(X[:20]).shape == (20, X.shape[1], 2)
        assert_additive(e, X[:100], model)


def test_multiclass_gradient_boosting_and_hist_gradient_boosting_add_up():
    Xn, y, yc, y3 = make_data(missing=0.1, seed=5, dtype=np.float64)
    models = [
        sk_ens.GradientBoostingClassifier(n_estimators=10, max_depth=3).fit(X, Y3),
        sk_ens.HistGradientBoostingRegressor(max_iter=15).fit(Xn, y),
        sk_ens.HistGradientBoostingClassifier(max_iter=15).fit(Xn, yc),
        sk_ens.HistGradientBoostingClassifier(max_iter=15).fit(Xn, y3),
    ]
    for model in models:
        data = X if type(model).__name__ == "GradientBoostingClassifier" else Xn
        assert_additive(TreeExplainer(model), data[:300], model)
    import shap

    ref = shap.TreeExplainer(models[1]).shap_values(Xn[:30], check_additivity=False)
    np.testing.assert_allclose(TreeExplainer(models[1]).shap_values(Xn[:30]), ref, rtol=0, atol=1e-6)


# ---------------------------------------------------------------------------------------
# LightGBM
# ---------------------------------------------------------------------------------------
def lgb_models():
    import lightgbm as lgb

    kw = {"n_estimators": 15, "num_leaves": 15, "verbose": -1, "random_state": 0}
    return {
        "regression": lgb.LGBMRegressor(**kw).fit(X, Y),
        "binary": lgb.LGBMClassifier(**kw).fit(X, YC),
        "multiclass": lgb.LGBMClassifier(**kw).fit(X, Y3),
    }


@pytest.mark.filterwarnings("ignore:LightGBM binary classifier:UserWarning")
def test_lightgbm_models_match_shap_path_dependent_and_interventional():
    import shap

    for task, model in lgb_models().items():
        Xq, bg = X[:40], X[300:340]
        for data in (None, bg):
            ref_e = shap.TreeExplainer(model, data=data)
            ref = np.asarray(ref_e.shap_values(Xq, check_additivity=False))
            e = TreeExplainer(model, data=data)
            got = e.shap_values(Xq)
            assert got.shape == ref.shape, task
            scale = np.abs(ref).max()
            np.testing.assert_allclose(got, ref, rtol=0, atol=1e-5 * scale, err_msg=task)
            np.testing.assert_allclose(e.expected_value, ref_e.expected_value, rtol=0, atol=1e-5 * scale, err_msg=task)
        assert_additive(TreeExplainer(model.booster_), X[:200], model)


@pytest.mark.parametrize(
    "params",
    [{}, {"zero_as_missing": True}, {"use_missing": False}],
    ids=["missing NaN", "missing zero", "missing none"],
)
def test_lightgbm_missing_rules_and_float64_thresholds_are_reproduced_exactly(params):
    import lightgbm as lgb

    rng = np.random.default_rng(6)
    Xl = rng.normal(size=(800, 5))  # float64: LightGBM compares float64 values
    Xl[rng.random(Xl.shape) < 0.1] = np.nan
    Xl[rng.random(Xl.shape) < 0.1] = 0.0
    y = np.nan_to_num(Xl[:, 0]) * 2 + np.nan_to_num(Xl[:, 1], nan=3.0) + (Xl[:, 2] == 0)
    model = lgb.LGBMRegressor(n_estimators=20, verbose=-1, **params).fit(Xl, y)
    e = TreeExplainer(model)
    assert e.meta["input_encoder"] is not None
    phi = e.shap_values(Xl)
    np.testing.assert_allclose(phi.sum(1) + e.expected_value, model.predict(Xl, raw_score=True), rtol=1e-6, atol=1e-6)
    ref = model.predict(Xl, pred_contrib=True)  # LightGBM's own TreeSHAP
    np.testing.assert_allclose(phi, ref[:, :-1], rtol=0, atol=1e-6)


def test_lightgbm_random_forest_mode_explains_the_raw_score_like_lightgbm_and_shap():
    import lightgbm as lgb

    model = lgb.LGBMRegressor(
        boosting_type="rf", n_estimators=10, bagging_freq=1, bagging_fraction=0.7, verbose=-1
    ).fit(X, Y)
    e = TreeExplainer(model)
    assert_additive(e, X[:100], model)  # raw_score: the sum of the trees
    np.testing.assert_allclose(e.shap_values(X[:100]), model.predict(X[:100], pred_contrib=True)[:, :-1], atol=1e-5)


def test_lightgbm_text_model_files_and_dump_dicts_are_read(tmp_path):
    model = lgb_models()["multiclass"]
    path = tmp_path / "model.txt"
    model.booster_.save_model(str(path))
    want = TreeExplainer(model).shap_values(X[:20])
    np.testing.assert_allclose(TreeExplainer(str(path)).shap_values(X[:20]), want, atol=1e-12)
    np.testing.assert_allclose(TreeExplainer(model.booster_.dump_model()).shap_values(X[:20]), want, atol=1e-12)


def test_lightgbm_categorical_splits_raise_instead_of_giving_wrong_numbers():
    import lightgbm as lgb

    frame = pd.DataFrame(X, columns=list("abcde"))
    frame["c"] = pd.Categorical(np.where(X[:, 2] > 0, "p", "q"))
    model = lgb.LGBMRegressor(n_estimators=5, verbose=-1, min_data_per_group=5).fit(frame, Y)
    with pytest.raises(UnsupportedModelError, match="categorical"):
        TreeExplainer(model)


# ---------------------------------------------------------------------------------------
# XGBoost and files
# ---------------------------------------------------------------------------------------
def test_xgboost_sklearn_models_and_json_files_are_imported(tmp_path):
    import xgboost as xgb

    Xn, y, yc, y3 = make_data(missing=0.1, seed=7)
    model = xgb.XGBClassifier(n_estimators=6, max_depth=4).fit(Xn, y3)
    contribs = model.get_booster().predict(xgb.DMatrix(Xn[:30]), pred_contribs=True)
    want = np.moveaxis(contribs[:, :, :-1], 1, 2)
    np.testing.assert_allclose(TreeExplainer(model).shap_values(Xn[:30]), want, atol=1e-5)
    path = tmp_path / "m.json"
    model.save_model(path)
    np.testing.assert_allclose(TreeExplainer(str(path)).shap_values(Xn[:30]), want, atol=1e-5)
    np.testing.assert_allclose(TreeExplainer(path.read_bytes()).shap_values(Xn[:30]), want, atol=1e-5)
    ens, meta = to_ensemble(model)
    assert meta["source"] == "xgboost" and meta["output_names"] == [0, 1, 2] or list(meta["output_names"]) == [0, 1, 2]


@pytest.mark.parametrize("num_parallel_tree", [1, 2])
def test_xgboost_sklearn_models_with_early_stopping_explain_the_rounds_predict_uses(num_parallel_tree):
    import xgboost as xgb

    model = xgb.XGBRegressor(
        n_estimators=60,
        max_depth=3,
        learning_rate=0.5,
        early_stopping_rounds=3,
        num_parallel_tree=num_parallel_tree,
        subsample=0.8,
    )
    model.fit(X[:400], Y[:400], eval_set=[(X[400:], Y[400:])], verbose=False)
    assert model.best_iteration + 1 < 60
    e = TreeExplainer(model)
    assert e.ensemble.n_trees == (model.best_iteration + 1) * num_parallel_tree
    np.testing.assert_allclose(
        e.shap_values(X[:50]).sum(1) + e.expected_value, model.predict(X[:50], output_margin=True), rtol=1e-5, atol=1e-5
    )


def test_xgboost_categorical_models_are_explained_as_xgboost_explains_them():
    import xgboost as xgb

    frame = pd.DataFrame(X, columns=list("abcde"))
    frame["c"] = pd.Categorical(np.where(X[:, 2] > 0, "p", "q"))
    booster = xgb.train({"max_depth": 3}, xgb.DMatrix(frame, label=Y, enable_categorical=True), 3)
    assert any("c:{" in tree for tree in booster.get_dump())  # the model has categorical splits
    want = booster.predict(xgb.DMatrix(frame, enable_categorical=True), pred_contribs=True)
    codes = frame.assign(c=frame["c"].cat.codes.astype(np.float32)).to_numpy(np.float32)
    np.testing.assert_allclose(TreeExplainer(booster).shap_values(codes), want[:, :-1], atol=1e-5)


# ---------------------------------------------------------------------------------------
# unsupported models
# ---------------------------------------------------------------------------------------
def test_unsupported_models_raise_dgboost_errors_that_name_them():
    with pytest.raises(UnsupportedModelError, match="IsolationForest is not supported"):
        TreeExplainer(sk_ens.IsolationForest(n_estimators=3).fit(X))
    with pytest.raises(UnsupportedModelError, match="multi-output"):
        TreeExplainer(sk_tree.DecisionTreeClassifier(max_depth=2).fit(X, np.column_stack([YC, YC])))
    with pytest.raises(UnsupportedModelError, match="init estimator"):
        init = sk_tree.DecisionTreeRegressor(max_depth=1)
        TreeExplainer(sk_ens.GradientBoostingRegressor(n_estimators=2, init=init).fit(X, Y))
    with pytest.raises(DGBoostError, match="not fitted"):
        TreeExplainer(sk_ens.RandomForestRegressor())
    with pytest.raises(UnsupportedModelError, match="cannot explain a builtins.list"):
        TreeExplainer([1, 2, 3])
    with pytest.raises(ModelFormatError):
        TreeExplainer({"trees": []})
    with pytest.raises(DGBoostError, match="not found"):
        TreeExplainer("/nonexistent/model.json")


# ---------------------------------------------------------------------------------------
# exact threshold conversion
# ---------------------------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(t=st.floats(allow_nan=False, width=64), x=st.floats(allow_nan=False, allow_infinity=False, width=32))
def test_sklearn_thresholds_convert_to_exactly_the_same_float32_decisions(t, x):
    s = sklearn_split_values(np.array([t]))[0]
    with np.errstate(over="ignore"):
        t32 = np.float32(t)
        candidates = [np.float32(x)]
        if np.isfinite(t32):  # the float32 values right around the threshold
            candidates += [t32, np.nextafter(t32, np.float32(np.inf)), np.nextafter(t32, np.float32(-np.inf))]
    for xs in candidates:
        assert bool(xs < s) == bool(np.float64(xs) <= t)


@settings(max_examples=100, deadline=None)
@given(
    ts=st.lists(st.floats(allow_nan=False, allow_infinity=False, width=64), min_size=1, max_size=6),
    xs=st.lists(st.floats(allow_nan=False, allow_infinity=False, width=64), min_size=1, max_size=10),
)
def test_threshold_ranks_keep_every_float64_decision(ts, xs):
    thresholds = np.unique(np.asarray(ts, dtype=np.float64))
    enc = ThresholdEncoder(thresholds=[thresholds], missing_type=np.array([2], np.int8))
    codes = enc(np.asarray(xs, dtype=np.float64).reshape(-1, 1))[:, 0]
    for j, t in enumerate(thresholds):
        split = np.float32(j + 0.5)
        np.testing.assert_array_equal(codes < split, np.asarray(xs) <= t)
