"""Training and prediction data: :class:`DMatrix`, :class:`QuantileDMatrix`, :class:`RankDMatrix`.

The features are read by :mod:`dgboost.features` (every accepted container, categories
included); here they meet the per-row meta information. Base margins, groups and query ids are
brought to the host as NumPy. Labels and weights given as CuPy arrays stay on their device,
checked there (on 115M rows their trips to the host and NumPy checks took most of a Dask job's
set-up: docs/performance-notes.md); the ``label`` and ``weight`` attributes are NumPy copies
made at first use. Category codes of an evaluation set, of a continued model
and of prediction rows are re-coded here to the categories they must mean
(docs/categorical.md).
"""

from __future__ import annotations

import copy
import os
from typing import Any, Sequence

import numpy as np

from ._array import array_module, is_device_array, to_host
from ._category_codes import categories_from_list, categories_to_list
from .errors import DGBoostError, DGBoostTypeError, DGBoostValueError
from .features import (
    FeatureTable,
    aligned_codes,
    as_feature_matrix,
    categorical_info,
    checked_feature_types,
    checked_names,
    model_categories,
    read_features,
    small_to_host,
)
from .params import check_max_bin

__all__ = [
    "DMatrix",
    "QuantileDMatrix",
    "RankDMatrix",
    "FeatureTable",
    "aligned_codes",
    "aligned_matrix",
    "matrix_for_model",
    "checked_feature_types",
    "model_categories",
    "rows_for_model",
    "as_feature_matrix",
    "read_features",
    "small_to_host",
]


def aligned_matrix(dmat: "DMatrix", ref: "DMatrix", what: str = "the training data") -> "DMatrix":
    """``dmat`` with codes that mean ``ref``'s categories: ``dmat`` itself when they already do.

    Used for evaluation sets (their codes must mean the training data's categories). The copy
    shares everything but the values, and has no binned cache of its own yet.

    Raises
    ------
    DGBoostValueError
        As :func:`aligned_codes` (a category that ``ref`` does not have).
    """
    if dmat is ref or dmat.categories is None:
        return dmat
    values = aligned_codes(dmat, ref.categories, ref._coded, what)
    if values is dmat.data:
        return dmat
    out = copy.copy(dmat)
    out.data, out.categories, out._coded = values, ref.categories, ref._coded
    out._binned_cache = {}
    return out


def matrix_for_model(dmat: "DMatrix", feature_types, categories, what: str = "the model") -> "DMatrix":
    """``dmat`` with codes that mean a model's categories (:func:`model_categories`): itself when they do.

    Used when training continues a model: its trees' category sets are codes of its own
    categories, so the new rows are re-coded to them (a category the model lacks is refused).
    """
    target = model_categories(feature_types, categories)
    if target is None or dmat.categories is None:
        return dmat
    values = aligned_codes(dmat, *target, what=what)
    names = dmat.feature_names or [f"f{j}" for j in range(dmat.num_col())]
    merged = [
        own if model is None or coded else categories_from_list(names[j], model)
        for j, (own, model, coded) in enumerate(zip(dmat.categories, target[0], dmat._coded))
    ]
    if values is dmat.data and all(a is b for a, b in zip(merged, dmat.categories)):
        return dmat
    out = copy.copy(dmat)
    out.data, out.categories = values, merged
    out._binned_cache = {}
    return out


def rows_for_model(
    data: Any, feature_types: Sequence[str] | None, categories: Sequence | None, missing: float = np.nan
) -> tuple[Any, list[str] | None]:
    """Rows to predict or explain with a model: float32 values whose codes mean the model's categories.

    Parameters
    ----------
    data : DMatrix or anything :func:`read_features` takes (category columns accepted)
    feature_types, categories : the model's (see :func:`model_categories`)
    missing : float
        As for :func:`read_features` (not used for a DMatrix).

    Returns
    -------
    values : numpy.ndarray or cupy.ndarray of float32, shape (n, F)
        The data's values, with each category column re-coded to the model's categories
        (a copy only when a code changes).
    names : list of str or None

    Raises
    ------
    DGBoostValueError
        A category the model has not seen (XGBoost 3.4.1 refuses it too), a category column
        where the model has a numeric feature, or what :func:`read_features` refuses.
    """
    source = data if isinstance(data, DMatrix) else read_features(data, missing, enable_categorical=True)
    names = source.feature_names if isinstance(source, DMatrix) else source.names
    target = model_categories(feature_types, categories)
    values = aligned_codes(source, *(target or (None, None)), what="the model")
    return values, names


class _RowVector:
    """A per-row vector attribute of a DMatrix (``label``, ``weight``): kept as it was given,
    a NumPy array or a CuPy array on the data's device, and read as NumPy (a device vector is
    copied to the host once, at the first read). :meth:`DMatrix._vector` gives the kept one."""

    def __set_name__(self, owner, name: str) -> None:
        self.kept, self.host = f"_{name}_kept", f"_{name}_host"

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        host = obj.__dict__.get(self.host)
        if host is None:
            kept = obj.__dict__.get(self.kept)
            if kept is None:
                return None
            host = obj.__dict__[self.host] = to_host(kept)
        return host

    def __set__(self, obj, value) -> None:
        obj.__dict__[self.kept] = value
        obj.__dict__[self.host] = value if value is None or isinstance(value, np.ndarray) else None


def _as_vector(name: str, value: Any, n: int, allow_negative: bool = True) -> Any:
    """``value`` checked as a per-row vector of ``n`` finite values; float32 (n,), NumPy, or
    CuPy on its device for a CuPy array (the same values and the same errors either way)."""
    if value is None:
        return None
    if is_device_array(value):
        return _device_vector(name, value, n, allow_negative)
    value = small_to_host(value)
    try:
        vec = np.asarray(value)
        # float32 is checked as it is (a float64 copy is a pass over 8 bytes a row for nothing);
        # anything else goes through float64 first, as before (int64 -> float32 directly
        # could round differently)
        if vec.dtype != np.float32:
            vec = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise DGBoostTypeError(f"{name} must be numeric, got {type(value).__name__}") from None
    return _checked_vector(name, vec, n, allow_negative, np).astype(np.float32)


def _device_vector(name: str, value: Any, n: int, allow_negative: bool):
    """:func:`_as_vector` of a CuPy array, on its device: the same conversions (float32 kept,
    anything else through float64; both round as NumPy does) and checks; only the checks'
    answers come to the host."""
    import cupy

    if value.dtype.kind not in "biuf":
        raise DGBoostTypeError(f"{name} must be numeric, got a CuPy array of {value.dtype}")
    vec = value if value.dtype == cupy.float32 else value.astype(cupy.float64)
    vec = _checked_vector(name, vec, n, allow_negative, cupy)
    return cupy.ascontiguousarray(vec.astype(cupy.float32, copy=False))


def _checked_vector(name: str, vec, n: int, allow_negative: bool, xp):
    """``vec`` (float32 or float64, of module ``xp``) as a 1-D vector of ``n`` finite values
    (non-negative unless ``allow_negative``); an (n, 1) column is taken as its values."""
    if vec.ndim == 2 and vec.shape[1] == 1:
        vec = vec[:, 0]
    if vec.ndim != 1:
        raise DGBoostValueError(f"{name} must be 1-D, got shape {vec.shape}")
    if vec.shape[0] != n:
        raise DGBoostValueError(f"{name} has {vec.shape[0]} entries but data has {n} rows")
    bad = ~xp.isfinite(vec)
    if bool(bad.any()):
        raise DGBoostValueError(f"{name} contains NaN or infinite values (first at row {int(xp.argmax(bad))})")
    if not allow_negative and bool((vec < 0).any()):
        raise DGBoostValueError(f"{name} contains negative values (first at row {int(xp.argmax(vec < 0))})")
    return vec


class DMatrix:
    """Training or prediction data: features plus labels, weights, margins and query groups.

    Parameters
    ----------
    data : array-like, shape (n, F)
        See :func:`as_feature_matrix` for accepted types. CuPy and cuDF data stay on
        their GPU.
    label, weight, base_margin : array-like, shape (n,), optional
        ``base_margin`` may also be (n, n_groups) for multiclass models. A CuPy label or
        weight is kept on its device and checked there (not copied when it is C-contiguous
        float32, as CuPy features are not); cuDF values and CuPy base margins are copied to
        the host.
    group : array-like of int, optional
        Sizes of consecutive query groups (ranking); must sum to ``n``.
    qid : array-like of int, shape (n,), optional
        Query id per row (sorted); an alternative to ``group``.
    feature_names : sequence of str, optional
    feature_types : sequence of str, optional
        ``"q"``, ``"float"``, ``"int"``, ``"i"`` (numerical) or ``"c"`` (categorical). A numeric
        column typed ``"c"`` holds category codes (integers 0 to 2**24 - 1, NaN missing; at most
        65534 categories), XGBoost's way for NumPy data. Category columns are ``"c"`` by
        default. See docs/categorical.md.
    missing : float, default NaN
        Marks missing entries of numeric columns (a category column's are its nulls).
    max_bin : int, optional
        Number of histogram bins; overrides the training parameter for this data. Checked
        by :func:`dgboost.params.check_max_bin` (2 to 65535), here and whenever it is set.
    ref : DMatrix, optional
        Reuse the quantile cuts of ``ref`` (validation data binned like the training data).
        A categorical column is re-coded to the categories of ``ref``.
    enable_categorical : bool, default True
        Take pandas / cuDF ``category`` columns and Arrow dictionary columns as categorical
        features (XGBoost 3.4.1's default). False makes such a column an error naming it.
        String / object columns are always an error: make them ``category`` columns first.
    nthread
        Accepted for XGBoost compatibility.

    Attributes
    ----------
    data : numpy.ndarray or cupy.ndarray of float32, shape (n, F)
        C-contiguous features, NaN for missing; a CuPy array (on the input's GPU) exactly
        when the input was a CuPy array or a cuDF DataFrame. A categorical feature holds its
        category codes (0..K-1).
    feature_types : list of str or None
    categories : list of (numpy.ndarray or None), length F, or None
        Per feature: None for a numeric one, else its category values in code order (strings
        as an object array, or int64 / bool); ``arange(K)`` for codes given as numbers. None
        when no feature is categorical.
    label, weight : numpy.ndarray of float32, shape (n,), or None
        On the host; a CuPy label or weight is copied here at the first read (training from
        device data reads the device copy and makes none).
    base_margin : numpy.ndarray of float32, shape (n, n_groups), or None
    group_ptr : numpy.ndarray of int64, shape (n_groups + 1,), or None
    """

    _allow_empty_rows = False  # a user's DMatrix with no rows is a mistake; a rank's is not
    label = _RowVector()
    weight = _RowVector()

    def __init__(
        self,
        data: Any,
        label: Any = None,
        weight: Any = None,
        base_margin: Any = None,
        group: Any = None,
        qid: Any = None,
        feature_names: Sequence[str] | None = None,
        feature_types: Sequence[str] | None = None,
        missing: float = np.nan,
        max_bin: int | None = None,
        ref: DMatrix | None = None,
        nthread: int | None = None,
        enable_categorical: bool = True,
    ) -> None:
        table = read_features(
            data,
            missing,
            feature_names,
            feature_types=feature_types,
            enable_categorical=enable_categorical,
            allow_empty_rows=self._allow_empty_rows,
        )
        self.data, self.feature_names, self.feature_types = table.values, table.names, table.types
        self.categories, self._coded = table.categories, table.coded
        n = self.data.shape[0]
        self.label = _as_vector("label", label, n)
        self.weight = _as_vector("weight", weight, n, allow_negative=False)
        self.base_margin = _as_margin(base_margin, n)
        self.group_ptr = _group_pointer(group, qid, n)
        self.max_bin = max_bin
        if ref is not None and not isinstance(ref, DMatrix):
            raise DGBoostTypeError("ref must be a DMatrix")
        if ref is not None and ref.num_col() != self.num_col():
            raise DGBoostValueError(f"ref has {ref.num_col()} features but data has {self.num_col()}")
        self.ref = ref
        if ref is not None and self.categories is not None:
            self.data = aligned_codes(self, ref.categories, ref._coded, "ref")
            self.categories, self._coded = ref.categories, ref._coded
        self._binned_cache: dict = {}

    def n_categories(self, feature: int) -> int:
        """K_f: the number of categories of ``feature`` (its bins); 0 for a numeric feature.

        For codes given as numbers K_f is the largest code + 1 (0 when all are missing).
        """
        if self.categories is None or self.categories[feature] is None:
            return 0
        return int(self.categories[feature].size)

    def category_values(self) -> list | None:
        """The category values per feature as a model keeps them (JSON-able lists).

        Returns
        -------
        list or None
            Length F: None for a numeric feature and for codes given as numbers (no values are
            known, so prediction takes codes as they are), else the list of values in code
            order. None when no feature is categorical.
        """
        if self.categories is None:
            return None
        return [
            None if values is None or coded else categories_to_list(values)
            for values, coded in zip(self.categories, self._coded)
        ]

    @property
    def max_bin(self) -> int | None:
        """Histogram bins per feature for this data (None: the training parameter's)."""
        return self._max_bin

    @max_bin.setter
    def max_bin(self, value: int | None) -> None:
        # checked when set, not when used: training reads it in place of the parameter
        self._max_bin = None if value is None else check_max_bin(value)

    def num_row(self) -> int:
        return int(self.data.shape[0])

    def num_col(self) -> int:
        return int(self.data.shape[1])

    def _vector(self, name: str):
        """``"label"`` or ``"weight"`` as kept: float32 (n,), a CuPy array on the data's
        device when it was given as one (training reads it there), else NumPy; or None."""
        return self.__dict__.get(getattr(type(self), name).kept)

    def get_label(self) -> np.ndarray:
        return np.empty(0, np.float32) if self.label is None else self.label

    def get_weight(self) -> np.ndarray:
        return np.empty(0, np.float32) if self.weight is None else self.weight

    def get_group(self) -> np.ndarray | None:
        return None if self.group_ptr is None else np.diff(self.group_ptr)

    def set_label(self, label: Any) -> None:
        self.label = _as_vector("label", label, self.num_row())

    def set_weight(self, weight: Any) -> None:
        self.weight = _as_vector("weight", weight, self.num_row(), allow_negative=False)

    def set_group(self, group: Any) -> None:
        self.group_ptr = _group_pointer(group, None, self.num_row())

    def get_base_margin(self) -> np.ndarray:
        """The base margin, flattened as XGBoost gives it: float32 (n * n_groups,), empty when unset."""
        return np.empty(0, np.float32) if self.base_margin is None else self.base_margin.ravel()

    def set_base_margin(self, margin: Any) -> None:
        """Set the base margin: (n,) or (n, n_groups) finite values; None removes it."""
        self.base_margin = _as_margin(margin, self.num_row())

    # -- XGBoost's meta-information interface ------------------------------------------------
    def set_info(
        self,
        *,
        label: Any = None,
        weight: Any = None,
        base_margin: Any = None,
        group: Any = None,
        qid: Any = None,
        label_lower_bound: Any = None,
        label_upper_bound: Any = None,
        feature_names: Sequence[str] | None = None,
        feature_types: Sequence[str] | None = None,
        feature_weights: Any = None,
    ) -> None:
        """Set meta information, as ``xgboost.DMatrix.set_info``; arguments left None are unchanged.

        Parameters
        ----------
        label, weight : array-like of float, shape (n,), optional
        base_margin : array-like of float, shape (n,) or (n, n_groups), optional
        group : array-like of int, shape (n_queries,), optional
            Query group sizes, summing to ``n``.
        qid : array-like of int, shape (n,), optional
            Sorted query id per row.
        feature_names : sequence of str, shape (F,), optional
        feature_types : sequence of str, shape (F,), optional
            ``"q"``, ``"float"``, ``"int"``, ``"i"`` or ``"c"`` (a numeric column made ``"c"``
            must hold category codes; a category column stays ``"c"``).
        label_lower_bound, label_upper_bound, feature_weights
            Not supported (no survival objectives, no feature-weighted column sampling).

        Raises
        ------
        DGBoostValueError
            For an unsupported field, or a value of the wrong length or with NaN / inf.
        """
        unsupported = {
            "label_lower_bound": label_lower_bound,
            "label_upper_bound": label_upper_bound,
            "feature_weights": feature_weights,
        }
        given = [name for name, value in unsupported.items() if value is not None]
        if given:
            raise DGBoostValueError(f"{', '.join(given)}: {_UNSUPPORTED_FIELDS[given[0]]}")
        n = self.num_row()
        # every value is checked before any is set: a refused call changes nothing
        new: dict[str, Any] = {}
        if label is not None:
            new["label"] = _as_vector("label", label, n)
        if weight is not None:
            new["weight"] = _as_vector("weight", weight, n, allow_negative=False)
        if base_margin is not None:
            new["base_margin"] = _as_margin(base_margin, n)
        if group is not None or qid is not None:
            new["group_ptr"] = _group_pointer(group, qid, n)
        if feature_names is not None:
            new["feature_names"] = checked_names(feature_names, self.num_col())
        if feature_types is not None:
            new.update(self._typed(feature_types, new.get("feature_names", self.feature_names)))
        for key, value in new.items():
            setattr(self, key, value)

    def _typed(self, feature_types: Sequence[str], names: list[str] | None) -> dict:
        """``feature_types``, ``categories`` and ``_coded`` for new types (checked; nothing set).

        A category column keeps its categories and must stay ``"c"``; a numeric column made
        ``"c"`` must hold codes.
        """
        known = {
            j: values for j, values in enumerate(self.categories or []) if values is not None and not self._coded[j]
        }
        table = FeatureTable(self.data, names)
        categorical_info(table, None, feature_types, known)
        return {"feature_types": table.types, "categories": table.categories, "_coded": table.coded}

    def get_float_info(self, field: str) -> np.ndarray:
        """A float field as ``xgboost.DMatrix.get_float_info``: ``"label"``, ``"weight"`` or
        ``"base_margin"`` (flattened).

        Returns
        -------
        numpy.ndarray of float32, shape (n,) (``base_margin``: (n * n_groups,)); empty when unset.
        """
        getters = {"label": self.get_label, "weight": self.get_weight, "base_margin": self.get_base_margin}
        if field in getters:
            return getters[field]()
        if field in _UNSUPPORTED_FIELDS:
            return np.empty(0, np.float32)  # never set: XGBoost gives an empty array too
        raise DGBoostValueError(f"unknown float field {field!r}; expected one of {sorted(getters)}")

    def set_float_info(self, field: str, data: Any) -> None:
        """Set a float field (``"label"``, ``"weight"``, ``"base_margin"``), as XGBoost's."""
        if field not in ("label", "weight", "base_margin") and field not in _UNSUPPORTED_FIELDS:
            raise DGBoostValueError(
                f"unknown float field {field!r}; expected one of ['base_margin', 'label', 'weight']"
            )
        self.set_info(**{field: data})

    def get_uint_info(self, field: str) -> np.ndarray:
        """``"group_ptr"``: the query groups' row boundaries, uint32 (n_queries + 1,); empty when unset."""
        if field != "group_ptr":
            raise DGBoostValueError(f"unknown uint field {field!r}; expected 'group_ptr'")
        return np.empty(0, np.uint32) if self.group_ptr is None else self.group_ptr.astype(np.uint32)

    def set_uint_info(self, field: str, data: Any) -> None:
        """``"group"``: query group sizes (as :meth:`set_group`), as XGBoost's."""
        if field != "group":
            raise DGBoostValueError(f"unknown uint field {field!r}; expected 'group'")
        self.set_group(data)

    def slice(self, rindex: Sequence[int] | np.ndarray, allow_groups: bool = False) -> DMatrix:
        """The rows ``rindex`` as a new matrix of the same class, as ``xgboost.DMatrix.slice``.

        Labels, weights and base margins follow their rows; feature names and types, ``max_bin``
        and ``ref`` are kept. Query groups are kept as the runs of rows of one group, so each
        group's chosen rows must be consecutive in ``rindex``.

        Parameters
        ----------
        rindex : sequence of int, shape (m,)
            Row numbers (0 to n - 1; repeats allowed, as XGBoost's).
        allow_groups : bool
            Accepted for XGBoost compatibility: groups are always kept where valid.

        Returns
        -------
        DMatrix
            ``m`` rows; data on the same device as this matrix.

        Raises
        ------
        DGBoostValueError
            For indices out of range, or a query group split over non-consecutive positions.
        """
        idx = np.asarray(rindex)
        if idx.ndim != 1 or (idx.size and idx.dtype.kind not in "iu"):
            raise DGBoostValueError(f"rindex must be a 1-D sequence of row numbers, got shape {idx.shape}")
        idx = idx.astype(np.int64)
        n = self.num_row()
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            raise DGBoostValueError(f"rindex holds row numbers outside 0..{n - 1}")
        out = copy.copy(self)
        xp = array_module(self.data)
        out.data = xp.ascontiguousarray(self.data[xp.asarray(idx)])
        out.label = None if self.label is None else self.label[idx]
        out.weight = None if self.weight is None else self.weight[idx]
        out.base_margin = None if self.base_margin is None else np.ascontiguousarray(self.base_margin[idx])
        out.group_ptr = None if self.group_ptr is None else _sliced_groups(self.group_ptr, idx)
        out._binned_cache = {}
        return out

    def save_binary(self, fname: str | os.PathLike, silent: bool = True) -> None:
        """Not supported: XGBoost's binary DMatrix format is not written.

        Raises
        ------
        DGBoostError
            Always, naming the alternative: keep the arrays (``numpy.save`` / ``numpy.savez`` of
            ``dm.data``, ``dm.get_label()``, ``dm.get_weight()``, or a Parquet file) and build the
            DMatrix from them again.
        """
        raise DGBoostError(
            f"save_binary({os.fspath(fname)!r}): XGBoost's binary DMatrix format is not supported; "
            "save the arrays instead (numpy.savez(path, data=dm.data, label=dm.get_label(), "
            "weight=dm.get_weight()) or a Parquet file) and build the DMatrix from them again"
        )

    def __repr__(self) -> str:
        return f"DMatrix(rows={self.num_row()}, features={self.num_col()}, label={self.label is not None})"


class RankDMatrix(DMatrix):
    """The rows one rank of a distributed job holds: a :class:`DMatrix` that may have 0 rows.

    A worker that was given no partitions still takes part in every collective (with empty
    histograms), so its share of the data is an empty matrix with the job's columns.

    Attributes
    ----------
    row_runs : list of (int, int) or None
        The global (row offset, rows) of each of its partitions, in the order they are
        concatenated here, when the rank holds partitions wherever they lie; None when the
        ranks hold contiguous runs in rank order.
    """

    _allow_empty_rows = True
    row_runs: list[tuple[int, int]] | None = None


_UNSUPPORTED_FIELDS = {
    "label_lower_bound": "label bounds (survival objectives) are not supported",
    "label_upper_bound": "label bounds (survival objectives) are not supported",
    "feature_weights": "feature_weights (weighted column sampling) are not supported",
}


def _as_margin(value: Any, n: int) -> np.ndarray | None:
    """A base margin as C-contiguous float32 (n, n_groups) on the host; None stays None."""
    if value is None:
        return None
    bm = np.asarray(small_to_host(value), dtype=np.float32)
    if bm.ndim == 1:
        bm = bm[:, None]
    if bm.ndim != 2 or bm.shape[0] != n or not np.isfinite(bm).all():
        raise DGBoostValueError(f"base_margin must be finite with {n} rows, got shape {bm.shape}")
    return np.ascontiguousarray(bm)


def _sliced_groups(group_ptr: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Group boundaries of the rows ``idx``: one group per run of rows of one query group.

    Raises
    ------
    DGBoostValueError
        When a query group's rows are not consecutive in ``idx`` (the slice would split it).
    """
    owner = np.searchsorted(group_ptr, idx, side="right") - 1  # the group of each chosen row
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]]) if idx.size else np.empty(0, np.int64)
    if len(np.unique(owner[starts])) != len(starts):
        raise DGBoostValueError("slice: a query group's rows must be consecutive in rindex (groups cannot be split)")
    return np.r_[starts, idx.size].astype(np.int64)


def _group_pointer(group, qid, n: int) -> np.ndarray | None:
    if group is not None and qid is not None:
        raise DGBoostValueError("give either group or qid, not both")
    if qid is not None:
        q = np.asarray(small_to_host(qid))
        if q.shape != (n,):
            raise DGBoostValueError(f"qid must have one entry per row ({n}), got shape {q.shape}")
        if (np.diff(q) < 0).any():
            raise DGBoostValueError("qid must be sorted (rows of a query must be consecutive)")
        _, sizes = np.unique(q, return_counts=True)
        group = sizes
    if group is None:
        return None
    sizes = np.asarray(small_to_host(group))
    if sizes.ndim != 1 or sizes.dtype.kind not in "iu" and not np.all(np.mod(sizes, 1) == 0):
        raise DGBoostValueError("group must be a 1-D array of integer group sizes")
    sizes = sizes.astype(np.int64)
    if (sizes < 0).any():
        raise DGBoostValueError("group sizes must be non-negative")
    if sizes.sum() != n:
        raise DGBoostValueError(f"group sizes sum to {int(sizes.sum())} but data has {n} rows")
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


class QuantileDMatrix(DMatrix):
    """A :class:`DMatrix` that fixes its histogram bin count, with XGBoost's name and signature.

    dgboost bins the features when training starts (from ``max_bin``), so this class only
    carries and validates ``max_bin`` and ``ref``: training on it gives the same model as
    training on a ``DMatrix(..., max_bin=max_bin)``.

    Parameters
    ----------
    data, label, weight, base_margin, missing, feature_names, feature_types, group, qid
        As for :class:`DMatrix`.
    max_bin : int, optional
        Histogram bins per feature (default: the ``max_bin`` of ``ref`` if given, else the
        training parameter); :func:`dgboost.params.check_max_bin` applies.
    ref : DMatrix, optional
        The training data whose quantile cuts this (validation) data shares; its ``max_bin``
        must agree with ``max_bin`` when both are given.
    silent, nthread, enable_categorical, max_quantile_batches, data_split_mode
        Accepted for XGBoost compatibility; no effect.
    label_lower_bound, label_upper_bound, feature_weights
        Not supported: refused when given.
    """

    def __init__(
        self,
        data: Any,
        label: Any = None,
        *,
        weight: Any = None,
        base_margin: Any = None,
        missing: float = np.nan,
        silent: bool = False,
        feature_names: Sequence[str] | None = None,
        feature_types: Sequence[str] | None = None,
        nthread: int | None = None,
        max_bin: int | None = None,
        ref: DMatrix | None = None,
        group: Any = None,
        qid: Any = None,
        label_lower_bound: Any = None,
        label_upper_bound: Any = None,
        feature_weights: Any = None,
        enable_categorical: bool = True,
        max_quantile_batches: int | None = None,
        data_split_mode: Any = None,
    ) -> None:
        if ref is not None and not isinstance(ref, DMatrix):
            raise DGBoostTypeError(f"ref must be a DMatrix or QuantileDMatrix, got {type(ref).__name__}")
        if max_bin is not None:
            max_bin = check_max_bin(max_bin)  # before comparing it with ref's
        if label_lower_bound is not None or label_upper_bound is not None:
            raise DGBoostValueError("label_lower_bound / label_upper_bound (survival objectives) are not supported")
        if feature_weights is not None:
            raise DGBoostValueError("feature_weights are not supported")
        if ref is not None and ref.max_bin is not None:
            if max_bin is not None and max_bin != ref.max_bin:
                raise DGBoostValueError(
                    f"max_bin={max_bin!r} differs from the max_bin of ref "
                    f"({ref.max_bin}); data binned with ref's cuts must use its bins"
                )
            if max_bin is None:
                max_bin = ref.max_bin
        super().__init__(
            data,
            label,
            weight=weight,
            base_margin=base_margin,
            group=group,
            qid=qid,
            feature_names=feature_names,
            feature_types=feature_types,
            missing=missing,
            max_bin=max_bin,
            ref=ref,
            nthread=nthread,
            enable_categorical=enable_categorical,
        )

    def __repr__(self) -> str:
        return (
            f"QuantileDMatrix(rows={self.num_row()}, features={self.num_col()}, "
            f"max_bin={self.max_bin}, label={self.label is not None})"
        )
