"""Where the time of a ``dgboost.dask.train`` job goes (``train(..., profile=True)``).

Each rank times its own stages with host clocks: the rank task's start (wall clock, so the
client can tell how long Dask took to start it), assembling its partitions into one matrix,
opening the communicator, the set-up inside :func:`dgboost.training.train` (cuts, binning,
base margins: everything before the first round), the rounds, and the collectives inside them
(:class:`dgboost.comm.timed.TimedComm`), and the time spent in Numba's compiler (a
compilation, or a load from its cache: a job after the first in a worker should need
neither). The client adds its own stages (partition checks, placement, communicator spec,
waiting for the ranks).
"""

from __future__ import annotations

import contextlib
import statistics
import time
from typing import Iterator

from ..training import TrainingCallback

__all__ = ["RankClock", "job_profile", "numba_compiler_use"]


@contextlib.contextmanager
def numba_compiler_use() -> Iterator[dict]:
    """Record Numba's compiler inside the ``with`` block (every thread of the process).

    Yields a dict filled when the block ends: ``entries`` (times the compiler lock was
    taken: a compilation or a load from the on-disk cache), ``seconds`` (time holding it,
    outermost entries only) and ``compiled`` (names of the functions compiled, not loaded).
    """
    from numba.core import event

    out: dict = {"entries": 0, "seconds": 0.0, "compiled": []}
    with event.install_recorder("numba:compiler_lock") as locks, event.install_recorder("numba:compile") as compiles:
        yield out
    depth, since = 0, 0.0
    for stamp, ev in locks.buffer:
        if ev.is_start:
            out["entries"] += 1
            depth += 1
            if depth == 1:
                since = stamp
        else:
            depth -= 1
            if depth == 0:
                out["seconds"] += stamp - since
    out["compiled"] = sorted(
        {
            getattr(getattr(ev.data["dispatcher"], "py_func", None), "__qualname__", "?")
            for _, ev in compiles.buffer
            if ev.is_start
        }
    )


class RankClock(TrainingCallback):
    """Host-clock marks of one rank's training: before the first round and after each round."""

    def __init__(self):
        self._start: float | None = None
        self._round_ends: list[float] = []

    def before_training(self, model):
        self._start = time.perf_counter()
        return model

    def after_iteration(self, model, epoch: int, evals_log: dict) -> bool:
        self._round_ends.append(time.perf_counter())
        return False

    def marks(self, since: float, until: float) -> dict:
        """``{"setup_s", "rounds_s", "round_s_median", "rounds", "round_s_first", "round_s_max",
        "rounds_over_median_s"}`` (``time.perf_counter`` seconds): from ``since`` (the call of
        ``train``) to the first round's start, from there to the last round's end, the median
        round, the number of rounds, the first and the longest round, and what the rounds took
        beyond the median, summed (where the total exceeds rounds x median). ``until``: when
        ``train`` returned (the set-up's end when no round ran)."""
        start, ends = self._start, self._round_ends
        if start is None or not ends:
            return {
                "setup_s": (start or until) - since,
                "rounds_s": 0.0,
                "round_s_median": 0.0,
                "rounds": 0,
                "round_s_first": 0.0,
                "round_s_max": 0.0,
                "rounds_over_median_s": 0.0,
            }
        per_round = [b - a for a, b in zip([start, *ends[:-1]], ends)]
        median = statistics.median(per_round)
        return {
            "setup_s": start - since,
            "rounds_s": ends[-1] - start,
            "round_s_median": median,
            "rounds": len(ends),
            "round_s_first": per_round[0],
            "round_s_max": max(per_round),
            "rounds_over_median_s": sum(max(0.0, t - median) for t in per_round),
        }


def job_profile(client_stages: dict, submitted_at: float, received_at: float, ranks: list[dict]) -> dict:
    """The profile returned to the user.

    Parameters
    ----------
    client_stages : dict
        ``{stage: seconds}`` measured on the client.
    submitted_at : float
        ``time.time()`` when the rank tasks were submitted.
    received_at : float
        ``time.time()`` when the client held every rank's result.
    ranks : list of dict
        Each rank's own profile (rank order), with ``started_at`` and ``ended_at`` in
        ``time.time()`` seconds.

    Returns
    -------
    dict
        ``{"client": {...}, "ranks": [...], "slowest_rank": {...}}``; every rank also gets
        ``dispatch_s`` (submission to the rank's start) and ``return_s`` (the rank's end to the
        client holding every result: Dask's messages, the results' transfer, the rank's
        clean-up after its last stage), as the clocks of one host see them.
    """
    out_ranks = []
    for r in ranks:
        r = dict(r)
        r["dispatch_s"] = r.pop("started_at") - submitted_at
        r["return_s"] = received_at - r.pop("ended_at")
        out_ranks.append(r)
    slowest = max(out_ranks, key=lambda r: r["dispatch_s"] + r["total_s"]) if out_ranks else {}
    return {"client": dict(client_stages), "ranks": out_ranks, "slowest_rank": slowest}
