"""Parameters are checked by one rule at every entry point: ``train``, ``DMatrix``,
``QuantileDMatrix``, the scikit-learn estimators, ``dgboost.dask`` and the CLI.

``max_bin`` has one bound (the uint16 bin matrix), names have one alias table, and a
``TrainParams`` is parsed once and handed on.
"""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
from click.testing import CliRunner

import dgboost as dg
from dgboost.backend import get_backend
from dgboost.binned import BinnedMatrix
from dgboost.cli import main as cli_main
from dgboost.datasets import make_synthetic
from dgboost.params import ALIASES, MAX_BIN, TrainParams, check_max_bin, parse_params
from dgboost.quantile import compute_cuts
from dgboost.sklearn import DGBRegressor

X, Y, _ = make_synthetic(300, n_features=4, task="regression", seed=3)


# ----------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def client():
    """One in-process Dask worker: enough for the checks made on the client."""
    from distributed import Client, LocalCluster
    from distributed.client import _set_global_client

    with (
        LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster,
        Client(cluster) as c,
    ):
        _set_global_client(c)
        yield c


def _dask_data():
    import dask.array as da

    return da.from_array(X, chunks=(150, 4)), da.from_array(Y, chunks=150)


def _cli_error(tmp_path, params: dict) -> str:
    """The one ``Error:`` line of ``dgboost train --config`` with these parameters."""
    import pandas as pd

    frame = pd.DataFrame(X, columns=[f"x{i}" for i in range(X.shape[1])])
    frame["target"] = Y
    frame.to_csv(tmp_path / "train.csv", index=False)
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {"data": "train.csv", "label": "target", "params": params, "num_boost_round": 2, "output": "model.json"}
        )
    )
    result = CliRunner().invoke(cli_main, ["train", "--config", str(config), "--quiet"])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1, result.stderr
    return errors[0][len("Error: ") :]


def _refusal(fn) -> tuple[type, str]:
    with pytest.raises(dg.DGBoostError) as info:
        fn()
    return type(info.value), str(info.value)


# ----------------------------------------------------------------------------- max_bin
def test_max_bin_at_the_bound_bins_every_row_as_a_brute_force_searchsorted_of_the_cuts():
    rng = np.random.default_rng(0)
    n = 200_000
    distinct = np.arange(MAX_BIN, dtype=np.float32) * 0.5
    values = np.empty((n, 2), np.float32)
    # every one of 65535 distinct values present: one cut each, local bins 0..65534, right
    # under the missing marker; the other rows repeat them or are missing
    values[:, 0] = np.concatenate([distinct, rng.choice(distinct, n - MAX_BIN)])
    values[MAX_BIN:, 0][rng.random(n - MAX_BIN) < 0.05] = np.nan
    values[:, 1] = rng.normal(size=n)
    values[rng.random(n) < 0.01, 1] = np.nan
    values = values[rng.permutation(n)]
    cuts = compute_cuts(values, None, MAX_BIN)
    assert int(cuts.n_bins()[0]) == MAX_BIN
    binned = BinnedMatrix.from_values(values, cuts, get_backend("cpu"))
    bins = np.asarray(binned.bins)
    assert bins.dtype == np.uint16 and binned.missing_bin == MAX_BIN
    for f in range(2):
        c = cuts.feature_cuts(f)
        x = values[:, f]
        want = np.where(np.isnan(x), MAX_BIN, np.minimum(np.searchsorted(c, x, side="right"), c.size - 1))
        np.testing.assert_array_equal(bins[:, f], want)
    present = ~np.isnan(values[:, 0])
    assert int(bins[present, 0].max()) == MAX_BIN - 1  # the highest bin is used, and is not "missing"


def test_check_max_bin_accepts_the_bound_and_integral_numbers_only():
    assert check_max_bin(2) == 2 and check_max_bin(MAX_BIN) == MAX_BIN
    assert check_max_bin(np.int64(64)) == 64 and check_max_bin(64.0) == 64
    for bad in (1, MAX_BIN + 1, 2.5, "64", True, float("nan"), None):
        with pytest.raises(dg.ParameterError, match=f"max_bin must be an integer >= 2 and <= {MAX_BIN}"):
            check_max_bin(bad)


def test_a_dmatrix_max_bin_above_65535_is_refused_instead_of_training_wrong_bins():
    with pytest.raises(dg.ParameterError, match="max_bin"):
        dg.train({}, dg.DMatrix(X, Y, max_bin=70_000), 2)
    dm = dg.DMatrix(X, Y, max_bin=MAX_BIN)
    with pytest.raises(dg.ParameterError, match="max_bin"):
        dm.max_bin = MAX_BIN + 1  # set later, read by train in place of the parameter
    assert dm.max_bin == MAX_BIN


def test_a_max_bin_one_above_the_bound_is_refused_alike_at_every_local_entry_point(tmp_path):
    bad = MAX_BIN + 1
    ref = dg.QuantileDMatrix(X, Y, max_bin=16)
    answers = {
        "train": _refusal(lambda: dg.train({"max_bin": bad}, dg.DMatrix(X, Y), 2)),
        "train, text": _refusal(lambda: dg.train({"max_bin": str(bad)}, dg.DMatrix(X, Y), 2)),
        "TrainParams": _refusal(lambda: parse_params(TrainParams(max_bin=bad))),
        "DMatrix": _refusal(lambda: dg.DMatrix(X, Y, max_bin=bad)),
        "QuantileDMatrix": _refusal(lambda: dg.QuantileDMatrix(X, Y, max_bin=bad)),
        "QuantileDMatrix with ref": _refusal(lambda: dg.QuantileDMatrix(X, Y, max_bin=bad, ref=ref)),
        "DGBRegressor.fit": _refusal(lambda: DGBRegressor(n_estimators=2, max_bin=bad).fit(X, Y)),
    }
    expected = (dg.ParameterError, str(answers["DMatrix"][1]))
    assert str(bad) in expected[1]
    for where, answer in answers.items():
        assert answer == expected, where
    assert _cli_error(tmp_path, {"max_bin": bad}) == expected[1]


def test_a_max_bin_one_above_the_bound_is_refused_alike_through_dask(client):
    import dgboost.dask as dxgb

    bad = MAX_BIN + 1
    expected = _refusal(lambda: dg.DMatrix(X, Y, max_bin=bad))
    dX, dy = _dask_data()
    dtrain = dxgb.DaskDMatrix(client, dX, dy)
    answers = {
        "DaskDMatrix": _refusal(lambda: dxgb.DaskDMatrix(client, dX, dy, max_bin=bad)),
        "DaskQuantileDMatrix": _refusal(lambda: dxgb.DaskQuantileDMatrix(client, dX, dy, max_bin=bad)),
        "DaskQuantileDMatrix with ref": _refusal(
            lambda: dxgb.DaskQuantileDMatrix(client, dX, dy, max_bin=bad, ref=dtrain)
        ),
        "dgboost.dask.train": _refusal(lambda: dxgb.train(client, {"max_bin": bad}, dtrain, 2)),
        "DaskDGBRegressor.fit": _refusal(lambda: dxgb.DaskDGBRegressor(n_estimators=2, max_bin=bad).fit(dX, dy)),
    }
    for where, answer in answers.items():
        assert answer == expected, where


def test_a_dask_quantile_dmatrix_takes_the_max_bin_of_its_ref_and_refuses_another(client):
    import dgboost.dask as dxgb

    dX, dy = _dask_data()
    ref = dxgb.DaskQuantileDMatrix(client, dX, dy, max_bin=32)
    assert dxgb.DaskQuantileDMatrix(client, dX, dy, ref=ref).max_bin == 32
    with pytest.raises(dg.DGBoostValueError, match="differs from the max_bin of ref"):
        dxgb.DaskQuantileDMatrix(client, dX, dy, max_bin=64, ref=ref)


# ----------------------------------------------------------------------------- aliases
_CANONICAL_VALUES = {"eta": 0.2, "lambda": 2.0, "alpha": 0.5, "gamma": 0.1, "seed": 7, "nthread": 1, "max_leaves": 8}


@pytest.mark.parametrize("alias", sorted(ALIASES))
def test_every_alias_parses_to_its_canonical_parameter(alias):
    canonical = ALIASES[alias]
    value = _CANONICAL_VALUES[canonical]
    assert parse_params({alias: value}) == parse_params({canonical: value})


def test_lambda_is_a_number_under_every_spelling_as_the_other_real_parameters():
    assert parse_params({"lambda": "2"}) == parse_params({"reg_lambda": 2}) == parse_params({"lambda_l2": 2.0})
    assert isinstance(parse_params({"lambda": 2}).reg_lambda, float)
    with pytest.raises(dg.ParameterError, match="'lambda' must be a number"):
        parse_params({"lambda": "two"})


def test_an_alias_and_its_canonical_name_together_are_refused_at_every_entry_point(tmp_path):
    with pytest.raises(dg.ParameterError, match="given twice"):
        dg.train({"learning_rate": 0.1, "eta": 0.2}, dg.DMatrix(X, Y), 2)
    with pytest.raises(dg.ParameterError, match="given twice"):
        DGBRegressor(n_estimators=2, learning_rate=0.1, eta=0.2).fit(X, Y)
    with pytest.raises(dg.ParameterError, match="given twice"):
        DGBRegressor(n_estimators=2, reg_lambda=1.0, lambda_l2=2.0).fit(X, Y)
    assert "given twice" in _cli_error(tmp_path, {"learning_rate": 0.1, "eta": 0.2})


def test_aliases_train_the_model_of_the_canonical_names_at_every_local_entry_point(tmp_path):
    canonical = {"eta": 0.2, "lambda": 2.0, "alpha": 0.5, "gamma": 0.1, "seed": 7}
    aliased = {"learning_rate": 0.2, "lambda_l2": 2.0, "reg_alpha": 0.5, "min_split_loss": 0.1, "random_state": 7}
    reference = dg.train(canonical, dg.DMatrix(X, Y), 4)
    assert bytes(dg.train(aliased, dg.DMatrix(X, Y), 4).save_raw()) == bytes(reference.save_raw())
    want = reference.predict(dg.DMatrix(X))
    model = DGBRegressor(
        n_estimators=4, learning_rate=0.2, reg_alpha=0.5, random_state=7, lambda_l2=2.0, min_split_loss=0.1
    ).fit(X, Y)
    np.testing.assert_array_equal(model.predict(X), want)
    assert model.get_xgb_params()["eta"] == 0.2 and model.get_xgb_params()["lambda_l2"] == 2.0


def test_aliases_in_a_cli_config_train_the_model_of_the_canonical_names(tmp_path):
    import pandas as pd

    frame = pd.DataFrame(X, columns=[f"x{i}" for i in range(X.shape[1])])
    frame["target"] = Y
    frame.to_csv(tmp_path / "train.csv", index=False)
    written = []
    for name, params in (
        ("canonical", {"eta": 0.2, "lambda": 2.0}),
        ("aliased", {"learning_rate": 0.2, "reg_lambda": 2.0}),
    ):
        config = tmp_path / f"{name}.json"
        config.write_text(
            json.dumps(
                {
                    "data": "train.csv",
                    "label": "target",
                    "params": params,
                    "num_boost_round": 3,
                    "output": f"{name}.json",
                }
            )
        )
        result = CliRunner().invoke(cli_main, ["train", "--config", str(config), "--quiet"])
        assert result.exit_code == 0, result.output
        written.append((tmp_path / f"{name}.json").read_bytes())
    assert written[0] == written[1]


def test_aliases_through_dask_train_the_model_of_the_canonical_names(client):
    import dgboost.dask as dxgb

    dX, dy = _dask_data()
    dtrain = dxgb.DaskDMatrix(client, dX, dy)
    a = dxgb.train(client, {"eta": 0.2, "lambda": 2.0}, dtrain, 3, verbose_eval=False)["booster"]
    b = dxgb.train(client, {"learning_rate": 0.2, "lambda_l2": 2.0}, dtrain, 3, verbose_eval=False)["booster"]
    assert bytes(a.save_raw()) == bytes(b.save_raw())


# ----------------------------------------------------------------------------- parsed once
def _custom_objective(preds, dtrain):  # module level: a TrainParams holding it pickles
    return preds - dtrain.get_label(), np.ones_like(preds)


def test_parse_params_hands_back_a_validated_trainparams_without_checking_it_again(monkeypatch):
    p = parse_params({"max_depth": 3, "learning_rate": 0.1})
    calls = []
    original = TrainParams.validate

    def counted(self):
        calls.append(1)
        return original(self)

    monkeypatch.setattr(TrainParams, "validate", counted)
    assert parse_params(p) is p and calls == []
    p.max_depth = 4  # a changed field is checked again
    assert parse_params(p) is p and len(calls) == 1
    p.max_depth = -1
    with pytest.raises(dg.ParameterError, match="max_depth"):
        parse_params(p)


def test_trainparams_pickle_with_their_validation_and_a_module_level_objective():
    p = parse_params(
        {"objective": _custom_objective, "max_bin": 64, "eval_metric": ["rmse"], "monotone_constraints": [1, 0, -1, 0]}
    )
    q = pickle.loads(pickle.dumps(p))
    assert q == p and q.validated and q.objective is _custom_objective
    assert parse_params(q) is q


def test_a_bad_parameter_through_dask_train_raises_once_on_the_client(client, monkeypatch):
    import dgboost.dask as dxgb

    dX, dy = _dask_data()
    dtrain = dxgb.DaskDMatrix(client, dX, dy)
    calls = []
    original = TrainParams.validate

    def counted(self):
        calls.append(1)  # the worker runs in this process: its validations count too
        return original(self)

    monkeypatch.setattr(TrainParams, "validate", counted)
    with pytest.raises(dg.ParameterError) as info:
        dxgb.train(client, {"max_depth": -1}, dtrain, 2)
    assert "partition" not in str(info.value) and "max_depth" in str(info.value)
    assert len(calls) == 1


def test_each_entry_point_validates_the_parameters_once(client, monkeypatch, tmp_path):
    import pandas as pd

    import dgboost.dask as dxgb

    dX, dy = _dask_data()
    dtrain = dxgb.DaskDMatrix(client, dX, dy)
    frame = pd.DataFrame(X, columns=[f"x{i}" for i in range(X.shape[1])])
    frame["target"] = Y
    frame.to_csv(tmp_path / "train.csv", index=False)
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "data": "train.csv",
                "label": "target",
                "params": {"max_depth": 3},
                "num_boost_round": 2,
                "output": "model.json",
            }
        )
    )
    calls = []
    original = TrainParams.validate

    def counted(self):
        calls.append(1)  # the Dask worker runs in this process: its validations count too
        return original(self)

    monkeypatch.setattr(TrainParams, "validate", counted)
    runs = {
        "train": lambda: dg.train({"max_depth": 3}, dg.DMatrix(X, Y), 2),
        "DGBRegressor.fit": lambda: DGBRegressor(n_estimators=2, max_depth=3).fit(X, Y),
        "dgboost.dask.train": lambda: dxgb.train(client, {"max_depth": 3}, dtrain, 2, verbose_eval=False),
        "DaskDGBRegressor.fit": lambda: dxgb.DaskDGBRegressor(n_estimators=2, max_depth=3).fit(dX, dy),
        "dgboost train --config": lambda: CliRunner().invoke(cli_main, ["train", "--config", str(config), "--quiet"]),
    }
    for where, run in runs.items():
        calls.clear()
        result = run()
        assert getattr(result, "exit_code", 0) == 0, where
        assert len(calls) == 1, where


def test_the_partition_checks_take_parsed_parameters_not_a_dict(client):
    import dgboost.dask as dxgb
    from dgboost.dask._preflight import check_partitions

    dX, dy = _dask_data()
    dtrain = dxgb.DaskDMatrix(client, dX, dy)
    with pytest.raises(dg.DGBoostTypeError, match="TrainParams"):
        check_partitions(client, dtrain, {"objective": "reg:squarederror"})
    infos = check_partitions(client, dtrain, parse_params({"objective": "reg:squarederror"}))
    assert [i["rows"] for i in infos] == [150, 150]
    with pytest.raises(dg.DGBoostValueError, match="partition 0: .*label"):
        bad = dxgb.DaskDMatrix(client, dX, dy - 10.0)  # negative counts for Poisson
        check_partitions(client, bad, parse_params({"objective": "count:poisson"}))


def test_the_max_bin_of_a_dask_dmatrix_reaches_the_ranks_and_trains_the_local_model(client):
    import dgboost.dask as dxgb

    dX, dy = _dask_data()
    local = dg.train({}, dg.DMatrix(X, Y, max_bin=8), 3)
    for matrix in (dxgb.DaskDMatrix, dxgb.DaskQuantileDMatrix):
        booster = dxgb.train(client, {}, matrix(client, dX, dy, max_bin=8), 3, verbose_eval=False)["booster"]
        assert bytes(booster.save_raw()) == bytes(local.save_raw()), matrix.__name__
    assert bytes(dg.train({}, dg.DMatrix(X, Y), 3).save_raw()) != bytes(local.save_raw())
