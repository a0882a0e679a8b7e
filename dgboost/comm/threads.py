"""An in-process communicator: W threads act as W ranks.

Used by the tests to simulate W workers in one process (and by anyone who wants to
check that a partitioning does not change the model). Collectives meet at a barrier
and combine the ranks' contributions in rank order, so floating-point results are
also reproducible.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Sequence

import numpy as np

__all__ = ["ThreadGroup", "ThreadComm", "run_in_threads"]


class ThreadGroup:
    """Shared state of ``world_size`` thread ranks."""

    def __init__(self, world_size: int, timeout: float = 600.0):
        if world_size < 1:
            raise ValueError("world_size must be at least 1")
        self.world_size = world_size
        self.timeout = timeout
        self._barrier = threading.Barrier(world_size, timeout=timeout)
        self._slots: list[Any] = [None] * world_size

    def exchange(self, rank: int, value: Any) -> list:
        """Each rank contributes ``value``; every rank receives the list of all, in rank order."""
        self._slots[rank] = value
        self._barrier.wait()
        values = list(self._slots)
        self._barrier.wait()  # nobody overwrites a slot before everyone has read it
        return values

    def comm(self, rank: int) -> "ThreadComm":
        return ThreadComm(self, rank)


class ThreadComm:
    """Communicator of one thread rank of a :class:`ThreadGroup`."""

    def __init__(self, group: ThreadGroup, rank: int):
        self._group = group
        self._rank = rank

    @property
    def rank(self) -> int:
        return self._rank

    @property
    def world_size(self) -> int:
        return self._group.world_size

    def allreduce_sum(self, array):
        parts = self._group.exchange(self._rank, np.asarray(array))
        total = np.array(parts[0], copy=True)
        for part in parts[1:]:
            total = total + part
        return total

    def allreduce_max(self, array):
        parts = self._group.exchange(self._rank, np.asarray(array))
        return np.maximum.reduce([np.asarray(p) for p in parts])

    def allgather(self, array):
        parts = self._group.exchange(self._rank, np.asarray(array))
        return np.concatenate(parts, axis=0)

    def alltoall(self, parts):
        """``parts[k]`` to rank ``k``; the parts every rank sent to this one, in rank order."""
        if len(parts) != self.world_size:
            raise ValueError(f"alltoall takes one part per rank ({self.world_size}), got {len(parts)}")
        sent = self._group.exchange(self._rank, [np.asarray(p) for p in parts])
        return [np.array(sent[k][self._rank], copy=True) for k in range(self.world_size)]

    def broadcast(self, obj, root: int = 0):
        return self._group.exchange(self._rank, obj)[root]


def run_in_threads(world_size: int, fn: Callable[[ThreadComm, int], Any], timeout: float = 600.0) -> Sequence[Any]:
    """Run ``fn(comm, rank)`` on ``world_size`` threads and return their results in rank order.

    An exception on any rank aborts the barrier (so no rank hangs) and is re-raised here.
    """
    group = ThreadGroup(world_size, timeout=timeout)
    results: list[Any] = [None] * world_size
    errors: list[BaseException | None] = [None] * world_size

    def body(rank: int) -> None:
        try:
            results[rank] = fn(group.comm(rank), rank)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
            errors[rank] = exc
            group._barrier.abort()

    threads = [threading.Thread(target=body, args=(r,), daemon=True) for r in range(world_size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    first = next(
        (e for e in errors if e is not None and not isinstance(e, threading.BrokenBarrierError)),
        next((e for e in errors if e is not None), None),
    )
    if first is not None:
        raise first
    return results
