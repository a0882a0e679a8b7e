"""Tables read and written by the single-process commands: CSV, Parquet and ``.npy``.

Outputs are written atomically: into a temporary file next to the target, then renamed.
"""

from __future__ import annotations

import difflib
import os
import tempfile
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .._category_codes import CATEGORICAL_TYPE, is_category_column, is_string_dtype
from ..errors import DGBoostValueError

__all__ = [
    "read_table",
    "read_tables",
    "select_rows",
    "split_columns",
    "write_atomic",
    "write_predictions",
    "shap_column_names",
    "write_explanations",
    "categorical_columns",
    "model_categorical_columns",
]


def read_table(path: str | os.PathLike) -> Any:
    """A CSV (any other extension) or Parquet (.parquet/.pq) file as a DataFrame; .npy as an array."""
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise DGBoostValueError(f"data file not found: {path}")
    suffix = path.suffix.lower()
    try:
        if suffix in (".parquet", ".pq"):
            return pd.read_parquet(path)
        if suffix == ".npy":
            return np.load(path, allow_pickle=False)
        return pd.read_csv(path)
    except ImportError as exc:
        raise DGBoostValueError(f"reading {path} needs an optional package: {exc}") from None
    except (ValueError, pd.errors.ParserError) as exc:
        raise DGBoostValueError(f"cannot read {path}: {exc}") from None


def _column_differences(first: list[str], other: list[str]) -> str:
    missing = [c for c in first if c not in other]
    extra = [c for c in other if c not in first]
    words = [f"no column{'s' * (len(missing) > 1)} {', '.join(map(repr, missing))}"] if missing else []
    words += [f"extra column{'s' * (len(extra) > 1)} {', '.join(map(repr, extra))}"] if extra else []
    return ", ".join(words)


def read_tables(paths: str | os.PathLike | list, file_column: str | None = None) -> Any:
    """The rows of several files (paths and globs, in natural sort order), one after the other.

    Parameters
    ----------
    paths : str, os.PathLike or list of them
        Files and globs (a shell's expansion of an unquoted glob is several paths); one file
        is :func:`read_table`'s (a ``.npy`` file gives an array).
    file_column : str, optional
        A column with each row's file name (the path as expanded).

    Returns
    -------
    pandas.DataFrame or numpy.ndarray

    Raises
    ------
    DGBoostValueError
        For a path that matches nothing, or files whose columns differ from the first file's
        (naming the files and the columns).
    """
    import pandas as pd

    from .parquet_files import expand_paths

    files = expand_paths(paths if isinstance(paths, list) else [paths])
    tables = [read_table(f) for f in files]
    if len(tables) == 1 and file_column is None:
        return tables[0]
    if not all(hasattr(t, "columns") for t in tables):
        raise DGBoostValueError("several input files (or a file name column) need CSV or Parquet files, not .npy")
    first = [str(c) for c in tables[0].columns]
    bad = [(f, d) for f, t in zip(files, tables) if (d := _column_differences(first, [str(c) for c in t.columns]))]
    if bad:
        named = "; ".join(f"{f}: {d}" for f, d in bad[:5]) + (
            f"; and {len(bad) - 5} more files" if len(bad) > 5 else ""
        )
        raise DGBoostValueError(
            f"{len(bad)} of {len(files)} files have other columns than the first file, {files[0]}: {named}"
        )
    if file_column is not None:
        if file_column in first:
            raise DGBoostValueError(f"{files[0]} has a column {file_column!r}: the file name column would replace it")
        tables = [t.assign(**{file_column: f}) for f, t in zip(files, tables)]
    return pd.concat([t[list(tables[0].columns)] for t in tables], ignore_index=True)


def select_rows(
    data: Any,
    source: str,
    label_column: str | None,
    keep: list[str],
    model_names: list[str] | None,
    file_column: str | None = None,
) -> tuple[Any, Any]:
    """(features, carried columns) of a table to predict or explain.

    ``label_column`` is dropped; the model's columns are picked by name (in its order) when the
    data has them all, else every column but the carried ones (``keep``, then ``file_column``)
    is a feature.

    Returns
    -------
    (DataFrame or ndarray, DataFrame or None)
    """
    carried_names = list(keep) + ([file_column] if file_column is not None else [])
    if not hasattr(data, "columns"):
        if label_column is not None or carried_names:
            raise DGBoostValueError(f"{source} has no column names: --label-column and --keep need CSV or Parquet data")
        return data, None
    columns = [str(c) for c in data.columns]
    for what, name in [("label", label_column)] + [("--keep", k) for k in keep]:
        if name is not None and name not in columns:
            close = difflib.get_close_matches(name, columns, n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else f"; columns are {columns[:10]}"
            raise DGBoostValueError(f"{source}: no {what} column {name!r}{hint}")
    if len(set(carried_names)) < len(carried_names):
        raise DGBoostValueError(f"columns kept twice: {carried_names}")
    carried = data[carried_names] if carried_names else None
    features = data.drop(columns=[c for c in data.columns if str(c) == label_column])
    if model_names is not None and set(model_names) <= {str(c) for c in features.columns}:
        features = features[model_names]  # the model's columns, in the model's order
    else:
        features = features.drop(columns=[c for c in features.columns if str(c) in carried_names])
    return features, carried


def split_columns(frame: Any, label: str, weight: str | None, path: str | os.PathLike) -> tuple:
    if not hasattr(frame, "columns"):
        raise DGBoostValueError(f"{path}: training data needs named columns (CSV or Parquet)")
    columns = [str(c) for c in frame.columns]
    for what, name in (("label", label), ("weight", weight)):
        if name is not None and name not in columns:
            close = difflib.get_close_matches(name, columns, n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else f"; columns are {columns[:10]}"
            raise DGBoostValueError(f"{path}: no {what} column {name!r}{hint}")
    y = frame[label].to_numpy()
    w = frame[weight].to_numpy() if weight is not None else None
    X = frame.drop(columns=[c for c in (label, weight) if c is not None])
    return X, y, w


def write_atomic(path: Path, write: Callable[[str], None]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=path.suffix, dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _with_carried(frame: Any, carried: Any, path: Path) -> Any:
    """``frame`` with the ``carried`` columns (ID columns, file names) in front."""
    import pandas as pd

    if carried is None:
        return frame
    if path.suffix.lower() == ".npy":
        raise DGBoostValueError(f"{path}: kept columns (--keep, --with-file-name) need a .csv or .parquet output")
    clash = [c for c in carried.columns if c in frame.columns]
    if clash:
        raise DGBoostValueError(f"kept columns {clash} have the names of output columns")
    return pd.concat([carried.reset_index(drop=True), frame.reset_index(drop=True)], axis=1)


def write_predictions(path: str | os.PathLike, preds: np.ndarray, index: Any = None, carried: Any = None) -> None:
    """Write predictions by extension: .npy (the array), .parquet/.pq, else CSV with a header
    (``prediction``, or ``prediction_0..k-1`` for several outputs), after the ``carried``
    columns (a DataFrame of the same rows: ID columns, file names; not for .npy)."""
    import pandas as pd

    path = Path(path)
    preds = np.asarray(preds)
    suffix = path.suffix.lower()
    _with_carried(pd.DataFrame(), carried, path)  # .npy refuses carried columns before anything is written
    if suffix == ".npy":
        write_atomic(path, lambda tmp: np.save(tmp, preds))
        return
    flat = preds.reshape(preds.shape[0], -1)
    names = ["prediction"] if flat.shape[1] == 1 else [f"prediction_{i}" for i in range(flat.shape[1])]
    frame = _with_carried(pd.DataFrame(flat, columns=names, index=index), carried, path)
    if suffix in (".parquet", ".pq"):
        try:
            write_atomic(path, lambda tmp: frame.to_parquet(tmp, index=False))
        except ImportError as exc:
            raise DGBoostValueError(f"writing {path} needs an optional package: {exc}") from None
    else:
        write_atomic(path, lambda tmp: frame.to_csv(tmp, index=False))


def shap_column_names(features: list[str], output_names: list | None, interactions: bool) -> list[str]:
    """Column names of a SHAP file: features + ``bias`` (``a:b`` pairs for interactions),
    suffixed ``[<output>]`` when the model has several outputs (``output_names``)."""
    cols = list(features) + ["bias"]
    if interactions:
        cols = [f"{a}:{b}" for a in cols for b in cols]
    if output_names is None:
        return cols
    return [f"{c}[{g}]" for g in output_names for c in cols]


def write_explanations(
    path: str | os.PathLike,
    values: np.ndarray,
    features: list[str],
    output_names: list | None = None,
    interactions: bool = False,
    carried: Any = None,
) -> None:
    """Write SHAP values by extension: .npy (the array: (n, F+1), (n, k, F+1), or (n[, k],
    F+1, F+1) with interactions), .parquet/.pq, else CSV with named columns, after the
    ``carried`` columns (a DataFrame of the same rows: ID columns, file names; not for .npy)."""
    import pandas as pd

    path = Path(path)
    values = np.asarray(values)
    _with_carried(pd.DataFrame(), carried, path)  # .npy refuses carried columns before anything is written
    if path.suffix.lower() == ".npy":
        write_atomic(path, lambda tmp: np.save(tmp, values))
        return
    flat = values.reshape(values.shape[0], -1)
    frame = pd.DataFrame(flat, columns=shap_column_names(features, output_names, interactions))
    frame = _with_carried(frame, carried, path)
    if path.suffix.lower() in (".parquet", ".pq"):
        try:
            write_atomic(path, lambda tmp: frame.to_parquet(tmp, index=False))
        except ImportError as exc:
            raise DGBoostValueError(f"writing {path} needs an optional package: {exc}") from None
    else:
        write_atomic(path, lambda tmp: frame.to_csv(tmp, index=False))


def categorical_columns(frame: Any, enable: bool, source: str) -> Any:
    """A training table's category and string columns made categorical features, or refused.

    Parameters
    ----------
    frame : pandas or Dask DataFrame, or a NumPy array (returned as it is)
    enable : bool
        ``--enable-categorical`` (config key ``enable_categorical``): string columns become
        ``category`` columns (their sorted values are the categories; on Dask the partitions'
        sorted union, agreed before training), dictionary / category columns stay categorical.
    source : str
        The data's name, for the error message.

    Raises
    ------
    DGBoostValueError
        Without ``enable``, for a category or string column (naming the columns and the flag).
    """
    if not hasattr(frame, "dtypes"):
        return frame
    found = [(c, dt) for c, dt in frame.dtypes.items() if is_category_column(dt) or is_string_dtype(dt)]
    if not found:
        return frame
    if not enable:
        names = ", ".join(repr(str(c)) for c, _ in found[:5]) + (" ..." if len(found) > 5 else "")
        raise DGBoostValueError(
            f"{source}: column(s) {names} hold categories or strings: pass --enable-categorical (config key "
            "enable_categorical: true) to train on them as categorical features, or drop them"
        )
    strings = [c for c, dt in found if is_string_dtype(dt)]
    return frame.astype({c: "category" for c in strings}) if strings else frame


def model_categorical_columns(
    frame: Any, feature_types: list | None, feature_names: list | None, categories: list | None = None
) -> Any:
    """String columns that the model has as categorical features, as ``category`` columns.

    Their codes are then re-coded to the model's categories by ``Booster.predict`` (a value the
    model has not seen is refused there, naming it); other columns are left as they are.

    Parameters
    ----------
    frame : pandas or Dask DataFrame, or a NumPy array (returned as it is)
    feature_types, feature_names : list or None
        The model's.
    categories : list of (list or None), optional
        The model's category values per feature (``meta["categories"]``). With them, a numeric
        or bool column of a pandas frame that the model has as categorical with known values
        becomes a ``category`` column of those values too: a CSV column whose values all look
        like numbers (``"1"``, ``"2"``) is read as numbers, which would otherwise be taken as
        codes (code 1 is the model's second category, not ``"1"``).
    """
    if not hasattr(frame, "dtypes") or not feature_types or not feature_names or CATEGORICAL_TYPE not in feature_types:
        return frame
    present = {str(c): c for c in frame.columns}
    strings = [
        present[name]
        for name, kind in zip(feature_names, feature_types)
        if kind == CATEGORICAL_TYPE and name in present and is_string_dtype(frame[present[name]].dtype)
    ]
    frame = frame.astype({c: "category" for c in strings}) if strings else frame
    if categories is None or not hasattr(frame, "assign") or not hasattr(frame, "iloc"):
        return frame
    numbers = {}
    for name, kind, values in zip(feature_names, feature_types, categories):
        column = frame[present[name]] if name in present else None
        if kind != CATEGORICAL_TYPE or not values or column is None or is_category_column(column.dtype):
            continue
        if column.dtype.kind in "biuf" and type(frame).__module__.startswith("pandas"):
            numbers[present[name]] = _numbers_as_categories(column, values)
    return frame.assign(**{str(c): v for c, v in numbers.items()}) if numbers else frame


def _numbers_as_categories(column: Any, values: list) -> Any:
    """A pandas numeric / bool column as a ``category`` column of the values a CSV held: the
    text of each value when the model's categories are strings (a whole float as an integer:
    pandas reads ``"1"`` as 1.0 in a column with a missing value), else the integer itself.
    Missing values stay missing."""
    import pandas as pd

    as_text = isinstance(values[0], str)

    def value(v):
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        return str(v) if as_text else v

    return pd.Categorical(column.map(value, na_action="ignore"))
