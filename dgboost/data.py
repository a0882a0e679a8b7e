"""Input adapters: everything a user may pass becomes a float32 row-major matrix plus meta info.

Accepted: NumPy arrays (numeric or bool), pandas DataFrames (numeric, bool and nullable
numeric columns), scipy.sparse CSR/CSC (absent entries are missing, as in XGBoost),
CuPy / cuDF objects (copied to the host on the CPU backend) and anything with
``__array__``. Values equal to ``missing`` become NaN. Infinite values are rejected
(XGBoost does the same) because no cut can separate them meaningfully.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .errors import DGBoostTypeError, DGBoostValueError

__all__ = ["DMatrix", "as_feature_matrix"]


def _pandas_to_matrix(frame) -> tuple[np.ndarray, list[str]]:
    import pandas as pd

    bad = []
    columns = []
    for name, dtype in frame.dtypes.items():
        if pd.api.types.is_bool_dtype(dtype) or pd.api.types.is_numeric_dtype(dtype):
            columns.append(name)
        else:
            bad.append(f"{name!r} ({dtype})")
    if bad:
        raise DGBoostTypeError(
            "columns must be numeric or bool; these are not: " + ", ".join(bad)
            + ". Encode categorical/string columns as numbers first.")
    names = [str(c) for c in frame.columns]
    if len(set(names)) != len(names):
        raise DGBoostValueError("DataFrame column names must be unique")
    # to_numpy with na_value handles nullable (Int64/boolean/Float64) columns
    values = frame.to_numpy(dtype=np.float32, na_value=np.nan)
    return values, names


def _sparse_to_matrix(matrix) -> np.ndarray:
    coo = matrix.tocoo()
    out = np.full(coo.shape, np.nan, dtype=np.float32)
    out[coo.row, coo.col] = coo.data.astype(np.float32)
    return out


def as_feature_matrix(data: Any, missing: float = np.nan,
                      feature_names: Sequence[str] | None = None) -> tuple[np.ndarray, list[str] | None]:
    """Convert ``data`` to a C-contiguous float32 matrix with NaN for missing values.

    Parameters
    ----------
    data : array-like, DataFrame, sparse matrix, CuPy array or cuDF DataFrame, shape (n, F)
    missing : float
        The value that marks a missing entry (NaN by default).
    feature_names : sequence of str, optional
        Overrides the names found in ``data`` (DataFrame columns).

    Returns
    -------
    values : ndarray of float32, shape (n, F)
    feature_names : list of str or None

    Raises
    ------
    DGBoostTypeError
        Non-numeric columns or an unsupported container.
    DGBoostValueError
        Not two-dimensional, empty, or containing infinite values.
    """
    names = None
    if data is None:
        raise DGBoostTypeError("data is None: expected a 2-D array, DataFrame or sparse matrix")
    module = type(data).__module__.split(".")[0]
    if module == "cudf":
        data = data.to_pandas()
        module = "pandas"
    if module == "cupy":
        data = data.get()
    if module == "pandas" and hasattr(data, "dtypes") and hasattr(data, "columns"):
        values, names = _pandas_to_matrix(data)
    elif module == "pandas" and hasattr(data, "to_frame"):
        raise DGBoostValueError("data is a pandas Series (1-D): expected a 2-D table; use series.to_frame()")
    elif hasattr(data, "tocoo") and hasattr(data, "nnz"):
        values = _sparse_to_matrix(data)
    else:
        try:
            array = np.asarray(data)
        except Exception as exc:  # noqa: BLE001 - the container's own error is not helpful
            raise DGBoostTypeError(f"cannot convert {type(data).__name__} to a numeric matrix: {exc}") from None
        if array.dtype == object or array.dtype.kind in "USVMm":
            raise DGBoostTypeError(
                f"data has dtype {array.dtype}: expected numeric or bool values "
                "(encode strings/categories as numbers first)")
        if array.dtype.kind == "c":
            raise DGBoostTypeError("complex values are not supported")
        values = np.asarray(array, dtype=np.float32)
    if values.ndim != 2:
        raise DGBoostValueError(f"data must be 2-D (rows x features), got {values.ndim}-D with shape {values.shape}")
    if values.shape[0] == 0 or values.shape[1] == 0:
        raise DGBoostValueError(f"data is empty: shape {values.shape}")
    values = np.ascontiguousarray(values, dtype=np.float32)
    if missing is not None and not np.isnan(missing):
        values = np.where(values == np.float32(missing), np.float32(np.nan), values)
    if np.isinf(values).any():
        rows, cols = np.nonzero(np.isinf(values))
        raise DGBoostValueError(
            f"data contains infinite values (first at row {rows[0]}, column {cols[0]}); "
            "replace them or mark them missing")
    if feature_names is not None:
        names = [str(n) for n in feature_names]
        if len(names) != values.shape[1]:
            raise DGBoostValueError(f"{len(names)} feature names given for {values.shape[1]} features")
        if len(set(names)) != len(names):
            raise DGBoostValueError("feature names must be unique")
    return values, names


def _as_vector(name: str, value: Any, n: int, allow_negative: bool = True) -> np.ndarray | None:
    if value is None:
        return None
    module = type(value).__module__.split(".")[0]
    if module == "cupy":
        value = value.get()
    try:
        vec = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise DGBoostTypeError(f"{name} must be numeric, got {type(value).__name__}") from None
    if vec.ndim == 2 and vec.shape[1] == 1:
        vec = vec[:, 0]
    if vec.ndim != 1:
        raise DGBoostValueError(f"{name} must be 1-D, got shape {vec.shape}")
    if vec.shape[0] != n:
        raise DGBoostValueError(f"{name} has {vec.shape[0]} entries but data has {n} rows")
    bad = ~np.isfinite(vec)
    if bad.any():
        raise DGBoostValueError(f"{name} contains NaN or infinite values (first at row {int(np.argmax(bad))})")
    if not allow_negative and (vec < 0).any():
        raise DGBoostValueError(f"{name} contains negative values (first at row {int(np.argmax(vec < 0))})")
    return vec.astype(np.float32)


class DMatrix:
    """Training or prediction data: features plus labels, weights, margins and query groups.

    Parameters
    ----------
    data : array-like, shape (n, F)
        See :func:`as_feature_matrix` for accepted types.
    label, weight, base_margin : array-like, shape (n,), optional
        ``base_margin`` may also be (n, n_groups) for multiclass models.
    group : array-like of int, optional
        Sizes of consecutive query groups (ranking); must sum to ``n``.
    qid : array-like of int, shape (n,), optional
        Query id per row (sorted); an alternative to ``group``.
    feature_names : sequence of str, optional
    missing : float, default NaN
    max_bin : int, optional
        Number of histogram bins; overrides the training parameter for this data.
    ref : DMatrix, optional
        Reuse the quantile cuts of ``ref`` (validation data binned like the training data).
    """

    def __init__(self, data, label=None, weight=None, base_margin=None, group=None, qid=None,
                 feature_names=None, feature_types=None, missing=np.nan, max_bin=None, ref=None,
                 nthread=None, enable_categorical=False):
        self.data, self.feature_names = as_feature_matrix(data, missing, feature_names)
        n = self.data.shape[0]
        self.feature_types = list(feature_types) if feature_types is not None else None
        if self.feature_types is not None and any(t not in ("q", "float", "int", "i") for t in self.feature_types):
            raise DGBoostValueError("only numerical feature types ('q', 'float', 'int') are supported; "
                                    "categorical features are not yet")
        self.label = _as_vector("label", label, n)
        self.weight = _as_vector("weight", weight, n, allow_negative=False)
        self.base_margin = None
        if base_margin is not None:
            bm = np.asarray(base_margin, dtype=np.float32)
            if bm.ndim == 1:
                bm = bm[:, None]
            if bm.ndim != 2 or bm.shape[0] != n or not np.isfinite(bm).all():
                raise DGBoostValueError(f"base_margin must be finite with {n} rows, got shape {bm.shape}")
            self.base_margin = np.ascontiguousarray(bm)
        self.group_ptr = _group_pointer(group, qid, n)
        if max_bin is not None and (int(max_bin) != max_bin or max_bin < 2):
            raise DGBoostValueError(f"max_bin must be an integer >= 2, got {max_bin!r}")
        self.max_bin = None if max_bin is None else int(max_bin)
        if ref is not None and not isinstance(ref, DMatrix):
            raise DGBoostTypeError("ref must be a DMatrix")
        if ref is not None and ref.num_col() != self.num_col():
            raise DGBoostValueError(f"ref has {ref.num_col()} features but data has {self.num_col()}")
        self.ref = ref
        self._binned_cache: dict = {}

    def num_row(self) -> int:
        return int(self.data.shape[0])

    def num_col(self) -> int:
        return int(self.data.shape[1])

    def get_label(self) -> np.ndarray:
        return np.empty(0, np.float32) if self.label is None else self.label

    def get_weight(self) -> np.ndarray:
        return np.empty(0, np.float32) if self.weight is None else self.weight

    def get_group(self) -> np.ndarray | None:
        return None if self.group_ptr is None else np.diff(self.group_ptr)

    def set_label(self, label) -> None:
        self.label = _as_vector("label", label, self.num_row())

    def set_weight(self, weight) -> None:
        self.weight = _as_vector("weight", weight, self.num_row(), allow_negative=False)

    def set_group(self, group) -> None:
        self.group_ptr = _group_pointer(group, None, self.num_row())

    def __repr__(self) -> str:
        return f"DMatrix(rows={self.num_row()}, features={self.num_col()}, label={self.label is not None})"


def _group_pointer(group, qid, n: int) -> np.ndarray | None:
    if group is not None and qid is not None:
        raise DGBoostValueError("give either group or qid, not both")
    if qid is not None:
        q = np.asarray(qid)
        if q.shape != (n,):
            raise DGBoostValueError(f"qid must have one entry per row ({n}), got shape {q.shape}")
        if (np.diff(q) < 0).any():
            raise DGBoostValueError("qid must be sorted (rows of a query must be consecutive)")
        _, sizes = np.unique(q, return_counts=True)
        group = sizes
    if group is None:
        return None
    sizes = np.asarray(group)
    if sizes.ndim != 1 or sizes.dtype.kind not in "iu" and not np.all(np.mod(sizes, 1) == 0):
        raise DGBoostValueError("group must be a 1-D array of integer group sizes")
    sizes = sizes.astype(np.int64)
    if (sizes < 0).any():
        raise DGBoostValueError("group sizes must be non-negative")
    if sizes.sum() != n:
        raise DGBoostValueError(f"group sizes sum to {int(sizes.sum())} but data has {n} rows")
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
