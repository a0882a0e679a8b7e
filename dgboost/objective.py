"""Training objectives: gradients, hessians, link functions and intercepts.

Every objective follows XGBoost's formulas (the names are XGBoost's). Inputs are float32;
the arithmetic is done in float64 and the gradients come back as float32 ``(n, k)`` arrays,
already multiplied by the row weights. Whatever is combined across ranks (intercepts,
adaptive leaf values) is computed *exactly*: sums are taken in 64-bit fixed point and
quantiles by bisection over integer counts, so the result is the same for any
partitioning of the rows (docs/design.md §1.3 "Integers make it exact").

Gradients and transforms are written once against an array module ``xp`` chosen from the
margin (:func:`dgboost._array.array_module`): NumPy margins give NumPy results, CuPy
margins give CuPy results computed on the device with the same float64 formulas. The two
agree to float32 rounding: CuPy's float64 ``tanh``/``exp`` (CUDA's libm) may differ from
NumPy's by one unit in the last place, which rounding to float32 almost always hides.
Ranking and custom objectives compute on the host (see their docstrings). Validation and
intercepts (``validate_labels``, ``prepare``, ``base_score``, ``base_margins``) take host or
device arrays: the checks and weighted means run where the labels are (the same answers, as
integer sums and comparisons are exact); the other intercepts copy them to the host first.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from ._array import array_module, as_rows, to_host
from ._lambdarank import lambdarank_gradient
from ._links import margin_from_score, score_from_margin
from .backend import array_backend
from .comm.base import LocalComm
from .errors import DGBoostValueError, ParameterError
from .exact import exact_sum, weighted_quantile
from .params import TrainParams

__all__ = [
    "Objective",
    "SquaredError",
    "PseudoHuberError",
    "AbsoluteError",
    "RegLogistic",
    "BinaryLogistic",
    "BinaryLogitRaw",
    "PoissonRegression",
    "GammaRegression",
    "TweedieRegression",
    "BinaryHinge",
    "QuantileError",
    "CoxRegression",
    "SoftprobMultiClass",
    "SoftmaxMultiClass",
    "LambdaRankPairwise",
    "LambdaRankNDCG",
    "CustomObjective",
    "get_objective",
    "margin_from_score",
    "score_from_margin",
    "exact_sum",
    "weighted_quantile",
    "lambdarank_gradient",
]

_EPS = 1e-16  # XGBoost's floor for hessians (kRtEps-like)
_PROB_CLIP = 1e-6  # logistic intercepts stay inside (1e-6, 1 - 1e-6)
_PRIOR_FLOOR = 1e-6  # smallest class prior used for a multiclass intercept


# ---------------------------------------------------------------------------- helpers
def _sigmoid(x):
    """Logistic function in float64, in the array module of ``x``."""
    xp = array_module(x)
    x = xp.asarray(x, dtype=xp.float64)
    return 0.5 * (1.0 + xp.tanh(0.5 * x))  # overflow-free logistic function


def _check_weight(weight, n: int) -> None:
    if weight is None:
        return
    xp = array_module(weight)
    weight = xp.asarray(weight)
    if weight.shape != (n,):
        raise DGBoostValueError(f"weight has shape {weight.shape}, expected ({n},): one weight per row")
    if not xp.isfinite(weight).all():
        raise DGBoostValueError("weight contains NaN or inf")
    if (weight < 0).any():
        raise DGBoostValueError(f"weight must be non-negative; found {float(weight.min())}")


def _describe_bad(label, bad) -> str:
    """A few of the ``bad`` labels for an error message (host or device arrays)."""
    label, bad = to_host(label), to_host(bad)
    idx = np.flatnonzero(bad)
    shown = ", ".join(f"label[{i}]={float(label[i])!r}" for i in idx[:3])
    return f"{len(idx)} bad label(s), e.g. {shown}"


# ----------------------------------------------------------------------- base objective
#: Rows whose gradients the generic :meth:`Objective.gradient` computes at once.
_GRADIENT_CHUNK_ROWS = 1 << 20


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
        self.comm = LocalComm()  # every rank's communicator once prepare() has run

    def n_outputs(self) -> int:
        """Trees per boosting round."""
        return 1

    def prepare(self, label, weight, group_ptr, comm) -> None:
        """Call once before boosting, on every rank: keeps ``comm``, over which objectives
        whose gradients need a reduction over all rows (``reg:quantileerror``'s residual
        scale) reduce; without it they reduce over the local rows."""
        self.comm = comm

    # -- validation ----------------------------------------------------------------------
    def validate_labels(self, label, weight, group_ptr) -> None:
        """Raise :class:`DGBoostValueError` naming what is wrong with labels/weights/groups.

        ``label`` and ``weight`` may be NumPy or CuPy arrays: device ones are checked on their
        device, only the answers (and an error's examples) come to the host."""
        xp = array_module(label)
        label = xp.asarray(label)
        if label.ndim != 1:
            raise DGBoostValueError(f"{self.name}: label must be 1-D, got shape {label.shape}")
        bad = ~xp.isfinite(label)
        if bad.any():
            raise DGBoostValueError(f"{self.name}: labels must be finite; {_describe_bad(label, bad)}")
        _check_weight(weight, len(label))
        self._check_label_values(label)

    def _check_label_values(self, label) -> None:
        """Raise for label values the objective cannot take; ``label`` NumPy or CuPy."""

    # -- intercept -----------------------------------------------------------------------
    def base_score(self, label, weight, comm) -> float:
        """Intercept in output space estimated from the labels (weighted mean by default)."""
        return self._weighted_mean(label, weight, comm, default=0.0)

    @staticmethod
    def _weighted_mean(label, weight, comm, default: float) -> float:
        if weight is None:
            # a column of ones sums to the row count exactly, so the mean is the same without
            # it, and without the float64 copies of the labels (this stage took less than half
            # the time so: docs/performance-notes.md)
            (s_y,) = exact_sum(label, comm)
            n = int(comm.allreduce_sum(np.array([len(label)], np.int64))[0])
            return float(s_y / n) if n > 0 else default
        # where the labels are: exact_sum gives the same bits for device columns
        xp = array_module(label, weight)
        y = xp.asarray(label, xp.float64)
        w = xp.asarray(weight, xp.float64)
        sw_y, sw = exact_sum(xp.stack([w * y, w], axis=1), comm)
        return float(sw_y / sw) if sw > 0 else default

    def _newton_intercept(self, label, weight, comm) -> float:
        """The margin of one Newton step from margin 0 on the row-weighted gradients
        (``_grad_hess``, ``_row_weight``): XGBoost's intercept where it fits one, as for
        ``reg:pseudohubererror`` and, with ``scale_pos_weight`` other than 1, the logistic ones."""
        # on the host: CUDA's float64 exp / tanh may differ from NumPy's in the last place
        y = np.asarray(to_host(label), np.float64)
        weight = to_host(weight)
        g, h = self._grad_hess(np.zeros_like(y), y, np)
        w = self._row_weight(weight, y, np)
        if w is None:
            w = np.ones_like(y)
        sg, sh = exact_sum(np.stack([w * g, w * h], axis=1), comm)
        return float(-sg / max(sh, 1e-6)) + 0.0  # + 0.0: no -0.0

    def margin_from_score(self, score: float) -> float:
        """Inverse link: output-space ``score`` -> margin."""
        return margin_from_score(self.name, score)

    def base_margins(self, label, weight, comm) -> np.ndarray:
        """The intercept of every output as a margin; float64 (n_outputs,)."""
        margin = self.margin_from_score(self.base_score(label, weight, comm))
        return np.full(self.n_outputs(), margin, dtype=np.float64)

    # -- gradients -----------------------------------------------------------------------
    def gradient(self, margin, label, weight, group_ptr, iteration: int):
        """Gradients and hessians, multiplied by the row weights.

        Parameters
        ----------
        margin : ndarray or cupy.ndarray of float32, shape (n, k)
        label : ndarray or cupy.ndarray of float32, shape (n,)
        weight : ndarray or cupy.ndarray of float32, shape (n,), or None
        group_ptr : ndarray of int64, shape (n_groups + 1,), or None   (host; ranking only)
        iteration : int

        Returns
        -------
        grad, hess : float32 arrays of shape (n, k), in the array module of ``margin``
            (labels and weights are moved to it if they live elsewhere).
        """
        xp = array_module(margin)
        n = len(label)
        margin = as_rows(xp.asarray(margin), n)
        label = xp.asarray(label)
        weight = None if weight is None else xp.asarray(weight)
        grad = xp.empty((n, 1), np.float32)
        hess = xp.empty((n, 1), np.float32)
        # in row chunks: the float64 temporaries of _grad_hess stay a few tens of MB at any n
        # (on a GPU they were most of the training's peak memory); each row's arithmetic is
        # the same
        for start in range(0, n, _GRADIENT_CHUNK_ROWS):
            rows = slice(start, start + _GRADIENT_CHUNK_ROWS)
            m = xp.asarray(margin[rows, 0], xp.float64)
            y = xp.asarray(label[rows], xp.float64)
            g, h = self._grad_hess(m, y, xp)
            w = self._row_weight(None if weight is None else weight[rows], y, xp)
            if w is not None:
                g, h = self._weighted(g, h, w, xp)
            grad[rows, 0] = g.astype(np.float32)
            hess[rows, 0] = h.astype(np.float32)
        return grad, hess

    def _grad_hess(self, m, y, xp):  # pragma: no cover - abstract
        """Unweighted float64 (n,) gradient and hessian from float64 (n,) margins and labels."""
        raise NotImplementedError

    def _row_weight(self, weight, y, xp):
        return None if weight is None else xp.asarray(weight, xp.float64)

    def _weighted(self, g, h, w, xp):
        """Gradient and hessian of rows with weights ``w`` (float64 (n,) each)."""
        return g * w, h * w

    def transform(self, margin):
        """Margin (n, k) float32 -> prediction: float32 (n,) for one output, same array module."""
        xp = array_module(margin)
        m = xp.asarray(margin, np.float32)
        return as_rows(m, m.shape[0])[:, 0].copy()

    def eval_transform(self, margin):
        """What metrics see; equals :meth:`transform` except for ``multi:softmax`` and
        ``binary:logitraw`` (probabilities, see their docstrings). Same array module as
        ``margin``."""
        return self.transform(margin)

    def leaf_values(self, residual, weight, leaf_of_row, n_leaves: int, comm) -> np.ndarray:
        """Per-leaf refit for adaptive objectives; see :class:`AbsoluteError`."""
        raise NotImplementedError(f"{self.name} does not re-fit leaves")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class SquaredError(Objective):
    """``reg:squarederror``: loss ``(m - y)^2 / 2``; intercept = weighted mean."""

    name, default_metric = "reg:squarederror", "rmse"

    def _grad_hess(self, m, y, xp):
        return m - y, xp.ones_like(m)


class PseudoHuberError(Objective):
    """``reg:pseudohubererror``: loss ``d^2 (sqrt(1 + ((m - y)/d)^2) - 1)``, d = huber_slope.

    The intercept is XGBoost's: one Newton step from margin 0 (``-G / max(H, 1e-6)``).
    """

    name, default_metric = "reg:pseudohubererror", "mphe"

    def _grad_hess(self, m, y, xp):
        z = m - y
        slope = float(self.params.huber_slope)
        scale = 1.0 + (z / slope) ** 2
        scale_sqrt = xp.sqrt(scale)
        return z / scale_sqrt, 1.0 / (scale * scale_sqrt)

    def base_score(self, label, weight, comm) -> float:
        return self._newton_intercept(label, weight, comm)


class AbsoluteError(Objective):
    """``reg:absoluteerror``: gradient ``sign(m - y)``, hessian 1, leaves re-fitted to the
    median of ``label - margin`` (XGBoost 1.7-3.3 semantics; XGBoost 3.4 replaced this by a
    smooth majorisation that needs a global reduction inside the gradient).

    The intercept is the exact median of the labels (unweighted: interpolated; weighted:
    lower weighted median), as XGBoost computes it on one worker.
    """

    name, default_metric, adaptive_leaves = "reg:absoluteerror", "mae", True

    def _grad_hess(self, m, y, xp):
        return xp.sign(m - y), xp.ones_like(m)

    def base_score(self, label, weight, comm) -> float:
        y, weight = np.asarray(to_host(label), np.float32), to_host(weight)
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

    ``scale_pos_weight`` multiplies the weight of rows whose label is exactly 1. The
    intercept, as XGBoost 3.4's: the weighted label mean; with ``scale_pos_weight`` other
    than 1, the sigmoid of one Newton step from margin 0 on the re-weighted gradients.
    """

    name, default_metric = "reg:logistic", "rmse"

    def _check_label_values(self, label):
        bad = (label < 0) | (label > 1)
        if bad.any():
            raise DGBoostValueError(f"{self.name}: labels must be in [0, 1]; {_describe_bad(label, bad)}")

    def _grad_hess(self, m, y, xp):
        p = _sigmoid(m)
        return p - y, xp.maximum(p * (1.0 - p), _EPS)

    def gradient(self, margin, label, weight, group_ptr, iteration: int):
        # the same float64 arithmetic as _grad_hess, fused into one pass by the backend of the
        # margins' device (on a million rows the NumPy version spends most of its time on
        # temporaries)
        n = len(label)
        return array_backend(margin).logistic_gradient(
            as_rows(margin, n)[:, 0], label, weight, float(self.params.scale_pos_weight)
        )

    def _row_weight(self, weight, y, xp):
        spw = float(self.params.scale_pos_weight)
        if spw == 1.0:
            return super()._row_weight(weight, y, xp)
        w = xp.ones_like(y) if weight is None else xp.asarray(weight, xp.float64)
        return xp.where(y == 1.0, w * spw, w)

    def base_score(self, label, weight, comm) -> float:
        if float(self.params.scale_pos_weight) != 1.0:
            score = 1.0 / (1.0 + math.exp(-self._newton_intercept(label, weight, comm)))
        else:
            score = self._weighted_mean(label, weight, comm, 0.5)
        return float(np.clip(score, _PROB_CLIP, 1 - _PROB_CLIP))

    def transform(self, margin):
        return _sigmoid(super().transform(margin)).astype(np.float32)


class BinaryLogistic(RegLogistic):
    """``binary:logistic``: as ``reg:logistic`` with metric logloss."""

    name, default_metric = "binary:logistic", "logloss"


class BinaryLogitRaw(RegLogistic):
    """``binary:logitraw``: logistic loss, predictions are raw margins.

    As XGBoost 3.4, the intercept is the weighted label mean used directly as a margin
    (identity link); with ``scale_pos_weight`` other than 1, one Newton step from margin 0.
    Unlike XGBoost, metrics see ``sigmoid(margin)`` (so ``error`` thresholds the margin at 0
    and ``logloss`` is meaningful); XGBoost applies them to raw margins.
    """

    name, default_metric = "binary:logitraw", "logloss"

    def base_score(self, label, weight, comm) -> float:
        if float(self.params.scale_pos_weight) != 1.0:
            return self._newton_intercept(label, weight, comm)
        return self._weighted_mean(label, weight, comm, 0.0)

    def transform(self, margin):
        return Objective.transform(self, margin)

    def eval_transform(self, margin):
        return _sigmoid(Objective.transform(self, margin)).astype(np.float32)


class _LogLink(Objective):
    """Objectives with a log link (Poisson, gamma, Tweedie): predictions are ``exp(margin)``
    and the intercept is the weighted label mean, as XGBoost estimates it."""

    def base_score(self, label, weight, comm) -> float:
        return max(self._weighted_mean(label, weight, comm, 1.0), _PROB_CLIP)

    def transform(self, margin):
        m = super().transform(margin)
        return array_module(m).exp(m.astype(np.float64)).astype(np.float32)


class PoissonRegression(_LogLink):
    """``count:poisson``: gradient ``exp(m) - y``, hessian ``exp(m + max_delta_step)``.

    ``max_delta_step`` defaults to 0.7 for this objective (set by ``parse_params``, as
    XGBoost's learner does); the same value also bounds every leaf step of the trees.
    """

    name, default_metric = "count:poisson", "poisson-nloglik"

    def _check_label_values(self, label):
        bad = label < 0
        if bad.any():
            raise DGBoostValueError(f"{self.name}: labels must be non-negative counts; {_describe_bad(label, bad)}")

    def _grad_hess(self, m, y, xp):
        mds = float(self.params.max_delta_step)
        return xp.exp(m) - y, xp.exp(m + mds)


class BinaryHinge(Objective):
    """``binary:hinge``: hinge loss on labels 0/1 (taken as -1/+1), as XGBoost: where
    ``s m < 1`` (``s = 2y - 1``) gradient ``-s`` and hessian 1, else gradient 0 and the
    smallest normal float32 as hessian; predictions are 1 where the margin is positive, else
    0. There is no intercept (base_score 0)."""

    name, default_metric = "binary:hinge", "error"
    _check_label_values = RegLogistic._check_label_values  # labels in [0, 1], as logistic

    def _grad_hess(self, m, y, xp):
        s = 2.0 * y - 1.0
        inside = m * s < 1.0
        return xp.where(inside, -s, 0.0), xp.where(inside, 1.0, float(np.finfo(np.float32).tiny))

    def _weighted(self, g, h, w, xp):
        # XGBoost weighs the gradient and the hessian inside the margin; outside, the
        # hessian is FLT_MIN whatever the weight (weighted, it would be subnormal in float32)
        tiny = float(np.finfo(np.float32).tiny)
        return g * w, xp.where(h == tiny, h, h * w)

    def base_score(self, label, weight, comm) -> float:
        return 0.0

    def transform(self, margin):
        m = super().transform(margin)
        return (m > 0).astype(np.float32)


class GammaRegression(_LogLink):
    """``reg:gamma``: gamma deviance with a log link, gradient ``1 - y exp(-m)``, hessian
    ``y exp(-m)``; labels must be positive."""

    name, default_metric = "reg:gamma", "gamma-deviance"

    def _check_label_values(self, label):
        bad = label <= 0
        if bad.any():
            raise DGBoostValueError(f"{self.name}: labels must be positive; {_describe_bad(label, bad)}")

    def _grad_hess(self, m, y, xp):
        e = y * xp.exp(-m)
        return 1.0 - e, e


class TweedieRegression(_LogLink):
    """``reg:tweedie``: Tweedie deviance with a log link and variance power ``rho``
    (``tweedie_variance_power``, in [1, 2)): gradient ``-y e^((1-rho)m) + e^((2-rho)m)``,
    hessian ``-(1-rho) y e^((1-rho)m) + (2-rho) e^((2-rho)m)``; labels must be non-negative."""

    name = "reg:tweedie"

    def __init__(self, params: TrainParams):
        super().__init__(params)
        self.rho = float(params.tweedie_variance_power)
        self.default_metric = f"tweedie-nloglik@{self.rho:g}"

    def _check_label_values(self, label):
        bad = label < 0
        if bad.any():
            raise DGBoostValueError(f"{self.name}: labels must be non-negative; {_describe_bad(label, bad)}")

    def _grad_hess(self, m, y, xp):
        a = xp.exp((1.0 - self.rho) * m)
        b = xp.exp((2.0 - self.rho) * m)
        return -y * a + b, -y * (1.0 - self.rho) * a + (2.0 - self.rho) * b


#: XGBoost 3.4's fixed constants of its smoothed quantile score (float32 there): the
#: smoothing bandwidth relative to the residual scale, and the floor of tanh(x) / x
_QUANTILE_SMOOTHING = float(np.float32(0.04))
_QUANTILE_MIN_RATIO = float(np.float32(3e-4))
_QUANTILE_CURVATURE = float(np.float32(0.5) / np.float32(_QUANTILE_SMOOTHING))  # 1 / (2 c), float32


class QuantileError(Objective):
    """``reg:quantileerror``: one output (tree per round) per quantile of ``quantile_alpha``,
    as XGBoost 3.4 fits it.

    XGBoost 3.4 no longer re-fits leaves to quantiles of the residuals: it fits a smoothed
    pinball loss by majorisation. Each round and output ``j`` has a residual scale over all
    rows of all ranks, ``S_j = (sum_i w_i sqrt|r_ij| / sum_i w_i)^2`` with
    ``r_ij = m_ij - y_i`` (kept as float32, as XGBoost keeps it), and with
    ``x = r / (c S_j)``, ``c = 0.04``::

        grad = w S_j / 2 (tanh(x) + 1 - 2 alpha_j)
        hess = w / (2 c) max(tanh(x) / x, 3e-4)      (tanh(x) / x = 1 at x = 0)

    and both are 0 where ``S_j = 0``. The intercept of output ``j`` is the (weighted)
    ``alpha_j`` quantile of the labels (:func:`weighted_quantile`, exact over ranks).
    Predictions of several quantiles are sorted within each row, as XGBoost's prediction
    transform sorts them (so they never cross); metrics see them sorted too. The quantiles
    are used as float32 numbers, as XGBoost stores them.
    """

    name, default_metric = "reg:quantileerror", "quantile"

    def __init__(self, params: TrainParams):
        super().__init__(params)
        if params.quantile_alpha is None:
            raise ParameterError(
                "objective 'reg:quantileerror' needs quantile_alpha: a quantile in "
                "[0, 1] or an ascending list of them, e.g. quantile_alpha=[0.1, 0.5, 0.9]"
            )
        self.alpha = tuple(float(np.float32(a)) for a in params.quantile_alpha)

    def n_outputs(self) -> int:
        return len(self.alpha)

    def base_margins(self, label, weight, comm) -> np.ndarray:
        y, weight = np.asarray(to_host(label), np.float32), to_host(weight)
        rows = np.zeros(len(y), np.int64)
        q = np.array([weighted_quantile(y, weight, rows, 1, comm, a)[0] for a in self.alpha])
        return np.where(np.isnan(q), 0.0, q)  # no rows with weight anywhere: intercept 0

    def base_score(self, label, weight, comm) -> float:
        return float(self.base_margins(label, weight, comm)[0])

    def gradient(self, margin, label, weight, group_ptr, iteration: int):
        xp = array_module(margin)
        n, k = len(label), self.n_outputs()
        margin = xp.asarray(margin).reshape(n, k)
        label = xp.asarray(label)
        weight = None if weight is None else xp.asarray(weight)
        scale = self._residual_scale(margin, label, weight, xp)
        alpha = xp.asarray(self.alpha, dtype=xp.float64)
        grad = xp.empty((n, k), np.float32)
        hess = xp.empty((n, k), np.float32)
        for start in range(0, n, _GRADIENT_CHUNK_ROWS):  # bounded float64 temporaries
            rows = slice(start, start + _GRADIENT_CHUNK_ROWS)
            r = xp.asarray(margin[rows], xp.float64) - xp.asarray(label[rows], xp.float64)[:, None]
            g, h = _smoothed_pinball(r, scale, alpha, xp)
            if weight is not None:
                w = xp.asarray(weight[rows], xp.float64)[:, None]
                g, h = g * w, h * w
            grad[rows] = g.astype(np.float32)
            hess[rows] = h.astype(np.float32)
        return grad, hess

    def _residual_scale(self, margin, label, weight, xp):
        """``S_j`` of every output, float64 (k,) in module ``xp``, from exact sums over all ranks.

        Parameters
        ----------
        margin : float32 array of shape (n, k)
        label : float32 array of shape (n,)
        weight : float32 array of shape (n,), or None
        xp : module
        """
        n = len(label)
        w = xp.ones(n) if weight is None else xp.asarray(weight, xp.float64)
        root = xp.sqrt(xp.abs(xp.asarray(margin, xp.float64) - xp.asarray(label, xp.float64)[:, None]))
        sums = exact_sum(xp.concatenate([root * w[:, None], w[:, None]], axis=1), self.comm)
        sw = sums[-1]
        scale = (sums[:-1] / sw) ** 2 if sw != 0 else np.zeros(len(sums) - 1)
        return xp.asarray(scale.astype(np.float32), dtype=xp.float64)  # XGBoost keeps S as float

    def transform(self, margin):
        xp = array_module(margin)
        m = xp.asarray(margin, np.float32)
        m = as_rows(m, m.shape[0])
        if m.shape[1] == 1:
            return m[:, 0].copy()
        return xp.sort(m, axis=1)  # non-crossing quantiles, as XGBoost's PredTransform


def _smoothed_pinball(r, scale, alpha, xp):
    """XGBoost 3.4's smoothed pinball gradient and curvature (see :class:`QuantileError`).

    Parameters
    ----------
    r : float64 array of shape (n, k)
        Residuals ``margin - label``.
    scale, alpha : float64 arrays of shape (k,)
        ``S_j`` and the quantiles.
    xp : module

    Returns
    -------
    grad, hess : float64 arrays of shape (n, k), unweighted; 0 in outputs whose scale is 0.
    """
    live = scale > 0
    x = r / (_QUANTILE_SMOOTHING * xp.where(live, scale, 1.0))
    t = xp.tanh(x)
    # tanh(x) / x -> 1 at 0; elsewhere finite (|x| > 0)
    ratio = xp.where(x == 0, 1.0, t / xp.where(x == 0, 1.0, x))
    grad = 0.5 * scale * (t + 1.0 - 2.0 * alpha)
    hess = _QUANTILE_CURVATURE * xp.maximum(ratio, _QUANTILE_MIN_RATIO)
    return xp.where(live, grad, 0.0), xp.where(live, hess, 0.0)


class CoxRegression(_LogLink):
    """``survival:cox``: Cox proportional hazards, the negative partial log-likelihood with
    Breslow's risk sets, as XGBoost: ``|label|`` is the time, a positive label an observed
    event and a negative one a right-censored time. Margins are log hazard ratios,
    predictions ``exp(margin)``.

    Rows are taken in increasing ``|label|`` (a stable sort: ties in row order, as XGBoost's
    ``LabelAbsSort``). The risk sum of a row is the sum of ``exp(m)`` over the rows at or
    after its time (all of its tie group); walking the sorted rows,
    ``r_i = sum of 1 / risk_j`` and ``s_i = sum of 1 / risk_j^2`` over the events ``j`` up to
    and including row ``i`` (within a tie group only those before it: XGBoost's order), and::

        grad_i = exp(m_i) r_i - [y_i > 0]        hess_i = exp(m_i) r_i - exp(m_i)^2 s_i

    times the row weight. As in XGBoost, the total that the risk sums start from adds the
    float32 ``exp`` of each margin while the sums subtracted from it are float64, so the last
    risk sums carry the same rounding as XGBoost's. The intercept is XGBoost's: one Newton
    step from margin 0, ``exp(-G / max(H, 1e-6))``.

    A label of 0 is refused: its sign cannot say whether the event was observed (XGBoost
    takes it as censored at time 0). The risk sets span every row, so training is on one
    rank only (XGBoost's workers would each use their own rows' risk sets). Device arrays:
    the sort and the sums run in the margin's array module.
    """

    name, default_metric = "survival:cox", "cox-nloglik"

    def _check_label_values(self, label):
        bad = label == 0
        if bad.any():
            raise DGBoostValueError(
                f"{self.name}: labels must be non-zero (a positive time is an observed "
                f"event, a negative one a censored time); {_describe_bad(label, bad)}"
            )

    def prepare(self, label, weight, group_ptr, comm) -> None:
        if comm.world_size > 1:
            raise DGBoostValueError(
                f"{self.name} trains on one worker only: its risk sets span every row (got {comm.world_size} workers)"
            )
        super().prepare(label, weight, group_ptr, comm)

    def base_score(self, label, weight, comm) -> float:
        y, weight = np.asarray(to_host(label), np.float32), to_host(weight)
        g, h = _cox_gradient(np.zeros(len(y), np.float32), y, np)
        w = np.ones(len(y)) if weight is None else np.asarray(weight, np.float64)
        sg, sh = exact_sum(np.stack([w * g, w * h], axis=1), comm)
        return math.exp(-sg / max(sh, 1e-6))

    def gradient(self, margin, label, weight, group_ptr, iteration: int):
        xp = array_module(margin)
        n = len(label)
        g, h = _cox_gradient(as_rows(xp.asarray(margin), n)[:, 0], xp.asarray(label), xp)
        if weight is not None:
            w = xp.asarray(weight, xp.float64)
            g, h = g * w, h * w
        return g.astype(np.float32)[:, None], h.astype(np.float32)[:, None]


def cox_risk_sums(time_sorted, exp_sorted, total, xp):
    """Breslow risk sums of rows sorted by time: ``total`` less the sum over the rows of
    earlier times (a tie group shares its first row's sum).

    Parameters
    ----------
    time_sorted : array of shape (n,), ascending
    exp_sorted : float64 array of shape (n,)
        The summed quantity (``exp(margin)``, or predictions) in the same order.
    total : float
        What the sums start from (the sum over every row).
    xp : module

    Returns
    -------
    float64 array of shape (n,)
    """
    before = xp.cumsum(exp_sorted) - exp_sorted  # sum over the rows sorted before each
    first_of_tie = xp.searchsorted(time_sorted, time_sorted, side="left")
    return total - before[first_of_tie]


def _cox_gradient(margin, label, xp):
    """Unweighted Cox gradient and hessian (see :class:`CoxRegression`).

    Parameters
    ----------
    margin, label : float32 arrays of shape (n,), in module ``xp``
    xp : module

    Returns
    -------
    grad, hess : float64 arrays of shape (n,), in the rows' original order.
    """
    label = xp.asarray(label, xp.float32)
    time = xp.abs(label)
    order = xp.argsort(time, kind="stable")
    m = xp.asarray(margin, xp.float32)[order].astype(xp.float64)
    e = xp.exp(m)
    # XGBoost adds std::exp of the float margins (float32) into the starting total
    total = float(e.astype(np.float32).astype(xp.float64).sum())
    risk = cox_risk_sums(time[order], e, total, xp)
    event = label[order] > 0
    r = xp.cumsum(xp.where(event, 1.0 / risk, 0.0))
    s = xp.cumsum(xp.where(event, 1.0 / (risk * risk), 0.0))
    g_sorted = e * r - event.astype(xp.float64)
    h_sorted = e * r - e * e * s
    g, h = xp.empty_like(g_sorted), xp.empty_like(h_sorted)
    g[order], h[order] = g_sorted, h_sorted
    return g, h


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
        bad = (label < 0) | (label >= k) | (label != array_module(label).floor(label))
        if bad.any():
            raise DGBoostValueError(
                f"{self.name}: labels must be integers in 0..{k - 1} (num_class={k}); {_describe_bad(label, bad)}"
            )

    def base_score(self, label, weight, comm) -> float:
        return 0.5

    def base_margins(self, label, weight, comm) -> np.ndarray:
        k = self.n_outputs()
        # the class totals where the labels are: on a GPU the one-hot table is summed there
        # (exact_sum gives the host's bits); on the host it took 14-18 ms of covtype-like's
        # set-up (581K x 8), and a first large job waited 1.6-2.1 s for exact_sum's host
        # kernels to compile
        xp = array_module(label, weight)
        y = xp.asarray(label).astype(np.int64)
        w = xp.ones(len(y)) if weight is None else xp.asarray(weight, dtype=xp.float64)
        onehot = xp.where(y[:, None] == xp.arange(k)[None, :], w[:, None], 0.0)
        totals = exact_sum(onehot, comm)
        if not totals.sum() > 0:
            return np.zeros(k)
        # an absent class gets a small prior rather than a -inf margin
        log_prior = np.log(np.maximum(totals / totals.sum(), _PRIOR_FLOOR))
        return log_prior - log_prior.mean()

    @staticmethod
    def _softmax(margin):
        """Row-wise softmax in float64, (n, k) -> (n, k), a new array in the array module of
        ``margin``. In place on one float64 copy: each (n, k) temporary is 37 MB on
        covtype's 581K rows x 8 classes, and on a GPU they set the round's peak memory."""
        xp = array_module(margin)
        z = xp.asarray(margin).astype(xp.float64)  # a copy, whatever the dtype
        z -= z.max(axis=1, keepdims=True)
        xp.exp(z, out=z)
        z /= z.sum(axis=1, keepdims=True)
        return z

    def gradient(self, margin, label, weight, group_ptr, iteration: int):
        xp = array_module(margin)
        n, k = len(label), self.n_outputs()
        p = self._softmax(xp.asarray(margin).reshape(n, k))
        # h = max(2 p (1 - p), eps) and g = p - onehot(label) in place, with the bits of
        # those formulas: (1 - p) p 2 rounds as 2 p (1 - p) wherever it is at least eps
        # (doubling is exact for normal numbers), and p - 0 is p
        h = 1.0 - p
        h *= p
        h *= 2.0
        xp.maximum(h, _EPS, out=h)
        g = p
        g[xp.arange(n), xp.asarray(label).astype(np.int64)] -= 1.0
        if weight is not None:
            w = xp.asarray(weight, xp.float64)[:, None]
            g *= w
            h *= w
        g32 = g.astype(np.float32)
        del g, p  # before h's copy: the round's peak on a GPU
        return g32, h.astype(np.float32)

    def transform(self, margin):
        m = array_module(margin).asarray(margin)
        return self._softmax(as_rows(m, m.shape[0])).astype(np.float32)

    def eval_transform(self, margin):
        return SoftprobMultiClass.transform(self, margin)


class SoftmaxMultiClass(SoftprobMultiClass):
    """``multi:softmax``: as softprob, but predictions are the arg-max class (float32)."""

    name = "multi:softmax"

    def transform(self, margin):
        xp = array_module(margin)
        m = xp.asarray(margin)
        m = as_rows(m, m.shape[0])
        return xp.argmax(m, axis=1).astype(np.float32)  # first maximum (NumPy and CuPy), as XGBoost


class _LambdaRank(Objective):
    """LambdaMART (XGBoost 2+/3.x ``rank:*``), gradients per query group.

    Pairs: ``lambdarank_pair_method="topk"`` (default) uses every pair with at least one
    document in the model's current top ``lambdarank_num_pair_per_sample`` (default 32):
    no randomness. ``"mean"`` samples that many partners per document; the sample is a
    hash of (seed, iteration, global group index, document, draw), never global RNG state.
    Set :attr:`group_offset` to the global index of this rank's first query group so the
    sample does not depend on the partitioning. Weights are per group (a per-row weight
    must be constant within each group). No position debiasing.

    Device arrays: the gradient is computed on the host (the Numba kernel of
    ``_lambdarank.py``): margins, labels and weights are copied to the host and the result
    is uploaded to the margin's array module, so it equals the NumPy result exactly.
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
        label, weight = to_host(label), to_host(weight)  # groups are host code
        super().validate_labels(label, None, None)
        n = len(label)
        if group_ptr is None:
            raise DGBoostValueError(f"{self.name} needs query groups: pass group= (or qid=) to the DMatrix")
        gp = np.asarray(group_ptr)
        if gp.ndim != 1 or len(gp) < 1 or gp[0] != 0 or gp[-1] != n or (np.diff(gp) < 0).any():
            raise DGBoostValueError(
                f"{self.name}: group_ptr must rise from 0 to the number of rows "
                f"({n}); got {gp[:5]}...{gp[-1:] if len(gp) else ''}"
            )
        if weight is not None:
            self._group_weight(weight, gp, check=True)

    def _check_label_values(self, label):
        if self._ndcg and self.exp_gain:
            bad = (label < 0) | (label != array_module(label).floor(label)) | (label > 31)
            if bad.any():
                raise DGBoostValueError(
                    f"{self.name}: with ndcg_exp_gain=True relevance labels must be integers in 0..31; "
                    f"{_describe_bad(label, bad)} (set ndcg_exp_gain=False for other gains)"
                )

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
                raise DGBoostValueError(
                    f"ranking weights are per query group, but the rows of group "
                    f"{np.searchsorted(group_ptr, row, 'right') - 1} differ"
                )
            w = np.where(sizes > 0, first, 0.0)
        elif len(w) != n_groups:
            raise DGBoostValueError(
                f"ranking weight has {len(w)} entries; expected one per query group ({n_groups}) or one per row ({n})"
            )
        if check and (not np.isfinite(w).all() or (w < 0).any()):
            raise DGBoostValueError("ranking (group) weights must be finite and non-negative")
        return w

    def prepare(self, label, weight, group_ptr, comm) -> None:
        """Agree on XGBoost's weight normalisation ``n_groups / sum(group weights)`` over all
        ranks. Call once before boosting; without it the local groups define it."""
        super().prepare(label, weight, group_ptr, comm)
        self.weight_norm = self._weight_norm(weight, group_ptr, comm)

    def _weight_norm(self, weight, group_ptr, comm) -> float:
        if weight is None or group_ptr is None:
            return 1.0
        gw = self._group_weight(to_host(weight), np.asarray(group_ptr))
        s_n, s_w = exact_sum(np.stack([np.ones(len(gw)), gw], axis=1), comm)
        return float(s_n / s_w) if s_w > 0 else 1.0

    def base_score(self, label, weight, comm) -> float:
        return 0.0  # lambda gradients sum to zero in every group: the Newton intercept is 0

    def gradient(self, margin, label, weight, group_ptr, iteration: int):
        if group_ptr is None:
            raise DGBoostValueError(f"{self.name} needs query groups (group_ptr is None)")
        xp = array_module(margin)
        # host fallback: the pair loops are a Numba kernel (see the class docstring)
        margin, label, weight = to_host(margin), to_host(label), to_host(weight)
        gp = np.asarray(group_ptr, np.int64)
        n_groups = len(gp) - 1
        gw = np.ones(n_groups) if weight is None else self._group_weight(weight, gp)
        norm = self.weight_norm
        if norm is None:  # prepare() was not called: normalise over the local groups
            norm = self._weight_norm(weight, gp, LocalComm())
        g, h = lambdarank_gradient(
            as_rows(np.asarray(margin, np.float32), len(label))[:, 0],
            np.asarray(label, np.float32),
            gp,
            gw * norm,
            topk=self.topk,
            num_pair=self.num_pair,
            ndcg=self._ndcg,
            exp_gain=self.exp_gain,
            score_normalization=self.score_normalization,
            normalization=self.normalization,
            seed=int(self.params.seed),
            iteration=int(iteration),
            group_offset=int(self.group_offset),
            nthread=int(self.params.nthread),
        )
        return xp.asarray(g[:, None]), xp.asarray(h[:, None])


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

    Device arrays: ``fn`` always receives NumPy margins (as XGBoost passes them); the margins
    are copied to the host and ``grad``/``hess`` are uploaded to the margin's array module.
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
        xp = array_module(margin)
        margin = to_host(margin)  # host fallback, see the class docstring
        n, k = np.shape(margin)[0], self._k
        m = np.asarray(margin, np.float32).reshape(n, k)
        out = self.fn(m[:, 0].copy() if k == 1 else m.copy(), self.dtrain)
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise DGBoostValueError("a custom objective must return a pair (grad, hess)")
        res = []
        for what, arr in zip(("grad", "hess"), out):
            a = np.asarray(to_host(arr), dtype=np.float32)  # the user may return CuPy arrays
            if a.size != n * k:
                raise DGBoostValueError(
                    f"custom objective returned {what} of shape {a.shape}; expected "
                    f"{(n,) if k == 1 else (n, k)} ({n} rows x {k} outputs)"
                )
            if not np.isfinite(a).all():
                raise DGBoostValueError(f"custom objective returned non-finite values in {what}")
            res.append(xp.asarray(a.reshape(n, k)))
        return res[0], res[1]

    def transform(self, margin):
        m = array_module(margin).asarray(margin, np.float32)
        return as_rows(m, m.shape[0])[:, 0].copy() if self._k == 1 else as_rows(m, m.shape[0]).copy()


_REGISTRY: dict[str, type[Objective]] = {
    cls.name: cls
    for cls in (
        SquaredError,
        PseudoHuberError,
        AbsoluteError,
        RegLogistic,
        BinaryLogistic,
        BinaryLogitRaw,
        PoissonRegression,
        GammaRegression,
        TweedieRegression,
        BinaryHinge,
        QuantileError,
        CoxRegression,
        SoftprobMultiClass,
        SoftmaxMultiClass,
        LambdaRankPairwise,
        LambdaRankNDCG,
    )
}


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
