"""TimedComm: the wrapped communicator's results, unchanged, and what each collective cost."""

from __future__ import annotations

import time

import numpy as np
import pytest

import dgboost as dg
from dgboost.comm import LocalComm, run_in_threads
from dgboost.comm.timed import TimedComm
from dgboost.datasets import make_synthetic


def test_collectives_through_the_wrapper_give_the_wrapped_results_and_count_calls_and_bytes():
    def rank(comm, r):
        timed = TimedComm(comm)
        assert (timed.rank, timed.world_size) == (r, 3)
        total = timed.allreduce_sum(np.arange(4, dtype=np.int64) * (r + 1))
        biggest = timed.allreduce_max(np.array([float(r)]))
        rows = timed.allgather(np.full((r + 1, 2), r, np.int32))
        word = timed.broadcast({"from": r}, root=2)
        return timed, total, biggest, rows, word

    for timed, total, biggest, rows, word in run_in_threads(3, rank):
        np.testing.assert_array_equal(total, np.arange(4) * 6)
        assert biggest[0] == 2.0
        np.testing.assert_array_equal(rows[:, 0], [0, 1, 1, 2, 2, 2])
        assert word == {"from": 2}
        assert {op: s["calls"] for op, s in timed.stats.items()} == {
            "allreduce_sum": 1,
            "allreduce_max": 1,
            "allgather": 1,
            "broadcast": 1,
        }
        assert timed.stats["allreduce_sum"]["bytes"] == 4 * 8
        assert all(s["producer_s"] >= 0 and s["collective_s"] >= 0 for s in timed.stats.values())


def test_training_through_the_wrapper_gives_the_same_model_and_times_every_round_s_histograms():
    X, y, _ = make_synthetic(3000, 6, task="binary", missing_rate=0.1, seed=3)
    params = {"objective": "binary:logistic", "max_depth": 3, "max_bin": 32}
    halves = [slice(0, 1700), slice(1700, None)]

    def rank(comm, r, wrap):
        comm = TimedComm(comm) if wrap else comm
        booster = dg.train(params, dg.DMatrix(X[halves[r]], y[halves[r]]), 5, comm=comm)
        return booster.to_json(), comm

    plain = run_in_threads(2, lambda comm, r: rank(comm, r, False))
    timed = run_in_threads(2, lambda comm, r: rank(comm, r, True))
    assert [j for j, _ in timed] == [j for j, _ in plain]
    stats = timed[0][1].stats
    # a depth-3 tree: the root's totals and histogram, then counts and histograms per level
    assert stats["allreduce_sum"]["calls"] >= 5 * 4
    assert stats["allreduce_sum"]["bytes"] > stats["allreduce_max"]["bytes"] > 0


def test_a_communicator_that_queues_its_collectives_is_not_made_to_wait(monkeypatch):
    import dgboost.comm.timed as timed_module

    waits = []
    monkeypatch.setattr(timed_module, "_wait_for_producer", lambda payload: waits.append(payload))

    class Queuing:
        rank, world_size, stream_ordered = 0, 1, True

        def allreduce_sum(self, array):
            return array

    class Waiting(Queuing):
        stream_ordered = False

    TimedComm(Queuing()).allreduce_sum(np.ones(3))
    assert waits == []
    TimedComm(Waiting()).allreduce_sum(np.ones(3))
    assert len(waits) == 1


def test_a_rank_clock_splits_the_set_up_from_the_rounds_and_takes_their_median():
    from dgboost.dask._profile import RankClock

    clock = RankClock()
    assert clock.marks(since=1.0, until=3.0) == {
        "setup_s": 2.0,
        "rounds_s": 0.0,
        "round_s_median": 0.0,
        "rounds": 0,
        "round_s_first": 0.0,
        "round_s_max": 0.0,
        "rounds_over_median_s": 0.0,
    }
    X, y, _ = make_synthetic(500, 4, task="binary", seed=1)
    dg.train({"objective": "binary:logistic", "max_depth": 2}, dg.DMatrix(X, y), 3, callbacks=[clock])
    marks = clock.marks(since=clock._start - 0.5, until=clock._round_ends[-1])
    assert marks["rounds"] == 3 and marks["setup_s"] == pytest.approx(0.5)
    assert 0 < marks["round_s_median"] <= marks["round_s_max"] <= marks["rounds_s"]
    assert 0 < marks["round_s_first"] <= marks["round_s_max"]
    per_round = np.diff([clock._start, *clock._round_ends])
    assert marks["rounds_over_median_s"] == pytest.approx(np.clip(per_round - np.median(per_round), 0, None).sum())


def test_set_up_stages_are_timed_only_while_recording():
    from dgboost._stages import recording, stage

    synced = []
    with stage("cuts", lambda: synced.append(1)):
        pass
    assert synced == []  # not recording: nothing waits, nothing is kept
    with recording() as times:
        with stage("cuts", lambda: synced.append(1)):
            time.sleep(0.01)
        with stage("binning"):
            pass
        with stage("cuts"):
            pass
    assert list(times) == ["cuts", "binning"] and synced == [1]
    assert times["cuts"] >= 0.01 and times["binning"] >= 0
    with stage("cuts"):
        pass
    assert list(times) == ["cuts", "binning"]  # the record ended with its block


def test_a_timed_communicator_gathers_on_the_device_exactly_when_the_one_it_wraps_does():
    class DeviceGathering(LocalComm):
        gathers_on_device = True

    assert TimedComm(DeviceGathering()).gathers_on_device
    assert not TimedComm(LocalComm()).gathers_on_device
