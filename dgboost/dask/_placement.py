"""Which worker trains on which partitions, and in which rank order.

The model is that of the ranks' rows concatenated in rank order (row indices feed the sketch
sample and row subsampling), so each rank must hold a *contiguous* run of partitions, and the
ranks must follow the partitions' order. Where the partitions already lie that way on the
workers (Dask places neighbouring root tasks together) nothing moves; otherwise the runs are
balanced by rows and Dask moves the partitions a rank lacks.
"""
from __future__ import annotations

import numpy as np

__all__ = ["Placement", "place"]


class Placement:
    """Ranks of a training job.

    Attributes
    ----------
    workers : list of str
        Worker addresses in rank order (workers that hold nothing come last and get no rows).
    runs : list of list of int
        ``runs[r]``: the partition indices of rank r, contiguous and increasing.
    moved : int
        Partitions that must move to the rank that trains on them.
    """

    def __init__(self, workers: list[str], runs: list[list[int]], moved: int):
        self.workers = workers
        self.runs = runs
        self.moved = moved

    def runs_for(self, holders: list[str], rows: list[int]) -> list[list[int]]:
        """Contiguous runs of another matrix's partitions (an evaluation set) over these ranks."""
        rank_of = {w: r for r, w in enumerate(self.workers)}
        ranks = [rank_of.get(h, -1) for h in holders]
        if all(r >= 0 for r in ranks) and all(a <= b for a, b in zip(ranks, ranks[1:])):
            runs = [[] for _ in self.workers]
            for i, r in enumerate(ranks):
                runs[r].append(i)
            return runs
        return _balanced_runs(rows, len(self.workers))


def _balanced_runs(rows: list[int], n_ranks: int) -> list[list[int]]:
    """Split partitions 0..P-1 into ``n_ranks`` contiguous runs of about equal row counts."""
    total = float(sum(rows))
    ends = np.cumsum(rows, dtype=np.float64)
    runs: list[list[int]] = [[] for _ in range(n_ranks)]
    for i, end in enumerate(ends):
        middle = end - rows[i] / 2.0  # a partition goes to the rank whose share holds its middle
        r = min(int(middle * n_ranks / total), n_ranks - 1) if total > 0 else min(i, n_ranks - 1)
        runs[r].append(i)
    return runs


def place(holders: list[str], rows: list[int], workers: list[str]) -> Placement:
    """Ranks for partitions held by ``holders`` (one address per partition) on ``workers``.

    Parameters
    ----------
    holders : list of str, length P
        The worker that holds partition i (the first of its replicas).
    rows : list of int, length P
    workers : list of str
        Every worker of the cluster; each becomes one rank.

    Returns
    -------
    Placement
    """
    first_seen: dict[str, int] = {}
    for i, h in enumerate(holders):
        first_seen.setdefault(h, i)
    order = sorted(first_seen, key=first_seen.get) + sorted(w for w in workers if w not in first_seen)
    order = [w for w in order if w in workers] + [w for w in workers if w not in order]
    runs = Placement(order, [], 0).runs_for(holders, rows)
    moved = sum(1 for r, run in enumerate(runs) for i in run if holders[i] != order[r])
    return Placement(order, runs, moved)
