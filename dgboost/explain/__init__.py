"""Exact TreeSHAP: path table, bin packing, weight tables and the CPU reference kernels.

Pipeline (docs/design.md §4 "Explanation data flow")::

    Ensemble --extract_paths--> PathTable --pack--> PackedTable (32-lane bins for a GPU)
             --build_tables--> WeightTables (optional, Fast TreeSHAP v2)
             --shap_values_* / shap_interactions / shap_values_interventional--> arrays

User-facing: :class:`TreeExplainer` (shap's interface) over :func:`to_ensemble` (importers
for dgboost, XGBoost, LightGBM and scikit-learn models).
"""
from .api import booster_contributions
from .binpack import BIN_CAPACITY, PackedTable, best_fit_decreasing, bin_items, first_fit_decreasing, next_fit, pack
from .explainer import AdditivityError, Explanation, TreeExplainer
from .importers import ThresholdEncoder, UnsupportedModelError, to_ensemble
from .interventional import shap_values_interventional
from .paths import PATH_ELEMENT_DTYPE, PathTable, as_path_table, extract_paths
from .tables import WeightTables, build_tables
from .treeshap import shap_interactions, shap_values, shap_values_path, shap_values_table

__all__ = [
    "PATH_ELEMENT_DTYPE", "PathTable", "as_path_table", "extract_paths",
    "BIN_CAPACITY", "PackedTable", "best_fit_decreasing", "bin_items", "first_fit_decreasing",
    "next_fit", "pack", "WeightTables", "build_tables", "shap_interactions", "shap_values",
    "shap_values_interventional", "shap_values_path", "shap_values_table",
    "TreeExplainer", "Explanation", "AdditivityError", "to_ensemble", "UnsupportedModelError",
    "ThresholdEncoder", "booster_contributions",
]
