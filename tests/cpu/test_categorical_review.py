"""Edge cases of categorical input found in review (issue 29): what dgboost accepts must train
*and* save, and XGBoost 3.4.1 is the oracle for what is refused."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
import xgboost as xgb

import dgboost as dg
from dgboost.errors import DGBoostValueError


def _bool_category_frame(n=60):
    rng = np.random.default_rng(0)
    flags = rng.random(n) < 0.5
    return pd.DataFrame({"flag": pd.Categorical(flags), "x": rng.normal(size=n)}), flags.astype(np.float64)


def test_a_category_column_of_booleans_is_refused_naming_the_column_as_xgboost_refuses_it():
    df, y = _bool_category_frame()
    with pytest.raises(TypeError, match="boolean"):  # the oracle refuses it when the DMatrix is made
        xgb.DMatrix(df, y, enable_categorical=True)
    # dgboost once trained on it and then could not save the model (XGBoost's format has no
    # boolean categories): the refusal belongs before training, naming the column
    with pytest.raises(DGBoostValueError, match="'flag'.*boolean"):
        dg.DMatrix(df, y)


def test_integer_categories_beyond_int64_are_refused_naming_the_column_as_xgboost_refuses_them():
    values = np.array([1, 2**63, 5, 2**63 + 7], dtype=np.uint64)
    df = pd.DataFrame({"big": pd.Categorical(np.tile(values, 15)), "x": np.arange(60.0)})
    y = np.tile([0.0, 1.0, 0.0, 1.0], 15)
    with pytest.raises(ValueError, match="signed 64-bit"):  # the oracle
        xgb.DMatrix(df, y, enable_categorical=True)
    # they once wrapped to negative values: the saved model kept other categories
    with pytest.raises(DGBoostValueError, match="'big'.*outside the signed 64-bit integers"):
        dg.DMatrix(df, y)
    # the largest int64 and the smallest are categories like any other
    edge = pd.DataFrame({"c": pd.Categorical(np.tile([np.iinfo(np.int64).min, 0, np.iinfo(np.int64).max], 20))})
    assert dg.DMatrix(edge, np.tile([0.0, 1.0, 0.0], 20)).num_row() == 60


@pytest.fixture
def number_like_strings(tmp_path):
    """A CSV string column whose categories look like numbers ("1", "2", "x"): a file that holds
    only the number-like ones is read by pandas as integers, not strings."""
    rng = np.random.default_rng(0)
    k = np.array(["1", "2", "x"])[rng.integers(0, 3, 300)]
    y = np.select([k == "1", k == "2"], [0.0, 5.0], 10.0)
    pd.DataFrame({"y": y, "k": k}).to_csv(tmp_path / "train.csv", index=False)
    pd.DataFrame({"y": [0.0, 5.0, 0.0, 5.0], "k": ["1", "2", "1", ""]}).to_csv(tmp_path / "valid.csv", index=False)
    pd.DataFrame({"k": ["1", "2", "1", ""]}).to_csv(tmp_path / "test.csv", index=False)
    (tmp_path / "train.yaml").write_text(
        "data: train.csv\noutput: model.json\nvalidation: valid.csv\nlabel: y\nnum_boost_round: 3\n"
        "enable_categorical: true\nverbose_eval: 1\nparams: {max_depth: 2, eta: 1.0}\n"
    )
    return tmp_path


def test_the_command_line_predicts_number_like_categories_read_as_numbers_as_their_categories(number_like_strings):
    from click.testing import CliRunner

    from dgboost.cli import main

    folder = number_like_strings
    runner = CliRunner()
    result = runner.invoke(main, ["train", "--config", str(folder / "train.yaml"), "--quiet"])
    assert result.exit_code == 0, result.output
    model = dg.Booster(model_file=folder / "model.json")
    # the oracle: the same rows as strings (the values the training file's categories are)
    expected = model.predict(pd.DataFrame({"k": pd.Categorical(["1", "2", "1", None])}))
    np.testing.assert_allclose(expected[:2], [0.0, 5.0], atol=1e-3)
    out = folder / "preds.csv"
    model_path, test_path = str(folder / "model.json"), str(folder / "test.csv")
    result = runner.invoke(main, ["predict", "--model", model_path, "--data", test_path, "--output", str(out)])
    assert result.exit_code == 0, result.output
    # "1" was once taken as code 1 (category "2") and "2" as code 2 (category "x")
    np.testing.assert_allclose(pd.read_csv(out)["prediction"].to_numpy(), expected, rtol=1e-6)


def test_the_command_line_evaluates_a_validation_file_of_number_like_categories_as_their_categories(
    number_like_strings,
):
    from click.testing import CliRunner

    from dgboost.cli import main

    folder = number_like_strings
    config = folder / "train.yaml"
    config.write_text(config.read_text().replace("verbose_eval: 1", "verbose_eval: 3"))
    result = CliRunner().invoke(main, ["train", "--config", str(folder / "train.yaml")])
    assert result.exit_code == 0, result.output
    model = dg.Booster(model_file=folder / "model.json")
    valid = pd.DataFrame({"k": pd.Categorical(["1", "2", "1", None])})
    rmse = float(np.sqrt(np.mean((model.predict(valid) - np.array([0.0, 5.0, 0.0, 5.0])) ** 2)))
    printed = re.findall(r"\[2\]\tvalidation-rmse:([0-9.e+-]+)", result.output)
    assert printed, result.output
    assert float(printed[0]) == pytest.approx(rmse, abs=5e-6)  # printed with 5 decimals; once 4.33018


def test_a_booster_pickled_before_categorical_features_still_predicts():
    import pickle

    rng = np.random.default_rng(1)
    X = rng.normal(size=(80, 3)).astype(np.float32)
    y = X[:, 0] + X[:, 1]
    booster = dg.train({"max_depth": 2}, dg.DMatrix(X, y), 3)
    expected = booster.predict(dg.DMatrix(X))
    # a pickle of a model made before issue 29 holds no categorical attributes at all
    state = booster.__getstate__()
    ens_state = state["ensemble"].__getstate__()
    for name in ("cat_arrays", "_cat_kernel"):
        ens_state.pop(name)
    old = dg.tree.Ensemble.__new__(dg.tree.Ensemble)
    old.__setstate__(ens_state)
    state["ensemble"] = old
    restored = pickle.loads(pickle.dumps(state))
    loaded = dg.Booster.__new__(dg.Booster)
    loaded.__setstate__(restored)
    np.testing.assert_array_equal(loaded.predict(dg.DMatrix(X)), expected)
