"""Probes of the CUDA backend for tests and benchmarks: host reads counted, outputs poisoned.

The backend itself carries no counters or test flags. Its host reads all go through two
methods, :meth:`~dgboost.backend.cuda.CUDABackend.to_host` (an immediate read) and
:meth:`~dgboost.backend.cuda.CUDABackend.read_later` (a stream-ordered read, waited for by
``result()``), and every tree starts with one ``gpair_totals``: :func:`count_host_reads`
wraps those three on the class for the length of a ``with`` block. :class:`PoisonedCUDABackend`
fills every array it allocates with 0xFF bytes, so an element a kernel forgets to write shows
up as NaN or -1 instead of a plausible zero.

Importing this module needs no GPU; using either probe needs CuPy and a CUDA device.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from dgboost.backend.cuda import CUDABackend

__all__ = ["HostReads", "count_host_reads", "PoisonedCUDABackend"]


@dataclass
class HostReads:
    """What :func:`count_host_reads` counted.

    Attributes
    ----------
    syncs : int
        Host reads of device data (each one a wait of the host for the device).
    trees : int
        Trees started (calls of ``gpair_totals``).
    """

    syncs: int = 0
    trees: int = 0


class _CountedRead:
    """A pending ``read_later`` whose first ``result()`` is counted (later calls are not reads)."""

    def __init__(self, pending, counts: HostReads):
        self._pending, self._counts, self._waited = pending, counts, False

    def result(self) -> list:
        if not self._waited:
            self._counts.syncs += 1
            self._waited = True
        return self._pending.result()


@contextlib.contextmanager
def count_host_reads(backend_class: type = CUDABackend) -> Iterator[HostReads]:
    """Count the host reads and trees of every ``backend_class`` instance inside the block.

    Parameters
    ----------
    backend_class : type
        The class whose methods are wrapped (``CUDABackend`` or a subclass).

    Yields
    ------
    HostReads
        Updated as the block runs; the methods are restored when it exits.
    """
    counts = HostReads()
    to_host, read_later, gpair_totals = backend_class.to_host, backend_class.read_later, backend_class.gpair_totals
    own = {name: backend_class.__dict__.get(name) for name in ("to_host", "read_later", "gpair_totals")}

    def counted_to_host(self, array):
        if not isinstance(array, np.ndarray):  # a host array is returned as it is: no read
            counts.syncs += 1
        return to_host(self, array)

    def counted_read_later(self, arrays):
        return _CountedRead(read_later(self, arrays), counts)

    def counted_gpair_totals(self, gpair):
        counts.trees += 1
        return gpair_totals(self, gpair)

    backend_class.to_host = counted_to_host
    backend_class.read_later = counted_read_later
    backend_class.gpair_totals = counted_gpair_totals
    try:
        yield counts
    finally:
        for name, method in own.items():
            if method is None:  # inherited: the parent's shows through again
                delattr(backend_class, name)
            else:
                setattr(backend_class, name, method)


class PoisonedCUDABackend(CUDABackend):
    """A CUDA backend whose every allocation starts as 0xFF bytes (NaN for floats, -1 for
    integers), and whose work arrays are fresh each call (so none holds an earlier result).

    Parameters
    ----------
    device_id : int
        The CUDA device.
    """

    def empty(self, shape, dtype):
        """As :meth:`CUDABackend.empty`, filled with 0xFF bytes."""
        out = super().empty(shape, dtype)
        out.view(self.xp.uint8).fill(0xFF)
        return out

    def _scratch(self, name: str, size: int, dtype):
        # the parent reuses work arrays between calls: a fresh poisoned one each time instead
        return self.empty(size, dtype)

    def _work(self, name: str, shape: tuple, dtype, reserve: int = 0):
        return self.empty(shape, dtype)  # as _scratch
