"""Every wait of the client on the workers is bounded: a worker that never answers ends the
call with an error naming what was waited for, within the bound (issue 33: a retry's partition
check once waited forever on ``fut.result()`` while a cancelled rank still held the worker)."""

from __future__ import annotations

import inspect
import time

import dask.array as da
import numpy as np
import pytest
from _blocking import raised_within, worker_that_never_answers

import dgboost as dg
import dgboost.dask as dxgb
from dgboost.dask._preflight import DEFAULT_TIMEOUT, check_partitions
from dgboost.params import parse_params

pytestmark = pytest.mark.dask

CHUNKS = (100, 50, 150)
PARAMS = parse_params({"objective": "binary:logistic", "max_depth": 2})


def _dtrain(client):
    rng = np.random.default_rng(0)
    n = sum(CHUNKS)
    x = rng.normal(size=(n, 3)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.float32)
    dtrain = dxgb.DaskDMatrix(client, da.from_array(x, chunks=(CHUNKS, 3)), da.from_array(y, chunks=(CHUNKS,)))
    from distributed import wait

    wait(dtrain.all_futures(), timeout=30)  # the partitions are held before the worker is blocked
    return dtrain


def test_a_partition_check_on_a_worker_that_never_answers_fails_within_its_timeout_naming_the_partitions(dask_client):
    client = dask_client(1)
    dtrain = _dtrain(client)
    with worker_that_never_answers(client):
        exc = raised_within(1.5 + 2.0, lambda: check_partitions(client, dtrain, PARAMS, "retry data", timeout=1.5))
    assert isinstance(exc, dg.CommunicationError)
    assert "retry data: partition(s) 0, 1, 2 could not be checked within 1.5 s" in str(exc)


def test_the_results_of_the_checks_are_fetched_within_the_same_bound(dask_client, monkeypatch):
    """Even when the wait for the checks has returned, fetching their results (``.result()``)
    does not wait longer than what is left of the timeout."""
    import distributed

    client = dask_client(1)
    dtrain = _dtrain(client)
    monkeypatch.setattr(distributed, "wait", lambda futures, timeout=None, **kw: None)  # "all done"
    with worker_that_never_answers(client):
        exc = raised_within(1.5 + 2.0, lambda: check_partitions(client, dtrain, PARAMS, "training data", timeout=1.5))
    assert isinstance(exc, dg.CommunicationError)
    assert "training data: partition(s) 0, 1, 2 could not be checked within 1.5 s" in str(exc)


def test_train_on_a_worker_that_never_answers_ends_with_the_error_within_its_timeout(dask_client):
    client = dask_client(1)
    dtrain = _dtrain(client)
    with worker_that_never_answers(client):
        start = time.monotonic()
        with pytest.raises(dg.CommunicationError, match=r"training data: partition\(s\) 0, 1, 2 could not be checked"):
            dxgb.train(client, {"max_depth": 2}, dtrain, 2, timeout=1, verbose_eval=False)
        assert time.monotonic() - start < 1 + 3.0


def test_partition_checks_are_bounded_by_default():
    """Callers that pass no timeout (predictions) wait at most the documented 300 s."""
    assert inspect.signature(check_partitions).parameters["timeout"].default == DEFAULT_TIMEOUT == 300.0


# ----------------------------------------------------------------------------- client calls
def _block_event_loop(client, seconds: float) -> None:
    """Block the (only) worker's event loop for ``seconds``: a plain function given to
    ``client.run`` runs in the loop itself, so the worker answers nothing meanwhile (it stands for
    a worker that is stuck or cut off). Sent from a thread: that ``client.run`` returns only after."""
    import threading

    threading.Thread(target=client.run, args=(time.sleep, seconds), daemon=True).start()
    time.sleep(0.3)  # the message is on its way before the call under test starts


def test_client_run_on_a_worker_that_does_not_answer_fails_within_its_bound_naming_what(dask_client):
    from dgboost.dask._waits import bounded_call

    client = dask_client(1)
    _block_event_loop(client, 8)
    call = lambda: bounded_call(client.run, time.time, what="the workers' clocks", timeout=1.5)  # noqa: E731
    exc = raised_within(1.5 + 2.0, call)
    assert isinstance(exc, dg.CommunicationError)
    assert str(exc).startswith("the workers' clocks: no answer within 1.5 s")
    client.run(time.time)  # the worker answers again once its loop is free


def test_train_waiting_for_earlier_ranks_on_a_worker_that_does_not_answer_ends_within_its_bounds(dask_client):
    """``train`` first asks the workers (``client.run``) for ranks of earlier jobs, then checks the
    partitions: with the only worker's loop blocked, both are bounded by the job's ``timeout``
    (at most 2 x timeout for the first, timeout for the second) instead of waiting for the worker."""
    client = dask_client(1)
    dtrain = _dtrain(client)
    _block_event_loop(client, 12)
    exc = raised_within(
        3 * 1.0 + 4.0, lambda: dxgb.train(client, {"max_depth": 2}, dtrain, 2, timeout=1, verbose_eval=False)
    )
    assert isinstance(exc, dg.CommunicationError)
    assert "training data: partition(s) 0, 1, 2 could not be checked within 1 s" in str(exc)
    client.run(time.time)


def test_the_tracker_on_a_scheduler_that_does_not_answer_fails_within_the_jobs_timeout(dask_client, monkeypatch):
    """The scheduler runs in this process (LocalCluster): its tracker function is replaced by one
    that never answers (a coroutine the scheduler awaits)."""
    import asyncio

    from dgboost.dask import _communicator

    async def never_answers(world_size, timeout, job, dask_scheduler=None):
        await asyncio.sleep(30)

    client = dask_client(1)
    monkeypatch.setattr(_communicator, "_tracker_on_scheduler", never_answers)
    exc = raised_within(1.5 + 2.0, lambda: _communicator.make_spec(client, 2, "host", 1.5))
    assert isinstance(exc, dg.CommunicationError)
    assert "the collective's tracker on the scheduler (client.run_on_scheduler): no answer within 1.5 s" in str(exc)


def test_the_classifiers_label_pass_on_a_worker_that_never_answers_fails_within_the_default_wait(
    dask_client, monkeypatch
):
    from dgboost.dask import _waits

    client = dask_client(1)
    rng = np.random.default_rng(1)
    x = da.from_array(rng.normal(size=(300, 3)), chunks=(100, 3))
    y = da.from_array((rng.normal(size=300) > 0).astype(np.float64), chunks=100)
    monkeypatch.setattr(_waits, "DEFAULT_WAIT", 1.5)
    model = dxgb.DaskDGBClassifier(n_estimators=2)
    model.client = client
    with worker_that_never_answers(client):
        exc = raised_within(1.5 + 2.0, lambda: model.fit(x, y))
    assert isinstance(exc, dg.CommunicationError)
    assert str(exc).startswith("the classes of y (unique labels): no answer within 1.5 s")
