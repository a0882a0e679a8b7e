"""Input adapters: everything a user may pass becomes a float32 row-major matrix with its
names, feature types and categories (:class:`FeatureTable`).

Accepted: NumPy arrays (numeric or bool), pandas DataFrames (numeric, bool, nullable numeric
and category columns), pyarrow Tables (dictionary columns are categories), scipy.sparse
CSR/CSC (absent entries are missing, as in XGBoost; densified on the host), CuPy arrays and
cuDF DataFrames, and anything with ``__array__``. Values equal to ``missing`` become NaN.
Infinite values are rejected (XGBoost does the same) because no cut can separate them
meaningfully. A categorical feature holds its category codes (docs/categorical.md;
:mod:`dgboost._category_codes` holds the rules about categories).

Where the matrix lives: CuPy and cuDF feature data stay on their GPU (the matrix is then a
C-contiguous float32 CuPy array; conversion, ``missing`` and the inf check run on the
device, at the cost of one scalar read), everything else becomes a NumPy array.
:mod:`dgboost.data` builds the DMatrix classes on these adapters.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ._array import array_module, is_device_array
from ._category_codes import (
    CATEGORICAL_TYPE,
    apply_recode,
    categories_from_list,
    check_numeric_codes,
    checked_categories,
    codes_as_float32,
    is_categorical_dtype,
    is_category_column,
    is_string_dtype,
    object_words,
    recode_map,
    require_flag,
)
from ._compat import library_of
from .errors import DGBoostTypeError, DGBoostValueError

__all__ = [
    "FeatureTable",
    "aligned_codes",
    "as_feature_matrix",
    "categorical_info",
    "checked_feature_types",
    "checked_names",
    "checked_types",
    "model_categories",
    "read_features",
    "small_to_host",
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
                    f"column {str(name)!r} holds strings{object_words(dtype)} ({dtype}); convert it to a "
                    f"category column (df[{str(name)!r}].astype('category')) to use it as a categorical feature"
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
        names = checked_names(feature_names, values.shape[1])
    table = FeatureTable(values, names)
    categorical_info(table, data, feature_types, frame_cats)
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
    table = isinstance(source, FeatureTable)  # else a DMatrix (data, feature_names, _coded)
    values = source.values if table else source.data
    mine = source.categories
    if mine is None:
        return values
    names = (source.names if table else source.feature_names) or [f"f{j}" for j in range(values.shape[1])]
    src_coded = source.coded if table else source._coded
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
    types = checked_types(feature_types, n_features)
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
    """Refuse infinite values, naming the first (row, column); ``values`` is C-contiguous
    float32 (n, F)."""
    if xp is not np:  # one kernel and one word read back, no mask (CUDABackend.first_infinite)
        from .backend import array_backend

        first = array_backend(values).first_infinite(values)
        if first < values.size:
            _raise_infinite(*divmod(first, values.shape[1]))
        return
    # in row chunks: a mask of the whole matrix would be a large temporary (280 MB for
    # 10M x 28) on top of the data
    step = max(1, _INF_CHECK_ENTRIES // values.shape[1])
    for start in range(0, values.shape[0], step):
        infinite = np.isinf(values[start : start + step])
        if infinite.any():  # the position only when raising
            row, col = divmod(int(np.argmax(infinite.ravel())), values.shape[1])
            _raise_infinite(start + row, col)


def _raise_infinite(row: int, col: int) -> None:
    raise DGBoostValueError(
        f"data contains infinite values (first at row {row}, column {col}); replace them or mark them missing"
    )


def categorical_info(table: FeatureTable, data: Any, feature_types, frame_cats: dict) -> None:
    """Set ``table.types``, ``categories`` and ``coded`` from the given types and the category columns."""
    n_features = table.values.shape[1]
    types = None if feature_types is None else checked_types(feature_types, n_features)
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


def checked_names(names: Sequence[str], n_features: int) -> list[str]:
    out = [str(name) for name in names]
    if len(out) != n_features:
        raise DGBoostValueError(f"{len(out)} feature names given for {n_features} features")
    if len(set(out)) != len(out):
        raise DGBoostValueError("feature names must be unique")
    return out


def checked_types(types: Sequence[str], n_features: int | None) -> list[str]:
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
