"""Which worker trains on which partitions, and in which rank order.

A row's identity is its index in the partitions' rows concatenated in partition order: it
feeds the sketch sample, row subsampling and the order AUC sees. Two ways to place ranks:

* :func:`place_where_held`: every worker trains on the partitions it already holds, whatever
  their order (Dask's scheduler spreads neighbouring partitions over workers), and each rank
  is told the global row offset of each of its partitions. Nothing moves.
* :func:`place`: each rank holds a *contiguous* run of partitions, the ranks following the
  partitions' order. Ranking needs it (a query group's index is counted rank after rank);
  where the partitions do not lie that way, the runs are balanced by rows and Dask moves the
  partitions a rank lacks.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Placement", "imbalance_note", "place", "place_where_held", "row_runs"]


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

    def runs_where_held(self, holders: list[str]) -> list[list[int]] | None:
        """Another matrix's partitions on the ranks that hold them (None if a holder is not
        one of these ranks)."""
        return _runs_by_holder(self.workers, holders)

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


def place_where_held(holders: list[str], workers: list[str]) -> Placement:
    """Ranks that train on the partitions they hold (nothing moves).

    Parameters
    ----------
    holders : list of str, length P
        The worker that holds partition i (the first of its replicas).
    workers : list of str
        Every worker of the cluster; each becomes one rank (ordered by the first partition
        it holds; workers that hold nothing come last and get no rows).

    Returns
    -------
    Placement
        ``runs[r]``: the partitions rank r holds, increasing (not necessarily contiguous).
    """
    first_seen: dict[str, int] = {}
    for i, h in enumerate(holders):
        first_seen.setdefault(h, i)
    order = sorted((w for w in first_seen if w in workers), key=first_seen.get)
    order += sorted(w for w in workers if w not in first_seen)
    return Placement(order, _runs_by_holder(order, holders), 0)


def _runs_by_holder(ranks: list[str], holders: list[str]) -> list[list[int]] | None:
    """``runs[r]``: the partitions (increasing) that ``ranks[r]`` holds; None if a holder is
    not one of the ranks."""
    rank_of = {w: r for r, w in enumerate(ranks)}
    if not all(h in rank_of for h in holders):
        return None
    runs: list[list[int]] = [[] for _ in ranks]
    for i, h in enumerate(holders):
        runs[rank_of[h]].append(i)
    return runs


def row_runs(runs: list[int], rows: list[int]) -> list[tuple[int, int]]:
    """(global offset, rows) of each listed partition: its rows' place in the concatenation of
    all partitions (``rows[i]`` rows each) in partition order."""
    offsets = np.concatenate([[0], np.cumsum(np.asarray(rows, dtype=np.int64))])
    return [(int(offsets[i]), int(rows[i])) for i in runs]


# fewer extra rows than this on the busiest rank cost a round little (a warm-up job's 20,000
# rows on one of 4 workers is not worth a warning)
_MIN_EXCESS_ROWS = 100_000


def imbalance_note(rows_per_rank: list[int], limit: float = 1.25, min_excess_rows: int | None = None) -> str | None:
    """A sentence for the user when the busiest rank holds more than ``limit`` times the mean
    rows (every rank waits for it at each collective) and at least ``min_excess_rows`` more
    than the mean (default ``_MIN_EXCESS_ROWS``), else None.

    Parameters
    ----------
    rows_per_rank : list of int
    limit : float
    min_excess_rows : int, optional
    """
    if len(rows_per_rank) < 2 or sum(rows_per_rank) == 0:
        return None
    mean = sum(rows_per_rank) / len(rows_per_rank)
    busiest = max(rows_per_rank)
    floor = _MIN_EXCESS_ROWS if min_excess_rows is None else min_excess_rows
    if busiest <= limit * mean or busiest - mean < floor:
        return None
    return (
        f"the workers hold {min(rows_per_rank):,} to {busiest:,} rows ({busiest / mean:.1f}x the mean): "
        "training runs at the pace of the busiest worker; persist the partitions evenly over the "
        "workers to use them all"
    )
