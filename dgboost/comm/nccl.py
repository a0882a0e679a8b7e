"""NCCL communicator (``cupy.cuda.nccl``) for CUDA ranks that each own a GPU.

NCCL refuses two ranks on one device (``NCCL_ERROR_INVALID_USAGE``): ranks that share a GPU
use :class:`~dgboost.comm.collective.CollectiveComm` instead.

NCCL collectives have no timeout of their own: a lost peer leaves the others waiting on the
GPU forever. With ``stream_ordered=False`` every collective is enqueued on a private stream,
then the host polls the stream until it finishes or ``timeout`` passes; on timeout the
communicator is aborted (``ncclCommAbort`` frees the waiting kernels) and
:class:`~dgboost.errors.CommunicationError` is raised. That is a host synchronisation per
collective (about 19 a depth-8 tree), where single-GPU training reads the device twice a tree.

``stream_ordered=True`` (what ``dgboost.dask.train`` uses unless the client's
``nccl_stream_ordered`` option of :mod:`dgboost.config` is off; faster than the host waits,
docs/performance-notes.md, "NCCL collectives in stream order") queues a device
array's ``allreduce_sum`` / ``allreduce_max`` on the current stream, after the kernels that
make it and before those that read it, and returns at once: the host waits only where it
reads. A :class:`~dgboost.comm._watchdog.CollectiveWatchdog` thread aborts the communicator
when a queued collective is late; an aborted collective leaves partial sums (its output starts
as a copy of the input, never uninitialised memory), and the next collective, or closing the
communicator, raises :class:`~dgboost.errors.CommunicationError`. Host arrays, ``allgather``
and ``broadcast`` wait as before. :meth:`NcclComm.abort` does the same from any thread at
once, for a job known to have failed elsewhere (the Dask layer calls it on the other ranks
when one fails or its worker leaves), so they need not wait for their timeout.

Exactness: integer sums are exact in any order; ``allgather`` moves bytes (rows padded to the
largest rank's count), so floats arrive bit for bit.
"""

from __future__ import annotations

import pickle
import threading
import time

import numpy as np

from .._array import is_device_array
from ..errors import CommunicationError
from ._watchdog import CollectiveWatchdog

__all__ = ["NcclComm", "new_unique_id"]


def new_unique_id():
    """A fresh NCCL unique id (made on one process and handed to every rank; picklable)."""
    from cupy.cuda import nccl

    return nccl.get_unique_id()


def _nccl_types() -> dict:
    """NCCL's data type of each NumPy dtype a collective takes (a communicator makes the
    table once: a queued reduction asks for it ten times a round)."""
    from cupy.cuda import nccl

    return {
        np.dtype(np.int64): nccl.NCCL_INT64,
        np.dtype(np.int32): nccl.NCCL_INT32,
        np.dtype(np.float64): nccl.NCCL_FLOAT64,
        np.dtype(np.float32): nccl.NCCL_FLOAT32,
        np.dtype(np.uint8): nccl.NCCL_UINT8,
        np.dtype(np.uint32): nccl.NCCL_UINT32,
        np.dtype(np.uint64): nccl.NCCL_UINT64,
    }


def _copy_on_stream(array, stream):
    """A C-ordered copy of the device ``array``, queued on ``stream``: one device-to-device
    copy of the bytes where ``array`` is C-contiguous (CuPy's ``array(copy=True)`` launches
    an element-wise kernel: about 21 us of host time against the queued reduction's 15-26,
    ``benchmarks/nccl_enqueue_host.py``)."""
    import cupy

    if not array.flags.c_contiguous:
        return cupy.array(array, copy=True, order="C")
    out = cupy.empty(array.shape, array.dtype)
    if array.nbytes:
        out.data.copy_from_device_async(array.data, array.nbytes, stream)
    return out


class NcclComm:
    """Communicator of one CUDA rank over NCCL; use it as a context manager.

    Parameters
    ----------
    unique_id : bytes
        From :func:`new_unique_id`, the same on every rank.
    rank, world_size : int
    timeout : float
        Seconds one collective may take before the communicator is aborted.
    stream_ordered : bool
        Queue device arrays' reductions on the current stream without waiting for them
        (see the module docstring).
    communicator : cupy.cuda.nccl.NcclCommunicator, optional
        An open communicator of these ranks to use instead of making one from ``unique_id``
        (one kept from an earlier job on the same workers).
    keep : bool
        When the ``with`` block ends well, do not destroy the communicator: it is left in
        :attr:`kept` for the caller to reuse. On an error it is aborted either way.

    Notes
    -----
    Arrays may be CuPy (stay on the device) or NumPy (copied to the current device and
    back); results are in the array module of the argument.
    """

    #: allgather of a device array returns a device array (the quantile sketch's sample stays
    #: on the device)
    gathers_on_device = True

    def __init__(
        self,
        unique_id,
        rank: int,
        world_size: int,
        timeout: float = 300.0,
        stream_ordered: bool = False,
        communicator=None,
        keep: bool = False,
    ):
        self._uid = unique_id
        self._given = communicator
        self._keep = bool(keep)
        self.kept = None
        self._rank = int(rank)
        self._world_size = int(world_size)
        self._timeout = float(timeout)
        self._stream_ordered = bool(stream_ordered)
        self._comm = None
        self._stream = None
        self._watchdog: CollectiveWatchdog | None = None
        self._nccl_lock = threading.Lock()  # NCCL calls on one communicator: one thread at a time
        self._aborted: str | None = None  # why another thread aborted the job's communicator
        self.device: int | None = None  # the CUDA device it lives on, once open
        self._types: dict = {}  # NumPy dtype -> NCCL data type, made when it opens

    @property
    def rank(self) -> int:
        return self._rank

    @property
    def world_size(self) -> int:
        return self._world_size

    @property
    def stream_ordered(self) -> bool:
        """Whether device reductions are queued on the stream without waiting."""
        return self._stream_ordered

    def __enter__(self) -> "NcclComm":
        import cupy
        from cupy.cuda import nccl

        self.kept = None
        try:
            self._comm = (
                self._given
                if self._given is not None
                else nccl.NcclCommunicator(self._world_size, self._uid, self._rank)
            )
        except Exception as exc:  # noqa: BLE001 - NcclError and CUDA errors alike
            raise CommunicationError(f"rank {self._rank} could not create its NCCL communicator: {exc}") from exc
        self._stream = cupy.cuda.Stream(non_blocking=True)
        self.device = cupy.cuda.Device().id
        self._types = _nccl_types()
        if self._stream_ordered:
            device = self.device
            self._watchdog = CollectiveWatchdog(
                self._timeout,
                self._abort,
                f"NCCL rank {self._rank} of {self._world_size}",
                setup=lambda: cupy.cuda.Device(device).use(),
            ).start()
        return self

    def _abort(self) -> None:
        """Abort the communicator once (from the rank's thread or the watchdog's)."""
        # the rank's thread may be inside an NCCL call (queueing is quick); it may also be
        # blocked on a read that only the abort frees, so do not wait for it long
        locked = self._nccl_lock.acquire(timeout=1.0)
        try:
            comm, self._comm = self._comm, None
            if comm is not None:
                comm.abort()
        finally:
            if locked:
                self._nccl_lock.release()

    def abort(self, reason: str) -> None:
        """Abort the communicator from another thread because the job failed elsewhere (a
        peer's rank erred or its worker left): collectives waiting on that peer return, and
        this rank's next collective, wait or closing raises ``CommunicationError(reason)``
        instead of waiting for its timeout."""
        self._aborted = str(reason)
        self._abort()

    def _call(self, name: str, *args) -> None:
        """Queue one NCCL operation (one thread at a time, never on an aborted communicator)."""
        with self._nccl_lock:
            self._check()
            getattr(self._comm, name)(*args)

    def _check(self) -> None:
        if self._aborted is not None:
            raise CommunicationError(self._aborted)
        if self._watchdog is not None and self._watchdog.fired:
            raise CommunicationError(self._watchdog.fired)
        if self._comm is None:
            raise CommunicationError("NcclComm used outside its `with` block (or after an abort)")

    def __exit__(self, exc_type, *rest) -> None:
        error = None
        if self._watchdog is not None:
            try:
                if exc_type is None and self._comm is not None and not self._watchdog.fired:
                    import cupy

                    # the last queued collectives must finish (or time out) before the model is trusted
                    self._wait("the last collectives", cupy.cuda.get_current_stream())
            except CommunicationError as exc:
                error = exc
            finally:
                self._watchdog.stop()
                if self._watchdog.fired:  # aborted by the watchdog: nothing left to destroy
                    error = error or CommunicationError(self._watchdog.fired)
                self._watchdog = None
        if self._aborted is not None:  # partial sums may have reached the model: it is not trusted
            error = error or CommunicationError(self._aborted)
        if self._comm is not None:
            try:
                if exc_type is None and error is None and self._keep:
                    self.kept = self._comm
                elif exc_type is None and error is None:
                    self._comm.destroy()
                else:
                    self._comm.abort()  # peers may still wait on us: do not block in destroy
            except Exception:  # noqa: BLE001 - the job already failed
                pass
            self._comm = None
        if error is not None and exc_type is None:
            raise error

    def _wait(self, what: str, stream=None) -> None:
        """Wait, host-side and within the timeout, for the work queued so far on ``stream``
        (default: the communicator's own); abort the communicator and raise when it is late."""
        import cupy

        event = cupy.cuda.Event(disable_timing=True)
        event.record(self._stream if stream is None else stream)
        deadline = time.monotonic() + self._timeout
        pause = 1e-5
        while not event.done:
            if time.monotonic() > deadline:
                self._abort()
                raise CommunicationError(
                    f"NCCL {what} on rank {self._rank} of {self._world_size} did not "
                    f"finish within {self._timeout:.0f} s (a peer was lost); "
                    "the communicator was aborted"
                )
            time.sleep(pause)
            pause = min(pause * 2, 1e-3)
        if self._aborted is not None:  # finished because another thread aborted it
            raise CommunicationError(self._aborted)
        if self._watchdog is not None and self._watchdog.fired:  # finished because it was aborted
            raise CommunicationError(self._watchdog.fired)

    def _type(self, dtype):
        """NCCL's data type of ``dtype``; raises for a dtype NCCL collectives do not take."""
        try:
            return self._types[np.dtype(dtype)]
        except KeyError:
            raise CommunicationError(f"NCCL collectives of dtype {np.dtype(dtype)} are not supported") from None

    def _queued_reduce(self, array, op_name: str):
        """Stream-ordered reduction of a device array: queued after its producers, not awaited."""
        import cupy
        from cupy.cuda import nccl

        self._check()
        stream = cupy.cuda.get_current_stream()
        # the output starts as the input: an aborted collective leaves partial sums, never garbage
        out = _copy_on_stream(array, stream)
        op = nccl.NCCL_SUM if op_name == "sum" else nccl.NCCL_MAX
        self._call("allReduce", out.data.ptr, out.data.ptr, out.size, self._type(out.dtype), op, stream.ptr)
        event = cupy.cuda.Event(disable_timing=True)
        event.record(stream)
        self._watchdog.track(f"allreduce_{op_name}", lambda: event.done)
        return out

    def _device(self, array):
        import cupy

        self._check()
        on_device = is_device_array(array)
        # the caller's stream may still be writing the input (or, stream-ordered, running
        # queued collectives): order our stream after it
        cupy.cuda.get_current_stream().synchronize()
        self._check()  # a watchdog abort is what may have ended that wait
        return cupy.ascontiguousarray(cupy.asarray(array)), on_device

    def _back(self, out, on_device: bool):
        return out if on_device else out.get()

    def _reduce(self, array, op_name: str):
        import cupy
        from cupy.cuda import nccl

        if self._stream_ordered and is_device_array(array):
            return self._queued_reduce(array, op_name)
        dev, on_device = self._device(array)
        out = cupy.empty_like(dev)
        op = nccl.NCCL_SUM if op_name == "sum" else nccl.NCCL_MAX
        self._call("allReduce", dev.data.ptr, out.data.ptr, dev.size, self._type(dev.dtype), op, self._stream.ptr)
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
        send[: dev.nbytes] = dev.reshape(-1).view(cupy.uint8)
        recv = cupy.empty(send.size * self._world_size, cupy.uint8)
        self._call("allGather", send.data.ptr, recv.data.ptr, send.size, nccl.NCCL_UINT8, self._stream.ptr)
        self._wait("allgather")
        recv = recv.reshape(self._world_size, send.size)
        pieces = [recv[r, : int(counts[r]) * row_bytes] for r in range(self._world_size)]
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
        self._call("broadcast", buf.data.ptr, buf.data.ptr, buf.size, nccl.NCCL_UINT8, int(root), self._stream.ptr)
        self._wait("broadcast")
        return obj if self._rank == root else pickle.loads(buf[:size].get().tobytes())
