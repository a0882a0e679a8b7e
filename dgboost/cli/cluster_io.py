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
import json
import operator
import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ..errors import DGBoostError, DGBoostValueError
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
    "check_inputs_readable",
    "STALL_TIMEOUT",
]

_PART_NAME = re.compile(r"^part\.\d+\.parquet$")
# a resumable run's record of what its output depends on, in its ``.<target>.partial`` folder
_RUN_RECORD = ".dgboost-run.json"
_MAX_NAMED = 5
# seconds a write may go without any partition finishing before it fails (a stuck worker: one
# partition is at most ~1 Mi rows, explained in minutes even as interaction values on a CPU)
STALL_TIMEOUT = 3600.0


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
    *,
    sources: Sequence[str] | None = None,
    run_record: dict | None = None,
    resume: bool = False,
    stall_timeout: float = STALL_TIMEOUT,
) -> tuple[int, int]:
    """Write every partition of ``pieces`` (delayed DataFrames) on the workers, atomically.

    Each file is written by its worker under a temporary name and renamed into place
    (``os.replace``) once complete, in a folder next to the target that is renamed to the
    target when every file is written: no half-written file, and no incomplete folder, is
    ever seen under its final name.

    Parameters
    ----------
    partition_rows : sequence of int, optional
        Rows of each piece, for the progress lines' total and time left.
    progress_interval : float
        Seconds between progress lines (rows done, rows/s, time left) on stderr.
    sources : sequence of str, optional
        The input file of each piece: a piece that fails is named by it.
    run_record : dict, optional
        What the output depends on (model, inputs' partitions, options; JSON). Given, the run is
        resumable: the folder next to the target is ``.<target>.partial`` and holds the record,
        a piece that fails does not stop the others, and the files written stay there when the
        run fails or is killed.
    resume : bool
        With ``run_record``: keep the files of an earlier run's ``.<target>.partial`` folder
        whose record is the same (a different record is refused), and write only the others.
    stall_timeout : float
        Seconds without any piece finishing after which the write fails (a stuck worker), with
        a CommunicationError naming the pieces still running.

    Returns
    -------
    (rows, partitions) of the output (resumed files included).
    """
    import dask

    target = Path(output_dir).expanduser().absolute()
    _check_target(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    n = len(pieces)
    width = max(5, len(str(n - 1)))
    names = [f"part.{i:0{width}d}.parquet" for i in range(n)]
    if run_record is not None:
        tmp, done = _partial_folder(target, run_record, names, resume)
    else:
        tmp, done = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent)), set()
        _folder_permissions(tmp)
    todo = [i for i in range(n) if names[i] not in done]
    rows_of = list(partition_rows) if partition_rows is not None else None
    total = None if rows_of is None else int(sum(rows_of[i] for i in todo))
    progress = RowProgress(what, total, len(todo), quiet, interval=progress_interval)
    futures: list = []
    try:
        tasks = [
            dask.delayed(_write_atomically, pure=False)(writer, pieces[i], str(tmp / names[i]), *writer_args)
            for i in todo
        ]
        futures = client.compute(tasks)
        with progress:
            add = lambda i, rows: progress.add(rows)  # noqa: E731
            failed = _collect(client, futures, todo, add, stall_timeout, stop_at_first=run_record is None)
        if failed:
            raise _pieces_failed(failed, sources, n, tmp, run_record is not None)
        skipped = 0 if rows_of is None else sum(rows_of[i] for i in range(n) if i not in set(todo))
        with contextlib.suppress(FileNotFoundError):
            (tmp / _RUN_RECORD).unlink()
        _replace_folder(tmp, target)
        return progress.rows + skipped, n
    except BaseException:
        with contextlib.suppress(Exception):
            client.cancel(futures, force=True)
        written = any(_PART_NAME.match(p.name) for p in tmp.iterdir()) if tmp.is_dir() else False
        if run_record is None or not written:
            shutil.rmtree(tmp, ignore_errors=True)
        raise


def _read_every_row(path: str, row_groups: tuple[int, ...]) -> int:
    """Read and decode the row groups of one partition (on a worker); its rows."""
    import pyarrow.parquet as pq

    if "://" in path:
        import fsspec

        with fsspec.open(path, "rb") as f:
            return pq.ParquetFile(f).read_row_groups(list(row_groups)).num_rows
    return pq.ParquetFile(path).read_row_groups(list(row_groups)).num_rows if row_groups else 0


def check_inputs_readable(client: Client, data: ParquetInput, stall_timeout: float = STALL_TIMEOUT) -> None:
    """Read every row of ``data`` on the workers (each partition where Dask places it) and
    raise one :class:`DGBoostValueError` naming every file that cannot be read or whose rows
    are not what its footer says (``--strict``: nothing is written before all are good)."""
    import dask

    tasks = [dask.delayed(_read_every_row, pure=False)(p.path, p.row_groups) for p in data.parts]
    futures = client.compute(tasks)
    bad: dict[str, str] = {}
    counted: dict[int, int] = {}
    try:
        failed = _collect(client, futures, list(range(len(futures))), counted.__setitem__, stall_timeout, False)
    finally:
        with contextlib.suppress(Exception):
            client.cancel(futures, force=True)
    for i, exc in sorted(failed.items()):
        text = str(exc).splitlines()[0] if str(exc) else ""
        bad.setdefault(data.parts[i].path, f"{type(exc).__name__}: {text}".rstrip(": "))
    for i, rows in counted.items():
        part = data.parts[i]
        if rows != part.num_rows and part.path not in bad:
            bad[part.path] = f"{rows} rows read, its footer says {part.num_rows}"
    if bad:
        shown = "; ".join(f"{path}: {why}" for path, why in list(bad.items())[:_MAX_NAMED])
        more = f" (and {len(bad) - _MAX_NAMED} more)" if len(bad) > _MAX_NAMED else ""
        raise DGBoostValueError(
            f"--strict: {len(bad)} input file(s) cannot be read, nothing was written: {shown}{more}"
        )


def _folder_permissions(folder: Path) -> None:
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(folder, 0o777 & ~umask)  # the permissions of a folder made with mkdir, not mkdtemp's 0700


def _write_atomically(writer: Callable, piece, path: str, *args) -> int:
    """``writer(piece, <temporary name>, *args)``, then the file renamed to ``path`` (on the
    worker): a file under its final name is always complete."""
    final = Path(path)
    tmp = final.with_name(f".{final.name}.{uuid.uuid4().hex}.tmp")
    try:
        rows = writer(piece, str(tmp), *args)
        os.replace(tmp, final)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return rows


def _partial_folder(target: Path, run_record: dict, names: list[str], resume: bool) -> tuple[Path, set[str]]:
    """The resumable run's folder ``.<target>.partial`` (with its record) and the files in it
    that are kept: none unless ``resume`` (an earlier run's folder is removed first)."""
    tmp = target.parent / f".{target.name}.partial"
    record = json.dumps(run_record, sort_keys=True)
    done: set[str] = set()
    if resume and tmp.is_dir():
        try:
            earlier = (tmp / _RUN_RECORD).read_text(encoding="utf-8")
        except FileNotFoundError:
            earlier = None
        if earlier != record:
            raise DGBoostValueError(
                f"--resume: {tmp} was written by a run with another model, inputs or options "
                f"({_record_difference(earlier, run_record)}); run without --resume to start again"
            )
        for p in tmp.iterdir():
            if p.name.startswith(".part.") and p.name.endswith(".tmp"):
                p.unlink()  # a file a killed run was writing
        done = {p.name for p in tmp.iterdir() if p.name in set(names)}
        return tmp, done
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    (tmp / _RUN_RECORD).write_text(record, encoding="utf-8")
    return tmp, done


def _record_difference(earlier: str | None, record: dict) -> str:
    if earlier is None:
        return "it has no run record"
    try:
        old = json.loads(earlier)
    except ValueError:
        return "its run record is unreadable"
    keys = sorted(k for k in set(old) | set(record) if old.get(k) != record.get(k))
    return "differs in " + ", ".join(keys) if keys else "differs"


def _collect(
    client, futures: list, indices: list[int], add: Callable, stall_timeout: float, stop_at_first: bool
) -> dict:
    """Wait for the tasks, calling ``add(piece index, rows)`` for each that finishes (``futures[k]``
    is piece ``indices[k]``); {piece index: exception} of
    the ones that failed (the first is raised at once with ``stop_at_first``). No piece
    finishing for ``stall_timeout`` seconds raises a CommunicationError."""
    from distributed import wait

    from ..errors import CommunicationError

    index_of = {f.key: i for f, i in zip(futures, indices)}
    pending, failed = list(futures), {}
    while pending:
        try:
            wait(pending, timeout=stall_timeout, return_when="FIRST_COMPLETED")
        except TimeoutError:
            late = sorted(index_of[f.key] for f in pending)
            shown = ", ".join(map(str, late[:5])) + (" ..." if len(late) > 5 else "")
            raise CommunicationError(
                f"no partition was written for {stall_timeout:g} s (partitions {shown} still running: "
                "a worker that is stuck or gone)"
            ) from None
        for fut in [f for f in pending if f.done()]:
            pending.remove(fut)
            if fut.status == "finished":
                add(index_of[fut.key], int(fut.result(timeout=stall_timeout)))
                continue
            exc = fut.exception(timeout=stall_timeout)
            if stop_at_first:
                raise exc
            failed[index_of[fut.key]] = exc
    return failed


def _pieces_failed(failed: dict, sources: Sequence[str] | None, n: int, tmp: Path, kept: bool) -> DGBoostError:
    """One error naming the input files of the pieces that failed (the first few)."""
    items = sorted(failed.items())
    named = []
    for i, exc in items[:_MAX_NAMED]:
        where = f"{sources[i]} (partition {i})" if sources is not None else f"partition {i}"
        text = str(exc).splitlines()[0] if str(exc) else ""
        named.append(f"{where}: {type(exc).__name__}: {text}" if text else f"{where}: {type(exc).__name__}")
    more = f" (and {len(items) - _MAX_NAMED} more)" if len(items) > _MAX_NAMED else ""
    files = sorted({sources[i] for i in failed}) if sources is not None else []
    lead = f"{len(files)} input file(s) could not be written: " if files else ""
    tail = (
        f"; the other {n - len(failed)} partition(s) are written in {tmp}: fix or remove the file(s) "
        "and run again with --resume to write only the missing ones"
        if kept and n > len(failed)
        else ""
    )
    return DGBoostValueError(f"{lead}{'; '.join(named)}{more}{tail}")


def _replace_folder(tmp: Path, target: Path) -> None:
    """Rename ``tmp`` to ``target``; an existing (checked) ``target`` is moved away first."""
    old = None
    if target.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=target.parent))
        os.replace(target, old / target.name)
    os.replace(tmp, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
