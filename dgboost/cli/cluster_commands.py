"""The cluster work behind ``dgboost train|predict|explain --cluster``.

Plain functions of a ``distributed.Client`` (no click), so that they can be used and tested
without the command line:

- :func:`train_on_cluster`: Parquet files -> :func:`dgboost.dask.train` -> a model file;
- :func:`predict_on_cluster` / :func:`explain_on_cluster`: Parquet files -> a folder of Parquet
  files, one per input partition, each written by the worker that computed it
  (:mod:`dgboost.cli.cluster_io`), with the ID columns asked for (``keep``) and the name of
  each row's file (``with_file_name``), so that the results join back to the inputs.

The inputs are files, folders or globs (several of them: what a shell makes of an unquoted
glob); their footers are read and their schemas checked before any work starts, and their
rows are split into partitions of whole row groups of at most ``partition_rows`` rows, so that
one large file is worked on by several workers (:mod:`dgboost.cli.parquet_files`).

The rows of the data are the files' rows concatenated in natural sort order, and the model is
byte-identical to single-process :func:`dgboost.train` on those rows (the Dask layer's
guarantee). Paths must be readable and writable by every worker (a local cluster, or a
filesystem the workers share); URLs (``s3://...``) go to Dask as given.

Progress (:mod:`dgboost.cli.cluster_progress`): evaluation lines on stdout every
``verbose_eval`` rounds and the last one; ``round k/N`` lines on stderr (seconds per round,
time left) every ~10% of the rounds without an evaluation set, and every ``progress_interval``
seconds; rows done, rows/s and time left on stderr every ``progress_interval`` seconds while
the workers predict or explain.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..dask._waits import cluster_workers
from ..errors import DGBoostValueError
from ._format import rate, seconds
from .cluster_io import (
    ParquetInput,
    check_inputs_readable,
    check_parquet_input,
    require_column,
    select_features,
    split_frame,
    write_partitions,
)
from .cluster_progress import DEFAULT_INTERVAL, RoundPrinter, say
from .cluster_session import workers_device
from .files import categorical_columns, model_categorical_columns
from .parquet_files import FILE_COLUMN

if TYPE_CHECKING:  # annotations only: distributed is imported where a cluster is used
    from distributed import Client

    from ..booster import Booster

__all__ = ["train_on_cluster", "predict_on_cluster", "explain_on_cluster"]

# interaction values are computed and written in slices of rows whose output stays below this
_MAX_SLICE_BYTES = 256 << 20


def train_on_cluster(
    client: Client,
    data_glob: str | Sequence[str] | ParquetInput,
    label: str,
    weight: str | None,
    params: dict,
    num_boost_round: int,
    output_model: str | os.PathLike,
    validation_glob: str | Sequence[str] | ParquetInput | None = None,
    early_stopping_rounds: int | None = None,
    quiet: bool = False,
    verbose_eval: int | None = None,
    partition_rows: int | None = None,
    progress_interval: float = DEFAULT_INTERVAL,
    enable_categorical: bool = False,
) -> Booster:
    """Train on Parquet files with :func:`dgboost.dask.train`; write the model.

    Parameters
    ----------
    client : distributed.Client
    data_glob : str, sequence of str or ParquetInput
        Parquet files, folders or globs with the features, ``label`` and ``weight`` columns
        (:func:`~dgboost.cli.cluster_io.check_parquet_input`).
    label, weight : str, str or None
        Label and (optional) weight columns; every other column is a feature.
    params : dict or TrainParams
        Training parameters, as for :func:`dgboost.train` (parsed once, here, unless already
        a validated :class:`~dgboost.params.TrainParams`, which is used as it is).
    num_boost_round : int
    output_model : str or os.PathLike
        The model file to write (JSON; atomically).
    validation_glob : str, sequence of str or ParquetInput, optional
        Parquet files of an evaluation set named ``validation`` (same columns).
    early_stopping_rounds : int, optional
        Needs ``validation_glob``; the model written keeps the rounds up to the best one.
    quiet : bool
        No progress output.
    verbose_eval : int, optional
        Rounds between evaluation lines (0: none); default about 10% of the rounds.
    partition_rows : int, optional
        Most rows of a partition (whole row groups); the model does not depend on it.
    progress_interval : float
        Seconds between ``round k/N`` progress lines.
    enable_categorical : bool
        Dictionary and string columns as categorical features (``--enable-categorical``; the
        partitions' categories are agreed before training, see docs/categorical.md); without
        it such a column is an error.

    Returns
    -------
    Booster
        The model written.
    """
    from .. import dask as dxgb
    from ..params import parse_params

    p = parse_params(params)  # bad parameters fail before any data is read
    if early_stopping_rounds is not None and validation_glob is None:
        raise DGBoostValueError("early stopping needs a validation data set")
    if weight is not None and weight == label:
        raise DGBoostValueError(f"the label and weight columns are both {label!r}")
    data = check_parquet_input(data_glob, "training data", partition_rows)
    valid = None if validation_glob is None else check_parquet_input(validation_glob, "validation data", partition_rows)
    dtrain, n_parts = _dmatrix(client, data, label, weight, enable_categorical)
    n_rows = data.num_rows
    evals = []
    if valid is not None:
        dvalid, _ = _dmatrix(client, valid, label, weight, enable_categorical)
        evals.append((dvalid, "validation"))
    # evaluation lines every verbose_eval rounds (default ~10%); without an evaluation set,
    # "round k/N" lines every ~10% (none for verbose_eval=0)
    period = max(1, num_boost_round // 10)
    if evals and verbose_eval is not None:
        period = int(verbose_eval)
    elif verbose_eval == 0:
        period = 0
    n_workers = len(cluster_workers(client))
    say(
        quiet,
        f"training {num_boost_round} rounds on {n_rows:,} rows x {dtrain.num_col()} features "
        f"({n_parts} partitions of {_files_words(data)}) on {n_workers} workers",
    )
    started = time.perf_counter()
    # period 0 (verbose_eval=0): no evaluation lines; the progress lines stay (--quiet silences them)
    printer = RoundPrinter(client, num_boost_round, period, quiet, has_evals=bool(evals), interval=progress_interval)
    with printer:
        result = dxgb.train(
            client,
            p,
            dtrain,
            num_boost_round,
            evals=evals,
            early_stopping_rounds=early_stopping_rounds,
            verbose_eval=False,
            callbacks=[printer.callback()],
        )
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
    say(
        quiet,
        f"wrote {output_model} ({booster.num_boosted_rounds()} rounds{detail}; trained in "
        f"{seconds(elapsed)}, {rate(n_rows * max(1, booster.num_boosted_rounds()), elapsed)} rows/s "
        f"(rows x rounds / s))",
    )
    return booster


def _files_words(data: ParquetInput) -> str:
    n = len(data.footers)
    return data.footers[0].path if n == 1 else f"{n} files"


def _dmatrix(client, data: ParquetInput, label: str, weight: str | None, enable_categorical: bool = False):
    """(DaskDMatrix, partitions) of Parquet files with a label (and weight) column."""
    from .. import dask as dxgb

    frame = data.frame()
    columns = [str(c) for c in frame.columns]
    require_column(columns, label, "label", data.source)
    if weight is not None:
        require_column(columns, weight, "weight", data.source)
    by_name = {str(c): c for c in frame.columns}
    features = [c for c in frame.columns if str(c) not in (label, weight)]
    if not features:
        raise DGBoostValueError(f"{data.source}: no feature columns besides the label and weight")
    wanted = {"X": features, "y": by_name[label]}
    if weight is not None:
        wanted["w"] = by_name[weight]
    parts = split_frame(frame, wanted)
    X = categorical_columns(parts["X"], enable_categorical, data.source)
    dm = dxgb.DaskDMatrix(client, X, parts["y"], weight=parts.get("w"), enable_categorical=enable_categorical)
    return dm, dm.n_partitions


# ----------------------------------------------------------------------------- inputs with ID columns
def _input_columns(
    data: ParquetInput, label_column: str | None, keep: Sequence[str] | None, model_names: list[str] | None
) -> tuple[Any, list, list]:
    """(frame, feature columns, columns carried to the output: ``keep`` then the file name)."""
    frame = data.frame()
    columns = [str(c) for c in frame.columns]
    if label_column is not None:
        require_column(columns, label_column, "label", data.source)
    keep = list(keep or [])
    for name in keep:
        require_column(columns, name, "--keep", data.source)
    carried = keep + ([FILE_COLUMN] if data.with_file else [])
    if len(set(carried)) < len(carried):
        raise DGBoostValueError(f"columns kept twice: {carried}")
    drop = [label_column] if label_column else []
    if model_names is None or not set(model_names) <= set(columns):
        drop += carried  # ID columns are not features unless the model names them
    elif data.with_file:
        drop.append(FILE_COLUMN)
    features = select_features(frame, data.source, drop, model_names)
    return frame, features, carried


def _with_carried(values, carried):
    """A partition's output with the carried columns of its rows in front (same rows, same index)."""
    import pandas as pd

    if carried is None:
        return values
    clash = [c for c in carried.columns if c in values.columns]
    if clash:
        raise DGBoostValueError(f"kept columns {clash} have the names of output columns")
    out = pd.concat([carried.reset_index(drop=True), values.reset_index(drop=True)], axis=1)
    out.index = values.index
    return out


# ----------------------------------------------------------------------------- predict
def _prediction_frame(preds, carried=None):
    """A partition's predictions as the frame written: ``prediction`` or ``prediction_0..k-1``,
    after the carried columns."""
    import pandas as pd

    if isinstance(preds, pd.Series):
        out = preds.to_frame("prediction")
    else:
        out = preds.copy()
        out.columns = ["prediction"] if out.shape[1] == 1 else [f"prediction_{i}" for i in range(out.shape[1])]
    return _with_carried(out, carried)


def predict_on_cluster(
    client: Client,
    model_path: str | os.PathLike,
    data_glob: str | Sequence[str] | ParquetInput,
    output_dir: str | os.PathLike,
    margin: bool = False,
    label_column: str | None = None,
    quiet: bool = False,
    keep: Sequence[str] | None = None,
    with_file_name: bool = False,
    partition_rows: int | None = None,
    progress_interval: float = DEFAULT_INTERVAL,
) -> tuple[int, int]:
    """Predict Parquet files on the workers; write a Parquet folder.

    Each output file holds one input partition's predictions, in row order: the ``keep``
    columns, the column ``file`` (each row's input file) with ``with_file_name``, then a column
    ``prediction`` (``prediction_0..k-1`` for several outputs), raw margins with ``margin``.
    The model's feature columns are picked by name when the data has them all; else every
    column but ``label_column`` and the kept ones is a feature.

    Parameters
    ----------
    data_glob : str, sequence of str or ParquetInput
        Parquet files, folders or globs (:func:`~dgboost.cli.cluster_io.check_parquet_input`).
    partition_rows : int, optional
        Most rows of a partition (whole row groups).
    progress_interval : float
        Seconds between progress lines on stderr.

    Returns
    -------
    (rows, partitions) written.
    """
    import dask

    from .. import dask as dxgb
    from ..booster import Booster

    booster = Booster(model_file=str(model_path))
    data = check_parquet_input(data_glob, "data", partition_rows, with_file=with_file_name)
    frame, features, carried = _input_columns(data, label_column, keep, booster.feature_names)
    split = split_frame(frame, {"X": features, **({"carried": carried} if carried else {})})
    # string columns the model has as categorical: category columns, re-coded to the model's
    X = model_categorical_columns(split["X"], booster.feature_types, booster.feature_names)
    say(
        quiet,
        f"predicting {data.num_rows:,} rows ({X.npartitions} partitions of {_files_words(data)}) with "
        f"{booster.num_boosted_rounds()} rounds into {output_dir}",
    )
    preds = dxgb.predict(client, booster, X, output_margin=margin)
    kept = split["carried"].to_delayed() if carried else [None] * X.npartitions
    pieces = [dask.delayed(_prediction_frame, pure=True)(p, k) for p, k in zip(preds.to_delayed(), kept)]
    rows, parts = write_partitions(
        client,
        pieces,
        output_dir,
        quiet,
        "predicted",
        partition_rows=data.partition_rows,
        progress_interval=progress_interval,
    )
    say(quiet, f"wrote {rows:,} predictions in {parts} files to {output_dir}")
    return rows, parts


# ----------------------------------------------------------------------------- explain
def _explain_record(model_path, data: ParquetInput, interactions: bool, algorithm: str, device: str, features, carried):
    """What an explain run's output files depend on (``--resume`` keeps an earlier run's files
    only when this is the same): the model's bytes, the partitions of the inputs, the options."""
    import hashlib

    from .. import __version__

    return {
        "command": "explain",
        "dgboost": __version__,
        "model_sha256": hashlib.sha256(Path(model_path).read_bytes()).hexdigest(),
        "partitions": [[p.path, list(p.row_groups), p.num_rows, p.first_row] for p in data.parts],
        "interactions": bool(interactions),
        "algorithm": algorithm,
        "device": "cuda" if device.startswith("cuda") else "cpu",
        "features": [str(c) for c in features],
        "carried": [str(c) for c in carried or []],
    }


def _interaction_columns(features: list[str], output_names) -> list[str]:
    """The columns of ``dgboost explain --interactions`` (as :func:`dgboost.cli.files.shap_column_names`)."""
    cols = [str(f) for f in features] + ["bias"]
    cols = [f"{a}:{b}" for a in cols for b in cols]
    if output_names is None:
        return cols
    return [f"{c}[{g}]" for g in output_names for c in cols]


def _pair(part, carried):
    return part, carried


def _write_interactions(piece, path: str, explainer, columns: list[str], device: str | None = None) -> int:
    """Interaction values of one partition (``(rows, carried columns or None)``), computed and
    appended in slices of rows (on its worker)."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..dask.explain import explainer_on_device
    from ..device import parse_device

    part, carried = piece
    explainer = explainer_on_device(explainer, None if device is None else parse_device(device), rows_on_gpu=False)

    named = any(n is not None for n in getattr(part.index, "names", [None]))
    step = max(1, _MAX_SLICE_BYTES // (8 * len(columns)))
    writer = None
    try:
        for start in range(0, max(len(part), 1), step):
            rows = part.iloc[start : start + step]
            if len(rows):
                values = explainer.contributions(rows, interactions=True, progress=False)
                flat = values.reshape(values.shape[0], -1)
            else:
                flat = np.empty((0, len(columns)), np.float64)
            frame = pd.DataFrame(flat, columns=columns, index=rows.index)
            frame = _with_carried(frame, None if carried is None else carried.iloc[start : start + step])
            table = pa.Table.from_pandas(frame, preserve_index=named)
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema)
            writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()
    return len(part)


def explain_on_cluster(
    client: Client,
    model_path: str | os.PathLike,
    data_glob: str | Sequence[str] | ParquetInput,
    output_dir: str | os.PathLike,
    interactions: bool = False,
    label_column: str | None = None,
    quiet: bool = False,
    algorithm: str = "auto",
    device: str = "auto",
    keep: Sequence[str] | None = None,
    with_file_name: bool = False,
    partition_rows: int | None = None,
    progress_interval: float = DEFAULT_INTERVAL,
    resume: bool = False,
    strict: bool = False,
) -> tuple[int, int]:
    """Exact SHAP values of every row of Parquet files, written by the workers.

    SHAP values: :meth:`TreeExplainer.shap_frame` of each partition (columns: the features and
    ``bias``; ``<feature>[<output>]`` for several outputs), through
    :func:`dgboost.dask.shap_values`. ``interactions``: the interaction values flattened to
    ``<a>:<b>`` columns (``(F+1)^2`` per output, bias included: the layout of
    ``dgboost explain --interactions``), computed in slices of rows so that a worker never holds
    more than ~256 MB of them at once. In front of them: the ``keep`` columns and, with
    ``with_file_name``, the column ``file`` (each row's input file).

    ``device``: where the workers explain; ``"auto"`` is their GPUs when every worker has one
    (:func:`~dgboost.cli.cluster_session.cluster_device`), and the partitions read from Parquet are uploaded there.
    ``data_glob``, ``partition_rows``, ``progress_interval``: as for :func:`predict_on_cluster`.

    Each output file is written atomically, in the folder ``.<output>.partial`` next to the
    output, renamed to the output when all are written
    (:func:`~dgboost.cli.cluster_io.write_partitions`). An input file that cannot be read is
    named in the error; the others are still written there. ``resume``: keep the files of such
    an earlier run (killed, or stopped by a bad file) when its model, partitions and options
    are this run's, and explain only the missing ones. ``strict``: read every input row on the
    workers first (:func:`~dgboost.cli.cluster_io.check_inputs_readable`) and start nothing if
    a file cannot be read.

    Returns
    -------
    (rows, partitions) written.
    """
    import dask

    from .. import dask as dxgb
    from ..dask.prediction import model_reference
    from ..explain.explainer import TreeExplainer

    explainer = TreeExplainer(str(model_path), algorithm=algorithm, progress=False)
    data = check_parquet_input(data_glob, "data", partition_rows, with_file=with_file_name)
    if strict:
        check_inputs_readable(client, data)
    frame, features, carried = _input_columns(data, label_column, keep, explainer.meta.get("feature_names"))
    split = split_frame(frame, {"X": features, **({"carried": carried} if carried else {})})
    model_meta = explainer.meta.get("booster_meta") or {}
    X = model_categorical_columns(split["X"], model_meta.get("feature_types"), model_meta.get("feature_names"))
    kept = split["carried"].to_delayed() if carried else [None] * X.npartitions
    what = "interaction values" if interactions else "SHAP values"
    device = workers_device(client, device)
    say(
        quiet,
        f"explaining {data.num_rows:,} rows ({X.npartitions} partitions of {_files_words(data)}) with "
        f"{explainer.ensemble.n_trees} trees ({what}, on the workers' "
        f"{'GPUs' if device.startswith('cuda') else 'CPUs'}) into {output_dir}",
    )
    progress = {
        "partition_rows": data.partition_rows,
        "progress_interval": progress_interval,
        "sources": [p.path for p in data.parts] or [data.footers[0].path],
        "run_record": _explain_record(model_path, data, interactions, algorithm, device, features, carried),
        "resume": resume,
    }
    if interactions:
        outputs = None
        if explainer.n_outputs > 1:
            outputs = explainer.output_names if explainer.output_names is not None else list(range(explainer.n_outputs))
        columns = _interaction_columns([str(c) for c in features], outputs)
        pieces = [dask.delayed(_pair, pure=True)(x, k) for x, k in zip(X.to_delayed(), kept)]
        rows, parts = write_partitions(
            client,
            pieces,
            output_dir,
            quiet,
            "explained",
            writer=_write_interactions,
            writer_args=(model_reference(explainer), columns, device),
            **progress,
        )
    else:
        values = dxgb.shap_values(client, explainer, X, device=device)
        pieces = [dask.delayed(_with_carried, pure=True)(v, k) for v, k in zip(values.to_delayed(), kept)]
        rows, parts = write_partitions(client, pieces, output_dir, quiet, "explained", **progress)
    say(quiet, f"wrote {what} of {rows:,} rows in {parts} files to {output_dir}")
    return rows, parts
