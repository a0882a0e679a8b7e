"""dgboost: gradient-boosted decision trees on one or many GPUs, with exact TreeSHAP, on Dask.

The training API follows XGBoost's names so that switching is a change of import::

    import dgboost as xgb
    booster = xgb.train({"objective": "binary:logistic", "max_depth": 6}, xgb.DMatrix(X, y), 100)
"""
from __future__ import annotations

from .booster import Booster
from .data import DMatrix
from .errors import (DGBoostError, DGBoostTypeError, DGBoostValueError, ModelFormatError,
                     ParameterError)
from .training import TrainingCallback, train
from .explain.explainer import TreeExplainer

__version__ = "0.1.0"

__all__ = [
    "Booster", "DMatrix", "train", "TrainingCallback", "TreeExplainer",
    "DGBoostError", "DGBoostValueError", "DGBoostTypeError", "ModelFormatError", "ParameterError",
    "__version__",
]
