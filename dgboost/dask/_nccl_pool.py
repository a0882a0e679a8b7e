"""NCCL communicators of a worker: the one a job is using, and the one kept for the next job.

Creating an NCCL communicator, connecting its peers on the first collective and destroying it
cost a large share of a short job (docs/performance-notes.md, "Kept NCCL communicators"). A
worker therefore keeps its communicator after a job that ended well, with what it
was made for (a token, the workers in rank order, its rank and GPU). The next job on exactly
the same workers, ranks and GPUs reuses it; any other job, or any failure, ends it.

Only the client decides to reuse one (:func:`reusable_token`): every rank must report the
same token, or no rank may reuse it, since NCCL's ranks must agree on their communicator.
A communicator in use is taken out of the pool, so one that fails is never handed out again.

The communicator a job is using is registered under the job's id, so that when the client sees
the job fail (a rank erred, a worker left) it can abort it on every other worker
(:func:`abort_job`): their ranks, waiting on a collective the lost peer never joins, are freed
at once rather than after their timeout (300 s by default), and the next job need not wait
for them.
"""

from __future__ import annotations

import collections
import contextlib
import threading
from dataclasses import dataclass
from typing import Any, Sequence

from ..errors import CommunicationError

__all__ = ["Kept", "kept_state", "take", "keep", "discard", "reusable_token", "in_use", "abort_job"]


@dataclass(frozen=True)
class Kept:
    """What one worker's kept communicator was made for.

    Attributes
    ----------
    token : str
        The id of the job that made it (the same on every rank of that job).
    members : tuple of str
        Worker addresses in rank order.
    rank : int
    device : int
        The CUDA device ordinal it lives on.
    """

    token: str
    members: tuple
    rank: int
    device: int


_lock = threading.Lock()
_pool: dict[str, Any] = {}  # on a worker: at most one {"kept": Kept, "comm": cupy NcclCommunicator}


_active: dict[str, Any] = {}  # on a worker: job id -> the NcclComm that job is using
# jobs aborted here (newest last), for ranks that register after the abort arrived (one still
# assembling its partitions when its peer failed)
_aborted: "collections.OrderedDict[str, str]" = collections.OrderedDict()
_ABORTED_KEPT = 64


@contextlib.contextmanager
def in_use(job: str, comm):
    """``with in_use(job, comm):`` registers ``comm`` (an NcclComm) as job ``job``'s for
    :func:`abort_job` while the block runs.

    Raises
    ------
    CommunicationError
        At once, when job ``job`` was aborted on this worker before its rank got here.
    """
    job = str(job)
    with _lock:
        reason = _aborted.get(job)
        if reason is None:
            _active[job] = comm
    if reason is not None:
        raise CommunicationError(reason)
    try:
        yield comm
    finally:
        with _lock:
            if _active.get(job) is comm:
                del _active[job]


def abort_job(job: str, reason: str, dask_worker=None) -> bool:
    """Abort job ``job``'s communicator on this worker, if it is using one (run on the workers
    through ``client.run``). The abort runs in a thread of its own (it may wait up to a second
    for the rank's thread to leave an NCCL call), so the worker's event loop is not held.

    Returns
    -------
    bool
        Whether this worker had one to abort (a rank of the job that starts here later
        fails at once: the abort is remembered).
    """
    with _lock:
        comm = _active.get(str(job))
        _aborted[str(job)] = str(reason)
        while len(_aborted) > _ABORTED_KEPT:
            _aborted.popitem(last=False)
    if comm is None:
        return False

    def run() -> None:
        device = getattr(comm, "device", None)
        if device is not None:
            try:
                import cupy

                cupy.cuda.Device(device).use()
            except Exception:  # noqa: BLE001 - NCCL picks its own device; this only helps CUDA
                pass
        comm.abort(reason)

    threading.Thread(target=run, name=f"dgboost-abort-{job}", daemon=True).start()
    return True


def kept_state(dask_worker=None) -> Kept | None:
    """What this worker keeps (run on the worker through ``client.run``), or None."""
    with _lock:
        entry = _pool.get("entry")
        return None if entry is None else entry["kept"]


def take(kept: Kept):
    """Take the kept communicator that matches ``kept`` out of the pool (so a job that fails
    with it can never hand it out again).

    Raises
    ------
    CommunicationError
        When this worker no longer keeps it (e.g. it restarted after the client asked): the
        other ranks would wait on it, so the job cannot go on.
    """
    with _lock:
        entry = _pool.pop("entry", None)
    if entry is not None and entry["kept"] == kept:
        return entry["comm"]
    if entry is not None:
        _end(entry["comm"])
    raise CommunicationError(
        f"rank {kept.rank} no longer keeps the NCCL communicator of job {kept.token} "
        "(its worker restarted or ran another job since the client asked); train again"
    )


def keep(kept: Kept, comm) -> None:
    """Keep ``comm`` (a healthy cupy ``NcclCommunicator``) for the next job; end any other."""
    with _lock:
        old, _pool["entry"] = _pool.get("entry"), {"kept": kept, "comm": comm}
    if old is not None and old["comm"] is not comm:
        _end(old["comm"])


def discard() -> None:
    """End the kept communicator, if any (a new one is about to be made on this worker)."""
    with _lock:
        entry = _pool.pop("entry", None)
    if entry is not None:
        _end(entry["comm"])


def _end(comm) -> None:
    # abort, not destroy: destroying synchronises with the peers, which may have ended theirs
    # already (or died); abort frees this rank's resources without waiting for anyone
    try:
        comm.abort()
    except Exception:  # noqa: BLE001 - ending a communicator nobody uses any more is best effort
        pass


def reusable_token(states: Sequence[Kept | None], workers: Sequence[str], device: int) -> str | None:
    """The token of the communicator every rank keeps for exactly this job's shape, or None.

    Parameters
    ----------
    states : sequence of Kept or None
        What each rank's worker keeps, in rank order.
    workers : sequence of str
        The job's workers in rank order.
    device : int
        The CUDA device ordinal the job trains on.
    """
    members = tuple(workers)
    if len(states) != len(members) or not states or any(s is None for s in states):
        return None
    token = states[0].token
    for rank, s in enumerate(states):
        if s.token != token or s.members != members or s.rank != rank or s.device != device:
            return None
    return token
