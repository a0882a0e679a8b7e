"""``dgboost train|predict|explain --cluster`` on data-lake layouts: one large file split by row
groups over the workers, schemas checked before work starts, ID columns and file names kept
in the outputs, several paths, progress lines, and parameter errors reported once.

The commands join the session's 2-worker LocalCluster (``dask_client`` of conftest.py) through
a cluster YAML of kind ``existing``.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from click.testing import CliRunner
from distributed import get_task_stream

import dgboost as dg
from dgboost.cli import main
from dgboost.datasets import make_synthetic

pytestmark = pytest.mark.dask

FEATURES = [f"x{i}" for i in range(5)]
ROWS = 2000
ROW_GROUP = 500
ROUNDS = 4
# the functions that read, predict, explain and write partitions
PARTITION_TASKS = ("_read_partition", "_predict_frame_partition", "_frame_partition", "_write_")
PARAMS = ["--param", "objective=binary:logistic", "--param", "max_depth=3", "--param", "eta=0.3"]


@pytest.fixture(scope="module")
def existing(dask_client, tmp_path_factory):
    """(path of an ``existing`` config naming the 2-worker cluster, its client)."""
    client = dask_client(2)
    path = tmp_path_factory.mktemp("cluster") / "existing.yaml"
    path.write_text(yaml.safe_dump({"kind": "existing", "address": client.scheduler.address}))
    return str(path), client


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    """Training rows in one file of 4 row groups; the same rows with ID columns (``id``, ``ts``)
    in one file of 4 row groups and in 3 files; and the rows."""
    folder = tmp_path_factory.mktemp("lake")
    X, y, _ = make_synthetic(ROWS, n_features=5, task="binary", missing_rate=0.1, seed=11)
    frame = pd.DataFrame(X, columns=FEATURES)
    frame["label"] = y
    train = folder / "train.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), train, row_group_size=ROW_GROUP)
    frame["id"] = np.arange(ROWS, dtype=np.int64)[::-1].copy()  # not the row number
    frame["ts"] = pd.Timestamp("2026-01-01") + pd.to_timedelta(np.arange(ROWS), unit="s")
    big = folder / "big.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), big, row_group_size=ROW_GROUP)
    assert pq.ParquetFile(big).metadata.num_row_groups == pq.ParquetFile(train).metadata.num_row_groups == 4
    (folder / "parts").mkdir()
    bounds = [0, 700, 1300, ROWS]
    for i in range(3):
        frame.iloc[bounds[i] : bounds[i + 1]].to_parquet(folder / "parts" / f"day-{i + 1}.parquet", index=False)
    return {"folder": folder, "train": str(train), "big": str(big), "parts": folder / "parts", "rows": frame}


@pytest.fixture(scope="module")
def model(existing, lake):
    """The path of a model the CLI trained on the training file split in 4 partitions."""
    config, _client = existing
    path = lake["folder"] / "model.json"
    result = _train(config, lake["train"], path, "--partition-rows", str(ROW_GROUP))
    assert result.exit_code == 0, result.output
    return path


def _train(config: str, data: str, output: Path, *extra: str):
    args = ["train", "--cluster", config, "--data", data, "--label", "label", "--output", str(output)]
    args += ["--rounds", str(ROUNDS), *PARAMS, *extra]
    return CliRunner().invoke(main, args)


def _run(command: str, config: str, model: Path, data, output: Path, *extra: str):
    data = [data] if isinstance(data, str) else list(data)
    args = [command, "--cluster", config, "--model", str(model), "--data", *data, "--output", str(output)]
    return CliRunner().invoke(main, [*args, "--label-column", "label", *extra])


def _read_folder(folder: Path) -> pd.DataFrame:
    files = sorted(folder.iterdir())
    assert files and all(f.name.startswith("part.") for f in files)
    return pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)


def _assert_one_line_error(result, *fragments) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.stderr
    for fragment in fragments:
        assert fragment in errors[0], errors[0]
    return errors[0]


def _wait_until_idle(client, timeout: float = 30.0) -> None:
    """Until no worker runs a task: a worker still busy with an earlier test's task would leave
    every partition of the next run to the other one."""
    deadline = time.monotonic() + timeout
    while any(client.processing().values()):
        assert time.monotonic() < deadline, client.processing()
        time.sleep(0.05)


def _working_workers(stream, tasks: tuple[str, ...] = ("_read_partition",)) -> set[str]:
    """Workers that ran ``tasks`` (names of functions) in a ``distributed.get_task_stream`` record."""
    return {t["worker"] for t in stream.data if any(name in str(t["key"]) for name in tasks)}


# ----------------------------------------------------------------------------- one large file
def test_one_file_of_four_row_groups_is_read_by_both_workers_and_trains_the_one_partition_model(existing, lake, model):
    config, client = existing
    again = lake["folder"] / "again.json"
    _wait_until_idle(client)
    with get_task_stream(client=client) as stream:
        split = _train(config, lake["train"], again, "--partition-rows", str(ROW_GROUP))
    assert split.exit_code == 0, split.output
    assert "(4 partitions of " in split.stderr
    assert len(_working_workers(stream)) == 2  # each holds partitions it read
    whole = lake["folder"] / "whole.json"
    one = _train(config, lake["train"], whole)  # the default: 2,000 rows in one partition
    assert one.exit_code == 0, one.output
    assert "(1 partitions of " in one.stderr
    assert model.read_bytes() == whole.read_bytes() == again.read_bytes()


@pytest.mark.parametrize("command", ["predict", "explain"])
def test_predict_and_explain_of_one_file_split_over_the_workers_equal_those_of_one_partition(
    existing, lake, model, tmp_path, command
):
    config, client = existing
    outputs = {}
    for rows in (ROW_GROUP, ROWS):
        out = tmp_path / f"{rows}"
        _wait_until_idle(client)
        with get_task_stream(client=client) as stream:
            result = _run(command, config, model, lake["big"], out, "--partition-rows", str(rows), "--keep", "id")
        assert result.exit_code == 0, result.output
        assert len(list(out.iterdir())) == ROWS // rows
        if rows == ROW_GROUP:
            # reading, predicting or explaining and writing partitions: the scheduler balances them
            assert len(_working_workers(stream, PARTITION_TASKS)) == 2
        outputs[rows] = _read_folder(out)
    pd.testing.assert_frame_equal(outputs[ROW_GROUP], outputs[ROWS])
    booster = dg.Booster(model_file=str(model))
    values = outputs[ROWS].drop(columns="id")
    np.testing.assert_array_equal(outputs[ROWS]["id"], lake["rows"]["id"])
    if command == "predict":
        np.testing.assert_allclose(values["prediction"], booster.predict(lake["rows"][FEATURES]), rtol=1e-6)
    else:
        assert list(values.columns) == FEATURES + ["bias"]
        margin = booster.predict(lake["rows"][FEATURES], output_margin=True)
        np.testing.assert_allclose(values.sum(axis=1), margin, rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------- schemas
def test_files_of_other_columns_or_types_exit_2_naming_them_before_a_cluster_is_contacted(lake, model, tmp_path):
    folder = tmp_path / "mixed"
    folder.mkdir()
    rows = lake["rows"][FEATURES + ["label"]]
    rows.iloc[:100].to_parquet(folder / "a.parquet", index=False)
    rows.iloc[100:200].drop(columns="x3").to_parquet(folder / "b.parquet", index=False)
    rows.iloc[200:300].astype({"x1": str}).to_parquet(folder / "c.parquet", index=False)
    rows.iloc[300:400].to_parquet(folder / "d.parquet", index=False)
    # no scheduler listens there: the error must come from the files' footers, read first
    nowhere = tmp_path / "nowhere.yaml"
    nowhere.write_text(yaml.safe_dump({"kind": "existing", "address": "tcp://127.0.0.1:9", "args": {"timeout": "1s"}}))
    glob = str(folder / "*.parquet")
    for result in (
        _run("predict", str(nowhere), model, glob, tmp_path / "out"),
        _train(str(nowhere), glob, tmp_path / "m.json"),
    ):
        message = _assert_one_line_error(result, "2 of 4 files", "a.parquet")
        assert "b.parquet: no column 'x3'" in message
        assert "c.parquet: column 'x1' is " in message and "string, not float" in message  # (large_)string
        assert "d.parquet" not in message
    assert not (tmp_path / "out").exists() and not (tmp_path / "m.json").exists()


# ----------------------------------------------------------------------------- kept columns, several paths
@pytest.mark.parametrize("command", ["predict", "explain"])
def test_kept_id_columns_and_file_names_join_the_outputs_back_to_the_input_rows(
    existing, lake, model, tmp_path, command
):
    config, _client = existing
    files = [str(p) for p in sorted(lake["parts"].iterdir())]
    out = tmp_path / "out"
    # the paths one by one, as a shell expands an unquoted glob, in an order that is not the natural one
    result = _run(command, config, model, files[::-1], out, "--keep", "id,ts", "--with-file-name", "--quiet")
    assert result.exit_code == 0, result.output
    got = _read_folder(out)
    assert list(got.columns[:3]) == ["id", "ts", "file"]
    assert set(got["file"]) == set(files)
    booster = dg.Booster(model_file=str(model))
    # each file's rows joined back through (file, id): the values are those of the joined rows
    for path in files:
        inputs = pd.read_parquet(path)
        joined = got[got["file"] == path].merge(inputs, on=["id", "ts"], suffixes=("", "_input"))
        assert len(joined) == len(inputs)
        if command == "predict":
            expected = booster.predict(joined[FEATURES].to_numpy())
            np.testing.assert_allclose(joined["prediction"], expected, rtol=1e-6)
        else:
            shap = dg.TreeExplainer(str(model)).shap_values(joined[[f"{f}_input" for f in FEATURES]].to_numpy())
            np.testing.assert_allclose(joined[FEATURES].to_numpy(), shap[:, : len(FEATURES)], rtol=1e-6, atol=1e-9)


def test_several_paths_a_folder_and_a_quoted_glob_give_the_same_predictions(existing, lake, model, tmp_path):
    config, _client = existing
    files = [str(p) for p in sorted(lake["parts"].iterdir())]
    outputs = []
    for i, data in enumerate((files, [str(lake["parts"])], [str(lake["parts"] / "day-*.parquet")])):
        result = _run("predict", config, model, data, tmp_path / str(i), "--with-file-name", "--quiet")
        assert result.exit_code == 0, result.output
        outputs.append(_read_folder(tmp_path / str(i)))
    pd.testing.assert_frame_equal(outputs[0], outputs[1])
    pd.testing.assert_frame_equal(outputs[0], outputs[2])
    assert list(outputs[0]["file"].drop_duplicates()) == files  # natural order: day-1, day-2, day-3


# ----------------------------------------------------------------------------- progress
def test_progress_lines_give_rounds_rows_and_rates_on_stderr_and_quiet_silences_them(existing, lake, model, tmp_path):
    config, _client = existing
    trained = _train(config, lake["train"], tmp_path / "m.json", "--progress-interval", "0.001")
    assert trained.exit_code == 0, trained.output
    rounds = [line for line in trained.stderr.splitlines() if line.startswith("round ")]
    assert rounds and any("/round" in line for line in rounds), trained.stderr
    assert f"round {ROUNDS}/{ROUNDS}" in rounds[-1]
    for command in ("predict", "explain"):
        args = ["--partition-rows", str(ROW_GROUP), "--progress-interval", "0.001"]
        result = _run(command, config, model, lake["big"], tmp_path / command, *args)
        assert result.exit_code == 0, result.output
        verb = {"predict": "predicted", "explain": "explained"}[command]
        lines = [line for line in result.stderr.splitlines() if line.startswith(f"{verb} ")]
        assert len(lines) >= 2, result.stderr  # periodic lines, then the last one
        assert lines[-1].startswith(f"{verb} {ROWS:,}/{ROWS:,} rows (100%), partitions done 4/4")
        assert "rows/s" in lines[-1]
        quiet = _run(command, config, model, lake["big"], tmp_path / f"{command}-quiet", *args, "--quiet")
        assert quiet.exit_code == 0 and quiet.stderr == "" and quiet.stdout == ""
    silent = _train(config, lake["train"], tmp_path / "q.json", "--progress-interval", "0.001", "--quiet")
    assert silent.exit_code == 0 and silent.stderr == "" and silent.stdout == ""


def test_verbose_eval_0_prints_no_evaluation_lines_but_keeps_the_progress_lines(existing, lake, tmp_path):
    config, _client = existing
    train_config = tmp_path / "train.yaml"
    train_config.write_text(
        yaml.safe_dump(
            {
                "data": lake["train"],
                "validation": lake["train"],
                "label": "label",
                "params": {"objective": "binary:logistic", "max_depth": 2},
                "num_boost_round": ROUNDS,
                "verbose_eval": 0,
                "output": "m.json",
            }
        )
    )
    args = ["train", "--cluster", config, "--config", str(train_config), "--progress-interval", "0.001"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert result.stdout == ""  # no evaluation lines
    assert f"round {ROUNDS}/{ROUNDS}" in result.stderr


# ----------------------------------------------------------------------------- parameters
def test_a_bad_objective_on_the_cluster_is_one_parameter_error_naming_it(existing, lake, tmp_path):
    config, client = existing
    result = CliRunner().invoke(
        main,
        ["train", "--cluster", config, "--data", lake["train"], "--output", str(tmp_path / "m.json")]
        + ["--param", "objective=binary:logistik"],
    )
    message = _assert_one_line_error(result, "objective")
    assert result.stderr.count("binary:logistik") == 1 and "partition" not in message
    # dgboost.dask.train itself: one ParameterError, raised on the client
    import dask.dataframe as dd

    from dgboost import dask as dxgb
    from dgboost.errors import ParameterError

    frame = dd.from_pandas(lake["rows"][FEATURES + ["label"]], npartitions=2)
    dtrain = dxgb.DaskDMatrix(client, frame[FEATURES], frame["label"])
    with pytest.raises(ParameterError) as caught:
        dxgb.train(client, {"objective": "binary:logistik"}, dtrain, 2)
    assert str(caught.value).count("binary:logistik") == 1 and "partition" not in str(caught.value)
