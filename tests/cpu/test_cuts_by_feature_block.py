"""Cuts sketched by feature block (each rank receives only its block's columns of the sample)
are bit for bit those of one process and of gathering the whole sample, for a fraction of the bytes."""

from __future__ import annotations

import numpy as np
import pytest

from dgboost.comm import LocalComm, run_in_threads
from dgboost.quantile import categorical_cuts, compute_cuts


class _GathersTheWholeSample:
    """A communicator without ``alltoall``: the sketch gathers the whole sample (as NCCL's)."""

    def __init__(self, comm):
        self._comm = comm
        self.rank, self.world_size = comm.rank, comm.world_size

    def allreduce_sum(self, array):
        return self._comm.allreduce_sum(array)

    def allreduce_max(self, array):
        return self._comm.allreduce_max(array)

    def allgather(self, array):
        return self._comm.allgather(array)

    def broadcast(self, obj, root: int = 0):
        return self._comm.broadcast(obj, root)


class _CountsReceivedBytes(_GathersTheWholeSample):
    """Counts the bytes this rank receives from the other ranks (its own part left out)."""

    def __init__(self, comm):
        super().__init__(comm)
        self.received = 0

    def allgather(self, array):
        out = self._comm.allgather(array)
        self.received += out.nbytes - np.asarray(array).nbytes
        return out

    def alltoall(self, parts):
        out = self._comm.alltoall(parts)
        self.received += sum(p.nbytes for k, p in enumerate(out) if k != self.rank)
        return out


def _data(n: int, features: int, seed: int = 0):
    """Values with missing entries, a feature of few distinct values, categorical codes in the
    last two columns, -0.0 next to +0.0, and weights of which some are zero."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, features)).astype(np.float32)
    x[rng.random(x.shape) < 0.15] = np.nan
    x[:, 0] = np.round(x[:, 0])
    x[::7, 1] = -0.0
    x[:, -2:] = rng.integers(0, 9, size=(n, 2)).astype(np.float32)
    x[rng.random(n) < 0.1, -1] = np.nan
    w = rng.random(n).astype(np.float32)
    w[::11] = 0.0
    cat = np.zeros(features, bool)
    cat[-2:] = True
    return x, w, cat


def _rank_cuts(x, weight, cat, bounds, wrap=lambda comm: comm, sample_rows: int = 1_500):
    def cuts(comm, r):
        comm = wrap(comm)
        rows = slice(int(bounds[r]), int(bounds[r + 1]))
        got = compute_cuts(
            x[rows],
            None if weight is None else weight[rows],
            16,
            seed=3,
            row_offset=int(bounds[r]),
            n_global=x.shape[0],
            comm=comm,
            sample_rows=sample_rows,
        )
        return categorical_cuts(got, x[rows], cat, comm)

    return cuts


@pytest.mark.parametrize("world", [1, 2, 3, 4])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_cuts_by_feature_block_are_those_of_one_process_and_of_the_whole_gathered_sample(world, weighted):
    n, features = 4_003, 7
    x, w, cat = _data(n, features)
    weight = w if weighted else None
    one = categorical_cuts(compute_cuts(x, weight, 16, seed=3, sample_rows=1_500), x, cat)
    bounds = np.linspace(0, n, world + 1).astype(int)
    if world > 2:
        bounds[2] = bounds[1]  # rank 1 holds no rows
    by_block = run_in_threads(world, _rank_cuts(x, weight, cat, bounds))
    gathered = run_in_threads(world, _rank_cuts(x, weight, cat, bounds, _GathersTheWholeSample))
    for got in [*by_block, *gathered]:
        assert got.ptrs.tobytes() == one.ptrs.tobytes()
        assert got.values.tobytes() == one.values.tobytes()


@pytest.mark.parametrize("world", [2, 3, 4])
def test_each_rank_receives_about_one_world_of_the_sample(world):
    n, features = 6_000, 12  # every row sampled: the sample is the whole matrix
    x, _, _ = _data(n, features, seed=1)
    sample_bytes = x.nbytes
    bounds = np.linspace(0, n, world + 1).astype(int)
    comms: dict = {}

    def counted(comm):
        comms[comm.rank] = _CountsReceivedBytes(comm)
        return comms[comm.rank]

    run_in_threads(world, _rank_cuts(x, None, None, bounds, counted, sample_rows=n))
    for rank, comm in comms.items():
        # its block's columns of the other ranks' rows, and every rank's cut values (small)
        block = sample_bytes / world * (world - 1) / world
        assert comm.received <= 1.05 * block + 16 * features * 4 * 2, (rank, comm.received, sample_bytes)
        assert comm.received >= 0.95 * block
    # against the whole sample gathered: each rank received (world - 1) / world of it
    whole: dict = {}

    def gathering(comm):
        whole[comm.rank] = _CountsReceivedBytes(comm)
        return _GathersTheWholeSample(whole[comm.rank])

    run_in_threads(world, _rank_cuts(x, None, None, bounds, gathering, sample_rows=n))
    assert all(c.received >= sample_bytes * (world - 1) / world for c in whole.values())


def test_the_local_communicator_sends_its_one_part_to_itself():
    part = np.arange(6, dtype=np.float32).reshape(2, 3)
    (got,) = LocalComm().alltoall([part])
    np.testing.assert_array_equal(got, part)
    with pytest.raises(ValueError, match="one part per rank"):
        LocalComm().alltoall([part, part])


def test_the_timed_communicator_has_an_alltoall_only_where_the_wrapped_one_does():
    from dgboost.comm.timed import TimedComm

    timed = TimedComm(LocalComm())
    (got,) = timed.alltoall([np.ones(3, np.float32)])
    np.testing.assert_array_equal(got, np.ones(3, np.float32))
    assert timed.stats["alltoall"]["calls"] == 1 and timed.stats["alltoall"]["bytes"] == 0  # nothing left the rank
    assert not hasattr(TimedComm(_GathersTheWholeSample(LocalComm())), "alltoall")
