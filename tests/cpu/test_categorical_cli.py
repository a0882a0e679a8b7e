"""The command line with categorical columns (issue 29, docs/cli.md): Parquet dictionary and
string columns train with --enable-categorical (config key enable_categorical), and predict /
explain make a model's string columns categories re-coded to the model's."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import dgboost as dg
from dgboost.cli import main
from dgboost.datasets import make_airline_like

CATEGORICAL = ["carrier", "origin", "dest"]


@pytest.fixture
def files(tmp_path):
    X, y = make_airline_like(2000, n_airports=40, seed=4)
    frame = X.assign(label=y)
    frame.iloc[:1500].to_parquet(tmp_path / "train.parquet")  # dictionary columns
    strings = frame.iloc[1500:].astype({c: str for c in CATEGORICAL})
    strings.to_parquet(tmp_path / "valid.parquet")  # string columns
    strings.drop(columns="label").to_csv(tmp_path / "test.csv", index=False)
    config = tmp_path / "train.yaml"
    config.write_text(
        "data: train.parquet\noutput: model.json\nvalidation: valid.parquet\nnum_boost_round: 4\n"
        "params: {objective: 'binary:logistic', max_depth: 3, eval_metric: logloss}\n"
    )
    return tmp_path, frame


def test_training_on_dictionary_columns_without_the_flag_names_the_columns_and_the_flag(files):
    folder, _ = files
    result = CliRunner().invoke(main, ["train", "--config", str(folder / "train.yaml")])
    assert result.exit_code != 0
    assert "'carrier', 'origin', 'dest' hold categories or strings: pass --enable-categorical" in result.output


def test_the_flag_and_the_config_key_train_the_python_model_and_predict_string_columns(files):
    folder, frame = files
    runner = CliRunner()
    result = runner.invoke(main, ["train", "--config", str(folder / "train.yaml"), "--enable-categorical", "--quiet"])
    assert result.exit_code == 0, result.output
    model = dg.Booster(model_file=folder / "model.json")
    train = frame.iloc[:1500]
    expected = dg.train(
        {"objective": "binary:logistic", "max_depth": 3, "eval_metric": "logloss"},
        dg.DMatrix(train.drop(columns="label"), train["label"]),
        4,
        verbose_eval=False,
    )
    assert model.meta["categories"][5:] == expected.meta["categories"][5:]
    test = frame.iloc[1500:].drop(columns="label")
    np.testing.assert_array_equal(model.predict(test), expected.predict(test))

    keyed = folder / "keyed.yaml"
    keyed.write_text(
        (folder / "train.yaml").read_text().replace("model.json", "keyed.json") + "enable_categorical: true\n"
    )
    assert runner.invoke(main, ["train", "--config", str(keyed), "--quiet"]).exit_code == 0
    assert (folder / "keyed.json").read_bytes() == (folder / "model.json").read_bytes()

    out = folder / "preds.csv"
    result = runner.invoke(
        main,
        ["predict", "--model", str(folder / "model.json"), "--data", str(folder / "test.csv"), "--output", str(out)],
    )
    assert result.exit_code == 0, result.output
    np.testing.assert_allclose(pd.read_csv(out).iloc[:, 0].to_numpy(), expected.predict(test), rtol=0, atol=1e-6)

    shap = folder / "shap.csv"
    result = runner.invoke(
        main,
        ["explain", "--model", str(folder / "model.json"), "--data", str(folder / "test.csv"), "--output", str(shap)],
    )
    assert result.exit_code == 0, result.output
    values = pd.read_csv(shap).to_numpy()
    margin = expected.predict(test, output_margin=True)
    np.testing.assert_allclose(values.sum(axis=1), margin, rtol=0, atol=1e-4)


def test_a_value_the_model_has_not_seen_is_refused_by_predict(files):
    folder, frame = files
    runner = CliRunner()
    assert runner.invoke(main, ["train", "--config", str(folder / "train.yaml"), "--enable-categorical"]).exit_code == 0
    test = pd.read_csv(folder / "test.csv")
    test.loc[0, "origin"] = "NOWHERE"
    test.to_csv(folder / "unseen.csv", index=False)
    result = runner.invoke(
        main,
        ["predict", "--model", str(folder / "model.json"), "--data", str(folder / "unseen.csv"), "--output", "p.csv"],
    )
    assert result.exit_code != 0
    assert "column 'origin': category 'NOWHERE' is not among the categories of the model" in result.output
