"""Training objectives: gradients, hessians, link functions and intercepts.

Every objective follows XGBoost's formulas (the names are XGBoost's). Inputs are float32;
the arithmetic is done in float64 and the gradients come back as float32 ``(n, k)`` arrays,
already multiplied by the row weights. Whatever is combined across ranks (intercepts,
adaptive leaf values) is computed *exactly*: sums are taken in 64-bit fixed point and
quantiles by bisection over integer counts, so the result is the same for any
partitioning of the rows (DESIGN.md §1.3).
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Callable

import numpy as np

from .comm.base import LocalComm
from .errors import DGBoostValueError, ParameterError
from .params import TrainParams

try:  # numba is optional: without it the ranking loops run as plain Python
    import numba
except ImportError:  # pragma: no cover - exercised only where numba is missing
    numba = None

__all__ = [
    "Objective", "SquaredError", "PseudoHuberError", "AbsoluteError", "RegLogistic",
    "BinaryLogistic", "BinaryLogitRaw", "PoissonRegression", "SoftprobMultiClass",
    "SoftmaxMultiClass", "LambdaRankPairwise", "LambdaRankNDCG", "CustomObjective",
    "get_objective", "margin_from_score", "score_from_margin", "exact_sum", "weighted_quantile",
    "lambdarank_gradient",
]

_EPS = 1e-16          # XGBoost's floor for hessians (kRtEps-like)
_PROB_CLIP = 1e-6     # logistic intercepts stay inside (1e-6, 1 - 1e-6)
_LOGISTIC = ("reg:logistic", "binary:logistic")
_PRIOR_FLOOR = 1e-6   # smallest class prior used for a multiclass intercept


# ----------------------------------------------------------------------------- exact sums
def exact_sum(columns: np.ndarray, comm) -> np.ndarray:
    """Sum each column over all rows of all ranks, identically for any row partitioning.

    Parameters
    ----------
    columns : ndarray, shape (n,) or (n, m)
        Finite values (any float dtype; converted to float64).
    comm : Communicator

    Returns
    -------
    ndarray of float64, shape (m,)
        Column sums. Every term is rounded to a fixed-point grid whose power-of-two step is
        agreed by all ranks (from the global max |value| and row count), so the int64 sums
        are associative and exact; the absolute error is at most
        ``n_total**2 * max|value| * 2**-62`` (a mean is off by ``n_total * 2**-62`` of the
        largest term at most).
    """
    v = np.asarray(columns, dtype=np.float64)
    v = v.reshape(len(v), -1) if v.ndim != 2 else v
    m = v.shape[1]
    if not np.isfinite(v).all():
        raise DGBoostValueError("cannot sum non-finite values (NaN or inf in labels, weights or predictions)")
    n_total = int(comm.allreduce_sum(np.array([v.shape[0]], np.int64))[0])
    amax = np.asarray(comm.allreduce_max(np.abs(v).max(axis=0, initial=0.0)), np.float64)
    # amax * n_total < 2**e, so |sum of quantised terms| <= 2**62 fits int64 with room to spare
    _, e = np.frexp(amax * max(n_total, 1))
    shift = np.where(amax > 0, 62 - e, 0).astype(np.int64)
    q = np.rint(np.ldexp(v, shift[None, :])).astype(np.int64)
    total = np.asarray(comm.allreduce_sum(q.sum(axis=0, dtype=np.int64)), np.int64).reshape(m)
    return np.ldexp(total.astype(np.float64), -shift)


# ----------------------------------------------------------------------- exact quantiles
def _ordered_keys(x: np.ndarray) -> np.ndarray:
    """Map float32 to uint32 so that integer order equals float order (-0.0 just below +0.0)."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return np.where(bits & np.uint32(0x80000000), ~bits, bits | np.uint32(0x80000000)).astype(np.uint32)


def _keys_to_float(keys: np.ndarray) -> np.ndarray:
    keys = np.asarray(keys, dtype=np.uint32)
    bits = np.where(keys & np.uint32(0x80000000), keys & np.uint32(0x7FFFFFFF), ~keys).astype(np.uint32)
    return bits.view(np.float32)


def _select(keys, seg, counts_or_weights, target_seg, threshold, comm) -> np.ndarray:
    """Smallest key K per target with sum over rows of its segment with key <= K >= threshold.

    A fixed 32-step bisection over the uint32 key space; every step is one int64 allreduce of
    one partial sum per target, so all ranks agree and the answer does not depend on how rows
    are spread. ``counts_or_weights`` are non-negative int64 per row.
    """
    combined = (seg.astype(np.uint64) << np.uint64(32)) | keys.astype(np.uint64)
    order = np.argsort(combined, kind="stable")
    ckeys = combined[order]
    cum = np.concatenate([[0], np.cumsum(counts_or_weights[order], dtype=np.int64)])
    tseg = np.asarray(target_seg, np.uint64) << np.uint64(32)
    start = np.searchsorted(ckeys, tseg, side="left")
    lo = np.zeros(len(tseg), np.uint64)
    hi = np.full(len(tseg), 0xFFFFFFFF, np.uint64)
    for _ in range(32):  # fixed count: every rank runs the same number of collectives
        mid = (lo + hi) >> np.uint64(1)
        pos = np.searchsorted(ckeys, tseg | mid, side="right")
        total = np.asarray(comm.allreduce_sum(cum[pos] - cum[start]), np.int64)
        ok = total >= threshold
        hi = np.where(ok, mid, hi)
        lo = np.where(ok, lo, mid + np.uint64(1))
    return lo.astype(np.uint32)


def weighted_quantile(values, weight, segment, n_segments: int, comm, alpha: float = 0.5) -> np.ndarray:
    """XGBoost's quantile of ``values`` within each segment, exact over all ranks.

    Parameters
    ----------
    values : ndarray of float32, shape (n,)
    weight : ndarray of float32, shape (n,), or None
        None reproduces XGBoost's unweighted ``common::Quantile`` (linear interpolation
        between order statistics: the mean of the two middle values for an even count).
        Weights reproduce ``common::WeightedQuantile``: the smallest value whose cumulative
        weight reaches ``alpha`` times the segment's total (weights are quantised to int64
        with a global scale, so ties at the threshold are decided exactly).
    segment : ndarray of int, shape (n,)
        Segment (leaf) of each row in ``0..n_segments-1``; rows with a negative segment are ignored.
    n_segments : int
    comm : Communicator
    alpha : float

    Returns
    -------
    ndarray of float64, shape (n_segments,)
        NaN for segments with no rows (or no positive weight) on any rank.
    """
    values = np.asarray(values, dtype=np.float32).ravel()
    segment = np.asarray(segment).ravel().astype(np.int64)
    if values.shape != segment.shape:
        raise DGBoostValueError(f"values {values.shape} and segments {segment.shape} differ in length")
    if np.isnan(values).any():
        raise DGBoostValueError("cannot take a quantile of NaN residuals")
    keep = (segment >= 0) & (segment < n_segments)
    if weight is not None:
        weight = np.asarray(weight, dtype=np.float64).ravel()
        if weight.shape != values.shape or not np.isfinite(weight).all() or (weight < 0).any():
            raise DGBoostValueError("weights must be finite, non-negative and one per row")
        weight = weight[keep]
    values, segment = values[keep], segment[keep]
    keys = _ordered_keys(values)
    ones = np.ones(len(values), np.int64)
    counts = np.asarray(comm.allreduce_sum(np.bincount(segment, minlength=n_segments).astype(np.int64)))
    if weight is None:
        # XGBoost's Quantile: x = alpha (n + 1); interpolate between order stats k and k + 1,
        # clamped to the extremes when alpha <= 1 / (n + 1) or alpha >= n / (n + 1)
        n = counts.astype(np.float64)
        x = alpha * (n + 1)
        inner = (alpha > 1.0 / (n + 1)) & (alpha < n / (n + 1))
        rank0 = np.where(inner, np.floor(x) - 1, np.where(alpha <= 1.0 / (n + 1), 0, n - 1))
        rank0 = np.maximum(rank0, 0).astype(np.int64)
        frac = np.where(inner, x - 1 - rank0, 0.0)
        rank1 = np.minimum(rank0 + (frac > 0), np.maximum(counts - 1, 0))
        segs = np.arange(n_segments)
        found = _keys_to_float(_select(keys, segment, ones, np.concatenate([segs, segs]),
                                       np.concatenate([rank0, rank1]) + 1, comm)).astype(np.float64)
        v0, v1 = found[:n_segments], found[n_segments:]
        res = np.float32(v0 + frac * (v1 - v0)).astype(np.float64)  # XGBoost returns float
        return np.where(counts > 0, res, np.nan)
    n_total = int(comm.allreduce_sum(np.array([len(values)], np.int64))[0])
    wmax = float(np.asarray(comm.allreduce_max(np.array([weight.max(initial=0.0)])))[0])
    if wmax == 0.0:
        return np.full(n_segments, np.nan)
    _, e = math.frexp(wmax * max(n_total, 1))
    q = np.rint(np.ldexp(weight, 61 - e)).astype(np.int64)
    local = np.zeros(n_segments, np.int64)
    np.add.at(local, segment, q)
    totals = np.asarray(comm.allreduce_sum(local), np.int64)
    frac_alpha = Fraction(alpha)
    thresholds = np.array([max(1, -((-frac_alpha.numerator * int(t)) // frac_alpha.denominator))
                           for t in totals.tolist()], np.int64)  # ceil(alpha * total), exact
    found = _keys_to_float(_select(keys, segment, q, np.arange(n_segments), thresholds, comm))
    return np.where(totals > 0, found.astype(np.float64), np.nan)


# ---------------------------------------------------------------------------- helpers
def _sigmoid(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # overflow-free logistic function


def _check_weight(weight, n: int) -> None:
    if weight is None:
        return
    weight = np.asarray(weight)
    if weight.shape != (n,):
        raise DGBoostValueError(f"weight has shape {weight.shape}, expected ({n},): one weight per row")
    if not np.isfinite(weight).all():
        raise DGBoostValueError("weight contains NaN or inf")
    if (weight < 0).any():
        raise DGBoostValueError(f"weight must be non-negative; found {float(weight.min())}")


def _describe_bad(label: np.ndarray, bad: np.ndarray) -> str:
    idx = np.flatnonzero(bad)
    shown = ", ".join(f"label[{i}]={float(label[i])!r}" for i in idx[:3])
    return f"{len(idx)} bad label(s), e.g. {shown}"


# ----------------------------------------------------------------------- base objective
class Objective:
    """One training objective (see the module docstring for conventions).

    Attributes
    ----------
    name : str
        XGBoost's name, e.g. ``"binary:logistic"``.
    default_metric : str
        XGBoost's default evaluation metric for this objective.
    needs_group : bool
        Ranking objectives need query groups (``group_ptr``).
    adaptive_leaves : bool
        Leaf values are re-fitted after growth with :meth:`leaf_values`.
    """

    name: str = ""
    default_metric: str = "rmse"
    needs_group: bool = False
    adaptive_leaves: bool = False

    def __init__(self, params: TrainParams):
        self.params = params

    def n_outputs(self) -> int:
        """Trees per boosting round."""
        return 1

    # -- validation ----------------------------------------------------------------------
    def validate_labels(self, label, weight, group_ptr) -> None:
        """Raise :class:`DGBoostValueError` naming what is wrong with labels/weights/groups."""
        label = np.asarray(label)
        if label.ndim != 1:
            raise DGBoostValueError(f"{self.name}: label must be 1-D, got shape {label.shape}")
        bad = ~np.isfinite(label)
        if bad.any():
            raise DGBoostValueError(f"{self.name}: labels must be finite; {_describe_bad(label, bad)}")
        _check_weight(weight, len(label))
        self._check_label_values(label)

    def _check_label_values(self, label: np.ndarray) -> None:
        pass

    # -- intercept -----------------------------------------------------------------------
    def base_score(self, label, weight, comm) -> float:
        """Intercept in output space estimated from the labels (weighted mean by default)."""
        return self._weighted_mean(label, weight, comm, default=0.0)

    @staticmethod
    def _weighted_mean(label, weight, comm, default: float) -> float:
        y = np.asarray(label, np.float64)
        w = np.ones_like(y) if weight is None else np.asarray(weight, np.float64)
        sw_y, sw = exact_sum(np.stack([w * y, w], axis=1), comm)
        return float(sw_y / sw) if sw > 0 else default

    def margin_from_score(self, score: float) -> float:
        """Inverse link: output-space ``score`` -> margin."""
        return margin_from_score(self.name, score)

    def base_margins(self, label, weight, comm) -> np.ndarray:
        """The intercept of every output as a margin; float64 (n_outputs,)."""
        margin = self.margin_from_score(self.base_score(label, weight, comm))
        return np.full(self.n_outputs(), margin, dtype=np.float64)

    # -- gradients -----------------------------------------------------------------------
    def gradient(self, margin, label, weight, group_ptr, iteration: int):
        """Gradients and hessians, float32 (n, k), multiplied by the row weights."""
        m = np.asarray(margin, np.float64).reshape(len(label), -1)[:, 0]
        y = np.asarray(label, np.float64)
        g, h = self._grad_hess(m, y)
        w = self._row_weight(weight, y)
        if w is not None:
            g, h = g * w, h * w
        return g.astype(np.float32)[:, None], h.astype(np.float32)[:, None]

    def _grad_hess(self, m: np.ndarray, y: np.ndarray):  # pragma: no cover - abstract
        raise NotImplementedError

    def _row_weight(self, weight, y):
        return None if weight is None else np.asarray(weight, np.float64)

    def transform(self, margin) -> np.ndarray:
        """Margin (n, k) float32 -> prediction: (n,) for one output."""
        return np.asarray(margin, np.float32).reshape(np.shape(margin)[0], -1)[:, 0].copy()

    def eval_transform(self, margin) -> np.ndarray:
        """What metrics see; equals :meth:`transform` except for ``multi:softmax`` and
        ``binary:logitraw`` (probabilities, see their docstrings)."""
        return self.transform(margin)

    def leaf_values(self, residual, weight, leaf_of_row, n_leaves: int, comm) -> np.ndarray:
        """Per-leaf refit for adaptive objectives; see :class:`AbsoluteError`."""
        raise NotImplementedError(f"{self.name} does not re-fit leaves")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class SquaredError(Objective):
    """``reg:squarederror``: loss ``(m - y)^2 / 2``; intercept = weighted mean."""

    name, default_metric = "reg:squarederror", "rmse"

    def _grad_hess(self, m, y):
        return m - y, np.ones_like(m)


class PseudoHuberError(Objective):
    """``reg:pseudohubererror``: loss ``d^2 (sqrt(1 + ((m - y)/d)^2) - 1)``, d = huber_slope.

    The intercept is XGBoost's: one Newton step from margin 0 (``-G / max(H, 1e-6)``).
    """

    name, default_metric = "reg:pseudohubererror", "mphe"

    def _grad_hess(self, m, y):
        z = m - y
        slope = float(self.params.huber_slope)
        scale = 1.0 + (z / slope) ** 2
        scale_sqrt = np.sqrt(scale)
        return z / scale_sqrt, 1.0 / (scale * scale_sqrt)

    def base_score(self, label, weight, comm) -> float:
        y = np.asarray(label, np.float64)
        g, h = self._grad_hess(np.zeros_like(y), y)
        w = np.ones_like(y) if weight is None else np.asarray(weight, np.float64)
        sg, sh = exact_sum(np.stack([w * g, w * h], axis=1), comm)
        return float(-sg / max(sh, 1e-6)) + 0.0  # + 0.0: no -0.0


class AbsoluteError(Objective):
    """``reg:absoluteerror``: gradient ``sign(m - y)``, hessian 1, leaves re-fitted to the
    median of ``label - margin`` (XGBoost 1.7-3.3 semantics; XGBoost 3.4 replaced this by a
    smooth majorisation that needs a global reduction inside the gradient).

    The intercept is the exact median of the labels (unweighted: interpolated; weighted:
    lower weighted median), as XGBoost computes it on one worker.
    """

    name, default_metric, adaptive_leaves = "reg:absoluteerror", "mae", True

    def _grad_hess(self, m, y):
        return np.sign(m - y), np.ones_like(m)

    def base_score(self, label, weight, comm) -> float:
        y = np.asarray(label, np.float32)
        q = weighted_quantile(y, weight, np.zeros(len(y), np.int64), 1, comm, 0.5)[0]
        return 0.0 if math.isnan(q) else float(q)

    def leaf_values(self, residual, weight, leaf_of_row, n_leaves: int, comm) -> np.ndarray:
        """Exact (weighted) median of ``residual`` in each leaf; NaN for empty leaves.

        Parameters
        ----------
        residual : ndarray of float32, shape (n,)   ``label - margin``
        weight : ndarray of float32, shape (n,), or None
        leaf_of_row : ndarray of int, shape (n,)    leaf index, negative = not in any leaf
        n_leaves : int
        comm : Communicator

        Returns
        -------
        ndarray of float64, shape (n_leaves,)
        """
        return weighted_quantile(residual, weight, leaf_of_row, n_leaves, comm, 0.5)


class RegLogistic(Objective):
    """``reg:logistic``: log loss on ``sigmoid(m)``; labels in [0, 1]; metric rmse.

    ``scale_pos_weight`` multiplies the weight of rows whose label is exactly 1.
    """

    name, default_metric = "reg:logistic", "rmse"

    def _check_label_values(self, label):
        bad = (label < 0) | (label > 1)
        if bad.any():
            raise DGBoostValueError(f"{self.name}: labels must be in [0, 1]; {_describe_bad(label, bad)}")

    def _grad_hess(self, m, y):
        p = _sigmoid(m)
        return p - y, np.maximum(p * (1.0 - p), _EPS)

    def _row_weight(self, weight, y):
        spw = float(self.params.scale_pos_weight)
        if spw == 1.0:
            return super()._row_weight(weight, y)
        w = np.ones_like(y) if weight is None else np.asarray(weight, np.float64)
        return np.where(y == 1.0, w * spw, w)

    def base_score(self, label, weight, comm) -> float:
        return float(np.clip(self._weighted_mean(label, weight, comm, 0.5), _PROB_CLIP, 1 - _PROB_CLIP))

    def transform(self, margin):
        return _sigmoid(super().transform(margin)).astype(np.float32)


class BinaryLogistic(RegLogistic):
    """``binary:logistic``: as ``reg:logistic`` with metric logloss."""

    name, default_metric = "binary:logistic", "logloss"


class BinaryLogitRaw(RegLogistic):
    """``binary:logitraw``: logistic loss, predictions are raw margins.

    As XGBoost 3.4, the intercept is the weighted label mean used directly as a margin
    (identity link). Unlike XGBoost, metrics see ``sigmoid(margin)`` (so ``error`` thresholds
    the margin at 0 and ``logloss`` is meaningful); XGBoost applies them to raw margins.
    """

    name, default_metric = "binary:logitraw", "logloss"

    def base_score(self, label, weight, comm) -> float:
        return self._weighted_mean(label, weight, comm, 0.0)

    def transform(self, margin):
        return Objective.transform(self, margin)

    def eval_transform(self, margin):
        return _sigmoid(Objective.transform(self, margin)).astype(np.float32)


class PoissonRegression(Objective):
    """``count:poisson``: gradient ``exp(m) - y``, hessian ``exp(m + max_delta_step)``.

    ``max_delta_step`` defaults to 0.7 for this objective (set by ``parse_params``, as
    XGBoost's learner does); the same value also bounds every leaf step of the trees.
    """

    name, default_metric = "count:poisson", "poisson-nloglik"

    def _check_label_values(self, label):
        bad = label < 0
        if bad.any():
            raise DGBoostValueError(f"{self.name}: labels must be non-negative counts; "
                                    f"{_describe_bad(label, bad)}")

    def _grad_hess(self, m, y):
        mds = float(self.params.max_delta_step)
        return np.exp(m) - y, np.exp(m + mds)

    def base_score(self, label, weight, comm) -> float:
        return max(self._weighted_mean(label, weight, comm, 1.0), _PROB_CLIP)

    def transform(self, margin):
        return np.exp(super().transform(margin).astype(np.float64)).astype(np.float32)


class SoftprobMultiClass(Objective):
    """``multi:softprob``: softmax cross-entropy over ``num_class`` margins.

    grad_k = (p_k - [y == k]) w, hess_k = max(2 p_k (1 - p_k), 1e-16) w, as XGBoost.
    The intercept is a vector, as in XGBoost 3.4: the centred log class priors, so that
    the softmax of the intercept alone predicts each class's (weighted) frequency.
    """

    name, default_metric = "multi:softprob", "mlogloss"

    def n_outputs(self) -> int:
        return int(self.params.num_class)

    def _check_label_values(self, label):
        k = self.n_outputs()
        bad = (label < 0) | (label >= k) | (label != np.floor(label))
        if bad.any():
            raise DGBoostValueError(f"{self.name}: labels must be integers in 0..{k - 1} "
                                    f"(num_class={k}); {_describe_bad(label, bad)}")

    def base_score(self, label, weight, comm) -> float:
        return 0.5

    def base_margins(self, label, weight, comm) -> np.ndarray:
        k = self.n_outputs()
        y = np.asarray(label).astype(np.int64)
        w = np.ones(len(y)) if weight is None else np.asarray(weight, np.float64)
        onehot = np.zeros((len(y), k))
        onehot[np.arange(len(y)), y] = w
        totals = exact_sum(onehot, comm)
        if not totals.sum() > 0:
            return np.zeros(k)
        # an absent class gets a small prior rather than a -inf margin
        log_prior = np.log(np.maximum(totals / totals.sum(), _PRIOR_FLOOR))
        return log_prior - log_prior.mean()

    @staticmethod
    def _softmax(margin) -> np.ndarray:
        z = np.asarray(margin, np.float64)
        z = np.exp(z - z.max(axis=1, keepdims=True))
        return z / z.sum(axis=1, keepdims=True)

    def gradient(self, margin, label, weight, group_ptr, iteration: int):
        n, k = len(label), self.n_outputs()
        p = self._softmax(np.asarray(margin).reshape(n, k))
        onehot = np.zeros_like(p)
        onehot[np.arange(n), np.asarray(label).astype(np.int64)] = 1.0
        g, h = p - onehot, np.maximum(2.0 * p * (1.0 - p), _EPS)
        if weight is not None:
            w = np.asarray(weight, np.float64)[:, None]
            g, h = g * w, h * w
        return g.astype(np.float32), h.astype(np.float32)

    def transform(self, margin):
        return self._softmax(np.asarray(margin).reshape(np.shape(margin)[0], -1)).astype(np.float32)

    def eval_transform(self, margin):
        return SoftprobMultiClass.transform(self, margin)


class SoftmaxMultiClass(SoftprobMultiClass):
    """``multi:softmax``: as softprob, but predictions are the arg-max class (float32)."""

    name = "multi:softmax"

    def transform(self, margin):
        m = np.asarray(margin).reshape(np.shape(margin)[0], -1)
        return np.argmax(m, axis=1).astype(np.float32)  # first maximum, as XGBoost


# ------------------------------------------------------------------------ LambdaMART
def _jit(fn):
    return numba.njit(cache=True, nogil=True)(fn) if numba is not None else fn


@_jit
def _mix64(x):
    """splitmix64 finaliser (uint64 in, uint64 out): the pair sampler's hash."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@_jit
def _pair_lambda(rh, rl, rank, pred, yr, discount, inv_idcg, ndcg, exp_gain, score_norm, spread, gg, hh):
    """Add one pair's lambda (XGBoost's LambdaGrad) to gg/hh, indexed by rank position;
    return its contribution ``-2 * lambda`` to the group's normaliser."""
    if yr[rh] == yr[rl]:
        return 0.0
    if yr[rh] < yr[rl]:
        rh, rl = rl, rh
    diff = pred[rank[rh]] - pred[rank[rl]]  # float32 arithmetic, as XGBoost
    delta = 1.0
    if ndcg:
        gh = 2.0 ** yr[rh] - 1.0 if exp_gain else float(yr[rh])
        gl = 2.0 ** yr[rl] - 1.0 if exp_gain else float(yr[rl])
        delta = abs((gh - gl) * (discount[rh] - discount[rl]) * inv_idcg)
    if score_norm and spread:
        delta /= abs(float(diff)) + 0.01
    sig = 1.0 / (1.0 + math.exp(-float(diff))) if diff > -700.0 else 0.0
    lam = np.float32((sig - 1.0) * delta)  # XGBoost stores each pair's lambda as float32
    hes = np.float32(max(sig * (1.0 - sig), 1e-16) * delta * 2.0)
    gg[rh] += lam
    hh[rh] += hes
    gg[rl] -= lam
    hh[rl] += hes
    return -2.0 * float(lam)


@_jit
def _lambdarank_kernel(pred, label, gptr, order, ideal, by_label, gweight, discount, gg, hh, topk,
                       num_pair, ndcg, exp_gain, score_norm, normalize, seed, iteration, group_offset,
                       out_g, out_h):
    """Per-group pair loops. ``order`` lists each group's rows by descending prediction,
    ``ideal`` each group's labels in descending order and ``by_label`` the positions of
    ``order`` by descending label (all stable, sorted by the caller in NumPy, which also keeps
    the compiled code small); ``gg``/``hh`` are scratch space of the largest group's size."""
    for g in range(len(gptr) - 1):
        b, cnt = gptr[g], gptr[g + 1] - gptr[g]
        if cnt < 2:
            continue
        rank = order[b:b + cnt]
        yr = label[rank]
        inv_idcg = 0.0
        if ndcg:
            idcg = 0.0
            for i in range(min(cnt, num_pair) if topk else cnt):
                idcg += discount[i] * (2.0 ** ideal[b + i] - 1.0 if exp_gain else ideal[b + i])
            inv_idcg = 1.0 / idcg if idcg != 0.0 else 0.0
        spread = pred[rank[0]] != pred[rank[cnt - 1]]
        for i in range(cnt):
            gg[i] = 0.0
            hh[i] = 0.0
        sum_lambda = 0.0
        if topk:
            for i in range(min(cnt, num_pair)):
                for j in range(i + 1, cnt):
                    sum_lambda += _pair_lambda(i, j, rank, pred, yr, discount, inv_idcg, ndcg,
                                               exp_gain, score_norm, spread, gg, hh)
        else:
            # XGBoost's "mean" sampler: buckets of equal label; each document draws partners
            # from outside its bucket. The draw is a hash, so it is reproducible anywhere.
            key = _mix64(_mix64(_mix64(np.uint64(seed)) ^ np.uint64(iteration))
                         ^ np.uint64(group_offset + g))
            i = 0
            while i < cnt:
                j = i + 1
                while j < cnt and yr[by_label[b + i] - b] == yr[by_label[b + j] - b]:
                    j += 1
                n_out = i + cnt - j
                if n_out > 0:
                    for s in range(num_pair):
                        for d in range(i, j):
                            h = _mix64(key ^ (np.uint64(d) * np.uint64(num_pair) + np.uint64(s)))
                            r = np.int64(h % np.uint64(n_out))
                            if r >= i:
                                r = r - i + j
                            sum_lambda += _pair_lambda(by_label[b + d] - b, by_label[b + r] - b, rank,
                                                       pred, yr, discount, inv_idcg, ndcg, exp_gain,
                                                       score_norm, spread, gg, hh)
                i = j
        norm = 1.0
        if normalize:
            if not topk:
                norm = 1.0 / num_pair
            elif sum_lambda > 0.0:
                norm = math.log2(1.0 + sum_lambda) / sum_lambda  # LightGBM-style, as XGBoost topk
        w = gweight[g] * norm
        for r in range(cnt):
            out_g[rank[r]] = gg[r] * w
            out_h[rank[r]] = hh[r] * w


def lambdarank_gradient(pred, label, group_ptr, group_weight, *, topk: bool, num_pair: int,
                        ndcg: bool, exp_gain: bool = True, score_normalization: bool = True,
                        normalization: bool = True, seed: int = 0, iteration: int = 0,
                        group_offset: int = 0):
    """LambdaMART gradients of every query group (XGBoost 3.x ``rank:pairwise``/``rank:ndcg``).

    Parameters
    ----------
    pred, label : ndarray of float32, shape (n,)
    group_ptr : ndarray of int64, shape (n_groups + 1,)
    group_weight : ndarray of float64, shape (n_groups,)
        Final multiplier of each group (user weight times XGBoost's weight normalisation).
    topk, num_pair : pair method ``topk`` with truncation ``num_pair``, or ``mean`` with
        ``num_pair`` sampled partners per document.
    ndcg, exp_gain : delta-NDCG weighting (gain ``2^rel - 1`` or ``rel``); else RankNet.
    score_normalization : divide each delta by ``|s_i - s_j| + 0.01``.
    normalization : scale a group by ``log2(1 + S) / S`` (topk) or ``1 / num_pair`` (mean).
    seed, iteration, group_offset : key of the hash that samples pairs (``mean`` only).

    Returns
    -------
    grad, hess : ndarray of float32, shape (n,)
    """
    pred = np.ascontiguousarray(pred, dtype=np.float32)
    label = np.ascontiguousarray(label, dtype=np.float32)
    gptr = np.ascontiguousarray(group_ptr, dtype=np.int64)
    n = len(pred)
    # stable sorts within groups, done once in NumPy (keeps the compiled loop small)
    gid = np.repeat(np.arange(len(gptr) - 1), np.diff(gptr))
    order = np.lexsort((-pred, gid))
    ideal = label[np.lexsort((-label, gid))]
    by_label = np.lexsort((-label[order], gid))
    max_n = int(np.diff(gptr).max(initial=1))
    discount = 1.0 / np.log2(np.arange(max_n) + 2.0)
    out_g, out_h = np.zeros(n), np.zeros(n)
    with np.errstate(over="ignore"):  # uint64 hashing wraps on purpose (plain-Python fallback)
        _lambdarank_kernel(pred, label, gptr, order, ideal, by_label,
                           np.ascontiguousarray(group_weight, dtype=np.float64), discount,
                           np.zeros(max_n), np.zeros(max_n), bool(topk), int(num_pair), bool(ndcg),
                           bool(exp_gain), bool(score_normalization), bool(normalization),
                           int(seed) & 0x7FFFFFFFFFFFFFFF, int(iteration), int(group_offset), out_g, out_h)
    return out_g.astype(np.float32), out_h.astype(np.float32)


class _LambdaRank(Objective):
    """LambdaMART (XGBoost 2+/3.x ``rank:*``), gradients per query group.

    Pairs: ``lambdarank_pair_method="topk"`` (default) uses every pair with at least one
    document in the model's current top ``lambdarank_num_pair_per_sample`` (default 32):
    no randomness. ``"mean"`` samples that many partners per document; the sample is a
    hash of (seed, iteration, global group index, document, draw), never global RNG state.
    Set :attr:`group_offset` to the global index of this rank's first query group so the
    sample does not depend on the partitioning. Weights are per group (a per-row weight
    must be constant within each group). No position debiasing.
    """

    needs_group = True
    _ndcg = False

    def __init__(self, params: TrainParams):
        super().__init__(params)
        if getattr(params, "lambdarank_unbiased", False):
            raise ParameterError("lambdarank_unbiased=True (position debiasing) is not supported")
        self.topk = params.lambdarank_pair_method == "topk"
        self.num_pair = int(params.lambdarank_num_pair_per_sample) or (32 if self.topk else 1)
        self.normalization = bool(getattr(params, "lambdarank_normalization", True))
        self.score_normalization = bool(getattr(params, "lambdarank_score_normalization", True))
        self.exp_gain = bool(params.ndcg_exp_gain)
        self.group_offset = 0
        self.weight_norm: float | None = None  # n_groups / sum(group weights), see prepare()
        self.default_metric = f"ndcg@{self.num_pair}" if self.topk else "ndcg"

    def validate_labels(self, label, weight, group_ptr) -> None:
        super().validate_labels(label, None, None)
        n = len(label)
        if group_ptr is None:
            raise DGBoostValueError(f"{self.name} needs query groups: pass group= (or qid=) to the DMatrix")
        gp = np.asarray(group_ptr)
        if gp.ndim != 1 or len(gp) < 1 or gp[0] != 0 or gp[-1] != n or (np.diff(gp) < 0).any():
            raise DGBoostValueError(f"{self.name}: group_ptr must rise from 0 to the number of rows "
                                    f"({n}); got {gp[:5]}...{gp[-1:] if len(gp) else ''}")
        if weight is not None:
            self._group_weight(weight, gp, check=True)

    def _check_label_values(self, label):
        if self._ndcg and self.exp_gain:
            bad = (label < 0) | (label != np.floor(label)) | (label > 31)
            if bad.any():
                raise DGBoostValueError(
                    f"{self.name}: with ndcg_exp_gain=True relevance labels must be integers in 0..31; "
                    f"{_describe_bad(label, bad)} (set ndcg_exp_gain=False for other gains)")

    @staticmethod
    def _group_weight(weight, group_ptr, check: bool = False) -> np.ndarray:
        """Per-group weights from per-group (n_groups,) or per-row (n,) weights."""
        w = np.asarray(weight, np.float64).ravel()
        n_groups, n = len(group_ptr) - 1, int(group_ptr[-1])
        if len(w) == n:
            sizes = np.diff(group_ptr)
            first = w[np.minimum(group_ptr[:-1], max(n - 1, 0))] if n else np.zeros(n_groups)
            if check and not np.array_equal(np.repeat(first, sizes), w):
                row = np.flatnonzero(np.repeat(first, sizes) != w)[0]
                raise DGBoostValueError(f"ranking weights are per query group, but the rows of group "
                                        f"{np.searchsorted(group_ptr, row, 'right') - 1} differ")
            w = np.where(sizes > 0, first, 0.0)
        elif len(w) != n_groups:
            raise DGBoostValueError(f"ranking weight has {len(w)} entries; expected one per query "
                                    f"group ({n_groups}) or one per row ({n})")
        if check and (not np.isfinite(w).all() or (w < 0).any()):
            raise DGBoostValueError("ranking (group) weights must be finite and non-negative")
        return w

    def prepare(self, label, weight, group_ptr, comm) -> None:
        """Agree on XGBoost's weight normalisation ``n_groups / sum(group weights)`` over all
        ranks. Call once before boosting; without it the local groups define it."""
        self.weight_norm = self._weight_norm(weight, group_ptr, comm)

    def _weight_norm(self, weight, group_ptr, comm) -> float:
        if weight is None or group_ptr is None:
            return 1.0
        gw = self._group_weight(weight, np.asarray(group_ptr))
        s_n, s_w = exact_sum(np.stack([np.ones(len(gw)), gw], axis=1), comm)
        return float(s_n / s_w) if s_w > 0 else 1.0

    def base_score(self, label, weight, comm) -> float:
        return 0.0  # lambda gradients sum to zero in every group: the Newton intercept is 0

    def gradient(self, margin, label, weight, group_ptr, iteration: int):
        if group_ptr is None:
            raise DGBoostValueError(f"{self.name} needs query groups (group_ptr is None)")
        gp = np.asarray(group_ptr, np.int64)
        n_groups = len(gp) - 1
        gw = np.ones(n_groups) if weight is None else self._group_weight(weight, gp)
        norm = self.weight_norm
        if norm is None:  # prepare() was not called: normalise over the local groups
            norm = self._weight_norm(weight, gp, LocalComm())
        g, h = lambdarank_gradient(
            np.asarray(margin, np.float32).reshape(len(label), -1)[:, 0], np.asarray(label, np.float32),
            gp, gw * norm, topk=self.topk, num_pair=self.num_pair, ndcg=self._ndcg,
            exp_gain=self.exp_gain, score_normalization=self.score_normalization,
            normalization=self.normalization, seed=int(self.params.seed), iteration=int(iteration),
            group_offset=int(self.group_offset))
        return g[:, None], h[:, None]


class LambdaRankPairwise(_LambdaRank):
    """``rank:pairwise``: RankNet loss (every pair's delta is 1)."""

    name = "rank:pairwise"


class LambdaRankNDCG(_LambdaRank):
    """``rank:ndcg``: pairs weighted by |delta NDCG| (gain 2^rel - 1 when ndcg_exp_gain)."""

    name, _ndcg = "rank:ndcg", True


class CustomObjective(Objective):
    """Wraps a user's ``obj(preds, dtrain) -> (grad, hess)`` like XGBoost.

    ``preds`` are raw margins: (n,) for one output, (n, k) otherwise. Set :attr:`dtrain`
    before :meth:`gradient`. Returned arrays may be (n,), (n, k) or flat (n * k,); they are
    used as given (the user applies weights), and must be finite.
    """

    name, default_metric = "custom", "rmse"

    def __init__(self, fn: Callable, params: TrainParams, n_outputs: int):
        super().__init__(params)
        if not callable(fn):
            raise ParameterError(f"a custom objective must be callable, got {type(fn).__name__}")
        self.fn, self._k, self.dtrain = fn, max(int(n_outputs), 1), None

    def n_outputs(self) -> int:
        return self._k

    def margin_from_score(self, score: float) -> float:
        return float(score)

    def gradient(self, margin, label, weight, group_ptr, iteration: int):
        n, k = np.shape(margin)[0], self._k
        m = np.asarray(margin, np.float32).reshape(n, k)
        out = self.fn(m[:, 0].copy() if k == 1 else m.copy(), self.dtrain)
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise DGBoostValueError("a custom objective must return a pair (grad, hess)")
        res = []
        for what, arr in zip(("grad", "hess"), out):
            a = np.asarray(arr, dtype=np.float32)
            if a.size != n * k:
                raise DGBoostValueError(f"custom objective returned {what} of shape {a.shape}; expected "
                                        f"{(n,) if k == 1 else (n, k)} ({n} rows x {k} outputs)")
            if not np.isfinite(a).all():
                raise DGBoostValueError(f"custom objective returned non-finite values in {what}")
            res.append(a.reshape(n, k))
        return res[0], res[1]

    def transform(self, margin):
        m = np.asarray(margin, np.float32)
        return m.reshape(m.shape[0], -1)[:, 0].copy() if self._k == 1 else m.reshape(m.shape[0], -1).copy()


_REGISTRY: dict[str, type[Objective]] = {cls.name: cls for cls in (
    SquaredError, PseudoHuberError, AbsoluteError, RegLogistic, BinaryLogistic, BinaryLogitRaw,
    PoissonRegression, SoftprobMultiClass, SoftmaxMultiClass, LambdaRankPairwise, LambdaRankNDCG)}


def get_objective(params: TrainParams) -> Objective:
    """The :class:`Objective` named by ``params.objective`` (a callable gives a CustomObjective)."""
    obj = params.objective
    if callable(obj):
        return CustomObjective(obj, params, params.num_class if params.num_class > 1 else 1)
    if obj not in _REGISTRY:
        import difflib
        close = difflib.get_close_matches(str(obj), list(_REGISTRY), n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]!r}?" if close else f"; expected one of {sorted(_REGISTRY)}"
        raise ParameterError(f"unknown objective {obj!r}{hint}")
    return _REGISTRY[obj](params)


def margin_from_score(objective_name: str, score: float) -> float:
    """Output space -> margin: logit for logistic objectives, log for Poisson, else identity."""
    score = float(score)
    if objective_name in _LOGISTIC:
        if not 0.0 < score < 1.0:
            raise ParameterError(f"base_score={score} must be in (0, 1) for {objective_name}")
        return math.log(score) - math.log1p(-score)
    if objective_name == "count:poisson":
        if score <= 0.0:
            raise ParameterError(f"base_score={score} must be > 0 for count:poisson")
        return math.log(score)
    return score


def score_from_margin(objective_name: str, margin: float) -> float:
    """Margin -> output space (the inverse of :func:`margin_from_score`)."""
    margin = float(margin)
    if objective_name in _LOGISTIC:
        return float(_sigmoid(np.float64(margin)))
    if objective_name == "count:poisson":
        return math.exp(margin)
    return margin
