"""Parquet files read by Dask and written by the workers, for the ``--cluster`` commands.

Inputs are read with ``dask.dataframe.read_parquet``: a local glob is expanded here (Python's
``glob``) and its files passed in natural sort order (``part-2`` before ``part-10``, as Dask
itself sorts). Outputs are never gathered on the client: each partition is written by the
worker that computed it into a temporary folder next to the target (``part.00000.parquet``,
...), renamed into place only when every partition is written.
"""

from __future__ import annotations

import contextlib
import difflib
import glob as globlib
import operator
import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ..errors import DGBoostValueError
from ._format import seconds
from .cluster_progress import say

if TYPE_CHECKING:  # annotations only: distributed is imported where a cluster is used
    from distributed import Client

__all__ = [
    "check_parquet_glob",
    "check_output_folder",
    "read_parquet",
    "require_column",
    "split_frame",
    "select_features",
    "write_partitions",
]

_PART_NAME = re.compile(r"^part\.\d+\.parquet$")


def check_parquet_glob(data_glob: str, what: str = "data") -> str:
    """``data_glob`` as the workers must see it (absolute, for local paths); an error when no
    local file matches it (URLs, e.g. ``s3://...``, are left to Dask)."""
    data_glob = str(data_glob)
    if "://" in data_glob:
        return data_glob
    data_glob = os.path.abspath(os.path.expanduser(data_glob))  # the workers may not share our cwd
    if not globlib.glob(data_glob) and not os.path.exists(data_glob):
        raise DGBoostValueError(f"no {what} files match {data_glob}")
    return data_glob


def _parquet_paths(data_glob: str) -> str | list[str]:
    """What ``read_parquet`` gets: for a local glob, its files in natural sort order (so that
    the pattern means what Python's ``glob`` makes of it, ``[0-4]`` included); a folder, a URL,
    or a glob that matches folders, as given."""
    if "://" in data_glob:
        return data_glob
    from dask.utils import natural_sort_key

    matches = globlib.glob(data_glob)
    if not matches or any(os.path.isdir(m) for m in matches):
        return data_glob
    return sorted(matches, key=natural_sort_key)


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())


def check_output_folder(output_dir: str | os.PathLike) -> None:
    """Refuse an output that is a file, or a folder holding anything but an earlier output."""
    _check_target(Path(output_dir).expanduser().absolute())


def read_parquet(data_glob: str, what: str = "data") -> Any:
    """``dask.dataframe.read_parquet`` of the files of ``data_glob``, in natural sort order."""
    import dask.dataframe as dd

    data_glob = check_parquet_glob(data_glob, what)
    try:
        frame = dd.read_parquet(_parquet_paths(data_glob))
    except ImportError as exc:
        raise DGBoostValueError(f"reading Parquet needs an optional package: {_one_line(exc)}") from None
    except (OSError, ValueError, TypeError, IndexError) as exc:
        raise DGBoostValueError(f"cannot read {what} {data_glob} as Parquet: {_one_line(exc)}") from None
    if frame.npartitions == 0:
        raise DGBoostValueError(f"{what} {data_glob} has no partitions")
    return frame


def require_column(columns: list[str], name: str, what: str, source: str) -> None:
    if name not in columns:
        close = difflib.get_close_matches(name, columns, n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]!r}?" if close else f"; columns are {columns[:10]}"
        raise DGBoostValueError(f"{source}: no {what} column {name!r}{hint}")


def split_frame(frame: Any, columns: dict[str, Any]) -> dict:
    """Dask collections of the given columns of ``frame``, from ONE read of each partition.

    ``columns`` maps an output name to a list of column names (a DataFrame) or one name (a
    Series). Every collection is built on the same partition tasks of ``frame`` (each file is
    read once when they are computed together) and has exactly its partitions: selecting a
    few columns of a ``read_parquet`` collection directly lets dask fuse its partitions, so
    that a label column would no longer line up with the features.
    """
    import dask
    import dask.dataframe as dd

    parts = frame.to_delayed()
    meta = frame._meta
    out = {}
    for name, cols in columns.items():
        pieces = [dask.delayed(operator.getitem, pure=True)(p, cols) for p in parts]
        out[name] = dd.from_delayed(pieces, meta=meta[cols], verify_meta=False)
    return out


def select_features(frame: Any, source: str, drop: list[str], model_names: list[str] | None) -> list:
    """The feature columns: all but ``drop``; the model's, in its order, when it names them all."""
    columns = [str(c) for c in frame.columns]
    features = [c for c in frame.columns if str(c) not in drop]
    if model_names is not None and set(model_names) <= {str(c) for c in features}:
        by_name = {str(c): c for c in features}
        features = [by_name[n] for n in model_names]
    if not features:
        raise DGBoostValueError(f"{source}: no feature columns (columns are {columns[:10]})")
    return features


# ----------------------------------------------------------------------------- writing
def _check_target(target: Path) -> None:
    if target.exists() and not target.is_dir():
        raise DGBoostValueError(f"output {target} exists and is not a folder")
    if target.is_dir():
        others = [p.name for p in target.iterdir() if not _PART_NAME.match(p.name)]
        if others:
            raise DGBoostValueError(
                f"output folder {target} exists and holds other files than "
                f"part.*.parquet ({others[:3]}); remove it or choose another folder"
            )


def _write_frame(frame, path: str) -> int:
    """Write one partition (on its worker); the index only when it is named (from the data)."""
    named = any(n is not None for n in getattr(frame.index, "names", [None]))
    frame.to_parquet(path, index=named)
    return len(frame)


def write_partitions(
    client: Client,
    pieces: list,
    output_dir: str | os.PathLike,
    quiet: bool,
    what: str,
    writer: Callable = _write_frame,
    writer_args: tuple = (),
) -> tuple[int, int]:
    """Write every partition of ``pieces`` (delayed DataFrames) on the workers, atomically.

    Returns
    -------
    (rows, partitions) written.
    """
    import dask
    from distributed import as_completed

    target = Path(output_dir).expanduser().absolute()
    _check_target(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent))
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)  # the permissions of a folder made with mkdir, not mkdtemp's 0700
    n = len(pieces)
    width = max(5, len(str(n - 1)))
    futures = []
    try:
        tasks = [
            dask.delayed(writer, pure=False)(piece, str(tmp / f"part.{i:0{width}d}.parquet"), *writer_args)
            for i, piece in enumerate(pieces)
        ]
        futures = client.compute(tasks)
        rows, done, shown, started = 0, 0, 0, time.perf_counter()
        for fut in as_completed(futures):
            rows += int(fut.result())  # raises the partition's own error
            done += 1
            if done == n or done * 10 // n > shown * 10 // n:
                say(
                    quiet,
                    f"partitions done {done}/{n} ({rows:,} rows {what}, {seconds(time.perf_counter() - started)})",
                )
                shown = done
        _replace_folder(tmp, target)
        return rows, n
    except BaseException:
        with contextlib.suppress(Exception):
            client.cancel(futures, force=True)
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _replace_folder(tmp: Path, target: Path) -> None:
    """Rename ``tmp`` to ``target``; an existing (checked) ``target`` is moved away first."""
    old = None
    if target.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=target.parent))
        os.replace(target, old / target.name)
    os.replace(tmp, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
