"""``dgboost train|predict|explain --cluster`` and ``dgboost demo --cluster``: Parquet in and out
through Dask, with the same models and numbers as single-process dgboost.

One LocalCluster (2 single-threaded worker processes) serves the module: it is started through
a cluster YAML of kind ``local`` (:func:`dgboost.cli.cluster_session.open_cluster`), and the commands
join it through a YAML of kind ``existing`` (each command's client leaves it running).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

import dgboost as dg
from dgboost.cli import main
from dgboost.datasets import make_synthetic

pytestmark = pytest.mark.dask

FEATURES = [f"x{i}" for i in range(5)]
# natural sort order (part-1, part-2, part-10) differs from the glob's lexicographic one
FILES = {"part-1.parquet": 900, "part-2.parquet": 600, "part-10.parquet": 1100}
PARAMS = {"objective": "binary:logistic", "max_depth": 3, "eta": 0.3, "eval_metric": ["logloss", "auc"]}
ROUNDS = 6


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """(path of an ``existing`` config naming the module's cluster, the client)."""
    from dgboost.cli.cluster_session import open_cluster

    folder = tmp_path_factory.mktemp("cluster")
    local = folder / "local.yaml"
    local.write_text(
        yaml.safe_dump(
            {
                "kind": "local",
                "args": {"n_workers": 2, "threads_per_worker": 1, "processes": True, "dashboard_address": ":0"},
            }
        )
    )
    client, _config = open_cluster(str(local), quiet=True)
    existing = folder / "existing.yaml"
    existing.write_text(yaml.safe_dump({"kind": "existing", "address": client.scheduler.address}))
    yield str(existing), client
    client.close()


@pytest.fixture(scope="module")
def parquet(tmp_path_factory):
    """Training files (3, uneven), validation files (2) and their rows in natural file order."""
    folder = tmp_path_factory.mktemp("data")
    X, y, _ = make_synthetic(sum(FILES.values()) + 800, n_features=5, task="binary", missing_rate=0.1, seed=3)
    frame = pd.DataFrame(X, columns=FEATURES)
    frame["label"] = y
    frame["w"] = np.linspace(0.5, 1.5, len(frame))
    (folder / "train").mkdir()
    (folder / "valid").mkdir()
    start = 0
    for name, n in FILES.items():  # written in natural order: rows[start:start + n] is this file
        frame.iloc[start : start + n].to_parquet(folder / "train" / name, index=False)
        start += n
    train_rows = frame.iloc[:start].reset_index(drop=True)
    valid_rows = frame.iloc[start:].reset_index(drop=True)
    valid_rows.iloc[:500].to_parquet(folder / "valid" / "a.parquet", index=False)
    valid_rows.iloc[500:].to_parquet(folder / "valid" / "b.parquet", index=False)
    return {
        "folder": folder,
        "train": str(folder / "train" / "*.parquet"),
        "valid": str(folder / "valid" / "*.parquet"),
        "train_rows": train_rows,
        "valid_rows": valid_rows,
    }


@pytest.fixture(scope="module")
def trained(cluster, parquet):
    """The model ``dgboost train --cluster`` writes (with a validation set), and the run's result."""
    config, _client = cluster
    model = parquet["folder"] / "model.json"
    args = [
        "train",
        "--cluster",
        config,
        "--data",
        parquet["train"],
        "--label",
        "label",
        "--weight",
        "w",
        "--validation",
        parquet["valid"],
        "--output",
        str(model),
        "--rounds",
        str(ROUNDS),
        "--param",
        "objective=binary:logistic",
        "--param",
        "max_depth=3",
        "--param",
        "eta=0.3",
        "--param",
        "eval_metric=logloss",
        "--param",
        "eval_metric=auc",
    ]
    result = CliRunner().invoke(main, args)
    return model, result


def _single_process_model(parquet, validation: bool) -> dg.Booster:
    """dgboost.train on the training files' rows in natural file order (and the validation rows)."""

    def dmatrix(rows):
        return dg.DMatrix(rows[FEATURES], label=rows["label"].to_numpy(), weight=rows["w"].to_numpy())

    evals = [(dmatrix(parquet["valid_rows"]), "validation")] if validation else []
    return dg.train(PARAMS, dmatrix(parquet["train_rows"]), ROUNDS, evals=evals, verbose_eval=False)


def _read_folder(folder: Path) -> pd.DataFrame:
    files = sorted(folder.iterdir())
    assert files and all(f.name.startswith("part.") and f.suffix == ".parquet" for f in files)
    return pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)


def _assert_one_line_error(result, *fragments):
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.stderr
    for fragment in fragments:
        assert fragment in errors[0]


def _no_leftovers(folder: Path) -> None:
    assert not [p.name for p in folder.iterdir() if p.name.startswith(".")]


# ----------------------------------------------------------------------------- train
def test_train_on_the_cluster_writes_the_model_that_single_process_training_on_the_files_rows_gives(trained, parquet):
    model, result = trained
    assert result.exit_code == 0, result.output
    assert model.is_file()
    # byte-identical: the files' rows in natural sort order (part-1, part-2, part-10)
    assert dg.Booster(model_file=model).to_json() == _single_process_model(parquet, validation=True).to_json()
    # progress: the evaluation lines on stdout (round 0 and the last), what runs where on stderr
    assert "[0]\tvalidation-logloss:" in result.stdout and f"[{ROUNDS - 1}]\tvalidation-logloss:" in result.stdout
    assert "training 6 rounds on 2,600 rows x 5 features (3 partitions" in result.stderr
    assert "rows/s" in result.stderr


def test_train_on_the_cluster_from_a_config_whose_data_path_is_a_glob(cluster, parquet, tmp_path):
    config, _client = cluster
    train_config = tmp_path / "train.yaml"
    train_config.write_text(
        yaml.safe_dump(
            {
                "data": str(parquet["folder"] / "train" / "part-*.parquet"),
                "label": "label",
                "weight": "w",
                "params": PARAMS,
                "num_boost_round": ROUNDS,
                "output": "m.json",
            }
        )
    )
    result = CliRunner().invoke(main, ["train", "--cluster", config, "--config", str(train_config)])
    assert result.exit_code == 0, result.output
    single = _single_process_model(parquet, validation=False)
    assert dg.Booster(model_file=tmp_path / "m.json").to_json() == single.to_json()
    # no validation set: a "round k/N" line every ~10% of the rounds, on stderr
    assert f"round {ROUNDS}/{ROUNDS}" in result.stderr and "round 1/6" in result.stderr


def test_a_bad_label_column_exits_2_with_a_one_line_message_and_writes_no_model(cluster, parquet, tmp_path):
    config, _client = cluster
    model = tmp_path / "model.json"
    result = CliRunner().invoke(
        main, ["train", "--cluster", config, "--data", parquet["train"], "--label", "lable", "--output", str(model)]
    )
    _assert_one_line_error(result, "'lable'", "did you mean 'label'")
    assert not model.exists()


def test_cluster_only_options_without_cluster_exit_2(tmp_path):
    result = CliRunner().invoke(main, ["train", "--data", "x/*.parquet", "--output", str(tmp_path / "m.json")])
    assert result.exit_code == 2 and "only with --cluster" in result.stderr


# ----------------------------------------------------------------------------- predict
def test_predict_on_the_cluster_writes_a_parquet_folder_of_single_process_predictions(
    trained, cluster, parquet, tmp_path
):
    config, _client = cluster
    model, _ = trained
    out = tmp_path / "preds"
    result = CliRunner().invoke(
        main,
        [
            "predict",
            "--cluster",
            config,
            "--model",
            str(model),
            "--data",
            parquet["train"],
            "--output",
            str(out),
            "--label-column",
            "label",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "partitions done 3/3" in result.stderr
    preds = _read_folder(out)
    assert list(preds.columns) == ["prediction"]
    booster = dg.Booster(model_file=model)
    np.testing.assert_array_equal(preds["prediction"].to_numpy(), booster.predict(parquet["train_rows"][FEATURES]))
    _no_leftovers(tmp_path)

    # again, with margins, into the same folder: an earlier output is replaced
    result = CliRunner().invoke(
        main,
        [
            "predict",
            "--cluster",
            config,
            "--model",
            str(model),
            "--data",
            parquet["train"],
            "--output",
            str(out),
            "--margin",
            "--quiet",
        ],
    )
    assert result.exit_code == 0 and result.output == ""
    margins = _read_folder(out)["prediction"].to_numpy()
    np.testing.assert_array_equal(margins, booster.predict(parquet["train_rows"][FEATURES], output_margin=True))
    _no_leftovers(tmp_path)


def test_a_predict_that_fails_on_the_workers_leaves_no_output_folder_behind(cluster, parquet, tmp_path):
    config, _client = cluster
    # six features, as the data has besides the label (x0..x4, w), but one named differently:
    # the workers refuse the partitions while writing
    rows = parquet["train_rows"].rename(columns={"w": "zz"})
    other = tmp_path / "other.json"
    dg.train({"max_depth": 2}, dg.DMatrix(rows[FEATURES + ["zz"]], rows["label"]), 2).save_model(other)
    out = tmp_path / "preds"
    result = CliRunner().invoke(
        main,
        [
            "predict",
            "--cluster",
            config,
            "--model",
            str(other),
            "--data",
            parquet["train"],
            "--output",
            str(out),
            "--label-column",
            "label",
        ],
    )
    _assert_one_line_error(result, "zz")
    assert not out.exists()
    _no_leftovers(tmp_path)


# ----------------------------------------------------------------------------- explain
def test_explain_on_the_cluster_writes_the_shap_frame_of_every_row(trained, cluster, parquet, tmp_path):
    config, _client = cluster
    model, _ = trained
    out = tmp_path / "shap"
    result = CliRunner().invoke(
        main,
        [
            "explain",
            "--cluster",
            config,
            "--model",
            str(model),
            "--data",
            parquet["train"],
            "--output",
            str(out),
            "--label-column",
            "label",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "partitions done 3/3" in result.stderr
    shap = _read_folder(out)
    assert list(shap.columns) == FEATURES + ["bias"]
    expected = dg.TreeExplainer(str(model)).shap_frame(parquet["train_rows"][FEATURES])
    pd.testing.assert_frame_equal(shap, expected.reset_index(drop=True), check_exact=True)


def test_explain_interactions_on_the_cluster_are_written_flattened(trained, cluster, parquet, tmp_path):
    config, _client = cluster
    model, _ = trained
    out = tmp_path / "interactions"
    result = CliRunner().invoke(
        main,
        [
            "explain",
            "--cluster",
            config,
            "--model",
            str(model),
            "--data",
            parquet["valid"],
            "--output",
            str(out),
            "--interactions",
            "--quiet",
        ],
    )
    assert result.exit_code == 0, result.output
    values = _read_folder(out)
    names = FEATURES + ["bias"]
    assert list(values.columns) == [f"{a}:{b}" for a in names for b in names]
    rows = parquet["valid_rows"][FEATURES]
    expected = dg.TreeExplainer(str(model)).contributions(rows, interactions=True)[:, 0]
    np.testing.assert_array_equal(values.to_numpy(), expected.reshape(len(rows), -1))


def test_explain_on_cpu_workers_says_so_and_device_cuda_there_warns_once_and_runs_on_their_cpus(
    trained, cluster, parquet, tmp_path
):
    from dgboost.backend import cuda_status

    if cuda_status()[0]:
        pytest.skip("these workers have a GPU")
    config, _client = cluster
    model, _ = trained
    args = [
        "explain",
        "--cluster",
        config,
        "--model",
        str(model),
        "--data",
        parquet["valid"],
        "--label-column",
        "label",
    ]
    auto = CliRunner().invoke(main, [*args, "--output", str(tmp_path / "auto")])
    assert auto.exit_code == 0, auto.output
    assert "on the workers' CPUs" in auto.stderr
    cuda = CliRunner().invoke(main, [*args, "--output", str(tmp_path / "cuda"), "--device", "cuda"])
    # the rule of every entry point (dgboost.device): a GPU asked for where none is usable
    # runs on the CPU with one warning, and gives the CPU's values
    assert cuda.exit_code == 0, cuda.output
    assert cuda.stderr.count("not every worker has a usable CUDA GPU") == 1
    assert "on the workers' CPUs" in cuda.stderr and "Traceback" not in cuda.stderr
    on_auto, on_cuda = (sorted((tmp_path / d).glob("*.parquet")) for d in ("auto", "cuda"))
    assert [p.name for p in on_auto] == [p.name for p in on_cuda] and on_auto
    for a, b in zip(on_auto, on_cuda):
        assert a.read_bytes() == b.read_bytes()


# ----------------------------------------------------------------------------- demo
def test_the_demo_runs_on_the_cluster_and_prints_rows_per_second(cluster):
    config, _client = cluster
    result = CliRunner().invoke(main, ["demo", "--cluster", config, "--rows", "2000", "--rounds", "4"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "[0]\ttest-logloss:" in out and "[3]\ttest-logloss:" in out
    for label in (
        "rows (train / test)",
        "1,600 / 400",
        "2 workers",
        "train time",
        "train rows/s",
        "test AUC",
        "SHAP rows/s",
        "total time",
    ):
        assert label in out
    assert 0.5 < float(out.split("test AUC")[1].split(":")[1].split()[0]) <= 1.0
