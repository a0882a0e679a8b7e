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

from ..errors import DGBoostValueError

__all__ = [
    "read_table",
    "split_columns",
    "write_atomic",
    "write_predictions",
    "shap_column_names",
    "write_explanations",
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


def write_predictions(path: str | os.PathLike, preds: np.ndarray, index: Any = None) -> None:
    """Write predictions by extension: .npy (the array), .parquet/.pq, else CSV with a header
    (``prediction``, or ``prediction_0..k-1`` for several outputs)."""
    import pandas as pd

    path = Path(path)
    preds = np.asarray(preds)
    suffix = path.suffix.lower()
    if suffix == ".npy":
        write_atomic(path, lambda tmp: np.save(tmp, preds))
        return
    flat = preds.reshape(preds.shape[0], -1)
    names = ["prediction"] if flat.shape[1] == 1 else [f"prediction_{i}" for i in range(flat.shape[1])]
    frame = pd.DataFrame(flat, columns=names, index=index)
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
) -> None:
    """Write SHAP values by extension: .npy (the array: (n, F+1), (n, k, F+1), or (n[, k],
    F+1, F+1) with interactions), .parquet/.pq, else CSV with named columns."""
    import pandas as pd

    path = Path(path)
    values = np.asarray(values)
    if path.suffix.lower() == ".npy":
        write_atomic(path, lambda tmp: np.save(tmp, values))
        return
    flat = values.reshape(values.shape[0], -1)
    frame = pd.DataFrame(flat, columns=shap_column_names(features, output_names, interactions))
    if path.suffix.lower() in (".parquet", ".pq"):
        try:
            write_atomic(path, lambda tmp: frame.to_parquet(tmp, index=False))
        except ImportError as exc:
            raise DGBoostValueError(f"writing {path} needs an optional package: {exc}") from None
    else:
        write_atomic(path, lambda tmp: frame.to_csv(tmp, index=False))
