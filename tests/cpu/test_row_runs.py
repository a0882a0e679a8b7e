"""Ranks that hold partitions out of order (told each partition's global row offset) train the
single-process model: the sketch sample, row subsampling, AUC's row order and the checkpoint
fingerprint follow the rows' global indices, not the ranks' order. The Dask layer uses this
to train where the partitions lie (:func:`dgboost.dask._placement.place_where_held`)."""

from __future__ import annotations

import numpy as np
import pytest

import dgboost as dg
from dgboost.comm import run_in_threads
from dgboost.dask._placement import place, place_where_held, row_runs
from dgboost.data import RankDMatrix
from dgboost.datasets import make_synthetic

SIZES = [900, 0, 1350, 600, 1050, 750, 450]  # partition rows, one partition empty
# partitions by rank, out of partition order; rank 2 holds nothing
HELD = [[0, 3, 4], [1, 2, 6, 5], []]
PARAMS = {
    "objective": "binary:logistic",
    "max_depth": 4,
    "max_bin": 32,
    "subsample": 0.7,
    "colsample_bynode": 0.8,
    "seed": 3,
    "eval_metric": ["auc", "logloss"],
    "sketch_sample_rows": 1024,
}  # fewer than the rows: the sketch samples by global index


def _data():
    X, y, _ = make_synthetic(sum(SIZES), 6, task="binary", missing_rate=0.1, seed=5)
    # tied predictions: AUC adds tied rows' weights in row order
    X[::7, :] = X[0, :]
    w = np.random.default_rng(5).uniform(0.5, 2.0, len(y)).astype(np.float32)
    return X.astype(np.float32), y.astype(np.float32), w


def _rank_matrix(X, y, w, parts):
    bounds = np.concatenate([[0], np.cumsum(SIZES)])
    rows = np.concatenate([np.arange(bounds[i], bounds[i + 1]) for i in parts]) if parts else np.arange(0)
    dm = RankDMatrix(X[rows].reshape(len(rows), X.shape[1]), y[rows], weight=w[rows])
    dm.row_runs = row_runs(parts, SIZES)
    return dm


def _train_held(X, y, w, rounds=8, **kw):
    def rank(comm, r):
        dtrain = _rank_matrix(X, y, w, HELD[r])
        history: dict = {}
        booster = dg.train(
            PARAMS, dtrain, rounds, evals=[(dtrain, "train")], evals_result=history, comm=comm, verbose_eval=False, **kw
        )
        return booster, history

    return run_in_threads(len(HELD), rank)


def _single(X, y, w, rounds=8):
    dtrain = dg.DMatrix(X, y, weight=w)
    history: dict = {}
    booster = dg.train(PARAMS, dtrain, rounds, evals=[(dtrain, "train")], evals_result=history, verbose_eval=False)
    return booster, history


def test_ranks_holding_partitions_out_of_order_train_the_single_process_model_and_history():
    X, y, w = _data()
    single, history = _single(X, y, w)
    results = _train_held(X, y, w)
    for booster, rank_history in results:
        assert booster.save_raw() == single.save_raw()
        assert rank_history == history  # AUC too: every rank puts the gathered rows back in order


def test_without_the_global_offsets_the_same_partitions_give_another_model():
    # guards the test above: rank order alone is not the row order here
    X, y, w = _data()

    def rank(comm, r):
        dtrain = _rank_matrix(X, y, w, HELD[r])
        dtrain.row_runs = None  # rows counted rank after rank
        return dg.train(PARAMS, dtrain, 8, comm=comm, verbose_eval=False)

    single = dg.train(PARAMS, dg.DMatrix(X, y, weight=w), 8, verbose_eval=False)
    assert run_in_threads(len(HELD), rank)[0].save_raw() != single.save_raw()


def test_checkpoints_of_ranks_holding_partitions_out_of_order_resume_to_the_same_model(tmp_path):
    X, y, w = _data()
    interrupted = _train_held(X, y, w, rounds=4, checkpoint_dir=tmp_path, checkpoint_every=2)
    resumed = _train_held(X, y, w, rounds=8, checkpoint_dir=tmp_path, checkpoint_every=2, resume=True)
    assert interrupted[0][0].num_boosted_rounds() == 4
    assert resumed[0][0].save_raw() == _single(X, y, w)[0].save_raw()


def test_row_runs_that_do_not_cover_the_rows_are_refused():
    X, y, w = _data()
    dm = _rank_matrix(X, y, w, [0, 3])
    dm.row_runs = [(0, 10)]
    with pytest.raises(dg.DGBoostError, match="do not cover"):
        dg.train(PARAMS, dm, 1, verbose_eval=False)


def test_placing_where_held_moves_nothing_and_gives_each_partition_its_global_offset():
    holders = ["b", "a", "a", "b", "c", "a"]
    placement = place_where_held(holders, ["a", "b", "c", "d"])
    assert placement.workers == ["b", "a", "c", "d"]  # by first partition held; idle workers last
    assert placement.runs == [[0, 3], [1, 2, 5], [4], []] and placement.moved == 0
    assert row_runs(placement.runs[1], [5, 0, 7, 2, 4, 3]) == [(5, 0), (5, 7), (18, 3)]
    assert placement.runs_where_held(["c", "a"]) == [[], [1], [0], []]
    assert placement.runs_where_held(["e"]) is None  # a holder that is not a rank
    # the contiguous placement of the same partitions moves some
    assert place(holders, [5, 0, 7, 2, 4, 3], ["a", "b", "c", "d"]).moved > 0


def test_multiclass_auc_of_rows_gathered_out_of_order_is_the_single_process_value():
    from dgboost.metric import get_metric
    from dgboost.objective import get_objective
    from dgboost.params import parse_params

    objective = get_objective(parse_params({"objective": "multi:softprob", "num_class": 3}))
    rng = np.random.default_rng(0)
    n = 3003
    label = np.repeat(np.arange(3), 1001).astype(np.float32)
    margin = rng.normal(size=(n, 3)).astype(np.float32)
    margin[np.arange(n), label.astype(int)] += rng.uniform(0, 1.0, n).astype(np.float32) * (1 + label)
    # a heavy row first in each class: its class's weight sum (one of the terms of the
    # class-weighted average) depends on the order the unit weights meet it in
    weight = np.ones(n, np.float32)
    weight[[0, 1001, 2002]] = 2.0**53
    auc = get_metric("auc", objective)
    want = auc.evaluate(margin, label, weight, None, objective, dg.comm.LocalComm())
    held = [np.arange(1, n), np.array([0])]  # the heavy row of class 0 gathered last

    def rank(comm, r, with_rows):
        rows = held[r]
        extra = {"global_rows": rows} if with_rows else {}
        return auc.evaluate(margin[rows], label[rows], weight[rows], None, objective, comm, **extra)

    assert run_in_threads(2, lambda comm, r: rank(comm, r, True)) == [want, want]
    assert run_in_threads(2, lambda comm, r: rank(comm, r, False))[0] != want  # the order matters


def test_an_uneven_spread_of_rows_over_the_workers_is_named_and_an_even_one_is_not():
    from dgboost.dask._placement import imbalance_note

    # how Dask's scheduler once spread 16 partitions of 2.5M rows over 4 GPUs
    note = imbalance_note([5_000_000, 5_000_000, 15_000_000, 15_000_000])
    assert "5,000,000 to 15,000,000 rows (1.5x the mean)" in note and "busiest worker" in note
    assert imbalance_note([2_000_000, 0, 0, 0]) is not None  # one partition on four workers
    assert imbalance_note([10_000_000] * 4) is None
    assert imbalance_note([11, 10, 9, 10]) is None
    assert imbalance_note([7]) is None and imbalance_note([0, 0]) is None
    assert imbalance_note([20_000, 0, 0, 0]) is None  # a tiny job: too few rows to matter
    assert imbalance_note([20_000, 0, 0, 0], min_excess_rows=0) is not None
