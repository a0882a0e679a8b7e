"""One validated parameter object with XGBoost-compatible names and aliases.

Unknown names raise :class:`~dgboost.errors.ParameterError` with the closest valid
name; values are type-checked and range-checked before any data is touched.

Every entry point (``train``, the Dask driver, the scikit-learn estimators, the CLI) turns
the user's parameters into one :class:`TrainParams` with :func:`parse_params` and hands that
object on: ``parse_params`` of an already validated ``TrainParams`` returns it as it is.
``max_bin`` has one rule, :func:`check_max_bin`, wherever it is given (parameters,
``DMatrix``, ``QuantileDMatrix``, their Dask versions); parameter names have one alias table,
:data:`ALIASES`.
"""

from __future__ import annotations

import difflib
import math
import numbers
import types
import warnings
from dataclasses import dataclass, fields
from typing import Any, Callable, Mapping

from .errors import ParameterError

__all__ = [
    "TrainParams",
    "parse_params",
    "normalize_device",
    "check_max_bin",
    "canonical_name",
    "is_parameter_name",
    "coerce_value",
    "ALIASES",
    "MAX_BIN",
    "PARAMETER_NAMES",
    "OBJECTIVES",
    "METRICS",
]

OBJECTIVES = (
    "reg:squarederror",
    "reg:logistic",
    "reg:pseudohubererror",
    "reg:absoluteerror",
    "binary:logistic",
    "binary:logitraw",
    "multi:softprob",
    "multi:softmax",
    "count:poisson",
    "reg:gamma",
    "reg:tweedie",
    "binary:hinge",
    "reg:quantileerror",
    "survival:cox",
    "rank:pairwise",
    "rank:ndcg",
)
METRICS = (
    "rmse",
    "mae",
    "logloss",
    "error",
    "auc",
    "mlogloss",
    "merror",
    "ndcg",
    "map",
    "poisson-nloglik",
    "mphe",
    "gamma-nloglik",
    "gamma-deviance",
    "tweedie-nloglik",
    "quantile",
    "cox-nloglik",
)

#: Every alias of a training parameter -> its canonical (XGBoost) name: XGBoost's own
#: aliases, scikit-learn's argument names and LightGBM's names with the same meaning. The one
#: table every entry point resolves names with (through :func:`parse_params` or
#: :func:`canonical_name`).
ALIASES: Mapping[str, str] = types.MappingProxyType(
    {
        "learning_rate": "eta",
        "reg_lambda": "lambda",
        "lambda_l2": "lambda",
        "reg_alpha": "alpha",
        "lambda_l1": "alpha",
        "min_split_loss": "gamma",
        "random_state": "seed",
        "n_jobs": "nthread",
        "nthreads": "nthread",
        "max_leaf_nodes": "max_leaves",
    }
)

# names other libraries use that have no exact equivalent here: refused with this reason
_NO_EQUIVALENT = {
    "min_child_samples": "LightGBM's minimum row count of a leaf; dgboost bounds a leaf's hessian sum "
    "with 'min_child_weight'",
}

# parameters that XGBoost users pass and that make no difference to this engine
_ACCEPTED_AND_IGNORED = {
    "tree_method",
    "booster",
    "verbosity",
    "silent",
    "validate_parameters",
    "disable_default_eval_metric",
    "predictor",
    "updater",
    "process_type",
    "multi_strategy",
    "enable_categorical",
    "use_rmm",
    "importance_type",
}

#: The largest ``max_bin``. The CPU bin matrix stores a feature's bin index as uint16 and
#: marks a missing value with the dtype's maximum, 65535; ``max_bin`` cuts give local bins
#: ``0 .. max_bin - 1``, so 65535 is the most bins that stay apart from the missing marker.
#: (The GPU's packed matrix has no such limit: one bound for every device keeps a model the
#: same wherever it trains.)
MAX_BIN = 65535


def check_max_bin(value: Any) -> int:
    """``max_bin`` checked by the one rule every entry point uses.

    Parameters
    ----------
    value : int
        Histogram bins per feature, from training parameters, a ``DMatrix``, a
        ``QuantileDMatrix``, their Dask versions, an estimator or the CLI. Integral floats
        (``256.0``) are accepted; text is not (:func:`parse_params` converts the text of
        config files before calling this).

    Returns
    -------
    int
        ``value`` as a Python int in ``[2, MAX_BIN]``.

    Raises
    ------
    ParameterError
        For anything else, always with the same message.
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not float(value).is_integer()
        or not 2 <= value <= MAX_BIN
    ):
        raise ParameterError(
            f"max_bin must be an integer >= 2 and <= {MAX_BIN}, got {value!r}: a feature's "
            f"bin indices are stored as uint16, and {MAX_BIN} marks a missing value"
        )
    return int(value)


def canonical_name(name: str) -> str:
    """The canonical (XGBoost) name of a parameter name or of one of its :data:`ALIASES`.

    Parameters
    ----------
    name : str
        A parameter name as a user spells it.

    Returns
    -------
    str
        The canonical name; a name that is not an alias is returned unchanged (not checked:
        :func:`parse_params` refuses unknown names).
    """
    return ALIASES.get(name, name)


def is_parameter_name(name: str) -> bool:
    """Whether ``name`` is a training parameter, an alias of one, or an XGBoost parameter that
    is accepted and ignored.

    Parameters
    ----------
    name : str

    Returns
    -------
    bool
    """
    return name in _FIELD_NAMES or name in ALIASES or name in _ACCEPTED_AND_IGNORED


def normalize_device(device: Any) -> str:
    """The canonical spelling of a device string (:func:`dgboost.device.parse_device`).

    Parameters
    ----------
    device : str
        ``"cpu"``, ``"cuda"``, ``"cuda:N"``, or XGBoost's aliases ``"gpu"`` / ``"gpu:N"``
        (N a non-negative integer ordinal); case and surrounding blanks are ignored.

    Returns
    -------
    str
        ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.

    Raises
    ------
    ParameterError
        For anything else (``"tpu"``, ``"cuda:x"``, ``"cuda:-1"``, a non-string...).
    """
    from .device import parse_device  # the one device parser

    return str(parse_device(device))


def _check_range(
    name: str, value: float, low: float | None, high: float | None, low_open: bool = False, high_open: bool = False
) -> None:
    if isinstance(value, float) and math.isnan(value):
        raise ParameterError(f"parameter {name!r} is NaN")
    if low is not None and (value < low or (low_open and value == low)):
        bound = ">" if low_open else ">="
        raise ParameterError(f"parameter {name!r}={value!r} is out of range: expected {bound} {low}")
    if high is not None and (value > high or (high_open and value == high)):
        bound = "<" if high_open else "<="
        raise ParameterError(f"parameter {name!r}={value!r} is out of range: expected {bound} {high}")


@dataclass
class TrainParams:
    """Every training parameter, validated. Field names are XGBoost's canonical names.

    ``objective`` may be a callable ``(preds, dtrain) -> (grad, hess)``; ``eval_metric``
    a list of metric names (``"ndcg@10"`` style suffixes allowed) or a callable.

    Made once per entry point by :func:`parse_params` and handed on as it is (it pickles, so
    a Dask job ships it to its workers). The object remembers that it was validated: giving
    it to :func:`parse_params` again costs nothing, while setting any field makes the next
    :func:`parse_params` validate it again.
    """

    objective: str | Callable[..., Any] = "reg:squarederror"
    eval_metric: list[str | Callable[..., Any]] | None = None
    eta: float = 0.3
    gamma: float = 0.0
    max_depth: int = 6
    max_leaves: int = 0
    grow_policy: str = "depthwise"
    min_child_weight: float = 1.0
    max_delta_step: float = 0.0
    subsample: float = 1.0
    colsample_bytree: float = 1.0
    colsample_bylevel: float = 1.0
    colsample_bynode: float = 1.0
    # trees grown per output group and round from the same gradients (a random forest when
    # > 1, with subsample / colsample_bynode < 1); each tree's leaves are scaled by eta / P
    num_parallel_tree: int = 1
    reg_lambda: float = 1.0  # "lambda" is a Python keyword
    alpha: float = 0.0
    max_bin: int = 256
    # "hist" (quantile bins, the default) or "exact" (every distinct value a candidate,
    # depthwise only: dgboost/exact_greedy.py)
    tree_method: str = "hist"
    # categorical features (docs/design.md §11): one-hot splits below this many categories,
    # else partition splits with at most max_cat_threshold categories scanned onto one side
    max_cat_to_onehot: int = 4
    max_cat_threshold: int = 64
    base_score: float | None = None
    seed: int = 0
    nthread: int = 0
    num_class: int = 0
    scale_pos_weight: float = 1.0
    huber_slope: float = 1.0
    tweedie_variance_power: float = 1.5
    quantile_alpha: tuple[float, ...] | None = None  # the quantiles of reg:quantileerror (see _quantile_alpha)
    interaction_constraints: Any = None  # tuple of feature groups (dgboost/constraints.py)
    monotone_constraints: Any = None  # tuple of -1/0/1 per feature, or {name: sign} (dgboost/constraints.py)
    lambdarank_pair_method: str = "topk"
    lambdarank_num_pair_per_sample: int = 0
    ndcg_exp_gain: bool = True
    device: str = "cpu"
    # rows in the quantile sketch's hashed sample: 2**20 covers every row of sets up to a
    # million rows, as XGBoost sketches them (2**18 left a Year-like 515K-row set's RMSE
    # +0.70% from XGBoost's on the benchmark draw, +0.11% with every row)
    sketch_sample_rows: int = 1 << 20

    def __setattr__(self, name: str, value: Any) -> None:
        # a changed field has not been checked: the next parse_params validates again
        object.__setattr__(self, "_validated", False)
        object.__setattr__(self, name, value)

    @property
    def validated(self) -> bool:
        """Whether :meth:`validate` passed and no field was set since."""
        return bool(self.__dict__.get("_validated", False))

    def validate(self) -> "TrainParams":
        """Check every field (types, ranges, combinations), normalising some in place.

        Returns
        -------
        TrainParams
            ``self``, marked as validated.

        Raises
        ------
        ParameterError
            For the first field that is out of range or a combination that is refused.
        """
        if self.objective == "reg:linear":
            warnings.warn(
                "objective 'reg:linear' is XGBoost's deprecated name for 'reg:squarederror'; using 'reg:squarederror'",
                DeprecationWarning,
                stacklevel=3,
            )
            self.objective = "reg:squarederror"
        if not callable(self.objective) and self.objective not in OBJECTIVES:
            raise ParameterError(_suggest("objective", str(self.objective), OBJECTIVES))
        _check_range("eta", self.eta, 0.0, None)
        _check_range("gamma", self.gamma, 0.0, None)
        _check_range("max_depth", self.max_depth, 0, 64)
        _check_range("max_leaves", self.max_leaves, 0, None)
        if self.grow_policy not in ("depthwise", "lossguide"):
            raise ParameterError(_suggest("grow_policy", self.grow_policy, ("depthwise", "lossguide")))
        if self.max_depth == 0 and self.max_leaves == 0:
            raise ParameterError("max_depth=0 (unlimited) needs max_leaves > 0 to bound the tree")
        if self.max_depth == 0 and self.grow_policy == "depthwise":
            raise ParameterError("max_depth=0 is only allowed with grow_policy='lossguide'")
        _check_range("min_child_weight", self.min_child_weight, 0.0, None)
        _check_range("max_delta_step", self.max_delta_step, 0.0, None)
        _check_range("subsample", self.subsample, 0.0, 1.0, low_open=True)
        _check_range("num_parallel_tree", self.num_parallel_tree, 1, None)
        for name in ("colsample_bytree", "colsample_bylevel", "colsample_bynode"):
            _check_range(name, getattr(self, name), 0.0, 1.0, low_open=True)
        _check_range("lambda", self.reg_lambda, 0.0, None)
        _check_range("alpha", self.alpha, 0.0, None)
        self.max_bin = check_max_bin(self.max_bin)
        _check_tree_method(self)
        _check_range("max_cat_to_onehot", self.max_cat_to_onehot, 1, None)
        _check_range("max_cat_threshold", self.max_cat_threshold, 1, None)
        _check_range("num_class", self.num_class, 0, None)
        _check_range("scale_pos_weight", self.scale_pos_weight, 0.0, None, low_open=True)
        _check_range("huber_slope", self.huber_slope, 0.0, None, low_open=True)
        _check_range("tweedie_variance_power", self.tweedie_variance_power, 1.0, 2.0, high_open=True)
        if self.quantile_alpha is not None:
            self.quantile_alpha = _quantile_alpha(self.quantile_alpha)
        from .constraints import parse_interaction_constraints, parse_monotone_constraints

        self.interaction_constraints = parse_interaction_constraints(self.interaction_constraints)
        self.monotone_constraints = parse_monotone_constraints(self.monotone_constraints)
        _check_range("nthread", self.nthread, 0, None)
        _check_range("sketch_sample_rows", self.sketch_sample_rows, 1024, None)
        if self.lambdarank_pair_method not in ("topk", "mean"):
            raise ParameterError(_suggest("lambdarank_pair_method", self.lambdarank_pair_method, ("topk", "mean")))
        if self.base_score is not None:
            if not math.isfinite(self.base_score):
                raise ParameterError(f"base_score must be finite, got {self.base_score!r}")
        if self.objective in ("multi:softprob", "multi:softmax") and self.num_class < 2:
            raise ParameterError(f"objective {self.objective!r} needs num_class >= 2, got num_class={self.num_class}")
        self.device = normalize_device(self.device)
        object.__setattr__(self, "_validated", True)
        return self

    @property
    def n_groups(self) -> int:
        """Number of trees per boosting round (output groups)."""
        return self.num_class if self.objective in ("multi:softprob", "multi:softmax") else 1

    def to_dict(self) -> dict[str, Any]:
        """The parameters as XGBoost spells them (JSON-able; callables dropped)."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if callable(value):
                continue
            if f.name == "tree_method" and value == "hist":
                continue  # the default, left out so that hist models keep their bytes
            if f.name == "num_parallel_tree" and value == 1:
                # XGBoost's default, left out so that a model of one tree per round keeps the
                # bytes it had before forests (a model without the key has one tree a round)
                continue
            if (f.name, value) in (("max_cat_to_onehot", 4), ("max_cat_threshold", 64)):
                # XGBoost's defaults, left out so that models keep the bytes they had before
                # categorical features
                continue
            if isinstance(value, tuple):
                # as JSON gives it back: a saved model's meta compares equal
                value = [list(v) if isinstance(v, tuple) else v for v in value]
            out["lambda" if f.name == "reg_lambda" else f.name] = value
        return out


_FIELD_NAMES = {("lambda" if f.name == "reg_lambda" else f.name): f.name for f in fields(TrainParams)}
#: The canonical (XGBoost) names of the training parameters (``"lambda"``, not ``reg_lambda``).
PARAMETER_NAMES: frozenset[str] = frozenset(_FIELD_NAMES)
_INT_FIELDS = {
    "max_depth",
    "max_leaves",
    "max_bin",
    "max_cat_to_onehot",
    "max_cat_threshold",
    "seed",
    "nthread",
    "num_class",
    "num_parallel_tree",
    "lambdarank_num_pair_per_sample",
    "sketch_sample_rows",
}
# by field name, and "lambda" by its parameter name too: parse_params coerces by parameter name
_FLOAT_FIELDS = {f.name for f in fields(TrainParams) if f.type in ("float", "float | None")} | {"lambda"}


def _tree_method(value: Any) -> str:
    """XGBoost's ``tree_method`` spellings as dgboost's two methods: ``"hist"`` (also for
    None, ``"auto"``, ``"gpu_hist"`` and, with a warning, ``"approx"``) or ``"exact"``."""
    if value in ("hist", "auto", "gpu_hist", None):
        return "hist"
    if value == "exact":
        return "exact"
    if value == "approx":
        warnings.warn(
            "tree_method='approx': dgboost has no 'approx' tree method and uses "
            "'hist' (histograms of up to max_bin bins per feature) instead",
            UserWarning,
            stacklevel=3,
        )
        return "hist"
    raise ParameterError(f"tree_method={value!r} is not supported: use 'hist' (the default) or 'exact'")


def _check_tree_method(p: "TrainParams") -> None:
    """``tree_method`` and what exact greedy growth refuses (as XGBoost's ``exact``: depthwise
    growth to a positive ``max_depth``, no leaf budget)."""
    if p.tree_method not in ("hist", "exact"):
        raise ParameterError(_suggest("tree_method", str(p.tree_method), ("hist", "exact")))
    if p.tree_method != "exact":
        return
    if p.grow_policy != "depthwise":
        raise ParameterError(
            f"tree_method='exact' grows depthwise only (as XGBoost's exact); grow_policy={p.grow_policy!r} "
            "needs tree_method='hist'"
        )
    if p.max_leaves > 0:
        raise ParameterError(
            f"tree_method='exact' has no leaf budget: max_leaves={p.max_leaves} needs tree_method='hist' "
            "(or bound the tree with max_depth)"
        )


def _quantile_alpha(value) -> tuple:
    """``quantile_alpha`` as XGBoost 3.4 accepts it: one quantile or a non-empty list of them,
    each in [0, 1], in ascending order.

    Parameters
    ----------
    value : float, sequence of float, or str
        A number, a list/tuple/array of numbers, or their text (``"0.5"``, ``"[0.1,0.9]"``:
        config files and XGBoost models carry the list as text).

    Returns
    -------
    tuple of float
        The quantiles, one model output each.

    Raises
    ------
    ParameterError
        For an empty list, a value that is not a number, outside [0, 1] (NaN included) or
        a list that is not sorted ascending (XGBoost's checks; equal neighbours are allowed).
    """
    if isinstance(value, str):
        text = value.strip().strip("[]()")
        try:
            value = [float(v) for v in text.split(",") if v.strip()]
        except ValueError:
            raise ParameterError(
                f"parameter 'quantile_alpha' must be a number or a list of numbers, got {value!r}"
            ) from None
    items = list(value) if isinstance(value, (list, tuple)) or hasattr(value, "__array__") else [value]
    if any(isinstance(v, bool) or not isinstance(v, numbers.Real) for v in items):
        raise ParameterError(f"parameter 'quantile_alpha' must be a number or a list of numbers, got {value!r}")
    alpha = tuple(float(v) for v in items)
    if not alpha:
        raise ParameterError("parameter 'quantile_alpha' is an empty list: give at least one quantile")
    bad = [a for a in alpha if not 0.0 <= a <= 1.0]
    if bad:
        raise ParameterError(
            f"parameter 'quantile_alpha'={list(alpha)!r}: every quantile must be in [0, 1], got {bad[0]!r}"
        )
    if any(b < a for a, b in zip(alpha, alpha[1:])):
        raise ParameterError(
            f"parameter 'quantile_alpha'={list(alpha)!r} must be sorted in ascending order (as XGBoost requires)"
        )
    return alpha


def _suggest(what: str, given: str, choices) -> str:
    close = difflib.get_close_matches(str(given), list(choices), n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else f"; expected one of {sorted(choices)}"
    return f"unknown {what} {given!r}{hint}"


def _coerce(name: str, value: Any) -> Any:
    if name == "max_bin":
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)  # config files may carry numbers as text
        return check_max_bin(value)
    if name in _INT_FIELDS:
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return int(value)  # config files may carry numbers as text
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not float(value).is_integer():
            raise ParameterError(f"parameter {name!r} must be an integer, got {value!r}")
        return int(value)
    if name in _FLOAT_FIELDS:
        if value is None and name == "base_score":
            return None
        if isinstance(value, bool):
            raise ParameterError(f"parameter {name!r} must be a number, got {value!r}")
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ParameterError(f"parameter {name!r} must be a number, got {value!r}") from None
    return value


def coerce_value(name: str, value: Any) -> Any:
    """``value`` as the :class:`TrainParams` field of parameter ``name`` holds it (for values read
    from a configuration, e.g. XGBoost's ``save_config`` text).

    Parameters
    ----------
    name : str
        A canonical parameter name (one of :data:`PARAMETER_NAMES`).
    value : object
        The value, possibly as text.

    Returns
    -------
    object
        An int for integer parameters, a float for real ones, ``value`` unchanged otherwise.

    Raises
    ------
    ParameterError
        When the value cannot be converted.
    """
    return _coerce(_FIELD_NAMES.get(name, name), value)


def parse_params(params: Mapping[str, Any] | TrainParams | None) -> TrainParams:
    """Validate a user's parameter dict (XGBoost names or aliases) into :class:`TrainParams`.

    Parameters
    ----------
    params : mapping of str to object, TrainParams, or None
        Parameter names (canonical or from :data:`ALIASES`) and values; None means every
        default. A :class:`TrainParams` that was validated and not changed since is returned
        as it is, without checking it again (an entry point parses once and hands the object
        on); one that was changed is validated in place.

    Returns
    -------
    TrainParams
        Validated.

    Raises
    ------
    ParameterError
        For an unknown name (with the closest valid name), a wrong type or a value
        out of range.
    """
    if isinstance(params, TrainParams):
        return params if params.validated else params.validate()
    params = dict(params or {})
    kwargs: dict[str, Any] = {}
    metrics: list = []
    for key, value in params.items():
        if not isinstance(key, str):
            raise ParameterError(f"parameter names must be strings, got {key!r}")
        if key in _ACCEPTED_AND_IGNORED:
            if key == "tree_method":
                kwargs["tree_method"] = _tree_method(value)
            if key == "multi_strategy" and value not in ("one_output_per_tree", None):
                raise ParameterError(
                    f"multi_strategy={value!r} is not supported: dgboost grows one "
                    "tree per output ('one_output_per_tree')"
                )
            if key == "booster" and value not in ("gbtree", None):
                raise ParameterError(f"booster={value!r} is not supported: dgboost trains 'gbtree' only")
            continue
        if key in _NO_EQUIVALENT:
            raise ParameterError(f"parameter {key!r} has no dgboost equivalent ({_NO_EQUIVALENT[key]})")
        canonical = canonical_name(key)
        if canonical == "eval_metric":
            metrics.extend([value] if isinstance(value, str) or callable(value) else list(value))
            continue
        if canonical not in _FIELD_NAMES:
            raise ParameterError(_suggest("parameter", key, list(_FIELD_NAMES) + list(ALIASES)))
        field_name = _FIELD_NAMES[canonical]
        if field_name in kwargs:
            raise ParameterError(f"parameter {canonical!r} given twice (as {key!r} and an alias)")
        kwargs[field_name] = _coerce(canonical, value)
    if metrics:
        for m in metrics:
            if not callable(m) and str(m).split("@")[0].rstrip("-") not in METRICS:
                raise ParameterError(_suggest("eval_metric", str(m), METRICS))
        kwargs["eval_metric"] = metrics
    if kwargs.get("objective") == "count:poisson" and "max_delta_step" not in kwargs:
        # XGBoost's learner sets this for Poisson regression: it safeguards both the
        # hessian and the size of every leaf step
        kwargs["max_delta_step"] = 0.7
    return TrainParams(**kwargs).validate()
