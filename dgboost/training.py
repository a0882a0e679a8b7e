"""``train()``: XGBoost's ``xgboost.train``, a thin driver over the per-rank training job.

The job (:class:`dgboost._training_job.TrainingJob`) prepares the data and boosts the rounds
(queueing the next round's gradients ahead where trees grow without host decisions, see its
module docstring); this module checks the arguments, makes the starting model, and runs the
rounds between the callbacks of :mod:`dgboost.callback`. Work queued for a round that a
callback or early stopping ends is dropped.

Callbacks, in XGBoost's order: the user's ``callbacks``; an
:class:`~dgboost.callback.EvaluationMonitor` for ``verbose_eval`` (with evaluation sets, print
the metrics every round (True) or every ``verbose_eval``-th round and the last one (int);
False prints nothing; only rank 0 prints); an :class:`~dgboost.callback.EarlyStopping` for
``early_stopping_rounds`` on the last metric of the last evaluation set (``maximize``:
default from the metric); then checkpoints. The first ``after_iteration`` returning True ends
training. ``epoch`` counts the rounds of the call from 0, as XGBoost's. With evaluation
sets the model's ``best_iteration`` / ``best_score`` follow the last metric of the last set
(before the user's callbacks see the round), also without early stopping.

Checkpoints (``checkpoint_dir``): rank 0 writes one (see :mod:`dgboost.checkpoint`) every
``checkpoint_every`` rounds (default 10, counted in this call: the checkpoints hold 10, 20,
30, ... rounds) and keeps the newest two, through a :class:`~dgboost.callback.TrainingCheckPoint`.
``resume=True`` continues from the newest valid checkpoint in ``checkpoint_dir`` (files that
are truncated or altered are skipped with a :class:`~dgboost.checkpoint.CheckpointWarning`;
with none, training starts from the beginning). The finished model is byte-identical to an
uninterrupted run. A checkpoint written with other parameters, early-stopping settings,
evaluation set names or training data is refused. Callbacks' own state is not saved.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from ._booster_inspect import training_params
from ._fixed_point import fixed_point_scale  # noqa: F401 (public here, as before)
from ._training_job import TrainingJob
from .booster import Booster
from .callback import (
    CallbackContainer,
    CheckpointContext,
    EarlyStopping,
    EvaluationMonitor,
    TrainingCallback,
    TrainingCheckPoint,
)
from .checkpoint import check_resumable, checkpointer_for, load_on_rank0, training_config
from .comm.base import Communicator, LocalComm
from .data import DMatrix, aligned_matrix, matrix_for_model
from .errors import DGBoostTypeError, DGBoostValueError
from .params import TrainParams, parse_params

__all__ = ["train", "TrainingCallback", "fixed_point_scale"]


def _verbose_period(verbose_eval: bool | int | None) -> int:
    """Rounds between printed evaluation lines (0: print nothing), as ``xgboost.train`` reads it.

    Parameters
    ----------
    verbose_eval : bool or int
        True prints every round, a positive int ``k`` every ``k``-th round, False or 0 nothing.

    Returns
    -------
    int
        The period; 0 when nothing is printed.
    """
    if isinstance(verbose_eval, (bool, np.bool_)) or verbose_eval is None:
        return int(bool(verbose_eval))
    if int(verbose_eval) != verbose_eval or verbose_eval < 0:
        raise DGBoostValueError(f"verbose_eval must be a bool or a non-negative integer, got {verbose_eval!r}")
    return int(verbose_eval)


def train(
    params: Mapping[str, Any] | TrainParams,
    dtrain: DMatrix,
    num_boost_round: int = 10,
    evals: Sequence[tuple[DMatrix, str]] = (),
    obj: Callable | None = None,
    custom_metric: Callable | None = None,
    maximize: bool | None = None,
    early_stopping_rounds: int | None = None,
    evals_result: dict | None = None,
    verbose_eval: bool | int = True,
    xgb_model: Booster | str | os.PathLike | None = None,
    callbacks: Iterable[TrainingCallback] = (),
    comm: Communicator | None = None,
    feval: Callable | None = None,
    checkpoint_dir: str | os.PathLike | None = None,
    checkpoint_every: int | None = None,
    resume: bool = False,
) -> Booster:
    """Train a gradient-boosted tree model (``xgboost.train``'s arguments and behaviour).

    Parameters
    ----------
    params : dict or TrainParams
        XGBoost parameter names (:class:`~dgboost.params.TrainParams`).
    dtrain : DMatrix
        This rank's training rows (all rows in one process).
    num_boost_round : int
    evals : sequence of (DMatrix, name)
        Evaluated after every round; the last metric of the last set is the best round's.
    obj, custom_metric, feval : callable, optional
        ``obj(margin, dtrain) -> (grad, hess)``; ``custom_metric(predt, dmatrix) -> (name,
        value)`` (``feval``: its old name).
    maximize, early_stopping_rounds, verbose_eval, callbacks
        As ``xgboost.train``: see the module docstring for the callbacks they become.
    evals_result : dict, optional
        Filled as ``{eval_name: {metric_name: [values...]}}``.
    xgb_model : Booster or path, optional
        Continue training from this model.
    comm : Communicator, optional
        Defaults to the single-process :class:`~dgboost.comm.LocalComm`.
    checkpoint_dir, checkpoint_every, resume
        Checkpoints every ``checkpoint_every`` (10) rounds, and resuming from the newest:
        see the module docstring.

    Returns
    -------
    Booster
    """
    p = parse_params(params)
    comm = comm or LocalComm()
    _check_arguments(dtrain, num_boost_round, early_stopping_rounds, evals)
    checkpointer = checkpointer_for(checkpoint_dir, checkpoint_every, resume)
    config = training_config(p, early_stopping_rounds, maximize)
    resumed, xgb_model = _starting_model(checkpointer if resume else None, comm, config, evals, xgb_model)
    if xgb_model is not None:  # a continued model's category codes are its own categories'
        what = "the model being continued"
        dtrain = matrix_for_model(dtrain, xgb_model.feature_types, xgb_model.meta.get("categories"), what)
    # an evaluation set's category codes must mean the training data's categories
    evals = [(aligned_matrix(dm, dtrain, f"the training data (evaluation set {name!r})"), name) for dm, name in evals]
    callbacks = list(callbacks) + (
        []
        if checkpointer is None
        else [TrainingCheckPoint(checkpointer.directory, checkpointer.every, checkpointer.keep)]
    )
    job = TrainingJob(
        p,
        dtrain,
        evals,
        obj=obj,
        custom_metric=custom_metric or feval,
        comm=comm,
        start=xgb_model,
        resumed=resumed,
        fingerprint=any(isinstance(cb, TrainingCheckPoint) for cb in callbacks),
    )
    booster = Booster._from_training(
        job.ensemble,
        job.params,
        job.objective,
        job.base_score,
        dtrain.feature_names,
        dtrain.feature_types,
        dtrain.num_col(),
        xgb_model,
        categories=dtrain.category_values(),
    )
    container, best, stopping = _callbacks(job, callbacks, verbose_eval, early_stopping_rounds, maximize, config)
    history: dict = {} if evals_result is None else evals_result
    history.clear()
    booster = container.before_training(booster)
    end_round = job.begin_round + int(num_boost_round)
    first_round = job.begin_round if resumed is None else _restore(resumed, history, best, stopping, end_round)
    _boost(job, booster, container, history, first_round, end_round)
    return container.after_training(booster)


def _starting_model(
    checkpointer: Any,
    comm: Communicator,
    config: dict,
    evals: Sequence[tuple[DMatrix, str]],
    xgb_model: Booster | str | os.PathLike | None,
) -> tuple[dict | None, Booster | None]:
    """(the checkpoint resumed or None, the model to continue or None): with ``checkpointer``
    (resuming), the newest valid checkpoint, checked against ``config`` and the evaluation
    sets' names; its model already holds any model the job continued."""
    resumed = None if checkpointer is None else load_on_rank0(checkpointer, comm)
    if resumed is not None:
        check_resumable(resumed, config, [name for _, name in evals])
        xgb_model = Booster(model_file=resumed["model"].encode("utf-8"))
    if xgb_model is not None and not isinstance(xgb_model, Booster):
        xgb_model = Booster(model_file=xgb_model)
    return resumed, xgb_model


def _callbacks(
    job: TrainingJob,
    callbacks: list,
    verbose_eval: bool | int,
    early_stopping_rounds: int | None,
    maximize: bool | None,
    config: dict,
) -> tuple[CallbackContainer, "_BestRound", list[EarlyStopping]]:
    """The job's callbacks in XGBoost's order: the best round's tracker, the user's, the monitor,
    early stopping; checkpoints last (with what they hold beyond the model)."""
    best = _BestRound(job, maximize, sets_model=not any(isinstance(cb, EarlyStopping) for cb in callbacks))
    stopping = _early_stopping(job, early_stopping_rounds, best)
    period = _verbose_period(verbose_eval)
    monitor = [EvaluationMonitor(period=period)] if period else []
    checkpoint = (
        None
        if job.fingerprint is None
        else CheckpointContext(
            job.begin_round,
            config,
            job.fingerprint["data"],
            job.fingerprint["cuts"],
            [name for _, name in job.evals],
            best.state,
        )
    )
    return CallbackContainer([best, *callbacks, *monitor, *stopping], job.comm.rank, checkpoint), best, stopping


def _check_arguments(
    dtrain: DMatrix, num_boost_round: int, early_stopping_rounds: int | None, evals: Sequence[tuple[DMatrix, str]]
) -> None:
    """Raise for arguments of :func:`train` of the wrong type or out of range."""
    if not isinstance(dtrain, DMatrix):
        raise DGBoostTypeError(f"dtrain must be a dgboost.DMatrix, got {type(dtrain).__name__}")
    if int(num_boost_round) != num_boost_round or num_boost_round < 0:
        raise DGBoostValueError(f"num_boost_round must be a non-negative integer, got {num_boost_round!r}")
    if early_stopping_rounds is not None and (
        int(early_stopping_rounds) != early_stopping_rounds or early_stopping_rounds < 1
    ):
        raise DGBoostValueError(f"early_stopping_rounds must be a positive integer, got {early_stopping_rounds!r}")
    if early_stopping_rounds is not None and not evals:
        raise DGBoostValueError("early_stopping_rounds needs at least one evaluation set in evals")
    for item in evals:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], DMatrix)):
            raise DGBoostTypeError("evals must be a sequence of (DMatrix, name) pairs")


def _boost(
    job: TrainingJob, booster: Booster, container: CallbackContainer, history: dict, first_round: int, end_round: int
) -> None:
    """Rounds ``first_round`` .. ``end_round - 1`` between the callbacks (``epoch`` counted from
    the job's first round, as XGBoost counts from 0 in every call)."""
    for r in range(first_round, end_round):
        epoch = r - job.begin_round
        if container.before_iteration(booster, epoch, history):
            break
        # LearningRateScheduler sets the booster's learning rate for the rounds that follow
        job.set_eta(training_params(booster).get("eta", job.params.eta))
        job.run_round(r, queue_next=r + 1 < end_round)
        booster._set_ensemble(job.ensemble)
        job.evaluate(history)
        if container.after_iteration(booster, epoch, history):
            break


class _BestRound(TrainingCallback):
    """The best round so far by the last metric of the last evaluation set, set on the model
    before the other callbacks see the round (unless the user's EarlyStopping sets it), and
    the early-stopping state a checkpoint keeps."""

    def __init__(self, job: TrainingJob, maximize: bool | None, sets_model: bool) -> None:
        self.active = bool(job.evals and job.metrics)
        self.data = job.evals[-1][1] if self.active else None
        self.metric = job.metrics[-1] if self.active else None
        self.maximize, self.sets_model = maximize, sets_model
        self.best_score: float | None = None
        self.best_round: int | None = None
        self.begin_round = job.begin_round

    def after_iteration(self, model: Booster, epoch: int, evals_log: dict) -> bool:
        if not self.active:
            return False
        score = evals_log[self.data][self.metric.name][-1]
        if self.maximize is None:
            self.maximize = self.metric.higher_is_better
        if self.best_score is None or (score > self.best_score if self.maximize else score < self.best_score):
            self.best_score, self.best_round = score, self.begin_round + epoch
        if self.sets_model:
            model._set_best(self.best_round, self.best_score)
        return False

    def state(self) -> dict:
        """``{"best_score", "best_round", "maximize"}`` (a checkpoint's ``early_stopping``)."""
        return {"best_score": self.best_score, "best_round": self.best_round, "maximize": self.maximize}


def _early_stopping(job: TrainingJob, rounds: int | None, best: _BestRound) -> list[EarlyStopping]:
    """``early_stopping_rounds`` as an :class:`EarlyStopping` on the best round's metric (none
    when nothing is evaluated: a custom objective without metrics)."""
    if rounds is None or not best.active:
        return []
    maximize = best.metric.higher_is_better if best.maximize is None else best.maximize
    return [EarlyStopping(rounds=int(rounds), metric_name=best.metric.name, data_name=best.data, maximize=maximize)]


def _restore(resumed: dict, history: dict, best: _BestRound, stopping: list[EarlyStopping], end_round: int) -> int:
    """Put a checkpoint's history and early-stopping state back; returns the first round to run
    (``end_round`` when the checkpoint was written by the round training stopped on)."""
    history.update(resumed["history"])
    state = resumed["early_stopping"]
    best.best_score, best.best_round, best.maximize = state["best_score"], state["best_round"], state["maximize"]
    for es in stopping:
        es.starting_round = resumed["begin_round"]
        if state["best_round"] is not None:
            es.best_score = state["best_score"]
            es.current_rounds = resumed["round"] - 1 - state["best_round"]
    return end_round if resumed["stopped"] else resumed["round"]
