"""The NCCL communicators a worker keeps between jobs: reused only by a job of exactly the
same shape on every rank, ended (aborted) otherwise. Pure host logic, with stand-in
communicators: the NCCL runs are in ``tests/gpu/test_multi_gpu.py``."""
from __future__ import annotations

import pytest

import dgboost as dg
from dgboost.dask import _nccl_pool as pool
from dgboost.dask._communicator import make_spec

pytestmark = pytest.mark.dask

WORKERS = ("tcp://a:1", "tcp://b:2", "tcp://c:3")


class _StandIn:
    """Records whether it was aborted, as cupy's NcclCommunicator would be."""

    def __init__(self):
        self.aborted = False

    def abort(self):
        self.aborted = True


def _states(token="t1", members=WORKERS, device=0):
    return [pool.Kept(token, tuple(members), rank, device) for rank in range(len(members))]


@pytest.fixture(autouse=True)
def _empty_pool():
    pool.discard()
    yield
    pool.discard()


def test_a_job_of_the_same_workers_ranks_and_gpu_gets_the_token_every_rank_keeps():
    assert pool.reusable_token(_states(), WORKERS, 0) == "t1"


@pytest.mark.parametrize("change", ["one rank keeps none", "another token on one rank", "other workers",
                                    "ranks in another order", "another gpu", "fewer workers"])
def test_any_other_job_shape_gets_no_token(change):
    states, workers, device = _states(), list(WORKERS), 0
    if change == "one rank keeps none":
        states[1] = None
    elif change == "another token on one rank":
        states[2] = pool.Kept("t2", WORKERS, 2, 0)
    elif change == "other workers":
        workers[2] = "tcp://d:4"
    elif change == "ranks in another order":
        workers = [WORKERS[1], WORKERS[0], WORKERS[2]]
    elif change == "another gpu":
        device = 1
    else:
        states, workers = states[:2], workers[:2]
    assert pool.reusable_token(states, workers, device) is None


def test_a_kept_communicator_is_taken_out_of_the_pool_so_a_failed_job_cannot_hand_it_out_again():
    comm, kept = _StandIn(), _states()[0]
    pool.keep(kept, comm)
    assert pool.kept_state() == kept
    assert pool.take(kept) is comm
    assert pool.kept_state() is None and not comm.aborted
    with pytest.raises(dg.CommunicationError, match="no longer keeps"):
        pool.take(kept)


def test_keeping_a_new_communicator_aborts_the_one_kept_before():
    old, new = _StandIn(), _StandIn()
    pool.keep(_states("t1")[0], old)
    pool.keep(_states("t2")[0], new)
    assert old.aborted and not new.aborted
    assert pool.kept_state().token == "t2"


def test_taking_a_communicator_the_worker_does_not_keep_fails_and_ends_the_one_it_keeps():
    other = _StandIn()
    pool.keep(_states("t1")[0], other)
    with pytest.raises(dg.CommunicationError, match="rank 0 no longer keeps the NCCL communicator of job t2"):
        pool.take(_states("t2")[0])
    assert other.aborted and pool.kept_state() is None


def test_an_nccl_spec_reuses_only_what_every_rank_keeps_and_a_new_one_gets_a_fresh_id(monkeypatch):
    import dgboost.comm.nccl as nccl

    monkeypatch.setattr(nccl, "new_unique_id", lambda: b"fresh id")
    reused = make_spec(None, 3, "nccl", 30.0, [0, 1, 2], workers=WORKERS, kept_states=_states(), device=0)
    assert reused["reuse"] and reused["token"] == "t1" and reused["uid"] is None
    fresh = make_spec(None, 3, "nccl", 30.0, [0, 1, 2], workers=WORKERS, kept_states=[None] * 3, device=0)
    assert not fresh["reuse"] and fresh["uid"] == b"fresh id" and fresh["token"] == fresh["job"]
    assert fresh["members"] == WORKERS and fresh["keep"]
    monkeypatch.setenv("DGBOOST_NCCL_KEEP", "0")
    off = make_spec(None, 3, "nccl", 30.0, [0, 1, 2], workers=WORKERS, kept_states=_states(), device=0)
    assert not off["reuse"] and not off["keep"] and off["uid"] == b"fresh id"


class _FakeNcclComm:
    """Stands in for NcclComm: makes a communicator unless given one, and leaves it in
    ``kept`` when the block ends well and ``keep`` is set (aborting it otherwise)."""

    made: list = []

    def __init__(self, uid, rank, world_size, timeout, stream_ordered, communicator=None, keep=False):
        self.given, self.keep, self.kept = communicator, keep, None
        self.comm = communicator

    def __enter__(self):
        if self.comm is None:
            self.comm = _StandIn()
            _FakeNcclComm.made.append(self.comm)
        return self

    def __exit__(self, exc_type, *rest):
        if exc_type is None and self.keep:
            self.kept = self.comm
        elif exc_type is not None:
            self.comm.abort()


@pytest.fixture
def fake_nccl(monkeypatch):
    import dgboost.comm.nccl as nccl

    _FakeNcclComm.made = []
    monkeypatch.setattr(nccl, "NcclComm", _FakeNcclComm)
    return _FakeNcclComm


def _spec(token, reuse, keep=True):
    return {"kind": "nccl", "uid": None if reuse else b"id", "job": token, "token": token, "timeout": 5.0,
            "stream_ordered": True, "keep": keep, "reuse": reuse, "members": WORKERS, "device": 0}


def test_a_rank_keeps_its_communicator_after_a_good_job_and_the_next_job_of_that_shape_reuses_it(fake_nccl):
    from dgboost.dask._communicator import open_comm

    with open_comm(_spec("job1", reuse=False), 1, 3) as comm:
        first = comm.comm
    assert pool.kept_state() == pool.Kept("job1", WORKERS, 1, 0)
    with open_comm(_spec("job1", reuse=True), 1, 3) as comm:
        assert comm.comm is first  # no new communicator made
        assert pool.kept_state() is None  # out of the pool while in use
    assert len(fake_nccl.made) == 1 and pool.kept_state() == pool.Kept("job1", WORKERS, 1, 0)


def test_a_job_that_fails_leaves_nothing_kept_and_its_communicator_is_aborted(fake_nccl):
    from dgboost.dask._communicator import open_comm

    with open_comm(_spec("job1", reuse=False), 0, 3):
        pass
    kept = fake_nccl.made[0]
    with pytest.raises(RuntimeError, match="training failed"):
        with open_comm(_spec("job1", reuse=True), 0, 3):
            raise RuntimeError("training failed")
    assert kept.aborted and pool.kept_state() is None


def test_a_job_of_another_shape_ends_the_kept_communicator_before_making_its_own(fake_nccl):
    from dgboost.dask._communicator import open_comm

    with open_comm(_spec("job1", reuse=False), 0, 3):
        pass
    with open_comm(_spec("job2", reuse=False), 0, 3):
        assert fake_nccl.made[0].aborted  # its GPU memory went before the new one was made
    assert pool.kept_state().token == "job2" and not fake_nccl.made[1].aborted


def test_a_job_that_keeps_nothing_leaves_the_kept_communicator_alone(fake_nccl):
    from dgboost.dask._communicator import open_comm

    with open_comm(_spec("job1", reuse=False), 0, 3):
        pass
    with open_comm(_spec("job2", reuse=False, keep=False), 0, 3):
        pass
    assert not fake_nccl.made[0].aborted and pool.kept_state().token == "job1"
