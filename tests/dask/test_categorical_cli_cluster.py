"""``dgboost train|predict --cluster --enable-categorical`` (issue 29, docs/cli.md): string
columns of several Parquet files, each file with its own categories, train the model that
single-process training of the concatenated rows gives, and predict re-codes strings."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

import dgboost as dg
from dgboost.cli import main
from dgboost.datasets import make_airline_like

pytestmark = pytest.mark.dask

CATEGORICAL = ["carrier", "origin", "dest"]
PARAMS = {"objective": "binary:logistic", "max_depth": 3, "max_cat_to_onehot": 8}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
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


def test_string_columns_of_several_files_train_the_single_process_model_and_predict(cluster, tmp_path):
    X, y = make_airline_like(2400, n_airports=30, seed=7)
    frame = X.astype({c: str for c in CATEGORICAL}).assign(label=y)
    bounds = [0, 700, 1500, 2400]  # each file holds its own subset of the airports
    for i, (a, b) in enumerate(zip(bounds, bounds[1:])):
        frame.iloc[a:b].to_parquet(tmp_path / f"part-{i}.parquet")
    runner = CliRunner()
    common = ["--cluster", cluster, "--data", str(tmp_path / "part-*.parquet"), "--label", "label", "--quiet"]
    params = [f"--param={k}={v}" for k, v in PARAMS.items()]
    refused = runner.invoke(main, ["train", *common, "--output", str(tmp_path / "m.json"), "--rounds", "3", *params])
    assert refused.exit_code != 0 and "--enable-categorical" in refused.output
    args = ["train", *common, "--output", str(tmp_path / "m.json"), "--rounds", "3", *params, "--enable-categorical"]
    result = runner.invoke(main, args)
    assert result.exit_code == 0, result.output
    model = dg.Booster(model_file=tmp_path / "m.json")
    local = frame.astype({c: "category" for c in CATEGORICAL})
    reference = dg.train(PARAMS, dg.DMatrix(local.drop(columns="label"), y), 3, verbose_eval=False)
    assert model.meta["categories"] == reference.meta["categories"]
    features = local.drop(columns="label")
    np.testing.assert_array_equal(model.predict(features), reference.predict(features))

    frame.drop(columns="label").iloc[::-1].to_parquet(tmp_path / "test.parquet")  # strings, reversed rows
    out = tmp_path / "preds"
    result = runner.invoke(
        main,
        ["predict", "--cluster", cluster, "--model", str(tmp_path / "m.json"), "--data", str(tmp_path / "test.parquet")]
        + ["--output", str(out), "--quiet"],
    )
    assert result.exit_code == 0, result.output
    got = pd.concat([pd.read_parquet(f) for f in sorted(out.glob("*.parquet"))])["prediction"].to_numpy()
    np.testing.assert_allclose(got, reference.predict(features.iloc[::-1]), rtol=0, atol=1e-7)
