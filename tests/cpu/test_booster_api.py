"""Booster methods beyond predict and save: importance, dumps, training steps, evaluation,
configuration and slicing.

Oracle: XGBoost itself, loading the model dgboost saved (``save_model`` writes XGBoost's
JSON schema) and answering the same question; for the training steps, ``dgboost.train``.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
import xgboost as xgb

import dgboost as dgb

IMPORTANCE_TYPES = ("weight", "gain", "cover", "total_gain", "total_cover")


def _data(seed=0, n=400, f=6, nan_fraction=0.1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, f)).astype(np.float32)
    X[rng.random(X.shape) < nan_fraction] = np.nan
    y_bin = ((np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) ** 2) > 0.5).astype(np.float32)
    y_reg = (np.nan_to_num(X[:, 0]) * 2 + np.nan_to_num(X[:, 2]) + rng.normal(0, 0.1, n)).astype(np.float32)
    y_cls = (np.digitize(np.nan_to_num(X[:, 0]), [-0.5, 0.5])).astype(np.float32)
    return X, {"bin": y_bin, "reg": y_reg, "cls": y_cls}


CASES = {
    "binary": ({"objective": "binary:logistic", "max_depth": 3}, "bin"),
    "regression": ({"objective": "reg:squarederror", "max_depth": 4, "eta": 0.2}, "reg"),
    "multiclass": ({"objective": "multi:softprob", "num_class": 3, "max_depth": 3}, "cls"),
}


@pytest.fixture(scope="module", params=list(CASES))
def pair(request, tmp_path_factory):
    """(dgboost booster, the same model loaded by XGBoost, X, y, params)."""
    params, label = CASES[request.param]
    X, ys = _data()
    names = [f"feat_{i}" for i in range(X.shape[1])] if request.param == "regression" else None
    b = dgb.train(params, dgb.DMatrix(X, label=ys[label], feature_names=names), 5)
    path = tmp_path_factory.mktemp("m") / "model.json"
    b.save_model(path)
    return b, xgb.Booster(model_file=str(path)), X, ys[label], params


# -- importance -------------------------------------------------------------------------------
@pytest.mark.parametrize("importance_type", IMPORTANCE_TYPES)
def test_get_score_equals_xgboost_on_the_same_model(pair, importance_type):
    b, x, *_ = pair
    ours, theirs = b.get_score(importance_type=importance_type), x.get_score(importance_type=importance_type)
    assert ours.keys() == theirs.keys() and ours
    for k in theirs:
        assert ours[k] == pytest.approx(theirs[k], rel=1e-5)


def test_get_score_rejects_an_unknown_importance_type(pair):
    with pytest.raises(ValueError, match="importance_type"):
        pair[0].get_score(importance_type="splits")


def test_get_fscore_is_the_weight_importance(pair):
    assert pair[0].get_fscore() == pair[0].get_score(importance_type="weight")


def test_get_score_reads_feature_names_from_a_feature_map_file(pair, tmp_path):
    b, x, X, *_ = pair
    fmap = tmp_path / "fmap.txt"
    fmap.write_text("".join(f"{i}\tname{i}\tq\n" for i in range(X.shape[1])))
    assert b.get_score(fmap=str(fmap)) == x.get_score(fmap=str(fmap))


# -- dumps ------------------------------------------------------------------------------------
@pytest.mark.parametrize("with_stats", [False, True])
def test_json_dump_equals_xgboosts_text_for_text(pair, with_stats):
    b, x, *_ = pair
    ours = b.get_dump(dump_format="json", with_stats=with_stats)
    assert ours == x.get_dump(dump_format="json", with_stats=with_stats)
    for tree in ours:
        json.loads(tree)  # every tree is valid JSON


def test_json_dump_trees_describe_the_same_nodes_as_the_text_dump(pair):
    b = pair[0]
    for text, js in zip(b.get_dump(with_stats=True), b.get_dump(dump_format="json", with_stats=True)):
        stack, ids = [json.loads(js)], set()
        while stack:
            node = stack.pop()
            ids.add(node["nodeid"])
            stack.extend(node.get("children", []))
        assert ids == {int(m) for m in re.findall(r"^\s*(\d+):", text, re.M)}


def test_unknown_dump_format_is_rejected(pair):
    with pytest.raises(ValueError, match="dump_format"):
        pair[0].get_dump(dump_format="dot")


def test_trees_to_dataframe_matches_xgboosts_columns_dtypes_and_values(pair):
    b, x, *_ = pair
    ours, theirs = b.trees_to_dataframe(), x.trees_to_dataframe()
    assert list(ours.columns) == list(theirs.columns)
    assert {"Tree", "Node", "ID", "Feature", "Split", "Yes", "No", "Missing", "Gain", "Cover", "Category"} <= set(
        ours.columns
    )
    assert (ours.dtypes == theirs.dtypes).all()
    pd.testing.assert_frame_equal(ours.drop(columns="Category"), theirs.drop(columns="Category"), rtol=1e-5)
    assert ours["Category"].isna().all()
    assert len(ours) == sum(int(n) for n in b.ensemble.offsets()[1:] - b.ensemble.offsets()[:-1])


# -- training steps ---------------------------------------------------------------------------
STEP_PARAMS = {
    "objective": "binary:logistic",
    "max_depth": 3,
    "subsample": 0.8,
    "colsample_bytree": 0.7,
    "seed": 3,
    "eta": 0.4,
}


def _bin_matrix():
    X, ys = _data(1)
    return dgb.DMatrix(X, label=ys["bin"])


def test_five_updates_give_the_model_train_gives_for_five_rounds():
    d = _bin_matrix()
    ref = dgb.train(STEP_PARAMS, d, 5)
    b = dgb.Booster(STEP_PARAMS)
    for i in range(5):
        b.update(d, i)
    assert b.num_boosted_rounds() == 5
    assert bytes(b.save_raw()) == bytes(ref.save_raw())


def test_update_continues_a_trained_model_like_train_with_xgb_model():
    d = _bin_matrix()
    b = dgb.train(STEP_PARAMS, d, 3)
    ref = dgb.train(STEP_PARAMS, d, 2, xgb_model=b.copy())
    b.update(d, 3)
    b.update(d, 4)
    assert bytes(b.save_raw()) == bytes(ref.save_raw())


def test_update_uses_parameters_given_to_set_param():
    d = _bin_matrix()
    b = dgb.train(STEP_PARAMS, d, 1)
    b.set_param({"max_depth": 1})
    b.update(d, 1)
    last = b[1:2].trees_to_dataframe()
    assert (last["Feature"] != "Leaf").sum() == 1  # a stump


def test_update_with_a_custom_objective_equals_train_with_obj():
    d = _bin_matrix()

    def logistic(margin, dtrain):
        p = 1.0 / (1.0 + np.exp(-margin))
        return p - dtrain.get_label(), p * (1.0 - p)

    params = {k: v for k, v in STEP_PARAMS.items() if k != "objective"}
    ref = dgb.train(params, d, 3, obj=logistic)
    b = dgb.Booster(params)
    for i in range(3):
        b.update(d, i, fobj=logistic)
    np.testing.assert_array_equal(b.predict(d, output_margin=True), ref.predict(d, output_margin=True))


def test_boost_with_the_objectives_own_gradients_equals_update():
    d = _bin_matrix()
    start = dgb.train(STEP_PARAMS, d, 2)
    via_update, via_boost = start.copy(), start.copy()
    via_update.update(d, 2)
    margin = via_boost.predict(d, output_margin=True)
    p = 1.0 / (1.0 + np.exp(-margin.astype(np.float64)))
    label = d.get_label()
    grad, hess = (p - label).astype(np.float32), np.maximum(p * (1 - p), 1e-16).astype(np.float32)
    via_boost.boost(d, 2, grad, hess)
    assert via_boost.num_boosted_rounds() == 3
    assert via_boost.meta["objective"] == "binary:logistic"
    np.testing.assert_allclose(via_boost.predict(d), via_update.predict(d), rtol=1e-5, atol=1e-6)
    assert via_boost.get_dump() == via_update.get_dump()


def test_boost_takes_keyword_gradients_and_fobj_like_xgboost_3():
    d = _bin_matrix()
    b = dgb.train(STEP_PARAMS, d, 1)
    n = d.num_row()
    b.boost(d, 1, grad=np.full(n, 0.5, np.float32), hess=np.ones(n, np.float32))
    b.boost(d, 2, fobj=lambda m, dm: (np.full(n, -0.5, np.float32), np.ones(n, np.float32)))
    assert b.num_boosted_rounds() == 3
    with pytest.raises(ValueError):
        b.boost(d, 3)
    with pytest.raises(ValueError):
        b.boost(d, 3, grad=np.ones(n - 1, np.float32), hess=np.ones(n - 1, np.float32))


# -- evaluation strings -----------------------------------------------------------------------
def _parse(line):
    head, *items = line.split("\t")
    return head, {k: float(v) for k, v in (item.rsplit(":", 1) for item in items)}


def test_eval_string_matches_xgboosts_format_and_values(pair):
    b, x, X, y, _ = pair
    ours = b.eval(dgb.DMatrix(X, label=y, feature_names=b.feature_names))
    theirs = x.eval(xgb.DMatrix(X, label=y, feature_names=x.feature_names))
    assert re.fullmatch(r"\[0\](\teval-[a-z]+:-?\d+\.\d{17})+", ours)
    head, got = _parse(ours)
    head_x, want = _parse(theirs)
    assert head == head_x and got.keys() == want.keys()
    for k in want:
        assert got[k] == pytest.approx(want[k], rel=1e-5)


def test_eval_set_lists_every_set_and_metric_and_a_custom_feval():
    X, ys = _data(2)
    params = {"objective": "binary:logistic", "max_depth": 3, "eval_metric": ["logloss", "auc"]}
    b = dgb.train(params, dgb.DMatrix(X, label=ys["bin"]), 4)
    xb = xgb.train(params, xgb.DMatrix(X, label=ys["bin"]), 4)
    feval = lambda preds, dm: ("mean", float(np.mean(preds)))  # noqa: E731
    ours = b.eval_set(
        [(dgb.DMatrix(X, label=ys["bin"]), "a"), (dgb.DMatrix(X[:100], label=ys["bin"][:100]), "b")], 3, feval=feval
    )
    theirs = xb.eval_set(
        [(xgb.DMatrix(X, label=ys["bin"]), "a"), (xgb.DMatrix(X[:100], label=ys["bin"][:100]), "b")], 3, feval=feval
    )
    assert [item.split(":")[0] for item in ours.split("\t")] == [item.split(":")[0] for item in theirs.split("\t")]
    assert ours.startswith("[3]\ta-logloss:")
    assert re.search(r"\ta-mean:-?\d+\.\d{6}\t", ours)
    _, got = _parse(ours)
    d = dgb.DMatrix(X, label=ys["bin"])
    assert got["a-mean"] == pytest.approx(float(np.mean(b.predict(d, output_margin=True))), abs=1e-6)


def test_eval_set_rejects_what_is_not_a_dmatrix_name_pair(pair):
    with pytest.raises(TypeError):
        pair[0].eval_set([(np.zeros((2, 6)), "x")])
    with pytest.raises(TypeError):
        pair[0].eval_set([(dgb.DMatrix(np.zeros((2, 6), np.float32)), 1)])


# -- configuration ----------------------------------------------------------------------------
def test_save_config_round_trips_the_training_parameters(pair):
    b = pair[0]
    config = b.save_config()
    d = json.loads(config)
    assert d["learner"]["learner_train_param"]["objective"] == b.meta["objective"]
    assert d["learner"]["gradient_booster"]["tree_train_param"]["max_depth"] == str(b.meta["params"]["max_depth"])
    fresh = dgb.Booster()
    fresh.load_config(config)
    assert fresh.meta["params"] == json.loads(json.dumps(b.meta["params"]))
    again = json.loads(fresh.save_config())
    assert again["dgboost"] == d["dgboost"]
    for key in ("tree_train_param",):
        assert again["learner"]["gradient_booster"][key] == d["learner"]["gradient_booster"][key]
    assert again["learner"]["learner_train_param"] == d["learner"]["learner_train_param"]


def test_load_config_reads_xgboosts_own_configuration():
    X, ys = _data(3)
    xb = xgb.train(
        {"objective": "binary:logistic", "max_depth": 2, "eta": 0.25, "eval_metric": "auc"},
        xgb.DMatrix(X, label=ys["bin"]),
        1,
    )
    b = dgb.Booster()
    b.load_config(xb.save_config())
    p = b.meta["params"]
    assert (p["max_depth"], p["eta"], p["objective"], p["eval_metric"]) == (
        2,
        pytest.approx(0.25),
        "binary:logistic",
        ["auc"],
    )


def test_load_config_rejects_text_that_is_not_a_configuration():
    with pytest.raises(ValueError):
        dgb.Booster().load_config("not json")


# -- set_param, inplace_predict, slicing --------------------------------------------------------
def test_inplace_predict_equals_predict_and_xgboosts_inplace_predict(pair):
    b, x, X, *_ = pair
    ours = b.inplace_predict(X)
    np.testing.assert_array_equal(ours, b.predict(dgb.DMatrix(X)))
    np.testing.assert_allclose(ours, x.inplace_predict(X), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        b.inplace_predict(X, predict_type="margin"), x.inplace_predict(X, predict_type="margin"), rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize("begin,end", [(0, 1), (2, 5), (1, 3), (4, 5)])
def test_slices_predict_as_xgboosts_iteration_range(pair, begin, end):
    b, x, X, *_ = pair
    sliced = b[begin:end]
    assert sliced.num_boosted_rounds() == end - begin
    ours = sliced.predict(dgb.DMatrix(X), output_margin=True)
    np.testing.assert_array_equal(ours, b.predict(dgb.DMatrix(X), output_margin=True, iteration_range=(begin, end)))
    xd = xgb.DMatrix(X, feature_names=x.feature_names)
    theirs = x.predict(xd, output_margin=True, iteration_range=(begin, end))
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ours, x[begin:end].predict(xd, output_margin=True), rtol=1e-5, atol=1e-5)


def test_slicing_with_a_step_is_rejected(pair):
    with pytest.raises(TypeError):
        pair[0][0:4:2]


def test_set_param_changes_where_prediction_runs_but_not_the_predictions(pair):
    b, _, X, *_ = pair
    c = b.copy()
    c.set_param({"nthread": 1})
    c.set_param("device", "cpu")
    np.testing.assert_array_equal(c.predict(dgb.DMatrix(X)), b.predict(dgb.DMatrix(X)))
    with pytest.raises(ValueError):
        c.set_param("device", "tpu")
