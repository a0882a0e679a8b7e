"""``dgboost demo`` on a Dask cluster: synthetic data over the workers, trained, evaluated, explained."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np

from ..dask._waits import cluster_workers
from ..errors import DGBoostError, DGBoostValueError
from ._format import rate, seconds
from .cluster_progress import RoundPrinter, say
from .cluster_session import describe_cluster

if TYPE_CHECKING:  # annotations only: distributed is imported where a cluster is used
    from distributed import Client

__all__ = ["cluster_demo"]


# seconds the demo waits for the test rows' SHAP values (a stuck worker ends it with an error)
_SHAP_WAIT = 3600.0


def _scatter_rows(client, array: np.ndarray, workers: list[str]):
    """``array`` as a dask array of one contiguous block per worker, each block on its worker."""
    import dask.array as da

    bounds = np.linspace(0, len(array), len(workers) + 1).round().astype(int)
    blocks = []
    for worker, lo, hi in zip(workers, bounds[:-1], bounds[1:]):
        future = client.scatter(array[lo:hi], workers=[worker], hash=False)
        blocks.append(da.from_delayed(future, shape=(hi - lo,) + array.shape[1:], dtype=array.dtype))
    return da.concatenate(blocks, axis=0)


def cluster_demo(
    client: Client,
    rows: int,
    rounds: int,
    device: str,
    quiet: bool = False,
    seed: int = 0,
    test_fraction: float = 0.2,
    missing_rate: float = 0.1,
    config: dict | None = None,
) -> list[tuple[str, str]]:
    """The cluster demo: synthetic binary data over the workers, trained, evaluated and explained.

    The data is the single-process demo's (:func:`dgboost.datasets.make_synthetic`, the last
    ``test_fraction`` of the rows held out), made on the client and scattered to the workers in
    one contiguous block per worker. Training: :func:`dgboost.dask.train` with the test rows as
    evaluation set (a line every ~10% of the rounds). SHAP: :func:`dgboost.dask.shap_values` of
    the test rows, reduced on the workers to the mean |SHAP value| of each feature (only those
    numbers come back).

    ``config`` (the cluster's config, optional) only names the kind of workers in the summary.

    Returns
    -------
    list of (str, str)
        The rows of the summary table.
    """
    from .. import dask as dxgb
    from ..dask._waits import bounded_compute
    from ..datasets import make_synthetic

    X, y, _ = make_synthetic(rows, task="binary", missing_rate=missing_rate, seed=seed)
    n_test = max(1, int(round(rows * test_fraction)))
    if rows - n_test < 1:
        raise DGBoostValueError(f"--rows {rows} is too small for a train/test split")
    n_train = rows - n_test
    workers = sorted(cluster_workers(client))
    if not workers:
        raise DGBoostError("the cluster has no workers")
    started = time.perf_counter()
    Xtr, ytr = _scatter_rows(client, X[:n_train], workers), _scatter_rows(client, y[:n_train], workers)
    Xte, yte = _scatter_rows(client, X[n_train:], workers), _scatter_rows(client, y[n_train:], workers)
    dtrain = dxgb.DaskDMatrix(client, Xtr, ytr)
    dtest = dxgb.DaskDMatrix(client, Xte, yte)
    load_time = time.perf_counter() - started
    summary = [
        ("rows (train / test)", f"{n_train:,} / {n_test:,}"),
        ("features", str(X.shape[1])),
        ("missing values", f"{missing_rate:.0%}"),
        ("cluster", describe_cluster(client, config, dashboard=False)),
        ("data to workers", seconds(load_time)),
    ]

    params = {
        "objective": "binary:logistic",
        "eval_metric": ["logloss", "auc"],
        "max_depth": 6,
        "eta": 0.1,
        "device": device,
        "seed": seed,
    }
    every = max(1, rounds // 10)
    say(
        quiet,
        f"training {rounds} rounds on {n_train:,} rows x {X.shape[1]} features over {len(workers)} "
        f"workers (device {device})",
    )
    started = time.perf_counter()
    with RoundPrinter(client, rounds, every, quiet) as printer:
        result = dxgb.train(
            client, params, dtrain, rounds, evals=[(dtest, "test")], verbose_eval=False, callbacks=[printer.callback()]
        )
        booster, history = result["booster"], result["history"]
        printer.finish(booster.num_boosted_rounds(), history)
    ended = time.perf_counter()
    train_time = ended - started
    done = booster.num_boosted_rounds()
    speed = f"{rate(n_train * done, train_time)} (rows x rounds / train time)"
    summary += [("rounds", str(done)), ("device", device), ("train time", seconds(train_time))]
    if printer.first_round_at is not None and done > 1:
        # the first round also pays for the job's start: the tracker, and each worker loading
        # dgboost's compiled kernels (once per worker process)
        first = printer.first_round_at - started
        summary.append(("  of which round 0", f"{seconds(first)} (job start: tracker, kernels loaded on the workers)"))
        speed += f"; {rate(n_train * (done - 1), ended - printer.first_round_at)} after round 0"
    summary.append(("train rows/s", speed))
    test = history.get("test", {})
    if "auc" in test:
        summary.append(("test AUC", f"{test['auc'][-1]:.4f}"))
    if "logloss" in test:
        summary.append(("test logloss", f"{test['logloss'][-1]:.4f}"))

    say(quiet, f"explaining the {n_test:,} test rows on the workers (exact TreeSHAP)")
    started = time.perf_counter()
    values = dxgb.shap_values(client, booster, Xte, device=device)
    mean_abs = np.asarray(bounded_compute(client, abs(values).mean(axis=0), "the test rows' SHAP values", _SHAP_WAIT))
    shap_time = time.perf_counter() - started
    top = np.argsort(-mean_abs)[:3]
    summary += [
        ("SHAP time", seconds(shap_time)),
        ("SHAP rows/s", f"{rate(n_test, shap_time)}"),
        ("top features (mean |SHAP|)", ", ".join(f"f{i} {mean_abs[i]:.3f}" for i in top)),
    ]
    return summary
