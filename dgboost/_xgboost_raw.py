"""An ``xgboost.Booster``'s UBJSON model bytes, copied out of XGBoost's buffer by host threads.

``Booster.save_raw("ubj")`` asks XGBoost's C API (``XGBoosterSaveModelToBuffer``) for the
model and copies XGBoost's buffer into a new ``bytearray``, which CPython zero-fills first:
two passes of one thread over fresh memory, 11-50 ms of an H200 host's time for a depth-16
model's 106 MB (issue 32), on the critical path of a first explainer. Here the same C
function is called and its buffer copied by host threads into an array that nothing
zero-fills; the bytes are the same (tested against ``save_raw``). Where the C API is not
reachable as expected, ``save_raw`` is used.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

__all__ = ["booster_ubjson"]

_CONFIG = b'{"format": "ubj"}'  # what save_raw(raw_format="ubj") passes
_PARALLEL_BYTES = 1 << 22  # smaller models are copied by one thread


def _save_to_buffer(booster: Any):
    """XGBoost's ``XGBoosterSaveModelToBuffer`` as ``save_raw`` calls it, or None where the
    library or the call is not as expected. The function is XGBoost's public C API; the
    loaded library is the one the ``xgboost`` package holds (``xgboost.core._LIB``)."""
    try:
        from xgboost import core

        fn = core._LIB.XGBoosterSaveModelToBuffer
        handle = booster.handle
    except (ImportError, AttributeError):
        return None
    length = ctypes.c_uint64()
    data = ctypes.POINTER(ctypes.c_char)()
    if fn(handle, ctypes.c_char_p(_CONFIG), ctypes.byref(length), ctypes.byref(data)) != 0:
        return None  # save_raw then raises XGBoost's error
    return data, int(length.value)


def booster_ubjson(booster: Any) -> memoryview | bytearray:
    """``booster.save_raw(raw_format="ubj")``'s bytes.

    Parameters
    ----------
    booster : xgboost.Booster

    Returns
    -------
    memoryview or bytearray
        A read-only memoryview (uint8, contiguous) of a new array holding the bytes, or
        ``save_raw``'s bytearray where the C API was not used.
    """
    from ._threads import even_runs, host_threads, run_over_runs

    found = _save_to_buffer(booster)
    if found is None:
        return booster.save_raw(raw_format="ubj")
    data, n = found
    out = np.empty(n, dtype=np.uint8)
    if n:
        # XGBoost's buffer holds the bytes until its next call on this booster from this
        # thread: they are copied before anything else runs here
        src = np.ctypeslib.as_array(ctypes.cast(data, ctypes.POINTER(ctypes.c_uint8)), shape=(n,))
        threads = host_threads() if n >= _PARALLEL_BYTES else 1
        run_over_runs(lambda a, b: np.copyto(out[a:b], src[a:b]), even_runs(n, threads), threads)
    return memoryview(out).toreadonly()
