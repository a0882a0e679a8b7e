"""The host communicator: ranks in separate processes (Dask workers) through ``xgboost.collective``.

XGBoost's Rabit collective (a tracker plus a ring/tree of TCP connections between the
workers) is a maintained collective library that CPU Dask workers can all reach; dgboost
uses it instead of a socket protocol of its own. CUDA workers that share one GPU use it too,
because NCCL refuses two ranks on one device.

Exactness: integer sums are exact whatever the reduction order. ``allgather`` and ``alltoall``
move bytes, so floating-point rows arrive bit for bit: ``allgather`` is XGBoost's ring
allgather (``XGCommunicatorAllgather`` of its C library: each rank sends its own segment once
and receives the others'). XGBoost's collective has no send to one rank, so ``alltoall``, in
which a rank must receive only the parts addressed to it, sends them over TCP connections of
its own (:mod:`._p2p`), the ranks' addresses exchanged through the collective.

``xgboost.collective`` is one communicator per process, so a process runs one job's
collectives at a time (a lock, held from ``__enter__`` to ``__exit__``).

Quiet: XGBoost prints a line when a rank joins (``[10:20:24] Task 00000001 got rank 1``)
whatever its own verbosity (a console message, on stderr in a Dask worker's task thread).
While a rank holds the collective, XGBoost's messages of its thread go through dgboost (a
log callback of XGBoost's C library, registered for that thread only): console and info
lines show from ``verbosity`` 2, warnings (as Python warnings, as XGBoost gives them) from 1,
and XGBoost's own verbosity is the job's.
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
import threading
import time
import warnings
from typing import Any

import numpy as np

from .._array import array_module, to_host
from ..errors import CommunicationError

__all__ = ["CollectiveComm", "start_tracker"]


class _PerThreadLock(threading.local):
    """One job's collective per thread: XGBoost's communicator is thread-local (its
    ``GlobalCommGroup``), so the ranks of an in-process cluster (``LocalCluster(processes=False)``)
    each join from their own worker thread, as with ``xgboost.dask``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def acquire(self, timeout: float) -> bool:
        return self._lock.acquire(timeout=timeout)

    def release(self) -> None:
        self._lock.release()


_THREAD_LOCK = _PerThreadLock()
_LOG_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_char_p)
_routing = threading.local()  # .verbosity: the job's while this thread holds the collective; .registered
_callback_keep: list = []  # the ctypes callback must outlive every thread it is registered for


def _route_xgboost_message(message: bytes) -> None:
    """One message of XGBoost's C library from a thread of :func:`_route_xgboost_log`."""
    text = message.decode("utf-8", "replace")
    verbosity = getattr(_routing, "verbosity", None)
    if "WARNING:" in text:
        if verbosity is None or verbosity >= 1:
            warnings.warn(text, UserWarning, stacklevel=2)
    elif verbosity is None:
        print(text)  # outside a dgboost job: as XGBoost's own Python callback prints
    elif verbosity >= 2:
        sys.stderr.write(text + "\n")  # one write: the ranks of a host may share the stream
        sys.stderr.flush()


def _route_xgboost_log() -> None:
    """Send the calling thread's XGBoost messages through :func:`_route_xgboost_message`
    (XGBoost's log callbacks are per thread; registered once per thread)."""
    if getattr(_routing, "registered", False):
        return
    from xgboost.libpath import find_lib_path

    if not _callback_keep:
        _callback_keep.append(_LOG_CALLBACK(_route_xgboost_message))
    try:
        # the library xgboost loaded: dlopen of the same file hands back the same one
        ctypes.CDLL(find_lib_path()[0]).XGBRegisterLogCallback(_callback_keep[0])
    except (OSError, IndexError, AttributeError):  # another build of XGBoost: its lines stay as they are
        return
    _routing.registered = True


_TRACKER_THREAD_PAUSE_S = 0.002  # the tracker's thread has started by then (else: 100 ms as before)


def start_tracker(world_size: int, host: str, timeout: float = 300.0) -> tuple[Any, dict]:
    """Start an XGBoost Rabit tracker for ``world_size`` ranks.

    Parameters
    ----------
    world_size : int
    host : str
        Address the workers reach the tracker at.
    timeout : float
        Seconds the tracker waits for all ranks to join (and to leave).

    Returns
    -------
    tracker : xgboost.tracker.RabitTracker
        Keep it alive until the job ends; ``tracker.free()`` releases it early.
    worker_args : dict
        Passed to :class:`CollectiveComm` on every rank.
    """
    from xgboost.tracker import RabitTracker

    # sortby="task": ranks follow the task ids CollectiveComm gives (the rank, zero-padded),
    # not the order in which workers happen to connect
    tracker = RabitTracker(n_workers=int(world_size), host_ip=host, sortby="task", timeout=int(timeout))
    tracker.start()
    # ``worker_args`` waits for the thread ``start`` launched to say it runs, and when it has not
    # yet it sleeps 100 ms before it looks again. The thread runs within microseconds: a short
    # pause first spares every host-communicator job those 100 ms (benchmarks/host_comm_setup.py)
    time.sleep(_TRACKER_THREAD_PAUSE_S)
    return tracker, dict(tracker.worker_args())


class CollectiveComm:
    """Communicator of one rank over ``xgboost.collective``; use it as a context manager.

    Parameters
    ----------
    worker_args : dict
        From :func:`start_tracker` (tracker address and port).
    rank, world_size : int
        This process's rank (ranks are assigned by the caller, not by connection order).
    timeout : float
        Seconds any one collective may wait for its peers; a lost peer then raises
        :class:`~dgboost.errors.CommunicationError` instead of hanging.
    verbosity : int or None
        0-3 as :mod:`dgboost.config`'s, for XGBoost's messages while the rank holds the
        collective (see the module docstring); None: the calling thread's ``verbosity``.

    Notes
    -----
    Arrays may be NumPy or CuPy; results come back in the array module of the argument
    (CuPy arrays are staged through the host).
    """

    def __init__(
        self, worker_args: dict, rank: int, world_size: int, timeout: float = 300.0, verbosity: int | None = None
    ):
        self._args = dict(worker_args)
        self._rank = int(rank)
        self._world_size = int(world_size)
        self._timeout = float(timeout)
        self._verbosity = verbosity
        self._entered = False
        self._quiet: contextlib.ExitStack | None = None

    @property
    def rank(self) -> int:
        return self._rank

    @property
    def world_size(self) -> int:
        return self._world_size

    def __enter__(self) -> "CollectiveComm":
        from xgboost import collective

        if not _THREAD_LOCK.acquire(timeout=self._timeout):
            raise CommunicationError(
                f"another dgboost job holds this thread's collective for longer than {self._timeout:.0f} s"
            )
        try:
            self._quiet = self._quiet_xgboost()
            collective.init(**self._args, dmlc_task_id=f"{self._rank:08d}", dmlc_timeout=max(1, int(self._timeout)))
            got = collective.get_rank(), collective.get_world_size()
            if got != (self._rank, self._world_size):
                raise CommunicationError(
                    f"collective assigned rank {got[0]} of {got[1]}, expected {self._rank} of {self._world_size}"
                )
        except BaseException as exc:
            self._loud_again()
            _THREAD_LOCK.release()
            if isinstance(exc, CommunicationError):
                raise
            raise CommunicationError(f"rank {self._rank} could not join the collective: {exc}") from exc
        self._entered = True
        return self

    def __exit__(self, *exc_info) -> None:
        from xgboost import collective

        try:
            with warnings.catch_warnings():
                if exc_info[0] is not None:
                    # a failed job (a peer lost): XGBoost warns of every retry to reach the freed
                    # tracker while finalising, lines per rank for what the client reports once
                    warnings.simplefilter("ignore")
                collective.finalize()
        except Exception:  # noqa: BLE001 - a broken group cannot be finalised cleanly; the job already failed
            pass
        finally:
            self._entered = False
            self._loud_again()
            _THREAD_LOCK.release()

    def _quiet_xgboost(self) -> contextlib.ExitStack:
        """XGBoost's messages of this thread follow the job's verbosity until :meth:`_loud_again`."""
        import xgboost

        from ..config import get_config

        verbosity = get_config()["verbosity"] if self._verbosity is None else int(self._verbosity)
        stack = contextlib.ExitStack()
        stack.enter_context(xgboost.config_context(verbosity=verbosity))
        _route_xgboost_log()
        before = getattr(_routing, "verbosity", None)
        _routing.verbosity = verbosity
        stack.callback(setattr, _routing, "verbosity", before)
        return stack

    def _loud_again(self) -> None:
        stack, self._quiet = self._quiet, None
        if stack is not None:
            stack.close()

    def _call(self, what: str, fn, *args):
        if not self._entered:
            raise CommunicationError("CollectiveComm used outside its `with` block")
        try:
            return fn(*args)
        except Exception as exc:  # noqa: BLE001 - XGBoostError and socket errors alike
            raise CommunicationError(
                f"{what} failed on rank {self._rank} of {self._world_size} "
                f"(a peer was lost or timed out after {self._timeout:.0f} s): "
                f"{str(exc).strip().splitlines()[0] if str(exc).strip() else exc!r}"
            ) from exc

    def _reduce(self, array, op_name: str):
        from xgboost import collective

        xp = array_module(array)
        host = np.ascontiguousarray(to_host(array))
        out = self._call(f"allreduce_{op_name}", collective.allreduce, host, getattr(collective.Op, op_name.upper()))
        out = np.asarray(out).reshape(host.shape)
        return xp.asarray(out) if xp is not np else out

    def allreduce_sum(self, array):
        return self._reduce(array, "sum")

    def allreduce_max(self, array):
        return self._reduce(array, "max")

    def _allgather_bytes(self, mine: np.ndarray, sizes: np.ndarray) -> list[np.ndarray]:
        """Every rank's bytes, in rank order: ``mine`` (uint8 (sizes[rank],)) is this rank's.

        XGBoost's allgather takes segments of one size, ``segment`` bytes at ``rank * segment``
        of the buffer: a rank's bytes are padded to the largest rank's (the padding, left
        uninitialised, is sent but never read)."""
        from xgboost.core import _LIB, _check_call

        segment = int(sizes.max()) if sizes.size else 0
        if segment == 0:
            return [np.empty(0, np.uint8) for _ in range(self._world_size)]
        buffer = np.empty(self._world_size * segment, np.uint8)
        buffer[self._rank * segment : self._rank * segment + mine.size] = mine

        def gather() -> None:
            _check_call(
                _LIB.XGCommunicatorAllgather(buffer.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(buffer.size))
            )

        self._call("allgather", gather)
        return [buffer[k * segment : k * segment + int(sizes[k])] for k in range(self._world_size)]

    def allgather(self, array):
        xp = array_module(array)
        host = np.ascontiguousarray(to_host(array))
        row_bytes = host.dtype.itemsize * int(np.prod(host.shape[1:], dtype=np.int64))
        # rows of every rank, and the row width of every rank that has rows (widths must agree)
        meta = np.zeros((2, self._world_size), np.int64)
        meta[0, self._rank] = host.shape[0]
        meta[1, self._rank] = row_bytes if host.shape[0] else 0
        meta = self.allreduce_sum(meta)
        widths = set(meta[1][meta[0] > 0].tolist())
        if len(widths) > 1:
            raise CommunicationError(f"allgather: ranks sent rows of different sizes ({sorted(widths)} bytes)")
        parts = self._allgather_bytes(host.reshape(-1).view(np.uint8), meta[0] * row_bytes)
        out = np.concatenate(parts).view(host.dtype).reshape((int(meta[0].sum()),) + host.shape[1:])
        return xp.asarray(out) if xp is not np else out

    def alltoall(self, parts):
        """``parts[k]`` to rank ``k``; what every rank addressed to this one, in rank order.

        Parameters
        ----------
        parts : sequence of ``world_size`` NumPy arrays of one dtype, 1-D or 2-D, any shapes

        Returns
        -------
        list of ``world_size`` NumPy arrays: rank ``k``'s ``parts[rank]``, its shape and dtype

        Notes
        -----
        Each part goes straight to its rank (see the module docstring and :mod:`._p2p`).
        """
        parts = [np.ascontiguousarray(to_host(p)) for p in parts]
        dtype = _check_parts(parts, self._world_size)
        # the shape of every (sender, receiver) part, zero-padded to 2 axes, and its axes
        meta = np.zeros((self._world_size, self._world_size, 3), np.int64)
        for k, p in enumerate(parts):
            meta[self._rank, k, : p.ndim] = p.shape
            meta[self._rank, k, 2] = p.ndim
        meta = self.allreduce_sum(meta)
        nbytes = np.where(meta[..., 2] == 2, meta[..., 0] * meta[..., 1], meta[..., 0]) * dtype.itemsize
        from . import _p2p

        received = self._call(
            "alltoall",
            _p2p.exchange,
            self._rank,
            self._world_size,
            [p.reshape(-1).view(np.uint8) for p in parts],
            [int(b) for b in nbytes[:, self._rank]],
            self.allgather,
            str(self._args.get("dmlc_tracker_uri", "127.0.0.1")),
            self._timeout,
        )
        out = []
        for k, block in enumerate(received):
            shape = tuple(int(d) for d in meta[k, self._rank, : int(meta[k, self._rank, 2])])
            out.append(block.view(dtype).reshape(shape))
        return out

    def broadcast(self, obj, root: int = 0):
        from xgboost import collective

        return self._call("broadcast", collective.broadcast, obj, int(root))


def _check_parts(parts: list, world_size: int) -> np.dtype:
    """The one dtype of an alltoall's ``parts`` (``world_size`` arrays of 1 or 2 axes)."""
    if len(parts) != world_size:
        raise ValueError(f"alltoall takes one part per rank ({world_size}), got {len(parts)}")
    dtypes = {p.dtype for p in parts}
    if len(dtypes) != 1 or any(p.ndim not in (1, 2) for p in parts):
        raise ValueError("alltoall's parts must share one dtype and have 1 or 2 axes")
    return dtypes.pop()
