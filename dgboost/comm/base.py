"""The Communicator protocol and the trivial single-process communicator.

The boosting loop only ever talks to a communicator, so one process is simply a
cluster of size one (docs/design.md §1.2 "One process is a cluster of size one").
Collectives take and return NumPy arrays on the CPU backend (CuPy arrays on the CUDA
backend); ``allreduce_sum`` on integer arrays is exact and therefore independent of the
order in which ranks are summed.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = ["Communicator", "LocalComm"]


@runtime_checkable
class Communicator(Protocol):
    """What the training loop needs from a group of cooperating workers."""

    @property
    def rank(self) -> int: ...

    @property
    def world_size(self) -> int: ...

    def allreduce_sum(self, array: Any) -> Any:
        """Element-wise sum of ``array`` over all ranks; every rank gets the result."""

    def allreduce_max(self, array: Any) -> Any:
        """Element-wise maximum of ``array`` over all ranks."""

    def allgather(self, array: Any) -> Any:
        """Concatenate the 1-D or 2-D ``array`` of every rank along axis 0, in rank order."""

    def broadcast(self, obj: Any, root: int = 0) -> Any:
        """Return ``obj`` as held by ``root`` on every rank (any picklable object)."""

    # Optional, not part of the protocol (NCCL's communicator has none): ``alltoall(parts)``,
    # ``parts`` a list of ``world_size`` host arrays of one dtype (1-D or 2-D, any shapes),
    # ``parts[k]`` sent to rank k; returns the list of the parts every rank sent to this one,
    # in rank order. Callers check for it with ``getattr(comm, "alltoall", None)``.


def _as_array(array):
    """``array`` itself when it is already an array (NumPy or a device array), else NumPy's."""
    # the class's attribute first: asking a CuPy array builds the interface's dict (a few us,
    # on every level of a single-rank tree)
    if (
        isinstance(array, np.ndarray)
        or hasattr(type(array), "__cuda_array_interface__")
        or hasattr(array, "__cuda_array_interface__")
    ):
        return array
    return np.asarray(array)


class LocalComm:
    """The communicator of a cluster of one: every collective is the identity.

    Results may be the very array passed in (no copy): callers treat collective results
    as read-only or as their own.
    """

    rank = 0
    world_size = 1

    def allreduce_sum(self, array):
        return _as_array(array)

    def allreduce_max(self, array):
        return _as_array(array)

    def allgather(self, array):
        return _as_array(array)

    def alltoall(self, parts):
        """``[parts[0]]``: the one rank's part to itself (see :class:`Communicator`)."""
        if len(parts) != 1:
            raise ValueError(f"alltoall takes one part per rank (1), got {len(parts)}")
        return [_as_array(parts[0])]

    def broadcast(self, obj, root: int = 0):
        return obj
