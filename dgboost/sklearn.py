"""scikit-learn estimators: :class:`DGBRegressor`, :class:`DGBClassifier`, :class:`DGBRanker`.

They follow scikit-learn's conventions (constructor arguments are stored as given; all
work happens in ``fit``; ``clone``/``get_params``/``set_params`` work; fitted attributes
end in ``_``) and XGBoost's sklearn wrapper names, so code written for ``XGBRegressor``
/ ``XGBClassifier`` / ``XGBRanker`` runs unchanged::

    from dgboost.sklearn import DGBClassifier
    clf = DGBClassifier(n_estimators=200, max_depth=4, early_stopping_rounds=10)
    clf.fit(X_train, y_train, eval_set=[(X_valid, y_valid)])
    clf.predict_proba(X_test)         # uses the best iteration, as XGBoost does

Keyword arguments the constructor does not name are passed to :func:`dgboost.train` as
extra training parameters (unknown names are rejected by :func:`dgboost.params.parse_params`
at ``fit`` time, with the closest valid name).
"""

from __future__ import annotations

import difflib
import inspect
import json
import os
import warnings
from typing import Any, Callable, Sequence

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.exceptions import DataConversionWarning, NotFittedError
from sklearn.utils.multiclass import type_of_target

from .booster import Booster
from .data import DMatrix, rows_for_model
from .errors import DGBoostTypeError, DGBoostValueError, ParameterError
from .params import TrainParams, canonical_name, is_parameter_name, parse_params
from .training import train

__all__ = [
    "DGBModel",
    "DGBRegressor",
    "DGBClassifier",
    "DGBRanker",
    "DGBRFRegressor",
    "DGBRFClassifier",
    "XGBModel",
    "XGBRegressor",
    "XGBClassifier",
    "XGBRanker",
    "XGBRFRegressor",
    "XGBRFClassifier",
]

# attribute (a string in the booster's attributes) that keeps what the wrapper knows about a
# model across save_model/load_model, like XGBoost's "scikit_learn" attribute
_SKLEARN_ATTR = "scikit_learn"

# constructor arguments that are training parameters, sent under their canonical names
# (dgboost.params.ALIASES: learning_rate -> eta, reg_alpha -> alpha, reg_lambda -> lambda)
_PARAM_ARGS = (
    "max_depth",
    "max_leaves",
    "max_bin",
    "grow_policy",
    "learning_rate",
    "gamma",
    "min_child_weight",
    "max_delta_step",
    "subsample",
    "colsample_bytree",
    "colsample_bylevel",
    "colsample_bynode",
    "reg_alpha",
    "reg_lambda",
    "base_score",
    "device",
    "verbosity",
    "max_cat_to_onehot",
    "max_cat_threshold",
)
# constructor arguments used by the wrapper itself, never sent as training parameters
_WRAPPER_ONLY = {
    "n_estimators",
    "missing",
    "early_stopping_rounds",
    "callbacks",
    "importance_type",
    "objective",
    "eval_metric",
    "n_jobs",
    "random_state",
    "enable_categorical",
    "feature_types",
}


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return (1.0 / (1.0 + np.exp(-np.asarray(x, np.float64)))).astype(np.float32)


def _softmax(m: np.ndarray) -> np.ndarray:
    m = np.asarray(m, np.float64)
    e = np.exp(m - m.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


def _as_1d(name: str, y) -> np.ndarray:
    """A target/label container as a 1-D NumPy array (a single column is accepted)."""
    if y is None:
        raise DGBoostValueError(f"this estimator requires y to be passed, but the target {name} is None")
    if hasattr(y, "to_numpy"):
        y = y.to_numpy()
    y = np.asarray(y)
    if y.dtype.kind == "c":
        # scikit-learn's wording, which its estimator checks (check_complex_data) expect
        raise DGBoostValueError(f"Complex data not supported: the target {name} has dtype {y.dtype}")
    if y.ndim == 2 and y.shape[1] == 1:
        # scikit-learn's wording (check_supervised_y_2d looks for it)
        warnings.warn(
            f"A column-vector {name} was passed when a 1d array was expected. Please change "
            f"the shape of {name} to (n_samples, ), for example using ravel(); it is used as "
            f"{name}.ravel()",
            DataConversionWarning,
            stacklevel=3,
        )
        y = y[:, 0]
    if y.ndim != 1:
        raise DGBoostValueError(f"{name} must be 1-D (one target per row), got shape {y.shape}")
    return y


def _check_X(X) -> None:
    """Shape and dtype checks with scikit-learn's wording, before any conversion."""
    shape = getattr(X, "shape", None)
    if shape is None:
        return
    if getattr(getattr(X, "dtype", None), "kind", None) == "c":
        raise DGBoostValueError(f"Complex data not supported: X has dtype {X.dtype}")
    if len(shape) == 1:
        raise DGBoostValueError(
            f"Expected a 2-D array, got a 1-D array of shape {tuple(shape)} instead. "
            "Reshape your data with X.reshape(-1, 1) for a single feature or "
            "X.reshape(1, -1) for a single sample."
        )
    if len(shape) == 2 and shape[1] == 0:
        raise DGBoostValueError(f"0 feature(s) (shape={tuple(shape)}) while a minimum of 1 is required.")
    if len(shape) == 2 and shape[0] == 0:
        raise DGBoostValueError(f"0 sample(s) (shape={tuple(shape)}) while a minimum of 1 is required.")


def _check_weight(sample_weight) -> None:
    if sample_weight is None:
        return
    w = np.asarray(sample_weight, dtype=np.float64)
    if w.size and np.isfinite(w).all() and not (w > 0).any():
        raise DGBoostValueError("sample_weight is zero for every row: at least one weight must be positive")


def _numeric_object_array(X):
    """An object-dtype NumPy array as float64, as scikit-learn estimators accept it.

    Parameters
    ----------
    X : object
        Anything; only NumPy arrays of dtype object are converted.

    Returns
    -------
    object
        ``X`` itself, or its float64 copy. A cell that is not a number raises NumPy's
        ``TypeError`` ("float() argument must be a string or a real number..."), which is
        what scikit-learn's ``check_dtype_object`` expects.
    """
    if isinstance(X, np.ndarray) and X.dtype == object:
        return X.astype(np.float64)
    return X


def _take_rows(X, idx: np.ndarray):
    if hasattr(X, "iloc"):
        return X.iloc[idx]
    if hasattr(X, "tocsr") and hasattr(X, "nnz"):
        return X.tocsr()[idx]
    return np.asarray(X)[idx]


def _n_rows(X) -> int:
    return int(X.shape[0]) if hasattr(X, "shape") else len(X)


class DGBModel(BaseEstimator):
    """Gradient-boosted trees with scikit-learn's estimator interface (a regressor by default).

    Parameters
    ----------
    n_estimators : int, default 100
        Number of boosting rounds.
    max_depth : int, optional
        Maximum tree depth (None: 6).
    max_leaves : int, optional
        Maximum leaves per tree (``grow_policy="lossguide"``).
    max_bin : int, optional
        Histogram bins per feature (None: 256).
    grow_policy : {"depthwise", "lossguide"}, optional
    learning_rate : float, optional
        Shrinkage ``eta`` (None: 0.3).
    n_jobs : int, optional
        CPU threads (None or -1: all cores).
    gamma, min_child_weight, max_delta_step, subsample, colsample_bytree, colsample_bylevel,
    colsample_bynode, reg_alpha, reg_lambda, base_score : optional
        XGBoost's parameters of the same names; None keeps the engine's default.
    random_state : int, numpy RandomState/Generator or None
        The training seed (sampling); None means 0.
    missing : float, default NaN
        Value that marks a missing feature.
    objective : str or callable, optional
        A dgboost/XGBoost objective name, or ``obj(y_true, y_pred) -> (grad, hess)``
        (``y_pred`` are raw margins).
    eval_metric : str, list of str, or callable, optional
        Metric(s) evaluated on ``eval_set``; a callable is ``metric(y_true, y_pred) -> float``.
        The last one drives early stopping.
    early_stopping_rounds : int, optional
        Stop when the last metric of the last ``eval_set`` has not improved for this many
        rounds; then ``predict`` uses the best iteration.
    device : {"cpu", "cuda", "cuda:N"}, optional
    callbacks : list of TrainingCallback, optional
    verbosity : int, optional
        Accepted for XGBoost compatibility.
    importance_type : str, optional
        ``feature_importances_`` kind: "gain" (default), "weight", "cover", "total_gain",
        "total_cover".
    enable_categorical : bool, default True
        Take DataFrame ``category`` columns (pandas, cuDF) and Arrow dictionary columns as
        categorical features (XGBoost 3.4.1's default); False makes them an error.
    feature_types : list of str, optional
        Per feature ``"q"`` (numerical) or ``"c"`` (categorical: codes given as numbers, for
        NumPy input); see :class:`dgboost.DMatrix` and docs/categorical.md.
    max_cat_to_onehot, max_cat_threshold : int, optional
        Categorical splits (XGBoost's parameters; None: 4 and 64): one-hot splits for a
        feature with fewer than ``max_cat_to_onehot`` categories, else partition splits with
        at most ``max_cat_threshold`` categories on one side.
    **kwargs
        Further training parameters (e.g. ``scale_pos_weight``, ``num_parallel_tree``).
    """

    _default_objective: str | None = "reg:squarederror"

    def __init__(
        self,
        *,
        n_estimators: int = 100,
        max_depth: int | None = None,
        max_leaves: int | None = None,
        max_bin: int | None = None,
        grow_policy: str | None = None,
        learning_rate: float | None = None,
        n_jobs: int | None = None,
        gamma: float | None = None,
        min_child_weight: float | None = None,
        max_delta_step: float | None = None,
        subsample: float | None = None,
        colsample_bytree: float | None = None,
        colsample_bylevel: float | None = None,
        colsample_bynode: float | None = None,
        reg_alpha: float | None = None,
        reg_lambda: float | None = None,
        base_score: float | None = None,
        random_state: int | np.random.RandomState | np.random.Generator | None = None,
        missing: float = np.nan,
        objective: str | Callable[..., Any] | None = None,
        eval_metric: str | Callable[..., Any] | Sequence[str | Callable[..., Any]] | None = None,
        early_stopping_rounds: int | None = None,
        device: str | None = None,
        callbacks: list[Any] | None = None,
        verbosity: int | None = None,
        importance_type: str | None = None,
        enable_categorical: bool = True,
        feature_types: Sequence[str] | None = None,
        max_cat_to_onehot: int | None = None,
        max_cat_threshold: int | None = None,
        **kwargs: Any,
    ) -> None:
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.max_leaves = max_leaves
        self.max_bin = max_bin
        self.grow_policy = grow_policy
        self.learning_rate = learning_rate
        self.n_jobs = n_jobs
        self.gamma = gamma
        self.min_child_weight = min_child_weight
        self.max_delta_step = max_delta_step
        self.subsample = subsample
        self.colsample_bytree = colsample_bytree
        self.colsample_bylevel = colsample_bylevel
        self.colsample_bynode = colsample_bynode
        self.reg_alpha = reg_alpha
        self.reg_lambda = reg_lambda
        self.base_score = base_score
        self.random_state = random_state
        self.missing = missing
        self.objective = objective
        self.eval_metric = eval_metric
        self.early_stopping_rounds = early_stopping_rounds
        self.device = device
        self.callbacks = callbacks
        self.verbosity = verbosity
        self.importance_type = importance_type
        self.enable_categorical = enable_categorical
        self.feature_types = feature_types
        self.max_cat_to_onehot = max_cat_to_onehot
        self.max_cat_threshold = max_cat_threshold
        for key, value in kwargs.items():  # extra training parameters: plain attributes too
            self._set_extra(key, value)

    def _set_extra(self, key: str, value) -> None:
        if (
            not isinstance(key, str)
            or not key.isidentifier()
            or key.startswith("_")
            or key.endswith("_")
            or hasattr(type(self), key)
        ):
            raise DGBoostValueError(f"{key!r} cannot be a training parameter of {type(self).__name__}")
        setattr(self, key, value)

    def _extra_params(self) -> dict:
        """The training parameters given beyond the named constructor arguments."""
        names = set(self._get_param_names())
        return {k: v for k, v in vars(self).items() if k not in names and not k.startswith("_") and not k.endswith("_")}

    # -- scikit-learn parameter protocol ----------------------------------------------------
    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Constructor arguments, plus the extra training parameters given as ``**kwargs``.

        Parameters
        ----------
        deep : bool
            As scikit-learn's (no nested estimators here).

        Returns
        -------
        dict
            Argument name -> value.
        """
        params = super().get_params(deep)
        params.update(self._extra_params())
        return params

    def set_params(self, **params: Any) -> DGBModel:
        """Set constructor arguments; unknown names become extra training parameters
        (checked at ``fit``).

        Parameters
        ----------
        **params
            Argument or training parameter name -> value.

        Returns
        -------
        DGBModel
            ``self``.
        """
        names = set(self._get_param_names())
        for key, value in params.items():
            if key in names:
                setattr(self, key, value)
            else:
                self._set_extra(key, value)
        return self

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "_Booster")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.sparse = True
        return tags

    # -- building the training call -----------------------------------------------------------
    def _objective_name(self):
        return self.objective if self.objective is not None else self._default_objective

    def _train_params(self) -> dict:
        """The training parameters as a dict (XGBoost names; None values left out), made into
        a :class:`~dgboost.params.TrainParams` once per ``fit``."""
        params: dict[str, Any] = {}
        for arg in _PARAM_ARGS:
            value = getattr(self, arg)
            if value is not None:
                params[canonical_name(arg)] = value
        if self.n_jobs is not None:
            params["nthread"] = 0 if self.n_jobs < 0 else int(self.n_jobs)
        seed = self.random_state
        if isinstance(seed, np.random.RandomState):
            seed = int(seed.randint(np.iinfo(np.int32).max))
        elif isinstance(seed, np.random.Generator):
            seed = int(seed.integers(np.iinfo(np.int32).max))
        if seed is not None:
            params["seed"] = seed
        objective = self._objective_name()
        if objective is not None and not callable(objective):
            params["objective"] = objective
        metrics = self._metric_list()
        names = [m for m in metrics if not callable(m)]
        if names:
            params["eval_metric"] = names
        for key, value in self._extra_params().items():
            _refuse_misspelt_argument(key, self._get_param_names())
            # an extra under another spelling of a named argument's parameter would override it unseen
            if canonical_name(key) in params:
                raise ParameterError(
                    f"parameter {canonical_name(key)!r} given twice (as {key!r} and a constructor argument)"
                )
            params[key] = value
        return params

    def _metric_list(self) -> list:
        m = self.eval_metric
        if m is None:
            return []
        if isinstance(m, str) or callable(m):
            return [m]
        return list(m)

    def _custom_metric(self):
        """A callable ``eval_metric(y_true, y_pred)`` as train()'s ``custom_metric``."""
        funcs = [m for m in self._metric_list() if callable(m)]
        if not funcs:
            return None
        if len(funcs) > 1:
            raise DGBoostValueError("only one callable eval_metric is supported")
        fn = funcs[0]
        name = getattr(fn, "__name__", "custom")

        def metric(predt, dmat):
            return name, float(fn(dmat.get_label(), predt))

        return metric

    def _custom_objective(self):
        fn = self._objective_name()
        if not callable(fn):
            return None

        def obj(margin, dtrain):
            return fn(dtrain.get_label(), margin)

        return obj

    def _dmatrix(self, X, y=None, weight=None, base_margin=None, group=None, qid=None, ref=None) -> DMatrix:
        _check_X(X)
        _check_weight(weight)
        X = _numeric_object_array(X)
        return DMatrix(
            X,
            label=y,
            weight=weight,
            base_margin=base_margin,
            group=group,
            qid=qid,
            missing=self.missing,
            ref=ref,
            feature_types=self.feature_types,
            enable_categorical=self.enable_categorical,
        )

    def _encode_y(self, y, fitting: bool) -> np.ndarray:
        y = _as_1d("y", y)
        if y.dtype.kind in "USVc":
            raise DGBoostTypeError(f"y has dtype {y.dtype}: {type(self).__name__} needs real numeric targets")
        try:
            return y.astype(np.float64)
        except (TypeError, ValueError):
            raise DGBoostTypeError(
                f"y (dtype {y.dtype}) cannot be converted to numbers: {type(self).__name__} needs numeric targets"
            ) from None

    def _eval_sets(
        self,
        eval_set,
        sample_weight_eval_set,
        base_margin_eval_set,
        train_dm,
        X,
        y,
        sample_weight,
        base_margin,
        groups=None,
    ):
        """``[(DMatrix, "validation_i")]`` from XGBoost's eval_set arguments."""
        if eval_set is None:
            return []
        if not isinstance(eval_set, (list, tuple)):
            raise DGBoostTypeError("eval_set must be a list of (X, y) pairs")
        n = len(eval_set)
        for what, lst in (
            ("sample_weight_eval_set", sample_weight_eval_set),
            ("base_margin_eval_set", base_margin_eval_set),
        ):
            if lst is not None and len(lst) != n:
                raise DGBoostValueError(f"{what} has {len(lst)} entries but eval_set has {n}")
        evals = []
        for i, pair in enumerate(eval_set):
            if not isinstance(pair, (list, tuple)) or len(pair) != 2:
                raise DGBoostTypeError(f"eval_set[{i}] must be an (X, y) pair")
            Xe, ye = pair
            we = None if sample_weight_eval_set is None else sample_weight_eval_set[i]
            be = None if base_margin_eval_set is None else base_margin_eval_set[i]
            ge, qe = groups[i] if groups is not None else (None, None)
            if Xe is X and ye is y and we is sample_weight and be is base_margin and groups is None:
                dm = train_dm
            else:
                dm = self._eval_dmatrix(i, Xe, ye, we, be, ge, qe, train_dm)
            evals.append((dm, f"validation_{i}"))
        return evals

    def _eval_dmatrix(self, i, Xe, ye, we, be, ge, qe, train_dm) -> DMatrix:
        dm = self._dmatrix(Xe, self._encode_y(ye, fitting=False), we, be, ref=train_dm)
        if dm.num_col() != train_dm.num_col():
            raise DGBoostValueError(
                f"eval_set[{i}] has {dm.num_col()} features, the training data has {train_dm.num_col()}"
            )
        return dm

    def _start_model(self, xgb_model):
        if isinstance(xgb_model, DGBModel):
            return xgb_model.get_booster()
        return xgb_model

    def _fit(self, p: TrainParams, train_dm: DMatrix, X, evals, verbose, xgb_model, obj=None) -> DGBModel:
        results: dict = {}
        booster = train(
            p,
            train_dm,
            num_boost_round=self.get_num_boosting_rounds(),
            evals=evals,
            obj=obj if obj is not None else self._custom_objective(),
            custom_metric=self._custom_metric(),
            early_stopping_rounds=self.early_stopping_rounds,
            evals_result=results,
            verbose_eval=verbose,
            xgb_model=self._start_model(xgb_model),
            callbacks=list(self.callbacks or ()),
        )
        self._Booster = booster
        self.evals_result_ = results if evals else {}
        self._set_feature_info(X, train_dm.num_col())
        self._early_stopping_used = self.early_stopping_rounds is not None and bool(evals)
        self._keep_state(booster)
        return self

    def _keep_state(self, booster: Booster) -> None:
        """Write what the wrapper knows (classes, early stopping...) into the booster's attributes."""
        booster.set_attr(**{_SKLEARN_ATTR: json.dumps(self._sklearn_state())})

    def _parsed_params(self, params: dict | None = None) -> TrainParams:
        """The one :class:`~dgboost.params.TrainParams` of a ``fit`` (``params``: the dict, when
        the estimator adds to :meth:`_train_params`, as the classifier does)."""
        return parse_params(self._train_params() if params is None else params)

    def _set_feature_info(self, X, n_features: int) -> None:
        self.n_features_in_ = int(n_features)
        columns = getattr(X, "columns", None)
        if columns is not None and len(columns) and all(isinstance(c, str) for c in columns):
            self.feature_names_in_ = np.asarray(list(columns), dtype=object)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_

    def _sklearn_state(self) -> dict:
        return {
            "estimator": type(self).__name__,
            "early_stopping": bool(self._early_stopping_used),
            "feature_names_in": hasattr(self, "feature_names_in_"),
        }

    def _restore_state(self, state: dict) -> None:
        self._early_stopping_used = bool(state.get("early_stopping", False))

    # -- fitting ------------------------------------------------------------------------------
    def fit(
        self,
        X: Any,
        y: Any,
        *,
        sample_weight: Any = None,
        base_margin: Any = None,
        eval_set: Sequence[tuple[Any, Any]] | None = None,
        sample_weight_eval_set: Sequence[Any] | None = None,
        base_margin_eval_set: Sequence[Any] | None = None,
        verbose: bool | int = False,
        xgb_model: Booster | DGBModel | str | os.PathLike | None = None,
    ) -> DGBModel:
        """Train ``n_estimators`` rounds on ``X``, ``y``.

        Parameters
        ----------
        X : array-like, DataFrame or sparse matrix, shape (n, F)
        y : array-like, shape (n,)
        sample_weight : array-like, shape (n,), optional
        base_margin : array-like, shape (n,) or (n, k), optional
            Starting margin of each row.
        eval_set : list of (X, y), optional
            Evaluated every round as ``validation_0``, ``validation_1``...; see
            :meth:`evals_result`. The last one drives early stopping.
        sample_weight_eval_set, base_margin_eval_set : list, optional
            One entry per ``eval_set`` pair.
        verbose : bool or int
            Print the evaluation every round (True) or every ``verbose`` rounds.
        xgb_model : Booster, fitted estimator, or model path, optional
            Continue training from this model.

        Returns
        -------
        DGBModel
            ``self``, fitted.

        Raises
        ------
        ParameterError
            For a training parameter that is unknown or out of range (checked once per ``fit``,
            before training starts).
        """
        p = self._parsed_params()
        y_enc = self._encode_y(y, fitting=True)
        train_dm = self._dmatrix(X, y_enc, sample_weight, base_margin)
        evals = self._eval_sets(
            eval_set, sample_weight_eval_set, base_margin_eval_set, train_dm, X, y, sample_weight, base_margin
        )
        return self._fit(p, train_dm, X, evals, verbose, xgb_model)

    # -- fitted model -------------------------------------------------------------------------
    def get_booster(self) -> Booster:
        """The underlying :class:`~dgboost.Booster`."""
        if not self.__sklearn_is_fitted__():
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet: call fit() first")
        return self._Booster

    def get_num_boosting_rounds(self) -> int:
        """The boosting rounds ``fit`` trains (``n_estimators``; 1 for a random forest)."""
        return int(self.n_estimators)

    def get_xgb_params(self) -> dict[str, Any]:
        """The training parameters this estimator passes to :func:`dgboost.train`.

        Returns
        -------
        dict
            XGBoost parameter names and values, None values left out.
        """
        return self._train_params()

    @property
    def best_iteration(self) -> int:
        """Round (0-based) with the best evaluation score; only set after early stopping."""
        booster = self.get_booster()
        if not getattr(self, "_early_stopping_used", False):
            raise AttributeError(
                "best_iteration is only defined when early stopping was used (early_stopping_rounds and eval_set)"
            )
        return booster.best_iteration

    @property
    def best_score(self) -> float:
        """Best evaluation score; only set after early stopping."""
        booster = self.get_booster()
        if not getattr(self, "_early_stopping_used", False):
            raise AttributeError(
                "best_score is only defined when early stopping was used (early_stopping_rounds and eval_set)"
            )
        return booster.best_score

    def evals_result(self) -> dict[str, dict[str, list[float]]]:
        """``{"validation_0": {"metric": [per-round values]}, ...}`` of the last ``fit``."""
        self.get_booster()
        result = getattr(self, "evals_result_", None)
        if not result:
            raise DGBoostValueError("no evaluation results: fit was called without eval_set")
        return result

    def _iteration_range(self, iteration_range):
        if iteration_range is None or tuple(iteration_range) == (0, 0):
            if getattr(self, "_early_stopping_used", False):
                booster = self.get_booster()
                try:
                    return (0, booster.best_iteration + 1)
                except AttributeError:
                    return None
            return None
        return tuple(iteration_range)

    def _predict_dmatrix(self, X, base_margin=None) -> DMatrix:
        booster = self.get_booster()
        _check_X(X)
        dm = DMatrix(
            _numeric_object_array(X),
            base_margin=base_margin,
            missing=self.missing,
            feature_types=self.feature_types,
            enable_categorical=self.enable_categorical,
        )
        expected = getattr(self, "n_features_in_", booster.num_features())
        if expected and dm.num_col() != expected:
            raise DGBoostValueError(
                f"X has {dm.num_col()} features, but {type(self).__name__} is expecting {expected} features as input."
            )
        return dm

    def _margin(self, X, base_margin=None, iteration_range=None, validate_features=True):
        dm = self._predict_dmatrix(X, base_margin)
        margin = self._Booster.predict(
            dm,
            output_margin=True,
            validate_features=validate_features,
            iteration_range=self._iteration_range(iteration_range),
        )
        margin = np.asarray(margin)
        return margin.reshape(margin.shape[0], -1)

    def predict(
        self,
        X: Any,
        output_margin: bool = False,
        validate_features: bool = True,
        base_margin: Any = None,
        iteration_range: tuple[int, int] | None = None,
    ) -> np.ndarray:
        """Predictions (the objective's output, or margins with ``output_margin``).

        Uses rounds ``0..best_iteration`` when the model was fitted with early stopping
        and ``iteration_range`` is not given.
        """
        dm = self._predict_dmatrix(X, base_margin)
        return self._Booster.predict(
            dm,
            output_margin=output_margin,
            validate_features=validate_features,
            iteration_range=self._iteration_range(iteration_range),
        )

    def apply(self, X: Any, iteration_range: tuple[int, int] | None = None) -> np.ndarray:
        """Leaf index of every row in every tree: int array of shape (n, n_trees)."""
        dm = self._predict_dmatrix(X)
        return self._Booster.predict(dm, pred_leaf=True, iteration_range=self._iteration_range(iteration_range))

    def shap_values(self, X: Any, **kwargs: Any) -> np.ndarray:
        """Exact SHAP values of the margin, as ``shap.TreeExplainer(model).shap_values(X)``:
        float64 (n, F), or (n, F, k) for k classes; ``shap_values(X).sum(1) +
        dgboost.TreeExplainer(model).expected_value`` is ``predict(X, output_margin=True)``.

        Uses the same rounds as ``predict`` (up to the best iteration after early stopping).
        Keyword arguments go to :meth:`dgboost.TreeExplainer.shap_values`.
        """
        from .explain.explainer import TreeExplainer

        dm = self._predict_dmatrix(X)
        booster = self.get_booster()
        # codes of category columns as the model's categories number them
        values, _ = rows_for_model(dm, booster.feature_types, booster.meta.get("categories"))
        return TreeExplainer(self).shap_values(values, **kwargs)

    @property
    def feature_importances_(self) -> np.ndarray:
        """Normalised importance per feature (XGBoost's default for trees: mean split gain)."""
        booster = self.get_booster()
        kind = self.importance_type or "gain"
        score = booster.get_score(importance_type=kind)
        n = getattr(self, "n_features_in_", booster.num_features())
        names = booster.feature_names or [f"f{i}" for i in range(n)]
        values = np.array([score.get(name, 0.0) for name in names], dtype=np.float32)
        total = values.sum()
        return values / total if total > 0 else values

    # -- persistence --------------------------------------------------------------------------
    def save_model(self, fname: str | os.PathLike) -> None:
        """Write the model (with what the wrapper needs, e.g. ``classes_``) as dgboost JSON."""
        booster = self.get_booster()
        self._keep_state(booster)
        booster.save_model(fname)

    def load_model(self, fname: str | os.PathLike | Booster) -> None:
        """Load a model written by :meth:`save_model` (or any dgboost / XGBoost JSON model)."""
        booster = fname if isinstance(fname, Booster) else Booster(model_file=fname)
        raw = booster.attr(_SKLEARN_ATTR)
        try:
            state = json.loads(raw) if raw else {}
        except ValueError:
            state = {}
        self._Booster = booster
        self.n_features_in_ = booster.num_features()
        names = booster.feature_names
        if state.get("feature_names_in") and names is not None:
            self.feature_names_in_ = np.asarray(names, dtype=object)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        self._restore_state(state)


class DGBRegressor(RegressorMixin, DGBModel):
    """Gradient-boosted regression trees (``objective="reg:squarederror"``); ``score`` is R^2."""

    def __init__(self, *, objective: str | Callable[..., Any] | None = "reg:squarederror", **kwargs: Any) -> None:
        super().__init__(objective=objective, **kwargs)


class DGBClassifier(ClassifierMixin, DGBModel):
    """Gradient-boosted classification trees.

    Labels may be of any sortable dtype (ints, floats, strings...); ``classes_`` holds them
    sorted and ``predict`` returns them. (``xgboost.XGBClassifier`` refuses labels other than
    0..k-1 with a ValueError; they are kept here because scikit-learn's classifiers accept them,
    and a script written for XGBoost passes encoded labels, which train the same model.)
    Two classes train ``binary:logistic``; more train
    ``multi:softprob`` with ``num_class`` set automatically. ``score`` is accuracy.
    """

    _default_objective = "binary:logistic"

    def __init__(self, *, objective: str | Callable[..., Any] | None = "binary:logistic", **kwargs: Any) -> None:
        super().__init__(objective=objective, **kwargs)

    def _encode_y(self, y, fitting: bool) -> np.ndarray:
        y = _as_1d("y", y)
        if y.dtype.kind == "f" and np.isnan(y).any():
            raise DGBoostValueError(f"y contains NaN (first at row {int(np.argmax(np.isnan(y)))})")
        if fitting:
            if len(y) == 0:
                raise DGBoostValueError("y is empty: 0 sample(s) while a minimum of 1 is required.")
            if y.dtype.kind == "f" and type_of_target(y) == "continuous":
                raise DGBoostValueError(
                    "Unknown label type: continuous. A classifier needs discrete "
                    "class labels; use DGBRegressor for a continuous target"
                )
            try:
                classes, encoded = np.unique(y, return_inverse=True)
            except TypeError as exc:
                raise DGBoostTypeError(f"class labels must be sortable (one type), got: {exc}") from None
            if len(classes) < 2:
                raise DGBoostValueError(f"y has only 1 class ({classes[0]!r}): a classifier needs at least 2 classes")
            self.classes_ = classes
            self.n_classes_ = len(classes)
            return encoded.astype(np.float64)
        classes = self.classes_
        try:
            idx = np.searchsorted(classes, y)
        except TypeError as exc:
            raise DGBoostTypeError(f"labels have a different type from the training labels: {exc}") from None
        idx = np.minimum(idx, len(classes) - 1)
        unknown = classes[idx] != y
        if np.any(unknown):
            raise DGBoostValueError(
                f"labels {list(np.unique(y[unknown]))[:5]} were not seen in training (classes: {list(classes)[:10]})"
            )
        return idx.astype(np.float64)

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """As :meth:`DGBModel.get_params`; after ``fit`` on more than two classes ``objective`` is
        the one trained (``"multi:softprob"`` in place of a binary one), as ``XGBClassifier``
        reports it. (XGBoost sets the attribute in ``fit``; here it is left as given, as
        scikit-learn asks of ``fit``, and only reported.)

        Parameters
        ----------
        deep : bool

        Returns
        -------
        dict
            Argument name -> value.
        """
        params = super().get_params(deep)
        if getattr(self, "n_classes_", 0) > 2 and not callable(self.objective) and _binary(self._objective_name()):
            params["objective"] = "multi:softprob"
        return params

    def get_xgb_params(self) -> dict[str, Any]:
        """The training parameters; after ``fit`` on more than two classes they hold
        ``objective="multi:softprob"`` (as ``XGBClassifier`` reports) and ``num_class``.

        Returns
        -------
        dict
            XGBoost parameter names and values, None values left out.
        """
        if hasattr(self, "n_classes_"):
            # the class count is only known after fit: report what fit trains with
            return self._class_params()[0]
        return super().get_xgb_params()

    def _class_params(self) -> tuple[dict, Any]:
        params = self._train_params()
        objective = self._objective_name()
        k = self.n_classes_
        obj = self._custom_objective()
        if obj is not None:
            if k > 2:
                params["objective"] = "multi:softprob"
                params["num_class"] = k
            return params, obj
        if k > 2:
            if _binary(objective):
                params["objective"] = "multi:softprob"
            params["num_class"] = k
        elif str(objective).startswith("multi:"):
            params["num_class"] = 2
        return params, None

    def fit(
        self,
        X: Any,
        y: Any,
        *,
        sample_weight: Any = None,
        base_margin: Any = None,
        eval_set: Sequence[tuple[Any, Any]] | None = None,
        sample_weight_eval_set: Sequence[Any] | None = None,
        base_margin_eval_set: Sequence[Any] | None = None,
        verbose: bool | int = False,
        xgb_model: Booster | DGBModel | str | os.PathLike | None = None,
    ) -> DGBClassifier:
        """Train on ``X`` and labels ``y`` (any sortable labels); see :meth:`DGBModel.fit`."""
        y_enc = self._encode_y(y, fitting=True)  # the class count first: it is a parameter
        params, obj = self._class_params()
        p = self._parsed_params(params)
        train_dm = self._dmatrix(X, y_enc, sample_weight, base_margin)
        evals = self._eval_sets(
            eval_set, sample_weight_eval_set, base_margin_eval_set, train_dm, X, y, sample_weight, base_margin
        )
        return self._fit(p, train_dm, X, evals, verbose, xgb_model, obj=obj)

    def _sklearn_state(self) -> dict:
        state = super()._sklearn_state()
        classes = self.classes_
        try:
            listed = classes.tolist()
            json.dumps(listed)
        except (TypeError, ValueError):
            listed = None
        state.update(
            {
                "n_classes_": int(self.n_classes_),
                "classes_": listed,
                "classes_dtype": classes.dtype.str if classes.dtype.kind in "biufU" else "O",
            }
        )
        return state

    def _restore_state(self, state: dict) -> None:
        super()._restore_state(state)
        booster = self._Booster
        k = state.get("n_classes_")
        if k is None:
            k = int(booster.meta.get("num_class") or 0) or 2
        self.n_classes_ = int(k)
        listed = state.get("classes_")
        if listed is not None and len(listed) == self.n_classes_:
            dtype = state.get("classes_dtype", None)
            self.classes_ = np.asarray(listed, dtype=object if dtype == "O" else dtype)
        else:
            self.classes_ = np.arange(self.n_classes_)

    def predict_proba(
        self,
        X: Any,
        validate_features: bool = True,
        base_margin: Any = None,
        iteration_range: tuple[int, int] | None = None,
    ) -> np.ndarray:
        """Class probabilities, shape (n, n_classes); rows sum to 1."""
        booster = self.get_booster()
        objective = booster.meta.get("objective")
        if objective in ("binary:logistic", "multi:softprob"):
            dm = self._predict_dmatrix(X, base_margin)
            p = booster.predict(
                dm,
                validate_features=validate_features,
                iteration_range=self._iteration_range(iteration_range),
                strict_shape=True,
            )
        else:  # raw outputs (custom objective, logitraw, softmax): apply the link here
            margin = self._margin(X, base_margin, iteration_range, validate_features)
            p = _sigmoid(margin) if margin.shape[1] == 1 else _softmax(margin)
        p = np.asarray(p, np.float32)
        p = p.reshape(p.shape[0], -1)
        if p.shape[1] == 1:
            p1 = p[:, 0]
            return np.column_stack([1.0 - p1, p1]).astype(np.float32)
        return p

    def predict(
        self,
        X: Any,
        output_margin: bool = False,
        validate_features: bool = True,
        base_margin: Any = None,
        iteration_range: tuple[int, int] | None = None,
    ) -> np.ndarray:
        """Predicted class labels (from ``classes_``), or margins with ``output_margin``."""
        if output_margin:
            return super().predict(
                X,
                output_margin=True,
                validate_features=validate_features,
                base_margin=base_margin,
                iteration_range=iteration_range,
            )
        proba = self.predict_proba(
            X, validate_features=validate_features, base_margin=base_margin, iteration_range=iteration_range
        )
        return self.classes_[np.argmax(proba, axis=1)]


class DGBRanker(DGBModel):
    """Gradient-boosted learning-to-rank trees (LambdaMART, ``objective="rank:ndcg"``).

    Rows of a query must be given with ``group`` (sizes of consecutive queries) or ``qid``
    (a query id per row; rows are sorted by it if needed). ``predict`` returns a score per
    row: higher means more relevant. ``score`` is the mean NDCG over queries.
    """

    _default_objective = "rank:ndcg"

    def __init__(self, *, objective: str | Callable[..., Any] | None = "rank:ndcg", **kwargs: Any) -> None:
        super().__init__(objective=objective, **kwargs)

    @staticmethod
    def _query_rows(X, y, group, qid, weight, base_margin, what: str):
        """Sort rows by ``qid`` when needed; expand per-query weights to rows."""
        if group is None and qid is None:
            raise DGBoostValueError(f"{what}: a ranker needs query groups; pass group= or qid=")
        if group is not None and qid is not None:
            raise DGBoostValueError(f"{what}: give either group or qid, not both")
        n = _n_rows(X)
        if qid is not None:
            qid = _as_1d("qid", qid)
            if len(qid) != n:
                raise DGBoostValueError(f"{what}: qid has {len(qid)} entries but X has {n} rows")
            if (np.diff(qid) < 0).any() if qid.dtype.kind in "iuf" else not np.all(qid[:-1] <= qid[1:]):
                order = np.argsort(qid, kind="stable")
                X, qid = _take_rows(X, order), qid[order]
                y = None if y is None else np.asarray(y)[order]
                weight = None if weight is None or len(weight) != n else np.asarray(weight)[order]
                base_margin = None if base_margin is None else np.asarray(base_margin)[order]
            sizes = np.unique(qid, return_counts=True)[1]
        else:
            sizes = np.asarray(group, dtype=np.int64).ravel()
        if weight is not None:
            weight = np.asarray(weight, dtype=np.float64).ravel()
            if len(weight) == len(sizes) and len(weight) != n:
                weight = np.repeat(weight, sizes)
        return X, y, sizes, weight, base_margin

    def fit(
        self,
        X: Any,
        y: Any,
        *,
        group: Any = None,
        qid: Any = None,
        sample_weight: Any = None,
        base_margin: Any = None,
        eval_set: Sequence[tuple[Any, Any]] | None = None,
        eval_group: Sequence[Any] | None = None,
        eval_qid: Sequence[Any] | None = None,
        sample_weight_eval_set: Sequence[Any] | None = None,
        base_margin_eval_set: Sequence[Any] | None = None,
        verbose: bool | int = False,
        xgb_model: Booster | DGBModel | str | os.PathLike | None = None,
    ) -> DGBRanker:
        """Train on ``X`` and relevance labels ``y`` for queries given by ``group`` or ``qid``.

        ``sample_weight`` is per query (one per group) or per row (constant within a query).
        ``eval_set`` pairs need matching ``eval_group`` or ``eval_qid`` lists.
        """
        p = self._parsed_params()
        y_enc = self._encode_y(y, fitting=True)
        X, y_enc, sizes, weight, base_margin = self._query_rows(X, y_enc, group, qid, sample_weight, base_margin, "fit")
        train_dm = self._dmatrix(X, y_enc, weight, base_margin, group=sizes)
        groups = None
        if eval_set is not None:
            n = len(eval_set)
            if eval_group is None and eval_qid is None:
                raise DGBoostValueError("eval_set for a ranker needs eval_group or eval_qid")
            for what, lst in (("eval_group", eval_group), ("eval_qid", eval_qid)):
                if lst is not None and len(lst) != n:
                    raise DGBoostValueError(f"{what} has {len(lst)} entries but eval_set has {n}")
            groups = [
                (None if eval_group is None else eval_group[i], None if eval_qid is None else eval_qid[i])
                for i in range(n)
            ]
        evals = self._eval_sets(
            eval_set,
            sample_weight_eval_set,
            base_margin_eval_set,
            train_dm,
            X,
            y,
            sample_weight,
            base_margin,
            groups=groups,
        )
        return self._fit(p, train_dm, X, evals, verbose, xgb_model)

    def _eval_dmatrix(self, i, Xe, ye, we, be, ge, qe, train_dm) -> DMatrix:
        ye = self._encode_y(ye, fitting=False)
        Xe, ye, sizes, we, be = self._query_rows(Xe, ye, ge, qe, we, be, f"eval_set[{i}]")
        dm = self._dmatrix(Xe, ye, we, be, group=sizes, ref=train_dm)
        if dm.num_col() != train_dm.num_col():
            raise DGBoostValueError(
                f"eval_set[{i}] has {dm.num_col()} features, the training data has {train_dm.num_col()}"
            )
        return dm

    def score(self, X: Any, y: Any, group: Any = None, qid: Any = None, k: int | None = None) -> float:
        """Mean NDCG (exponential gain ``2^rel - 1``) over queries; at ``k`` if given.

        Without ``group``/``qid`` all rows form one query.
        """
        y = _as_1d("y", y).astype(np.float64)
        if group is None and qid is None:
            group = [len(y)]
        X, y, sizes, _, _ = self._query_rows(X, y, group, qid, None, None, "score")
        scores = np.asarray(self.predict(X), np.float64)
        return _mean_ndcg(scores, y, sizes, k)


class _RandomForest:
    """XGBoost's random-forest estimators: one boosting round of ``n_estimators`` trees
    (``num_parallel_tree``) per output, each on its own row subsample and column samples, their
    leaves averaged. Early stopping and callbacks are refused, as XGBoost refuses them (a
    forest has one round)."""

    def get_num_boosting_rounds(self) -> int:
        """1: a forest is one round of ``n_estimators`` parallel trees."""
        return 1

    def _train_params(self) -> dict:
        params = super()._train_params()
        # as XGBoost's get_xgb_params: n_estimators is the forest's size, whatever else was given
        params["num_parallel_tree"] = int(self.n_estimators)
        return params

    def _fit(self, p: TrainParams, train_dm: DMatrix, X, evals, verbose, xgb_model, obj=None):
        if self.early_stopping_rounds is not None or self.callbacks:
            raise DGBoostValueError(
                f"{type(self).__name__} grows one round: early_stopping_rounds and callbacks are not supported"
            )
        return super()._fit(p, train_dm, X, evals, verbose, xgb_model, obj=obj)


class DGBRFRegressor(_RandomForest, DGBRegressor):
    """A random forest for regression (XGBoost's ``XGBRFRegressor``).

    ``n_estimators`` trees grown in one round from the same gradients (``num_parallel_tree``),
    each on a hashed row subsample and per-node column samples, averaged. The defaults are
    XGBoost's: ``learning_rate=1``, ``subsample=0.8``, ``colsample_bynode=0.8``,
    ``reg_lambda=1e-5``; the other parameters are :class:`DGBModel`'s.
    """

    def __init__(
        self,
        *,
        learning_rate: float | None = 1.0,
        subsample: float | None = 0.8,
        colsample_bynode: float | None = 0.8,
        reg_lambda: float | None = 1e-5,
        objective: str | Callable[..., Any] | None = "reg:squarederror",
        **kwargs: Any,
    ) -> None:
        super().__init__(
            learning_rate=learning_rate,
            subsample=subsample,
            colsample_bynode=colsample_bynode,
            reg_lambda=reg_lambda,
            objective=objective,
            **kwargs,
        )


class DGBRFClassifier(_RandomForest, DGBClassifier):
    """A random forest for classification (XGBoost's ``XGBRFClassifier``): labels and classes
    as :class:`DGBClassifier`, the forest and its defaults as :class:`DGBRFRegressor`."""

    def __init__(
        self,
        *,
        learning_rate: float | None = 1.0,
        subsample: float | None = 0.8,
        colsample_bynode: float | None = 0.8,
        reg_lambda: float | None = 1e-5,
        objective: str | Callable[..., Any] | None = "binary:logistic",
        **kwargs: Any,
    ) -> None:
        super().__init__(
            learning_rate=learning_rate,
            subsample=subsample,
            colsample_bynode=colsample_bynode,
            reg_lambda=reg_lambda,
            objective=objective,
            **kwargs,
        )


# XGBoost's class names, so that ``from dgboost import XGBClassifier`` is a drop-in import
XGBModel = DGBModel
XGBRegressor = DGBRegressor
XGBClassifier = DGBClassifier
XGBRanker = DGBRanker
XGBRFRegressor = DGBRFRegressor
XGBRFClassifier = DGBRFClassifier


def _mean_ndcg(scores: np.ndarray, y: np.ndarray, sizes, k: int | None) -> float:
    """Mean NDCG@k over queries (queries without any relevant row count as 1, as XGBoost)."""
    values = []
    start = 0
    for size in np.asarray(sizes, dtype=np.int64):
        s, rel = scores[start : start + size], y[start : start + size]
        start += size
        if size == 0:
            continue
        top = size if k is None else min(k, size)
        discount = 1.0 / np.log2(np.arange(top) + 2.0)
        order = np.argsort(-s, kind="stable")[:top]
        dcg = ((2.0 ** rel[order] - 1.0) * discount).sum()
        idcg = ((2.0 ** np.sort(rel)[::-1][:top] - 1.0) * discount).sum()
        values.append(dcg / idcg if idcg > 0 else 1.0)
    return float(np.mean(values)) if values else 0.0


def _binary(objective) -> bool:
    """Whether a classifier's objective is (or defaults to) a binary one, replaced for k > 2 classes."""
    return objective is None or str(objective).startswith("binary:")


def _refuse_misspelt_argument(key: str, arguments: Sequence[str]) -> None:
    """Refuse an extra keyword that is no training parameter but close to a constructor argument.

    :func:`dgboost.params.parse_params` only knows training parameters, so ``n_estimator=``
    would get its nearest parameter (``random_state``'s alias) as the suggestion.

    Raises
    ------
    ParameterError
        Naming the constructor argument meant (``n_estimator`` -> ``n_estimators``).
    """
    if is_parameter_name(key):
        return
    close = difflib.get_close_matches(key, list(arguments), n=1, cutoff=0.8)
    if close:
        raise ParameterError(f"unknown parameter {key!r}; did you mean {close[0]!r}?")


def _full_signature(cls) -> None:
    """Give a subclass's ``__init__`` the base's full signature (with the subclass's own
    defaults), so scikit-learn sees every parameter (``get_params``, ``clone``, ``repr``)."""
    base = inspect.signature(DGBModel.__init__)
    own = inspect.signature(cls.__dict__["__init__"]).parameters
    params = [own[p.name] if p.name in own and p.kind != p.VAR_KEYWORD else p for p in base.parameters.values()]
    cls.__init__.__signature__ = base.replace(parameters=params)


for _cls in (DGBRegressor, DGBClassifier, DGBRanker, DGBRFRegressor, DGBRFClassifier):
    _full_signature(_cls)
del _cls
