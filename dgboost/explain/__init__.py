"""Exact TreeSHAP: path table, bin packing, weight tables and the CPU reference kernels.

Pipeline (docs/design.md §4 "Explanation data flow")::

    Ensemble --extract_paths--> PathTable --pack--> PackedTable (32-lane bins for a GPU)
             --build_tables--> WeightTables (optional, Fast TreeSHAP v2)
             --shap_values_* / shap_interactions / shap_values_interventional--> arrays

User-facing: :class:`dgboost.TreeExplainer` (shap's interface; module
:mod:`dgboost.explain.explainer`) over :func:`to_ensemble` (importers for dgboost, XGBoost,
LightGBM and scikit-learn models). This package's ``__init__`` does not import the explainer:
the explainer chooses its engine through the backends, and the backends use these kernels, so
importing it here would make the import cycle ``explain -> explainer -> backend -> explain``.
"""

from .api import booster_contributions
from .binpack import BIN_CAPACITY, PackedTable, best_fit_decreasing, bin_items, first_fit_decreasing, next_fit, pack
from .importers import ThresholdEncoder, UnsupportedModelError, to_ensemble
from .interventional import shap_values_interventional
from .paths import PATH_ELEMENT_DTYPE, PathTable, as_path_table, extract_paths
from .results import AdditivityError, Explanation
from .tables import WeightTables, build_tables
from .treeshap import shap_interactions, shap_values, shap_values_path, shap_values_table

__all__ = [
    "PATH_ELEMENT_DTYPE",
    "PathTable",
    "as_path_table",
    "extract_paths",
    "BIN_CAPACITY",
    "PackedTable",
    "best_fit_decreasing",
    "bin_items",
    "first_fit_decreasing",
    "next_fit",
    "pack",
    "WeightTables",
    "build_tables",
    "shap_interactions",
    "shap_values",
    "shap_values_interventional",
    "shap_values_path",
    "shap_values_table",
    "Explanation",
    "AdditivityError",
    "to_ensemble",
    "UnsupportedModelError",
    "ThresholdEncoder",
    "booster_contributions",
]
