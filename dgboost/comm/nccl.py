"""NCCL communicator (``cupy.cuda.nccl``) for CUDA ranks that each own a GPU.

NCCL refuses two ranks on one device (``NCCL_ERROR_INVALID_USAGE``): ranks that share a GPU
use :class:`~dgboost.comm.collective.CollectiveComm` instead.

NCCL collectives have no timeout of their own: a lost peer leaves the others waiting on the
GPU forever. Every collective here is enqueued on a private stream, then the host polls the
stream until it finishes or ``timeout`` passes; on timeout the communicator is aborted
(``ncclCommAbort`` frees the waiting kernels) and :class:`~dgboost.errors.CommunicationError`
is raised.

Exactness: integer sums are exact in any order; ``allgather`` moves bytes (rows padded to the
largest rank's count), so floats arrive bit for bit.
"""
from __future__ import annotations

import pickle
import time

import numpy as np

from .._array import is_device_array
from ..errors import CommunicationError

__all__ = ["NcclComm", "new_unique_id"]


def new_unique_id():
    """A fresh NCCL unique id (made on one process and handed to every rank; picklable)."""
    from cupy.cuda import nccl

    return nccl.get_unique_id()


def _nccl_type(dtype):
    from cupy.cuda import nccl

    table = {np.dtype(np.int64): nccl.NCCL_INT64, np.dtype(np.int32): nccl.NCCL_INT32,
             np.dtype(np.float64): nccl.NCCL_FLOAT64, np.dtype(np.float32): nccl.NCCL_FLOAT32,
             np.dtype(np.uint8): nccl.NCCL_UINT8, np.dtype(np.uint64): nccl.NCCL_UINT64}
    try:
        return table[np.dtype(dtype)]
    except KeyError:
        raise CommunicationError(f"NCCL collectives of dtype {np.dtype(dtype)} are not supported") from None


class NcclComm:
    """Communicator of one CUDA rank over NCCL; use it as a context manager.

    Parameters
    ----------
    unique_id : bytes
        From :func:`new_unique_id`, the same on every rank.
    rank, world_size : int
    timeout : float
        Seconds one collective may take before the communicator is aborted.

    Notes
    -----
    Arrays may be CuPy (stay on the device) or NumPy (copied to the current device and
    back); results are in the array module of the argument.
    """

    def __init__(self, unique_id, rank: int, world_size: int, timeout: float = 300.0):
        self._uid = unique_id
        self._rank = int(rank)
        self._world_size = int(world_size)
        self._timeout = float(timeout)
        self._comm = None
        self._stream = None

    @property
    def rank(self) -> int:
        return self._rank

    @property
    def world_size(self) -> int:
        return self._world_size

    def __enter__(self) -> "NcclComm":
        import cupy
        from cupy.cuda import nccl

        try:
            self._comm = nccl.NcclCommunicator(self._world_size, self._uid, self._rank)
        except Exception as exc:  # noqa: BLE001 - NcclError and CUDA errors alike
            raise CommunicationError(f"rank {self._rank} could not create its NCCL communicator: {exc}") from exc
        self._stream = cupy.cuda.Stream(non_blocking=True)
        return self

    def __exit__(self, exc_type, *rest) -> None:
        if self._comm is not None:
            try:
                if exc_type is None:
                    self._comm.destroy()
                else:
                    self._comm.abort()  # peers may still wait on us: do not block in destroy
            except Exception:  # noqa: BLE001 - the job already failed
                pass
            self._comm = None

    def _wait(self, what: str) -> None:
        deadline = time.monotonic() + self._timeout
        pause = 1e-5
        while not self._stream.done:
            if time.monotonic() > deadline:
                self._comm.abort()
                self._comm = None
                raise CommunicationError(f"NCCL {what} on rank {self._rank} of {self._world_size} did not "
                                         f"finish within {self._timeout:.0f} s (a peer was lost); "
                                         "the communicator was aborted")
            time.sleep(pause)
            pause = min(pause * 2, 1e-3)

    def _device(self, array):
        import cupy

        if self._comm is None:
            raise CommunicationError("NcclComm used outside its `with` block (or after an abort)")
        on_device = is_device_array(array)
        # the caller's stream may still be writing the input: order our stream after it
        cupy.cuda.get_current_stream().synchronize()
        return cupy.ascontiguousarray(cupy.asarray(array)), on_device

    def _back(self, out, on_device: bool):
        return out if on_device else out.get()

    def _reduce(self, array, op_name: str):
        import cupy
        from cupy.cuda import nccl

        dev, on_device = self._device(array)
        out = cupy.empty_like(dev)
        op = nccl.NCCL_SUM if op_name == "sum" else nccl.NCCL_MAX
        self._comm.allReduce(dev.data.ptr, out.data.ptr, dev.size, _nccl_type(dev.dtype), op, self._stream.ptr)
        self._wait(f"allreduce_{op_name}")
        return self._back(out, on_device)

    def allreduce_sum(self, array):
        return self._reduce(array, "sum")

    def allreduce_max(self, array):
        return self._reduce(array, "max")

    def allgather(self, array):
        import cupy
        from cupy.cuda import nccl

        dev, on_device = self._device(array)
        counts = np.zeros(self._world_size, np.int64)
        counts[self._rank] = dev.shape[0]
        counts = np.asarray(self._reduce(counts, "sum"))
        row_bytes = dev.dtype.itemsize * int(np.prod(dev.shape[1:], dtype=np.int64))
        slot = int(counts.max()) * row_bytes
        send = cupy.zeros(max(slot, 1), cupy.uint8)
        send[:dev.nbytes] = dev.reshape(-1).view(cupy.uint8)
        recv = cupy.empty(send.size * self._world_size, cupy.uint8)
        self._comm.allGather(send.data.ptr, recv.data.ptr, send.size, nccl.NCCL_UINT8, self._stream.ptr)
        self._wait("allgather")
        recv = recv.reshape(self._world_size, send.size)
        pieces = [recv[r, :int(counts[r]) * row_bytes] for r in range(self._world_size)]
        out = cupy.concatenate(pieces).view(dev.dtype).reshape((int(counts.sum()),) + dev.shape[1:])
        return self._back(out, on_device)

    def broadcast(self, obj, root: int = 0):
        import cupy
        from cupy.cuda import nccl

        payload = pickle.dumps(obj) if self._rank == root else b""
        size = np.zeros(1, np.int64)
        size[0] = len(payload)
        size = int(np.asarray(self._reduce(size, "max"))[0])
        buf = cupy.zeros(max(size, 1), cupy.uint8)
        if self._rank == root:
            buf[:size] = cupy.asarray(np.frombuffer(payload, np.uint8))
        self._comm.broadcast(buf.data.ptr, buf.data.ptr, buf.size, nccl.NCCL_UINT8, int(root), self._stream.ptr)
        self._wait("broadcast")
        return obj if self._rank == root else pickle.loads(buf[:size].get().tobytes())
