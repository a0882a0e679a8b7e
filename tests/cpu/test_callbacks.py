"""dgboost.callback against xgboost.callback (3.4.1): the same names, the same decisions."""

import os

import numpy as np
import pytest
import xgboost as xgb

import dgboost as dg
from dgboost.callback import (
    EarlyStopping,
    EvaluationMonitor,
    LearningRateScheduler,
    TrainingCallback,
    TrainingCheckPoint,
    format_evaluation,
)


def _data(n=800, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 5)).astype(np.float32)
    y = (x[:, 0] + np.sin(2 * x[:, 1]) + rng.normal(scale=0.8, size=n) > 0).astype(np.float32)
    return x, y


PARAMS = {"objective": "binary:logistic", "max_depth": 4, "eta": 0.5, "max_bin": 32}
X, Y = _data()
XV, YV = _data(400, seed=1)


def _dtrain():
    return dg.DMatrix(X, Y)


def _dvalid():
    return dg.DMatrix(XV, YV)


@pytest.fixture
def no_compile_notice(monkeypatch):
    import dgboost.backend._compile_notice as notice

    monkeypatch.setitem(notice._state, "said", True)


def test_the_base_class_is_one_class_under_every_name():
    assert dg.TrainingCallback is TrainingCallback is dg.training.TrainingCallback
    assert dg.callback.EarlyStopping is EarlyStopping


class _Scores:
    """A stand-in model for driving early stopping by hand in both libraries."""

    def __init__(self, rounds=0):
        self.rounds, self.attrs = rounds, {}
        self.best_iteration = self.best_score = None

    def num_boosted_rounds(self):
        return self.rounds

    def set_attr(self, **kw):  # XGBoost's EarlyStopping records the best round here
        self.attrs.update(kw)


def _drive(callback, scores, model, metric="logloss"):
    """Feed ``scores`` round by round; returns the epoch training stops after (or None)."""
    callback.before_training(model)
    log = {"valid": {metric: []}}
    for epoch, score in enumerate(scores):
        log["valid"][metric].append(score)
        if callback.after_iteration(model, epoch, log):
            return epoch
    return None


@pytest.mark.parametrize(
    "scores, metric, kw",
    [
        ([0.5, 0.4, 0.41, 0.42, 0.43, 0.3], "logloss", {"rounds": 3}),
        ([0.5, 0.4, 0.39, 0.385, 0.384, 0.383], "logloss", {"rounds": 2, "min_delta": 0.005}),
        ([0.6, 0.7, 0.69, 0.71, 0.70, 0.70, 0.70], "auc", {"rounds": 3}),
        ([0.6, 0.7, 0.69, 0.68], "auc", {"rounds": 2, "maximize": False}),
        ([0.2, 0.1, 0.3, 0.3], "mape", {"rounds": 2}),
    ],
)
def test_early_stopping_stops_on_the_round_xgboost_stops_on_with_its_best_round(scores, metric, kw):
    ours, theirs = _Scores(rounds=4), _Scores(rounds=4)
    stop = _drive(EarlyStopping(**kw), scores, ours, metric)
    want = _drive(xgb.callback.EarlyStopping(**kw), scores, theirs, metric)
    assert stop == want
    assert ours.best_iteration == int(theirs.attrs["best_iteration"])
    assert ours.best_score == pytest.approx(float(theirs.attrs["best_score"]))


def test_early_stopping_reads_the_named_data_set_and_metric():
    model = _Scores()
    es = EarlyStopping(rounds=1, data_name="train", metric_name="error")
    es.before_training(model)
    log = {"train": {"error": [0.3], "logloss": [0.5]}, "valid": {"error": [0.1], "logloss": [0.4]}}
    assert not es.after_iteration(model, 0, log)
    log["train"]["error"].append(0.31)
    log["valid"]["error"].append(0.0)  # an improvement elsewhere does not count
    assert es.after_iteration(model, 1, log) and model.best_iteration == 0
    with pytest.raises(dg.DGBoostError, match="No dataset named: test"):
        EarlyStopping(rounds=1, data_name="test").after_iteration(model, 0, log)


def test_early_stopping_callback_gives_the_model_of_early_stopping_rounds():
    evals = [(_dvalid(), "valid")]
    builtin = dg.train(PARAMS, _dtrain(), 60, evals=evals, early_stopping_rounds=3, verbose_eval=False)
    callback = dg.train(PARAMS, _dtrain(), 60, evals=evals, callbacks=[EarlyStopping(rounds=3)], verbose_eval=False)
    assert builtin.best_iteration + 4 == builtin.num_boosted_rounds() < 60
    assert callback.save_raw() == builtin.save_raw()


def test_early_stopping_save_best_keeps_best_iteration_plus_one_rounds_like_xgboost():
    ours = dg.train(
        PARAMS,
        _dtrain(),
        60,
        evals=[(_dvalid(), "valid")],
        callbacks=[EarlyStopping(rounds=3, save_best=True)],
        verbose_eval=False,
    )
    theirs = xgb.train(
        PARAMS,
        xgb.DMatrix(X, Y),
        60,
        evals=[(xgb.DMatrix(XV, YV), "valid")],
        callbacks=[xgb.callback.EarlyStopping(rounds=3, save_best=True)],
        verbose_eval=False,
    )
    assert ours.num_boosted_rounds() == ours.best_iteration + 1
    assert theirs.num_boosted_rounds() == theirs.best_iteration + 1
    full = dg.train(PARAMS, _dtrain(), ours.best_iteration + 1, verbose_eval=False)
    np.testing.assert_array_equal(ours.predict(_dvalid()), full.predict(_dvalid()))


def test_early_stopping_save_best_is_refused_by_cv_as_xgboost_refuses_it():
    with pytest.raises(dg.DGBoostError, match="save_best"):
        dg.cv(PARAMS, _dtrain(), 5, nfold=2, callbacks=[EarlyStopping(rounds=2, save_best=True)])


def test_learning_rate_scheduler_trains_the_model_of_those_etas_round_by_round():
    rates = [0.1, 0.05, 0.4, 0.2, 0.9]  # one per round, as XGBoost's: the last is set after the last round
    scheduled = dg.train(
        {**PARAMS, "subsample": 0.7}, _dtrain(), 5, callbacks=[LearningRateScheduler(rates)], verbose_eval=False
    )
    # as XGBoost's: after round i the rate becomes rates[i], so round 0 uses the params' eta
    etas = [PARAMS["eta"], *rates[:4]]
    step = None
    for eta in etas:
        step = dg.train({**PARAMS, "subsample": 0.7, "eta": eta}, _dtrain(), 1, xgb_model=step, verbose_eval=False)
    assert scheduled.get_dump(with_stats=True) == step.get_dump(with_stats=True)
    by_function = dg.train(
        {**PARAMS, "subsample": 0.7},
        _dtrain(),
        5,
        callbacks=[LearningRateScheduler(lambda epoch: rates[epoch])],
        verbose_eval=False,
    )
    assert by_function.get_dump(with_stats=True) == step.get_dump(with_stats=True)


def _tree_scales(model, data, rounds):
    """The largest change of the margin that each round's tree makes (rounds 1..rounds-1)."""
    margins = [model.predict(data, output_margin=True, iteration_range=(0, r + 1)) for r in range(rounds)]
    return [float(np.abs(b - a).max()) for a, b in zip(margins, margins[1:])]


def test_learning_rate_scheduler_changes_the_trees_as_it_does_in_xgboost():
    rates = [0.3, 0.01, 0.01, 0.01]
    ours = dg.train(PARAMS, _dtrain(), 4, callbacks=[LearningRateScheduler(rates)], verbose_eval=False)
    theirs = xgb.train(
        {**PARAMS, "tree_method": "hist"}, xgb.DMatrix(X, Y), 4, callbacks=[xgb.callback.LearningRateScheduler(rates)]
    )
    ours_scale, theirs_scale = _tree_scales(ours, _dtrain(), 4), _tree_scales(theirs, xgb.DMatrix(X), 4)
    # rounds 2 and 3 grow at eta 0.01, round 1 at 0.3
    for scale in (ours_scale, theirs_scale):
        assert scale[1] < scale[0] / 10 and scale[2] < scale[0] / 10
    np.testing.assert_allclose(ours_scale, theirs_scale, rtol=0.3)


def test_learning_rate_scheduler_refuses_what_is_neither_callable_nor_a_sequence():
    with pytest.raises(TypeError, match="Invalid learning rates"):
        LearningRateScheduler(0.1)


def _epoch_lines(lines):
    return [[field.rsplit(":", 1)[0] for field in line.split("\t")] for line in lines]


def test_evaluation_monitor_prints_the_lines_xgboost_prints(capsys, no_compile_notice):
    xgb.train(
        PARAMS,
        xgb.DMatrix(X, Y),
        8,
        evals=[(xgb.DMatrix(XV, YV), "valid")],
        verbose_eval=False,
        callbacks=[xgb.callback.EvaluationMonitor(period=3)],
    )
    want = capsys.readouterr().out.splitlines()
    dg.train(
        PARAMS, _dtrain(), 8, evals=[(_dvalid(), "valid")], verbose_eval=False, callbacks=[EvaluationMonitor(period=3)]
    )
    got = capsys.readouterr().out.splitlines()
    assert _epoch_lines(got) == _epoch_lines(want) and [line[:3] for line in got] == ["[0]", "[3]", "[6]", "[7]"]


def test_evaluation_monitor_of_another_rank_prints_nothing(capsys, no_compile_notice):
    dg.train(
        PARAMS, _dtrain(), 3, evals=[(_dvalid(), "valid")], verbose_eval=False, callbacks=[EvaluationMonitor(rank=1)]
    )
    assert capsys.readouterr().out == ""


def test_format_evaluation_writes_means_and_standard_deviations():
    log = {"train": {"rmse": [1.0, 0.5]}, "test": {"rmse": [(0.7, 0.01234567)]}}
    assert format_evaluation(3, log) == "[3]\ttrain-rmse:0.50000\ttest-rmse:0.70000"
    assert format_evaluation(3, log, show_stdv=True) == "[3]\ttrain-rmse:0.50000\ttest-rmse:0.70000+0.01235"


def test_callbacks_count_epochs_from_zero_when_a_model_is_continued_like_xgboost():
    def recorder(base):
        class Record(base):
            def __init__(self):
                super().__init__()
                self.epochs = []

            def after_iteration(self, model, epoch, evals_log):
                self.epochs.append(epoch)
                return False

        return Record()

    first = dg.train(PARAMS, _dtrain(), 3, verbose_eval=False)
    ours = recorder(TrainingCallback)
    dg.train(PARAMS, _dtrain(), 2, xgb_model=first, callbacks=[ours], verbose_eval=False)
    theirs = recorder(xgb.callback.TrainingCallback)
    xgb_first = xgb.train(PARAMS, xgb.DMatrix(X, Y), 3)
    xgb.train(PARAMS, xgb.DMatrix(X, Y), 2, xgb_model=xgb_first, callbacks=[theirs])
    assert ours.epochs == theirs.epochs == [0, 1]


class _Interrupt(Exception):
    pass


class _InterruptAt(TrainingCallback):
    def __init__(self, epoch):
        self.epoch = epoch

    def before_iteration(self, model, epoch, evals_log):
        if epoch == self.epoch:
            raise _Interrupt
        return False


def _read_all(directory):
    return {name: open(os.path.join(directory, name), "rb").read() for name in sorted(os.listdir(directory))}


def test_training_checkpoint_writes_the_files_checkpoint_dir_writes(tmp_path):
    evals = [(_dvalid(), "valid")]
    dg.train(
        PARAMS,
        _dtrain(),
        7,
        evals=evals,
        verbose_eval=False,
        early_stopping_rounds=50,
        checkpoint_dir=tmp_path / "builtin",
        checkpoint_every=2,
    )
    dg.train(
        PARAMS,
        _dtrain(),
        7,
        evals=evals,
        verbose_eval=False,
        early_stopping_rounds=50,
        callbacks=[TrainingCheckPoint(tmp_path / "callback", interval=2)],
    )
    builtin, callback = _read_all(tmp_path / "builtin"), _read_all(tmp_path / "callback")
    assert list(builtin) == ["checkpoint-00000004.json", "checkpoint-00000006.json"]
    assert callback == builtin


def test_training_checkpoint_resumes_to_the_uninterrupted_model(tmp_path):
    evals = [(_dvalid(), "valid")]
    whole = dg.train({**PARAMS, "subsample": 0.8}, _dtrain(), 9, evals=evals, verbose_eval=False)
    with pytest.raises(_Interrupt):
        dg.train(
            {**PARAMS, "subsample": 0.8},
            _dtrain(),
            9,
            evals=evals,
            verbose_eval=False,
            callbacks=[_InterruptAt(5), TrainingCheckPoint(tmp_path, interval=2)],
        )
    resumed = dg.train(
        {**PARAMS, "subsample": 0.8},
        _dtrain(),
        9,
        evals=evals,
        verbose_eval=False,
        checkpoint_dir=tmp_path,
        checkpoint_every=2,
        resume=True,
    )
    assert resumed.save_raw() == whole.save_raw()


def test_training_checkpoint_outside_train_says_it_needs_train():
    with pytest.raises(dg.DGBoostError, match="needs dgboost.train"):
        TrainingCheckPoint("unused").after_iteration(dg.Booster(), 0, {})


def test_cv_callbacks_see_fold_means_and_standard_deviations_like_xgboost():
    def recorder(base):
        class Record(base):
            def after_iteration(self, model, epoch, evals_log):
                self.last = {d: {m: v[-1] for m, v in ms.items()} for d, ms in evals_log.items()}
                return False

        return Record()

    ours, theirs = recorder(TrainingCallback), recorder(xgb.callback.TrainingCallback)
    folds = [(np.arange(400, 800), np.arange(400)), (np.arange(400), np.arange(400, 800))]
    dg.cv(PARAMS, _dtrain(), 3, folds=folds, metrics="logloss", callbacks=[ours])
    xgb.cv(PARAMS, xgb.DMatrix(X, Y), 3, folds=folds, metrics="logloss", callbacks=[theirs])
    assert list(ours.last) == list(theirs.last) == ["train", "test"]
    for data in ("train", "test"):
        mean, std = ours.last[data]["logloss"]
        want_mean, want_std = theirs.last[data]["logloss"]
        assert mean == pytest.approx(want_mean, rel=0.05) and std == pytest.approx(want_std, abs=0.02)
