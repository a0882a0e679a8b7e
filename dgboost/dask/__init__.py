"""dgboost on Dask: ``xgboost.dask``'s interface, with models independent of the partitioning.

The only package of dgboost that imports ``distributed``. Switch from XGBoost by changing the
import (``from dgboost import dask as dxgb``): ``DaskDMatrix``, ``train``, ``predict``,
``inplace_predict``, the ``DaskDGB*`` estimators (also named ``DaskXGB*``), and
``shap_values`` for distributed explanations.
"""

from ._matrix import DaskDMatrix, DaskQuantileDMatrix
from .estimators import DaskDGBClassifier, DaskDGBRanker, DaskDGBRegressor
from .explain import shap_frame_meta, shap_values
from .prediction import inplace_predict, predict
from .training import train

DaskXGBRegressor, DaskXGBClassifier, DaskXGBRanker = DaskDGBRegressor, DaskDGBClassifier, DaskDGBRanker

__all__ = [
    "DaskDMatrix",
    "DaskQuantileDMatrix",
    "train",
    "predict",
    "inplace_predict",
    "shap_values",
    "shap_frame_meta",
    "DaskDGBRegressor",
    "DaskDGBClassifier",
    "DaskDGBRanker",
    "DaskXGBRegressor",
    "DaskXGBClassifier",
    "DaskXGBRanker",
]
