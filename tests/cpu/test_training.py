"""The boosting loop: determinism, partition independence, growth policies, resuming, printing."""

import os
import re
import subprocess
import sys

import numpy as np
import pytest

import dgboost as dg
from dgboost.comm import run_in_threads


def _data(n=3000, f=8, seed=0, missing=0.2, task="binary"):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, f)).astype(np.float32)
    signal = x[:, 0] + np.sin(2 * x[:, 1]) + x[:, 2] * x[:, 3]
    x[rng.random(x.shape) < missing] = np.nan
    if task == "binary":
        y = (signal + rng.normal(scale=0.5, size=n) > 0).astype(np.float32)
    else:
        y = (signal + rng.normal(scale=0.3, size=n)).astype(np.float32)
    return x, y


BASE = {"objective": "binary:logistic", "max_depth": 5, "eta": 0.3, "max_bin": 32}


def _train_partitioned(params, x, y, bounds, rounds=5, weight=None):
    """Train with rows split at ``bounds`` across len(bounds)+1 thread ranks."""
    edges = [0, *bounds, len(y)]

    def rank_fn(comm, rank):
        lo, hi = edges[rank], edges[rank + 1]
        w = None if weight is None else weight[lo:hi]
        d = dg.DMatrix(x[lo:hi], y[lo:hi], weight=w)
        return dg.train(params, d, rounds, verbose_eval=False, comm=comm).to_json()

    return run_in_threads(len(edges) - 1, rank_fn)


def test_the_same_inputs_and_seed_give_a_byte_identical_model_file(tmp_path):
    x, y = _data()
    params = {**BASE, "subsample": 0.8, "colsample_bynode": 0.7, "seed": 11}
    paths = []
    for k in range(2):
        b = dg.train(params, dg.DMatrix(x, y), 6, verbose_eval=False)
        paths.append(tmp_path / f"m{k}.json")
        b.save_model(paths[-1])
    assert paths[0].read_bytes() == paths[1].read_bytes()


@pytest.mark.parametrize(
    "params",
    [
        BASE,
        {**BASE, "subsample": 0.7, "colsample_bytree": 0.8, "colsample_bylevel": 0.8, "seed": 3},
        {**BASE, "grow_policy": "lossguide", "max_leaves": 12, "max_depth": 0},
        {**BASE, "objective": "reg:squarederror", "min_child_weight": 5, "alpha": 0.1, "max_delta_step": 0.5},
    ],
)
def test_the_model_does_not_depend_on_how_rows_are_partitioned_across_ranks(params):
    x, y = _data(n=2400, task="binary" if params["objective"].startswith("binary") else "regression")
    w = np.random.default_rng(1).uniform(0.5, 2.0, size=len(y)).astype(np.float32)
    single = dg.train(params, dg.DMatrix(x, y, weight=w), 5, verbose_eval=False).to_json()
    for bounds in ([1200], [300, 1000, 1999]):
        models = _train_partitioned(params, x, y, bounds, weight=w)
        assert all(m == single for m in models)


def test_a_rank_without_rows_still_takes_part():
    x, y = _data(n=1000)
    single = dg.train(BASE, dg.DMatrix(x, y), 3, verbose_eval=False).to_json()
    # ranks 0 and 2 get one row, rank 1 the rest; a rank with a single row still works
    models = _train_partitioned(BASE, x, y, [1, 999], rounds=3)
    assert models[0] == single


def test_training_reduces_the_training_loss_every_round():
    x, y = _data()
    result = {}
    d = dg.DMatrix(x, y)
    dg.train({**BASE, "eval_metric": "logloss"}, d, 10, evals=[(d, "train")], evals_result=result, verbose_eval=False)
    loss = result["train"]["logloss"]
    assert len(loss) == 10 and all(b < a for a, b in zip(loss, loss[1:]))


def test_depthwise_trees_respect_max_depth_and_lossguide_trees_respect_max_leaves():
    x, y = _data()
    d = dg.DMatrix(x, y)
    deep = dg.train({**BASE, "max_depth": 3}, d, 3, verbose_eval=False)
    assert max(t.depth() for t in deep.ensemble.trees()) == 3
    lg = dg.train({**BASE, "grow_policy": "lossguide", "max_leaves": 7, "max_depth": 0}, d, 3, verbose_eval=False)
    assert all(t.n_leaves == 7 for t in lg.ensemble.trees())
    assert max(t.depth() for t in lg.ensemble.trees()) >= 3
    both = dg.train({**BASE, "grow_policy": "lossguide", "max_leaves": 16, "max_depth": 2}, d, 3, verbose_eval=False)
    assert all(t.depth() <= 2 and t.n_leaves <= 4 for t in both.ensemble.trees())
    assert max(t.n_leaves for t in both.ensemble.trees()) == 4


def test_predictions_equal_the_margins_accumulated_during_training():
    x, y = _data()
    d = dg.DMatrix(x, y)
    result = {}
    b = dg.train({**BASE, "eval_metric": "logloss"}, d, 8, evals=[(d, "t")], evals_result=result, verbose_eval=False)
    p = b.predict(d)
    eps = 1e-16
    logloss = -np.mean(y * np.log(np.maximum(p, eps)) + (1 - y) * np.log(np.maximum(1 - p, eps)))
    assert logloss == pytest.approx(result["t"]["logloss"][-1], rel=1e-5)


def test_gamma_and_min_child_weight_prune_splits():
    x, y = _data()
    d = dg.DMatrix(x, y)
    plain = dg.train(BASE, d, 3, verbose_eval=False).ensemble.n_nodes
    assert dg.train({**BASE, "gamma": 5.0}, d, 3, verbose_eval=False).ensemble.n_nodes < plain
    assert dg.train({**BASE, "min_child_weight": 50}, d, 3, verbose_eval=False).ensemble.n_nodes < plain
    assert dg.train({**BASE, "gamma": 1e9}, d, 3, verbose_eval=False).ensemble.n_nodes == 3


def test_resuming_training_continues_from_the_given_model():
    x, y = _data()
    d = dg.DMatrix(x, y)
    first = dg.train(BASE, d, 4, verbose_eval=False)
    more = dg.train(BASE, d, 3, xgb_model=first, verbose_eval=False)
    assert more.num_boosted_rounds() == 7
    np.testing.assert_array_equal(more[0:4].predict(d), first.predict(d))
    full = dg.train(BASE, d, 7, verbose_eval=False)
    # the continued model grows the same trees as an uninterrupted run
    np.testing.assert_allclose(more.predict(d), full.predict(d), rtol=1e-6)


def test_early_stopping_records_the_best_iteration():
    x, y = _data(n=2000)
    xv, yv = _data(n=1000, seed=5)
    dtr, dva = dg.DMatrix(x, y), dg.DMatrix(xv, yv)
    b = dg.train(
        {**BASE, "eta": 1.0, "max_depth": 8},
        dtr,
        200,
        evals=[(dva, "valid")],
        early_stopping_rounds=3,
        verbose_eval=False,
    )
    assert b.num_boosted_rounds() == b.best_iteration + 4
    assert b.num_boosted_rounds() < 200


def test_iteration_range_and_slicing_agree():
    x, y = _data()
    d = dg.DMatrix(x, y)
    b = dg.train(BASE, d, 6, verbose_eval=False)
    np.testing.assert_array_equal(b.predict(d, iteration_range=(0, 3)), b[:3].predict(d))
    np.testing.assert_array_equal(
        b.predict(d, iteration_range=(2, 5), output_margin=True), b[2:5].predict(d, output_margin=True)
    )


def test_callbacks_are_called_and_can_stop_training():
    x, y = _data()
    calls = []

    class StopAtThree(dg.TrainingCallback):
        def after_iteration(self, model, epoch, evals_log):
            calls.append(epoch)
            return epoch == 2

    b = dg.train(BASE, dg.DMatrix(x, y), 10, callbacks=[StopAtThree()], verbose_eval=False)
    assert calls == [0, 1, 2] and b.num_boosted_rounds() == 3


def _printed(capsys):
    return capsys.readouterr().out.splitlines()


def _xgb_lines(capsys, params, x, y, xv, yv, rounds, **kw):
    import xgboost as xgb

    dtr, dva = xgb.DMatrix(x, y), xgb.DMatrix(xv, yv)
    model = xgb.train(params, dtr, rounds, evals=[(dtr, "train"), (dva, "valid")], **kw)
    return model, _printed(capsys)


def _dg_lines(capsys, params, x, y, xv, yv, rounds, **kw):
    dtr, dva = dg.DMatrix(x, y), dg.DMatrix(xv, yv)
    model = dg.train(params, dtr, rounds, evals=[(dtr, "train"), (dva, "valid")], **kw)
    return model, _printed(capsys)


def _shape(lines):
    """Round tags and metric names of printed lines (values differ in the last digits)."""
    return [[field.rsplit(":", 1)[0] for field in line.split("\t")] for line in lines]


@pytest.fixture
def no_compile_notice(monkeypatch):
    import dgboost.backend._compile_notice as notice

    monkeypatch.setitem(notice._state, "said", True)


def test_training_without_evaluation_sets_prints_nothing_like_xgboost(capsys, no_compile_notice):
    x, y = _data(n=300)
    for verbose_eval in (True, 1, 3):
        dg.train(BASE, dg.DMatrix(x, y), 12, verbose_eval=verbose_eval)
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


@pytest.mark.parametrize("verbose_eval, rounds", [(True, 4), (1, 3), (3, 8), (3, 7), (5, 1), (False, 4), (0, 3)])
def test_verbose_eval_prints_the_rounds_and_format_xgboost_prints(capsys, no_compile_notice, verbose_eval, rounds):
    x, y = _data(n=400)
    xv, yv = _data(n=200, seed=3)
    params = {**BASE, "eval_metric": ["logloss", "error"]}
    _, want = _xgb_lines(capsys, params, x, y, xv, yv, rounds, verbose_eval=verbose_eval)
    _, got = _dg_lines(capsys, params, x, y, xv, yv, rounds, verbose_eval=verbose_eval)
    assert _shape(got) == _shape(want)
    # XGBoost's number format: five decimals after the name-metric key
    assert all(re.fullmatch(r"\[\d+\](\t(train|valid)-(logloss|error):\d+\.\d{5})+", line) for line in got)


def test_printed_values_are_the_recorded_evaluation_history(capsys, no_compile_notice):
    x, y = _data(n=400)
    result = {}
    d = dg.DMatrix(x, y)
    dg.train(BASE, d, 2, evals=[(d, "train")], evals_result=result)
    assert _printed(capsys) == [f"[{i}]\ttrain-logloss:{v:.5f}" for i, v in enumerate(result["train"]["logloss"])]


def test_continued_training_prints_rounds_from_zero_like_xgboost(capsys, no_compile_notice):
    x, y = _data(n=400)
    xv, yv = _data(n=200, seed=3)
    first, _ = _xgb_lines(capsys, BASE, x, y, xv, yv, 3, verbose_eval=False)
    _, want = _xgb_lines(capsys, BASE, x, y, xv, yv, 2, xgb_model=first)
    first, _ = _dg_lines(capsys, BASE, x, y, xv, yv, 3, verbose_eval=False)
    _, got = _dg_lines(capsys, BASE, x, y, xv, yv, 2, xgb_model=first)
    assert (
        _shape(got)
        == _shape(want)
        == [["[0]", "train-logloss", "valid-logloss"], ["[1]", "train-logloss", "valid-logloss"]]
    )


def test_early_stopping_prints_no_message_and_shows_the_last_round_like_xgboost(capsys, no_compile_notice):
    x, y = _data(n=2000)
    xv, yv = _data(n=1000, seed=5)
    params = {**BASE, "eta": 1.0, "max_depth": 8}
    b, got = _dg_lines(capsys, params, x, y, xv, yv, 200, early_stopping_rounds=3, verbose_eval=50)
    last = b.num_boosted_rounds() - 1
    assert last % 50 != 0  # the stopping round is off-period: printed when training ends
    assert [line.split("\t")[0] for line in got] == ["[0]", f"[{last}]"]


def test_a_round_a_user_callback_stops_on_is_not_printed_like_xgboost(capsys, no_compile_notice):
    import xgboost as xgb

    def stopper(base):
        class StopAtFour(base):
            def after_iteration(self, model, epoch, evals_log):
                return epoch == 4

        return StopAtFour()

    x, y = _data(n=400)
    xv, yv = _data(n=200, seed=3)
    _, want = _xgb_lines(
        capsys, BASE, x, y, xv, yv, 20, verbose_eval=3, callbacks=[stopper(xgb.callback.TrainingCallback)]
    )
    _, got = _dg_lines(capsys, BASE, x, y, xv, yv, 20, verbose_eval=3, callbacks=[stopper(dg.TrainingCallback)])
    assert _shape(got) == _shape(want) and [line[0] for line in _shape(got)] == ["[0]", "[3]"]


def test_a_negative_verbose_eval_is_rejected():
    x, y = _data(n=100)
    with pytest.raises(dg.DGBoostValueError, match="verbose_eval"):
        dg.train(BASE, dg.DMatrix(x, y), 1, verbose_eval=-2)


def test_a_warm_numba_cache_prints_no_compilation_notice(tmp_path):
    """Each run is a fresh process on a Numba cache of the test's own, so the test does not
    depend on the machine's cache (empty on a fresh checkout): the first run compiles into it
    and says so; the second, the same training, is served by the cache and must say nothing."""
    cache = tmp_path / "numba-cache"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    code = (
        "import numpy as np, dgboost as dg\n"
        "x = np.random.default_rng(0).normal(size=(100, 8))\n"
        f"dg.train({BASE!r}, dg.DMatrix(x, (x[:, 0] > 0).astype(float)), 1)\n"
    )

    def run():
        return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)

    cold = run()
    assert "compiling the CPU kernels with Numba" in cold.stderr  # the cache was empty: it compiled
    assert any(cache.rglob("*.nbi"))  # ... into the test's cache
    assert run().stderr == ""


@pytest.mark.parametrize("max_abs", [1e-30, 3e-7, 0.5, 1.0, 1.5, 2.0**20, 7e12])
def test_fixed_point_scale_keeps_every_quantised_value_within_int32(max_abs):
    from dgboost.training import fixed_point_scale

    s = fixed_point_scale(max_abs, 10**6)
    assert abs(round(max_abs * s)) <= 2**30
    assert max_abs * s > 2**29  # and uses the range: at least 29 bits of resolution
    assert np.log2(s) == int(np.log2(s))  # a power of two: scaling is exact


@pytest.mark.parametrize(
    "params",
    [
        BASE,
        {**BASE, "objective": "multi:softprob", "num_class": 3, "subsample": 0.7},
        {**BASE, "objective": "reg:squarederror", "max_depth": 3, "alpha": 0.5, "max_delta_step": 0.4},
    ],
)
def test_leaves_added_to_the_margins_from_node_records_give_the_model_the_host_trees_give(monkeypatch, params):
    from dgboost.grower import TreeGrower

    x, y = _data(task="regression" if params["objective"].startswith("reg") else "binary")
    if params["objective"].startswith("multi"):
        y = np.digitize(y, [0.3, 0.7]).astype(np.float32)
    queued = dg.train(params, dg.DMatrix(x, y), 6).to_json()
    # the same trees grown in whole levels, but their leaves added from the host's trees
    monkeypatch.setattr(TreeGrower, "grows_without_reads", lambda self: False)
    assert dg.train(params, dg.DMatrix(x, y), 6).to_json() == queued


def test_gradients_queued_ahead_go_unused_when_a_callback_stops_training():
    x, y = _data()

    class StopAfterTwo(dg.TrainingCallback):
        def after_iteration(self, model, epoch, evals_log):
            return epoch == 1

    stopped = dg.train(BASE, dg.DMatrix(x, y), 6, callbacks=[StopAfterTwo()])
    assert stopped.num_boosted_rounds() == 2
    assert stopped.to_json() == dg.train(BASE, dg.DMatrix(x, y), 2).to_json()
    # and training on from the stopped model is training four more rounds
    more = dg.train(BASE, dg.DMatrix(x, y), 4, xgb_model=stopped)
    assert more.to_json() == dg.train(BASE, dg.DMatrix(x, y), 6).to_json()


@pytest.mark.parametrize("objective", ["rank:ndcg", "rank:pairwise"])
def test_ranking_models_do_not_depend_on_how_query_groups_are_partitioned(objective):
    rng = np.random.default_rng(4)
    n_groups, size = 60, 10
    x = rng.normal(size=(n_groups * size, 5)).astype(np.float32)
    y = np.clip(np.round(x[:, 0] + rng.normal(scale=0.5, size=len(x)) + 1), 0, 3).astype(np.float32)
    w = rng.uniform(0.5, 2.0, size=n_groups).repeat(size).astype(np.float32)
    params = {
        "objective": objective,
        "max_depth": 4,
        "max_bin": 32,
        "lambdarank_pair_method": "mean",
        "lambdarank_num_pair_per_sample": 2,
    }
    group = np.full(n_groups, size)
    single = dg.train(params, dg.DMatrix(x, y, weight=w, group=group), 4, verbose_eval=False).to_json()

    def rank_fn(comm, rank):
        lo, hi = (0, 250) if rank == 0 else (250, 600)  # whole groups on each rank
        d = dg.DMatrix(x[lo:hi], y[lo:hi], weight=w[lo:hi], group=np.full((hi - lo) // size, size))
        return dg.train(params, d, 4, verbose_eval=False, comm=comm).to_json()

    assert all(m == single for m in run_in_threads(2, rank_fn))


@pytest.mark.parametrize("subsample", [1.0, 0.7])
def test_absolute_error_leaf_refits_do_not_depend_on_the_partitioning(subsample):
    x, y = _data(n=1500, task="regression")
    params = {**BASE, "objective": "reg:absoluteerror", "subsample": subsample, "seed": 5}
    single = dg.train(params, dg.DMatrix(x, y), 4, verbose_eval=False).to_json()
    assert all(m == single for m in _train_partitioned(params, x, y, [400, 1100], rounds=4))


def test_an_unweighted_absolute_error_leaf_is_eta_times_the_interpolated_median_of_its_residuals():
    # four rows, one leaf (gamma forbids splits), base_score 0: the residuals are the labels;
    # their interpolated median (XGBoost's) is 5.5, the lower weighted median would be 1
    x = np.arange(4, dtype=np.float32).reshape(-1, 1)
    y = np.array([0.0, 1.0, 10.0, 11.0], np.float32)
    params = {"objective": "reg:absoluteerror", "base_score": 0.0, "gamma": 1e9, "eta": 0.5}
    b = dg.train(params, dg.DMatrix(x, y), 1, verbose_eval=False)
    margin = b.predict(dg.DMatrix(x), output_margin=True)
    np.testing.assert_allclose(margin, 0.5 * np.median(y), rtol=1e-6)
    np.testing.assert_allclose(margin, 2.75, rtol=1e-6)


@pytest.mark.parametrize("params", [BASE, {**BASE, "subsample": 0.8, "colsample_bynode": 0.7, "seed": 5}])
def test_a_strided_split_gives_the_model_of_its_parts_concatenated_in_rank_order(params):
    x, y = _data(n=1500)
    models = run_in_threads(
        2, lambda comm, r: dg.train(params, dg.DMatrix(x[r::2], y[r::2]), 4, verbose_eval=False, comm=comm).to_json()
    )
    order = np.concatenate([np.arange(0, len(x), 2), np.arange(1, len(x), 2)])
    single = dg.train(params, dg.DMatrix(x[order], y[order]), 4, verbose_eval=False).to_json()
    assert models[0] == single
    if "subsample" in params:
        # the rows in their original order are a different sample: the guarantee is the concatenation
        unordered = dg.train(params, dg.DMatrix(x, y), 4, verbose_eval=False).to_json()
        assert unordered != single


@pytest.mark.parametrize(
    "params",
    [
        {"max_depth": 6},
        {"max_depth": 4, "colsample_bytree": 0.7, "colsample_bylevel": 0.6, "subsample": 0.8},
        {"max_depth": 10, "gamma": 1.0},
        {"objective": "multi:softprob", "num_class": 3, "max_depth": 3},
    ],
)
def test_trees_grown_in_whole_levels_equal_trees_grown_level_by_level(params, monkeypatch):
    from dgboost import grower

    rng = np.random.default_rng(21)
    x = rng.normal(size=(2000, 7)).astype(np.float32)
    x[rng.random(x.shape) < 0.1] = np.nan
    y = (np.nan_to_num(x[:, 0]) + np.nan_to_num(x[:, 1]) * np.nan_to_num(x[:, 2]) > 0).astype(np.float32)
    if params.get("num_class"):
        y = (np.nan_to_num(x[:, 0]) > 0) + (np.nan_to_num(x[:, 3]) > 0.5).astype(np.float32)
    full = dict({"objective": "binary:logistic", "seed": 5}, **params)
    taken = []
    real = grower.TreeGrower._whole_levels
    monkeypatch.setattr(grower.TreeGrower, "_whole_levels", lambda self: taken.append(real(self)) or taken[-1])
    whole = dg.train(full, dg.DMatrix(x, y), 6, verbose_eval=False)
    assert taken and all(taken)  # these parameters grow whole levels
    monkeypatch.setattr(grower.TreeGrower, "_whole_levels", lambda self: False)
    by_level = dg.train(full, dg.DMatrix(x, y), 6, verbose_eval=False)
    assert whole.save_raw("json") == by_level.save_raw("json")


@pytest.mark.parametrize(
    "params",
    [
        {"max_leaves": 40, "max_depth": 5, "colsample_bylevel": 0.6, "colsample_bytree": 0.8},
        {"max_leaves": 0, "max_depth": 4},
        {"max_leaves": 63, "max_depth": 0, "subsample": 0.7, "min_child_weight": 3},
    ],
)
def test_lossguide_with_splits_computed_ahead_builds_the_strict_best_first_tree(params, monkeypatch):
    from dgboost.backend.base import LookaheadBudget
    from dgboost.backend.cpu import CPUBackend

    rng = np.random.default_rng(22)
    x = rng.normal(size=(3000, 8)).astype(np.float32)
    x[rng.random(x.shape) < 0.1] = np.nan
    y = (np.nan_to_num(x[:, 0]) + np.nan_to_num(x[:, 1]) * np.nan_to_num(x[:, 2]) > 0).astype(np.float32)
    full = dict({"objective": "binary:logistic", "grow_policy": "lossguide", "seed": 2}, **params)
    models, reads = [], []
    real_read = CPUBackend.to_host
    budgets = [
        LookaheadBudget(nodes=256, levels=12, hist_bytes=256 << 20),  # whole levels ahead
        LookaheadBudget(nodes=8, levels=1, hist_bytes=64 << 20),
        LookaheadBudget(nodes=1, levels=0, hist_bytes=0),
    ]  # strict best-first: one node a read
    for budget in budgets:
        count = [0]
        monkeypatch.setattr(CPUBackend, "lookahead", budget)
        monkeypatch.setattr(
            CPUBackend, "to_host", lambda self, a: count.__setitem__(0, count[0] + 1) or real_read(self, a)
        )
        models.append(dg.train(full, dg.DMatrix(x, y), 5, verbose_eval=False).save_raw("json"))
        reads.append(count[0])
    assert models[0] == models[1] == models[2]
    # the point of splitting ahead: far fewer device round trips
    assert reads[0] < reads[1] < reads[2] / 2


def test_lossguide_levels_split_ahead_give_the_same_tree_with_fewer_device_batches(monkeypatch):
    from dgboost import grower
    from dgboost.backend.base import LookaheadBudget
    from dgboost.backend.cpu import CPUBackend

    rng = np.random.default_rng(23)
    x = rng.normal(size=(4000, 6)).astype(np.float32)
    x[rng.random(x.shape) < 0.1] = np.nan
    y = (np.nan_to_num(x[:, 0]) * 2 + np.sin(np.nan_to_num(x[:, 1]) * 3) + rng.normal(scale=0.3, size=4000)).astype(
        np.float32
    )
    params = {
        "objective": "reg:squarederror",
        "grow_policy": "lossguide",
        "max_leaves": 48,
        "max_depth": 0,
        "max_bin": 32,
    }
    monkeypatch.setattr(CPUBackend, "lookahead", LookaheadBudget(nodes=256, levels=12, hist_bytes=256 << 20))
    real = grower.TreeGrower._split
    models, batches, levels_used = [], [], []
    for most in (None, 1, 0):  # as many levels as fit, the children's children only, none
        count, used = [0], [0]

        def split(self, *args, levels_ahead=0, _most=most, _count=count, _used=used, **kw):
            levels = levels_ahead if _most is None else min(_most, levels_ahead)
            _count[0] += 1
            _used[0] = max(_used[0], levels)
            return real(self, *args, levels_ahead=levels, **kw)

        monkeypatch.setattr(grower.TreeGrower, "_split", split)
        models.append(dg.train(params, dg.DMatrix(x, y), 4, verbose_eval=False).save_raw("json"))
        batches.append(count[0])
        levels_used.append(used[0])
    assert models[0] == models[1] == models[2]
    assert levels_used[0] > 2 and levels_used[1] == 1 and levels_used[2] == 0
    assert batches[0] < 0.8 * batches[1] and batches[1] < 0.8 * batches[2]
