"""Category codes: how a categorical column becomes float32 codes, and how codes are re-coded.

A categorical feature holds its category *code* as float32 (0..K-1, NaN for missing) in the
value matrix (docs/design.md §11); its *categories* are the values in code order (pandas'
``Categorical.categories``). This module holds every rule about them, for every entry point
(DMatrix, Booster.predict, Dask partitions, the CLI):

- which category values are accepted (:func:`checked_categories`): strings, or integers,
  one kind per column, no missing value among them, at most
  :data:`MAX_CATEGORIES` (XGBoost 3.4.1 refuses floating-point and mixed categories too);
- codes given as numbers (``feature_types`` ``"c"`` on numeric data, :func:`check_numeric_codes`):
  non-negative integers below :data:`MAX_CODE`, the categories then ``arange(K)``;
- re-coding (:func:`recode_map`): codes against one set of categories as codes against another,
  where a category absent from the target set is an error naming the column and the value
  (XGBoost 3.4.1 refuses a category not seen in training in the same way);
- agreeing on one set across the partitions of a Dask collection (:func:`union_categories`):
  the sorted union, the order ``pandas`` gives ``astype("category")`` of the whole column.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .errors import DGBoostTypeError, DGBoostValueError

__all__ = [
    "MAX_CATEGORIES",
    "MAX_CODE",
    "CATEGORICAL_TYPE",
    "is_categorical_dtype",
    "is_category_column",
    "is_string_dtype",
    "checked_categories",
    "check_numeric_codes",
    "codes_as_float32",
    "recode_map",
    "apply_recode",
    "union_categories",
    "categories_equal",
    "categories_to_list",
    "categories_from_list",
    "require_flag",
    "object_words",
]

#: Most categories a feature may have: bins are uint16 and 65535 marks a missing value.
MAX_CATEGORIES = 65534
#: Codes given as numbers must be below this (float32 holds every integer up to 2**24 exactly).
MAX_CODE = 1 << 24
#: The feature type of a categorical feature (XGBoost's).
CATEGORICAL_TYPE = "c"


def is_categorical_dtype(dtype: Any) -> bool:
    """Whether ``dtype`` is a pandas or cuDF categorical dtype (told by name: no import of cuDF)."""
    name = type(dtype).__name__
    return name == "CategoricalDtype" or getattr(dtype, "name", None) == "category"


def is_category_column(dtype: Any) -> bool:
    """A pandas / cuDF categorical dtype, or a pandas Arrow dictionary dtype."""
    if is_categorical_dtype(dtype):
        return True
    arrow_type = getattr(dtype, "pyarrow_dtype", None)
    return arrow_type is not None and type(arrow_type).__name__ == "DictionaryType"


def is_string_dtype(dtype: Any) -> bool:
    """Whether ``dtype`` is an object or string column's dtype (pandas, cuDF or NumPy)."""
    if getattr(dtype, "kind", None) in ("O", "U", "S"):
        return True
    name = str(getattr(dtype, "name", dtype))
    return name in ("object", "string", "str") or name.startswith("string") or name.startswith("large_string")


def _values_kind(values: np.ndarray) -> str:
    """'string', 'integer', 'boolean', 'floating', 'empty' or 'mixed' for 1-D category values."""
    if values.size == 0:
        return "empty"
    if values.dtype.kind in "iu":
        return "integer"
    if values.dtype.kind == "b":
        return "boolean"
    if values.dtype.kind == "f":
        return "floating"
    if values.dtype.kind in "US":
        return "string"
    kinds = set()
    for v in values:
        if isinstance(v, str):
            kinds.add("string")
        elif isinstance(v, (bool, np.bool_)):
            kinds.add("boolean")
        elif isinstance(v, (int, np.integer)):
            kinds.add("integer")
        elif isinstance(v, (float, np.floating)):
            kinds.add("floating")
        else:
            kinds.add(type(v).__name__)
    return kinds.pop() if len(kinds) == 1 else "mixed"


def checked_categories(column: str, categories: Any) -> np.ndarray:
    """The category values of ``column`` as a 1-D NumPy array, after checking them.

    Parameters
    ----------
    column : str
        The column's name, for the error messages.
    categories : array-like, shape (K,)
        The values in code order (a pandas / cuDF Index, an Arrow array, a list).

    Returns
    -------
    numpy.ndarray, shape (K,)
        int64 for integer values, object (Python ``str``) for strings.

    Raises
    ------
    DGBoostValueError
        Missing values (NaN / None / null) among the categories, values of more than one kind
        (strings and numbers), floating-point or boolean values, repeated values, or more than
        :data:`MAX_CATEGORIES` values, or integers outside the signed 64-bit range.
    """
    if hasattr(categories, "to_pandas") and not hasattr(categories, "to_numpy"):
        categories = categories.to_pandas()  # a cuDF Index or an Arrow array
    elif hasattr(categories, "to_pandas") and type(categories).__module__.startswith(("cudf", "pyarrow")):
        categories = categories.to_pandas()
    if hasattr(categories, "to_numpy"):
        values = categories.to_numpy()
    elif isinstance(categories, np.ndarray):
        values = categories
    else:  # a list: object, so that strings and numbers stay apart
        values = np.asarray(categories, dtype=object)
    values = np.asarray(values).reshape(-1)
    if values.dtype == object and values.size:
        missing = [i for i, v in enumerate(values) if v is None or (isinstance(v, float) and np.isnan(v))]
        if missing:
            raise DGBoostValueError(
                f"column {column!r}: a category value is missing (NaN/None at category {missing[0]}); "
                "a missing value is not a category: leave those rows missing (NaN) instead"
            )
    elif values.dtype.kind == "f" and np.isnan(values).any():
        raise DGBoostValueError(
            f"column {column!r}: NaN is one of its category values; a missing value is not a category: "
            "leave those rows missing (NaN) instead"
        )
    kind = _values_kind(values)
    if kind == "floating":
        raise DGBoostValueError(
            f"column {column!r}: its categories are floating-point numbers ({values[:3].tolist()}...); "
            "use strings or integers as category values (as XGBoost requires)"
        )
    if kind == "boolean":  # XGBoost's model format has no boolean categories: refused, as XGBoost does
        raise DGBoostValueError(
            f"column {column!r}: its categories are booleans ({values[:2].tolist()}); use strings or integers "
            f"as category values (as XGBoost requires), e.g. df[{column!r}].cat.rename_categories(str)"
        )
    if kind not in ("string", "integer", "empty"):
        sample = [f"{v!r} ({type(v).__name__})" for v in values[:4]]
        raise DGBoostValueError(
            f"column {column!r}: its categories mix types ({', '.join(sample)}...); every category "
            "value of a column must be a string, or every one an integer: convert the column with "
            "astype(str) first"
        )
    if values.size > MAX_CATEGORIES:
        raise DGBoostValueError(
            f"column {column!r} has {values.size} categories; at most {MAX_CATEGORIES} are supported "
            "(a category is a histogram bin, and bins are 16-bit); group rare categories first"
        )
    if kind == "string":
        values = np.array([str(v) for v in values], dtype=object)
    elif kind == "integer":
        values = _as_int64(column, values)
    elif kind == "empty":
        values = np.empty(0, dtype=object)
    if len(set(values.tolist())) != values.size:
        raise DGBoostValueError(f"column {column!r}: its category values repeat a value")
    return values


def _as_int64(column: str, values: np.ndarray) -> np.ndarray:
    """Integer category values as int64, refusing any outside its range (a uint64 value of
    2**63 or more would otherwise wrap to a negative one: the model would keep another value,
    where XGBoost refuses the column)."""
    low, high = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    outside = [v for v in values.tolist() if not low <= int(v) <= high]
    if outside:
        raise DGBoostValueError(
            f"column {column!r}: category value {outside[0]} is outside the signed 64-bit integers "
            "(as XGBoost, dgboost keeps integer categories as int64); use strings as category values, "
            f"e.g. df[{column!r}].cat.rename_categories(str)"
        )
    return values.astype(np.int64)


def check_numeric_codes(column: str, codes: np.ndarray) -> int:
    """Check category codes given as numbers and return K (the largest code + 1; 0 when all missing).

    Parameters
    ----------
    column : str
        The column's name, for the error messages.
    codes : numpy.ndarray or cupy.ndarray of float32, shape (n,)
        NaN for missing.

    Raises
    ------
    DGBoostValueError
        A negative, non-integer or infinite code, a code of :data:`MAX_CODE` (2**24) or more, or
        a largest code that makes more than :data:`MAX_CATEGORIES` categories.
    """
    xp = np if isinstance(codes, np.ndarray) else __import__("cupy")
    present = codes[~xp.isnan(codes)]
    if present.size == 0:
        return 0
    bad = (present < 0) | (present != xp.floor(present)) | (present >= MAX_CODE)
    if bool(bad.any()):
        first = float(present[int(xp.argmax(bad))])
        raise DGBoostValueError(
            f"column {column!r} is categorical (feature type 'c') but holds {first!r}: category codes "
            f"given as numbers must be integers from 0 to {MAX_CODE - 1} (NaN for missing)"
        )
    k = int(present.max()) + 1
    if k > MAX_CATEGORIES:
        raise DGBoostValueError(
            f"column {column!r} is categorical with codes up to {k - 1}: at most {MAX_CATEGORIES} categories "
            "(codes 0 to 65533) are supported; re-code the column densely or group rare categories"
        )
    return k


def codes_as_float32(codes: Any) -> np.ndarray:
    """Integer category codes (-1 for missing, pandas' convention) as float32 with NaN for missing."""
    xp = np if isinstance(codes, np.ndarray) else __import__("cupy")
    out = codes.astype(xp.float32)
    out[codes < 0] = xp.float32(np.nan)
    return out


def recode_map(column: str, source: np.ndarray, target: np.ndarray, what: str = "the training data") -> np.ndarray:
    """Where each category of ``source`` is in ``target``: int32 (len(source),).

    Parameters
    ----------
    column : str
        The column's name, for the error message.
    source, target : numpy.ndarray, shape (K_s,) and (K_t,)
        Category values (as :func:`checked_categories` gives them).
    what : str
        What ``target`` is, for the error message ("the training data", "partition 3").

    Raises
    ------
    DGBoostValueError
        When a category of ``source`` is not among ``target``: it has no code there
        (XGBoost 3.4.1 refuses a category not seen in training in the same way, even one
        that no row uses).
    """
    if source.size == 0:
        return np.empty(0, np.int32)
    if target.size and source.dtype.kind != target.dtype.kind and not (source.dtype == target.dtype):
        raise DGBoostValueError(
            f"column {column!r}: its categories are {_kind_name(source)} but those of {what} are "
            f"{_kind_name(target)}; give the column the same kind of category values"
        )
    index = {v: i for i, v in enumerate(target.tolist())}
    out = np.fromiter((index.get(v, -1) for v in source.tolist()), dtype=np.int32, count=source.size)
    if (out < 0).any():
        unseen = [source[i] for i in np.flatnonzero(out < 0)[:5]]
        raise DGBoostValueError(
            f"column {column!r}: categor{'y' if len(unseen) == 1 else 'ies'} "
            f"{', '.join(repr(v) for v in unseen)} {'is' if len(unseen) == 1 else 'are'} not among "
            f"the categories of {what}; remove those rows or set the values missing (XGBoost refuses "
            "them too)"
        )
    return out


def _kind_name(values: np.ndarray) -> str:
    kind = _values_kind(values)
    return {"string": "strings", "integer": "integers", "boolean": "booleans"}.get(kind, kind)


def apply_recode(codes: Any, mapping: np.ndarray) -> Any:
    """float32 codes (NaN missing) re-coded through ``mapping`` (a :func:`recode_map`), same device.

    An identity mapping returns ``codes`` itself. Codes outside ``0..len(mapping)-1`` (numbers
    the source categories do not name) stay as they are.
    """
    if mapping.size == 0 or np.array_equal(mapping, np.arange(mapping.size)):
        return codes
    xp = np if isinstance(codes, np.ndarray) else __import__("cupy")
    table = xp.asarray(mapping.astype(np.float32))
    valid = ~xp.isnan(codes) & (codes >= 0) & (codes < mapping.size)
    out = codes.copy()
    out[valid] = table[codes[valid].astype(xp.int64)]
    return out


def union_categories(column: str, parts: Sequence[tuple[int, np.ndarray]]) -> np.ndarray:
    """The sorted union of the categories of several partitions of one column.

    Parameters
    ----------
    column : str
    parts : sequence of (partition index, categories)
        Each partition's checked categories.

    Raises
    ------
    DGBoostValueError
        When partitions hold different kinds of values (strings in one, integers in another),
        naming both partitions; or when the union has more than :data:`MAX_CATEGORIES` values.
    """
    kinds = {}
    for i, values in parts:
        if values.size:
            kinds.setdefault(_values_kind(values), i)
    if len(kinds) > 1:
        (k1, p1), (k2, p2) = list(kinds.items())[:2]
        raise DGBoostValueError(
            f"column {column!r}: partition {p1} has {k1} categories but partition {p2} has {k2}; "
            "give every partition the same kind of category values"
        )
    merged = sorted(set().union(*(values.tolist() for _, values in parts))) if parts else []
    return checked_categories(column, np.array(merged, dtype=object) if merged else np.empty(0, object))


def categories_equal(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    """Whether two category arrays (or Nones) hold the same values in the same order."""
    if a is None or b is None:
        return a is None and b is None
    return a.shape == b.shape and a.tolist() == b.tolist()


def categories_to_list(values: np.ndarray | None) -> list | None:
    """Category values as a JSON-able list (Python str / int / bool), None stays None."""
    if values is None:
        return None
    return [v if isinstance(v, str) else v.item() if hasattr(v, "item") else v for v in values]


def categories_from_list(column: str, values: Sequence | None) -> np.ndarray | None:
    """A stored list of category values (model meta) back as a checked array; None stays None."""
    if values is None:
        return None
    return checked_categories(column, np.array(list(values), dtype=object) if len(values) else np.empty(0, object))


def object_words(dtype: Any) -> str:
    """ " or other objects" for an object column (it may hold numbers as Python objects too)."""
    return " or other objects" if str(dtype) == "object" else ""


def require_flag(column: str, dtype: Any) -> DGBoostTypeError:
    """The error for a category or string column seen without ``enable_categorical``."""
    if is_categorical_dtype(dtype):
        return DGBoostTypeError(
            f"column {column!r} is categorical ({dtype}); pass enable_categorical=True to train on "
            "it as a categorical feature (or encode it as numbers first)"
        )
    return DGBoostTypeError(
        f"column {column!r} holds strings{object_words(dtype)} ({dtype}); convert it to a category column "
        f"(df[{column!r}].astype('category')) and pass enable_categorical=True, or encode it as numbers"
    )
