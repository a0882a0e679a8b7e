"""dgboost.dask.train: the same model whatever the partitioning, and errors before collectives."""

from __future__ import annotations

import time

import dask
import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

import dgboost as dg
import dgboost.dask as dxgb
from dgboost.dask._waits import cluster_workers
from dgboost.testing.faults import KillProcessAtRound

pytestmark = pytest.mark.dask

# uneven partitions, one of them empty
CHUNKS = (500, 0, 900, 250, 750)
N = sum(CHUNKS)


def _data(seed=0, classes=2):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(N, 6)).astype(np.float32)
    signal = x[:, 0] + np.sin(2 * x[:, 1]) + x[:, 2] * x[:, 3]
    x[rng.random(x.shape) < 0.15] = np.nan
    if classes == 2:
        y = (signal + rng.normal(scale=0.5, size=N) > 0).astype(np.float32)
    else:
        y = np.digitize(signal, np.quantile(signal, np.linspace(0, 1, classes + 1)[1:-1])).astype(np.float32)
    w = (rng.random(N) + 0.5).astype(np.float32)
    return x, y, w


CASES = {
    "depthwise with row and column sampling, missing values and weights": (
        {
            "objective": "binary:logistic",
            "max_depth": 4,
            "max_bin": 32,
            "subsample": 0.8,
            "colsample_bytree": 0.9,
            "colsample_bynode": 0.7,
            "seed": 5,
            "eval_metric": ["logloss", "auc"],
        },
        2,
    ),
    "lossguide": (
        {"objective": "binary:logistic", "grow_policy": "lossguide", "max_leaves": 10, "max_depth": 0, "max_bin": 32},
        2,
    ),
    "multiclass": (
        {
            "objective": "multi:softprob",
            "num_class": 3,
            "max_depth": 3,
            "max_bin": 16,
            "colsample_bylevel": 0.8,
            "seed": 1,
        },
        3,
    ),
}


def _weighted_dtrain(client, x, y, w):
    """The rows as a weighted DaskDMatrix in partitions of CHUNKS rows."""
    return dxgb.DaskDMatrix(
        client,
        da.from_array(x, chunks=(CHUNKS, 6)),
        da.from_array(y, chunks=(CHUNKS,)),
        weight=da.from_array(w, chunks=(CHUNKS,)),
    )


def _single(params, x, y, w, rounds=4, **kw):
    dtrain = dg.DMatrix(x, y, weight=w, **kw)
    history: dict = {}
    booster = dg.train(params, dtrain, rounds, evals=[(dtrain, "train")], evals_result=history, verbose_eval=False)
    return booster, history


@pytest.mark.parametrize("n_workers", [1, 2, 3])
@pytest.mark.parametrize("case", list(CASES))
def test_the_model_is_byte_identical_to_single_process_training_on_1_2_and_3_workers(dask_client, n_workers, case):
    params, classes = CASES[case]
    x, y, w = _data(classes=classes)
    client = dask_client(n_workers)
    dtrain = _weighted_dtrain(client, x, y, w)
    out = dxgb.train(client, params, dtrain, 4, evals=[(dtrain, "train")], verbose_eval=False)
    single, history = _single(params, x, y, w)
    assert out["booster"].to_json() == single.to_json()
    assert out["history"] == history


def _pinned(client, rows, chunks, holders):
    """``rows`` as a persisted dask array of partitions of ``chunks`` rows, partition i held by
    the worker ``holders[i]`` (checked: the test must not rely on where Dask would put them)."""
    from distributed import futures_of, wait

    bounds = np.concatenate([[0], np.cumsum(chunks)])
    parts = [
        client.persist(da.from_array(rows[a:b], chunks=(b - a,) + rows.shape[1:]), workers=[holder])
        for a, b, holder in zip(bounds, bounds[1:], holders)
    ]
    # each concatenated block depends on one pinned block alone, so Dask runs it where that is held
    out = client.persist(da.concatenate(parts, axis=0))
    wait(futures_of(out))
    who = client.who_has(futures_of(out))
    held = [who[key][0] if len(who[key]) == 1 else who[key] for key in sorted((f.key for f in futures_of(out)))]
    assert held == list(holders), "the partitions are not where the test pinned them"
    return out


def test_partitions_pinned_to_workers_out_of_order_train_the_model_of_their_rows_in_partition_order(dask_client):
    """A row's place is its partition's place in the collection, whichever worker holds it: here
    the first partition sits on the last worker, and two workers hold partitions that are not
    neighbours."""
    chunks = (500, 400, 500, 250, 750)
    x, y, w = _data()
    x, y, w = x[: sum(chunks)], y[: sum(chunks)], w[: sum(chunks)]
    client = dask_client(3)
    workers = sorted(cluster_workers(client))
    holders = [workers[2], workers[0], workers[1], workers[2], workers[0]]
    dtrain = dxgb.DaskDMatrix(
        client,
        _pinned(client, x, chunks, holders),
        _pinned(client, y, chunks, holders),
        weight=_pinned(client, w, chunks, holders),
    )
    params = CASES["depthwise with row and column sampling, missing values and weights"][0]
    out = dxgb.train(client, params, dtrain, 4, evals=[(dtrain, "train")], verbose_eval=False)
    single, history = _single(params, x, y, w)
    assert out["booster"].to_json() == single.to_json()
    assert out["history"] == history


def test_ranking_with_query_groups_whole_within_partitions_gives_the_single_process_model(dask_client):
    rng = np.random.default_rng(3)
    sizes = rng.integers(3, 12, size=120)
    qid = np.repeat(np.arange(len(sizes)), sizes)
    n = len(qid)
    x = rng.normal(size=(n, 5)).astype(np.float32)
    y = np.clip(np.round(x[:, 0] + rng.normal(scale=0.5, size=n) + 1), 0, 3).astype(np.float32)
    # partition boundaries at query boundaries, unevenly
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    cuts = [0, bounds[30], bounds[31], bounds[90], n]
    chunks = tuple(int(b - a) for a, b in zip(cuts, cuts[1:]))
    params = {"objective": "rank:ndcg", "max_depth": 3, "max_bin": 16, "eval_metric": ["ndcg@5"]}
    client = dask_client(2)
    dtrain = dxgb.DaskDMatrix(
        client,
        da.from_array(x, chunks=(chunks, 5)),
        da.from_array(y, chunks=(chunks,)),
        qid=da.from_array(qid, chunks=(chunks,)),
    )
    out = dxgb.train(client, params, dtrain, 3, evals=[(dtrain, "train")], verbose_eval=False)
    single, history = _single(params, x, y, None, rounds=3, qid=qid)
    assert out["booster"].to_json() == single.to_json()
    assert out["history"] == history


def test_a_profiled_job_gives_the_same_model_and_tells_where_every_rank_spent_its_time(dask_client):
    params = CASES["depthwise with row and column sampling, missing values and weights"][0]
    x, y, w = _data()
    client = dask_client(2)
    dtrain = _weighted_dtrain(client, x, y, w)
    t0 = time.perf_counter()
    out = dxgb.train(client, params, dtrain, 4, evals=[(dtrain, "train")], verbose_eval=False, profile=True)
    elapsed = time.perf_counter() - t0
    assert out["booster"].to_json() == _single(params, x, y, w)[0].to_json()
    prof = out["profile"]
    client_stages = prof["client"]
    assert set(client_stages) == {
        "partition_checks_s",
        "placement_s",
        "communicator_spec_s",
        "submit_s",
        "ranks_s",
        "release_s",
        "total_s",
    }
    assert 0 < client_stages["total_s"] <= elapsed
    assert sum(v for k, v in client_stages.items() if k != "total_s") == pytest.approx(
        client_stages["total_s"], rel=1e-6
    )
    assert [r["rows"] for r in prof["ranks"]] and sum(r["rows"] for r in prof["ranks"]) == N
    for rank in prof["ranks"]:
        assert rank["rounds"] == 4
        assert 0 <= rank["round_s_median"] <= rank["rounds_s"] <= rank["total_s"] <= client_stages["ranks_s"] + 1.0
        assert rank["dispatch_s"] >= -1.0  # host clocks of one machine
        # the rank's stages and Dask's on either side of them make up the client's wait
        assert rank["return_s"] >= -1.0
        waited = rank["dispatch_s"] + rank["total_s"] + rank["return_s"]
        assert waited == pytest.approx(client_stages["submit_s"] + client_stages["ranks_s"], abs=0.01)
        parts = rank["data_s"] + rank["comm_open_s"] + rank["setup_s"] + rank["rounds_s"] + rank["comm_close_s"]
        assert parts <= rank["total_s"] + 1e-6
        stages = rank["setup_stages_s"]
        assert list(stages) == ["base margins", "cuts", "binning", "margins"]
        assert all(v >= 0 for v in stages.values()) and sum(stages.values()) <= rank["setup_s"]
        # every round allreduces histograms: counted with their bytes, inside the rounds' time
        hist = rank["collectives"]["allreduce_sum"]
        assert hist["calls"] >= 4 and hist["bytes"] > 0
        assert hist["producer_s"] >= 0 and 0 < hist["collective_s"] <= rank["total_s"]
    assert prof["slowest_rank"] in prof["ranks"]
    assert "profile" not in dxgb.train(client, params, dtrain, 1, verbose_eval=False)


def test_numbas_compiler_use_is_recorded_when_a_function_compiles_and_not_when_it_runs_again():
    import numba

    from dgboost.dask._profile import numba_compiler_use

    @numba.njit
    def twice_plus_one(v):
        return 2 * v + 1

    with numba_compiler_use() as first:
        assert twice_plus_one(3) == 7
    with numba_compiler_use() as again:
        assert twice_plus_one(4) == 9
    assert first["entries"] >= 1 and first["seconds"] > 0
    assert any(name.endswith("twice_plus_one") for name in first["compiled"])
    assert again == {"entries": 0, "seconds": 0.0, "compiled": []}


def test_a_second_job_on_the_same_workers_needs_nothing_from_numbas_compiler(dask_client):
    params = CASES["depthwise with row and column sampling, missing values and weights"][0]
    x, y, w = _data()
    client = dask_client(2)
    dtrain = _weighted_dtrain(client, x, y, w)
    jobs = [dxgb.train(client, params, dtrain, 3, verbose_eval=False, profile=True)["profile"] for _ in range(2)]
    for rank in jobs[0]["ranks"] + jobs[1]["ranks"]:
        use = rank["numba"]
        assert set(use) == {"entries", "seconds", "compiled"} and use["seconds"] >= 0
    # every kernel a job calls is compiled (or loaded from Numba's cache) once per worker process
    assert [r["numba"] for r in jobs[1]["ranks"]] == [{"entries": 0, "seconds": 0.0, "compiled": []}] * 2


def test_a_worker_that_holds_no_rows_still_takes_part_and_train_warns_that_the_rows_are_uneven(
    dask_client, monkeypatch
):
    from dgboost.dask import _placement

    monkeypatch.setattr(_placement, "_MIN_EXCESS_ROWS", 0)  # this data is small: warn all the same
    x, y, w = _data()
    params = CASES["depthwise with row and column sampling, missing values and weights"][0]
    client = dask_client(3)
    # two partitions for three workers: one rank trains on nothing
    chunks = (1400, N - 1400)
    dtrain = dxgb.DaskDMatrix(
        client,
        da.from_array(x, chunks=(chunks, 6)),
        da.from_array(y, chunks=(chunks,)),
        weight=da.from_array(w, chunks=(chunks,)),
    )
    with pytest.warns(RuntimeWarning, match="pace of the busiest worker"):
        out = dxgb.train(client, params, dtrain, 4, evals=[(dtrain, "train")], verbose_eval=False)
    assert out["booster"].to_json() == _single(params, x, y, w)[0].to_json()


def test_dataframe_partitions_train_the_single_process_model_with_feature_names(dask_client):
    x, y, w = _data()
    frame = pd.DataFrame(x, columns=[f"col{i}" for i in range(6)])
    ddf = dd.from_pandas(frame, npartitions=4)
    label = dd.from_pandas(pd.Series(y), npartitions=4)
    params = {"objective": "binary:logistic", "max_depth": 3, "max_bin": 32}
    client = dask_client(2)
    out = dxgb.train(client, params, dxgb.DaskDMatrix(client, ddf, label), 3, verbose_eval=False)
    single = dg.train(params, dg.DMatrix(frame, y), 3, verbose_eval=False)
    assert out["booster"].feature_names == [f"col{i}" for i in range(6)]
    assert out["booster"].to_json() == single.to_json()


# -- errors before any collective --------------------------------------------------------------


def test_labels_partitioned_unlike_the_data_are_refused_naming_the_partition(dask_client):
    x, y, _ = _data()
    client = dask_client(2)
    with pytest.raises(dg.DGBoostValueError, match=r"partition 0: label has 600 rows but data has 500"):
        dxgb.DaskDMatrix(
            client, da.from_array(x, chunks=(CHUNKS, 6)), da.from_array(y, chunks=((600, 0, 800, 250, 750),))
        )


def test_nan_labels_in_one_partition_are_refused_naming_that_partition(dask_client):
    x, y, _ = _data()
    y = y.copy()
    y[1500] = np.nan  # partition 3 holds rows 1400..1649
    client = dask_client(2)
    dtrain = dxgb.DaskDMatrix(client, da.from_array(x, chunks=(CHUNKS, 6)), da.from_array(y, chunks=(CHUNKS,)))
    with pytest.raises(dg.DGBoostValueError, match=r"partition 3: label contains NaN"):
        dxgb.train(client, {"objective": "binary:logistic"}, dtrain, 2)


def test_a_partition_with_different_columns_is_refused_naming_that_partition(dask_client):
    parts = [pd.DataFrame({"a": [1.0, 2.0], "b": [0.0, 1.0]}), pd.DataFrame({"a": [3.0, 4.0], "c": [1.0, 0.0]})]
    # as read_parquet gives for files written with different columns (dask checks no metadata)
    ddf = dd.from_delayed([dask.delayed(p) for p in parts], meta=parts[0].iloc[:0], verify_meta=False)
    label = dd.from_delayed(
        [dask.delayed(pd.Series([0.0, 1.0]))] * 2, meta=pd.Series([], dtype=float), verify_meta=False
    )
    client = dask_client(2)
    with pytest.raises(dg.DGBoostValueError, match=r"partition 1: its columns differ .*extra \['c'\].*missing \['b'\]"):
        dxgb.train(client, {"objective": "binary:logistic"}, dxgb.DaskDMatrix(client, ddf, label), 2)


def test_an_evaluation_set_with_other_feature_names_is_refused(dask_client):
    x, y, _ = _data()
    client = dask_client(1)
    frame = pd.DataFrame(x, columns=list("abcdef"))
    other = frame.rename(columns={"f": "g"})
    label = dd.from_pandas(pd.Series(y), npartitions=2)
    dtrain = dxgb.DaskDMatrix(client, dd.from_pandas(frame, npartitions=2), label)
    dvalid = dxgb.DaskDMatrix(client, dd.from_pandas(other, npartitions=2), label)
    with pytest.raises(dg.DGBoostValueError, match="feature names"):
        dxgb.train(client, {"objective": "binary:logistic"}, dtrain, 2, evals=[(dvalid, "valid")])


def test_classification_labels_out_of_range_in_one_partition_are_refused_naming_it(dask_client):
    x, y, _ = _data()
    y = y.copy()
    y[100] = 2.0  # partition 0
    client = dask_client(2)
    dtrain = dxgb.DaskDMatrix(client, da.from_array(x, chunks=(CHUNKS, 6)), da.from_array(y, chunks=(CHUNKS,)))
    with pytest.raises(dg.DGBoostValueError, match=r"partition 0: "):
        dxgb.train(client, {"objective": "binary:logistic"}, dtrain, 2)


def test_a_query_that_spans_two_partitions_is_refused(dask_client):
    qid = np.repeat(np.arange(10), 10)
    x = np.random.default_rng(0).normal(size=(100, 3)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.float32)
    chunks = ((45, 55),)
    client = dask_client(2)
    dtrain = dxgb.DaskDMatrix(
        client,
        da.from_array(x, chunks=chunks + ((3,),)),
        da.from_array(y, chunks=chunks),
        qid=da.from_array(qid, chunks=chunks),
    )
    with pytest.raises(dg.DGBoostValueError, match="query 4 spans partitions 0 and 1"):
        dxgb.train(client, {"objective": "rank:ndcg"}, dtrain, 2)


def test_non_dask_input_is_refused_with_a_hint(dask_client):
    client = dask_client(1)
    with pytest.raises(dg.DGBoostTypeError, match="from_array"):
        dxgb.DaskDMatrix(client, np.zeros((4, 2)), np.zeros(4))


# -- a worker lost during training -------------------------------------------------------------


def test_a_worker_killed_mid_training_ends_train_with_an_error_and_the_client_trains_again(dask_client, tmp_path):
    x, y, w = _data()
    params = {"objective": "binary:logistic", "max_depth": 4, "max_bin": 32}
    client = dask_client(3)
    dtrain = dxgb.DaskDMatrix(client, da.from_array(x, chunks=(CHUNKS, 6)), da.from_array(y, chunks=(CHUNKS,)))
    before = set(cluster_workers(client))
    start = time.monotonic()
    with pytest.raises(dg.DGBoostError):
        dxgb.train(client, params, dtrain, 50, callbacks=[KillProcessAtRound(2, str(tmp_path / "killed"))], timeout=30)
    assert time.monotonic() - start < 60
    assert (tmp_path / "killed").exists()
    # the scheduler may still list the killed worker for a moment (on a loaded machine): a
    # job placed on it then has a rank cancelled. Train again once it is gone from the list
    # (its nanny starts a new worker at another address)
    deadline = time.monotonic() + 60
    while before <= set(cluster_workers(client)) and time.monotonic() < deadline:
        time.sleep(0.1)
    # the partitions on the dead worker are recomputed by Dask; the model does not depend on
    # how many workers are left
    client.wait_for_workers(1, timeout=60)
    out = dxgb.train(client, params, dtrain, 3)
    assert out["booster"].to_json() == dg.train(params, dg.DMatrix(x, y), 3).to_json()


def test_partition_checks_that_cannot_run_end_train_with_a_communication_error_within_the_timeout(dask_client):
    client = dask_client(1)
    x, y, _ = _data()
    dtrain = dxgb.DaskDMatrix(client, da.from_array(x, chunks=(CHUNKS, 6)), da.from_array(y, chunks=(CHUNKS,)))
    # the only worker thread is taken (as by a task that does not end): no check can run
    blocker = client.submit(time.sleep, 8, pure=False)
    while not client.processing() or not any(client.processing().values()):
        time.sleep(0.05)
    start = time.monotonic()
    with pytest.raises(dg.CommunicationError, match=r"partition\(s\) 0, 1, 2, 3, 4 could not be checked within 1 s"):
        dxgb.train(client, {"objective": "binary:logistic", "max_depth": 2}, dtrain, 2, timeout=1, verbose_eval=False)
    assert time.monotonic() - start < 5
    blocker.result()  # the worker is free again for the next test


def test_two_jobs_in_a_row_on_one_worker_each_train_their_own_model(dask_client):
    x, y, _ = _data()
    client = dask_client(1)
    dtrain = dxgb.DaskDMatrix(client, da.from_array(x, chunks=(CHUNKS, 6)), da.from_array(y, chunks=(CHUNKS,)))
    first = dxgb.train(client, {"max_depth": 2}, dtrain, 2)["booster"]
    second = dxgb.train(client, {"max_depth": 3}, dtrain, 2)["booster"]  # not the first job's result again
    assert second.to_json() == dg.train({"max_depth": 3}, dg.DMatrix(x, y), 2).to_json() != first.to_json()


def test_a_second_job_on_the_same_partitions_does_not_check_them_again(dask_client):
    from distributed import get_task_stream

    x, y, _ = _data()
    client = dask_client(2)
    dx, dy = da.from_array(x, chunks=(CHUNKS, 6)).persist(), da.from_array(y, chunks=(CHUNKS,)).persist()
    dtrain = dxgb.DaskDMatrix(client, dx, dy)
    params = {"objective": "binary:logistic", "max_depth": 2}
    with get_task_stream(client) as first_job:
        dxgb.train(client, params, dtrain, 2, verbose_eval=False)
    with get_task_stream(client) as second_job:  # a new matrix of the same persisted arrays
        second = dxgb.train(client, params, dxgb.DaskDMatrix(client, dx, dy), 2, verbose_eval=False)["booster"]
    with get_task_stream(client) as other_params:
        dxgb.train(client, {**params, "objective": "reg:squarederror"}, dtrain, 2, verbose_eval=False)

    def checks(stream):
        return sum(str(t["key"]).startswith("_check_partition") for t in stream.data)

    assert checks(first_job) == len(CHUNKS)
    assert checks(second_job) == 0
    assert checks(other_params) == len(CHUNKS)  # labels are checked against each objective
    assert second.to_json() == dg.train(params, dg.DMatrix(x, y), 2).to_json()


def test_partitions_are_checked_again_when_a_worker_no_longer_holds_one():
    from dgboost.dask._preflight import _all_held

    class Future:
        def __init__(self, key):
            self.key = key

    class Matrix:
        def all_futures(self):
            return [Future("a"), Future("b")]

    class Client:
        def __init__(self, who):
            self.who = who

        def who_has(self, futures):
            return self.who

    assert _all_held(Client({"a": ["w1"], "b": ["w2"]}), Matrix())
    assert not _all_held(Client({"a": ["w1"], "b": []}), Matrix())
    assert not _all_held(Client({"a": ["w1"]}), Matrix())


def test_a_new_job_waits_for_the_ranks_of_a_cancelled_one_to_free_their_threads(dask_client):
    from dgboost.dask.training import _RANK_KEY, _ranks_still_running, _wait_for_earlier_ranks

    client = dask_client(1)
    assert sum(client.run(_ranks_still_running).values()) == 0  # (also imports dgboost on the worker)
    # a rank of an earlier job whose collective has not given up yet: cancelled, still running
    zombie = client.submit(time.sleep, 2.0, key=f"{_RANK_KEY}0-earlier-job", pure=False)
    deadline = time.monotonic() + 10
    while client.processing() and not any(client.processing().values()) and time.monotonic() < deadline:
        time.sleep(0.05)
    client.cancel(zombie, force=True)
    assert sum(client.run(_ranks_still_running).values()) == 1
    start = time.monotonic()
    busy = _wait_for_earlier_ranks(client, timeout=0.3)  # gives up after its timeout, naming the worker
    assert 0.25 < time.monotonic() - start < 1.5
    assert busy == list(cluster_workers(client))
    assert _wait_for_earlier_ranks(client, timeout=30) == []  # returns once the thread is free
    assert 1.0 < time.monotonic() - start < 5
    assert _wait_for_earlier_ranks(client, timeout=30) == []  # nothing left: at once
    assert time.monotonic() - start < 5.5


def test_a_rank_whose_key_names_its_jobs_timeout_is_waited_for_at_most_twice_that(dask_client):
    from dgboost.dask.training import _key_timeout, _rank_key, _ranks_still_running, _wait_for_earlier_ranks

    assert _key_timeout(_rank_key(3, "job", 30)) == 30.0
    assert _key_timeout(_rank_key(0, "job", 0.25)) == 0.25
    assert _key_timeout("dgboost-train-rank-0-earlier-job") is None
    client = dask_client(1)
    # a rank of a job whose collectives time out after 1 s, cancelled, its thread still busy
    zombie = client.submit(time.sleep, 4.0, key=_rank_key(0, "earlier-job", 1.0), pure=False)
    deadline = time.monotonic() + 10
    while not sum(client.run(_ranks_still_running).values()) and time.monotonic() < deadline:
        time.sleep(0.05)
    client.cancel(zombie, force=True)
    start = time.monotonic()
    busy = _wait_for_earlier_ranks(client, timeout=30)  # 2 s, not 30: the rank's own job said 1 s
    assert 1.5 < time.monotonic() - start < 4.5
    assert busy == list(cluster_workers(client))
    while sum(client.run(_ranks_still_running).values()) and time.monotonic() < start + 15:
        time.sleep(0.1)  # the worker is free again for the next test
    assert sum(client.run(_ranks_still_running).values()) == 0


def test_a_wait_for_earlier_ranks_names_the_workers_of_the_last_answer_when_later_questions_fail():
    from dgboost.dask.training import _rank_key, _wait_for_earlier_ranks

    answers = iter([{"w": [0.1]}] + [RuntimeError("worker closing")] * 1000)

    class Flaky:
        def run(self, fn, **kwargs):
            answer = next(answers)
            if isinstance(answer, Exception):
                raise answer
            return answer

    assert _rank_key(0, "j", 0.1).endswith("-timeout0.1")
    start = time.monotonic()
    assert _wait_for_earlier_ranks(Flaky(), timeout=30) == ["w"]  # 2 x 0.1 s, then the last answer
    assert time.monotonic() - start < 1.0


def test_a_new_job_asks_again_when_a_worker_cannot_answer_whether_it_still_runs_a_rank():
    from dgboost.dask.training import _wait_for_earlier_ranks

    answers = iter([RuntimeError("worker closing"), RuntimeError("worker closing"), {"w": 0}])
    asked = []

    class Flaky:
        def run(self, fn, **kwargs):
            asked.append(kwargs.get("callback_timeout"))  # every question is bounded
            answer = next(answers)
            if isinstance(answer, Exception):
                raise answer
            return answer

    assert _wait_for_earlier_ranks(Flaky(), timeout=30) == []  # a worker that cannot answer may still be busy
    assert asked == [30, 30, 30]
