"""How the ranks of one job get a communicator: which kind, and how it is set up.

A spec is a small picklable dict made on the client and sent to every rank's task:
``{"kind": "local"}`` for one rank, ``{"kind": "host", "args": ...}`` for XGBoost's Rabit
collective (its tracker runs on the scheduler, as in ``xgboost.dask``), or
``{"kind": "nccl", "uid": ...}`` for NCCL between CUDA workers on distinct GPUs. An NCCL
spec also names the communicator's ``kept`` shape (token, workers in rank order, GPU): the
workers keep it after the job for the next one of the same shape (:mod:`._nccl_pool`), and
``reuse`` says that every rank already keeps one for this job. The NCCL spec carries the
settings of :mod:`dgboost.config` (``nccl_stream_ordered``, ``nccl_keep_communicators``) as
the client had them when the job was set up; a host spec carries ``verbosity`` (XGBoost's
tracker lines, "Task 00000001 got rank 1", show only from 2, info).
"""

from __future__ import annotations

import contextlib
import uuid

from ..config import get_config
from ..errors import CommunicationError, DGBoostValueError
from ._waits import bounded_call

__all__ = ["make_spec", "release_spec", "open_comm"]

_TRACKERS: dict = {}  # on the scheduler: job id -> RabitTracker (kept alive until released)


def _tracker_on_scheduler(world_size: int, timeout: float, job: str, dask_scheduler=None) -> dict:
    from distributed.comm import get_address_host

    from ..comm.collective import start_tracker

    host = get_address_host(dask_scheduler.address)
    tracker, args = start_tracker(world_size, host, timeout)
    _TRACKERS[job] = tracker
    return args


def _free_tracker(job: str, dask_scheduler=None) -> None:
    tracker = _TRACKERS.pop(job, None)
    if tracker is not None:
        try:
            tracker.free()
        except Exception:  # noqa: BLE001 - a tracker whose workers died cannot shut down cleanly
            pass


def make_spec(
    client,
    world_size: int,
    kind: str,
    timeout: float,
    nccl_device_ids=None,
    workers=(),
    kept_states=(),
    device: int = 0,
) -> dict:
    """A communicator spec for ``world_size`` ranks (see the module docstring).

    Parameters
    ----------
    kind : {"auto", "host", "nccl"}
        ``auto``: one rank needs none, NCCL when every rank has its own GPU, else host.
    nccl_device_ids : list of int or None
        The GPU of every rank (from the workers), or None for CPU workers.
    workers : sequence of str
        The job's workers in rank order.
    kept_states : sequence of Kept or None
        What NCCL communicator each of those workers keeps (:func:`._nccl_pool.kept_state`).
    device : int
        The CUDA device ordinal the ranks train on.
    """
    if kind not in ("auto", "host", "nccl"):
        raise DGBoostValueError(f"communicator must be 'auto', 'host' or 'nccl', got {kind!r}")
    if kind == "auto":
        if world_size == 1:
            return {"kind": "local"}
        distinct = nccl_device_ids is not None and len(set(nccl_device_ids)) == len(nccl_device_ids)
        kind = "nccl" if distinct else "host"
    job = uuid.uuid4().hex
    if kind == "nccl":
        if nccl_device_ids is None:
            raise DGBoostValueError("communicator='nccl' needs CUDA workers (device='cuda')")
        if len(set(nccl_device_ids)) != len(nccl_device_ids):
            raise DGBoostValueError(
                "communicator='nccl': NCCL refuses two ranks on one GPU "
                f"(ranks use GPUs {nccl_device_ids}); use communicator='host'"
            )
        from ..comm.nccl import new_unique_id
        from ._nccl_pool import reusable_token

        # read here, on the client, and sent with the spec: the workers never read the
        # configuration. Collectives queued on the stream by default: no host wait per
        # collective (docs/performance-notes.md); off brings the waits back. Not keeping: every
        # job makes its communicator and destroys it (no GPU memory held between jobs)
        config = get_config()
        stream_ordered = config["nccl_stream_ordered"]
        keep = config["nccl_keep_communicators"]
        token = reusable_token(list(kept_states), list(workers), device) if keep else None
        spec = {
            "kind": "nccl",
            "job": job,
            "timeout": timeout,
            "stream_ordered": stream_ordered,
            "keep": keep,
            "reuse": token is not None,
            "token": token or job,
            "members": tuple(workers),
            "device": device,
        }
        spec["uid"] = None if token is not None else new_unique_id()
        return spec
    try:
        args = bounded_call(
            client.run_on_scheduler,
            _tracker_on_scheduler,
            world_size,
            timeout,
            job,
            what="the collective's tracker on the scheduler (client.run_on_scheduler)",
            timeout=timeout,
        )
        where = "scheduler"
    except CommunicationError:
        raise
    except Exception:  # noqa: BLE001 - dgboost not importable on the scheduler: run it here
        from distributed.comm import get_address_host

        from ..comm.collective import start_tracker

        tracker, args = start_tracker(world_size, get_address_host(client.scheduler.address), timeout)
        _TRACKERS[job] = tracker
        where = "client"
    # read on the client, as the NCCL settings: the workers' own configuration is not read
    verbosity = get_config()["verbosity"]
    return {"kind": "host", "args": args, "job": job, "where": where, "timeout": timeout, "verbosity": verbosity}


def release_spec(client, spec: dict) -> None:
    """Free what :func:`make_spec` started (the tracker), whatever the job's outcome."""
    if spec.get("kind") != "host":
        return
    if spec.get("where") == "scheduler":
        with contextlib.suppress(Exception):
            bounded_call(
                client.run_on_scheduler,
                _free_tracker,
                spec["job"],
                what="the tracker's release",
                timeout=spec["timeout"],
            )
    else:
        _free_tracker(spec["job"])


def open_comm(spec: dict, rank: int, world_size: int):
    """The communicator of ``rank`` as a context manager (on the worker)."""
    from ..comm.base import LocalComm

    if spec["kind"] == "local":
        return contextlib.nullcontext(LocalComm())
    if spec["kind"] == "host":
        from ..comm.collective import CollectiveComm

        return CollectiveComm(
            spec["args"], rank, world_size, timeout=spec["timeout"], verbosity=spec.get("verbosity", 1)
        )
    return _nccl_comm(spec, rank, world_size)


@contextlib.contextmanager
def _nccl_comm(spec: dict, rank: int, world_size: int):
    """An NCCL rank: the communicator this worker keeps when the spec reuses it, else a new
    one; kept for the next job when this one ends well (and the spec asks to keep it)."""
    from ..comm.nccl import NcclComm
    from . import _nccl_pool

    kept = _nccl_pool.Kept(
        spec.get("token", spec.get("job", "")), tuple(spec.get("members", ())), rank, int(spec.get("device", 0))
    )
    given = None
    if spec.get("reuse"):
        given = _nccl_pool.take(kept)
    elif spec.get("keep"):
        _nccl_pool.discard()  # the new one replaces it: its GPU memory goes first
    comm = NcclComm(
        spec["uid"],
        rank,
        world_size,
        timeout=spec["timeout"],
        stream_ordered=spec.get("stream_ordered", False),
        communicator=given,
        keep=bool(spec.get("keep")),
    )
    with comm, _nccl_pool.in_use(spec.get("job", ""), comm):
        yield comm
    if comm.kept is not None:
        _nccl_pool.keep(kept, comm.kept)
