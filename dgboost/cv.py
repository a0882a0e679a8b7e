"""Cross-validation with XGBoost's ``xgboost.cv`` name, arguments and result columns.

Each fold is trained with :func:`dgboost.train` (evaluated on its own training and test rows);
the per-round metrics are then averaged over the folds. Trees never depend on evaluation
results, so early stopping on the fold mean (as XGBoost does it, on the last metric of the
``test`` set) is applied to the averaged history afterwards, giving the same rows.
"""
from __future__ import annotations

from typing import Callable, Iterable, Sequence

import numpy as np

from .data import DMatrix
from .errors import DGBoostTypeError, DGBoostValueError

__all__ = ["cv"]

# XGBoost's EarlyStopping maximises metrics whose names start with one of these
_MAXIMIZE_PREFIXES = ("auc", "aucpr", "pre", "map", "ndcg", "interval-regression-accuracy")


def _subset(dmat: DMatrix, rows: np.ndarray) -> DMatrix:
    """A new DMatrix with the rows ``rows`` of ``dmat`` (labels, weights, margins, groups kept)."""
    rows = np.asarray(rows, dtype=np.int64)
    group = None
    if dmat.group_ptr is not None:
        # rows are whole groups, in order: recount the group sizes from the row -> group map
        group_of_row = np.repeat(np.arange(dmat.group_ptr.size - 1), np.diff(dmat.group_ptr))
        g = group_of_row[rows]
        if g.size and (np.diff(g) < 0).any():
            raise DGBoostValueError("cv folds of ranking data must keep the rows of each query "
                                    "group together and in order")
        _, group = np.unique(g, return_counts=True)
    out = DMatrix(dmat.data[rows],
                  None if dmat.label is None else dmat.label[rows],
                  weight=None if dmat.weight is None else dmat.weight[rows],
                  base_margin=None if dmat.base_margin is None else dmat.base_margin[rows],
                  group=group, feature_names=dmat.feature_names,
                  feature_types=dmat.feature_types, max_bin=dmat.max_bin)
    return out


def _make_folds(dtrain: DMatrix, nfold: int, stratified: bool, folds, seed: int,
                shuffle: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    n = dtrain.num_row()
    if folds is not None:
        if hasattr(folds, "split"):  # a scikit-learn splitter (KFold, GroupKFold, ...)
            data = dtrain.data.get() if hasattr(dtrain.data, "get") else dtrain.data
            folds = folds.split(X=data, y=dtrain.get_label())
        out = []
        for item in folds:
            if not (isinstance(item, (tuple, list)) and len(item) == 2):
                raise DGBoostTypeError("folds must be (train_index, test_index) pairs or a "
                                       "scikit-learn splitter with a split() method")
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

        splitter = StratifiedKFold(n_splits=nfold, shuffle=shuffle,
                                   random_state=seed if shuffle else None)
        return [(tr, te) for tr, te in splitter.split(np.zeros(n), dtrain.get_label())]
    # as XGBoost: np.random.seed(seed); permutation; array_split (without touching global state)
    idx = np.random.RandomState(seed).permutation(n) if shuffle else np.arange(n)
    parts = np.array_split(idx, nfold)
    return [(np.concatenate([parts[j] for j in range(nfold) if j != i]), parts[i])
            for i in range(nfold)]


def _maximizes(metric: str) -> bool:
    return metric.startswith(_MAXIMIZE_PREFIXES)


def cv(params: dict, dtrain: DMatrix, num_boost_round: int = 10, nfold: int = 3,
       stratified: bool = False, folds=None, metrics: Sequence[str] | str = (),
       obj: Callable | None = None, feval: Callable | None = None, maximize: bool | None = None,
       early_stopping_rounds: int | None = None, fpreproc: Callable | None = None,
       as_pandas: bool = True, verbose_eval: bool | int | None = None, show_stdv: bool = True,
       seed: int = 0, callbacks: Iterable | None = None, shuffle: bool = True,
       custom_metric: Callable | None = None):
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
        Passed to :func:`dgboost.train` of every fold.

    Returns
    -------
    pandas.DataFrame or dict
        Columns ``<set>-<metric>-mean`` and ``<set>-<metric>-std`` for ``set`` in
        (``train``, ``test``) and every metric; one row per round (population standard
        deviation over folds, as XGBoost).
    """
    from .training import train

    if not isinstance(dtrain, DMatrix):
        raise DGBoostTypeError(f"dtrain must be a DMatrix, got {type(dtrain).__name__}")
    if int(num_boost_round) != num_boost_round or num_boost_round < 0:
        raise DGBoostValueError(f"num_boost_round must be a non-negative integer, got {num_boost_round!r}")
    num_boost_round = int(num_boost_round)
    if early_stopping_rounds is not None and (int(early_stopping_rounds) != early_stopping_rounds
                                              or early_stopping_rounds < 1):
        raise DGBoostValueError(f"early_stopping_rounds must be a positive integer, got {early_stopping_rounds!r}")
    if isinstance(params, (list, tuple)):
        pairs = list(params)
        params = dict(pairs)
        listed = [v for k, v in pairs if k == "eval_metric"]
        if listed:
            params["eval_metric"] = listed
    else:
        params = dict(params)
    if isinstance(metrics, str):
        metrics = [metrics]
    metrics = list(metrics or ())
    if not metrics and "eval_metric" in params:
        em = params["eval_metric"]
        metrics = list(em) if isinstance(em, (list, tuple)) else [em]
    params.pop("eval_metric", None)
    if metrics:
        params["eval_metric"] = metrics
    custom_metric = custom_metric or feval
    callbacks = list(callbacks or ())

    histories = []
    for tr, te in _make_folds(dtrain, nfold, stratified, folds, seed, shuffle):
        d_tr, d_te, fold_params = _subset(dtrain, tr), _subset(dtrain, te), dict(params)
        if fpreproc is not None:
            d_tr, d_te, fold_params = fpreproc(d_tr, d_te, fold_params)
        history: dict = {}
        train(fold_params, d_tr, num_boost_round, evals=[(d_tr, "train"), (d_te, "test")],
              obj=obj, custom_metric=custom_metric, evals_result=history, verbose_eval=False,
              callbacks=callbacks)
        histories.append(history)

    results: dict[str, list] = {}
    n_rounds = min((len(v) for h in histories for m in h.values() for v in m.values()), default=0)
    keys = [(data, metric) for data in ("train", "test") for metric in histories[0].get(data, {})]
    for data, metric in keys:
        scores = np.array([h[data][metric][:n_rounds] for h in histories], dtype=np.float64)
        results[f"{data}-{metric}-mean"] = scores.mean(axis=0).tolist()
        results[f"{data}-{metric}-std"] = scores.std(axis=0).tolist()

    if early_stopping_rounds is not None and keys:
        data, metric = keys[-1]
        series = results[f"{data}-{metric}-mean"]
        maximize_flag = _maximizes(metric) if maximize is None else bool(maximize)
        best_score, best_round = None, 0
        for r, score in enumerate(series):
            if best_score is None or (score > best_score if maximize_flag else score < best_score):
                best_score, best_round = score, r
            if r - best_round >= early_stopping_rounds:
                for k in results:
                    results[k] = results[k][:best_round + 1]
                break

    period = 1 if verbose_eval is True else (int(verbose_eval) if verbose_eval else 0)
    if period:
        rows = len(next(iter(results.values()), []))
        for r in range(rows):
            if r % period and r != rows - 1:
                continue
            line = f"[{r}]"
            for data, metric in keys:
                mean = results[f"{data}-{metric}-mean"][r]
                line += f"\t{data}-{metric}:{mean:.5f}"
                if show_stdv:
                    line += f"+{results[f'{data}-{metric}-std'][r]:.5f}"
            print(line)

    if as_pandas:
        import pandas as pd

        return pd.DataFrame.from_dict(results)
    return results
