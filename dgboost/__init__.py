"""dgboost: gradient-boosted decision trees on one or many GPUs, with exact TreeSHAP, on Dask.

The training API follows XGBoost's names so that switching is a change of import::

    import dgboost as xgb
    booster = xgb.train({"objective": "binary:logistic", "max_depth": 6}, xgb.DMatrix(X, y), 100)
"""

from __future__ import annotations

from . import callback  # noqa: F401 (dgboost.callback, XGBoost's xgboost.callback)
from .booster import Booster
from .config import config_context, get_config, set_config

# cv.py imports pandas and scikit-learn only when called; importing it here (not lazily) keeps
# ``dgboost.cv`` the function even after ``import dgboost.cv`` (a submodule import would
# otherwise set the package attribute to the module)
from .cv import cv
from .data import DMatrix, QuantileDMatrix
from .errors import (
    CommunicationError,
    DeviceMemoryError,
    DGBoostError,
    DGBoostTypeError,
    DGBoostValueError,
    ModelFormatError,
    ParameterError,
)
from .explain.explainer import TreeExplainer
from .training import TrainingCallback, train

__version__ = "0.1.0"

# The scikit-learn estimators are imported on first use: importing scikit-learn costs more
# than the rest of ``import dgboost`` together.
_SKLEARN_NAMES = {
    "DGBModel": "DGBModel",
    "DGBRegressor": "DGBRegressor",
    "DGBClassifier": "DGBClassifier",
    "DGBRanker": "DGBRanker",
    "DGBRFRegressor": "DGBRFRegressor",
    "DGBRFClassifier": "DGBRFClassifier",
    "XGBModel": "DGBModel",
    "XGBRegressor": "DGBRegressor",
    "XGBClassifier": "DGBClassifier",
    "XGBRanker": "DGBRanker",
    "XGBRFRegressor": "DGBRFRegressor",
    "XGBRFClassifier": "DGBRFClassifier",
}
# plotting (matplotlib / graphviz) is imported on first use too
_LAZY_NAMES = {"plot_importance": "plotting", "plot_tree": "plotting", "to_graphviz": "plotting"}


def __getattr__(name: str):
    """Module attribute hook (PEP 562): loads :mod:`dgboost.sklearn` or :mod:`dgboost.plotting` on first use.

    Parameters
    ----------
    name : str
        The attribute asked for.

    Returns
    -------
    type or function
        The estimator class (``XGB*`` names are aliases of the ``DGB*`` classes), or a
        :mod:`dgboost.plotting` function.
    """
    if name in _SKLEARN_NAMES:
        from . import sklearn as _sklearn

        value = getattr(_sklearn, _SKLEARN_NAMES[name])
        globals()[name] = value
        return value
    if name in _LAZY_NAMES:
        import importlib

        value = getattr(importlib.import_module(f".{_LAZY_NAMES[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list:
    return sorted(set(globals()) | set(_SKLEARN_NAMES) | set(_LAZY_NAMES))


__all__ = [
    "Booster",
    "DMatrix",
    "QuantileDMatrix",
    "train",
    "cv",
    "TrainingCallback",
    "TreeExplainer",
    "plot_importance",
    "plot_tree",
    "to_graphviz",
    "DGBoostError",
    "DGBoostValueError",
    "DGBoostTypeError",
    "ModelFormatError",
    "ParameterError",
    "DeviceMemoryError",
    "CommunicationError",
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
    "set_config",
    "get_config",
    "config_context",
    "__version__",
]
