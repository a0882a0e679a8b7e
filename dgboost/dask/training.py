"""``dgboost.dask.train``: one long-running task per worker, each a rank of ``training.train``.

The job (docs/design.md §5.2 "Training"): the DaskDMatrix partitions are already computed on the workers;
every partition is checked where it lives (preflight) before anything else; the partitions
are placed in contiguous runs, one per worker, in rank order (:mod:`._placement`); a
communicator is set up (Rabit tracker on the scheduler, or an NCCL id); then exactly one task
per worker, pinned to it, concatenates its partitions (on its GPU for CuPy / cuDF data) and
runs :func:`dgboost.training.train` with that communicator. Rank 0 returns the model.

While the ranks run, the client watches them: a rank that fails, or a worker that leaves the
cluster, ends the job with a :class:`~dgboost.errors.DGBoostError`, so the same client can
train again. The other ranks free their workers when their collectives fail or time out; for
an NCCL job the client also aborts their communicators at once (:func:`._nccl_pool.abort_job`),
so they need not wait for the timeout.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
import uuid
import warnings
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from .._stages import recording
from .._training_job import check_features
from ..backend._compile_notice import NOTICE, notice_to
from ..backend._threads import default_threads
from ..checkpoint import checkpointer_for
from ..comm.timed import TimedComm
from ..config import config_context, get_config
from ..device import parse_device, resolve_device
from ..errors import CommunicationError, DGBoostTypeError, DGBoostValueError
from ..params import TrainParams, parse_params
from ._communicator import make_spec, open_comm, release_spec
from ._matrix import DaskDMatrix, agreed_code_counts, as_rank_dmatrix, check_eval_categories
from ._placement import imbalance_note, place, place_where_held, row_runs
from ._preflight import check_partitions
from ._profile import RankClock, job_profile, numba_compiler_use
from ._rank_log import shorten_rank_failures
from ._waits import bounded_call, cluster_workers

if TYPE_CHECKING:  # annotations only: the ranks import the training driver when they run
    from ..booster import Booster
    from ..callback import TrainingCallback

__all__ = ["train"]

_POLL_SECONDS = 0.5
# an abort is sent, not waited for: its message is handed to the scheduler in milliseconds
_ABORT_SECONDS = 30.0
_RANK_KEY = "dgboost-train-rank-"
_NOTICE_TOPIC = "dgboost-numba-compile-"  # + the job: a worker's rank says it compiles
_RANK_ONLY = ("verbose_eval", "profile", "verbosity", "notice_topic")  # options that are not train()'s
_log = logging.getLogger("dgboost")


def _rank_task(
    rank: int,
    world_size: int,
    spec: dict,
    p: TrainParams,
    train_parts: list[dict],
    train_meta: dict,
    eval_sets: list,
    num_boost_round: int,
    options: dict,
):
    """The body of one rank (runs on its worker): :func:`dgboost.train` with the job's
    communicator and the parameters parsed on the client (not parsed again).

    Returns
    -------
    (Booster or None, dict, dict or None)
        The model on rank 0 (None elsewhere), the evaluation history, and with
        ``options["profile"]`` the rank's profile: ``data_s`` assembling its partitions,
        ``comm_open_s``, ``setup_s`` before the first round (and ``setup_stages_s``: base
        margins, cuts, binning and margins, each waited for on the device), ``rounds_s`` and
        ``round_s_median`` (:meth:`._profile.RankClock.marks`), per collective its calls,
        bytes, ``producer_s`` waiting for the input and ``collective_s`` in the exchange,
        and ``numba``: Numba's compiler entered during the job, ``entries``, ``seconds`` and
        the functions ``compiled`` (a job after the first on the same workers should have
        none), and ``numba_threads``, the CPU threads the rank trained with.
    """
    started_at, t0 = time.time(), time.perf_counter()
    device = resolve_device(p.device)  # the rule of every entry point, on this worker
    if device.is_cuda:
        _use_worker_gpu(device)
    dtrain = as_rank_dmatrix(train_parts, **train_meta)
    evals = [(as_rank_dmatrix(parts, **meta), name) for parts, meta, name in eval_sets]
    t_data = time.perf_counter()
    history: dict = {}
    profile = options["profile"]
    clock = RankClock() if profile else None
    kwargs = {k: v for k, v in options.items() if k not in _RANK_ONLY}
    if clock is not None:
        kwargs["callbacks"] = [*kwargs["callbacks"], clock]
    with (
        _rank_settings(options),
        open_comm(spec, rank, world_size) as comm,
        recording() if profile else nullcontext({}) as setup,
        numba_compiler_use() if profile else nullcontext({}) as numba_use,
    ):
        t_comm = time.perf_counter()
        # imported once the rank has joined the collective: on a worker that was just started the
        # import takes seconds, which the other ranks would otherwise wait for while joining
        from .. import training

        if profile and world_size > 1:
            comm = TimedComm(comm)
        booster = training.train(
            p,
            dtrain,
            num_boost_round,
            evals=evals,
            evals_result=history,
            comm=comm,
            verbose_eval=options["verbose_eval"] if rank == 0 else False,
            **kwargs,
        )
        t_trained = time.perf_counter()
        booster_threads = _numba_threads()
    if not profile:
        return (booster if rank == 0 else None), history, None
    stages = {
        "started_at": started_at,
        "rows": dtrain.num_row(),
        "data_s": t_data - t0,
        "comm_open_s": t_comm - t_data,
        **clock.marks(since=t_comm, until=t_trained),
        "setup_stages_s": dict(setup),
        "comm_close_s": time.perf_counter() - t_trained,
        "total_s": time.perf_counter() - t0,
        "collectives": comm.stats if isinstance(comm, TimedComm) else {},
        "numba": numba_use,
        "numba_threads": booster_threads,
        # the wall clock again, as started_at: the client reads how long the result took to reach it
        "ended_at": time.time(),
    }
    return (booster if rank == 0 else None), history, stages


@contextlib.contextmanager
def _rank_settings(options: dict):
    """A rank's process settings, as the client had them: its ``verbosity`` (read on the
    client, docs/configuration.md), the worker's threads for ``nthread=0`` (as xgboost.dask: not
    every core of a machine that several workers share; not put in the parameters, which are
    saved with the model, the single-process one byte for byte), and the Numba compile notice
    sent to the client, which says it once for the job."""
    from distributed import get_worker

    worker = get_worker()
    shorten_rank_failures(_RANK_KEY)  # a lost peer: one line in this worker's log, no traceback
    topic = options["notice_topic"]
    with (
        config_context(verbosity=options["verbosity"]),
        default_threads(int(worker.state.nthreads)),
        notice_to(lambda: worker.log_event(topic, {"worker": worker.address})),
    ):
        yield


def _numba_threads() -> int:
    """The Numba threads of the calling thread (the CPU backend set them for its calls)."""
    import numba

    return int(numba.get_num_threads())


def _use_worker_gpu(device) -> None:
    """A CUDA worker trains on the GPU dask-cuda gave it (its first visible device)."""
    import cupy

    cupy.cuda.Device(device.index).use()


def _worker_gpu(dask_worker=None):
    """(visible device ordinal 0's PCI bus id or None without a GPU, the NCCL communicator the
    worker keeps or None) of a worker."""
    from ._nccl_pool import kept_state

    try:
        import cupy

        bus = cupy.cuda.Device(0).pci_bus_id
    except Exception:  # noqa: BLE001 - a CPU worker
        bus = None
    return bus, kept_state()


def _holders(client, futures: list) -> list[str]:
    who = client.who_has(futures)
    return [sorted(who[f.key])[0] if who.get(f.key) else "" for f in futures]


# a rank task's key ends with its job's timeout: a later job reads how long a rank left
# running by this one may still hold its worker (a cancelled rank runs on until its
# collective gives up)
_TIMEOUT_TAG = "-timeout"
# a wait for earlier ranks longer than this is logged (one line), so that a pause is explained
_WAIT_NOTICE_SECONDS = 10.0


def _rank_key(rank: int, job: str, timeout: float) -> str:
    """The task key of ``rank`` of ``job``: one of its own per job (Dask would hand back a
    finished job's result for a reused key), naming the job's ``timeout``."""
    return f"{_RANK_KEY}{rank}-{job}{_TIMEOUT_TAG}{float(timeout)!r}"


def _key_timeout(key) -> float | None:
    """The job timeout a rank task's key names (:func:`_rank_key`); None when it names none."""
    _, tag, tail = str(key).rpartition(_TIMEOUT_TAG)
    try:
        return float(tail) if tag else None
    except ValueError:
        return None


def _earlier_rank_timeouts(dask_worker=None) -> list:
    """The job timeout of every rank task still running on this worker (None where its key
    names none); cancelled ones included: a cancelled task's thread runs on until its
    collective fails or times out."""
    # the threads that run a task, as each thread records itself (a task cancelled while it
    # runs can leave the state machine's ``executing`` before its thread ends), and the tasks
    # the state machine counts as running
    with dask_worker.active_threads_lock:
        keys = set(dask_worker.active_threads.values())
    keys |= {ts.key for ts in dask_worker.state.executing | dask_worker.state.long_running}
    return [_key_timeout(key) for key in keys if str(key).startswith(_RANK_KEY)]


def _ranks_still_running(dask_worker=None) -> int:
    """How many rank tasks of earlier jobs still run on this worker."""
    return len(_earlier_rank_timeouts(dask_worker))


def _wait_for_earlier_ranks(client, timeout: float) -> list[str]:
    """Wait until no worker still runs a rank of an earlier job: after a lost worker, the other
    ranks hold their threads until their collectives give up, and a new job's partition checks
    would wait behind them. Returns the workers still running one when the wait ends.

    A rank whose key names its job's timeout ``T`` (:func:`_rank_key`) is waited for at most
    ``min(timeout, 2 T)`` seconds (its late collective gives up within ``T`` of being queued,
    then is aborted); one that names none, ``timeout``. Each question to the workers is bounded
    by ``timeout`` too, so the wait lasts at most about twice that; the last answer that came
    names the workers (a worker that does not answer may still be busy: asked again)."""
    start = time.monotonic()
    deadline = start + timeout
    busy: list[str] = []
    told = False
    while True:
        try:
            # each question bounded by the whole wait, not by what is left of it: on a loaded
            # machine a late answer still names the workers to restart
            running = bounded_call(client.run, _earlier_rank_timeouts, what="ranks still running", timeout=timeout)
        except Exception:  # noqa: BLE001 - a worker starting, leaving or not answering: ask again
            running = None
        if running is not None:
            busy = sorted(w for w, timeouts in running.items() if timeouts)
            if not busy:
                return []
            bound = max(timeout if t is None else min(timeout, 2 * t) for w in busy for t in running[w])
            deadline = start + bound
        now = time.monotonic()
        if now > deadline:
            return busy
        if not told and now - start > _WAIT_NOTICE_SECONDS:
            told = True
            _log.warning(
                "dgboost.dask.train: waiting up to %.0f s more for rank(s) of an earlier job to end on %s",
                deadline - now,
                ", ".join(busy) or "workers that do not answer",
            )
        time.sleep(0.2)


# a worker process takes this long at most to stop and start again (imports included)
_RESTART_SECONDS = 60.0


def _free_stuck_workers(client, timeout: float) -> None:
    """Let earlier ranks give up, and restart the workers where one still runs: its thread is
    stuck in a collective that outlived its own timeout (seen with a peer lost mid-job), and
    the worker would run nothing else. Their partitions are recomputed where they are needed
    (or the partition checks name them)."""
    # a rank left running by a lost peer frees its thread once its late collective is aborted:
    # up to its job's timeout after that collective was queued, and then the abort itself
    waited = time.monotonic()
    stuck = _wait_for_earlier_ranks(client, 2 * timeout)
    if not stuck:
        return
    warnings.warn(
        f"dgboost.dask.train: {len(stuck)} worker(s) still run a rank of an earlier job after "
        f"{time.monotonic() - waited:.0f} s ({', '.join(stuck)}); restarting them",
        RuntimeWarning,
        stacklevel=4,
    )
    n_workers = len(cluster_workers(client))
    restart_s = max(timeout, _RESTART_SECONDS)
    try:
        status = client.restart_workers(stuck, timeout=restart_s, raise_for_error=False)
    except Exception as exc:  # noqa: BLE001 - e.g. workers without a nanny cannot be restarted
        status = {w: repr(exc) for w in stuck}
    failed = {w: s for w, s in status.items() if s != "OK"}
    if failed:
        raise CommunicationError(
            f"worker(s) {', '.join(failed)} still run a rank of an earlier job and could not "
            f"be restarted ({', '.join(map(str, failed.values()))}); restart them, e.g. "
            "client.restart_workers([...])"
        )
    client.wait_for_workers(n_workers, timeout=restart_s)
    # a restarted worker imports dgboost when the first task arrives: done now, so that the
    # import does not count against the next collective's bootstrap ``timeout``
    bounded_call(client.run, _import_rank_modules, what="dgboost's import on restarted workers", timeout=restart_s)


def _import_rank_modules() -> None:
    """Import what a rank task needs (run on restarted workers before a job starts)."""
    import dgboost.training  # noqa: F401


def _rank_meta(dm: DaskDMatrix, runs: list[tuple[int, int]] | None = None) -> dict:
    """Keywords of :func:`as_rank_dmatrix` for one rank (``runs``: its partitions' global
    (row offset, rows), when ranks hold partitions wherever they lie)."""
    return {
        "has": dm.has,
        "missing": dm.missing,
        "feature_names": dm.feature_names,
        "feature_types": dm.feature_types,
        "n_features": dm.n_features,
        "row_runs": runs,
        "max_bin": dm.max_bin,
        "categories": dm.categories,
        "code_counts": getattr(dm, "code_counts", None),
    }


def train(
    client: Any,
    params: Mapping[str, Any] | TrainParams,
    dtrain: DaskDMatrix,
    num_boost_round: int = 10,
    *,
    evals: Sequence[tuple[DaskDMatrix, str]] | None = None,
    obj: Callable | None = None,
    feval: Callable | None = None,
    early_stopping_rounds: int | None = None,
    xgb_model: Booster | str | os.PathLike | None = None,
    verbose_eval: bool | int = True,
    callbacks: Sequence[TrainingCallback] | None = None,
    custom_metric: Callable | None = None,
    communicator: str = "auto",
    timeout: float = 300.0,
    checkpoint_dir: str | os.PathLike | None = None,
    checkpoint_every: int | None = None,
    resume: bool = False,
    retries: int = 0,
    profile: bool = False,
) -> dict:
    """Train on a Dask cluster (``xgboost.dask.train``): every worker is one rank.

    Parameters
    ----------
    client : distributed.Client or None
        None uses the current default client.
    params : dict or TrainParams
        Training parameters, as for :func:`dgboost.train`, parsed once here: the workers get
        the :class:`~dgboost.params.TrainParams`. ``device="cuda"`` trains on each worker's
        GPU (dask-cuda workers: one GPU each).
    dtrain : DaskDMatrix
    num_boost_round : int
    evals : sequence of (DaskDMatrix, str), optional
    obj, feval, custom_metric, early_stopping_rounds, xgb_model, callbacks, verbose_eval
        As for :func:`dgboost.train` (callbacks and custom functions run on every worker;
        only rank 0 prints).
    communicator : {"auto", "host", "nccl"}
        ``auto``: NCCL when every worker has its own GPU and trains on it, else XGBoost's
        Rabit collective on the host (also for CUDA workers that share one GPU).
    timeout : float
        Seconds one collective may wait for a peer before the job fails, and the preflight
        checks of the partitions (on the workers that hold them) may take. A job first waits
        up to twice this for ranks of an earlier failed job to give up, and restarts the
        workers where one still runs (with a ``RuntimeWarning``).
    checkpoint_dir, checkpoint_every, resume
        As for :func:`dgboost.train`: rank 0 writes the checkpoints, so ``checkpoint_dir``
        must be a path every worker can reach (a shared file system on a multi-host cluster).
        A resumed job may run on a different number of workers.
    retries : int
        When a worker is lost during training (a :class:`~dgboost.errors.CommunicationError`),
        train again up to ``retries`` times on the workers that remain, with a new
        communicator, from the newest checkpoint (from the start when there is none yet);
        each retry warns. Needs ``checkpoint_dir``. Other errors are raised at once.
    profile : bool
        Also return where the job's time went, under ``"profile"`` (host clocks, seconds): the
        client's stages and every rank's (dispatch, data, communicator, set-up stages, rounds,
        collectives, Numba compilations: the keys are listed by ``_rank_task`` and
        :func:`._profile.job_profile`). The model is the same with or without it.

    Returns
    -------
    dict
        ``{"booster": Booster, "history": {eval_name: {metric: [values...]}}}`` (and
        ``"profile"`` when asked for). The model is byte-identical to single-process
        :func:`dgboost.train` on the partitions' rows concatenated in order, however the
        partitions are spread over workers.
    """
    from distributed import default_client

    client = client if client is not None else default_client()
    evals = list(evals or [])
    _check_arguments(dtrain, evals, retries, checkpoint_dir, checkpoint_every, resume)
    # parsed once, here: a parameter mistake raises on the client, and the ranks and the
    # partition checks get the dataclass (parse_params hands a validated one back as it is)
    p = parse_params(params)
    if p.tree_method == "exact":
        raise DGBoostValueError(
            "tree_method='exact' is not distributed (XGBoost's exact is not either): use tree_method='hist' "
            "with dgboost.dask, or dgboost.train with tree_method='exact' on one process"
        )
    options = {
        "obj": obj,
        "feval": feval,
        "custom_metric": custom_metric,
        "early_stopping_rounds": early_stopping_rounds,
        "xgb_model": xgb_model,
        "verbose_eval": verbose_eval,
        "callbacks": list(callbacks or []),
        "checkpoint_dir": None if checkpoint_dir is None else str(checkpoint_dir),
        "checkpoint_every": checkpoint_every,
        "resume": bool(resume),
        "profile": bool(profile),
        # read here, on the client, and sent with the job: the workers' own setting is not read
        "verbosity": get_config()["verbosity"],
    }
    for attempt in range(int(retries) + 1):
        try:
            return _train_once(client, p, dtrain, num_boost_round, evals, options, communicator, timeout)
        except CommunicationError as exc:
            if attempt == retries:
                raise
            _before_retry(client, exc, attempt, retries, checkpoint_dir, timeout)
            options["resume"] = True
    raise AssertionError("unreachable")


def _before_retry(client: Any, exc: Exception, attempt: int, retries: int, checkpoint_dir: Any, timeout: float) -> None:
    """Wait for a worker and warn that the job is trained again (retry ``attempt + 1``). The
    partitions the lost worker held are recomputed by Dask when the next attempt's preflight
    asks for them."""
    client.wait_for_workers(1, timeout=timeout)
    n_workers = len(cluster_workers(client))
    warnings.warn(
        f"dgboost.dask.train: {exc}; retry {attempt + 1} of {retries} on {n_workers} "
        f"workers, from the newest checkpoint in {checkpoint_dir}",
        RuntimeWarning,
        stacklevel=3,
    )


def _check_arguments(
    dtrain: DaskDMatrix,
    evals: list,
    retries: int,
    checkpoint_dir: str | os.PathLike | None,
    checkpoint_every: int | None,
    resume: bool,
) -> None:
    """Raise for arguments of :func:`train` of the wrong type or out of range, before any
    worker starts."""
    if isinstance(retries, bool) or int(retries) != retries or retries < 0:
        raise DGBoostValueError(f"retries must be a non-negative integer, got {retries!r}")
    if retries and checkpoint_dir is None:
        raise DGBoostValueError("retries needs checkpoint_dir (a retry resumes from the newest checkpoint)")
    checkpointer_for(checkpoint_dir, checkpoint_every, resume)
    if not isinstance(dtrain, DaskDMatrix):
        raise DGBoostTypeError(f"dtrain must be a dgboost.dask.DaskDMatrix, got {type(dtrain).__name__}")
    for item in evals:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], DaskDMatrix)):
            raise DGBoostTypeError("evals must be a sequence of (DaskDMatrix, name) pairs")


def _train_once(
    client,
    p: TrainParams,
    dtrain: DaskDMatrix,
    num_boost_round: int,
    evals: list,
    options: dict,
    communicator: str,
    timeout: float,
) -> dict:
    """One attempt of :func:`train`: preflight, placement on the current workers, a new
    communicator, one rank task per worker."""
    clock = [time.perf_counter()]

    def lap() -> float:
        clock.append(time.perf_counter())
        return clock[-1] - clock[-2]

    _free_stuck_workers(client, timeout)
    infos, eval_infos = _preflight(client, p, dtrain, evals, options["obj"], timeout)
    stages = {"partition_checks_s": lap()}
    placement, where_held, rows, eval_runs = _place(client, dtrain, evals, infos, eval_infos)
    stages["placement_s"] = lap()
    spec = _communicator_spec(client, p, placement, communicator, timeout)
    stages["communicator_spec_s"] = lap()
    # a key of its own for every job: Dask would hand back a finished job's result for a reused key
    job = uuid.uuid4().hex
    options = {**options, "notice_topic": _NOTICE_TOPIC + job}
    client.subscribe_topic(options["notice_topic"], _compile_notice_once(options["verbosity"]))
    try:
        submitted_at = time.time()
        futures = []
        for rank, worker in enumerate(placement.workers):
            args = _rank_args(dtrain, evals, placement.runs[rank], rows if where_held else None, eval_runs, rank)
            futures.append(
                client.submit(
                    _rank_task,
                    rank,
                    len(placement.workers),
                    spec,
                    p,
                    *args,
                    num_boost_round,
                    options,
                    workers=[worker],
                    allow_other_workers=False,
                    pure=False,
                    key=_rank_key(rank, job, timeout),
                )
            )
        stages["submit_s"] = lap()
        nccl_job = spec.get("job") if spec["kind"] == "nccl" else None
        # every rank has the model's history; the others' results are fetched for their profiles
        # only (a round trip to the scheduler each)
        fetch = None if options["profile"] else [0]
        results = _watch(client, futures, placement.workers, nccl_job, fetch_timeout=timeout, fetch=fetch)
        received_at = time.time()
        stages["ranks_s"] = lap()
    finally:
        release_spec(client, spec)
        client.unsubscribe_topic(options["notice_topic"])
    stages["release_s"] = lap()
    booster, history, _ = results[0]
    out = {"booster": booster, "history": history}
    if options["profile"]:
        stages["total_s"] = clock[-1] - clock[0]
        out["profile"] = job_profile(stages, submitted_at, received_at, [r[2] for r in results])
    return out


def _compile_notice_once(verbosity: int) -> Callable[[Any], None]:
    """The client's handler of one job's compile events: the Numba notice once for the job,
    however many workers compile (and none at ``verbosity`` 0)."""
    said = []

    def handler(event) -> None:
        if not said and verbosity >= 1:
            said.append(True)
            print(NOTICE, file=sys.stderr, flush=True)

    return handler


def _preflight(
    client, p: TrainParams, dtrain: DaskDMatrix, evals: list, obj: Callable | None, timeout: float
) -> tuple[list[dict], list[list[dict]]]:
    """Every partition checked where it lives, before any collective: the partitions' infos
    (:func:`._preflight.check_partitions`) of the training data and of each evaluation set."""
    for dm, name in evals:
        check_features(dm, dtrain.n_features, dtrain.feature_names, f"evaluation set {name!r}")
        check_eval_categories(dtrain, dm, name)
    label_params = p if obj is None else None
    infos = check_partitions(client, dtrain, label_params, "training data", timeout)
    eval_infos = [check_partitions(client, dm, label_params, f"evaluation set {name!r}", timeout) for dm, name in evals]
    if sum(i["rows"] for i in infos) == 0:
        raise DGBoostValueError("the training data has no rows (every partition is empty)")
    for dm, dm_infos in [(dtrain, infos)] + [(dm, e) for (dm, _), e in zip(evals, eval_infos)]:
        dm.code_counts = agreed_code_counts(dm_infos)
    for dm, name in evals:
        check_features(dm, dtrain.n_features, dtrain.feature_names, f"evaluation set {name!r}")
    return infos, eval_infos


def _place(client, dtrain: DaskDMatrix, evals: list, infos: list[dict], eval_infos: list[list[dict]]):
    """The ranks: every worker, each with a contiguous run of partitions.

    Returns
    -------
    (Placement, bool, list of int, list)
        The placement; whether ranks hold the partitions where they lie (told their global
        rows); rows per training partition; per evaluation set (runs per rank, rows per
        partition).
    """
    workers = sorted(cluster_workers(client))
    if not workers:  # every worker left after the partition checks
        raise CommunicationError("the cluster has no workers left to train on (they left after the partition checks)")
    holders, rows = _holders(client, dtrain._parts.futures["data"]), [i["rows"] for i in infos]
    # ranks train where the partitions lie, told each partition's global row offset; ranking
    # counts query groups rank after rank, so there the ranks hold contiguous runs (moving
    # partitions where they do not lie that way)
    where_held = not dtrain.has.get("qid") and all(h in workers for h in holders)
    placement = place_where_held(holders, workers) if where_held else place(holders, rows, workers)
    eval_runs = []
    for dm, e_infos in zip((dm for dm, _ in evals), eval_infos):
        e_holders, e_rows = _holders(client, dm._parts.futures["data"]), [i["rows"] for i in e_infos]
        runs = placement.runs_where_held(e_holders) if where_held else None
        eval_runs.append((runs if runs is not None else placement.runs_for(e_holders, e_rows), e_rows))
    note = imbalance_note([sum(rows[i] for i in run) for run in placement.runs])
    if note is not None:
        warnings.warn(f"dgboost.dask.train: {note}", RuntimeWarning, stacklevel=4)
    return placement, where_held, rows, eval_runs


def _communicator_spec(client, p: TrainParams, placement, communicator: str, timeout: float) -> dict:
    """The job's communicator (:func:`._communicator.make_spec`), NCCL over the workers' GPUs
    where each has its own."""
    device_ids, kept = None, []
    device = parse_device(p.device)
    if device.is_cuda:
        found = bounded_call(
            client.run,
            _worker_gpu,
            workers=list(placement.workers),
            what=f"the GPUs of worker(s) {', '.join(placement.workers)} (client.run)",
            timeout=timeout,
        )
        ids = [found[w][0] if w in found else None for w in placement.workers]
        kept = [found[w][1] if w in found else None for w in placement.workers]
        device_ids = ids if all(i is not None for i in ids) else None
        if device_ids is None:  # the missing-GPU rule, said here too: the workers' warnings stay in their logs
            resolve_device(device, available=(0, "a worker has no usable GPU"))
    return make_spec(
        client,
        len(placement.workers),
        communicator,
        timeout,
        device_ids,
        workers=placement.workers,
        kept_states=kept,
        device=device.index,
    )


def _rank_args(
    dtrain: DaskDMatrix, evals: list, run: list[int], rows: list[int] | None, eval_runs: list, rank: int
) -> tuple:
    """(training partitions, their :func:`as_rank_dmatrix` keywords, evaluation sets) of rank
    ``rank``, whose training partitions are ``run``; ``rows`` (rows per training partition)
    when ranks hold the partitions where they lie, else None."""
    train_parts = [dtrain.partition(i) for i in run]
    train_meta = _rank_meta(dtrain, None if rows is None else row_runs(run, rows))
    eval_sets = []
    for (dm, name), (runs, e_rows) in zip(evals, eval_runs):
        meta = _rank_meta(dm, None if rows is None else row_runs(runs[rank], e_rows))
        if dm.has_categories:  # checked a subset of the training data's (_preflight): its codes
            meta["categories"] = dtrain.categories
        eval_sets.append(([dm.partition(i) for i in runs[rank]], meta, name))
    return train_parts, train_meta, eval_sets


def _watch(
    client,
    futures: list,
    workers: list[str],
    nccl_job: str | None = None,
    fetch_timeout: float = 300.0,
    fetch: Sequence[int] | None = None,
) -> list[Any]:
    """Wait for the rank tasks; fail fast when one errs or its worker leaves the cluster (and,
    for an NCCL job, abort the other ranks' communicator, so they stop waiting for the peer).
    Once all have finished, the results of the ranks ``fetch`` (all when None), in that order,
    are fetched within ``fetch_timeout`` seconds (train's timeout)."""
    from distributed import wait

    def stop(why: str) -> None:
        _cancel(client, futures)
        if nccl_job is not None:
            _abort_nccl_job(client, nccl_job, why)

    while True:
        pending = [f for f in futures if f.status == "pending"]
        if pending:
            try:
                wait(pending, timeout=_POLL_SECONDS, return_when="FIRST_COMPLETED")
            except TimeoutError:
                pass
        errored = [f for f in futures if f.status == "error"]
        if errored:
            _raise_rank_error(client, futures, errored[0], workers, nccl_job)
        cancelled = [r for r, f in enumerate(futures) if f.status == "cancelled"]
        if cancelled:
            stop(f"the task of rank {cancelled[0]} of this job was cancelled")
            raise CommunicationError(
                f"the task of rank {cancelled[0]} (worker {workers[cancelled[0]]}) was "
                "cancelled, e.g. because its worker was lost or restarted; the job was "
                "stopped (train again: the same client can be reused)"
            )
        if all(f.status == "finished" for f in futures):
            deadline = time.monotonic() + fetch_timeout
            try:  # bounded, as every wait on the workers (Client.gather takes no timeout)
                wanted = futures if fetch is None else [futures[r] for r in fetch]
                return [f.result(timeout=max(deadline - time.monotonic(), 1.0)) for f in wanted]
            except TimeoutError:
                raise CommunicationError(
                    f"the ranks finished but their results did not come back within {fetch_timeout:g} s"
                ) from None
        alive = set(cluster_workers(client))
        lost = [(r, w) for r, w in enumerate(workers) if w not in alive and futures[r].status != "finished"]
        if lost:
            rank, worker = lost[0]
            stop(f"worker {worker} (rank {rank} of this job) left the cluster")
            raise CommunicationError(
                f"worker {worker} (rank {rank}) left the cluster during training; "
                "the job was stopped (train again: the same client can be reused)"
            )


# after a rank's collective failed, how long its lost peer's worker may take to be seen gone
# by the scheduler (the peer's socket closes first; the nanny reports the process at once)
_LOST_GRACE_SECONDS = 3.0


def _raise_rank_error(client, futures: list, failed, workers: list[str], nccl_job: str | None) -> None:
    """Stop the job after rank task ``failed`` erred and raise its error: one
    CommunicationError naming the lost worker when the rank's collective failed because a
    worker of the job left the cluster (the lost worker is the cause, not the peer that saw it)."""
    # read the rank's exception before cancelling the others: a cancelled future
    # forgets it (and would raise FutureCancelledError instead)
    exc, tb = failed.exception(), failed.traceback()
    rank = futures.index(failed)
    _cancel(client, [f for f in futures if f is not failed])
    if nccl_job is not None:
        _abort_nccl_job(client, nccl_job, f"rank {rank} of this job failed ({type(exc).__name__}: {exc})")
    if type(exc).__name__ == "KilledWorker":  # distributed gave up on a worker that kept dying
        raise CommunicationError(f"the worker of rank {rank} died while training: {exc}") from exc
    if isinstance(exc, CommunicationError):
        lost = _lost_worker(client, workers, _LOST_GRACE_SECONDS)
        if lost is not None:
            raise CommunicationError(
                f"worker {lost[1]} (rank {lost[0]}) left the cluster during training; the job was "
                f"stopped (rank {rank}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
            ) from exc
    raise exc.with_traceback(tb)


def _lost_worker(client, workers: list[str], grace: float) -> tuple[int, str] | None:
    """(rank, address) of the first worker of the job that left the cluster, looked for during
    ``grace`` seconds; None when they are all still there."""
    deadline = time.monotonic() + grace
    while True:
        alive = set(cluster_workers(client))
        lost = [(r, w) for r, w in enumerate(workers) if w not in alive]
        if lost or time.monotonic() > deadline:
            return lost[0] if lost else None
        time.sleep(0.1)


async def _abort_nccl_job_on_worker(job: str, reason: str, dask_worker=None) -> bool:
    # a coroutine, so that client.run need not wait for it (and it cannot hold the worker)
    from ._nccl_pool import abort_job

    return abort_job(job, reason)


def _abort_nccl_job(client, job: str, why: str) -> None:
    """Abort job ``job``'s NCCL communicator on every worker that still runs one of its ranks
    (fire and forget: a worker that cannot be reached has nothing to free)."""
    try:
        bounded_call(
            client.run,
            _abort_nccl_job_on_worker,
            job,
            f"the job was stopped: {why}",
            wait=False,
            what="the abort of the job's NCCL communicators",
            timeout=_ABORT_SECONDS,
        )
    except Exception as exc:  # noqa: BLE001 - best effort: the ranks' own timeouts still free them
        _log.warning("dgboost.dask: could not abort the job's NCCL communicators: %s", exc)


def _cancel(client, futures: list) -> None:
    try:
        client.cancel(futures, force=True)
    except Exception as exc:  # noqa: BLE001 - cancelling is best effort; the error that matters is raised
        _log.warning("dgboost.dask: could not cancel the rank tasks: %s", exc)
