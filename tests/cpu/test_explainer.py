"""TreeExplainer, Booster.predict(pred_contribs / pred_interactions), estimators' shap_values
and ``dgboost explain``: agreement with XGBoost and shap, layouts, additivity, bad input."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest
import xgboost as xgb  # declared test dependency: fail, never skip
from click.testing import CliRunner

import dgboost
from dgboost import DGBoostError, TreeExplainer
from dgboost.cli import main as cli_main
from dgboost.explain import AdditivityError, UnsupportedModelError


# ---------------------------------------------------------------------------------------
# models
# ---------------------------------------------------------------------------------------
def make_data(n=1500, F=6, seed=0, missing=0.15):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, F)).astype(np.float32)
    X[:, 3] = np.round(X[:, 3])  # ties on thresholds
    z = X[:, 0] * X[:, 1] + np.sin(2 * X[:, 2]) + 0.5 * X[:, 3] - X[:, 4] ** 2
    X[rng.random(X.shape) < missing] = np.nan
    return X, z + 0.3 * rng.normal(size=n)


_MODELS: dict = {}


def xgb_model(objective, depth, rounds=6):
    key = (objective, depth, rounds)
    if key not in _MODELS:
        X, z = make_data()
        params = {
            "objective": objective,
            "max_depth": depth,
            "eta": 0.3,
            "nthread": 2,
            "min_child_weight": 0.01,
            "seed": 0,
            "tree_method": "hist",
        }
        if objective == "binary:logistic":
            y = (z > 0).astype(float)
        elif objective == "multi:softprob":
            y = np.digitize(z, [-1.0, 0.5])
            params["num_class"] = 3
        else:
            y = z + 2.0
        _MODELS[key] = (xgb.train(params, xgb.DMatrix(X, label=y), rounds), X)
    return _MODELS[key]


def xgb_layout_to_shap(contribs, n_groups):
    """(n, F+1) / (n, k, F+1) -> shap's (n, F) / (n, F, k) without the bias."""
    if n_groups == 1:
        return contribs[:, :-1]
    return np.moveaxis(contribs[:, :, :-1], 1, 2)


OBJECTIVES = ["binary:logistic", "multi:softprob", "reg:squarederror"]
CASES = [(o, d) for o in OBJECTIVES for d in (3, 8, 16)]


# ---------------------------------------------------------------------------------------
# agreement with XGBoost
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("objective,depth", CASES)
def test_booster_pred_contribs_match_xgboost_with_missing_values(objective, depth):
    booster, X = xgb_model(objective, depth)
    Xq = X[:300]
    expected = booster.predict(xgb.DMatrix(Xq), pred_contribs=True)
    got = dgboost.Booster.from_xgboost(booster).predict(Xq, pred_contribs=True)
    assert got.dtype == np.float32 and got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-4)


@pytest.mark.parametrize("objective,depth", CASES)
def test_tree_explainer_on_an_xgboost_booster_matches_pred_contribs(objective, depth):
    booster, X = xgb_model(objective, depth)
    Xq = X[:300]
    contribs = booster.predict(xgb.DMatrix(Xq), pred_contribs=True)
    n_groups = 3 if objective == "multi:softprob" else 1
    explainer = TreeExplainer(booster)
    np.testing.assert_allclose(explainer.shap_values(Xq), xgb_layout_to_shap(contribs, n_groups), rtol=0, atol=1e-4)
    bias = contribs[0, ..., -1]
    np.testing.assert_allclose(explainer.expected_value, bias, rtol=0, atol=1e-4)


@pytest.mark.parametrize("objective,depth", [(o, d) for o in OBJECTIVES for d in (3, 8)])
def test_booster_pred_interactions_match_xgboost(objective, depth):
    booster, X = xgb_model(objective, depth, rounds=3)
    Xq = X[:25]
    expected = booster.predict(xgb.DMatrix(Xq), pred_interactions=True)
    got = dgboost.Booster.from_xgboost(booster).predict(Xq, pred_interactions=True)
    assert got.dtype == np.float32 and got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-4)
    inter = TreeExplainer(booster).shap_interaction_values(Xq)
    if expected.ndim == 3:
        np.testing.assert_allclose(inter, expected[:, :-1, :-1], rtol=0, atol=1e-4)
    else:
        np.testing.assert_allclose(inter, np.moveaxis(expected[:, :, :-1, :-1], 1, 3), rtol=0, atol=1e-4)


def test_depth_16_interactions_match_xgboost():
    booster, X = xgb_model("reg:squarederror", 16, rounds=2)
    Xq = X[:6]
    expected = booster.predict(xgb.DMatrix(Xq), pred_interactions=True)
    got = dgboost.Booster.from_xgboost(booster).predict(Xq, pred_interactions=True)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-4)


def test_a_per_row_base_margin_replaces_the_bias_like_xgboost():
    booster, X = xgb_model("multi:softprob", 3)
    Xq = X[:50]
    bm = np.random.default_rng(1).normal(size=(50, 3)).astype(np.float32)
    ours = dgboost.Booster.from_xgboost(booster)
    for kind in ("pred_contribs", "pred_interactions"):
        expected = booster.predict(xgb.DMatrix(Xq, base_margin=bm), **{kind: True})
        got = ours.predict(dgboost.DMatrix(Xq, base_margin=bm), **{kind: True})
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-4)


def test_iteration_range_limits_the_trees_explained_like_xgboost():
    booster, X = xgb_model("binary:logistic", 3)
    Xq = X[:40]
    # XGBoost explains only [0, end) ranges itself; its model slicing gives the reference
    expected = booster[1:4].predict(xgb.DMatrix(Xq), pred_contribs=True)
    got = dgboost.Booster.from_xgboost(booster).predict(Xq, pred_contribs=True, iteration_range=(1, 4))
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-4)


def test_nan_rows_follow_the_default_directions_like_xgboost():
    booster, X = xgb_model("reg:squarederror", 8)
    Xq = np.full((4, X.shape[1]), np.nan, dtype=np.float32)
    Xq[1, :3] = 0.5
    expected = booster.predict(xgb.DMatrix(Xq), pred_contribs=True)
    np.testing.assert_allclose(TreeExplainer(booster).shap_values(Xq), expected[:, :-1], atol=1e-4)


# ---------------------------------------------------------------------------------------
# layout, algorithms, additivity
# ---------------------------------------------------------------------------------------
def test_layout_follows_shap_single_output_2d_multiclass_3d_with_outputs_last():
    booster, X = xgb_model("multi:softprob", 3)
    e = TreeExplainer(booster)
    F = X.shape[1]
    assert e.shap_values(X[:7]).shape == (7, F, 3)
    assert isinstance(e.expected_value, np.ndarray) and e.expected_value.shape == (3,)
    assert e.shap_interaction_values(X[:2]).shape == (2, F, F, 3)
    assert e.shap_values(X[0]).shape == (F, 3)  # one 1-D row
    assert e.contributions(X[:7]).shape == (7, 3, F + 1)
    booster1, _ = xgb_model("binary:logistic", 3)
    e1 = TreeExplainer(booster1)
    assert e1.shap_values(X[:7]).shape == (7, F)
    assert isinstance(e1.expected_value, float)
    assert e1.shap_interaction_values(X[:2]).shape == (2, F, F)
    assert e1.shap_values(X[0]).shape == (F,)


def test_path_and_table_algorithms_give_the_same_values():
    booster, X = xgb_model("multi:softprob", 8)
    a = TreeExplainer(booster, algorithm="path").shap_values(X[:200])
    b = TreeExplainer(booster, algorithm="table").shap_values(X[:200])
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-9)


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_shap_values_plus_expected_value_add_up_to_the_margin(objective):
    booster, X = xgb_model(objective, 8)
    Xq = X[:300]
    margin = booster.predict(xgb.DMatrix(Xq), output_margin=True)
    for e in (TreeExplainer(booster), TreeExplainer(booster, data=X[500:560])):
        phi = e.shap_values(Xq)
        total = phi.sum(axis=1) + e.expected_value
        np.testing.assert_allclose(total, margin, rtol=1e-5, atol=1e-5 * np.abs(margin).max())
        np.testing.assert_allclose(e.predict(Xq), margin, rtol=1e-5, atol=1e-5)


def test_interaction_rows_sum_to_the_shap_values():
    booster, X = xgb_model("binary:logistic", 8, rounds=3)
    e = TreeExplainer(booster)
    np.testing.assert_allclose(e.shap_interaction_values(X[:10]).sum(axis=2), e.shap_values(X[:10]), rtol=0, atol=1e-9)


def test_weight_tables_and_path_table_are_built_once_per_explainer():
    booster, X = xgb_model("reg:squarederror", 8)
    e = TreeExplainer(booster)
    table = e.table
    a = e.shap_values(X[:20])
    tables = e.weight_tables()
    b = e.shap_values(X[:20])
    assert e.table is table and e.weight_tables() is tables
    np.testing.assert_array_equal(a, b)


def test_an_explainer_pickles_and_gives_the_same_values():
    booster, X = xgb_model("multi:softprob", 3)
    e = TreeExplainer(booster, data=X[:30])
    clone = pickle.loads(pickle.dumps(e))
    np.testing.assert_array_equal(clone.shap_values(X[:20]), e.shap_values(X[:20]))


def test_long_inputs_are_processed_in_blocks_with_a_progress_line(capsys):
    booster, X = xgb_model("reg:squarederror", 3)
    e = TreeExplainer(booster, progress=True)
    e._chunk_rows = lambda interactions: 100  # several blocks
    full = TreeExplainer(booster).shap_values(X)
    np.testing.assert_allclose(e.shap_values(X), full, rtol=0, atol=1e-12)
    err = capsys.readouterr().err
    assert "SHAP values" in err and f"{len(X):,}/{len(X):,} rows" in err
    TreeExplainer(booster).shap_values(X[:100])  # small input, not a TTY: silent
    TreeExplainer(booster, progress=True).shap_values(X[:100], progress=False)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("interactions", [False, True], ids=["values", "interactions"])
def test_a_memory_bound_per_call_explains_in_batches_that_fit_with_the_same_values(interactions):
    from dgboost.explain.engines import call_row_bytes

    booster, X = xgb_model("multi:softprob", 3)
    rows = X[:50]
    unbounded = TreeExplainer(booster)
    e = TreeExplainer(booster, max_batch_bytes=7 * call_row_bytes(unbounded.table, 3, interactions) + 5)
    calls = []
    engine_call = e._engine
    e._engine = lambda chunk, inter: calls.append(chunk.shape[0]) or engine_call(chunk, inter)
    if interactions:
        got, want = e.shap_interaction_values(rows), unbounded.shap_interaction_values(rows)
    else:
        got, want = e.shap_values(rows), unbounded.shap_values(rows)
    assert calls == [7] * 7 + [1]  # 7 rows fit the bound, not 8
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    tiny = TreeExplainer(booster, max_batch_bytes=1)  # below one row: a row at a time
    assert tiny._chunk_rows(interactions) == 1


@pytest.mark.parametrize("bad", [0, -5, 1.5, True, "1GB"])
def test_a_memory_bound_that_is_not_a_positive_byte_count_is_refused(bad):
    booster, _ = xgb_model("reg:squarederror", 3)
    with pytest.raises(DGBoostError, match="max_batch_bytes"):
        TreeExplainer(booster, max_batch_bytes=bad)


def test_calling_the_explainer_gives_a_shap_explanation():
    import shap  # declared test dependency: fail, never skip

    booster, X = xgb_model("multi:softprob", 3)
    frame = pd.DataFrame(X[:12], columns=[f"c{i}" for i in range(X.shape[1])])
    e = TreeExplainer(booster)
    exp = e(frame)
    assert isinstance(exp, shap.Explanation)
    assert exp.values.shape == (12, X.shape[1], 3) and exp.base_values.shape == (12, 3)
    assert list(exp.feature_names) == list(frame.columns)
    np.testing.assert_allclose(exp.values, e.shap_values(frame))
    one = TreeExplainer(xgb_model("binary:logistic", 3)[0])(X[:5])[0]  # what waterfall takes
    assert one.values.shape == (X.shape[1],) and np.ndim(one.base_values) == 0


def test_shap_frame_names_columns_after_features_and_bias():
    booster, X = xgb_model("reg:squarederror", 3)
    frame = pd.DataFrame(X[:5], columns=list("abcdef"), index=np.arange(10, 15))
    out = TreeExplainer(booster).shap_frame(frame)
    assert list(out.columns) == list("abcdef") + ["bias"]
    assert list(out.index) == list(range(10, 15))


# ---------------------------------------------------------------------------------------
# interventional and data-weighted path-dependent against shap
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("objective", OBJECTIVES)
def test_interventional_values_match_shap_on_xgboost_models(objective):
    import shap  # declared test dependency: fail, never skip

    booster, X = xgb_model(objective, 8)
    Xq, bg = np.nan_to_num(X[:40]), np.nan_to_num(X[600:650])
    ref_e = shap.TreeExplainer(booster, data=bg, feature_perturbation="interventional")
    ref = np.asarray(ref_e.shap_values(Xq, check_additivity=False))
    e = TreeExplainer(booster, data=bg)
    assert e.feature_perturbation == "interventional"
    scale = np.abs(ref).max()
    np.testing.assert_allclose(e.shap_values(Xq), ref, rtol=0, atol=1e-5 * scale)
    np.testing.assert_allclose(e.expected_value, ref_e.expected_value, rtol=0, atol=1e-5 * scale)


def test_probability_output_of_interventional_shap_matches_shap_for_a_logistic_model():
    import shap  # declared test dependency: fail, never skip

    booster, X = xgb_model("binary:logistic", 8)
    Xq, bg = np.nan_to_num(X[:40]), np.nan_to_num(X[600:650])
    ref_e = shap.TreeExplainer(booster, data=bg, feature_perturbation="interventional", model_output="probability")
    ref = np.asarray(ref_e.shap_values(Xq, check_additivity=False))
    e = TreeExplainer(booster, data=bg, model_output="probability")
    got = e.shap_values(Xq)  # the additivity check compares with the probabilities
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-6)
    np.testing.assert_allclose(e.expected_value, ref_e.expected_value, rtol=0, atol=1e-6)
    prob = booster.predict(xgb.DMatrix(Xq))
    np.testing.assert_allclose(got.sum(axis=1) + e.expected_value, prob, rtol=0, atol=1e-6)
    np.testing.assert_allclose(e.predict(Xq), prob, rtol=0, atol=1e-6)


def test_probability_output_is_refused_where_it_is_not_defined():
    booster, X = xgb_model("binary:logistic", 4)
    with pytest.raises(DGBoostError, match="interventional"):
        TreeExplainer(booster, model_output="probability")  # path-dependent: margins only
    regressor, Xr = xgb_model("reg:squarederror", 4)
    with pytest.raises(DGBoostError, match="logistic objective"):
        TreeExplainer(regressor, data=np.nan_to_num(Xr[:20]), model_output="probability")


def test_path_dependent_with_data_recounts_covers_like_shap():
    import shap  # declared test dependency: fail, never skip
    from sklearn.tree import DecisionTreeRegressor

    X, z = make_data(missing=0)
    model = DecisionTreeRegressor(max_depth=4, min_samples_leaf=20, random_state=0).fit(X, z)
    for bg in (X[:100], X[:3]):  # (shap keeps at most 100 background rows); 3 rows miss leaves
        ref_e = shap.TreeExplainer(model, data=bg, feature_perturbation="tree_path_dependent")
        e = TreeExplainer(model, data=bg, feature_perturbation="tree_path_dependent")
        ref = ref_e.shap_values(X[500:540], check_additivity=False)
        np.testing.assert_allclose(e.shap_values(X[500:540]), ref, rtol=0, atol=1e-6)
        # (shap's expected value ignores the 1e-6 covers of unreached leaves)
        np.testing.assert_allclose(e.expected_value, ref_e.expected_value, rtol=0, atol=1e-4)
        assert not np.allclose(
            e.shap_values(X[500:540]), TreeExplainer(model).shap_values(X[500:540])
        )  # the covers did change


# ---------------------------------------------------------------------------------------
# dgboost's own models and estimators
# ---------------------------------------------------------------------------------------
def test_dgboost_estimators_shap_values_add_up_to_their_margins():
    from dgboost.sklearn import DGBClassifier, DGBRegressor

    X, z = make_data(n=400)
    for model, y in (
        (DGBRegressor(n_estimators=8, max_depth=4), z),
        (DGBClassifier(n_estimators=8, max_depth=4), np.digitize(z, [-1, 0.5])),
    ):
        model.fit(X, y)
        phi = model.shap_values(X[:50])
        margin = model.predict(X[:50], output_margin=True)
        k = getattr(model, "n_classes_", 1)
        assert phi.shape == ((50, X.shape[1], k) if k > 2 else (50, X.shape[1]))
        total = phi.sum(axis=1) + TreeExplainer(model).expected_value
        np.testing.assert_allclose(total, margin, rtol=1e-5, atol=1e-5)
        contribs = model.get_booster().predict(X[:50], pred_contribs=True)
        np.testing.assert_allclose(contribs[..., :-1], np.moveaxis(phi, -1, 1) if k > 2 else phi, rtol=0, atol=1e-5)


# ---------------------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------------------
def test_wrong_feature_count_is_rejected_with_both_counts():
    booster, X = xgb_model("reg:squarederror", 3)
    e = TreeExplainer(booster)
    with pytest.raises(DGBoostError, match="5 columns but the model has 6 features"):
        e.shap_values(X[:10, :5])
    with pytest.raises(DGBoostError, match="7 columns but the model has 6 features"):
        e.shap_interaction_values(np.hstack([X[:3], X[:3, :1]]))


def test_background_with_different_columns_is_rejected():
    booster, X = xgb_model("reg:squarederror", 3)
    with pytest.raises(DGBoostError, match="background data has 4 columns"):
        TreeExplainer(booster, data=X[:20, :4])
    names = [f"c{i}" for i in range(6)]
    e = TreeExplainer(booster, data=pd.DataFrame(X[:20], columns=names))
    with pytest.raises(DGBoostError, match="differ from the background"):
        e.shap_values(pd.DataFrame(X[:5], columns=names[::-1]))


def test_empty_input_is_rejected():
    booster, X = xgb_model("reg:squarederror", 3)
    e = TreeExplainer(booster)
    with pytest.raises(DGBoostError, match="empty"):
        e.shap_values(X[:0])
    with pytest.raises(DGBoostError, match="empty"):
        TreeExplainer(booster, data=X[:0])


def test_unsupported_models_and_options_are_rejected_by_name():
    booster, X = xgb_model("reg:squarederror", 3)
    with pytest.raises(UnsupportedModelError, match="cannot explain a builtins.object"):
        TreeExplainer(object())
    with pytest.raises(DGBoostError, match="needs background data"):
        TreeExplainer(booster, feature_perturbation="interventional")
    with pytest.raises(DGBoostError, match="algorithm must be one of"):
        TreeExplainer(booster, algorithm="exact")
    with pytest.raises(DGBoostError, match="model_output='log_loss' is not supported"):
        TreeExplainer(booster, model_output="log_loss")  # 'probability' is (interventional, logistic)
    from dgboost.backend import cuda_status

    if not cuda_status()[0]:  # the rule of every entry point (docs/devices.md): a warning and the CPU
        with pytest.warns(UserWarning, match="no CUDA GPU is usable"):
            assert str(TreeExplainer(booster, device="cuda").device) == "cpu"
    with pytest.raises(DGBoostError, match="unknown device 'tpu'"):
        TreeExplainer(booster, device="tpu")
    with pytest.raises(DGBoostError, match="only defined here for"):
        TreeExplainer(booster, data=X[:10]).shap_interaction_values(X[:2])
    with pytest.raises(DGBoostError, match="'s'"):
        frame = pd.DataFrame(X[:3], columns=[f"f{i}" for i in range(6)]).assign(f5=list("abc"))
        TreeExplainer(booster).shap_values(frame.rename(columns={"f5": "s"}))


def test_feature_names_that_differ_from_the_models_are_rejected():
    X, z = make_data(n=300)
    cols = [f"x{i}" for i in range(X.shape[1])]
    booster = xgb.train({"max_depth": 3}, xgb.DMatrix(pd.DataFrame(X, columns=cols), label=z), 3)
    e = TreeExplainer(booster)
    with pytest.raises(DGBoostError, match="differ from the model's feature names"):
        e.shap_values(pd.DataFrame(X[:4], columns=cols[::-1]))
    assert e.shap_values(pd.DataFrame(X[:4], columns=cols)).shape == (4, X.shape[1])


def test_an_additivity_failure_is_reported_not_returned():
    booster, X = xgb_model("reg:squarederror", 3)
    e = TreeExplainer(booster)
    e._expected = e._expected64() + 1.0  # sabotage: the check compares with the model's margin
    e._margin64 = lambda values, _orig=e._margin64: _orig(values) + 1.0
    with pytest.raises(AdditivityError, match="do not add up"):
        e.shap_values(X[:5])


# ---------------------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------------------
@pytest.fixture()
def cli_files(tmp_path):
    X, z = make_data(n=300, missing=0.1)
    cols = [f"x{i}" for i in range(X.shape[1])]
    frame = pd.DataFrame(X, columns=cols)
    y = np.digitize(z, [-1, 0.5])
    booster = xgb.train({"objective": "multi:softprob", "num_class": 3, "max_depth": 4}, xgb.DMatrix(frame, label=y), 4)
    booster.save_model(tmp_path / "model.json")
    frame.assign(label=y).to_csv(tmp_path / "data.csv", index=False)
    return tmp_path, booster, frame


def test_explain_command_writes_named_csv_columns_that_match_xgboost(cli_files):
    path, booster, frame = cli_files
    out = path / "shap.csv"
    result = CliRunner().invoke(
        cli_main,
        [
            "explain",
            "--model",
            str(path / "model.json"),
            "--data",
            str(path / "data.csv"),
            "--output",
            str(out),
            "--label-column",
            "label",
            "--quiet",
        ],
    )
    assert result.exit_code == 0, result.output
    got = pd.read_csv(out)
    assert list(got.columns[:7]) == [f"x{i}[0]" for i in range(6)] + ["bias[0]"]
    expected = booster.predict(xgb.DMatrix(frame), pred_contribs=True)
    np.testing.assert_allclose(got.to_numpy().reshape(expected.shape), expected, atol=1e-4)


def test_explain_command_writes_interactions_to_npy_and_shows_progress(cli_files):
    path, booster, frame = cli_files
    out = path / "inter.npy"
    result = CliRunner().invoke(
        cli_main,
        [
            "explain",
            "--model",
            str(path / "model.json"),
            "--data",
            str(path / "data.csv"),
            "--output",
            str(out),
            "--interactions",
            "--algorithm",
            "path",
            "--label-column",
            "label",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "interaction values" in result.output and "rows" in result.output
    expected = booster.predict(xgb.DMatrix(frame), pred_interactions=True)
    np.testing.assert_allclose(np.load(out), expected, atol=1e-4)


def test_explain_command_reports_bad_input_in_one_line_with_exit_code_2(cli_files, tmp_path):
    path, _, _ = cli_files
    runner = CliRunner()
    result = runner.invoke(
        cli_main,
        [
            "explain",
            "--model",
            str(path / "model.json"),
            "--data",
            str(path / "data.csv"),
            "--output",
            str(tmp_path / "o.csv"),
            "--label-column",
            "nope",
        ],
    )
    assert result.exit_code == 2 and "Error: " in result.output and "'nope'" in result.output
    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "a model"}')
    result = runner.invoke(
        cli_main,
        ["explain", "--model", str(bad), "--data", str(path / "data.csv"), "--output", str(tmp_path / "o.csv")],
    )
    assert result.exit_code == 2 and result.output.count("\n") == 1 and "Error: " in result.output


def test_unpickled_copies_of_an_explainer_build_the_weight_tables_once_per_process():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(300, 6)).astype(np.float32)
    booster = dgboost.train({"max_depth": 4}, dgboost.DMatrix(X, X[:, 0] + X[:, 1] * X[:, 2]), 5)
    explainer = TreeExplainer(booster, algorithm="table")
    expected = explainer.shap_values(X)
    shipped = pickle.dumps(explainer)
    assert len(shipped) == len(pickle.dumps(TreeExplainer(booster, algorithm="table")))  # no tables inside
    copies = [pickle.loads(shipped) for _ in range(2)]
    for copy in copies:
        np.testing.assert_array_equal(copy.shap_values(X), expected)
    assert copies[0].weight_tables() is copies[1].weight_tables() is explainer.weight_tables()
    assert copies[0].fingerprint == explainer.fingerprint != TreeExplainer(booster, algorithm="path").fingerprint
