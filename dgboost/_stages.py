"""Host-clock times of training's set-up stages, recorded only when asked for.

``dgboost.dask.train(profile=True)`` runs each rank's training inside :func:`recording`; the
training loop wraps its set-up stages (base margins, cuts, binning, ...) in :func:`stage`,
which does nothing otherwise. A recorded stage waits for the device work it queued
(``sync``), so its time is its own; that wait is the only cost the recording adds.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from typing import Callable, Iterator

__all__ = ["recording", "stage"]

_RECORD: contextvars.ContextVar[dict | None] = contextvars.ContextVar("dgboost_stages", default=None)


@contextlib.contextmanager
def recording() -> Iterator[dict]:
    """Record the stages run inside the ``with`` block into the dict it yields
    (``{stage: seconds}``, in the order they first ran)."""
    token = _RECORD.set({})
    try:
        yield _RECORD.get()
    finally:
        _RECORD.reset(token)


@contextlib.contextmanager
def stage(name: str, sync: Callable[[], None] | None = None) -> Iterator[None]:
    """Time the ``with`` block as ``name`` when recording; ``sync`` waits for its device work."""
    record = _RECORD.get()
    if record is None:
        yield
        return
    start = time.perf_counter()
    try:
        yield
    finally:
        if sync is not None:
            sync()
        record[name] = record.get(name, 0.0) + time.perf_counter() - start
