"""Data-lake inputs of the ``--cluster`` commands: Parquet paths expanded, footers checked, rows split.

Only the files' footers are read on the client (:func:`read_footers`): they give every file's
columns, types and row groups. From them, before any work starts, :func:`check_schemas`
refuses files whose columns differ from the first file's (naming the files and the columns),
and :func:`plan_partitions` splits the rows into partitions of whole row groups: a large file
of several row groups becomes several partitions, read and worked on by several workers.
:func:`dask_frame` is the dask DataFrame of those partitions, in file order then row order
(the rows that reading the files one after the other gives).
"""

from __future__ import annotations

import glob as globlib
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ..errors import DGBoostValueError

__all__ = [
    "DEFAULT_PARTITION_ROWS",
    "FILE_COLUMN",
    "ParquetFooter",
    "ParquetPartition",
    "expand_paths",
    "read_footers",
    "check_schemas",
    "plan_partitions",
    "dask_frame",
]

# pyarrow's and pandas' own row-group size (1 Mi rows): their files stay one row group per partition
DEFAULT_PARTITION_ROWS = 1 << 20
# the column that --with-file-name adds: the file each row was read from
FILE_COLUMN = "file"
_SUFFIXES = (".parquet", ".pq", ".parq")
_MAX_FILES_NAMED = 5


@dataclass(frozen=True)
class ParquetFooter:
    """What a file's footer says.

    Attributes
    ----------
    path : str
        The file, as the workers open it (absolute for local files).
    schema : pyarrow.Schema
        Its columns and their types.
    row_group_rows : tuple of int
        Rows of each row group, in order.
    """

    path: str
    schema: Any
    row_group_rows: tuple[int, ...]

    @property
    def num_rows(self) -> int:
        return sum(self.row_group_rows)


@dataclass(frozen=True)
class ParquetPartition:
    """One partition: consecutive row groups of one file, from its row ``first_row`` on."""

    path: str
    row_groups: tuple[int, ...]
    num_rows: int
    first_row: int = 0


def _natural(paths: list[str]) -> list[str]:
    from dask.utils import natural_sort_key

    return sorted(paths, key=natural_sort_key)


def _files_under(folder: str) -> list[str]:
    """The Parquet files of a folder and its sub-folders (hive partitions), hidden and ``_`` files left out."""
    found = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
        found += [os.path.join(root, f) for f in files if not f.startswith((".", "_")) and f.endswith(_SUFFIXES)]
    return _natural(found)


def _expand_url(url: str) -> list[str]:
    import fsspec

    fs, _, paths = fsspec.core.get_fs_token_paths(url)
    protocol = url.split("://", 1)[0]
    out = []
    for path in _natural(list(paths)):
        if fs.isdir(path):
            inner = [p for p in fs.find(path) if p.endswith(_SUFFIXES) and "/_" not in p and "/." not in p]
            out += _natural(inner)
        else:
            out.append(path)
    return [p if "://" in p else f"{protocol}://{p}" for p in out]


def expand_paths(paths: str | Sequence[str], what: str = "data") -> list[str]:
    """The Parquet files that ``paths`` name, each once, in the order given.

    Parameters
    ----------
    paths : str or sequence of str
        Files, folders (their Parquet files, sub-folders included) and globs (their matches in
        natural sort order: ``part-2`` before ``part-10``), local or URLs (``s3://...``, through
        fsspec). Several paths are what a shell makes of an unquoted glob.
    what : str
        What the files are, for the error message.

    Returns
    -------
    list of str
        Absolute paths of local files (the workers may not share this process's folder), URLs as given.

    Raises
    ------
    DGBoostValueError
        For a path that matches no file.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files: list[str] = []
    for given in paths:
        given = str(given)
        if "://" in given:
            found = _expand_url(given)
        else:
            path = os.path.abspath(os.path.expanduser(given))
            matches = _natural(globlib.glob(path)) if globlib.has_magic(path) else [path] * os.path.exists(path)
            found = [f for m in matches for f in (_files_under(m) if os.path.isdir(m) else [m])]
        if not found:
            raise DGBoostValueError(f"no {what} files match {given}")
        files += found
    return list(dict.fromkeys(files))


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())


def _read_footer(path: str) -> ParquetFooter:
    import pyarrow.parquet as pq

    try:
        if "://" in path:
            import fsspec

            with fsspec.open(path, "rb") as f:
                meta = pq.read_metadata(f)
        else:
            meta = pq.read_metadata(path)
    except (OSError, ValueError) as exc:
        raise DGBoostValueError(f"cannot read {path} as Parquet: {_one_line(exc)}") from None
    rows = tuple(meta.row_group(i).num_rows for i in range(meta.num_row_groups))
    return ParquetFooter(path, meta.schema.to_arrow_schema(), rows)


def read_footers(files: Sequence[str]) -> list[ParquetFooter]:
    """The footers of ``files`` (only the footers are read: cheap for hundreds of files).

    Raises
    ------
    DGBoostValueError
        Naming a file that is not Parquet.
    """
    with ThreadPoolExecutor(max_workers=min(16, max(1, len(files)))) as pool:
        return list(pool.map(_read_footer, files))


def _differences(first, schema) -> list[str]:
    """How ``schema`` differs from ``first``: missing and extra columns, other types."""
    out = []
    missing = [n for n in first.names if n not in schema.names]
    extra = [n for n in schema.names if n not in first.names]
    if missing:
        out.append(f"no column{'s' * (len(missing) > 1)} {', '.join(map(repr, missing))}")
    if extra:
        out.append(f"extra column{'s' * (len(extra) > 1)} {', '.join(map(repr, extra))}")
    for name in first.names:
        if name in schema.names:
            a, b = first.field(name).type, schema.field(name).type
            if a != b:
                out.append(f"column {name!r} is {b}, not {a}")
    return out


def check_schemas(footers: Sequence[ParquetFooter], what: str = "data") -> None:
    """Refuse files whose columns or column types differ from the first file's.

    Raises
    ------
    DGBoostValueError
        One message naming the first file, the files that differ (the first few, and how many
        more) and, for each, the columns missing, extra or of another type.
    """
    first = footers[0]
    bad = [(f.path, d) for f in footers[1:] if (d := _differences(first.schema, f.schema))]
    if not bad:
        return
    named = "; ".join(f"{path}: {', '.join(diff)}" for path, diff in bad[:_MAX_FILES_NAMED])
    more = f"; and {len(bad) - _MAX_FILES_NAMED} more files" if len(bad) > _MAX_FILES_NAMED else ""
    raise DGBoostValueError(
        f"{what}: {len(bad)} of {len(footers)} files have other columns than the first file, {first.path} "
        f"({len(first.schema.names)} columns): {named}{more}"
    )


def plan_partitions(footers: Sequence[ParquetFooter], partition_rows: int = DEFAULT_PARTITION_ROWS) -> list:
    """Partitions of consecutive row groups of one file, of at most ``partition_rows`` rows
    (a larger row group is one partition of its own); files without rows are left out.

    Returns
    -------
    list of ParquetPartition
        In file order, then row order.
    """
    if partition_rows < 1:
        raise DGBoostValueError(f"partition rows must be >= 1, got {partition_rows}")
    parts = []
    for footer in footers:
        groups: list[int] = []
        rows = start = 0
        for i, n in enumerate(footer.row_group_rows):
            if n == 0:
                continue
            if groups and rows + n > partition_rows:
                parts.append(ParquetPartition(footer.path, tuple(groups), rows, start))
                groups, start, rows = [], start + rows, 0
            groups.append(i)
            rows += n
        if groups:
            parts.append(ParquetPartition(footer.path, tuple(groups), rows, start))
    return parts


def _range_index(schema) -> dict | None:
    """The RangeIndex that pandas stored as metadata only (no column), or None."""
    meta = schema.pandas_metadata or {}
    ranges = [c for c in meta.get("index_columns", []) if isinstance(c, dict) and c.get("kind") == "range"]
    return ranges[0] if len(ranges) == 1 and len(meta["index_columns"]) == 1 else None


def _read_partition(
    path: str, row_groups: tuple[int, ...], columns: list[str], file_column: str | None, first_row: int = 0
):
    """One partition as a pandas DataFrame (on a worker): its row groups, the first file's column
    order, and the index that reading the whole file gives."""
    import pandas as pd
    import pyarrow.parquet as pq

    def read(source):
        pf = pq.ParquetFile(source)
        if not row_groups:
            return pf.schema_arrow.empty_table()
        return pf.read_row_groups(list(row_groups), use_pandas_metadata=True)

    if "://" in path:
        import fsspec

        with fsspec.open(path, "rb") as f:
            table = read(f)
    else:
        table = read(path)
    frame = table.to_pandas()
    stored = _range_index(table.schema)
    if stored is not None:
        # pandas keeps a RangeIndex as metadata only: the rows' place in the file gives it back
        step = int(stored.get("step", 1))
        begin = int(stored.get("start", 0)) + step * first_row
        frame.index = pd.RangeIndex(begin, begin + step * len(frame), step, name=stored.get("name"))
    frame = frame[[c for c in columns if c in frame.columns]]
    if file_column is not None:
        frame[file_column] = path
    return frame


def dask_frame(footers: Sequence[ParquetFooter], parts: Sequence[ParquetPartition], with_file: bool = False) -> Any:
    """The dask DataFrame of ``parts`` (one task per partition; the file's path in column
    :data:`FILE_COLUMN` with ``with_file``).

    A read of no rows at all (every file empty) is one empty partition of the first file.
    """
    import dask
    import dask.dataframe as dd
    import pandas as pd

    first = footers[0]
    meta = first.schema.empty_table().to_pandas()
    columns = [str(c) for c in meta.columns]
    file_column = None
    if with_file:
        if FILE_COLUMN in columns:
            raise DGBoostValueError(f"{first.path} has a column {FILE_COLUMN!r}: the file name column would replace it")
        file_column = FILE_COLUMN
        meta[FILE_COLUMN] = pd.Series([], dtype=str, index=meta.index)
    if not parts:
        parts = [ParquetPartition(first.path, (), 0)]
    read = dask.delayed(_read_partition, pure=True)
    stored = _range_index(first.schema)
    if stored is not None:
        meta.index.name = stored.get("name")
    pieces = [read(p.path, p.row_groups, columns, file_column, p.first_row) for p in parts]
    return dd.from_delayed(pieces, meta=meta, verify_meta=False)
