"""The NCCL communicators of a worker: the one kept between jobs, reused only by a job of
exactly the same shape on every rank and ended (aborted) otherwise, and the one a job is using,
aborted on every worker when the job fails elsewhere. Host logic, with stand-in communicators
(and CPU Dask workers for the client's abort): the NCCL runs are in ``tests/gpu/test_multi_gpu.py``."""

from __future__ import annotations

import pytest

import dgboost as dg
from dgboost.dask import _nccl_pool as pool
from dgboost.dask._communicator import make_spec
from dgboost.dask._waits import cluster_workers

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


@pytest.mark.parametrize(
    "change",
    [
        "one rank keeps none",
        "another token on one rank",
        "other workers",
        "ranks in another order",
        "another gpu",
        "fewer workers",
    ],
)
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
    return {
        "kind": "nccl",
        "uid": None if reuse else b"id",
        "job": token,
        "token": token,
        "timeout": 5.0,
        "stream_ordered": True,
        "keep": keep,
        "reuse": reuse,
        "members": WORKERS,
        "device": 0,
    }


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


def test_abort_job_aborts_only_the_communicator_that_job_is_using_and_only_while_it_runs():
    import time

    used, other = _Abortable(), _Abortable()
    with pool.in_use("job1", used), pool.in_use("job2", other):
        assert pool.abort_job("job1", "the job was stopped: rank 1 failed")
        deadline = time.monotonic() + 5
        while used.reason is None and time.monotonic() < deadline:
            time.sleep(0.01)
    assert used.reason == "the job was stopped: rank 1 failed" and other.reason is None
    assert not pool.abort_job("job1", "too late")  # the block ended: nothing registered


class _Abortable:
    """Stands in for an NcclComm in use: records the reason it was aborted for."""

    device = None

    def __init__(self):
        self.reason = None

    def abort(self, reason):
        self.reason = reason


def test_an_nccl_rank_aborted_from_another_thread_raises_at_its_next_collective_and_when_it_closes():
    from dgboost.comm.nccl import NcclComm

    comm = NcclComm(None, 0, 2, timeout=5.0, keep=True)
    comm._comm = nccl = _StandIn()  # as if entered (without a GPU)
    comm.abort("the job was stopped: worker w2 (rank 1 of this job) left the cluster")
    assert nccl.aborted
    with pytest.raises(dg.CommunicationError, match="worker w2 .* left the cluster"):
        comm._check()
    with pytest.raises(dg.CommunicationError, match="left the cluster"):
        comm.__exit__(None, None, None)  # partial sums may have reached the model: not trusted
    assert comm.kept is None  # and never kept for the next job


def test_when_a_rank_fails_the_client_aborts_the_other_ranks_communicator_and_frees_their_workers(dask_client):
    import time

    from distributed import Event

    from dgboost.dask.training import _RANK_KEY, _wait_for_earlier_ranks, _watch

    client = dask_client(2)
    workers = sorted(cluster_workers(client))

    def waiting_rank(job):
        # a rank blocked on a collective its failed peer never joins, until aborted (or 30 s)
        from dgboost.dask import _nccl_pool

        class Comm:
            device, reason = None, None

            def abort(self, reason):
                self.reason = reason

        comm = Comm()
        with _nccl_pool.in_use(job, comm):
            Event(f"{job}-waiting").set()
            deadline = time.monotonic() + 30
            while comm.reason is None and time.monotonic() < deadline:
                time.sleep(0.05)
        return comm.reason

    def failing_rank(job):
        Event(f"{job}-waiting").wait(timeout=30)  # fail once the peer waits on its collective
        raise dg.DGBoostValueError("rank 1 found bad data")

    futures = [
        client.submit(waiting_rank, "job-x", workers=[workers[0]], key=f"{_RANK_KEY}0-job-x", pure=False),
        client.submit(failing_rank, "job-x", workers=[workers[1]], key=f"{_RANK_KEY}1-job-x", pure=False),
    ]
    start = time.monotonic()
    with pytest.raises(dg.DGBoostValueError, match="rank 1 found bad data"):
        _watch(client, futures, workers, nccl_job="job-x")
    assert _wait_for_earlier_ranks(client, timeout=10) == []  # the waiting rank let go of its worker
    assert time.monotonic() - start < 8  # long before its 30 s


def test_a_rank_that_starts_after_its_job_was_aborted_on_its_worker_fails_at_once():
    assert not pool.abort_job("job-late", "the job was stopped: rank 0 of this job failed")
    with pytest.raises(dg.CommunicationError, match="rank 0 of this job failed"):
        with pool.in_use("job-late", _Abortable()):
            raise AssertionError("the rank must not start")
