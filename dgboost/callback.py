"""Training callbacks with the names and behaviour of ``xgboost.callback`` (XGBoost 3.x).

:func:`dgboost.train` turns its own arguments into these callbacks: ``verbose_eval`` into an
:class:`EvaluationMonitor`, ``early_stopping_rounds`` into an :class:`EarlyStopping`,
``checkpoint_dir`` into a :class:`TrainingCheckPoint`. They run after the user's callbacks,
in that order (as XGBoost's ``train`` appends its monitor and early stopping); the first
``after_iteration`` that returns True ends training and the later ones are not called for
that round. A :class:`TrainingCheckPoint` is the exception: it runs after all the others,
always, and is told whether they ended training (so that a job resumed from the checkpoint
written on its last round stops there too).

The ``epoch`` given to the callbacks counts the rounds of one training call from 0, as
XGBoost's (a continued model's rounds are not counted; a job resumed from a checkpoint
counts from the start of the call that wrote it).
"""

from __future__ import annotations

import collections.abc
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from .checkpoint import Checkpointer
from .errors import DGBoostValueError

__all__ = [
    "TrainingCallback",
    "EvaluationMonitor",
    "EarlyStopping",
    "LearningRateScheduler",
    "TrainingCheckPoint",
    "CallbackContainer",
    "CheckpointContext",
    "format_evaluation",
]

# what the callbacks' evaluation history holds: {data name: {metric name: [score, ...]}};
# cross-validation gives (mean, std) pairs instead of scores
EvalsLog = dict


class TrainingCallback:
    """Base class of training callbacks (``xgboost.callback.TrainingCallback``).

    ``before_iteration`` / ``after_iteration`` returning True end training. ``before_training``
    and ``after_training`` return the model (``None`` keeps it).
    """

    def before_training(self, model: Any) -> Any:
        """Called once before the first round; returns the model."""
        return model

    def after_training(self, model: Any) -> Any:
        """Called once after the last round; returns the model (it may be a new one)."""
        return model

    def before_iteration(self, model: Any, epoch: int, evals_log: EvalsLog) -> bool:
        """Called before round ``epoch``; True ends training before it."""
        return False

    def after_iteration(self, model: Any, epoch: int, evals_log: EvalsLog) -> bool:
        """Called after round ``epoch`` (and its evaluation); True ends training."""
        return False


def format_evaluation(epoch: int, evals_log: EvalsLog, show_stdv: bool = False) -> str:
    """One evaluation line as XGBoost's :class:`EvaluationMonitor` writes it (without newline).

    Parameters
    ----------
    epoch : int
        The round, counted from 0 in this training call.
    evals_log : dict
        ``{data_name: {metric_name: [values]}}``; the last value of each is printed. A value
        that is a (mean, std) pair (cross-validation) prints as ``mean+std`` with ``show_stdv``.
    show_stdv : bool
        Print the standard deviation of (mean, std) values.

    Returns
    -------
    str
        ``[epoch]\\tname-metric:value...`` with five decimals, in the history's order.
    """
    parts = [f"[{epoch}]"]
    for data, metrics in evals_log.items():
        for metric, log in metrics.items():
            last = log[-1]
            score, std = (last[0], last[1]) if isinstance(last, tuple) else (last, None)
            text = f"\t{data}-{metric}:{score:.5f}"
            parts.append(text + f"+{std:.5f}" if std is not None and show_stdv else text)
    return "".join(parts)


def _print_line(line: str) -> None:
    print(line, flush=True)


class EvaluationMonitor(TrainingCallback):
    """Print the evaluation results every ``period`` rounds (``xgboost.callback.EvaluationMonitor``).

    A round off the period is held back and printed when training ends, so the last round
    is always shown. Nothing is printed without evaluation sets.

    Parameters
    ----------
    rank : int
        The rank that prints (the training loop says which rank this process is).
    period : int
        Rounds between printed lines (at least 1).
    show_stdv : bool
        Print cross-validation's standard deviations too.
    logger : callable, optional
        Receives each line (default: ``print`` with a flush).
    """

    def __init__(
        self, rank: int = 0, period: int = 1, show_stdv: bool = False, logger: Callable[[str], None] | None = None
    ) -> None:
        if int(period) != period or period < 1:
            raise DGBoostValueError(f"period must be a positive integer, got {period!r}")
        self.printer_rank = int(rank)
        self.period = int(period)
        self.show_stdv = bool(show_stdv)
        self._logger = logger or _print_line
        self._rank = 0  # this process's rank, set by CallbackContainer
        self._latest: str | None = None  # a line held back by the period

    def after_iteration(self, model: Any, epoch: int, evals_log: EvalsLog) -> bool:
        if not evals_log or self._rank != self.printer_rank:
            return False
        line = format_evaluation(epoch, evals_log, self.show_stdv)
        if epoch % self.period == 0 or self.period == 1:
            self._logger(line)
            self._latest = None
        else:
            self._latest = line
        return False

    def after_training(self, model: Any) -> Any:
        if self._rank == self.printer_rank and self._latest is not None:
            self._logger(self._latest)
        return model


# XGBoost's EarlyStopping maximises a metric whose name starts with one of these (mape excepted)
_MAXIMIZE_PREFIXES = ("auc", "aucpr", "pre", "pre@", "map", "ndcg", "auc@", "aucpr@", "map@", "ndcg@")


class EarlyStopping(TrainingCallback):
    """Stop when a metric has not improved for ``rounds`` rounds (``xgboost.callback.EarlyStopping``).

    Sets the model's ``best_iteration`` (counting the rounds of a continued model) and
    ``best_score`` whenever the score improves.

    Parameters
    ----------
    rounds : int
        Rounds without improvement that end training.
    metric_name : str, optional
        Default: the last metric of the data set.
    data_name : str, optional
        Default: the last evaluation set.
    maximize : bool, optional
        Default: True for metrics whose names start with auc, aucpr, pre, map or ndcg.
    save_best : bool
        Return the model cut after its best round (``model[:best_iteration + 1]``).
    min_delta : float
        The least change of the score that counts as an improvement (>= 0).
    """

    def __init__(
        self,
        *,
        rounds: int,
        metric_name: str | None = None,
        data_name: str | None = None,
        maximize: bool | None = None,
        save_best: bool | None = False,
        min_delta: float = 0.0,
    ) -> None:
        if isinstance(rounds, bool) or int(rounds) != rounds or rounds < 1:
            raise DGBoostValueError(f"rounds must be a positive integer, got {rounds!r}")
        if min_delta < 0:
            raise DGBoostValueError("min_delta must be greater or equal to 0.")
        self.rounds = int(rounds)
        self.metric_name = metric_name
        self.data = data_name
        self.maximize = maximize
        self.save_best = bool(save_best)
        self._min_delta = float(min_delta)
        self.current_rounds = 0  # rounds since the best
        self.best_score: float | None = None
        self.starting_round = 0  # rounds of the model before this call

    def before_training(self, model: Any) -> Any:
        self.starting_round = model.num_boosted_rounds()
        if self.save_best and not hasattr(model, "__getitem__"):
            raise DGBoostValueError("`save_best` is not applicable to the `cv` function as it doesn't return a model.")
        return model

    def _improves(self, score: float) -> bool:
        if self.best_score is None:
            return True
        if self.maximize:
            return bool(np.greater(score - self._min_delta, self.best_score))
        return bool(np.greater(self.best_score - self._min_delta, score))

    def _score(self, evals_log: EvalsLog) -> tuple[str, float]:
        if len(evals_log) < 1:
            raise DGBoostValueError("Must have at least 1 validation dataset for early stopping.")
        data = self.data or list(evals_log)[-1]
        if data not in evals_log:
            raise DGBoostValueError(f"No dataset named: {data}")
        metric = self.metric_name or list(evals_log[data])[-1]
        if metric not in evals_log[data]:
            raise DGBoostValueError(f"No metric named: {metric}")
        last = evals_log[data][metric][-1]
        return metric, float(last[0] if isinstance(last, tuple) else last)

    def after_iteration(self, model: Any, epoch: int, evals_log: EvalsLog) -> bool:
        metric, score = self._score(evals_log)
        if self.maximize is None:
            self.maximize = metric != "mape" and metric.startswith(_MAXIMIZE_PREFIXES)
        if self._improves(score):
            self.best_score, self.current_rounds = score, 0
            model.best_iteration = epoch + self.starting_round
            model.best_score = score
        else:
            self.current_rounds += 1
        return self.current_rounds >= self.rounds

    def after_training(self, model: Any) -> Any:
        if not self.save_best:
            return model
        best_iteration, best_score = model.best_iteration, model.best_score
        model = model[: best_iteration + 1]
        model.best_iteration, model.best_score = best_iteration, best_score
        return model


class LearningRateScheduler(TrainingCallback):
    """Change ``eta`` during training (``xgboost.callback.LearningRateScheduler``).

    After round ``epoch`` the learning rate becomes ``learning_rates(epoch)`` (or
    ``learning_rates[epoch]``), so it applies from the following round on, as XGBoost's.

    Parameters
    ----------
    learning_rates : callable or sequence of float
        ``f(epoch) -> eta``, or one value per round.
    """

    def __init__(self, learning_rates: Callable[[int], float] | Sequence[float]) -> None:
        if not callable(learning_rates) and not isinstance(learning_rates, collections.abc.Sequence):
            raise TypeError(f"Invalid learning rates, expecting callable or sequence, got: {type(learning_rates)}")
        if callable(learning_rates):
            self.learning_rates = learning_rates
        else:
            rates = list(learning_rates)
            self.learning_rates = lambda epoch: rates[epoch]

    def after_iteration(self, model: Any, epoch: int, evals_log: EvalsLog) -> bool:
        model.set_param("learning_rate", self.learning_rates(epoch))
        return False


@dataclass
class CheckpointContext:
    """What a checkpoint holds beyond the model and history, given by the training loop.

    Attributes
    ----------
    begin_round : int
        The model's rounds when the training call began.
    config : dict
        :func:`dgboost.checkpoint.training_config` of the job.
    data : dict
        :func:`dgboost.checkpoint.data_fingerprint` of the training rows.
    cuts : str
        :func:`dgboost.checkpoint.cuts_fingerprint` of the quantile cuts.
    eval_names : list of str
        The evaluation sets' names, in order.
    early_stopping : callable
        Returns ``{"best_score", "best_round", "maximize"}`` of the round just done.
    """

    begin_round: int
    config: dict
    data: dict
    cuts: str
    eval_names: list[str]
    early_stopping: Callable[[], dict] = field(
        default=lambda: {"best_score": None, "best_round": None, "maximize": None}
    )


class TrainingCheckPoint(TrainingCallback):
    """Write dgboost checkpoints (:mod:`dgboost.checkpoint`) every ``interval`` rounds.

    Rank 0 writes ``checkpoint-<rounds>.json`` into ``directory`` after every ``interval``
    rounds of the training call and keeps the newest ``keep``; ``dgboost.train(...,
    checkpoint_dir=directory, resume=True)`` continues from the newest, to the model of an
    uninterrupted run. Unlike XGBoost's (a model file per checkpoint), a checkpoint also
    holds the evaluation history, the early-stopping state and fingerprints of the data.

    Parameters
    ----------
    directory : str or os.PathLike
        Created when missing (a path every rank can reach on a cluster).
    interval : int
        Rounds between checkpoints, counted in the training call.
    keep : int
        Checkpoint files kept.
    """

    def __init__(self, directory: str | os.PathLike, interval: int = 100, keep: int = 2) -> None:
        if isinstance(interval, bool) or int(interval) != interval or interval < 1:
            raise DGBoostValueError(f"interval must be a positive integer, got {interval!r}")
        self.checkpointer = Checkpointer(directory, int(interval), int(keep))
        self._context: CheckpointContext | None = None  # set by CallbackContainer
        self._rank = 0

    def after_iteration(self, model: Any, epoch: int, evals_log: EvalsLog, stopping: bool = False) -> bool:
        """Write a checkpoint when one is due after round ``epoch``; ``stopping``: the other
        callbacks end training on this round (recorded, so that a resumed job stops too)."""
        if self._context is None:
            raise DGBoostValueError(
                "TrainingCheckPoint needs dgboost.train's training loop (its data "
                "fingerprints); pass it in train(callbacks=...)"
            )
        c = self._context
        if self._rank != 0 or not self.checkpointer.due(epoch + 1):
            return False
        self.checkpointer.write(
            {
                "round": c.begin_round + epoch + 1,
                "begin_round": c.begin_round,
                "config": c.config,
                "data": c.data,
                "cuts": c.cuts,
                "model": model.to_json(),
                "history": evals_log,
                "eval_names": list(c.eval_names),
                "early_stopping": c.early_stopping(),
                "stopped": bool(stopping),
            }
        )
        return False


class CallbackContainer:
    """Runs a training job's callbacks in XGBoost's order and with its stopping rule.

    Parameters
    ----------
    callbacks : iterable of TrainingCallback
        Called in order; :class:`TrainingCheckPoint` instances after all the others.
    rank : int
        This process's rank (only the printer rank's :class:`EvaluationMonitor` prints, only
        rank 0 writes checkpoints).
    checkpoint : CheckpointContext, optional
        Required when a :class:`TrainingCheckPoint` is among the callbacks.
    """

    def __init__(
        self, callbacks: Iterable[TrainingCallback], rank: int = 0, checkpoint: CheckpointContext | None = None
    ) -> None:
        callbacks = list(callbacks)
        self.checkpoints = [cb for cb in callbacks if isinstance(cb, TrainingCheckPoint)]
        self.callbacks = [cb for cb in callbacks if not isinstance(cb, TrainingCheckPoint)]
        for cb in callbacks:
            if isinstance(cb, (EvaluationMonitor, TrainingCheckPoint)):
                cb._rank = int(rank)
            if isinstance(cb, TrainingCheckPoint):
                cb._context = checkpoint

    def before_training(self, model: Any) -> Any:
        """Every callback's ``before_training``, each given the model the previous returned."""
        for cb in self.callbacks + self.checkpoints:
            model = cb.before_training(model) or model
        return model

    def after_training(self, model: Any) -> Any:
        """Every callback's ``after_training``, each given the model the previous returned."""
        for cb in self.callbacks + self.checkpoints:
            model = cb.after_training(model) or model
        return model

    def before_iteration(self, model: Any, epoch: int, evals_log: EvalsLog) -> bool:
        """True when a callback ends training before round ``epoch`` (the later ones are not called)."""
        return any(cb.before_iteration(model, epoch, evals_log) for cb in self.callbacks + self.checkpoints)

    def after_iteration(self, model: Any, epoch: int, evals_log: EvalsLog) -> bool:
        """True when a callback ends training after round ``epoch``: the first that does so is
        the last called, then the checkpoints are written."""
        stop = any(cb.after_iteration(model, epoch, evals_log) for cb in self.callbacks)
        for cb in self.checkpoints:
            cb.after_iteration(model, epoch, evals_log, stopping=stop)
        return stop
