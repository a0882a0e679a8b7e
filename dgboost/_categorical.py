"""Categorical features: which features are categorical, their bins, category bitsets.

A categorical feature holds its category code as a float32 value (0..K-1, NaN missing;
``feature_types[f] == "c"``). Its cuts bypass the sketch: one bin per code, K the largest code
present on any rank plus one (XGBoost's rule), see docs/design.md §11. A split on it sends the
categories of a set to the right child; the set is kept as a bitset of uint32 words (bit c is
word ``c >> 5``, bit ``c & 31``) while a tree grows, and as the sorted codes in a tree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .errors import DGBoostValueError

__all__ = [
    "CATEGORICAL_TYPE",
    "MAX_CATEGORIES",
    "INVALID_CATEGORY",
    "CategoricalLayout",
    "is_categorical_types",
    "categorical_mask",
    "categorical_layout",
    "n_words",
    "codes_to_words",
    "words_to_codes",
    "check_category_count",
]

#: the feature type of a categorical feature (XGBoost's)
CATEGORICAL_TYPE = "c"
#: the most categories a feature may have: bins are uint16 and 65535 marks a missing value
MAX_CATEGORIES = 65534
#: XGBoost's ``OutOfRangeCat``: a value at or above it (or below 0) is no category (goes left)
INVALID_CATEGORY = 16777216


@dataclass(frozen=True)
class CategoricalLayout:
    """Which features are categorical and how many categories (bins) each has.

    Attributes
    ----------
    is_cat : ndarray of uint8, shape (F,)
        1 for a categorical feature.
    n_cats : ndarray of int32, shape (F,)
        K_f, the bins of a categorical feature; 0 for a numeric one.
    words : int
        uint32 words of one node's category bitset: ``ceil(max K_f / 32)``, at least 1.
    """

    is_cat: np.ndarray
    n_cats: np.ndarray
    words: int


def is_categorical_types(feature_types: Sequence[str] | None) -> bool:
    """Whether any of ``feature_types`` is categorical."""
    return feature_types is not None and any(t == CATEGORICAL_TYPE for t in feature_types)


def categorical_mask(feature_types: Sequence[str] | None, n_features: int) -> np.ndarray | None:
    """bool (F,): the categorical features, or None when there are none."""
    if not is_categorical_types(feature_types):
        return None
    mask = np.array([t == CATEGORICAL_TYPE for t in feature_types], dtype=bool)
    if mask.shape[0] != n_features:
        raise DGBoostValueError(f"{mask.shape[0]} feature types given for {n_features} features")
    return mask


def categorical_layout(cut_ptrs: np.ndarray, mask: np.ndarray | None) -> CategoricalLayout | None:
    """The layout of a training job from its cuts (a categorical feature's bins are its
    categories) and ``mask`` (bool (F,), :func:`categorical_mask`); None without categorical
    features."""
    if mask is None or not mask.any():
        return None
    n_bins = np.diff(np.asarray(cut_ptrs, np.int64))
    n_cats = np.where(mask, n_bins, 0).astype(np.int32)
    return CategoricalLayout(is_cat=mask.astype(np.uint8), n_cats=n_cats, words=n_words(int(n_cats.max())))


def n_words(n_categories: int) -> int:
    """uint32 words that hold ``n_categories`` bits (at least 1)."""
    return max(1, (int(n_categories) + 31) // 32)


def codes_to_words(codes, words: int | None = None) -> np.ndarray:
    """uint32 (words,) bitset of ``codes`` (non-negative integers); ``words`` defaults to
    the fewest that hold the largest code."""
    codes = np.asarray(codes, np.int64)
    if words is None:
        words = n_words(int(codes.max()) + 1 if codes.size else 0)
    out = np.zeros(words, np.uint32)
    np.bitwise_or.at(out, codes >> 5, np.left_shift(np.uint32(1), (codes & 31).astype(np.uint32)))
    return out


def words_to_codes(words) -> np.ndarray:
    """int32 sorted codes whose bits are set in ``words`` (uint32 (w,))."""
    words = np.asarray(words, np.uint32).astype("<u4")
    bits = np.unpackbits(words.view(np.uint8), bitorder="little")
    return np.flatnonzero(bits).astype(np.int32)


def check_category_count(feature: str, n_categories: int) -> None:
    """Refuse a feature with more categories than bins can hold."""
    if n_categories > MAX_CATEGORIES:
        raise DGBoostValueError(
            f"categorical feature {feature} has {n_categories} categories (largest code + 1); at most "
            f"{MAX_CATEGORIES} are supported (bins are uint16): merge rare categories or encode it as numeric"
        )
