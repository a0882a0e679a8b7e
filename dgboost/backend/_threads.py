"""How many threads the CPU kernels use.

``nthread`` given (> 0): that many (at most Numba's pool, ``NUMBA_NUM_THREADS``). ``nthread=0``,
the default: the threads of the surrounding job when a caller has said (a Dask worker's rank
uses its worker's thread count, :func:`default_threads`), else the cores this process may use:
its CPU affinity (``taskset``, a batch system's cpuset) and its container's CPU quota (as
XGBoost reads it), not every core of the machine. Numba's thread count is per calling thread,
so the CPU backend sets it for every call that builds one (a ``nthread=1`` run does not leave
the next default run of the same thread on one thread). The thread count never changes a
model: histogram sums are integers.

Busy machines: Numba's OpenMP pool (its usual threading layer on Linux) spins after every
parallel region by default, taking the cores that the working threads need when other
processes keep the machine busy: with three CPU-bound processes on four cores, 20 rounds took
6.6 s instead of 1.0 s, and ``nthread=1`` did not help (the spinning pool was still there).
:func:`start_pool` starts the pool with ``OMP_WAIT_POLICY=PASSIVE`` (idle threads sleep),
unless the user set the variable; on an idle machine the difference was within noise.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

__all__ = ["usable_cores", "default_threads", "resolve_threads", "start_pool", "numba_threads", "dask_worker_threads"]

_pool_lock = threading.Lock()
_pool = {"started": False}  # once per process: the environment is touched at most once

_local = threading.local()  # .threads: the calling thread's default for nthread=0, or absent

# cgroup v2, then v1: (quota file, period file or None when one file holds "quota period")
_QUOTA_FILES = (
    ("/sys/fs/cgroup/cpu.max", None),
    ("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "/sys/fs/cgroup/cpu/cpu.cfs_period_us"),
)


def _cgroup_cpus() -> int | None:
    """Whole CPUs of the container's CPU quota (at least 1), or None without a quota."""
    for quota_file, period_file in _QUOTA_FILES:
        try:
            with open(quota_file, encoding="ascii") as f:
                words = f.read().split()
            if period_file is not None:
                with open(period_file, encoding="ascii") as f:
                    words = words[:1] + f.read().split()[:1]
        except OSError:
            continue
        if len(words) < 2 or words[0] in ("max", "-1"):
            return None
        try:
            quota, period = int(words[0]), int(words[1])
        except ValueError:
            return None
        # a fractional quota (1.5 CPUs) rounds down: more threads than the quota only wait
        return max(1, quota // period) if quota > 0 and period > 0 else None
    return None


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity, bounded by a container's CPU quota.

    Returns
    -------
    int
        At least 1.
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        cores = os.cpu_count() or 1
    quota = _cgroup_cpus()
    return max(1, min(cores, quota) if quota is not None else cores)


@contextlib.contextmanager
def default_threads(threads: int) -> Iterator[None]:
    """Inside the block, ``nthread=0`` means ``threads`` for the calling thread.

    Parameters
    ----------
    threads : int
        The threads the surrounding job gives this thread (e.g. a Dask worker's ``nthreads``),
        at least 1.
    """
    before = getattr(_local, "threads", None)
    _local.threads = max(1, int(threads))
    try:
        yield
    finally:
        _local.threads = before


def resolve_threads(nthread: int, pool: int) -> int:
    """The threads a CPU call with parameter ``nthread`` uses.

    Parameters
    ----------
    nthread : int
        The training / prediction parameter: > 0 that many, 0 the default (see the module
        docstring).
    pool : int
        Numba's thread pool size (``numba.config.NUMBA_NUM_THREADS``), the most it can use.

    Returns
    -------
    int
        From 1 to ``pool``.
    """
    if nthread and nthread > 0:
        wanted = int(nthread)
    else:
        wanted = getattr(_local, "threads", None) or usable_cores()
    return max(1, min(wanted, int(pool)))


def start_pool() -> None:
    """Start Numba's thread pool with passive OpenMP waits (see the module docstring).

    OpenMP reads ``OMP_WAIT_POLICY`` once, when Numba's pool loads it, so the variable is set
    only around that start and removed again: other libraries of the process (XGBoost ships
    its own OpenMP) and child processes see the environment as it was. A pool already started
    (by Numba code run earlier) is left as it is; a value set by the user is kept.
    """
    import numba

    with _pool_lock:
        if _pool["started"]:
            return
        _pool["started"] = True
        if "OMP_WAIT_POLICY" in os.environ:
            numba.get_num_threads()
            return
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
        try:
            numba.get_num_threads()  # starts the pool (Numba's threading layer) if not started yet
        finally:
            os.environ.pop("OMP_WAIT_POLICY", None)


@contextlib.contextmanager
def numba_threads(count: int) -> Iterator[None]:
    """Within the block, Numba's thread count of the calling thread is ``count``; put back after.

    Numba keeps one count per calling thread, read by every parallel kernel that thread runs:
    a caller that sets it for its own kernels must not leave it set for the next caller's.
    """
    import numba

    before = numba.get_num_threads()
    if before == count:  # the usual case: one call, not three
        yield
        return
    numba.set_num_threads(count)
    try:
        yield
    finally:
        numba.set_num_threads(before)


@contextlib.contextmanager
def dask_worker_threads() -> Iterator[None]:
    """On a Dask worker: inside the block ``nthread=0`` means the worker's ``nthreads``, and
    Numba kernels called directly (the CPU SHAP engine's) run on that many threads; outside a
    worker nothing changes.

    Prediction and explanation tasks take it so that several workers sharing a host do not
    each use every core (training ranks get the same through :func:`default_threads`).
    """
    try:
        from distributed import get_worker

        worker = get_worker()
    except (ImportError, ValueError):  # not on a Dask worker
        yield
        return
    import numba

    start_pool()
    with default_threads(int(worker.state.nthreads)), numba_threads(resolve_threads(0, numba.config.NUMBA_NUM_THREADS)):
        yield
