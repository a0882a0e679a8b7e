"""Bad input is rejected with a dgboost.DGBoostError that names the problem."""

import json

import numpy as np
import pandas as pd
import pytest

import dgboost as dg

X = np.random.default_rng(0).normal(size=(50, 3)).astype(np.float32)
Y = (X[:, 0] > 0).astype(np.float32)


@pytest.mark.parametrize(
    "label, match",
    [
        (np.where(np.arange(50) == 3, np.nan, Y), "label contains NaN"),
        (np.where(np.arange(50) == 3, np.inf, Y), "label contains NaN or infinite"),
        (Y[:40], "label has 40 entries but data has 50 rows"),
    ],
)
def test_bad_labels_are_rejected(label, match):
    with pytest.raises(dg.DGBoostError, match=match):
        dg.DMatrix(X, label)


@pytest.mark.parametrize(
    "weight, match",
    [
        (np.full(50, np.nan), "weight contains NaN"),
        (np.full(50, -1.0), "weight contains negative"),
        (np.ones(10), "weight has 10 entries"),
    ],
)
def test_bad_weights_are_rejected(weight, match):
    with pytest.raises(dg.DGBoostError, match=match):
        dg.DMatrix(X, Y, weight=weight)


def test_non_numeric_columns_are_named_in_the_error():
    frame = pd.DataFrame({"ok": [1.0, 2.0], "city": ["a", "b"]})
    with pytest.raises(dg.DGBoostTypeError, match="'city'"):
        dg.DMatrix(frame, [0, 1])
    with pytest.raises(dg.DGBoostTypeError, match="dtype object"):
        dg.DMatrix(np.array([[1, "x"]], dtype=object))


@pytest.mark.parametrize("data", [np.empty((0, 3)), np.empty((3, 0)), np.ones(3)])
def test_empty_or_one_dimensional_data_is_rejected(data):
    with pytest.raises(dg.DGBoostError):
        dg.DMatrix(data)


def test_infinite_feature_values_are_rejected():
    x = X.copy()
    x[4, 1] = np.inf
    with pytest.raises(dg.DGBoostError, match="infinite values .*row 4, column 1"):
        dg.DMatrix(x, Y)


def test_classification_labels_outside_the_classes_are_rejected():
    with pytest.raises(dg.DGBoostError, match="label"):
        dg.train({"objective": "binary:logistic"}, dg.DMatrix(X, Y * 2), 1, verbose_eval=False)
    with pytest.raises(dg.DGBoostError, match="label"):
        dg.train(
            {"objective": "multi:softprob", "num_class": 2}, dg.DMatrix(X, np.arange(50) % 3), 1, verbose_eval=False
        )


def test_unknown_parameters_suggest_the_nearest_name():
    with pytest.raises(dg.ParameterError, match="did you mean 'max_depth'"):
        dg.train({"max_dpeth": 3}, dg.DMatrix(X, Y), 1)
    with pytest.raises(dg.ParameterError, match="did you mean 'binary:logistic'"):
        dg.train({"objective": "binary:logistc"}, dg.DMatrix(X, Y), 1)


@pytest.mark.parametrize(
    "params",
    [
        {"eta": -0.1},
        {"max_depth": -1},
        {"subsample": 0.0},
        {"subsample": 1.5},
        {"max_bin": 1},
        {"colsample_bytree": 2},
        {"lambda": -1},
        {"max_depth": "deep"},
        {"objective": "multi:softmax", "num_class": 1},
    ],
)
def test_out_of_range_parameters_are_rejected(params):
    with pytest.raises(dg.ParameterError):
        dg.train(params, dg.DMatrix(X, Y), 1)


def test_predicting_with_a_different_feature_count_or_names_fails():
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    b = dg.train({}, dg.DMatrix(frame, Y), 2, verbose_eval=False)
    with pytest.raises(dg.DGBoostError, match="2 features but the model was trained with 3"):
        b.predict(dg.DMatrix(X[:, :2]))
    with pytest.raises(dg.DGBoostError, match="feature names differ"):
        b.predict(dg.DMatrix(frame.rename(columns={"c": "z"})))
    with pytest.raises(dg.DGBoostError, match="different feature names"):
        dg.train({}, dg.DMatrix(frame, Y), 1, evals=[(dg.DMatrix(frame.rename(columns={"a": "q"}), Y), "v")])


def test_truncated_or_tampered_model_files_are_rejected(tmp_path):
    b = dg.train({}, dg.DMatrix(X, Y), 2, verbose_eval=False)
    path = tmp_path / "m.json"
    b.save_model(path)
    text = path.read_text()
    (tmp_path / "cut.json").write_text(text[: len(text) // 2])
    with pytest.raises(dg.ModelFormatError):
        dg.Booster(model_file=tmp_path / "cut.json")
    doc = json.loads(text)
    tree = doc["learner"]["gradient_booster"]["model"]["trees"][0]
    tree["left_children"][0] = 0  # the root is its own child: a cycle
    (tmp_path / "cycle.json").write_text(json.dumps(doc))
    with pytest.raises(dg.ModelFormatError):
        dg.Booster(model_file=tmp_path / "cycle.json")
    doc = json.loads(text)
    doc["learner"]["gradient_booster"]["model"]["trees"][0]["right_children"][0] = 10_000
    (tmp_path / "range.json").write_text(json.dumps(doc))
    with pytest.raises(dg.ModelFormatError):
        dg.Booster(model_file=tmp_path / "range.json")


def test_training_without_labels_or_with_bad_evals_fails_clearly():
    with pytest.raises(dg.DGBoostError, match="no label"):
        dg.train({}, dg.DMatrix(X), 1)
    with pytest.raises(dg.DGBoostError, match="evals"):
        dg.train({}, dg.DMatrix(X, Y), 1, evals=[X])
    with pytest.raises(dg.DGBoostError, match="early_stopping_rounds"):
        dg.train({}, dg.DMatrix(X, Y), 1, early_stopping_rounds=2)


@pytest.mark.parametrize(
    "kw, err, match",
    [
        ({"max_bin": 1}, dg.DGBoostValueError, "max_bin must be an integer >= 2"),
        ({"max_bin": "32"}, dg.DGBoostValueError, "max_bin must be an integer >= 2"),
        ({"max_bin": 2.5}, dg.DGBoostValueError, "max_bin must be an integer >= 2"),
        ({"ref": X}, dg.DGBoostTypeError, "ref must be a DMatrix"),
        ({"ref": dg.DMatrix(X[:, :2])}, dg.DGBoostValueError, "ref has 2 features but data has 3"),
        ({"ref": dg.DMatrix(X, max_bin=16), "max_bin": 32}, dg.DGBoostValueError, "differs from the max_bin of ref"),
        ({"label_lower_bound": Y}, dg.DGBoostValueError, "not supported"),
    ],
)
def test_bad_quantile_dmatrix_arguments(kw, err, match):
    with pytest.raises(err, match=match):
        dg.QuantileDMatrix(X, Y, **kw)


def test_an_infinite_value_past_the_first_checked_chunk_is_found_at_its_row(monkeypatch):
    from dgboost import features

    monkeypatch.setattr(features, "_INF_CHECK_ENTRIES", 30)  # 10 rows of 3 features a chunk
    x = np.zeros((100, 3), np.float32)
    x[57, 2] = -np.inf
    with pytest.raises(dg.DGBoostError, match="infinite values .*row 57, column 2"):
        dg.DMatrix(x, np.zeros(100))


def test_a_non_finite_gradient_on_one_rank_stops_training_on_every_rank_with_the_same_error(monkeypatch):
    from dgboost.comm import run_in_threads
    from dgboost.datasets import make_synthetic
    from dgboost.objective import SquaredError

    X, y, _ = make_synthetic(2000, 5, task="regression", seed=4)
    halves = [slice(0, 1200), slice(1200, None)]
    real = SquaredError._grad_hess

    def nan_on_the_small_rank_from_round_one(self, m, labels, xp):
        g, h = real(self, m, labels, xp)
        if len(labels) == 800 and np.any(m != 0.5):  # rank 1's rows, past the first round
            g = g.copy()
            g[3] = np.nan
        return g, h

    monkeypatch.setattr(SquaredError, "_grad_hess", nan_on_the_small_rank_from_round_one)

    def rank(comm, r):
        try:
            dg.train({"max_depth": 2, "base_score": 0.5}, dg.DMatrix(X[halves[r]], y[halves[r]]), 4, comm=comm)
        except dg.DGBoostValueError as exc:
            return str(exc)
        return None

    messages = run_in_threads(2, rank, timeout=60)
    # the maxima are reduced before anyone checks them: both ranks stop in the same round
    assert messages[0] == messages[1] and "round 1: the objective produced non-finite gradients" in messages[0]
