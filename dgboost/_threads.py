"""Host threads for preparation work: how many, and runs of items spread over them.

Model import, path walks and hashing are passes over arrays of millions of nodes or
elements whose compiled loops release the GIL (``nogil`` Numba functions, ``hashlib``), so a
few threads over runs of trees or chunks shorten them (issue 32: a depth-16 model's import,
walk and key sit on the critical path of a first GPU explainer).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Sequence, TypeVar

import numpy as np

__all__ = ["host_threads", "balanced_runs", "even_runs", "run_tasks", "run_over_runs"]

T = TypeVar("T")

# more threads than this cost more than they save: on the 16-CPU host of an H200 (issue 32,
# benchmarks/results/shap_host_threads/) 8 threads walked SHAP case c's paths in 10.9 ms
# against 16.4 ms with 16 and hashed its table in 4.9 against 6.7 ms (case imported: 16.8
# against 19.7 ms, 8.7 against 8.2 ms)
_MAX_WORKERS = 8


def host_threads() -> int:
    """Threads for host-side preparation (hashing, path walks, model import): the cores this
    process may run on (its CPU affinity), at most 8. (Not the CPU backend's count, which also
    reads a container's quota and a Dask worker's threads: importing it from here would make an
    import cycle, and short bursts of threads over a quota only share the quota.)"""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        n = os.cpu_count() or 1
    return max(1, min(n, _MAX_WORKERS))


def balanced_runs(ends: np.ndarray, runs: int) -> np.ndarray:
    """Cut items into at most ``runs`` consecutive runs of about equal work.

    Parameters
    ----------
    ends : ndarray of int64, shape (n_items + 1,)
        Cumulative work: item ``i`` spans ``ends[i]`` to ``ends[i + 1]`` (node or byte
        offsets), ``ends[0] == 0``, non-decreasing.
    runs : int
        At most this many runs (at least 1).

    Returns
    -------
    ndarray of int64, shape (k + 1,)
        Item indices where the runs start, then ``n_items``: run ``j`` is items
        ``cuts[j]`` to ``cuts[j + 1]``; no run is empty (``k`` may be below ``runs``).
    """
    n_items = ends.shape[0] - 1
    targets = np.linspace(0, ends[-1], max(int(runs), 1) + 1)[1:-1]
    cuts = np.concatenate([[0], np.searchsorted(ends, targets), [n_items]]).astype(np.int64)
    return np.unique(np.clip(cuts, 0, n_items))


def even_runs(n_items: int, runs: int) -> np.ndarray:
    """:func:`balanced_runs` of ``n_items`` items of equal work: int64 (k + 1,) cuts."""
    return np.unique(np.linspace(0, n_items, max(int(runs), 1) + 1).astype(np.int64))


def run_over_runs(fn: Callable[[int, int], T], cuts: np.ndarray, threads: int) -> list[T]:
    """``[fn(cuts[j], cuts[j + 1]) for each run j]`` by :func:`run_tasks`."""
    bounds = zip(cuts[:-1].tolist(), cuts[1:].tolist())
    return run_tasks([lambda a=a, b=b: fn(a, b) for a, b in bounds], threads)


def run_tasks(tasks: Sequence[Callable[[], T]], threads: int) -> list[T]:
    """``[task() for task in tasks]``, on up to ``threads`` threads when there is more than
    one task (a task should release the GIL: a ``nogil`` compiled loop). The results come in
    task order; the exception of the first task (in task order) that raised is raised."""
    if threads <= 1 or len(tasks) <= 1:
        return [task() for task in tasks]
    with ThreadPoolExecutor(max_workers=min(threads, len(tasks))) as pool:
        return list(pool.map(lambda task: task(), tasks))
