"""Parquet files read by Dask and written by the workers, for the ``--cluster`` commands.

Inputs (:func:`check_parquet_input`): files, folders and globs, expanded here in natural sort
order (``part-2`` before ``part-10``, as Dask itself sorts); their footers are read and their
schemas checked before any work starts, and their rows split into partitions of whole row groups
(:mod:`dgboost.cli.parquet_files`), each read by a worker. Outputs are never gathered on the
client: each partition is written by the worker that computed it into a temporary folder next
to the target (``part.00000.parquet``, ...), renamed into place only when every partition is written.
"""

from __future__ import annotations

import contextlib
import difflib
import operator
import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ..errors import DGBoostValueError
from .cluster_progress import RowProgress
from .parquet_files import (
    DEFAULT_PARTITION_ROWS,
    check_schemas,
    dask_frame,
    expand_paths,
    plan_partitions,
    read_footers,
)

if TYPE_CHECKING:  # annotations only: distributed is imported where a cluster is used
    from distributed import Client

__all__ = [
    "ParquetInput",
    "check_parquet_input",
    "check_output_folder",
    "require_column",
    "split_frame",
    "select_features",
    "write_partitions",
]

_PART_NAME = re.compile(r"^part\.\d+\.parquet$")


@dataclass(frozen=True)
class ParquetInput:
    """Parquet files checked and split, ready to be read by the workers.

    Attributes
    ----------
    source : str
        The paths as given, for messages.
    footers : list of ParquetFooter
        The files, in order, with their schemas and row groups.
    parts : list of ParquetPartition
        The partitions: whole row groups of one file, in row order.
    with_file : bool
        Whether the frame has the :data:`~dgboost.cli.parquet_files.FILE_COLUMN` column.
    """

    source: str
    footers: list
    parts: list
    with_file: bool = False

    @property
    def num_rows(self) -> int:
        return sum(p.num_rows for p in self.parts)

    @property
    def partition_rows(self) -> list[int]:
        """Rows of each partition of :meth:`frame` (one for a read of no rows)."""
        return [p.num_rows for p in self.parts] or [0]

    def frame(self) -> Any:
        """The dask DataFrame of the partitions (one read task each)."""
        return dask_frame(self.footers, self.parts, self.with_file)


def check_parquet_input(
    paths: str | Sequence[str] | ParquetInput,
    what: str = "data",
    partition_rows: int | None = None,
    with_file: bool = False,
) -> ParquetInput:
    """Expand ``paths``, read the files' footers, check their schemas and split their rows.

    Cheap (footers only) and done on the client before any work starts: a missing file, a file
    that is not Parquet or files whose columns differ are one :class:`DGBoostValueError` naming them.

    Parameters
    ----------
    paths : str, sequence of str or ParquetInput
        Files, folders and globs (:func:`~dgboost.cli.parquet_files.expand_paths`); a
        ParquetInput is returned as it is.
    what : str
        What the files are, for messages.
    partition_rows : int, optional
        Most rows of a partition (whole row groups; default
        :data:`~dgboost.cli.parquet_files.DEFAULT_PARTITION_ROWS`).
    with_file : bool
        Add the column of each row's file name.
    """
    if isinstance(paths, ParquetInput):
        return paths
    source = str(paths) if isinstance(paths, (str, os.PathLike)) else " ".join(map(str, paths))
    footers = read_footers(expand_paths(paths, what))
    check_schemas(footers, what)
    parts = plan_partitions(footers, DEFAULT_PARTITION_ROWS if partition_rows is None else partition_rows)
    return ParquetInput(source, footers, parts, with_file)


def check_output_folder(output_dir: str | os.PathLike) -> None:
    """Refuse an output that is a file, or a folder holding anything but an earlier output."""
    _check_target(Path(output_dir).expanduser().absolute())


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
    partition_rows: Sequence[int] | None = None,
    progress_interval: float = 5.0,
) -> tuple[int, int]:
    """Write every partition of ``pieces`` (delayed DataFrames) on the workers, atomically.

    Parameters
    ----------
    partition_rows : sequence of int, optional
        Rows of each piece, for the progress lines' total and time left.
    progress_interval : float
        Seconds between progress lines (rows done, rows/s, time left) on stderr.

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
    total = None if partition_rows is None else int(sum(partition_rows))
    progress = RowProgress(what, total, n, quiet, interval=progress_interval)
    futures = []
    try:
        tasks = [
            dask.delayed(writer, pure=False)(piece, str(tmp / f"part.{i:0{width}d}.parquet"), *writer_args)
            for i, piece in enumerate(pieces)
        ]
        futures = client.compute(tasks)
        with progress:
            for fut in as_completed(futures):
                progress.add(int(fut.result()))  # raises the partition's own error
        _replace_folder(tmp, target)
        return progress.rows, n
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
