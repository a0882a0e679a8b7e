"""Evaluation metrics with XGBoost's names and definitions.

A metric sees the margins ``(n, k)`` and applies the objective's ``eval_transform`` where
XGBoost applies its prediction transform (probabilities for logistic/softmax objectives).
Row-wise metrics combine ``(sum w * loss, sum w)`` over ranks with :func:`exact_sum`, so a
value does not depend on how the rows are partitioned; AUC gathers the (prediction, label,
weight) triples and computes the exact area; ranking metrics are per query group (groups
never span ranks) and averaged with the group weights.

Margins, labels and weights may be NumPy or CuPy arrays (the array module is taken from the
margin). Row metrics run on the device and bring only their (m,) column maxima and int64
partial sums to the host (:func:`exact_sum`), so their values are those of the NumPy
computation up to the float64 ulp of CuPy's ``log``/``exp``/``tanh``/``gammaln``. AUC without
groups on one rank sorts on the device with the same algorithm (parallel cumulative sums may
round differently in the last ulp); on several ranks, and for ranking AUC, NDCG and MAP, the
rows are copied to the host and the NumPy code runs unchanged.
"""

from __future__ import annotations

import difflib
import math
from typing import Callable

import numpy as np
from scipy.special import gammaln

from ._array import array_module, as_rows, to_host
from .errors import DGBoostValueError, ParameterError
from .objective import Objective, cox_risk_sums, exact_sum
from .params import METRICS

__all__ = ["Metric", "CustomMetric", "get_metric", "METRIC_NAMES"]

#: the metric names dgboost computes (one list: the parameter check reads it too)
METRIC_NAMES = METRICS
_EPS = 1e-16  # XGBoost's probability clip for logloss, mlogloss and poisson-nloglik
_HIGHER_IS_BETTER = ("auc", "aucpr", "ndcg", "map", "pre")


def _weights(weight, n: int, xp=np):
    """Row weights as float64 (n,) in module ``xp`` (ones when ``weight`` is None)."""
    return xp.ones(n) if weight is None else xp.asarray(weight, xp.float64).reshape(n)


def _predictions(margin, objective: Objective):
    """What XGBoost's metrics see: the objective's evaluation transform, as float64 (n, k),
    in the array module of ``margin``."""
    xp = array_module(margin)
    m = xp.asarray(margin, np.float32)
    m = as_rows(m, m.shape[0])
    pred = objective.eval_transform(m) if objective is not None else m
    return as_rows(xp.asarray(pred, xp.float64), m.shape[0])


def _gammaln(x):
    """``log|Gamma(x)|`` from SciPy, or from ``cupyx.scipy.special`` for a CuPy ``x``."""
    if array_module(x) is np:
        return gammaln(x)
    from cupyx.scipy.special import gammaln as device_gammaln  # only with CuPy arrays

    return device_gammaln(x)


class Metric:
    """An evaluation metric.

    Attributes
    ----------
    name : str
        Display name, e.g. ``"ndcg@5"``, ``"error@0.7"``.
    higher_is_better : bool
    """

    name: str = ""
    higher_is_better: bool = False
    is_custom: bool = False
    #: whether the value depends on the rows' order over ranks (then ``evaluate`` takes
    #: ``global_rows``: the local rows' global indices, or None when ranks hold runs in order)
    needs_row_order: bool = False

    def evaluate(self, margin, label, weight, group_ptr, objective: Objective, comm) -> float:
        """The metric over all rows of all ranks (identical on every rank).

        Parameters
        ----------
        margin : ndarray or cupy.ndarray of float32, shape (n, k)
        label : ndarray or cupy.ndarray of float32, shape (n,)   (same module as ``margin``)
        weight : float32 array of shape (n,) (ranking: (n,) constant per group, or (n_groups,)), or None
        group_ptr : ndarray of int64, shape (n_groups + 1,), or None
        objective : Objective
        comm : Communicator

        Returns
        -------
        float
        """
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


# ---------------------------------------------------------------------------- row-wise
class _RowMetric(Metric):
    """Weighted mean of a per-row loss (``sqrt`` of it for rmse).

    ``loss(pred, y, xp)`` maps float64 predictions (what :meth:`_columns` takes: (n,), or
    (n, k) for multi-class and quantile losses) and labels (n,) to float64 (n,) losses, with
    the array module ``xp`` of its inputs; it runs where the rows are (host or device).
    """

    def __init__(self, name: str, loss: Callable, multiclass: bool = False, root: bool = False):
        self.name, self._loss, self._multiclass, self._root = name, loss, multiclass, root

    def evaluate(self, margin, label, weight, group_ptr, objective, comm) -> float:
        xp = array_module(margin)
        y = xp.asarray(label, xp.float64).ravel()
        pred = _predictions(margin, objective)
        if pred.shape[0] != len(y):
            raise DGBoostValueError(f"{self.name}: {pred.shape[0]} predictions for {len(y)} labels")
        pred = self._columns(pred, y, xp)
        w = _weights(weight, len(y), xp)
        # reduced where the rows are: only per-column maxima and int64 sums reach the host
        s, sw = exact_sum(xp.stack([w * self._loss(pred, y, xp), w], axis=1), comm)
        value = s / sw if sw != 0 else s  # XGBoost's GetFinal
        return float(math.sqrt(value) if self._root else value)

    def _columns(self, pred, y, xp):
        """What the loss takes from the (n, k) predictions: all of them for multi-class
        losses (whose labels are checked here), else the one column as (n,)."""
        if self._multiclass:
            if pred.shape[1] < 2:
                raise DGBoostValueError(f"{self.name} needs a multi-class objective (num_class >= 2)")
            bad = (y < 0) | (y >= pred.shape[1]) | (y != xp.floor(y))
            if bool(bad.any()):
                raise DGBoostValueError(
                    f"{self.name}: labels must be integers in 0..{pred.shape[1] - 1}; got {y[bad][:3].tolist()}"
                )
            return pred
        if pred.shape[1] != 1:
            raise DGBoostValueError(f"{self.name} needs one prediction per row, got {pred.shape[1]}")
        return pred[:, 0]


class _QuantileMetric(_RowMetric):
    """``quantile``: the pinball loss of each of the k predictions of a row at its quantile
    ``alpha_j``, averaged over the quantiles, then the weighted mean over rows (XGBoost sums
    ``w_i * loss_ij`` over rows and quantiles and divides by k times the weight sum: the same).
    Several quantiles are seen sorted in each row, as XGBoost's objective transforms them.
    """

    def __init__(self, alpha):
        super().__init__("quantile", self._pinball)
        self.alpha = tuple(float(np.float32(a)) for a in alpha)  # float32, as XGBoost stores them

    def _columns(self, pred, y, xp):
        if pred.shape[1] != len(self.alpha):
            raise DGBoostValueError(
                f"quantile: {pred.shape[1]} prediction(s) per row for {len(self.alpha)} quantile(s) in quantile_alpha"
            )
        return pred

    def _pinball(self, p, y, xp):
        d = y[:, None] - p
        alpha = xp.asarray(self.alpha, dtype=xp.float64)
        return xp.where(d >= 0, alpha * d, (alpha - 1.0) * d).mean(axis=1)


def _rmse(p, y, xp):
    return (y - p) ** 2


def _mae(p, y, xp):
    return xp.abs(y - p)


def _logloss(p, y, xp):
    p = xp.clip(p, _EPS, 1.0 - _EPS)
    return -(y * xp.log(p) + (1.0 - y) * xp.log1p(-p))


def _error_at(threshold: float):
    return lambda p, y, xp: xp.where(p > threshold, 1.0 - y, y)


def _poisson_nloglik(p, y, xp):
    p = xp.maximum(p, _EPS)
    return _gammaln(y + 1.0) + p - xp.log(p) * y


def _gamma_nloglik(p, y, xp):
    # XGBoost's EvalGammaNLogLik with psi = 1: theta = -1/p, b = log p, c = 0
    return y / p + xp.log(p)


def _gamma_deviance(p, y, xp):
    # XGBoost's EvalGammaDeviance: 2 (r - log r - 1), r = y / (p + 1e-9)
    r = y / (p + 1e-9)
    return 2.0 * (r - xp.log(r) - 1.0)


def _tweedie_nloglik(rho: float):
    def loss(p, y, xp):
        return -y * xp.exp((1.0 - rho) * xp.log(p)) / (1.0 - rho) + xp.exp((2.0 - rho) * xp.log(p)) / (2.0 - rho)

    return loss


def _mphe(slope: float):
    return lambda p, y, xp: slope * slope * (xp.sqrt(1.0 + ((y - p) / slope) ** 2) - 1.0)


def _mlogloss(p, y, xp):
    return -xp.log(xp.maximum(p[xp.arange(len(y)), y.astype(np.int64)], _EPS))


def _merror(p, y, xp):
    # NumPy's and CuPy's argmax both return the first maximum, as XGBoost
    return (xp.argmax(p, axis=1) != y.astype(np.int64)).astype(np.float64)


# --------------------------------------------------------------------------------- Cox
class _CoxNLogLik(Metric):
    """``cox-nloglik``: the negative partial log-likelihood of the Cox model per event, as
    XGBoost: rows in increasing ``|label|`` (stable), each event ``i`` (label > 0) adds
    ``-(log p_i - log R_i)`` with ``R_i`` the sum of the predictions (hazard ratios) of the
    rows at or after its time, all of its tie group included (Breslow); the total is divided
    by the number of events (NaN without events). Row weights are not used (XGBoost ignores
    them here), and as XGBoost's this metric needs every row on one rank. Runs in the array
    module of the margin.
    """

    name = "cox-nloglik"

    def evaluate(self, margin, label, weight, group_ptr, objective, comm) -> float:
        if comm.world_size > 1:
            raise DGBoostValueError(
                "cox-nloglik needs every row's risk set: it is not computed over "
                f"{comm.world_size} workers (as in XGBoost)"
            )
        xp = array_module(margin)
        label = xp.asarray(label, xp.float32).ravel()
        pred = _predictions(margin, objective)
        if pred.shape != (len(label), 1):
            raise DGBoostValueError(f"{self.name} needs one prediction per row, got {pred.shape[1]}")
        time = xp.abs(label)
        order = xp.argsort(time, kind="stable")
        p = pred[order, 0]
        risk = cox_risk_sums(time[order], p, float(p.sum()), xp)
        event = label[order] > 0
        n_events = int(event.sum())
        if n_events == 0:
            return math.nan
        return float(-xp.sum(xp.where(event, xp.log(p) - xp.log(risk), 0.0))) / n_events


# --------------------------------------------------------------------------------- AUC
def _binary_auc(pred, y, w) -> tuple[float, float]:
    """Weighted ROC area (trapezoids over tied predictions) and fp*tp, as XGBoost's BinaryAUC.

    Rows are put in a canonical order (prediction desc, then label, then weight) so the
    floating-point sums do not depend on the order in which ranks were gathered.

    Parameters
    ----------
    pred, y, w : float64 arrays of shape (n,), all NumPy or all CuPy (sorted where they are)

    Returns
    -------
    (float, float)
        The area and its normaliser ``fp * tp`` (both 0 when a class is absent).
    """
    xp = array_module(pred)
    # a (3, n) key array: the form both numpy.lexsort and cupy.lexsort take (last row first)
    order = xp.lexsort(xp.stack([w, y, -pred]))
    pred, y, w = pred[order], y[order], w[order]
    tp_cum, fp_cum = xp.cumsum(y * w), xp.cumsum((1.0 - y) * w)
    last = xp.concatenate([pred[1:] != pred[:-1], xp.ones(1, bool)])  # end of each run of ties
    tp, fp = tp_cum[last], fp_cum[last]
    zero = xp.zeros(1)
    tp_prev, fp_prev = xp.concatenate([zero, tp[:-1]]), xp.concatenate([zero, fp[:-1]])
    area = float(xp.sum((fp - fp_prev) * (tp + tp_prev) / 2.0))
    tp_all, fp_all = (float(tp[-1]), float(fp[-1])) if len(tp) else (0.0, 0.0)
    if tp_all <= 0 or fp_all <= 0:
        return 0.0, 0.0
    return area, fp_all * tp_all


class _AUC(Metric):
    """ROC AUC: binary, multi-class one-vs-rest, or per query group (XGBoost's definitions).

    Device arrays: without groups on a single rank, the rows are sorted and summed on the
    device (same algorithm and tie handling as on the host). With several ranks the rows are
    gathered through the host (AUC is not a sum of per-rank parts), and ranking AUC copies
    the rows to the host (a per-group loop).
    """

    name, higher_is_better = "auc", True
    needs_row_order = True  # a class's weight (multi-class) is summed in row order

    def evaluate(self, margin, label, weight, group_ptr, objective, comm, global_rows=None) -> float:
        if group_ptr is not None:  # host fallback for the per-group loop
            margin, label = to_host(margin), to_host(label)
            y = np.asarray(label, np.float64).ravel()
            pred = _predictions(margin, objective)
            return self._ranking(pred[:, 0], y, np.asarray(group_ptr, np.int64), comm)
        xp = array_module(margin)
        y = xp.asarray(label, xp.float64).ravel()
        pred = _predictions(margin, objective)
        w = _weights(weight, len(y), xp)
        if comm.world_size > 1:
            # one collective for every rank's rows: AUC is not a sum of per-rank parts
            columns = [to_host(pred), to_host(y)[:, None], to_host(w)[:, None]]
            if global_rows is not None:  # ranks hold rows out of order: put them back in order
                columns.append(np.asarray(global_rows, np.float64)[:, None])
            table = np.asarray(comm.allgather(np.concatenate(columns, axis=1)))
            if global_rows is not None:
                table = table[np.argsort(table[:, -1], kind="stable"), :-1]
            pred, y, w = table[:, :-2], table[:, -2], table[:, -1]
        if len(y) == 0:
            return math.nan
        if pred.shape[1] == 1:
            area, norm = _binary_auc(pred[:, 0], y, w)
            return area / norm if norm > 0 else math.nan
        # multi-class: one-vs-rest, averaged with the class weights (XGBoost's MultiClassOVR)
        total, weight_sum = 0.0, 0.0
        for c in range(pred.shape[1]):
            area, norm = _binary_auc(pred[:, c], (y == c).astype(np.float64), w)
            if norm <= 0:
                return math.nan
            tp = float(w[y == c].sum())
            total, weight_sum = total + area / norm * tp, weight_sum + tp
        return total / weight_sum if weight_sum > 0 else math.nan

    @staticmethod
    def _ranking(pred, y, gp, comm) -> float:
        """Mean over query groups of the fraction of correctly ordered pairs (XGBoost's
        GroupRankingROC; groups with fewer than 3 documents are left out)."""
        scores = np.zeros(len(gp) - 1)
        valid = np.zeros(len(gp) - 1)
        for g in range(len(gp) - 1):
            p, lab = pred[gp[g] : gp[g + 1]], y[gp[g] : gp[g + 1]]
            if len(lab) < 3:
                continue
            order = np.argsort(-lab, kind="stable")
            diff = p[order][:, None] - p[order][None, :]
            upper = np.triu(np.ones((len(lab), len(lab)), bool), 1)
            scores[g] = np.where(diff > 0, 1.0, np.where(diff == 0, 0.5, 0.0))[upper].mean()
            valid[g] = 1.0
        # one row per group, so the sum does not depend on which rank holds which group
        total, n_valid = exact_sum(np.stack([scores, valid], axis=1), comm)
        return float(total / n_valid) if n_valid > 0 else math.nan


# ----------------------------------------------------------------------------- ranking
class _RankMetric(Metric):
    """ndcg / map at k: per query group, averaged with group weights.

    Device arrays are copied to the host first (a per-group loop), so the value is the
    NumPy one exactly.
    """

    higher_is_better = True

    def __init__(self, kind: str, k: int | None, minus: bool, exp_gain: bool, display: str | None = None):
        self.kind, self.k, self.minus, self.exp_gain = kind, k, minus, exp_gain
        self.name = display or kind + (f"@{k}" if k is not None else "") + ("-" if minus else "")

    def evaluate(self, margin, label, weight, group_ptr, objective, comm) -> float:
        margin, label, weight = to_host(margin), to_host(label), to_host(weight)  # host fallback
        y = np.asarray(label, np.float64).ravel()
        pred = _predictions(margin, objective)[:, 0].astype(np.float32)
        gp = np.array([0, len(y)], np.int64) if group_ptr is None else np.asarray(group_ptr, np.int64)
        n_groups = len(gp) - 1
        if weight is None:
            gw = np.ones(n_groups)
        else:
            w = np.asarray(weight, np.float64).ravel()
            gw = w if len(w) == n_groups and len(w) != len(y) else w[np.minimum(gp[:-1], max(len(y) - 1, 0))]
        self._check_labels(y)
        scores = np.array([self._group(pred[gp[g] : gp[g + 1]], y[gp[g] : gp[g + 1]]) for g in range(n_groups)])
        s, sw = exact_sum(np.stack([gw * scores, gw], axis=1), comm)
        return float(s / sw) if sw > 0 else math.nan

    def _check_labels(self, y):
        if self.kind == "map":
            if not np.isin(y, (0.0, 1.0)).all():
                raise DGBoostValueError("map can only be used with binary relevance labels (0 or 1)")
        elif self.exp_gain and ((y < 0) | (y != np.floor(y)) | (y > 31)).any():
            raise DGBoostValueError(
                "ndcg with exponential gain needs integer relevance labels in 0..31 "
                "(set ndcg_exp_gain=False for other labels)"
            )

    def _group(self, p, y) -> float:
        n = len(y)
        k = n if self.k is None else min(self.k, n)
        ranked = y[np.argsort(-p, kind="stable")]  # ties keep input order, as XGBoost
        if self.kind == "ndcg":
            disc = 1.0 / np.log2(np.arange(k) + 2.0)
            gain = (lambda v: np.exp2(v) - 1.0) if self.exp_gain else (lambda v: v)
            idcg = float(np.sum(gain(np.sort(y)[::-1][:k]) * disc))
            if idcg == 0.0:
                return 0.0 if self.minus else 1.0
            return float(np.sum(gain(ranked[:k]) * disc)) / idcg
        hits = np.cumsum(ranked)
        n_rel = float(hits[-1]) if n else 0.0
        if n_rel == 0.0:
            return 0.0 if self.minus else 1.0
        ap = float(np.sum(hits[:k] / np.arange(1, k + 1) * ranked[:k]))
        return ap / min(n_rel, float(k))


# ------------------------------------------------------------------------------ custom
class CustomMetric(Metric):
    """Wraps ``fn(predt, dmatrix) -> (name, value)`` (or a list of such pairs: the first is used).

    ``name`` is the function's name until the first call, then the name it returns;
    ``higher_is_better`` is True for names starting with auc, aucpr, ndcg, map or pre.
    """

    is_custom = True

    def __init__(self, fn: Callable):
        if not callable(fn):
            raise ParameterError(f"a custom metric must be callable, got {type(fn).__name__}")
        self.fn, self.dmatrix = fn, None
        self._set_name(getattr(fn, "__name__", "custom"))

    def _set_name(self, name: str) -> None:
        self.name = str(name)
        self.higher_is_better = self.name.split("@")[0].rstrip("-") in _HIGHER_IS_BETTER

    def evaluate_custom(self, preds, dmatrix) -> float:
        """Call the user's function on ``preds`` (as XGBoost would pass them) and ``dmatrix``."""
        out = self.fn(preds, dmatrix)
        if isinstance(out, list) and out and isinstance(out[0], tuple):
            out = out[0]
        if not isinstance(out, tuple) or len(out) != 2:
            raise DGBoostValueError("a custom metric must return (name, value)")
        self._set_name(out[0])
        value = float(out[1])
        return value

    def evaluate(self, margin, label, weight, group_ptr, objective, comm) -> float:
        """Call the user's function on NumPy predictions (device margins are copied to the
        host, as XGBoost passes NumPy arrays to custom metrics)."""
        preds = objective.transform(margin) if objective is not None else margin
        return self.evaluate_custom(to_host(preds), self.dmatrix)


# ---------------------------------------------------------------------------- factory
def get_metric(name_or_callable, objective: Objective | None) -> Metric:
    """A :class:`Metric` from an XGBoost metric name or a custom metric callable.

    Names: rmse, mae, logloss, error, error@t, auc, mlogloss, merror, ndcg, ndcg@k, map,
    map@k (ndcg/map accept a trailing ``-``: groups without relevant documents score 0),
    poisson-nloglik, mphe, gamma-nloglik, gamma-deviance, tweedie-nloglik@rho (rho defaults to the
    objective's ``tweedie_variance_power``), quantile (at the objective's ``quantile_alpha``),
    cox-nloglik.

    Raises
    ------
    ParameterError
        For an unknown name (with the closest known one) or a malformed suffix.
    """
    if callable(name_or_callable):
        return CustomMetric(name_or_callable)
    name = str(name_or_callable)
    base, _, arg = name.partition("@")
    minus = False
    if base.endswith("-") and not arg:
        base, minus = base[:-1], True
    if base not in METRIC_NAMES:
        close = difflib.get_close_matches(base, METRIC_NAMES, n=1, cutoff=0.4)
        hint = f"; did you mean {close[0]!r}?" if close else f"; expected one of {sorted(METRIC_NAMES)}"
        raise ParameterError(f"unknown eval_metric {name!r}{hint}")
    params = getattr(objective, "params", None)
    if base in ("ndcg", "map"):
        if arg.endswith("-"):
            arg, minus = arg[:-1], True
        try:
            k = int(arg) if arg else None
        except ValueError:
            raise ParameterError(f"eval_metric {name!r}: expected {base}@<int>, e.g. {base}@10") from None
        if k is not None and k < 1:
            raise ParameterError(f"eval_metric {name!r}: the cut-off must be >= 1")
        if k is None and not (
            getattr(objective, "needs_group", False) and getattr(params, "lambdarank_pair_method", "topk") == "mean"
        ):
            # XGBoost 3.x scores a bare "ndcg"/"map" at its default top-k of 32; only the
            # default metric of a "mean"-pairs ranking objective covers the whole list
            k = 32
        return _RankMetric(base, k, minus, bool(getattr(params, "ndcg_exp_gain", True)), display=name)
    if base == "tweedie-nloglik":
        try:
            rho = float(arg) if arg else float(getattr(params, "tweedie_variance_power", 1.5))
        except ValueError:
            raise ParameterError(
                f"eval_metric {name!r}: expected tweedie-nloglik@<rho>, e.g. tweedie-nloglik@1.5"
            ) from None
        if not 1.0 <= rho < 2.0:
            raise ParameterError(f"eval_metric {name!r}: rho must be in [1, 2)")
        return _RowMetric(name if arg else f"tweedie-nloglik@{rho:g}", _tweedie_nloglik(rho))
    if arg and base != "error":
        raise ParameterError(f"eval_metric {name!r}: only error, ndcg, map and tweedie-nloglik take an '@' argument")
    if base == "quantile":
        alpha = getattr(params, "quantile_alpha", None)
        if alpha is None:
            raise ParameterError("eval_metric 'quantile' needs the quantile_alpha parameter")
        return _QuantileMetric(alpha)
    if base == "cox-nloglik":
        return _CoxNLogLik()
    if base == "error":
        try:
            threshold = float(arg) if arg else 0.5
        except ValueError:
            raise ParameterError(f"eval_metric {name!r}: expected error@<threshold>, e.g. error@0.7") from None
        return _RowMetric(name, _error_at(threshold))
    if base == "auc":
        return _AUC()
    # name -> (per-row loss, needs class probabilities, take the square root of the mean)
    simple = {
        "rmse": (_rmse, False, True),
        "mae": (_mae, False, False),
        "logloss": (_logloss, False, False),
        "poisson-nloglik": (_poisson_nloglik, False, False),
        "gamma-nloglik": (_gamma_nloglik, False, False),
        "gamma-deviance": (_gamma_deviance, False, False),
        "mlogloss": (_mlogloss, True, False),
        "merror": (_merror, True, False),
        "mphe": (_mphe(float(getattr(params, "huber_slope", 1.0))), False, False),
    }
    loss, multiclass, root = simple[base]
    return _RowMetric(base, loss, multiclass=multiclass, root=root)
