"""The model file format: XGBoost's JSON schema in and out, plus dgboost's extension.

``Booster.save_model`` writes a file ``xgboost.Booster`` loads as it is; dgboost reads it,
files older dgboost versions wrote (``tests/cpu/data/legacy_v1_binary.json``, written by
the schema-1 writer) and XGBoost's own files; unknown objectives are refused.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import xgboost as xgb

import dgboost
from dgboost.errors import ModelFormatError, ParameterError
from dgboost.model_io import EXTENSION_KEY, load_model, model_to_dict, save_model

DATA = Path(__file__).parent / "data"
N_FEAT = 5


def _data(objective: str, n: int = 400, seed: int = 3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, N_FEAT)).astype(np.float32)
    X[rng.random(X.shape) < 0.15] = np.nan  # missing values follow default_left
    z = np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, 1]) * np.nan_to_num(X[:, 2])
    if objective in ("binary:logistic", "binary:hinge"):
        y = (z > 0).astype(np.float32)
    elif objective == "multi:softprob":
        y = np.digitize(z, [-0.5, 0.5]).astype(np.float32)
    elif objective in ("reg:gamma", "reg:tweedie"):  # positive amounts, some zero for Tweedie
        y = (np.exp(0.5 * z) * (rng.random(n) < 0.8 if objective == "reg:tweedie" else 1)).astype(np.float32)
    elif objective == "survival:cox":  # survival times, negative when censored
        y = (np.round(rng.exponential(np.exp(-0.5 * z)), 1) + 0.1) * np.where(rng.random(n) < 0.7, 1, -1)
        y = y.astype(np.float32)
    else:
        y = (3 * z + 1).astype(np.float32)
    return X, y


def _train(objective: str, rounds: int = 8, **extra):
    X, y = _data(objective)
    params = {"objective": objective, "max_depth": 4, "eta": 0.3, **extra}
    if objective == "multi:softprob":
        params["num_class"] = 3
    if objective == "reg:tweedie":
        params.setdefault("tweedie_variance_power", 1.3)  # not the default: the file must carry it
    if objective == "reg:quantileerror":
        params.setdefault("quantile_alpha", [0.1, 0.5, 0.9])  # three outputs, sorted predictions
    dm = dgboost.DMatrix(X, label=y)
    booster = dgboost.train(params, dm, rounds, evals=[(dm, "train")], verbose_eval=False)
    return booster, X


OBJECTIVES = [
    "binary:logistic",
    "reg:squarederror",
    "multi:softprob",
    "reg:gamma",
    "reg:tweedie",
    "binary:hinge",
    "reg:quantileerror",
    "survival:cox",
]


# -- item 2: one format, loadable by XGBoost ----------------------------------------------
@pytest.mark.parametrize("objective", OBJECTIVES)
def test_a_saved_model_loads_in_xgboost_and_predicts_the_same_with_missing_values(tmp_path, objective):
    booster, X = _train(objective)
    path = tmp_path / "m.json"
    booster.save_model(path)
    theirs = xgb.Booster(model_file=str(path))
    assert np.isnan(X).any()
    # exp outputs (Cox hazard ratios reach 8 here) agree to float32 rounding of their size:
    # XGBoost takes the log of the float32 base_score, dgboost keeps the exact base margin
    np.testing.assert_allclose(
        theirs.predict(xgb.DMatrix(X)), booster.predict(dgboost.DMatrix(X)), rtol=1e-6, atol=1e-6
    )
    np.testing.assert_allclose(
        theirs.predict(xgb.DMatrix(X), output_margin=True),
        booster.predict(dgboost.DMatrix(X), output_margin=True),
        rtol=0,
        atol=1e-5,
    )
    assert theirs.num_boosted_rounds() == booster.num_boosted_rounds()


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_a_saved_then_loaded_model_predicts_identically_and_saves_identical_bytes(tmp_path, objective):
    booster, X = _train(objective)
    first = tmp_path / "a.json"
    booster.save_model(first)
    loaded = dgboost.Booster(model_file=first)
    dm = dgboost.DMatrix(X)
    np.testing.assert_array_equal(loaded.predict(dm), booster.predict(dm))
    np.testing.assert_array_equal(loaded.predict(dm, pred_contribs=True), booster.predict(dm, pred_contribs=True))
    assert loaded.meta == booster.meta
    assert loaded.ensemble == booster.ensemble
    second = tmp_path / "b.json"
    loaded.save_model(second)
    assert second.read_bytes() == first.read_bytes()
    from_bytes = dgboost.Booster(model_file=bytearray(first.read_bytes()))
    np.testing.assert_array_equal(from_bytes.predict(dm), booster.predict(dm))


def test_the_saved_file_is_xgboost_json_with_dgboost_additions_in_one_extra_key(tmp_path):
    booster, _ = _train("binary:logistic", rounds=3)
    path = tmp_path / "m.json"
    booster.save_model(path)
    d = json.loads(path.read_text())
    assert set(d) == {"learner", "version", EXTENSION_KEY}
    assert d["learner"]["gradient_booster"]["name"] == "gbtree"
    ext = d[EXTENSION_KEY]
    assert ext["schema_version"] == 2
    assert ext["meta"]["params"]["max_depth"] == 4  # training parameters XGBoost has no place for
    assert ext["cover"] == booster.ensemble.cover.tolist()  # float64, exact
    assert ext["base_margin"] == booster.ensemble.base_margin.tolist()


def test_a_model_re_saved_by_xgboost_loads_from_its_xgboost_part(tmp_path):
    booster, X = _train("binary:logistic")
    ours, theirs = tmp_path / "ours.json", tmp_path / "theirs.json"
    booster.save_model(ours)
    xgb.Booster(model_file=str(ours)).save_model(str(theirs))
    assert EXTENSION_KEY not in json.loads(theirs.read_text())  # XGBoost drops the extension
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded = dgboost.Booster(model_file=theirs)
    dm = dgboost.DMatrix(X)
    np.testing.assert_allclose(loaded.predict(dm), booster.predict(dm), rtol=0, atol=1e-6)


def test_a_stale_extension_is_ignored_with_a_warning_naming_the_mismatch(tmp_path):
    booster, X = _train("binary:logistic")
    path = tmp_path / "m.json"
    booster.save_model(path)
    d = json.loads(path.read_text())
    d["learner"]["learner_model_param"]["base_score"] = "[6.5E-1]"  # edited outside dgboost
    path.write_text(json.dumps(d))
    with pytest.warns(UserWarning, match="ignoring dgboost's extension.*base_score"):
        loaded = dgboost.Booster(model_file=path)
    margin = loaded.predict(dgboost.DMatrix(X), output_margin=True)
    expected = (
        booster.predict(dgboost.DMatrix(X), output_margin=True) - booster.ensemble.base_margin[0] + np.log(0.65 / 0.35)
    )
    np.testing.assert_allclose(margin, expected, rtol=0, atol=1e-5)


def test_an_extension_with_an_unknown_schema_version_is_refused(tmp_path):
    booster, _ = _train("reg:squarederror", rounds=2)
    path = tmp_path / "m.json"
    booster.save_model(path)
    d = json.loads(path.read_text())
    d[EXTENSION_KEY]["schema_version"] = 99
    path.write_text(json.dumps(d))
    with pytest.raises(ModelFormatError, match="schema_version 99 is not supported"):
        dgboost.Booster(model_file=path)


def test_a_custom_objective_model_saves_as_margins_that_xgboost_reproduces(tmp_path):
    X, y = _data("reg:squarederror")

    def squared(preds, dtrain):
        return preds - dtrain.get_label(), np.ones_like(preds)

    booster = dgboost.train({"max_depth": 3}, dgboost.DMatrix(X, label=y), 5, obj=squared)
    assert booster.meta["objective"] == "custom"
    path = tmp_path / "m.json"
    booster.save_model(path)
    np.testing.assert_allclose(
        xgb.Booster(model_file=str(path)).predict(xgb.DMatrix(X)),
        booster.predict(dgboost.DMatrix(X)),
        rtol=0,
        atol=1e-6,
    )
    loaded = dgboost.Booster(model_file=path)
    assert loaded.meta["objective"] == "custom"
    np.testing.assert_array_equal(loaded.predict(dgboost.DMatrix(X)), booster.predict(dgboost.DMatrix(X)))


def test_an_xgboost_model_file_loads_and_predicts_as_xgboost(tmp_path):
    X, y = _data("binary:logistic")
    theirs = xgb.train({"objective": "binary:logistic", "max_depth": 3}, xgb.DMatrix(X, label=y), 6)
    path = tmp_path / "xgb.json"
    theirs.save_model(str(path))
    ours = dgboost.Booster(model_file=path)
    np.testing.assert_allclose(ours.predict(dgboost.DMatrix(X)), theirs.predict(xgb.DMatrix(X)), rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    "objective,extra", [("reg:quantileerror", {"quantile_alpha": [0.45, 0.5, 0.55]}), ("survival:cox", {})]
)
def test_an_xgboost_quantile_or_cox_model_loads_and_predicts_and_evaluates_as_xgboost(tmp_path, objective, extra):
    X, y = _data(objective)
    d = xgb.DMatrix(X, label=y)
    params = {"objective": objective, "max_depth": 4, "eta": 1.0, **extra}
    theirs = xgb.train(params, d, 4)
    path = tmp_path / "xgb.json"
    theirs.save_model(str(path))
    ours = dgboost.Booster(model_file=path)
    assert ours.meta["objective_params"] == extra  # the quantiles come from the file
    np.testing.assert_allclose(ours.predict(dgboost.DMatrix(X)), theirs.predict(d), rtol=1e-6, atol=1e-6)
    ours_eval = ours.eval(dgboost.DMatrix(X, label=y), "d")
    theirs_eval = theirs.eval(d, "d")
    name = "quantile" if extra else "cox-nloglik"
    assert ours_eval.split(":")[0] == theirs_eval.split(":")[0] == f"[0]\td-{name}"
    assert float(ours_eval.split(":")[1]) == pytest.approx(float(theirs_eval.split(":")[1]), rel=1e-6)
    # one more round on both loaded from the file, so only the file's parameters count (150
    # rows: every value is its own bin, the same cuts in both)
    theirs = xgb.Booster(model_file=str(path))
    more = X[:150], y[:150]
    ours.update(dgboost.DMatrix(*more), 4)
    theirs.update(xgb.DMatrix(*more), 4)
    np.testing.assert_allclose(
        ours.predict(dgboost.DMatrix(more[0])), theirs.predict(xgb.DMatrix(more[0])), rtol=1e-5, atol=1e-5
    )


def _legacy():
    expected = json.loads((DATA / "legacy_v1_binary_expected.json").read_text())
    rows = np.array([[np.nan if v is None else v for v in r] for r in expected["rows"]], dtype=np.float32)
    return DATA / "legacy_v1_binary.json", rows, expected


def test_a_model_file_in_dgboosts_old_schema_still_loads_and_predicts_as_before(tmp_path):
    path, rows, expected = _legacy()
    assert json.loads(path.read_text())["format"] == "dgboost"  # the schema-1 file, as written then
    booster = dgboost.Booster(model_file=path)
    dm = dgboost.DMatrix(rows, feature_names=booster.feature_names)
    np.testing.assert_array_equal(booster.predict(dm), np.float32(expected["predictions"]))
    np.testing.assert_array_equal(booster.predict(dm, output_margin=True), np.float32(expected["margins"]))
    assert booster.best_iteration == 4
    # re-saved, it is in the new format, which XGBoost reads
    new = tmp_path / "new.json"
    booster.save_model(new)
    np.testing.assert_allclose(
        xgb.Booster(model_file=str(new)).predict(xgb.DMatrix(rows, feature_names=booster.feature_names)),
        expected["predictions"],
        rtol=0,
        atol=1e-6,
    )
    again = dgboost.Booster(model_file=new)
    assert again.meta == booster.meta and again.ensemble == booster.ensemble


def test_the_old_schema_writer_output_round_trips_through_load_model(tmp_path):
    path, _, _ = _legacy()
    ens, meta = load_model(path)
    copy = tmp_path / "copy.json"
    copy.write_text(json.dumps(model_to_dict(ens, meta)))
    ens2, meta2 = load_model(copy)
    assert ens2 == ens and meta2 == meta


# -- item 1: the explainer reads every model file -----------------------------------------
@pytest.mark.parametrize("kind", ["save_model", "legacy", "xgboost"])
def test_tree_explainer_reads_every_model_file_dgboost_and_xgboost_write(tmp_path, kind):
    X, y = _data("binary:logistic")
    if kind == "save_model":
        booster, X = _train("binary:logistic")
        path = tmp_path / "m.json"
        booster.save_model(path)
        margin = booster.predict(dgboost.DMatrix(X), output_margin=True)
    elif kind == "legacy":
        path, X, expected = _legacy()
        margin = np.float32(expected["margins"])
    else:
        theirs = xgb.train({"objective": "binary:logistic", "max_depth": 3}, xgb.DMatrix(X, label=y), 6)
        path = tmp_path / "xgb.json"
        theirs.save_model(str(path))
        margin = theirs.predict(xgb.DMatrix(X), output_margin=True)
    explainer = dgboost.TreeExplainer(str(path))
    phi = explainer.shap_values(X)
    np.testing.assert_allclose(phi.sum(axis=1) + explainer.expected_value, margin, rtol=0, atol=1e-4)
    assert explainer.meta["source"] == ("xgboost" if kind == "xgboost" else "dgboost")


# -- item 3: objectives and tree methods --------------------------------------------------
@pytest.mark.parametrize("kind", ["save_model", "legacy"])
def test_a_model_file_with_an_unknown_objective_is_refused_naming_it(tmp_path, kind):
    path = tmp_path / "m.json"
    if kind == "save_model":
        booster, _ = _train("binary:logistic", rounds=2)
        booster.save_model(path)
        d = json.loads(path.read_text())
        d["learner"]["objective"]["name"] = "binary:bogus"
    else:
        d = json.loads(_legacy()[0].read_text())
        d["learner"]["objective"] = "binary:bogus"
    path.write_text(json.dumps(d))
    with pytest.raises(ModelFormatError, match="'binary:bogus' is not a known objective"):
        dgboost.Booster(model_file=path)
    with pytest.raises(ModelFormatError, match="binary:bogus"):
        dgboost.TreeExplainer(str(path))


def test_reg_linear_in_a_model_file_reads_as_squarederror_with_a_deprecation_warning(tmp_path):
    booster, X = _train("reg:squarederror", rounds=3)
    path = tmp_path / "m.json"
    booster.save_model(path)
    d = json.loads(path.read_text())
    d["learner"]["objective"]["name"] = "reg:linear"
    d[EXTENSION_KEY]["meta"]["objective"] = "reg:linear"
    path.write_text(json.dumps(d))
    with pytest.warns(DeprecationWarning, match="'reg:linear'.*'reg:squarederror'") as caught:
        loaded = dgboost.Booster(model_file=path)
    assert not [w for w in caught if w.category is UserWarning]  # the extension still applies
    assert loaded.meta["objective"] == "reg:squarederror"
    np.testing.assert_array_equal(loaded.predict(dgboost.DMatrix(X)), booster.predict(dgboost.DMatrix(X)))


def test_reg_linear_as_a_training_parameter_trains_squarederror_with_a_deprecation_warning():
    X, y = _data("reg:squarederror")
    with pytest.warns(DeprecationWarning, match="'reg:linear'.*'reg:squarederror'"):
        old = dgboost.train({"objective": "reg:linear", "max_depth": 3}, dgboost.DMatrix(X, label=y), 3)
    new = dgboost.train({"objective": "reg:squarederror", "max_depth": 3}, dgboost.DMatrix(X, label=y), 3)
    assert old.meta["objective"] == "reg:squarederror"
    np.testing.assert_array_equal(old.predict(dgboost.DMatrix(X)), new.predict(dgboost.DMatrix(X)))


def test_tree_method_approx_warns_that_hist_is_used():
    from dgboost.params import parse_params

    with pytest.warns(UserWarning, match="tree_method='approx'.*uses 'hist'"):
        assert parse_params({"tree_method": "approx"}).tree_method == "hist"


def test_tree_method_exact_is_kept_silently():
    from dgboost.params import parse_params

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert parse_params({"tree_method": "exact"}).tree_method == "exact"


@pytest.mark.parametrize("method", ["hist", "auto"])
def test_tree_method_hist_or_auto_is_accepted_silently(method):
    from dgboost.params import parse_params

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parse_params({"tree_method": method})


def test_an_unsupported_tree_method_is_still_refused():
    from dgboost.params import parse_params

    with pytest.raises(ParameterError, match="tree_method='quantum'"):
        parse_params({"tree_method": "quantum"})


def test_save_model_writes_ubjson_for_a_ubj_path_and_json_for_a_json_path(tmp_path):
    # issue 28: UBJSON is written now (tests/cpu/test_ubj_models.py covers it against XGBoost)
    booster, _ = _train("reg:squarederror", rounds=1)
    booster.save_model(tmp_path / "m.ubj")
    save_model(tmp_path / "n.json", booster.ensemble, booster.meta)
    assert (tmp_path / "m.ubj").read_bytes() == bytes(booster.save_raw("ubj"))
    assert (tmp_path / "n.json").read_bytes() == bytes(booster.save_raw("json"))
    assert not (tmp_path / "m.ubj").read_bytes().startswith(b'{"')


@pytest.mark.parametrize(
    "child, value, message",
    [
        ("left_children", 0, "cycle: tree 0, node 0 is its own child"),
        ("right_children", 10_000, "child index out of range at tree 0, node 0"),
        # indices that would wrap to a real node when stored as int32
        ("left_children", 2**32 + 1, "trees\\[0\\]: child index out of range at node 0"),
        ("parents", 2**32, "trees\\[0\\]: parent index out of range at node 0"),
    ],
)
def test_a_tampered_saved_model_is_rejected_naming_the_node(tmp_path, child, value, message):
    booster, _ = _train("reg:squarederror", rounds=2)
    path = tmp_path / "m.json"
    booster.save_model(path)
    d = json.loads(path.read_text())
    d["learner"]["gradient_booster"]["model"]["trees"][0][child][0] = value
    path.write_text(json.dumps(d))
    with pytest.raises(ModelFormatError, match=message):
        dgboost.Booster(model_file=path)
