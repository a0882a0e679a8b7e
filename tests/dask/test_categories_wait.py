"""The wait for the partitions' categories (a Dask column of unknown categories) is bounded and,
past its bound, ends with a CommunicationError that names what was waited for (issue 33), as the
other waits of the client do -- not a bare TimeoutError, with the tasks left queued."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid

import numpy as np
import pandas as pd
import pytest

import dgboost as dg
import dgboost.dask as dxgb
from dgboost.dask import _matrix

pytestmark = pytest.mark.dask


def _wait_for_event(name: str) -> None:
    from distributed import Event

    Event(name).wait()  # stands for a task that does not end


@contextlib.contextmanager
def _worker_that_never_answers(client):
    """The only worker thread taken by a task blocked on a ``distributed.Event`` until the block ends."""
    from distributed import Event

    name = f"never-{uuid.uuid4().hex}"
    blocker = client.submit(_wait_for_event, name, pure=False)
    while not any(client.processing().values()):
        time.sleep(0.05)
    try:
        yield
    finally:
        Event(name, client=client).set()
        blocker.result(timeout=30)


def _raised_within(seconds: float, call) -> BaseException:
    """What ``call()`` raised, run in a thread: still waiting after ``seconds`` fails the test."""
    out: list = []

    def run():
        try:
            call()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            out.append(exc)
        else:
            out.append(None)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still waiting after {seconds} s"
    assert out[0] is not None, "returned instead of raising"
    return out[0]


def test_categories_of_partitions_on_a_worker_that_never_answers_fail_naming_the_wait(dask_client, monkeypatch):
    import dask.dataframe as dd

    client = dask_client(1)
    frame = pd.DataFrame({"k": list("abcab") * 20, "x": np.arange(100.0)})
    data = dd.from_pandas(frame, npartitions=2).astype({"k": "category"})  # unknown categories
    assert not data["k"].cat.known
    label = dd.from_pandas(pd.Series(np.arange(100.0)), npartitions=2)
    monkeypatch.setattr(_matrix, "_CATEGORIES_TIMEOUT", 1.5)
    with _worker_that_never_answers(client):
        exc = _raised_within(1.5 + 10.0, lambda: dxgb.DaskDMatrix(client, data, label))
    assert isinstance(exc, dg.CommunicationError), repr(exc)
    assert "categories of column(s) 'k'" in str(exc)
    assert "1.5 s" in str(exc)
