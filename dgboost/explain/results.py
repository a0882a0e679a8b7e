"""What an explanation returns: :class:`Explanation` (shap's attribute names) and the error
raised when values do not add up. A module of its own so that the kernel package
:mod:`dgboost.explain` can export them without importing the explainer (which imports the
backends, which import the kernels: a cycle)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import DGBoostValueError

__all__ = ["AdditivityError", "Explanation"]


class AdditivityError(DGBoostValueError):
    """SHAP values plus the expected value do not add up to the model's output."""


@dataclass
class Explanation:
    """Stand-in for ``shap.Explanation`` when shap is not installed (same attribute names)."""

    values: np.ndarray
    base_values: np.ndarray
    data: np.ndarray | None = None
    feature_names: list | None = None
    output_names: list | None = None

    @property
    def shape(self):
        return self.values.shape
