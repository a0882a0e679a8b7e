"""The ``dgboost`` command line: demo, train from a config, predict, and one-line errors."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import dgboost
from dgboost.cli import load_config, main, resolve_device
from dgboost.datasets import make_synthetic


@pytest.fixture()
def runner():
    return CliRunner()


@pytest.fixture()
def csv_data(tmp_path):
    """A small regression table split into train / valid / test CSV files."""
    X, y, _ = make_synthetic(500, n_features=5, task="regression", seed=11)
    frame = pd.DataFrame(X, columns=[f"x{i}" for i in range(5)])
    frame["target"] = y
    frame["w"] = np.linspace(0.5, 1.5, len(frame))
    paths = {}
    for name, part in (("train", frame[:300]), ("valid", frame[300:400]), ("test", frame[400:])):
        paths[name] = tmp_path / f"{name}.csv"
        part.to_csv(paths[name], index=False)
    return paths


def _write_config(tmp_path, name="config.json", **overrides):
    config = {
        "data": "train.csv",
        "label": "target",
        "weight": "w",
        "validation": "valid.csv",
        "params": {"max_depth": 3, "eta": 0.3, "eval_metric": "rmse"},
        "num_boost_round": 12,
        "output": "models/model.json",
    }
    config.update(overrides)
    path = tmp_path / name
    path.write_text(json.dumps(config))
    return path


def _assert_one_line_error(result, *fragments):
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.stderr
    for fragment in fragments:
        assert fragment in errors[0]


# ----------------------------------------------------------------------------- demo
def test_demo_with_tiny_data_prints_progress_and_a_summary_table(runner):
    result = runner.invoke(main, ["demo", "--rows", "600", "--rounds", "4", "--device", "cpu"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "test-auc" in out and "test-logloss" in out  # train()'s per-round progress
    for label in (
        "rows (train / test)",
        "480 / 120",
        "features",
        "28",
        "rounds",
        "train time",
        "test AUC",
        "test logloss",
    ):
        assert label in out
    auc = float(out.split("test AUC")[1].split(":")[1].split()[0])
    assert 0.5 < auc <= 1.0


def test_demo_quiet_prints_only_the_summary(runner):
    result = runner.invoke(main, ["demo", "--rows", "300", "--rounds", "2", "--quiet"])
    assert result.exit_code == 0, result.output
    assert "test-auc" not in result.output
    assert result.stderr == ""
    assert "test AUC" in result.stdout


def test_device_auto_picks_cuda_exactly_when_a_gpu_is_usable(monkeypatch):
    import dgboost.backend as backends

    assert resolve_device("cpu") == "cpu"
    monkeypatch.setattr(backends, "get_backend", lambda device: object())
    with_gpu = resolve_device("auto")

    def no_gpu(device):
        raise dgboost.DGBoostValueError("no CUDA device")

    monkeypatch.setattr(backends, "get_backend", no_gpu)
    assert resolve_device("auto") == "cpu"
    # with a usable backend, "auto" is "cuda" where CuPy sees a device (never on CI)
    try:
        import cupy

        has_device = cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - no driver: no device
        has_device = False
    assert with_gpu == ("cuda" if has_device else "cpu")


# ----------------------------------------------------------------------------- train + predict
def test_train_from_a_json_config_then_predict_writes_one_row_per_input_row(runner, tmp_path, csv_data):
    config = _write_config(tmp_path)
    result = runner.invoke(main, ["train", "--config", str(config)])
    assert result.exit_code == 0, result.output
    assert "validation-rmse" in result.stdout
    model_path = tmp_path / "models" / "model.json"
    assert model_path.is_file()
    booster = dgboost.Booster(model_file=model_path)
    assert booster.num_boosted_rounds() == 12
    assert booster.feature_names == [f"x{i}" for i in range(5)]

    out = tmp_path / "pred.csv"
    result = runner.invoke(
        main,
        [
            "predict",
            "--model",
            str(model_path),
            "--data",
            str(csv_data["test"]),
            "--output",
            str(out),
            "--label-column",
            "target",
        ],
    )
    assert result.exit_code == 0, result.output
    preds = pd.read_csv(out)
    assert list(preds.columns) == ["prediction"]
    assert len(preds) == 100
    test = pd.read_csv(csv_data["test"])
    expected = booster.predict(test[[f"x{i}" for i in range(5)]])
    np.testing.assert_allclose(preds["prediction"].to_numpy(), expected, rtol=1e-6)


def test_explain_reads_the_model_file_that_train_writes(runner, tmp_path, csv_data):
    config = _write_config(tmp_path, num_boost_round=4)
    assert runner.invoke(main, ["train", "--config", str(config)]).exit_code == 0
    model_path = tmp_path / "models" / "model.json"
    out = tmp_path / "shap.csv"
    result = runner.invoke(
        main,
        [
            "explain",
            "--model",
            str(model_path),
            "--data",
            str(csv_data["test"]),
            "--output",
            str(out),
            "--label-column",
            "target",
            "--quiet",
        ],
    )
    assert result.exit_code == 0, result.output
    shap = pd.read_csv(out)
    assert list(shap.columns) == [f"x{i}" for i in range(5)] + ["bias"]
    test = pd.read_csv(csv_data["test"])
    margin = dgboost.Booster(model_file=model_path).predict(test[[f"x{i}" for i in range(5)]], output_margin=True)
    np.testing.assert_allclose(shap.sum(axis=1).to_numpy(), margin, rtol=0, atol=1e-4)


def test_predict_writes_npy_margins_and_selects_the_models_columns_by_name(runner, tmp_path, csv_data):
    config = _write_config(
        tmp_path,
        params={"objective": "binary:logistic", "max_depth": 2},
        label="x0",
        weight=None,
        validation=None,
        num_boost_round=3,
    )
    frame = pd.read_csv(csv_data["train"])
    frame["x0"] = (frame["x0"] > 0).astype(int)
    frame.to_csv(csv_data["train"], index=False)
    assert runner.invoke(main, ["train", "--config", str(config), "--quiet"]).exit_code == 0
    model_path = tmp_path / "models" / "model.json"
    out = tmp_path / "margins.npy"
    # no --label-column: the columns the model knows are picked by name (x0 and w are ignored)
    result = runner.invoke(
        main,
        [
            "predict",
            "--model",
            str(model_path),
            "--data",
            str(csv_data["test"]),
            "--output",
            str(out),
            "--margin",
            "--quiet",
        ],
    )
    assert result.exit_code == 0, result.output
    assert result.output == ""
    margins = np.load(out)
    assert margins.shape == (100,)
    assert (margins < 0).any() or (margins > 0).any()
    assert not ((margins >= 0) & (margins <= 1)).all()  # margins, not probabilities


def test_train_from_a_yaml_config_with_early_stopping_keeps_the_best_rounds(runner, tmp_path, csv_data):
    config = tmp_path / "config.yaml"
    config.write_text(
        "data: train.csv\nlabel: target\nvalidation: valid.csv\n"
        "params:\n  max_depth: 6\n  eta: 1.0\n"
        "num_boost_round: 200\nearly_stopping_rounds: 2\noutput: m.json\n"
    )
    result = runner.invoke(main, ["train", "--config", str(config)])
    assert result.exit_code == 0, result.output
    booster = dgboost.Booster(model_file=tmp_path / "m.json")
    assert booster.num_boosted_rounds() < 200
    assert booster.best_iteration == booster.num_boosted_rounds() - 1
    assert "best iteration" in result.stderr


def test_load_config_resolves_paths_against_the_config_folder(tmp_path, csv_data):
    cfg = load_config(_write_config(tmp_path))
    assert cfg.data == tmp_path / "train.csv"
    assert cfg.output == tmp_path / "models" / "model.json"
    assert cfg.num_boost_round == 12 and cfg.early_stopping_rounds is None


# ----------------------------------------------------------------------------- errors
def test_a_config_with_an_unknown_key_exits_2_with_a_one_line_message(runner, tmp_path, csv_data):
    config = _write_config(tmp_path, paramz={"max_depth": 3})
    result = runner.invoke(main, ["train", "--config", str(config)])
    _assert_one_line_error(result, "paramz", "params")


def test_a_config_with_a_bad_parameter_exits_2_naming_the_parameter(runner, tmp_path, csv_data):
    config = _write_config(tmp_path, params={"max_dept": 3})
    result = runner.invoke(main, ["train", "--config", str(config)])
    _assert_one_line_error(result, "max_dept", "max_depth")
    assert not (tmp_path / "models").exists()


@pytest.mark.parametrize(
    "content, fragment",
    [
        ("{not json", "not valid"),
        ("[1, 2]", "mapping"),
        ('{"output": "m.json"}', "'data'"),
        ('{"data": "train.csv", "output": "m.json", "num_boost_round": "ten"}', "num_boost_round"),
    ],
)
def test_malformed_configs_exit_2_without_a_traceback(runner, tmp_path, csv_data, content, fragment):
    path = tmp_path / "bad.json"
    path.write_text(content)
    result = runner.invoke(main, ["train", "--config", str(path)])
    _assert_one_line_error(result, fragment)


def test_a_missing_label_column_or_data_file_exits_2(runner, tmp_path, csv_data):
    result = runner.invoke(main, ["train", "--config", str(_write_config(tmp_path, label="y"))])
    _assert_one_line_error(result, "'y'")
    result = runner.invoke(main, ["train", "--config", str(_write_config(tmp_path, data="nope.csv"))])
    _assert_one_line_error(result, "nope.csv")


def test_predict_with_a_file_that_is_not_a_model_exits_2(runner, tmp_path, csv_data):
    result = runner.invoke(
        main,
        [
            "predict",
            "--model",
            str(csv_data["train"]),
            "--data",
            str(csv_data["test"]),
            "--output",
            str(tmp_path / "p.csv"),
        ],
    )
    _assert_one_line_error(result)
    assert not (tmp_path / "p.csv").exists()


def test_predict_with_the_wrong_features_exits_2(runner, tmp_path, csv_data):
    assert runner.invoke(main, ["train", "--config", str(_write_config(tmp_path)), "--quiet"]).exit_code == 0
    narrow = tmp_path / "narrow.csv"
    pd.read_csv(csv_data["test"])[["x0", "x1"]].to_csv(narrow, index=False)
    result = runner.invoke(
        main,
        [
            "predict",
            "--model",
            str(tmp_path / "models" / "model.json"),
            "--data",
            str(narrow),
            "--output",
            str(tmp_path / "p.csv"),
        ],
    )
    _assert_one_line_error(result, "features")


# ----------------------------------------------------------------------------- data lakes in one process
@pytest.fixture()
def day_files(tmp_path):
    """Three CSV files of one table with an ``id`` column, and a model trained on its features."""
    X, y, _ = make_synthetic(300, n_features=3, task="regression", seed=5)
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    frame["id"] = np.arange(1000, 1300)
    frame["target"] = y
    paths = []
    for i, (start, stop) in enumerate(((0, 120), (120, 250), (250, 300))):
        paths.append(tmp_path / f"day-{i + 1}.csv")
        frame.iloc[start:stop].to_csv(paths[-1], index=False)
    model = tmp_path / "m.json"
    dgboost.train({"max_depth": 3}, dgboost.DMatrix(frame[["a", "b", "c"]], frame["target"]), 5).save_model(model)
    return paths, model, frame


@pytest.mark.parametrize("command", ["predict", "explain"])
def test_several_files_in_one_process_keep_id_columns_and_file_names_that_join_back(
    runner, tmp_path, day_files, command
):
    paths, model, frame = day_files
    out = tmp_path / "out.csv"
    # the paths one by one, as a shell expands an unquoted glob
    args = [command, "--model", str(model), "--data", *map(str, paths[::-1]), "--output", str(out)]
    result = runner.invoke(main, [*args, "--label-column", "target", "--keep", "id", "--with-file-name"])
    assert result.exit_code == 0, result.output
    got = pd.read_csv(out)
    assert list(got.columns[:2]) == ["id", "file"]
    assert list(got["file"].drop_duplicates()) == [str(p) for p in paths[::-1]]
    joined = got.merge(frame, on="id", suffixes=("", "_input"))
    assert len(joined) == len(frame)
    booster = dgboost.Booster(model_file=str(model))
    if command == "predict":
        expected = booster.predict(joined[["a", "b", "c"]])
        np.testing.assert_allclose(joined["prediction"], expected, rtol=1e-6)
    else:
        margin = booster.predict(joined[["a_input", "b_input", "c_input"]].to_numpy(), output_margin=True)
        np.testing.assert_allclose(joined[["a", "b", "c", "bias"]].sum(axis=1), margin, rtol=1e-5, atol=1e-5)


def test_a_quoted_glob_without_cluster_is_read_in_one_process_in_natural_order(runner, tmp_path, day_files):
    paths, model, frame = day_files
    out = tmp_path / "p.csv"
    glob = str(tmp_path / "day-*.csv")
    result = runner.invoke(
        main, ["predict", "--model", str(model), "--data", glob, "--output", str(out), "--keep", "id"]
    )
    assert result.exit_code == 0, result.output
    got = pd.read_csv(out)
    np.testing.assert_array_equal(got["id"], frame["id"])
    booster = dgboost.Booster(model_file=str(model))
    np.testing.assert_allclose(got["prediction"], booster.predict(frame[["a", "b", "c"]]), rtol=1e-6)


def test_extra_paths_without_data_and_cluster_only_options_exit_2(runner, tmp_path, day_files):
    paths, model, _frame = day_files
    result = runner.invoke(main, ["predict", "--model", str(model), str(paths[0]), "--output", str(tmp_path / "o")])
    assert result.exit_code == 2 and "data paths go after --data" in result.stderr
    base = ["predict", "--model", str(model), "--data", str(paths[0]), "--output", str(tmp_path / "o.csv")]
    result = runner.invoke(main, [*base, "--partition-rows", "10"])
    assert result.exit_code == 2 and "--partition-rows: only with --cluster" in result.stderr
    result = runner.invoke(main, [*base, "--keep", "idd"])
    _assert_one_line_error(result, "no --keep column 'idd'", "did you mean 'id'?")
    result = runner.invoke(main, [*base, "--keep", "id", "--output", str(tmp_path / "o.npy")])
    _assert_one_line_error(result, "need a .csv or .parquet output")


def test_files_of_other_columns_in_one_process_exit_2_naming_them(runner, tmp_path, day_files):
    paths, model, frame = day_files
    frame.drop(columns="b").to_csv(paths[1], index=False)
    args = ["predict", "--model", str(model), "--data", *map(str, paths), "--output", str(tmp_path / "o.csv")]
    _assert_one_line_error(runner.invoke(main, args), "1 of 3 files", f"{paths[1]}: no column 'b'")


def test_parquet_files_are_split_into_partitions_of_whole_row_groups(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dgboost.cli.parquet_files import plan_partitions, read_footers

    table = pa.table({"x": np.arange(1000.0)})
    pq.write_table(table, tmp_path / "a.parquet", row_group_size=300)  # 300, 300, 300, 100
    pq.write_table(table.slice(0, 50), tmp_path / "b.parquet")
    footers = read_footers([str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")])
    assert footers[0].row_group_rows == (300, 300, 300, 100)
    parts = plan_partitions(footers, partition_rows=650)
    assert [(p.path[-9:], p.row_groups, p.num_rows) for p in parts] == [
        ("a.parquet", (0, 1), 600),
        ("a.parquet", (2, 3), 400),
        ("b.parquet", (0,), 50),
    ]
    # a row group larger than the limit is a partition of its own
    assert [p.num_rows for p in plan_partitions(footers, partition_rows=100)] == [300, 300, 300, 100, 50]


def test_partitions_of_row_groups_read_the_rows_and_the_index_of_the_whole_file(tmp_path):
    from dgboost.cli.parquet_files import dask_frame, plan_partitions, read_footers

    frame = pd.DataFrame({"x": np.arange(10.0), "s": list("abcdefghij")}, index=pd.RangeIndex(100, 120, 2))
    for name, rows in (("range", frame), ("named", frame.rename_axis("rid")), ("ids", frame.set_index("s"))):
        path = tmp_path / f"{name}.parquet"
        rows.to_parquet(path, row_group_size=4)  # a RangeIndex is kept as metadata only, other indexes as columns
        footers = read_footers([str(path)])
        lazy = dask_frame(footers, plan_partitions(footers, partition_rows=4), with_file=True)
        assert lazy.npartitions == 3
        got = lazy.compute(scheduler="sync")
        pd.testing.assert_frame_equal(got.drop(columns="file"), pd.read_parquet(path), check_index_type=False)
        assert set(got["file"]) == {str(path)}


# ----------------------------------------------------------------------------- configs documented and checked
def test_a_cluster_config_value_of_the_wrong_type_exits_2_naming_the_key_and_the_type(runner, tmp_path):
    pd.DataFrame({"x": [1.0, 2.0], "label": [0, 1]}).to_parquet(tmp_path / "d.parquet")
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: local\nargs:\n  n_workers: two\n")
    args = ["train", "--cluster", str(bad), "--data", str(tmp_path / "d.parquet"), "--output", str(tmp_path / "m")]
    _assert_one_line_error(runner.invoke(main, args), "bad.yaml: args.n_workers must be an integer >= 1", "'two'")


def test_every_config_key_is_documented_in_help_and_docs(runner):
    from pathlib import Path

    import yaml

    from dgboost.cli.config import CLUSTER_VALUE_TYPES, CONFIG_KEYS

    docs = (Path(__file__).parents[2] / "docs" / "cli.md").read_text()
    help_text = runner.invoke(main, ["train", "--help"]).output
    for key in CONFIG_KEYS:
        assert f"`{key}`" in docs and f"  {key} " in help_text, key
    shipped = Path(__file__).parents[2] / "cluster_configs"
    keys = set()
    for path in shipped.glob("*.yaml"):
        config = yaml.safe_load(path.read_text())
        keys |= set(config) | set(config.get("args") or {})
    keys |= {key for types in CLUSTER_VALUE_TYPES.values() for key in types}
    missing = sorted(key for key in keys if f"`{key}`" not in docs and f"`scale.{key}`" not in docs)
    assert not missing, missing


def test_a_warning_with_an_empty_message_while_the_cluster_starts_is_left_out_of_the_notes(monkeypatch, capsys):
    """``open_cluster`` reports warnings raised while it connects as notes; one whose message is
    empty (a garbage-collected object's, say) used to end the command with an IndexError."""
    import warnings

    from dgboost.cli import cluster_session

    class _Scheduler:
        def identity(self, n_workers=-1):
            return {"workers": {"tcp://127.0.0.1:1": {"nthreads": 1}, "tcp://127.0.0.1:2": {"nthreads": 1}}}

    class _Client:
        scheduler = _Scheduler()

        def sync(self, method, *args, callback_timeout=None, **kwargs):
            return method(*args, **kwargs)

        def close(self):
            pass

    def connect(config):
        warnings.warn(UserWarning(), stacklevel=2)  # an empty message
        warnings.warn("the dashboard port is taken\nmore detail", stacklevel=2)
        return _Client()

    monkeypatch.setattr(cluster_session, "connect", connect)
    client, _ = cluster_session.open_cluster(None, quiet=False)
    assert isinstance(client, _Client)
    notes = [line for line in capsys.readouterr().err.splitlines() if "note:" in line]
    assert notes == ["  note: the dashboard port is taken"]
