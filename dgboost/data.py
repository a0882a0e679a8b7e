"""Input adapters: everything a user may pass becomes a float32 row-major matrix plus meta info.

Accepted: NumPy arrays (numeric or bool), pandas DataFrames (numeric, bool and nullable
numeric columns), scipy.sparse CSR/CSC (absent entries are missing, as in XGBoost; densified
on the host), CuPy arrays and cuDF DataFrames, and anything with ``__array__``. Values equal
to ``missing`` become NaN. Infinite values are rejected (XGBoost does the same) because no
cut can separate them meaningfully.

Where the matrix lives: CuPy and cuDF feature data stay on their GPU (the matrix is then a
C-contiguous float32 CuPy array; conversion, ``missing`` and the inf check run on the
device, at the cost of one scalar read), everything else becomes a NumPy array. Labels,
weights, base margins, groups and query ids are always brought to the host as NumPy: they
are one or a few values per row, and their validation is NumPy code.
"""

from __future__ import annotations

import copy
import math
import os
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ._array import array_module, is_device_array
from ._category_codes import (
    CATEGORICAL_TYPE,
    apply_recode,
    categories_from_list,
    categories_to_list,
    check_numeric_codes,
    checked_categories,
    codes_as_float32,
    is_categorical_dtype,
    is_category_column,
    is_string_dtype,
    recode_map,
    require_flag,
)
from ._compat import library_of
from .errors import DGBoostError, DGBoostTypeError, DGBoostValueError
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
]


#: Entries of the matrix checked for infinite values at once (bounds the check's temporary).
_INF_CHECK_ENTRIES = 1 << 25


def small_to_host(value: Any) -> Any:
    """A CuPy array or cuDF Series/DataFrame as NumPy/pandas; anything else unchanged.

    Used for the per-row meta information only (labels, weights, margins, groups, qid).
    cuDF nulls become NaN (``to_pandas`` of a numeric column with nulls gives float64 NaN,
    or a nullable pandas dtype that the checks below reject as non-finite or non-numeric).
    """
    if value is None:
        return None
    if is_device_array(value):
        return value.get()
    if library_of(value) == "cudf" and hasattr(value, "to_pandas"):
        return value.to_pandas()
    return value


def _numeric_dtype(dtype) -> bool:
    """Numeric (not complex) or bool, for NumPy, pandas and cuDF column dtypes alike."""
    import pandas as pd

    try:
        ok = pd.api.types.is_bool_dtype(dtype) or pd.api.types.is_numeric_dtype(dtype)
    except Exception:  # noqa: BLE001 - a dtype pandas does not understand is not numeric to us
        return False
    return bool(ok) and not pd.api.types.is_complex_dtype(dtype)


def _check_columns(frame, enable_categorical: bool = False) -> tuple[list[str], list[int]]:
    """Names of the columns of a pandas or cuDF frame, and the positions of its categorical ones.

    Raises
    ------
    DGBoostTypeError
        A categorical column without ``enable_categorical`` (naming the column and the flag), a
        string / object column (naming it and saying how to make it categorical), or any other
        non-numeric column.
    """
    categorical, bad = [], []
    for j, (name, dtype) in enumerate(frame.dtypes.items()):
        if is_category_column(dtype):
            if not enable_categorical:
                raise require_flag(str(name), dtype)
            categorical.append(j)
        elif is_string_dtype(dtype):
            if enable_categorical:
                raise DGBoostTypeError(
                    f"column {str(name)!r} holds strings ({dtype}); convert it to a category column "
                    f"(df[{str(name)!r}].astype('category')) to use it as a categorical feature"
                )
            raise require_flag(str(name), dtype)
        elif not _numeric_dtype(dtype):
            bad.append(f"{name!r} ({dtype})")
    if bad:
        raise DGBoostTypeError(
            "columns must be numeric, bool or categorical; these are not: "
            + ", ".join(bad)
            + ". Encode them as numbers or make them category columns (enable_categorical=True)."
        )
    names = [str(c) for c in frame.columns]
    if len(set(names)) != len(names):
        raise DGBoostValueError("DataFrame column names must be unique")
    return names, categorical


def _numeric_type_name(dtype) -> str:
    """XGBoost's feature type of a numeric DataFrame column: ``"i"`` (bool), ``"int"`` or ``"float"``."""
    import pandas as pd

    if pd.api.types.is_bool_dtype(dtype):
        return "i"
    return "int" if pd.api.types.is_integer_dtype(dtype) else "float"


def _pandas_to_matrix(frame, enable_categorical: bool = False) -> tuple[np.ndarray, list[str], dict]:
    """A pandas DataFrame as float32 (n, F), its names, and {position: categories} of its
    categorical columns (their codes, NaN for missing, in the matrix)."""
    names, categorical = _check_columns(frame, enable_categorical)
    if not categorical:
        # to_numpy with na_value handles nullable (Int64/boolean/Float64) columns
        return frame.to_numpy(dtype=np.float32, na_value=np.nan), names, {}
    values = np.empty(frame.shape, dtype=np.float32)
    numeric = [j for j in range(frame.shape[1]) if j not in categorical]
    if numeric:
        values[:, numeric] = frame.iloc[:, numeric].to_numpy(dtype=np.float32, na_value=np.nan)
    cats = {}
    for j in categorical:
        column = frame.iloc[:, j]
        if not is_categorical_dtype(column.dtype):  # an Arrow dictionary column
            column = column.astype("category")
        cats[j] = checked_categories(names[j], column.cat.categories)
        values[:, j] = codes_as_float32(column.cat.codes.to_numpy())
    return values, names, cats


def _cudf_column_to_cupy(series):
    """One cuDF column as a float32 CuPy vector with NaN for nulls.

    The cast comes first: ``fillna(nan)`` on an integer or bool column cannot hold NaN,
    while a float32 column keeps the null mask through the cast and fills it exactly.
    """
    column = series.astype("float32")
    try:
        return column.to_cupy(na_value=np.nan)
    except TypeError:  # a cuDF without to_cupy(na_value=...): fill the nulls, then take .values
        return column.fillna(np.nan).values


def _cudf_to_matrix(frame, enable_categorical: bool = False):
    """A cuDF DataFrame as a C-contiguous float32 CuPy matrix (n, F), converted on its GPU, its
    names, and {position: categories} of its categorical columns (codes in the matrix).

    Columns are written one by one into a column-major buffer (each write contiguous),
    then transposed once into the row-major layout the backends read. A categorical column
    writes its codes (nulls as NaN); only its categories come to the host.
    """
    import cupy

    names, categorical = _check_columns(frame, enable_categorical)
    n, n_features = len(frame), len(names)
    out = cupy.empty((n, n_features), dtype=cupy.float32, order="F")
    cats = {}
    for j, name in enumerate(frame.columns):
        if j in categorical:
            column = frame[name]
            cats[j] = checked_categories(names[j], column.cat.categories)
            codes = _cudf_column_to_cupy(column.cat.codes)
            codes[codes < 0] = cupy.float32(np.nan)  # a cuDF that gives -1 (not null) for missing
            out[:, j] = codes
        else:
            out[:, j] = _cudf_column_to_cupy(frame[name])
    return cupy.ascontiguousarray(out), names, cats


def _cupy_to_matrix(data):
    """A CuPy array as float32 on its own device (a no-op for C-contiguous float32 input)."""
    import cupy

    if data.dtype.kind == "c":
        raise DGBoostTypeError("complex values are not supported")
    if data.dtype.kind not in "biuf":
        raise DGBoostTypeError(f"data has dtype {data.dtype}: expected numeric or bool values")
    return cupy.ascontiguousarray(data, dtype=cupy.float32)


def _sparse_to_matrix(matrix) -> np.ndarray:
    coo = matrix.tocoo()
    out = np.full(coo.shape, np.nan, dtype=np.float32)
    out[coo.row, coo.col] = coo.data.astype(np.float32)
    return out


@dataclass
class FeatureTable:
    """Features as the engine reads them, with what is known about each column.

    Attributes
    ----------
    values : numpy.ndarray or cupy.ndarray of float32, shape (n, F)
        C-contiguous; NaN for missing; a categorical feature holds its category codes.
    names : list of str or None
    types : list of str or None
        Feature types (``"c"`` for a categorical feature); None when neither given nor
        implied by categorical columns.
    categories : list of (numpy.ndarray or None), length F, or None
        Per feature: None for a numeric one, else the category values in code order
        (``arange(K)`` for codes given as numbers). None when no feature is categorical.
    coded : list of bool, length F, or None
        True for a categorical feature whose codes were given as numbers (no category values
        are known: prediction takes such codes as they are). None with ``categories``.
    """

    values: Any
    names: list[str] | None
    types: list[str] | None = None
    categories: list[np.ndarray | None] | None = None
    coded: list[bool] | None = None


def _frame_matrix(data: Any, enable_categorical: bool) -> tuple[Any, list[str] | None, dict]:
    """The float32 matrix, names and {position: categories} of any accepted container."""
    module = library_of(data)
    if module == "cudf" and hasattr(data, "dtypes") and hasattr(data, "columns"):
        return _cudf_to_matrix(data, enable_categorical)
    if module in ("pandas", "cudf") and hasattr(data, "to_frame"):
        kind = "a pandas" if module == "pandas" else "a cuDF"
        raise DGBoostValueError(f"data is {kind} Series (1-D): expected a 2-D table; use series.to_frame()")
    if is_device_array(data):
        return _cupy_to_matrix(data), None, {}
    if module == "pandas" and hasattr(data, "dtypes") and hasattr(data, "columns"):
        return _pandas_to_matrix(data, enable_categorical)
    if hasattr(data, "tocoo") and hasattr(data, "nnz"):
        return _sparse_to_matrix(data), None, {}
    try:
        array = np.asarray(data)
    except Exception as exc:  # noqa: BLE001 - the container's own error is not helpful
        raise DGBoostTypeError(f"cannot convert {type(data).__name__} to a numeric matrix: {exc}") from None
    if array.dtype == object or array.dtype.kind in "USVMm":
        raise DGBoostTypeError(
            f"data has dtype {array.dtype}: expected numeric or bool values "
            "(encode strings as numbers, or pass a DataFrame with category columns and enable_categorical=True)"
        )
    if array.dtype.kind == "c":
        raise DGBoostTypeError("complex values are not supported")
    return np.asarray(array, dtype=np.float32), None, {}


def read_features(
    data: Any,
    missing: float = np.nan,
    feature_names: Sequence[str] | None = None,
    *,
    feature_types: Sequence[str] | None = None,
    enable_categorical: bool = False,
    allow_empty_rows: bool = False,
) -> FeatureTable:
    """Convert ``data`` to a C-contiguous float32 matrix, with its names, types and categories.

    Parameters
    ----------
    data : array-like, DataFrame, Arrow Table, sparse matrix, CuPy array or cuDF DataFrame, shape (n, F)
    missing : float
        The value that marks a missing entry (NaN by default). It applies to numeric columns and
        to codes given as numbers; a category column's missing entries are its nulls.
    feature_names : sequence of str, optional
        Overrides the names found in ``data`` (DataFrame columns).
    feature_types : sequence of str, optional
        ``"q"``, ``"float"``, ``"int"``, ``"i"`` (numeric) or ``"c"`` (categorical). A category
        column must be ``"c"``; a numeric column typed ``"c"`` holds category codes (integers
        0 to 2**24 - 1, NaN missing). Default: ``"c"`` for category columns (then the other
        columns get their dtype's type, as XGBoost), None for data without them.
    enable_categorical : bool
        Accept pandas / cuDF category columns and Arrow dictionary columns (else they are an
        error that names the column and this flag).
    allow_empty_rows : bool
        Accept 0 rows (never 0 features): a rank of a distributed job may hold no rows.

    Returns
    -------
    FeatureTable
        ``values`` is a CuPy array on the input's GPU for CuPy and cuDF input, NumPy otherwise.

    Raises
    ------
    DGBoostTypeError
        Non-numeric columns, category or string columns without ``enable_categorical``, or an
        unsupported container.
    DGBoostValueError
        Not two-dimensional, empty, infinite values, bad category values or codes (see
        :mod:`dgboost._category_codes`), or types that contradict the columns.
    """
    if data is None:
        raise DGBoostTypeError("data is None: expected a 2-D array, DataFrame or sparse matrix")
    if library_of(data) == "pyarrow" and hasattr(data, "schema") and hasattr(data, "to_pandas"):
        # a Table or RecordBatch: dictionary columns become pandas categoricals (one dictionary
        # over all chunks), the rest NumPy; then the pandas rules apply
        _check_arrow_dictionaries(data)
        data = data.to_pandas()
    values, names, frame_cats = _frame_matrix(data, enable_categorical)
    if values.ndim != 2:
        raise DGBoostValueError(f"data must be 2-D (rows x features), got {values.ndim}-D with shape {values.shape}")
    if (values.shape[0] == 0 and not allow_empty_rows) or values.shape[1] == 0:
        raise DGBoostValueError(f"data is empty: shape {values.shape}")
    # the same code for both devices: xp is numpy or cupy, and stays on the data's device
    xp = array_module(values)
    values = xp.ascontiguousarray(values, dtype=xp.float32)
    if missing is not None and not math.isnan(missing):
        marked = values == xp.float32(missing)
        if frame_cats:  # a category column's codes are never the missing value
            marked[:, xp.asarray(sorted(frame_cats))] = False
        values = xp.where(marked, xp.float32(np.nan), values)
    _check_finite(values, xp)
    if feature_names is not None:
        names = _checked_names(feature_names, values.shape[1])
    table = FeatureTable(values, names)
    _categorical_info(table, data, feature_types, frame_cats)
    return table


def aligned_codes(
    source: Any, categories: list | None, coded: list[bool] | None, what: str = "the training data"
) -> Any:
    """The values of ``source`` with its categorical features re-coded to ``categories``.

    Parameters
    ----------
    source : DMatrix or FeatureTable
        The data, with its own ``categories`` (and which of them are codes given as numbers).
    categories : list of (numpy.ndarray or list or None), length F, or None
        The categories the codes must refer to (a training matrix's, a model's). None for a
        numeric feature, and for a categorical feature known only by codes (see ``coded``).
    coded : list of bool or None
        True where a categorical feature of the target is known only by codes: the source's
        codes are then taken as they are.
    what : str
        What the target is, for the error messages ("the training data", "the model").

    Returns
    -------
    numpy.ndarray or cupy.ndarray of float32, shape (n, F)
        ``source``'s values itself when nothing needs re-coding, else a re-coded copy (same
        device). A code given as a number is taken as it is (XGBoost's rule for NumPy data).

    Raises
    ------
    DGBoostValueError
        A category column where the target has a numeric feature, or a category that the
        target's categories do not hold (XGBoost 3.4.1 refuses both).
    """
    values = source.data if isinstance(source, DMatrix) else source.values
    mine = source.categories
    if mine is None:
        return values
    names = (source.feature_names if isinstance(source, DMatrix) else source.names) or [
        f"f{j}" for j in range(values.shape[1])
    ]
    src_coded = source._coded if isinstance(source, DMatrix) else source.coded
    out = values
    for j, own in enumerate(mine):
        if own is None or src_coded[j]:
            continue  # numeric, or codes given as numbers: taken as they are
        target = None if categories is None else categories[j]
        if target is None:
            if coded is not None and coded[j]:
                continue  # the target knows this feature only by its codes
            raise DGBoostValueError(
                f"column {names[j]!r} is a category column but it is a numeric feature in {what}; "
                "give it the column's numeric values"
            )
        target = target if isinstance(target, np.ndarray) else categories_from_list(names[j], target)
        mapping = recode_map(names[j], own, target, what)
        if mapping.size and not np.array_equal(mapping, np.arange(mapping.size)):
            xp = array_module(out)
            if out is values:
                out = values.copy()
            out[:, j] = apply_recode(xp.ascontiguousarray(out[:, j]), mapping)
    return out


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


def model_categories(
    feature_types: Sequence[str] | None, categories: Sequence | None
) -> tuple[list, list[bool]] | None:
    """A model's categories as :func:`aligned_codes` takes them (``categories``, ``coded``).

    Parameters
    ----------
    feature_types : sequence of str or None
        The model's feature types (``"c"`` for a categorical feature).
    categories : sequence of (list or None) or None
        The model's category values per feature (its meta ``"categories"``); None for a
        numeric feature and for a categorical one known only by codes.

    Returns
    -------
    (categories, coded) or None
        None for a model without categorical features.
    """
    types = list(feature_types or [])
    if CATEGORICAL_TYPE not in types:
        return None
    values = list(categories) if categories is not None else [None] * len(types)
    return values, [t == CATEGORICAL_TYPE and v is None for t, v in zip(types, values)]


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


def checked_feature_types(
    feature_types: Sequence[str] | None, n_features: int, frame: Any = None, enable_categorical: bool = True
) -> list[str] | None:
    """Feature types of a matrix-to-be, checked as :class:`DMatrix` checks them, before any data is read.

    Parameters
    ----------
    feature_types : sequence of str or None
        As given by the user.
    n_features : int
    frame : DataFrame-like, optional
        A pandas / cuDF frame or a Dask DataFrame's ``_meta``: its category columns must be
        ``"c"`` (and are when ``feature_types`` is None; the other columns then get their
        dtype's type, as XGBoost).
    enable_categorical : bool
        Whether the frame's category columns are accepted.

    Returns
    -------
    list of str or None

    Raises
    ------
    DGBoostTypeError, DGBoostValueError
        As :class:`DMatrix` (a category or string column, a bad type name or count).
    """
    categorical = _check_columns(frame, enable_categorical)[1] if frame is not None else []
    if feature_types is None:
        if not categorical:
            return None
        dtypes = list(frame.dtypes)
        return [CATEGORICAL_TYPE if j in categorical else _numeric_type_name(dtypes[j]) for j in range(n_features)]
    types = _checked_types(feature_types, n_features)
    for j in categorical:
        if types[j] != CATEGORICAL_TYPE:
            raise DGBoostValueError(
                f"column {str(frame.columns[j])!r} is a category column but feature_types gives it {types[j]!r}; "
                "give it 'c' (or leave feature_types out)"
            )
    return types


def _check_arrow_dictionaries(table) -> None:
    """Refuse a dictionary column with a null among its values (pandas could not even hold it)."""
    for j, field in enumerate(table.schema):
        if type(field.type).__name__ != "DictionaryType":
            continue
        column = table.column(j)
        chunks = column.chunks if hasattr(column, "chunks") else [column]
        if any(chunk.dictionary.null_count for chunk in chunks):
            raise DGBoostValueError(
                f"column {field.name!r}: a category value is missing (a null in its dictionary); a missing "
                "value is not a category: leave those rows null instead"
            )


def _check_finite(values, xp) -> None:
    """Refuse infinite values, naming the first (row, column)."""
    # in row chunks: a mask of the whole matrix would be a large temporary (280 MB for
    # 10M x 28) on top of the data; on a GPU one scalar read a chunk
    step = max(1, _INF_CHECK_ENTRIES // values.shape[1])
    for start in range(0, values.shape[0], step):
        infinite = xp.isinf(values[start : start + step])
        if bool(infinite.any()):  # the position only when raising
            first = int(xp.argmax(infinite.ravel()))
            row, col = divmod(first, values.shape[1])
            raise DGBoostValueError(
                f"data contains infinite values (first at row {start + row}, column {col}); "
                "replace them or mark them missing"
            )


def _categorical_info(table: FeatureTable, data: Any, feature_types, frame_cats: dict) -> None:
    """Set ``table.types``, ``categories`` and ``coded`` from the given types and the category columns."""
    n_features = table.values.shape[1]
    types = None if feature_types is None else _checked_types(feature_types, n_features)
    label = table.names or [f"f{j}" for j in range(n_features)]
    if types is None and frame_cats:
        dtypes = list(data.dtypes) if hasattr(data, "dtypes") else None
        types = [
            CATEGORICAL_TYPE if j in frame_cats else "float" if dtypes is None else _numeric_type_name(dtypes[j])
            for j in range(n_features)
        ]
    table.types = types
    if types is None or CATEGORICAL_TYPE not in types:
        if frame_cats:  # only when types were given: the inferred ones say "c"
            j = min(frame_cats)
            raise DGBoostValueError(
                f"column {label[j]!r} is a category column but feature_types gives it {types[j]!r}; "
                "give it 'c' (or leave feature_types out)"
            )
        return
    categories: list[np.ndarray | None] = [None] * n_features
    coded = [False] * n_features
    for j, kind in enumerate(types):
        if j in frame_cats:
            if kind != CATEGORICAL_TYPE:
                raise DGBoostValueError(
                    f"column {label[j]!r} is a category column but feature_types gives it {kind!r}; "
                    "give it 'c' (or leave feature_types out)"
                )
            categories[j] = frame_cats[j]
        elif kind == CATEGORICAL_TYPE:
            k = check_numeric_codes(label[j], table.values[:, j])
            categories[j], coded[j] = np.arange(k, dtype=np.int64), True
    table.categories, table.coded = categories, coded


def as_feature_matrix(
    data: Any, missing: float = np.nan, feature_names: Sequence[str] | None = None, allow_empty_rows: bool = False
) -> tuple[Any, list[str] | None]:
    """Convert ``data`` to a C-contiguous float32 matrix with NaN for missing values (numeric data only).

    Parameters
    ----------
    data : array-like, DataFrame, sparse matrix, CuPy array or cuDF DataFrame, shape (n, F)
    missing : float
        The value that marks a missing entry (NaN by default).
    feature_names : sequence of str, optional
        Overrides the names found in ``data`` (DataFrame columns).
    allow_empty_rows : bool
        Accept 0 rows (never 0 features): a rank of a distributed job may hold no rows.

    Returns
    -------
    values : ndarray of float32, shape (n, F)
        A CuPy array on the input's GPU for CuPy and cuDF input, a NumPy array otherwise.
    feature_names : list of str or None

    Raises
    ------
    DGBoostTypeError
        Non-numeric columns (category columns included: :func:`read_features` takes them)
        or an unsupported container.
    DGBoostValueError
        Not two-dimensional, empty, or containing infinite values.
    """
    table = read_features(data, missing, feature_names, allow_empty_rows=allow_empty_rows)
    return table.values, table.names


def _as_vector(name: str, value: Any, n: int, allow_negative: bool = True) -> np.ndarray | None:
    if value is None:
        return None
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
        See :func:`as_feature_matrix` for accepted types. CuPy and cuDF data stay on
        their GPU.
    label, weight, base_margin : array-like, shape (n,), optional
        ``base_margin`` may also be (n, n_groups) for multiclass models. CuPy / cuDF
        values are copied to the host (they are small and validated with NumPy).
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
    base_margin : numpy.ndarray of float32, shape (n, n_groups), or None
    group_ptr : numpy.ndarray of int64, shape (n_groups + 1,), or None
    """

    _allow_empty_rows = False  # a user's DMatrix with no rows is a mistake; a rank's is not

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
            new["feature_names"] = _checked_names(feature_names, self.num_col())
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
        _categorical_info(table, None, feature_types, known)
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


def _checked_names(names: Sequence[str], n_features: int) -> list[str]:
    out = [str(name) for name in names]
    if len(out) != n_features:
        raise DGBoostValueError(f"{len(out)} feature names given for {n_features} features")
    if len(set(out)) != len(out):
        raise DGBoostValueError("feature names must be unique")
    return out


def _checked_types(types: Sequence[str], n_features: int | None) -> list[str]:
    """Feature types (numerical or ``"c"``); their count is checked when ``n_features`` is given."""
    if isinstance(types, str):
        raise DGBoostValueError(f"feature_types must be a sequence of str (one per feature), got the string {types!r}")
    out = [str(t) for t in types]
    bad = [t for t in out if t not in ("q", "float", "int", "i", CATEGORICAL_TYPE)]
    if bad:
        raise DGBoostValueError(
            f"unknown feature type {bad[0]!r}: expected 'q', 'float', 'int', 'i' (numerical) or 'c' (categorical)"
        )
    if n_features is not None and len(out) != n_features:
        raise DGBoostValueError(f"{len(out)} feature types given for {n_features} features")
    return out


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
