"""Checkpoints and resuming in one process: the resumed model file is the uninterrupted one."""

from __future__ import annotations

import os

import numpy as np
import pytest

import dgboost as dg
from dgboost.checkpoint import CheckpointWarning


class _Interrupt(Exception):
    """Stands for a crash or a pre-emption in the middle of training."""


class InterruptAtRound(dg.TrainingCallback):
    def __init__(self, round_index: int):
        self.round_index = round_index

    def before_iteration(self, model, epoch, evals_log):
        if epoch == self.round_index:
            raise _Interrupt(f"interrupted at round {epoch}")
        return False


def _data(n=600, seed=0, classes=2):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 5)).astype(np.float32)
    signal = x[:, 0] + np.sin(2 * x[:, 1]) + rng.normal(scale=0.8, size=n)
    x[rng.random(x.shape) < 0.1] = np.nan
    if classes == 2:
        y = (signal > 0).astype(np.float32)
    else:
        y = np.digitize(signal, np.quantile(signal, np.linspace(0, 1, classes + 1)[1:-1])).astype(np.float32)
    return x, y


SAMPLING = {
    "objective": "binary:logistic",
    "max_depth": 3,
    "max_bin": 32,
    "subsample": 0.8,
    "colsample_bytree": 0.8,
    "colsample_bynode": 0.7,
    "seed": 7,
}
MULTICLASS = {
    "objective": "multi:softprob",
    "num_class": 3,
    "max_depth": 3,
    "max_bin": 16,
    "colsample_bylevel": 0.8,
    "subsample": 0.9,
    "seed": 2,
}


def _model_file(booster, path) -> bytes:
    booster.save_model(str(path))
    with open(path, "rb") as f:
        return f.read()


class RecordRounds(dg.TrainingCallback):
    """Records each round a run trains: (epoch, rounds the model already holds)."""

    def __init__(self):
        self.rounds: list[tuple[int, int]] = []

    def before_iteration(self, model, epoch, evals_log):
        self.rounds.append((epoch, model.num_boosted_rounds()))
        return False


def _interrupted_then_resumed(params, dtrain, ckpt, at, rounds=60, every=10, **kw):
    """The model of a run interrupted at round ``at`` and resumed, after checking that the
    resumed run trained only the rounds after its checkpoint (``at`` rounded down to
    ``every``), on the checkpoint's model: a resume that retrains from round 0 fails here."""
    with pytest.raises(_Interrupt):
        dg.train(
            params,
            dtrain,
            rounds,
            checkpoint_dir=ckpt,
            checkpoint_every=every,
            callbacks=[InterruptAtRound(at)],
            verbose_eval=False,
            **kw,
        )
    record = RecordRounds()
    booster = dg.train(
        params,
        dtrain,
        rounds,
        checkpoint_dir=ckpt,
        checkpoint_every=every,
        resume=True,
        callbacks=[record],
        verbose_eval=False,
        **kw,
    )
    first = at // every * every
    assert record.rounds[0] == (first, first), f"resumed at (round, rounds held) {record.rounds[0]}"
    assert [epoch for epoch, _ in record.rounds] == list(range(first, first + len(record.rounds)))
    assert [held for _, held in record.rounds] == [epoch for epoch, _ in record.rounds]
    return booster


@pytest.mark.parametrize("params,classes", [(SAMPLING, 2), (MULTICLASS, 3)], ids=["sampling", "multiclass"])
def test_a_run_interrupted_at_round_30_and_resumed_saves_the_model_file_of_an_uninterrupted_run(
    tmp_path, params, classes
):
    x, y = _data(classes=classes)
    dtrain = dg.DMatrix(x, y)
    full = dg.train(params, dtrain, 60, verbose_eval=False)
    resumed = _interrupted_then_resumed(params, dtrain, tmp_path / "ckpt", at=30)
    assert _model_file(resumed, tmp_path / "resumed.json") == _model_file(full, tmp_path / "full.json")


def test_checkpoints_hold_10_20_30_rounds_and_only_the_newest_two_are_kept(tmp_path):
    x, y = _data(n=200)
    booster = dg.train(
        {"max_depth": 2}, dg.DMatrix(x, y), 35, checkpoint_dir=tmp_path, checkpoint_every=10, verbose_eval=False
    )
    assert booster.num_boosted_rounds() == 35
    assert sorted(os.listdir(tmp_path)) == ["checkpoint-00000020.json", "checkpoint-00000030.json"]


def test_early_stopping_state_and_evaluation_history_survive_a_resume(tmp_path):
    x, y = _data()
    xv, yv = _data(n=300, seed=1)
    dtrain, dvalid = dg.DMatrix(x, y), dg.DMatrix(xv, yv)
    params = {**SAMPLING, "eta": 0.2}
    kw = {"evals": [(dtrain, "train"), (dvalid, "valid")], "early_stopping_rounds": 10}
    full_history: dict = {}
    full = dg.train(params, dtrain, 60, evals_result=full_history, verbose_eval=False, **kw)
    # interrupted on the round before it stops, the run resumes from a checkpoint written
    # after the best round: the rounds without improvement must carry over
    stop = full.num_boosted_rounds() - 1
    assert stop < 59 and full.best_iteration < (stop - 1) // 5 * 5
    history: dict = {}
    resumed = _interrupted_then_resumed(
        params, dtrain, tmp_path / "ckpt", at=stop - 1, every=5, evals_result=history, **kw
    )
    assert history == full_history
    assert (resumed.best_iteration, resumed.best_score) == (full.best_iteration, full.best_score)
    assert _model_file(resumed, tmp_path / "resumed.json") == _model_file(full, tmp_path / "full.json")


def test_resuming_a_finished_run_trains_no_more_rounds(tmp_path):
    x, y = _data(n=300)
    dtrain = dg.DMatrix(x, y)
    first = dg.train(SAMPLING, dtrain, 20, checkpoint_dir=tmp_path, checkpoint_every=10, verbose_eval=False)
    again = dg.train(
        SAMPLING,
        dtrain,
        20,
        checkpoint_dir=tmp_path,
        checkpoint_every=10,
        resume=True,
        callbacks=[InterruptAtRound(0)],
        verbose_eval=False,
    )  # would raise if a round ran
    assert again.to_json() == first.to_json()


def test_resume_without_any_checkpoint_trains_from_the_start(tmp_path):
    x, y = _data(n=300)
    dtrain = dg.DMatrix(x, y)
    got = dg.train(SAMPLING, dtrain, 5, checkpoint_dir=tmp_path / "empty", resume=True, verbose_eval=False)
    assert got.to_json() == dg.train(SAMPLING, dtrain, 5, verbose_eval=False).to_json()


def _checkpointed(tmp_path, params=SAMPLING, rounds=20, x=None, y=None):
    if x is None:
        x, y = _data(n=300)
    dg.train(params, dg.DMatrix(x, y), rounds, checkpoint_dir=tmp_path, checkpoint_every=10, verbose_eval=False)
    return x, y


def test_a_checkpoint_written_with_other_parameters_is_refused_naming_them(tmp_path):
    x, y = _checkpointed(tmp_path)
    with pytest.raises(dg.DGBoostValueError, match=r"other training parameters \(max_depth: checkpoint 3, now 4\)"):
        dg.train({**SAMPLING, "max_depth": 4}, dg.DMatrix(x, y), 30, checkpoint_dir=tmp_path, resume=True)
    with pytest.raises(dg.DGBoostValueError, match=r"early_stopping_rounds: checkpoint None, now 5"):
        dg.train(
            SAMPLING,
            dg.DMatrix(x, y),
            30,
            checkpoint_dir=tmp_path,
            resume=True,
            evals=[(dg.DMatrix(x, y), "train")],
            early_stopping_rounds=5,
        )


def test_a_checkpoint_written_for_other_data_is_refused_saying_what_differs(tmp_path):
    x, y = _checkpointed(tmp_path)
    with pytest.raises(dg.DGBoostValueError, match=r"training data differs \(rows: checkpoint 300, now 299\)"):
        dg.train(SAMPLING, dg.DMatrix(x[1:], y[1:]), 30, checkpoint_dir=tmp_path, resume=True)
    changed = y.copy()
    changed[::2] = 1.0 - changed[::2]
    with pytest.raises(dg.DGBoostValueError, match=r"training data differs \(the values, labels or weights"):
        dg.train(SAMPLING, dg.DMatrix(x, changed), 30, checkpoint_dir=tmp_path, resume=True)
    with pytest.raises(dg.DGBoostValueError, match=r"training data differs \(feature names"):
        dg.train(SAMPLING, dg.DMatrix(x, y, feature_names=list("abcde")), 30, checkpoint_dir=tmp_path, resume=True)


@pytest.mark.parametrize("damage", ["truncated", "altered", "empty"])
def test_a_damaged_newest_checkpoint_is_skipped_with_a_warning_and_the_previous_one_resumed(tmp_path, damage):
    x, y = _data(n=300)
    dtrain = dg.DMatrix(x, y)
    full = dg.train(SAMPLING, dtrain, 30, verbose_eval=False)
    ckpt = tmp_path / "ckpt"
    with pytest.raises(_Interrupt):
        dg.train(
            SAMPLING,
            dtrain,
            30,
            checkpoint_dir=ckpt,
            checkpoint_every=10,
            callbacks=[InterruptAtRound(25)],
            verbose_eval=False,
        )
    newest = ckpt / "checkpoint-00000020.json"
    text = newest.read_bytes()
    newest.write_bytes(
        {"truncated": text[: len(text) // 2], "altered": text.replace(b'"round":20', b'"round":21'), "empty": b""}[
            damage
        ]
    )
    with pytest.warns(CheckpointWarning, match="skipping checkpoint .*checkpoint-00000020.json"):
        resumed = dg.train(
            SAMPLING,
            dtrain,
            30,
            checkpoint_dir=ckpt,
            checkpoint_every=10,
            resume=True,
            callbacks=[record := RecordRounds()],
            verbose_eval=False,
        )
    assert [r for r, _ in record.rounds] == list(range(10, 30))  # from the older checkpoint's round
    assert record.rounds[0] == (10, 10)
    assert resumed.to_json() == full.to_json()


def test_checkpoint_arguments_are_checked(tmp_path):
    x, y = _data(n=50)
    d = dg.DMatrix(x, y)
    with pytest.raises(dg.DGBoostValueError, match="need checkpoint_dir"):
        dg.train({}, d, 2, resume=True)
    with pytest.raises(dg.DGBoostValueError, match="checkpoint_every must be a positive integer"):
        dg.train({}, d, 2, checkpoint_dir=tmp_path, checkpoint_every=0)


class _Planted:
    """Unpickling this writes its marker file: the proof that a file was unpickled."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_pickle_placed_where_a_checkpoint_belongs_is_refused_and_never_unpickled(tmp_path):
    import pickle

    marker = tmp_path / "unpickled"
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "checkpoint-00000010.json").write_bytes(pickle.dumps(_Planted(str(marker))))
    x, y = _data(n=100)
    with pytest.raises(dg.DGBoostValueError, match=r"checkpoint-00000010.json is a Python pickle, not a dgboost"):
        dg.train(SAMPLING, dg.DMatrix(x, y), 20, checkpoint_dir=ckpt, resume=True, verbose_eval=False)
    assert not marker.exists()


def test_a_pickle_given_as_a_model_file_is_refused_and_never_unpickled(tmp_path):
    import pickle

    marker = tmp_path / "unpickled"
    model = tmp_path / "model.json"
    model.write_bytes(pickle.dumps(_Planted(str(marker))))
    with pytest.raises(dg.ModelFormatError, match="is not valid JSON"):
        dg.Booster(model_file=str(model))
    assert not marker.exists()
