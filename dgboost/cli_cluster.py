"""The cluster work behind ``dgboost train|predict|explain --cluster`` and ``dgboost demo``.

Plain functions of a ``distributed.Client`` (no click), so that they can be used and tested
without the command line:

- :func:`train_on_cluster`: Parquet files (a glob) -> :func:`dgboost.dask.train` -> a model file;
- :func:`predict_on_cluster` / :func:`explain_on_cluster`: Parquet files -> a folder of Parquet
  files, one per input partition, each written by the worker that computed it;
- :func:`cluster_demo`: synthetic data partitioned over the workers, trained, evaluated and
  explained there, with rows/s.

Inputs are read with ``dask.dataframe.read_parquet``: a local glob is expanded here (Python's
``glob``) and its files passed in natural sort order (``part-2`` before ``part-10``, as Dask
itself sorts), so the rows of the data are the files' rows concatenated in that order, and the
model is byte-identical to single-process :func:`dgboost.train` on those rows (the Dask layer's
guarantee). Paths must be readable and writable by every worker (a local cluster, or a
filesystem the workers share); URLs (``s3://...``) go to Dask as given.

Outputs are never gathered on the client: each partition's result is written by the worker
that computed it into a temporary folder next to the target (``part.00000.parquet``, ...: the
input's partitions in order, so that concatenating the files in name order gives the rows in
input order), and the folder is renamed into place only when every partition is written; a
failed or interrupted run leaves no output folder behind. An existing output folder is replaced
only when it holds nothing but ``part.*.parquet`` files (an earlier output).

Progress is printed by the client, never on the workers (a print there reaches the worker's
log, not this terminal). Training: the workers send each reported round's evaluation results
as a Dask event, and the client prints the evaluation lines on stdout, as :func:`dgboost.train`
prints them (every ``verbose_eval`` rounds and the last one); without an evaluation set,
``round k/N`` lines on stderr every ~10% of the rounds. Writing: ``partitions done k/N`` on
stderr as the workers finish partitions (every ~10%). Other progress lines go to stderr.
"""
from __future__ import annotations

import contextlib
import difflib
import glob as globlib
import operator
import os
import re
import shutil
import sys
import tempfile
import threading
import time
import uuid
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .errors import DGBoostError, DGBoostValueError
from .training import TrainingCallback, _format_evaluation

__all__ = ["open_cluster", "describe_cluster", "cluster_device", "check_parquet_glob", "check_output_folder",
           "train_on_cluster", "predict_on_cluster", "explain_on_cluster", "cluster_demo", "RoundReporter"]

# interaction values are computed and written in slices of rows whose output stays below this
_MAX_SLICE_BYTES = 256 << 20
_PART_NAME = re.compile(r"^part\.\d+\.parquet$")


# ----------------------------------------------------------------------------- output
def _say(quiet: bool, message: str = "") -> None:
    """A progress line on stderr (nothing when ``quiet``)."""
    if not quiet:
        print(message, file=sys.stderr, flush=True)


def _out(quiet: bool, message: str) -> None:
    """An evaluation line on stdout, where :func:`dgboost.train` prints them."""
    if not quiet:
        print(message, file=sys.stdout, flush=True)


def _seconds(s: float) -> str:
    return f"{s:.2f} s" if s < 120 else f"{s / 60:.1f} min"


def _rate(n: float, seconds: float) -> str:
    per_s = n / max(seconds, 1e-9)
    if per_s >= 1e6:
        return f"{per_s / 1e6:.2f} M"
    if per_s >= 1e3:
        return f"{per_s / 1e3:.1f} K"
    return f"{per_s:.0f}"


# ----------------------------------------------------------------------------- clusters
def open_cluster(config, quiet: bool = False):
    """``dgboost.cluster.connect(config)`` with a progress line saying what runs where.

    Parameters
    ----------
    config : str, os.PathLike, dict or None
        A shipped config name, a YAML path, a config dict, or None for
        :func:`dgboost.cluster.default_config`.

    Returns
    -------
    (distributed.Client, dict)
        The client (closing it closes a cluster it started) and the config used. Warnings
        the cluster's start raises (a dashboard port in use...) become progress lines.
    """
    from .cluster import connect, default_config, load_config

    if config is None:
        config = default_config()
    elif not isinstance(config, dict):
        config = load_config(config)
    _say(quiet, f"starting the cluster ({_kind_words(config)})..." if config["kind"] != "existing"
         else f"connecting to the {_kind_words(config)}...")
    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        client = connect(config)
    for w in caught:
        _say(quiet, f"  note: {str(w.message).splitlines()[0]}")
    try:
        expected = _expected_workers(config)
        if len(client.scheduler_info(n_workers=-1)["workers"]) < expected:
            # batch jobs and pods may wait in a queue: say so, and wait (up to 30 min)
            _say(quiet, f"waiting for {expected} worker{'s' if expected > 1 else ''} to join...")
            client.wait_for_workers(expected, timeout=1800 if config["kind"] in ("slurm", "kubernetes") else 120)
    except BaseException:
        client.close()
        raise
    _say(quiet, f"cluster ready in {_seconds(time.perf_counter() - started)}: {describe_cluster(client, config)}")
    return client, config


def _expected_workers(config: dict) -> int:
    """Workers to wait for before the work starts: all those the config asks for (at least one)."""
    kind, args, scale = config.get("kind"), config.get("args") or {}, config.get("scale") or {}
    if kind == "local":
        from .cluster import _local_args

        return int(_local_args(config)["n_workers"])
    if kind == "slurm" and scale:
        return int(scale.get("n") or int(scale.get("jobs") or 1) * int(args.get("processes") or 1))
    if kind == "kubernetes":
        return int(args.get("n_workers") or 1)
    return 1  # local-cuda starts its workers before connect() returns; existing: what is there


def _kind_words(config: dict) -> str:
    return {"local": "local CPU worker processes", "local-cuda": "local dask-cuda workers, one per GPU",
            "slurm": "SLURM jobs", "kubernetes": "Kubernetes pods",
            "existing": f"scheduler {config.get('address') or config.get('scheduler_file')}"}.get(
        config.get("kind"), str(config.get("kind")))


def describe_cluster(client, config: dict | None = None, dashboard: bool = True) -> str:
    """``2 workers (local CPU worker processes), 1 thread each, dashboard http://...``."""
    workers = client.scheduler_info(n_workers=-1)["workers"]
    threads = sorted({int(w.get("nthreads", 0)) for w in workers.values()})
    thread_words = "/".join(str(t) for t in threads) or "?"
    kind = f" ({_kind_words(config)})" if config else ""
    link = getattr(client, "dashboard_link", None) if dashboard else None
    return (f"{len(workers)} worker{'s' if len(workers) != 1 else ''}{kind}, {thread_words} "
            f"thread{'s' if threads != [1] else ''} each" + (f", dashboard {link}" if link else ""))


def cluster_device(client) -> str:
    """``cuda`` when every worker has a usable GPU, else ``cpu`` (what ``device=auto`` means here)."""
    from .cli import resolve_device  # "auto" on a worker: cuda where CuPy and the CUDA backend work there

    devices = set(client.run(resolve_device, "auto").values())
    return "cuda" if devices == {"cuda"} else "cpu"


# ----------------------------------------------------------------------------- reading
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


def check_output_folder(output_dir) -> None:
    """Refuse an output that is a file, or a folder holding anything but an earlier output."""
    _check_target(Path(output_dir).expanduser().absolute())


def _read_parquet(data_glob: str, what: str = "data"):
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


def _require_column(columns: list[str], name: str, what: str, source: str) -> None:
    if name not in columns:
        close = difflib.get_close_matches(name, columns, n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]!r}?" if close else f"; columns are {columns[:10]}"
        raise DGBoostValueError(f"{source}: no {what} column {name!r}{hint}")


def _split_frame(frame, columns: dict[str, Any]) -> dict:
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


def _select_features(frame, source: str, drop: list[str], model_names) -> list:
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
            raise DGBoostValueError(f"output folder {target} exists and holds other files than "
                                    f"part.*.parquet ({others[:3]}); remove it or choose another folder")


def _write_frame(frame, path: str) -> int:
    """Write one partition (on its worker); the index only when it is named (from the data)."""
    named = any(n is not None for n in getattr(frame.index, "names", [None]))
    frame.to_parquet(path, index=named)
    return len(frame)


def _write_partitions(client, pieces: list, output_dir, quiet: bool, what: str,
                      writer: Callable = _write_frame, writer_args: tuple = ()) -> tuple[int, int]:
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
        tasks = [dask.delayed(writer, pure=False)(piece, str(tmp / f"part.{i:0{width}d}.parquet"), *writer_args)
                 for i, piece in enumerate(pieces)]
        futures = client.compute(tasks)
        rows, done, shown, started = 0, 0, 0, time.perf_counter()
        for fut in as_completed(futures):
            rows += int(fut.result())  # raises the partition's own error
            done += 1
            if done == n or done * 10 // n > shown * 10 // n:
                _say(quiet, f"partitions done {done}/{n} ({rows:,} rows {what}, "
                            f"{_seconds(time.perf_counter() - started)})")
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


# ----------------------------------------------------------------------------- progress of rounds
class RoundReporter(TrainingCallback):
    """Sends rounds' evaluation results from the workers to the client.

    Runs on every rank (the evaluation results are the same on all): ``after_iteration``
    logs an event on the Dask topic ``topic`` for round 0 and every ``period`` rounds: rounds
    period, 2 period... as XGBoost's evaluation monitor prints them, or, with
    ``count_from_one`` (progress without an evaluation set), rounds period-1, 2 period-1...
    (the period-th, 2 period-th... round). The client prints them (:class:`_RoundPrinter`); nothing is
    printed on the workers. Never stops training and never fails it.
    """

    def __init__(self, topic: str, period: int, count_from_one: bool = False):
        self.topic = topic
        self.period = max(1, int(period))
        self.offset = 1 if count_from_one else 0

    def after_iteration(self, model, epoch: int, evals_log: dict) -> bool:
        if epoch == 0 or (epoch + self.offset) % self.period == 0:
            try:
                from distributed import get_worker

                last = {data: {m: float(v[-1]) for m, v in metrics.items()} for data, metrics in evals_log.items()}
                get_worker().log_event(self.topic, {"epoch": int(epoch), "last": last})
            except Exception:  # noqa: BLE001 - progress must never fail training (e.g. not on a worker)
                pass
        return False


class _RoundPrinter:
    """On the client: prints the rounds the workers report, each once, in order.

    ``first_round_at`` is when round 0's report arrived (``time.perf_counter()``), also when
    ``quiet`` (nothing is printed then).
    """

    def __init__(self, client, total: int, period: int, quiet: bool, has_evals: bool = True):
        self.client, self.total, self.quiet, self.has_evals = client, total, quiet, has_evals
        self.period = max(1, period)
        self.topic = f"dgboost-rounds-{uuid.uuid4().hex}"
        self.printed = -1
        self.lock = threading.Lock()
        self.started = time.perf_counter()
        self.first_round_at = None

    def __enter__(self):
        self.started = time.perf_counter()
        self.client.subscribe_topic(self.topic, self._handle)
        return self

    def __exit__(self, *exc):
        with contextlib.suppress(Exception):
            self.client.unsubscribe_topic(self.topic)

    def callback(self) -> RoundReporter:
        return RoundReporter(self.topic, self.period, count_from_one=not self.has_evals)

    def _handle(self, event) -> None:
        _, msg = event
        with self.lock:
            epoch = int(msg["epoch"])
            if epoch == 0 and self.first_round_at is None:
                self.first_round_at = time.perf_counter()
            if epoch <= self.printed:
                return  # another rank's copy
            if not self.has_evals and (epoch + 1) % self.period:
                return  # round 0, reported for its time only
            self.printed = epoch
            self._print(epoch, {d: {m: [v] for m, v in ms.items()} for d, ms in msg["last"].items()})

    def _print(self, epoch: int, history: dict) -> None:
        if self.quiet:
            return
        if history:
            _out(self.quiet, _format_evaluation(epoch, history))
        else:
            now = time.perf_counter()
            eta = ""
            if self.first_round_at is not None and 0 < epoch < self.total - 1:
                # from the rounds after round 0, which also pays for the job's start
                eta = f", about {_seconds((now - self.first_round_at) / epoch * (self.total - epoch - 1))} left"
            _say(self.quiet, f"round {epoch + 1}/{self.total} ({_seconds(now - self.started)}{eta})")

    def finish(self, rounds: int, history: dict) -> None:
        """The last round, when it was not on the period (as train()'s own monitor does)."""
        if rounds < 1:
            return
        with self.lock:
            last = rounds - 1
            if last > self.printed:
                self.printed = last
                self._print(last, history)


# ----------------------------------------------------------------------------- train
def train_on_cluster(client, data_glob: str, label: str, weight: str | None, params: dict, num_boost_round: int,
                     output_model, validation_glob: str | None = None, early_stopping_rounds: int | None = None,
                     quiet: bool = False, verbose_eval: int | None = None):
    """Train on the Parquet files of ``data_glob`` with :func:`dgboost.dask.train`; write the model.

    Parameters
    ----------
    client : distributed.Client
    data_glob : str
        Parquet files (a glob or one path) with the features, ``label`` and ``weight`` columns.
    label, weight : str, str or None
        Label and (optional) weight columns; every other column is a feature.
    params : dict
        Training parameters, as for :func:`dgboost.train`.
    num_boost_round : int
    output_model : str or os.PathLike
        The model file to write (JSON; atomically).
    validation_glob : str, optional
        Parquet files of an evaluation set named ``validation`` (same columns).
    early_stopping_rounds : int, optional
        Needs ``validation_glob``; the model written keeps the rounds up to the best one.
    quiet : bool
        No progress output.
    verbose_eval : int, optional
        Rounds between evaluation lines (0: none); default about 10% of the rounds.

    Returns
    -------
    Booster
        The model written.
    """
    from . import dask as dxgb
    from .params import parse_params

    parse_params(params)  # bad parameters fail before any data is read
    if early_stopping_rounds is not None and validation_glob is None:
        raise DGBoostValueError("early stopping needs a validation data set")
    if weight is not None and weight == label:
        raise DGBoostValueError(f"the label and weight columns are both {label!r}")
    dtrain, n_rows, n_parts = _dmatrix(client, data_glob, label, weight, "training data")
    evals = []
    if validation_glob is not None:
        dvalid, _, _ = _dmatrix(client, validation_glob, label, weight, "validation data")
        evals.append((dvalid, "validation"))
    # evaluation lines every verbose_eval rounds (default ~10%); without an evaluation set,
    # "round k/N" lines every ~10% (none for verbose_eval=0)
    period = max(1, num_boost_round // 10)
    if evals and verbose_eval is not None:
        period = int(verbose_eval)
    elif verbose_eval == 0:
        period = 0
    n_workers = len(client.scheduler_info(n_workers=-1)["workers"])
    _say(quiet, f"training {num_boost_round} rounds on {n_rows:,} rows x {dtrain.num_col()} features "
                f"({n_parts} partitions of {data_glob}) on {n_workers} workers")
    started = time.perf_counter()
    printer = _RoundPrinter(client, num_boost_round, period, quiet or period == 0, has_evals=bool(evals))
    with printer:
        result = dxgb.train(client, params, dtrain, num_boost_round, evals=evals,
                            early_stopping_rounds=early_stopping_rounds, verbose_eval=False,
                            callbacks=[printer.callback()])
        booster = result["booster"]
        printer.finish(booster.num_boosted_rounds(), result["history"])
    elapsed = time.perf_counter() - started
    best = booster.meta.get("best_iteration")
    detail = ""
    if early_stopping_rounds is not None and best is not None:
        # keep the rounds up to the best one, so that predict uses the best model
        best_score = booster.meta.get("best_score")
        booster = booster[: best + 1]
        booster._set_best(best, best_score)
        detail = f", best iteration {best}"
    output_model = Path(output_model)
    output_model.parent.mkdir(parents=True, exist_ok=True)
    booster.save_model(output_model)
    _say(quiet, f"wrote {output_model} ({booster.num_boosted_rounds()} rounds{detail}; trained in "
                f"{_seconds(elapsed)}, {_rate(n_rows * max(1, booster.num_boosted_rounds()), elapsed)} rows/s "
                f"(rows x rounds / s))")
    return booster


def _dmatrix(client, data_glob: str, label: str, weight: str | None, what: str):
    """(DaskDMatrix, rows, partitions) of Parquet files with a label (and weight) column."""
    from . import dask as dxgb

    frame = _read_parquet(data_glob, what)
    columns = [str(c) for c in frame.columns]
    _require_column(columns, label, "label", data_glob)
    if weight is not None:
        _require_column(columns, weight, "weight", data_glob)
    by_name = {str(c): c for c in frame.columns}
    features = [c for c in frame.columns if str(c) not in (label, weight)]
    if not features:
        raise DGBoostValueError(f"{data_glob}: no feature columns besides the label and weight")
    wanted = {"X": features, "y": by_name[label]}
    if weight is not None:
        wanted["w"] = by_name[weight]
    parts = _split_frame(frame, wanted)
    dm = dxgb.DaskDMatrix(client, parts["X"], parts["y"], weight=parts.get("w"))
    rows = sum(client.gather([client.submit(len, dm.partition(i)["data"], pure=False)
                              for i in range(dm.n_partitions)]))
    return dm, int(rows), dm.n_partitions


# ----------------------------------------------------------------------------- predict
def _prediction_frame(preds):
    """A partition's predictions as the frame written: ``prediction`` or ``prediction_0..k-1``."""
    import pandas as pd

    if isinstance(preds, pd.Series):
        return preds.to_frame("prediction")
    out = preds.copy()
    out.columns = ["prediction"] if out.shape[1] == 1 else [f"prediction_{i}" for i in range(out.shape[1])]
    return out


def predict_on_cluster(client, model_path, data_glob: str, output_dir, margin: bool = False,
                       label_column: str | None = None, quiet: bool = False) -> tuple[int, int]:
    """Predict the Parquet files of ``data_glob`` on the workers; write a Parquet folder.

    Each output file holds one input partition's predictions, in row order: a column
    ``prediction`` (``prediction_0..k-1`` for several outputs), raw margins with ``margin``.
    The model's feature columns are picked by name when the data has them all; ``label_column``
    is dropped first.

    Returns
    -------
    (rows, partitions) written.
    """
    import dask

    from . import dask as dxgb
    from .booster import Booster

    booster = Booster(model_file=str(model_path))
    frame = _read_parquet(data_glob)
    if label_column is not None:
        _require_column([str(c) for c in frame.columns], label_column, "label", data_glob)
    features = _select_features(frame, data_glob, [label_column] if label_column else [], booster.feature_names)
    X = _split_frame(frame, {"X": features})["X"]
    _say(quiet, f"predicting {X.npartitions} partitions of {data_glob} with {booster.num_boosted_rounds()} "
                f"rounds into {output_dir}")
    preds = dxgb.predict(client, booster, X, output_margin=margin)
    pieces = [dask.delayed(_prediction_frame, pure=True)(p) for p in preds.to_delayed()]
    rows, parts = _write_partitions(client, pieces, output_dir, quiet, "predicted")
    _say(quiet, f"wrote {rows:,} predictions in {parts} files to {output_dir}")
    return rows, parts


# ----------------------------------------------------------------------------- explain
def _interaction_columns(features: list[str], output_names) -> list[str]:
    """The columns of ``dgboost explain --interactions`` (as :func:`dgboost.cli.shap_column_names`)."""
    cols = [str(f) for f in features] + ["bias"]
    cols = [f"{a}:{b}" for a in cols for b in cols]
    if output_names is None:
        return cols
    return [f"{c}[{g}]" for g in output_names for c in cols]


def _write_interactions(part, path: str, explainer, columns: list[str], device: str | None = None) -> int:
    """Interaction values of one partition, computed and appended in slices of rows (on its worker)."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    from .dask.explain import _on_device

    explainer = _on_device(explainer, device, rows_on_gpu=False)

    named = any(n is not None for n in getattr(part.index, "names", [None]))
    step = max(1, _MAX_SLICE_BYTES // (8 * len(columns)))
    writer = None
    try:
        for start in range(0, max(len(part), 1), step):
            rows = part.iloc[start:start + step]
            if len(rows):
                values = explainer.contributions(rows, interactions=True, progress=False)
                flat = values.reshape(values.shape[0], -1)
            else:
                flat = np.empty((0, len(columns)), np.float64)
            frame = pd.DataFrame(flat, columns=columns, index=rows.index)
            table = pa.Table.from_pandas(frame, preserve_index=named)
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema)
            writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()
    return len(part)


def explain_on_cluster(client, model_path, data_glob: str, output_dir, interactions: bool = False,
                       label_column: str | None = None, quiet: bool = False,
                       algorithm: str = "auto", device: str = "auto") -> tuple[int, int]:
    """Exact SHAP values of every row of the Parquet files of ``data_glob``, written by the workers.

    SHAP values: :meth:`TreeExplainer.shap_frame` of each partition (columns: the features and
    ``bias``; ``<feature>[<output>]`` for several outputs), through
    :func:`dgboost.dask.shap_values`. ``interactions``: the interaction values flattened to
    ``<a>:<b>`` columns (``(F+1)^2`` per output, bias included: the layout of
    ``dgboost explain --interactions``), computed in slices of rows so that a worker never holds
    more than ~256 MB of them at once.

    ``device``: where the workers explain; ``"auto"`` is their GPUs when every worker has one
    (:func:`cluster_device`), and the partitions read from Parquet are uploaded there.

    Returns
    -------
    (rows, partitions) written.
    """
    from . import dask as dxgb
    from .dask.prediction import model_reference
    from .explain.explainer import TreeExplainer

    explainer = TreeExplainer(str(model_path), algorithm=algorithm, progress=False)
    frame = _read_parquet(data_glob)
    if label_column is not None:
        _require_column([str(c) for c in frame.columns], label_column, "label", data_glob)
    features = _select_features(frame, data_glob, [label_column] if label_column else [],
                                explainer.meta.get("feature_names"))
    X = _split_frame(frame, {"X": features})["X"]
    what = "interaction values" if interactions else "SHAP values"
    device = cluster_device(client) if device == "auto" else device
    _say(quiet, f"explaining {X.npartitions} partitions of {data_glob} with {explainer.ensemble.n_trees} trees "
                f"({what}, on the workers' {'GPUs' if device == 'cuda' else 'CPUs'}) into {output_dir}")
    if interactions:
        outputs = None
        if explainer.n_outputs > 1:
            outputs = explainer.output_names if explainer.output_names is not None \
                else list(range(explainer.n_outputs))
        columns = _interaction_columns([str(c) for c in features], outputs)
        rows, parts = _write_partitions(client, list(X.to_delayed()), output_dir, quiet, "explained",
                                        writer=_write_interactions,
                                        writer_args=(model_reference(explainer), columns, device))
    else:
        values = dxgb.shap_values(client, explainer, X, device=device)
        rows, parts = _write_partitions(client, list(values.to_delayed()), output_dir, quiet, "explained")
    _say(quiet, f"wrote {what} of {rows:,} rows in {parts} files to {output_dir}")
    return rows, parts


# ----------------------------------------------------------------------------- demo
def _scatter_rows(client, array: np.ndarray, workers: list[str]):
    """``array`` as a dask array of one contiguous block per worker, each block on its worker."""
    import dask.array as da

    bounds = np.linspace(0, len(array), len(workers) + 1).round().astype(int)
    blocks = []
    for worker, lo, hi in zip(workers, bounds[:-1], bounds[1:]):
        future = client.scatter(array[lo:hi], workers=[worker], hash=False)
        blocks.append(da.from_delayed(future, shape=(hi - lo,) + array.shape[1:], dtype=array.dtype))
    return da.concatenate(blocks, axis=0)


def cluster_demo(client, rows: int, rounds: int, device: str, quiet: bool = False, seed: int = 0,
                 test_fraction: float = 0.2, missing_rate: float = 0.1,
                 config: dict | None = None) -> list[tuple[str, str]]:
    """The cluster demo: synthetic binary data over the workers, trained, evaluated and explained.

    The data is the single-process demo's (:func:`dgboost.datasets.make_synthetic`, the last
    ``test_fraction`` of the rows held out), made on the client and scattered to the workers in
    one contiguous block per worker. Training: :func:`dgboost.dask.train` with the test rows as
    evaluation set (a line every ~10% of the rounds). SHAP: :func:`dgboost.dask.shap_values` of
    the test rows, reduced on the workers to the mean |SHAP value| of each feature (only those
    numbers come back).

    ``config`` (the cluster's config, optional) only names the kind of workers in the summary.

    Returns
    -------
    list of (str, str)
        The rows of the summary table.
    """
    from . import dask as dxgb
    from .datasets import make_synthetic

    X, y, _ = make_synthetic(rows, task="binary", missing_rate=missing_rate, seed=seed)
    n_test = max(1, int(round(rows * test_fraction)))
    if rows - n_test < 1:
        raise DGBoostValueError(f"--rows {rows} is too small for a train/test split")
    n_train = rows - n_test
    workers = sorted(client.scheduler_info(n_workers=-1)["workers"])
    if not workers:
        raise DGBoostError("the cluster has no workers")
    started = time.perf_counter()
    Xtr, ytr = _scatter_rows(client, X[:n_train], workers), _scatter_rows(client, y[:n_train], workers)
    Xte, yte = _scatter_rows(client, X[n_train:], workers), _scatter_rows(client, y[n_train:], workers)
    dtrain = dxgb.DaskDMatrix(client, Xtr, ytr)
    dtest = dxgb.DaskDMatrix(client, Xte, yte)
    load_time = time.perf_counter() - started
    summary = [("rows (train / test)", f"{n_train:,} / {n_test:,}"), ("features", str(X.shape[1])),
               ("missing values", f"{missing_rate:.0%}"),
               ("cluster", describe_cluster(client, config, dashboard=False)),
               ("data to workers", _seconds(load_time))]

    params = {"objective": "binary:logistic", "eval_metric": ["logloss", "auc"], "max_depth": 6,
              "eta": 0.1, "device": device, "seed": seed}
    every = max(1, rounds // 10)
    _say(quiet, f"training {rounds} rounds on {n_train:,} rows x {X.shape[1]} features over {len(workers)} "
                f"workers (device {device})")
    started = time.perf_counter()
    with _RoundPrinter(client, rounds, every, quiet) as printer:
        result = dxgb.train(client, params, dtrain, rounds, evals=[(dtest, "test")], verbose_eval=False,
                            callbacks=[printer.callback()])
        booster, history = result["booster"], result["history"]
        printer.finish(booster.num_boosted_rounds(), history)
    ended = time.perf_counter()
    train_time = ended - started
    done = booster.num_boosted_rounds()
    speed = f"{_rate(n_train * done, train_time)} (rows x rounds / train time)"
    summary += [("rounds", str(done)), ("device", device), ("train time", _seconds(train_time))]
    if printer.first_round_at is not None and done > 1:
        # the first round also pays for the job's start: the tracker, and each worker loading
        # dgboost's compiled kernels (once per worker process)
        first = printer.first_round_at - started
        summary.append(("  of which round 0", f"{_seconds(first)} (job start: tracker, kernels loaded on the "
                                               "workers)"))
        speed += f"; {_rate(n_train * (done - 1), ended - printer.first_round_at)} after round 0"
    summary.append(("train rows/s", speed))
    test = history.get("test", {})
    if "auc" in test:
        summary.append(("test AUC", f"{test['auc'][-1]:.4f}"))
    if "logloss" in test:
        summary.append(("test logloss", f"{test['logloss'][-1]:.4f}"))

    _say(quiet, f"explaining the {n_test:,} test rows on the workers (exact TreeSHAP)")
    started = time.perf_counter()
    values = dxgb.shap_values(client, booster, Xte, device=device)
    mean_abs = np.asarray(client.compute(abs(values).mean(axis=0)).result())
    shap_time = time.perf_counter() - started
    top = np.argsort(-mean_abs)[:3]
    summary += [("SHAP time", _seconds(shap_time)), ("SHAP rows/s", f"{_rate(n_test, shap_time)}"),
                ("top features (mean |SHAP|)", ", ".join(f"f{i} {mean_abs[i]:.3f}" for i in top))]
    return summary
