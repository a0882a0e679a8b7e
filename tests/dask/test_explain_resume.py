"""``dgboost explain --cluster`` over many Parquet files: every output file written atomically,
a corrupt input named while the others are written, ``--resume`` explaining only the missing
files (the bytes of an uninterrupted run), ``--strict`` starting nothing when an input is bad."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

import dgboost as dg
from dgboost.cli import main

pytestmark = pytest.mark.dask

FEATURES = [f"x{i}" for i in range(4)]
N_FILES, ROWS = 5, 200


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """The path of an ``existing`` config naming the module's cluster (2 worker processes)."""
    from dgboost.cli.cluster_session import open_cluster

    folder = tmp_path_factory.mktemp("cluster")
    local = folder / "local.yaml"
    args = {"n_workers": 2, "threads_per_worker": 1, "processes": True, "dashboard_address": ":0"}
    local.write_text(yaml.safe_dump({"kind": "local", "args": args}))
    client, _config = open_cluster(str(local), quiet=True)
    existing = folder / "existing.yaml"
    existing.write_text(yaml.safe_dump({"kind": "existing", "address": client.scheduler.address}))
    yield str(existing)
    client.close()


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    """Five Parquet files, a model trained on their rows, and another model."""
    folder = tmp_path_factory.mktemp("lake")
    rng = np.random.default_rng(8)
    frame = pd.DataFrame(rng.normal(size=(N_FILES * ROWS, len(FEATURES))), columns=FEATURES)
    label = (frame["x0"] + frame["x1"] ** 2 > 0.5).astype(float)
    (folder / "in").mkdir()
    for k in range(N_FILES):
        frame.iloc[k * ROWS : (k + 1) * ROWS].to_parquet(folder / "in" / f"day-{k}.parquet", index=False)
    model, other = folder / "model.json", folder / "other.json"
    dg.train({"max_depth": 3, "seed": 1}, dg.DMatrix(frame, label), 5).save_model(model)
    dg.train({"max_depth": 2, "seed": 1}, dg.DMatrix(frame, label), 3).save_model(other)
    return {"folder": folder, "inputs": str(folder / "in" / "*.parquet"), "model": model, "other": other}


def _explain(cluster, lake, out: Path, *extra: str, model=None):
    args = ["explain", "--cluster", cluster, "--model", str(model or lake["model"]), "--data", lake["inputs"]]
    return CliRunner().invoke(main, [*args, "--output", str(out), "--quiet", *extra])


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _corrupt(path: Path) -> bytes:
    """Overwrite the first data page's header (the footer stays readable): its original bytes."""
    original = path.read_bytes()
    damaged = bytearray(original)
    damaged[4:200] = b"\xab" * 196
    path.write_bytes(bytes(damaged))
    return original


@pytest.fixture(scope="module")
def uninterrupted(cluster, lake):
    out = lake["folder"] / "uninterrupted"
    result = _explain(cluster, lake, out)
    assert result.exit_code == 0, result.output
    files = _files(out)
    assert sorted(files) == [f"part.{k:05d}.parquet" for k in range(N_FILES)]
    return files


def test_a_corrupt_input_is_named_the_others_are_written_and_resume_writes_only_it(
    cluster, lake, uninterrupted, tmp_path
):
    bad = lake["folder"] / "in" / "day-3.parquet"
    out = tmp_path / "shap"
    partial = tmp_path / ".shap.partial"
    original = _corrupt(bad)
    try:
        result = _explain(cluster, lake, out)
    finally:
        bad.write_bytes(original)
    assert result.exit_code == 2, result.output
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith("Error: 1 input file(s) could not be written: ") and str(bad) in error
    assert "(partition 3)" in error and "--resume" in error and str(partial) in error
    assert not out.exists()  # no incomplete folder under the final name
    written = {p.name for p in partial.iterdir() if not p.name.startswith(".")}
    assert written == {f"part.{k:05d}.parquet" for k in (0, 1, 2, 4)}
    for name in written:  # each file complete: the uninterrupted run's bytes
        assert (partial / name).read_bytes() == uninterrupted[name]

    # a file a killed run was writing, under its temporary name: never kept
    (partial / ".part.00003.parquet.0123.tmp").write_bytes(b"PAR1 half")
    before = {name: os.stat(partial / name) for name in written}
    result = _explain(cluster, lake, out, "--resume")
    assert result.exit_code == 0, result.output
    assert _files(out) == uninterrupted
    for name, stat in before.items():  # not written again: the same file
        assert (os.stat(out / name).st_ino, os.stat(out / name).st_mtime_ns) == (stat.st_ino, stat.st_mtime_ns)
    assert not partial.exists()


def test_resume_refuses_the_files_of_a_run_with_another_model(cluster, lake, tmp_path):
    bad = lake["folder"] / "in" / "day-1.parquet"
    out = tmp_path / "shap"
    original = _corrupt(bad)
    try:
        assert _explain(cluster, lake, out).exit_code == 2
    finally:
        bad.write_bytes(original)
    result = _explain(cluster, lake, out, "--resume", model=lake["other"])
    assert result.exit_code == 2
    assert "--resume:" in result.stderr and "(differs in model_sha256)" in result.stderr
    # without --resume the other model's run starts again and replaces the earlier files
    result = _explain(cluster, lake, out, model=lake["other"])
    assert result.exit_code == 0, result.output
    explainer = dg.TreeExplainer(dg.Booster(model_file=str(lake["other"])))
    rows = pd.read_parquet(lake["folder"] / "in" / "day-1.parquet")
    got = pd.read_parquet(out / "part.00001.parquet")
    np.testing.assert_array_equal(got[FEATURES].to_numpy(), explainer.shap_values(rows)[:, : len(FEATURES)])


def test_resume_without_an_earlier_run_explains_everything(cluster, lake, uninterrupted, tmp_path):
    result = _explain(cluster, lake, tmp_path / "shap", "--resume")
    assert result.exit_code == 0, result.output
    assert _files(tmp_path / "shap") == uninterrupted


def test_strict_names_a_corrupt_input_and_starts_nothing(cluster, lake, tmp_path):
    bad = lake["folder"] / "in" / "day-2.parquet"
    original = _corrupt(bad)
    try:
        result = _explain(cluster, lake, tmp_path / "shap", "--strict")
    finally:
        bad.write_bytes(original)
    assert result.exit_code == 2
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith("Error: --strict: 1 input file(s) cannot be read, nothing was written: ")
    assert str(bad) in error and "day-1" not in error
    assert list(tmp_path.iterdir()) == []  # no output, no partial folder


def test_resume_and_strict_are_cluster_options(lake, tmp_path):
    args = ["explain", "--model", str(lake["model"]), "--data", lake["inputs"], "--output", str(tmp_path / "o")]
    result = CliRunner().invoke(main, [*args, "--resume"])
    assert result.exit_code == 2 and "--resume: only with --cluster" in result.stderr
