"""A communicator that times the collectives of another one (where a rank's time goes).

For every collective the wrapper records, per operation, the calls, the bytes sent and two
host-side durations:

* ``producer_s``: waiting for the work that makes the input (a device array's stream is
  synchronised first, so GPU kernels still running are not counted as communication);
* ``collective_s``: the collective itself, from the call to its result.

On a GPU rank the wrapper adds no synchronisation of its own that the NCCL communicator
does not already do (it waits for the current stream before every collective too). A
communicator whose ``stream_ordered`` attribute is true queues device collectives without
waiting; the wrapper then adds no wait either, and ``collective_s`` is the time to queue them
(their cost shows in the rounds' time instead).
"""

from __future__ import annotations

import time
from typing import Any

from .._array import is_device_array

__all__ = ["TimedComm"]


def _nbytes(obj: Any) -> int:
    return int(getattr(obj, "nbytes", 0) or 0)


def _wait_for_producer(array: Any) -> None:
    if is_device_array(array):
        import cupy

        cupy.cuda.get_current_stream().synchronize()


class TimedComm:
    """Wrap ``comm``; :attr:`stats` holds ``{op: {"calls", "bytes", "producer_s", "collective_s"}}``.

    Parameters
    ----------
    comm : Communicator
        The communicator whose collectives are timed (its results are returned unchanged).
    """

    def __init__(self, comm):
        self._comm = comm
        self._queues = bool(getattr(comm, "stream_ordered", False))
        self.stats: dict[str, dict[str, float]] = {}
        if callable(getattr(comm, "alltoall", None)):
            # only where the wrapped one has it: callers look for the method to choose a path
            self.alltoall = self._alltoall

    @property
    def rank(self) -> int:
        return self._comm.rank

    @property
    def world_size(self) -> int:
        return self._comm.world_size

    @property
    def gathers_on_device(self) -> bool:
        """As the wrapped communicator (a timed job takes the same paths as an untimed one)."""
        return bool(getattr(self._comm, "gathers_on_device", False))

    def _timed(self, op: str, fn, payload: Any, nbytes: int):
        t0 = time.perf_counter()
        if not self._queues:
            _wait_for_producer(payload)
        t1 = time.perf_counter()
        out = fn()
        t2 = time.perf_counter()
        s = self.stats.setdefault(op, {"calls": 0, "bytes": 0, "producer_s": 0.0, "collective_s": 0.0})
        s["calls"] += 1
        s["bytes"] += nbytes
        s["producer_s"] += t1 - t0
        s["collective_s"] += t2 - t1
        return out

    def allreduce_sum(self, array):
        return self._timed("allreduce_sum", lambda: self._comm.allreduce_sum(array), array, _nbytes(array))

    def allreduce_max(self, array):
        return self._timed("allreduce_max", lambda: self._comm.allreduce_max(array), array, _nbytes(array))

    def allgather(self, array):
        return self._timed("allgather", lambda: self._comm.allgather(array), array, _nbytes(array))

    def _alltoall(self, parts):
        """The wrapped ``alltoall``; its bytes are those of the parts sent to other ranks."""
        sent = sum(_nbytes(p) for k, p in enumerate(parts) if k != self.rank)
        return self._timed("alltoall", lambda: self._comm.alltoall(parts), None, sent)

    def broadcast(self, obj, root: int = 0):
        return self._timed("broadcast", lambda: self._comm.broadcast(obj, root), None, _nbytes(obj))
