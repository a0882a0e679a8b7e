"""Issue 28's acceptance: one script written for XGBoost 3.4.1 runs unchanged with dgboost.

:func:`xgboost_script` is the script, a function of the module it is given as ``xgb``: training
with callbacks (``EvaluationMonitor``, ``EarlyStopping(save_best=True)``) on a
``QuantileDMatrix`` with ``max_bin`` and a validation set made with ``ref``, attributes, saving
UBJSON, ``config_context``, the scikit-learn estimators, and on a Dask client (a
``LocalCluster`` with ``processes=False`` and 2 workers) ``DaskQuantileDMatrix(client, ...,
max_bin=, ref=)``, ``dask.train`` / ``dask.predict`` and the Dask estimators. It runs once with
``xgboost`` and once with ``dgboost``; the files dgboost writes load in XGBoost with the same
predictions (1e-6, as ``test_drop_in.py``), and the two libraries' results agree in kind, shape
and quality (within a point of log-loss / accuracy, as ``test_drop_in.py``'s AUC check).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import numpy as np
import pandas as pd
import pytest
import xgboost  # declared test dependency: fail, never skip

import dgboost


def xgboost_script(xgb: ModuleType, workdir: str, client) -> dict:
    """The script, as a user writes it for XGBoost 3.4.1 (``xgb`` is the module used)."""
    import dask.array as da
    import dask.dataframe as dd
    import pandas as pd

    dxgb = importlib.import_module(f"{xgb.__name__}.dask")  # ``from xgboost import dask as dxgb``

    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 6)).astype(np.float32)
    X[rng.random(X.shape) < 0.05] = np.nan
    signal = np.nan_to_num(X[:, 0]) + np.sin(np.nan_to_num(X[:, 1])) + 0.3 * rng.normal(size=3000)
    y = (signal > 0).astype(np.float32)
    names = [f"x{i}" for i in range(6)]
    params = {"objective": "binary:logistic", "max_depth": 4, "eta": 0.3, "eval_metric": "logloss", "max_bin": 64}

    # -- training with callbacks on binned data; the validation set uses the training cuts
    dtrain = xgb.QuantileDMatrix(X[:2000], label=y[:2000], max_bin=64, feature_names=names)
    dvalid = xgb.QuantileDMatrix(X[2000:], label=y[2000:], max_bin=64, ref=dtrain, feature_names=names)
    history: dict = {}
    with xgb.config_context(verbosity=0):
        quiet_verbosity = xgb.get_config()["verbosity"]
        bst = xgb.train(
            params,
            dtrain,
            num_boost_round=300,
            evals=[(dtrain, "train"), (dvalid, "valid")],
            evals_result=history,
            verbose_eval=False,
            callbacks=[
                xgb.callback.EvaluationMonitor(period=25),
                xgb.callback.EarlyStopping(rounds=5, save_best=True),
            ],
        )
    bst.set_attr(trained_by="script")
    attributes = bst.attributes()
    valid_pred = bst.predict(dvalid)
    model_path = os.path.join(workdir, "model.ubj")
    bst.save_model(model_path)
    reloaded = xgb.Booster(model_file=model_path)
    reloaded_pred = reloaded.predict(xgb.DMatrix(X[2000:], feature_names=names))

    # -- scikit-learn estimators
    clf = xgb.XGBClassifier(n_estimators=50, max_depth=3, early_stopping_rounds=5, eval_metric="logloss")
    clf.fit(X[:2000], y[:2000], eval_set=[(X[2000:], y[2000:])], verbose=False)
    clf_proba = clf.predict_proba(X[2000:])
    clf_path = os.path.join(workdir, "clf.ubj")
    clf.save_model(clf_path)
    reg = xgb.XGBRegressor(n_estimators=20, max_depth=3).fit(X[:2000], signal[:2000])
    reg_pred = reg.predict(X[2000:])

    # -- on a Dask cluster
    dX = da.from_array(X, chunks=(500, 6))
    dy = da.from_array(y, chunks=500)
    ddtrain = dxgb.DaskQuantileDMatrix(client, dX[:2000], dy[:2000], max_bin=64)
    ddvalid = dxgb.DaskQuantileDMatrix(client, dX[2000:], dy[2000:], max_bin=64, ref=ddtrain)
    output = dxgb.train(
        client,
        params,
        ddtrain,
        num_boost_round=30,
        evals=[(ddvalid, "valid")],
        callbacks=[xgb.callback.EarlyStopping(rounds=5, save_best=True)],
        verbose_eval=False,
    )
    dask_history = output["history"]
    dask_pred = dxgb.predict(client, output["booster"], dX[2000:]).compute()

    frame = dd.from_pandas(pd.DataFrame(X, columns=names), npartitions=4)
    labels = dd.from_pandas(pd.Series(y.astype(np.int64), name="y"), npartitions=4)
    dclf = dxgb.DaskXGBClassifier(n_estimators=20, max_depth=3)
    dclf.client = client
    dclf.fit(frame, labels)
    dclf_proba = dclf.predict_proba(frame).compute()
    dclf_pred = dclf.predict(frame).compute()
    dreg = dxgb.DaskXGBRegressor(n_estimators=20, max_depth=3)
    dreg.client = client
    dreg.fit(frame, dd.from_pandas(pd.Series(signal, name="s"), npartitions=4))
    dreg_pred = dreg.predict(frame).compute()
    return locals()


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster:
        with Client(cluster) as c:
            yield c


@pytest.fixture(scope="module")
def runs(client, tmp_path_factory):
    out = {}
    for module in (xgboost, dgboost):
        workdir = tmp_path_factory.mktemp(module.__name__)
        out[module.__name__] = xgboost_script(module, str(workdir), client)
    return out["dgboost"], out["xgboost"]


def _logloss(y, p) -> float:
    p = np.clip(np.asarray(p, np.float64), 1e-7, 1 - 1e-7)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def test_the_script_trains_with_callbacks_and_early_stopping_as_with_xgboost(runs):
    ours, theirs = runs
    assert ours["quiet_verbosity"] == theirs["quiet_verbosity"] == 0
    assert set(ours["history"]) == set(theirs["history"]) == {"train", "valid"}
    for run in (ours, theirs):
        bst = run["bst"]
        # save_best: the model ends at the best round
        assert bst.num_boosted_rounds() == bst.best_iteration + 1 < 300
        assert run["attributes"]["trained_by"] == "script"
    assert set(ours["attributes"]) == set(theirs["attributes"]) == {"best_iteration", "best_score", "trained_by"}
    y = ours["y"][2000:]
    assert abs(_logloss(y, ours["valid_pred"]) - _logloss(y, theirs["valid_pred"])) < 0.01


def test_the_ubj_files_dgboost_writes_load_in_xgboost_with_the_same_predictions(runs):
    ours, _ = runs
    X, names = ours["X"][2000:], ours["names"]
    for name in ("model.ubj", "clf.ubj"):  # UBJSON, not JSON text under a .ubj name
        with open(os.path.join(ours["workdir"], name), "rb") as fh:
            head = fh.read(2)
        assert head[:1] == b"{" and head[1:2] in (b"L", b"l", b"i", b"U", b"I")
    loaded = xgboost.Booster(model_file=os.path.join(ours["workdir"], "model.ubj"))
    np.testing.assert_allclose(
        loaded.predict(xgboost.DMatrix(X, feature_names=names)), ours["valid_pred"], rtol=0, atol=1e-6
    )
    np.testing.assert_allclose(ours["reloaded_pred"], ours["valid_pred"], rtol=0, atol=1e-6)
    clf = xgboost.XGBClassifier()
    clf.load_model(os.path.join(ours["workdir"], "clf.ubj"))
    np.testing.assert_allclose(clf.predict_proba(X), ours["clf_proba"], rtol=0, atol=1e-6)


def test_the_sklearn_estimators_give_results_of_xgboosts_kind_and_quality(runs):
    ours, theirs = runs
    y = ours["y"][2000:]
    assert ours["clf_proba"].shape == theirs["clf_proba"].shape == (1000, 2)
    assert abs(_logloss(y, ours["clf_proba"][:, 1]) - _logloss(y, theirs["clf_proba"][:, 1])) < 0.01
    assert ours["reg_pred"].shape == theirs["reg_pred"].shape == (1000,)
    assert ours["clf"].best_iteration >= 0 and theirs["clf"].best_iteration >= 0


def test_the_dask_part_gives_results_of_xgboosts_kind_and_quality(runs):
    ours, theirs = runs
    y = ours["y"]
    assert ours["ddvalid"].max_bin == 64
    assert set(ours["dask_history"]) == set(theirs["dask_history"]) == {"valid"}
    assert ours["dask_pred"].shape == theirs["dask_pred"].shape == (1000,)
    assert abs(_logloss(y[2000:], ours["dask_pred"]) - _logloss(y[2000:], theirs["dask_pred"])) < 0.01
    assert ours["dclf_proba"].shape == theirs["dclf_proba"].shape == (3000, 2)
    assert abs(_logloss(y, ours["dclf_proba"][:, 1]) - _logloss(y, theirs["dclf_proba"][:, 1])) < 0.01
    # the classes predicted: dgboost's Series carries the frame's index (XGBoost's is an array)
    accuracy = [np.mean(np.asarray(run["dclf_pred"]) == y) for run in (ours, theirs)]
    assert abs(accuracy[0] - accuracy[1]) < 0.01
    for name in ("dclf_pred", "dreg_pred"):
        assert isinstance(ours[name], pd.Series)
        pd.testing.assert_index_equal(ours[name].index, ours["frame"].index.compute())
    assert isinstance(theirs["dreg_pred"], pd.Series)


def test_the_dask_model_is_the_single_process_model_of_the_same_rows(runs):
    ours, _ = runs
    p = dict(ours["params"])
    single = dgboost.train(
        p,
        dgboost.QuantileDMatrix(ours["X"][:2000], ours["y"][:2000], max_bin=64),
        30,
        evals=[(dgboost.QuantileDMatrix(ours["X"][2000:], ours["y"][2000:], max_bin=64), "valid")],
        callbacks=[dgboost.callback.EarlyStopping(rounds=5, save_best=True)],
        verbose_eval=False,
    )
    np.testing.assert_array_equal(single.predict(dgboost.DMatrix(ours["X"][2000:])), ours["dask_pred"])
