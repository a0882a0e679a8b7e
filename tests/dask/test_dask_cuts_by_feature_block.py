"""Cuts sketched by feature block across Dask worker processes (XGBoost's collective on the
host) are bit for bit one process's and those of gathering the whole sample."""

from __future__ import annotations

import numpy as np
import pytest

from dgboost.dask._waits import cluster_workers
from dgboost.quantile import categorical_cuts, compute_cuts

pytestmark = pytest.mark.dask


def _data(n: int = 5_001, features: int = 8, seed: int = 2):
    """Missing values, -0.0, a feature of few values, two categorical columns, zero weights."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, features)).astype(np.float32)
    x[rng.random(x.shape) < 0.15] = np.nan
    x[:, 0] = np.round(x[:, 0])
    x[::5, 1] = -0.0
    x[:, -2:] = rng.integers(0, 12, size=(n, 2)).astype(np.float32)
    w = rng.random(n).astype(np.float32)
    w[::13] = 0.0
    cat = np.zeros(features, bool)
    cat[-2:] = True
    return x, w, cat


class _Counted:
    """The rank's communicator, counting the bytes received from other ranks; without
    ``alltoall`` when ``whole`` (the sketch then gathers the whole sample)."""

    def __init__(self, comm, whole: bool):
        self._comm, self.received = comm, 0
        self.rank, self.world_size = comm.rank, comm.world_size
        if not whole:
            self.alltoall = self._alltoall

    def allreduce_sum(self, array):
        return self._comm.allreduce_sum(array)

    def allreduce_max(self, array):
        return self._comm.allreduce_max(array)

    def allgather(self, array):
        out = self._comm.allgather(array)
        self.received += out.nbytes - np.asarray(array).nbytes
        return out

    def _alltoall(self, parts):
        out = self._comm.alltoall(parts)
        self.received += sum(p.nbytes for k, p in enumerate(out) if k != self.rank)
        return out

    def broadcast(self, obj, root: int = 0):
        return self._comm.broadcast(obj, root)


def _rank(args: dict, rank: int, world: int, x, w, cat, row_offset: int, n_global: int, sample_rows: int):
    """On a worker: this rank's cuts by feature block and from the whole sample, and the bytes
    it received for each."""
    from dgboost.comm.collective import CollectiveComm

    out = []
    with CollectiveComm(args, rank, world, timeout=60, verbosity=0) as comm:
        for whole in (False, True):
            counted = _Counted(comm, whole)
            cuts = compute_cuts(
                x, w, 32, seed=9, row_offset=row_offset, n_global=n_global, comm=counted, sample_rows=sample_rows
            )
            cuts = categorical_cuts(cuts, x, cat, counted)
            out.append((cuts.ptrs, cuts.values, counted.received))
    return out


def _on_workers(client, x, w, cat, sample_rows: int):
    from dgboost.comm.collective import start_tracker

    workers = sorted(cluster_workers(client))
    world = len(workers)
    tracker, args = start_tracker(world, "127.0.0.1", timeout=60)
    try:
        bounds = np.linspace(0, x.shape[0], world + 1).astype(int)
        futures = [
            client.submit(
                _rank,
                args,
                r,
                world,
                x[bounds[r] : bounds[r + 1]],
                None if w is None else w[bounds[r] : bounds[r + 1]],
                cat,
                int(bounds[r]),
                x.shape[0],
                sample_rows,
                workers=[addr],
                allow_other_workers=False,
                pure=False,
            )
            for r, addr in enumerate(workers)
        ]
        return client.gather(futures)
    finally:
        tracker.free()


@pytest.mark.parametrize("n_workers", [1, 2, 3])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_every_worker_gets_the_single_process_cuts_by_feature_block_and_from_the_whole_sample(
    dask_client, n_workers, weighted
):
    x, w, cat = _data()
    weight = w if weighted else None
    one = categorical_cuts(compute_cuts(x, weight, 32, seed=9, sample_rows=2_000), x, cat)
    for by_block, whole in _on_workers(dask_client(n_workers), x, weight, cat, sample_rows=2_000):
        for ptrs, values, _ in (by_block, whole):
            assert ptrs.tobytes() == one.ptrs.tobytes()
            assert values.tobytes() == one.values.tobytes()


@pytest.mark.parametrize("n_workers", [2, 3])
def test_a_worker_receives_about_one_world_of_what_gathering_the_whole_sample_brings_it(dask_client, n_workers):
    x, _, _ = _data(n=9_000, features=12)
    for (_, _, by_block), (_, _, whole) in _on_workers(dask_client(n_workers), x, None, None, sample_rows=9_000):
        # whole: (world - 1) / world of the sample; by block: 1 / world of that, and the cuts
        assert whole >= x.nbytes * (n_workers - 1) / n_workers
        assert by_block <= 1.05 * whole / n_workers + 32 * 12 * 4 * 2
