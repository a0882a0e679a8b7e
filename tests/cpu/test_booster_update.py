"""Booster.update keeps its training job between calls: the same models as train(), made once."""

import copy
import pickle

import numpy as np
import pytest

import dgboost as dg
from dgboost import _training_job
from dgboost.datasets import make_synthetic


@pytest.fixture
def preparations(monkeypatch):
    """Counts the jobs that prepared data (cuts, binning, margins)."""
    calls = []
    prepare = _training_job.TrainingJob._prepare_data

    def counted(self, *args, **kwargs):
        calls.append(self.dtrain)
        return prepare(self, *args, **kwargs)

    monkeypatch.setattr(_training_job.TrainingJob, "_prepare_data", counted)
    return calls


def _updated(params, dtrain, rounds, booster=None):
    booster = booster or dg.Booster(params)
    for i in range(rounds):
        booster.update(dtrain, i)
    return booster


@pytest.mark.parametrize(
    "task, params",
    [
        (
            "multiclass",
            {
                "objective": "multi:softprob",
                "num_class": 3,
                "max_depth": 4,
                "subsample": 0.7,
                "colsample_bytree": 0.8,
                "seed": 5,
            },
        ),
        ("regression", {"objective": "reg:absoluteerror", "max_depth": 3, "subsample": 0.6}),
        ("binary", {"objective": "binary:logistic", "grow_policy": "lossguide", "max_leaves": 12, "max_depth": 0}),
    ],
)
def test_n_updates_give_the_model_of_n_rounds_of_train(task, params, preparations):
    X, y, _ = make_synthetic(700, 6, task=task, missing_rate=0.1, seed=4)
    dtrain = dg.DMatrix(X, y)
    rounds = dg.train(params, dtrain, 6, verbose_eval=False)
    preparations.clear()
    updated = _updated(params, dtrain, 6)
    assert updated.save_raw() == rounds.save_raw()
    assert len(preparations) == 1  # the data was prepared once, for the first call


def test_a_booster_continued_by_updates_is_a_booster_trained_on(preparations):
    X, y, _ = make_synthetic(500, 5, task="regression", seed=1)
    dtrain = dg.DMatrix(X, y)
    params = {"max_depth": 3, "subsample": 0.8}
    want = dg.train(params, dtrain, 5, verbose_eval=False)
    booster = dg.train(params, dtrain, 2, verbose_eval=False)
    preparations.clear()
    _updated(params, dtrain, 3, booster)
    assert booster.save_raw() == want.save_raw() and len(preparations) == 1


def test_a_new_dtrain_object_loaded_model_or_training_parameter_prepares_again(preparations, tmp_path):
    X, y, _ = make_synthetic(500, 5, task="binary", seed=2)
    params = {"objective": "binary:logistic", "max_depth": 3}
    dtrain = dg.DMatrix(X, y)
    booster = _updated(params, dtrain, 2)
    booster.update(dg.DMatrix(X, y), 2)  # equal rows, another object
    assert len(preparations) == 2
    booster.save_model(tmp_path / "m.json")
    booster.load_model(tmp_path / "m.json")
    booster.update(dtrain, 3)
    assert len(preparations) == 3
    booster.set_param("max_depth", 2)
    booster.update(dtrain, 4)
    assert len(preparations) == 4
    booster.update(dtrain, 5)
    assert len(preparations) == 4
    # each step is the round train() adds to the model as it stood
    step = dg.train(params, dtrain, 4, verbose_eval=False)
    step = dg.train({**params, "max_depth": 2}, dtrain, 2, xgb_model=step, verbose_eval=False)
    assert booster.get_dump(with_stats=True) == step.get_dump(with_stats=True)


def test_a_sliced_booster_updates_from_its_own_rounds(preparations):
    X, y, _ = make_synthetic(400, 5, task="regression", seed=3)
    dtrain = dg.DMatrix(X, y)
    booster = _updated({"max_depth": 3}, dtrain, 4)
    head = booster[:2]
    head.update(dtrain, 2)
    assert len(preparations) == 2  # the slice is another model: its own job
    want = dg.train({"max_depth": 3}, dtrain, 3, verbose_eval=False)
    assert head.get_dump(with_stats=True) == want.get_dump(with_stats=True)


def test_a_new_eta_between_updates_keeps_the_job_and_applies_to_the_next_trees(preparations):
    X, y, _ = make_synthetic(500, 5, task="regression", seed=6)
    dtrain = dg.DMatrix(X, y)
    booster = _updated({"max_depth": 3, "eta": 0.3}, dtrain, 2)
    booster.set_param("learning_rate", 0.05)
    _updated(None, dtrain, 2, booster)
    assert len(preparations) == 1
    step = dg.train({"max_depth": 3, "eta": 0.3}, dtrain, 2, verbose_eval=False)
    step = dg.train({"max_depth": 3, "eta": 0.05}, dtrain, 2, xgb_model=step, verbose_eval=False)
    assert booster.get_dump(with_stats=True) == step.get_dump(with_stats=True)


def test_pickling_or_copying_a_booster_leaves_its_job_behind():
    X, y, _ = make_synthetic(300, 4, task="regression", seed=7)
    dtrain = dg.DMatrix(X, y)
    booster = _updated({"max_depth": 3}, dtrain, 2)
    assert isinstance(booster._job, _training_job.TrainingJob)
    assert b"TrainingJob" not in pickle.dumps(booster)
    for other in (pickle.loads(pickle.dumps(booster)), booster.copy(), copy.deepcopy(booster)):
        assert getattr(other, "_job", None) is None
        other.update(dtrain, 2)
        booster_more = dg.train({"max_depth": 3}, dtrain, 3, verbose_eval=False)
        assert other.save_raw() == booster_more.save_raw()


def _squared_error(margin, dtrain):
    return margin - dtrain.get_label(), np.ones_like(margin)


def test_custom_objective_and_given_gradients_keep_working(preparations):
    X, y, _ = make_synthetic(400, 5, task="regression", seed=8)
    dtrain = dg.DMatrix(X, y)
    want = dg.train({"max_depth": 3}, dtrain, 4, obj=_squared_error, verbose_eval=False)
    by_fobj = dg.Booster({"max_depth": 3})
    for i in range(4):
        by_fobj.update(dtrain, i, fobj=_squared_error)
    assert by_fobj.get_dump(with_stats=True) == want.get_dump(with_stats=True)
    preparations.clear()
    by_gradients = dg.Booster({"max_depth": 3})
    for i in range(4):
        margin = by_gradients.predict(dtrain, output_margin=True) if i else np.zeros(dtrain.num_row(), np.float32)
        by_gradients.boost(dtrain, i, *_squared_error(margin, dtrain))
    assert by_gradients.get_dump(with_stats=True) == want.get_dump(with_stats=True)
    assert len(preparations) == 1
