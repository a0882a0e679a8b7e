"""Cross-validation with XGBoost's ``xgboost.cv`` name, arguments and result columns.

Every fold is a :class:`~dgboost._training_job.TrainingJob` on its training rows, evaluated
on them (``train``) and on its test rows (``test``); the folds boost round by round
together, and after each round the callbacks of :mod:`dgboost.callback` see the fold means
and standard deviations as ``(mean, std)`` pairs, as XGBoost's do: the user's callbacks,
then the :class:`~dgboost.callback.EvaluationMonitor` (``verbose_eval``) and the
:class:`~dgboost.callback.EarlyStopping` (``early_stopping_rounds``, on the last metric of
the ``test`` set). When a callback stops training the rows end at the best round.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from ._training_job import TrainingJob
from .callback import CallbackContainer, EarlyStopping, EvaluationMonitor, TrainingCallback
from .data import DMatrix
from .errors import DGBoostTypeError, DGBoostValueError
from .params import canonical_name, parse_params

__all__ = ["cv"]


def _subset(dmat: DMatrix, rows: np.ndarray) -> DMatrix:
    """A new DMatrix with the rows ``rows`` of ``dmat`` (labels, weights, margins, groups kept)."""
    rows = np.asarray(rows, dtype=np.int64)
    group = None
    if dmat.group_ptr is not None:
        # rows are whole groups, in order: recount the group sizes from the row -> group map
        group_of_row = np.repeat(np.arange(dmat.group_ptr.size - 1), np.diff(dmat.group_ptr))
        g = group_of_row[rows]
        if g.size and (np.diff(g) < 0).any():
            raise DGBoostValueError(
                "cv folds of ranking data must keep the rows of each query group together and in order"
            )
        _, group = np.unique(g, return_counts=True)
    out = DMatrix(
        dmat.data[rows],
        None if dmat.label is None else dmat.label[rows],
        weight=None if dmat.weight is None else dmat.weight[rows],
        base_margin=None if dmat.base_margin is None else dmat.base_margin[rows],
        group=group,
        feature_names=dmat.feature_names,
        feature_types=dmat.feature_types,
        max_bin=dmat.max_bin,
    )
    # a fold's codes mean what the whole matrix's mean: keep its category values
    out.categories, out._coded = dmat.categories, dmat._coded
    return out


def _make_folds(
    dtrain: DMatrix, nfold: int, stratified: bool, folds, seed: int, shuffle: bool
) -> list[tuple[np.ndarray, np.ndarray]]:
    n = dtrain.num_row()
    if folds is not None:
        if hasattr(folds, "split"):  # a scikit-learn splitter (KFold, GroupKFold, ...)
            data = dtrain.data.get() if hasattr(dtrain.data, "get") else dtrain.data
            folds = folds.split(X=data, y=dtrain.get_label())
        out = []
        for item in folds:
            if not (isinstance(item, (tuple, list)) and len(item) == 2):
                raise DGBoostTypeError(
                    "folds must be (train_index, test_index) pairs or a scikit-learn splitter with a split() method"
                )
            tr, te = (np.asarray(ix, dtype=np.int64).ravel() for ix in item)
            for ix in (tr, te):
                if ix.size and (ix.min() < 0 or ix.max() >= n):
                    raise DGBoostValueError(f"fold indices must be in [0, {n}), got {ix.min()}..{ix.max()}")
            out.append((tr, te))
        if not out:
            raise DGBoostValueError("folds is empty")
        return out
    if int(nfold) != nfold or nfold < 2:
        raise DGBoostValueError(f"nfold must be an integer >= 2, got {nfold!r}")
    nfold = int(nfold)
    if dtrain.group_ptr is not None:
        if stratified:
            raise DGBoostValueError("stratified folds are not available for ranking data (query groups)")
        n_groups = dtrain.group_ptr.size - 1
        if n_groups < nfold:
            raise DGBoostValueError(f"nfold={nfold} exceeds the number of query groups ({n_groups})")
        order = np.random.RandomState(seed).permutation(n_groups) if shuffle else np.arange(n_groups)
        out = []
        for test_groups in np.array_split(order, nfold):
            test_mask = np.zeros(n_groups, bool)
            test_mask[test_groups] = True
            row_mask = np.repeat(test_mask, np.diff(dtrain.group_ptr))
            out.append((np.flatnonzero(~row_mask), np.flatnonzero(row_mask)))
        return out
    if nfold > n:
        raise DGBoostValueError(f"nfold={nfold} exceeds the number of rows ({n})")
    if stratified:
        from sklearn.model_selection import StratifiedKFold

        splitter = StratifiedKFold(n_splits=nfold, shuffle=shuffle, random_state=seed if shuffle else None)
        return [(tr, te) for tr, te in splitter.split(np.zeros(n), dtrain.get_label())]
    # as XGBoost: np.random.seed(seed); permutation; array_split (without touching global state)
    idx = np.random.RandomState(seed).permutation(n) if shuffle else np.arange(n)
    parts = np.array_split(idx, nfold)
    return [(np.concatenate([parts[j] for j in range(nfold) if j != i]), parts[i]) for i in range(nfold)]


def cv(
    params: Mapping[str, Any] | Sequence[tuple[str, Any]],
    dtrain: DMatrix,
    num_boost_round: int = 10,
    nfold: int = 3,
    stratified: bool = False,
    folds: Iterable | Any = None,
    metrics: Sequence[str] | str = (),
    obj: Callable | None = None,
    feval: Callable | None = None,
    maximize: bool | None = None,
    early_stopping_rounds: int | None = None,
    fpreproc: Callable | None = None,
    as_pandas: bool = True,
    verbose_eval: bool | int | None = None,
    show_stdv: bool = True,
    seed: int = 0,
    callbacks: Iterable[TrainingCallback] | None = None,
    shuffle: bool = True,
    custom_metric: Callable | None = None,
) -> Any:
    """Cross-validation, as ``xgboost.cv``.

    Parameters
    ----------
    params : dict
        Training parameters (as for :func:`dgboost.train`).
    dtrain : DMatrix
        All the data; folds are row subsets of it (whole query groups for ranking data).
    num_boost_round : int
    nfold : int
        Number of folds when ``folds`` is not given.
    stratified : bool
        Stratify the folds by label (scikit-learn's ``StratifiedKFold``).
    folds : iterable of (train_index, test_index) or a scikit-learn splitter, optional
        Explicit folds; ``nfold``, ``stratified``, ``shuffle`` and ``seed`` are then ignored.
    metrics : str or sequence of str
        Evaluation metrics; override ``params["eval_metric"]``.
    obj, custom_metric, feval
        Custom objective and metric, as for :func:`dgboost.train` (``feval`` is the old name).
    maximize : bool, optional
        Whether early stopping maximises the metric (default: from the metric name).
    early_stopping_rounds : int, optional
        Stop when the fold-mean of the last ``test`` metric has not improved for this many
        rounds; the result then ends at the best round.
    fpreproc : callable, optional
        ``fpreproc(dtrain_fold, dtest_fold, params) -> (dtrain_fold, dtest_fold, params)``.
    as_pandas : bool
        Return a pandas DataFrame (else a dict of lists).
    verbose_eval : bool or int, optional
        Print the fold means (and standard deviations with ``show_stdv``) every round, or
        every ``verbose_eval`` rounds.
    seed, shuffle
        Fold generation, as XGBoost.
    callbacks : iterable of TrainingCallback, optional
        Called as XGBoost's ``cv`` calls them: with an object standing for all folds
        (``num_boosted_rounds``, ``set_param`` of ``learning_rate``, ``best_iteration``,
        ``best_score``) and the history of ``(mean, std)`` pairs.

    Returns
    -------
    pandas.DataFrame or dict
        Columns ``<set>-<metric>-mean`` and ``<set>-<metric>-std`` for ``set`` in
        (``train``, ``test``) and every metric; one row per round (population standard
        deviation over folds, as XGBoost).
    """
    params = _check_arguments(params, dtrain, num_boost_round, early_stopping_rounds, metrics)
    custom_metric = custom_metric or feval
    jobs = []
    for tr, te in _make_folds(dtrain, nfold, stratified, folds, seed, shuffle):
        d_tr, d_te, fold_params = _subset(dtrain, tr), _subset(dtrain, te), dict(params)
        if fpreproc is not None:
            d_tr, d_te, fold_params = fpreproc(d_tr, d_te, fold_params)
        jobs.append(
            TrainingJob(
                parse_params(fold_params), d_tr, [(d_tr, "train"), (d_te, "test")], obj=obj, custom_metric=custom_metric
            )
        )
    callbacks = list(callbacks or ())
    if verbose_eval:
        period = 1 if verbose_eval is True else int(verbose_eval)
        callbacks.append(EvaluationMonitor(period=period, show_stdv=show_stdv))
    if early_stopping_rounds is not None:
        callbacks.append(EarlyStopping(rounds=int(early_stopping_rounds), maximize=maximize))
    history = _boost_folds(_Folds(jobs), CallbackContainer(callbacks), int(num_boost_round))
    results: dict[str, list] = {}
    for data, metrics_log in history.items():
        for metric, log in metrics_log.items():
            results[f"{data}-{metric}-mean"] = [mean for mean, _ in log]
            results[f"{data}-{metric}-std"] = [std for _, std in log]
    if as_pandas:
        import pandas as pd

        return pd.DataFrame.from_dict(results)
    return results


def _check_arguments(
    params: Any, dtrain: DMatrix, num_boost_round: int, early_stopping_rounds: int | None, metrics: Sequence[str] | str
) -> dict:
    """Raise for bad arguments of :func:`cv`; returns the params dict with ``metrics`` as its
    ``eval_metric``."""
    if not isinstance(dtrain, DMatrix):
        raise DGBoostTypeError(f"dtrain must be a DMatrix, got {type(dtrain).__name__}")
    if int(num_boost_round) != num_boost_round or num_boost_round < 0:
        raise DGBoostValueError(f"num_boost_round must be a non-negative integer, got {num_boost_round!r}")
    if early_stopping_rounds is not None and (
        int(early_stopping_rounds) != early_stopping_rounds or early_stopping_rounds < 1
    ):
        raise DGBoostValueError(f"early_stopping_rounds must be a positive integer, got {early_stopping_rounds!r}")
    if isinstance(params, (list, tuple)):
        pairs = list(params)
        params = dict(pairs)
        listed = [v for k, v in pairs if k == "eval_metric"]
        if listed:
            params["eval_metric"] = listed
    else:
        params = dict(params)
    metrics = [metrics] if isinstance(metrics, str) else list(metrics or ())
    if not metrics and "eval_metric" in params:
        em = params["eval_metric"]
        metrics = list(em) if isinstance(em, (list, tuple)) else [em]
    params.pop("eval_metric", None)
    if metrics:
        params["eval_metric"] = metrics
    return params


class _Folds:
    """All folds as the one model the callbacks see (XGBoost's ``cv`` packs its folds too)."""

    def __init__(self, jobs: list[TrainingJob]) -> None:
        self.jobs = jobs
        self.rounds = 0
        self.best_iteration: int | None = None
        self.best_score: float | None = None

    def num_boosted_rounds(self) -> int:
        return self.rounds

    def set_param(self, params: Any, value: Any = None) -> None:
        """``learning_rate`` / ``eta`` changes every fold's learning rate; other names are ignored."""
        items = params.items() if isinstance(params, Mapping) else [(params, value)]
        for key, val in items:
            if canonical_name(key) == "eta":
                for job in self.jobs:
                    job.set_eta(val)


def _boost_folds(folds: _Folds, container: CallbackContainer, num_boost_round: int) -> dict:
    """Boost every fold round by round between the callbacks; returns the history of
    ``(mean, std)`` pairs (population std over folds, as XGBoost), cut after the best round
    when a callback stopped training."""
    history: dict = {}
    fold_logs: list[dict] = [{} for _ in folds.jobs]
    container.before_training(folds)
    for r in range(num_boost_round):
        if container.before_iteration(folds, r, history):
            break
        for job, log in zip(folds.jobs, fold_logs):
            job.run_round(r, queue_next=r + 1 < num_boost_round)
            job.evaluate(log)
        folds.rounds += 1
        for data, metrics in fold_logs[0].items():
            for metric in metrics:
                scores = np.array([log[data][metric][-1] for log in fold_logs], dtype=np.float64)
                history.setdefault(data, {}).setdefault(metric, []).append((float(scores.mean()), float(scores.std())))
        if container.after_iteration(folds, r, history):
            if folds.best_iteration is not None:
                history = {
                    d: {m: log[: folds.best_iteration + 1] for m, log in ms.items()} for d, ms in history.items()
                }
            break
    container.after_training(folds)
    return history
