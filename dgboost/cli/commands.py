"""The ``dgboost`` click commands: ``demo``, ``train``, ``predict``, ``explain`` and ``warmup``.

Each command checks its options, then hands the work to the modules of :mod:`dgboost.cli`
(in this process) or, with ``--cluster``, to :mod:`dgboost.cli.cluster_commands`.
"""

from __future__ import annotations

import functools
import glob
import sys
import time
from pathlib import Path
from typing import Any, Callable

import click

from .. import __version__
from ..errors import DGBoostError, DGBoostValueError
from ._format import say, seconds, table
from .cluster_progress import DEFAULT_INTERVAL
from .config import load_config
from .demo import DEMO_STEPS, DemoRun
from .device import DEVICE, resolve_device
from .files import (
    categorical_columns,
    model_categorical_columns,
    read_table,
    read_tables,
    select_rows,
    split_columns,
    write_explanations,
    write_predictions,
)
from .parquet_files import DEFAULT_PARTITION_ROWS, FILE_COLUMN

__all__ = ["main", "CLIError"]


# ----------------------------------------------------------------------------- errors
class CLIError(click.ClickException):
    """A user-facing failure: ``Error: <message>`` on stderr, exit code 2."""

    exit_code = 2


def _errors_to_exit_code(fn: Callable) -> Callable:
    """Turn DGBoostError (and file-system errors) into a one-line ``Error:`` and exit code 2."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except DGBoostError as exc:
            raise CLIError(str(exc)) from None
        except OSError as exc:
            where = f": {exc.filename}" if getattr(exc, "filename", None) else ""
            raise CLIError(f"{exc.strerror or exc}{where}") from None

    return wrapper


# ----------------------------------------------------------------------------- commands
@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="dgboost")
def main() -> None:
    """dgboost: gradient-boosted trees on one or many GPUs, with exact TreeSHAP."""


@main.command()
@click.option(
    "--rows",
    type=click.IntRange(min=10),
    default=100_000,
    show_default=True,
    help="Rows of synthetic data (20% held out for testing).",
)
@click.option("--rounds", type=click.IntRange(min=1), default=50, show_default=True, help="Boosting rounds.")
@click.option(
    "--device",
    type=DEVICE,
    default="auto",
    show_default=True,
    help="auto: cuda when a GPU and CuPy are usable (on every worker), else cpu; or cpu, cuda, "
    "cuda:N, gpu, gpu:N (docs/devices.md).",
)
@click.option(
    "--cluster",
    "cluster",
    default=None,
    metavar="CONFIG",
    help="The Dask cluster to run on: a shipped config (local-cpu, local-cuda, slurm-cuda, "
    "kubernetes-cuda, existing-scheduler) or a cluster YAML file. Default: local-cuda "
    "where GPUs are present, else local-cpu.",
)
@click.option("--local", "local", is_flag=True, help="Run in this process, without a cluster.")
@click.option("--quiet", is_flag=True, help="Print only the summary table (and errors).")
@_errors_to_exit_code
def demo(rows: int, rounds: int, device: str, cluster: str | None, local: bool, quiet: bool) -> None:
    """Train on synthetic binary data (10% missing) and print a summary.

    By default on a Dask cluster that the demo starts (and stops): the rows are partitioned
    over its workers, trained on with dgboost.dask.train (the test rows as evaluation set),
    and the test rows explained with exact TreeSHAP on the workers; the summary gives rows/s
    for training (rows x rounds / s) and for SHAP. --local runs the same training in this
    process.
    """
    if local and cluster is not None:
        raise click.UsageError("--local and --cluster exclude each other")
    if local:
        run = DemoRun(rows=rows, rounds=rounds, device=resolve_device(device), quiet=quiet)
        for step in DEMO_STEPS:
            step(run)
        click.echo(table("dgboost demo", run.summary))
        return
    from .cluster_demo import cluster_demo
    from .cluster_session import open_cluster, workers_device

    started = time.perf_counter()
    client, config = open_cluster(cluster, quiet)
    try:
        start_time = time.perf_counter() - started
        summary = cluster_demo(client, rows, rounds, workers_device(client, device), quiet=quiet, config=config)
    finally:
        client.close()
    summary.insert(4, ("cluster start", seconds(start_time)))
    summary.append(("total time", f"{seconds(time.perf_counter() - started)} (with cluster start and stop)"))
    click.echo(table("dgboost demo on a Dask cluster", summary))


@main.command()
@click.option("--quiet", is_flag=True, help="Print only the summary line.")
@_errors_to_exit_code
def warmup(quiet: bool) -> None:
    """Compile the CPU engine's kernels into Numba's on-disk cache (run once after install).

    Without it the first CPU training of a fresh environment spends most of its first
    seconds compiling; run this in a Dockerfile or CI image after pip install, with the same
    NUMBA_CACHE_DIR (if any) that training will use. A warm cache makes it a no-op (~1 s).
    """
    from ..warmup import main as warm

    warm(quiet=quiet)


def _cluster_client(cluster: str, quiet: bool):
    """A Client on the cluster of ``--cluster`` (closing it stops a cluster it started)."""
    from .cluster_session import open_cluster

    return open_cluster(cluster, quiet)[0]


def _check_path_option(name: str, value, **path_args):
    """What click.Path(**path_args) makes of an option's value, with click's own error.

    Options that are a file without --cluster and a glob or a folder with it are parsed as
    text; this applies the file checks of the single-process commands."""
    ctx = click.get_current_context()
    param = next(p for p in ctx.command.params if p.name == name)
    return click.Path(**path_args).convert(value, param, ctx)


def _parse_params(items: tuple[str, ...]) -> dict:
    """``--param key=value`` pairs; values are read as YAML (``3``, ``0.1``, ``[logloss, auc]``);
    a key given twice collects its values in a list (``--param eval_metric=auc`` twice)."""
    import yaml

    params: dict = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected key=value, got {item!r}", param_hint="'--param'")
        try:
            value = yaml.safe_load(text) if text.strip() else ""
        except yaml.YAMLError:
            value = text
        key = key.strip()
        if key in params:
            previous = params[key] if isinstance(params[key], list) else [params[key]]
            value = previous + (value if isinstance(value, list) else [value])
        params[key] = value
    return params


@main.command("train")
@click.option(
    "--config",
    "config_path",
    default=None,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="YAML or JSON training config (required without --cluster; with --cluster, its "
    "'data' and 'validation' may be globs of Parquet files).",
)
@click.option(
    "--cluster",
    "cluster",
    default=None,
    metavar="CONFIG",
    help="Train on this Dask cluster (a shipped config name or a cluster YAML), reading "
    "Parquet files through Dask; give either --config or --data.",
)
@click.option(
    "--data",
    "data_glob",
    default=None,
    metavar="GLOB",
    help="With --cluster: the training Parquet files, e.g. 'train/*.parquet' (quoted; read in natural sort order).",
)
@click.option("--label", default=None, metavar="COL", help="With --data: the label column [default: label].")
@click.option("--weight", default=None, metavar="COL", help="With --data: a weight column.")
@click.option(
    "--validation",
    "validation_glob",
    default=None,
    metavar="GLOB",
    help="With --data: Parquet files evaluated every round (named 'validation').",
)
@click.option(
    "--output",
    "output_path",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="MODEL.json",
    help="With --data: where the model is written.",
)
@click.option(
    "--rounds",
    type=click.IntRange(min=0),
    default=None,
    metavar="N",
    help="With --data: boosting rounds [default: 100].",
)
@click.option(
    "--early-stopping-rounds",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="With --data: stop after N rounds without improvement (needs --validation).",
)
@click.option(
    "--param",
    "param_items",
    multiple=True,
    metavar="KEY=VALUE",
    help="With --data: a training parameter, e.g. --param max_depth=8 (repeatable; values are read as YAML).",
)
@click.option(
    "--partition-rows",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help=f"With --cluster: most rows of a partition, of whole row groups [default: {DEFAULT_PARTITION_ROWS:,}]; "
    "the model does not depend on it.",
)
@click.option(
    "--progress-interval",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="SECONDS",
    help=f"With --cluster: seconds between 'round k/N' progress lines on stderr [default: {DEFAULT_INTERVAL:g}].",
)
@click.option(
    "--enable-categorical",
    is_flag=True,
    help="Train on category (Parquet dictionary) and string columns as categorical features "
    "(string columns' sorted values are the categories); without it such a column is an error. "
    "Config key: enable_categorical.",
)
@click.argument("more_data", nargs=-1, metavar="[MORE_DATA]...")
@click.option("--quiet", is_flag=True, help="No progress output (errors only).")
@_errors_to_exit_code
def train_command(
    config_path: Path | None,
    cluster: str | None,
    data_glob: str | None,
    label: str | None,
    weight: str | None,
    validation_glob: str | None,
    output_path: Path | None,
    rounds: int | None,
    early_stopping_rounds: int | None,
    param_items: tuple[str, ...],
    partition_rows: int | None,
    progress_interval: float | None,
    enable_categorical: bool,
    more_data: tuple[str, ...],
    quiet: bool,
) -> None:
    """Train a model and write it as JSON.

    \b
    In this process, from a config:  dgboost train --config train.yaml
    On a Dask cluster, from Parquet: dgboost train --cluster local-cpu --data 'train/*.parquet'
        --label target --output model.json --rounds 200 --param max_depth=8 [--validation GLOB]
    or with a config whose data paths are globs: dgboost train --cluster local-cpu --config train.yaml

    \b
    The keys of a --config file (YAML or JSON; relative paths are relative to the file):
      data                   str, required   training data (CSV or Parquet; with --cluster, Parquet globs)
      output                 str, required   the model file to write
      label                  str  [label]    the label column
      weight                 str  [none]     a weight column
      validation             str  [none]     evaluated every round; drives early stopping
      params                 mapping [{}]    training parameters (docs/parameters.md)
      num_boost_round        int >= 0 [100]  boosting rounds
      early_stopping_rounds  int >= 1 [none] needs validation
      verbose_eval           int >= 0 [1]    rounds between evaluation lines (0: none)
      enable_categorical     bool [false]    category / string columns as categorical features
    The --cluster config's keys (kind, args, env, scale, address, scheduler_file): docs/cli.md.

    On a cluster, the model is the one single-process training on the files' rows
    (concatenated in natural sort order of the file names) would give, byte for byte, however
    the rows are split into partitions (--partition-rows). --data takes several paths (an
    unquoted glob works); the files' schemas are checked before any work starts. Every worker
    must be able to read the files (a local cluster, or a shared filesystem). Progress:
    evaluation lines every ~10% of the rounds (with --config, its verbose_eval), and
    "round k/N" lines on stderr with seconds per round and time left.
    """
    from ..data import DMatrix
    from ..params import parse_params
    from ..training import train

    data_paths = _data_paths(data_glob, more_data, required=False) or None
    cluster_only = {
        "--data": data_glob,
        "--label": label,
        "--weight": weight,
        "--validation": validation_glob,
        "--output": output_path,
        "--rounds": rounds,
        "--early-stopping-rounds": early_stopping_rounds,
        "--param": param_items or None,
        "--partition-rows": partition_rows,
        "--progress-interval": progress_interval,
    }
    given = [name for name, value in cluster_only.items() if value is not None]
    if cluster is None:
        if given:
            raise click.UsageError(f"{', '.join(given)}: only with --cluster (in this process, train reads a --config)")
        if config_path is None:
            raise click.UsageError("Missing option '--config'.")
    elif (config_path is None) == (data_glob is None):
        raise click.UsageError("with --cluster, give either --config or --data (with --label and --output)")
    elif config_path is not None and set(given) - {"--partition-rows", "--progress-interval"}:
        from_config = [name for name in given if name not in ("--partition-rows", "--progress-interval")]
        raise click.UsageError(f"{', '.join(from_config)}: not with --config (the config gives them)")
    elif data_glob is not None and output_path is None:
        raise click.UsageError("Missing option '--output' (the model file to write).")

    if cluster is not None:
        from .cluster_commands import train_on_cluster
        from .cluster_io import check_parquet_input

        if config_path is not None:
            cfg = load_config(config_path)
            data, label, weight, params = str(cfg.data), cfg.label, cfg.weight, cfg.params
            validation = None if cfg.validation is None else str(cfg.validation)
            rounds, early, output, verbose = (
                cfg.num_boost_round,
                cfg.early_stopping_rounds,
                cfg.output,
                cfg.verbose_eval,
            )
        else:
            data, label, weight, params = data_paths, label or "label", weight, _parse_params(param_items)
            validation, early, output, verbose = validation_glob, early_stopping_rounds, output_path, None
            rounds = 100 if rounds is None else rounds
        params = parse_params(params)  # once: bad parameters and missing files fail before a cluster starts
        if early is not None and validation is None:
            raise DGBoostValueError("early stopping needs validation data ('validation' / --validation)")
        # footers read and schemas checked before a cluster starts
        data = check_parquet_input(data, "training data", partition_rows)
        if validation is not None:
            validation = check_parquet_input(validation, "validation data", partition_rows)
        client = _cluster_client(cluster, quiet)
        try:
            train_on_cluster(
                client,
                data,
                label,
                weight,
                params,
                rounds,
                output,
                validation_glob=validation,
                early_stopping_rounds=early,
                quiet=quiet,
                verbose_eval=verbose,
                progress_interval=DEFAULT_INTERVAL if progress_interval is None else progress_interval,
                enable_categorical=enable_categorical or (config_path is not None and cfg.enable_categorical),
            )
        finally:
            client.close()
        return

    cfg = load_config(config_path)
    p = parse_params(cfg.params)  # once: bad parameters fail before any data is read
    if cfg.early_stopping_rounds is not None and cfg.validation is None:
        raise DGBoostValueError("early_stopping_rounds needs a 'validation' data path in the config")
    categorical = enable_categorical or cfg.enable_categorical
    X, y, w = split_columns(read_table(cfg.data), cfg.label, cfg.weight, cfg.data)
    X = categorical_columns(X, categorical, str(cfg.data))
    dtrain = DMatrix(X, label=y, weight=w, enable_categorical=categorical)
    evals = []
    if cfg.validation is not None:
        Xv, yv, wv = split_columns(read_table(cfg.validation), cfg.label, cfg.weight, cfg.validation)
        # a column of number-like strings may be read as numbers: made the training data's categories
        Xv = model_categorical_columns(Xv, dtrain.feature_types, dtrain.feature_names, dtrain.category_values())
        Xv = categorical_columns(Xv, categorical, str(cfg.validation))
        # ref: codes re-coded to the training data's categories (an unseen one is refused)
        evals.append((DMatrix(Xv, label=yv, weight=wv, ref=dtrain, enable_categorical=categorical), "validation"))
    say(
        quiet,
        f"training {cfg.num_boost_round} rounds on {dtrain.num_row():,} rows x "
        f"{dtrain.num_col()} features from {cfg.data}",
    )
    started = time.perf_counter()
    verbose = False if quiet or not cfg.verbose_eval else cfg.verbose_eval
    booster = train(
        p,
        dtrain,
        num_boost_round=cfg.num_boost_round,
        evals=evals,
        early_stopping_rounds=cfg.early_stopping_rounds,
        verbose_eval=verbose,
    )
    elapsed = time.perf_counter() - started
    best = booster.meta.get("best_iteration")
    detail = ""
    if cfg.early_stopping_rounds is not None and best is not None:
        # keep the rounds up to the best one, so `dgboost predict` uses the best model
        best_score = booster.meta.get("best_score")
        booster = booster[: best + 1]
        booster._set_best(best, best_score)
        detail = f", best iteration {best}"
    cfg.output.parent.mkdir(parents=True, exist_ok=True)
    booster.save_model(cfg.output)
    say(quiet, f"wrote {cfg.output} ({booster.num_boosted_rounds()} rounds{detail}; trained in {seconds(elapsed)})")


def _data_lake_options(fn: Callable) -> Callable:
    """The options predict and explain share: extra data paths, kept columns, partitions, progress."""
    options = [
        click.argument("more_data", nargs=-1, metavar="[MORE_DATA]..."),
        click.option(
            "--keep",
            "keep_items",
            multiple=True,
            metavar="COL[,COL...]",
            help="Columns copied from the input to the output in front of the values (ID columns, "
            "e.g. --keep id,ts), so that results join back to the input rows; repeatable.",
        ),
        click.option(
            "--with-file-name",
            is_flag=True,
            help=f"Add the column {FILE_COLUMN!r}: the file each row was read from (its full path).",
        ),
        click.option(
            "--partition-rows",
            type=click.IntRange(min=1),
            default=None,
            metavar="N",
            help="With --cluster: most rows of a partition, of whole row groups "
            f"[default: {DEFAULT_PARTITION_ROWS:,}]; a file of several row groups is split over several workers.",
        ),
        click.option(
            "--progress-interval",
            type=click.FloatRange(min=0, min_open=True),
            default=None,
            metavar="SECONDS",
            help=f"With --cluster: seconds between progress lines on stderr [default: {DEFAULT_INTERVAL:g}].",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _data_paths(data: str | None, more: tuple[str, ...], required: bool = True) -> list[str]:
    """The paths of ``--data a b c`` (click gives ``b c`` as extra arguments, as from an unquoted glob)."""
    if more and data is None:
        raise click.UsageError(f"Got unexpected extra arguments ({' '.join(more)}): data paths go after --data")
    if required and data is None:
        raise click.UsageError("Missing option '--data'.")
    return ([data] if data is not None else []) + list(more)


def _keep_columns(items: tuple[str, ...]) -> list[str]:
    """``--keep id,ts --keep x``: ``["id", "ts", "x"]``."""
    names = [name.strip() for item in items for name in item.split(",")]
    if any(not name for name in names):
        raise click.BadParameter(f"empty column name in {list(items)}", param_hint="'--keep'")
    return names


def _cluster_only(cluster: str | None, **options) -> None:
    given = [name for name, value in options.items() if value is not None]
    if cluster is None and given:
        raise click.UsageError(f"{', '.join(given)}: only with --cluster")


def _on_cluster(
    cluster: str,
    quiet: bool,
    paths: list[str],
    partition_rows: int | None,
    with_file_name: bool,
    output_path: str,
    work: Callable[[Any, Any], None],
) -> None:
    """``predict`` / ``explain`` with ``--cluster``: the Parquet footers and the output folder
    checked before a cluster starts, then ``work(client, data)`` on it, the client closed after."""
    from .cluster_io import check_output_folder, check_parquet_input

    data = check_parquet_input(paths, "data", partition_rows, with_file=with_file_name)
    check_output_folder(output_path)
    client = _cluster_client(cluster, quiet)
    try:
        work(client, data)
    finally:
        client.close()


def _local_rows(
    paths: list[str], with_file_name: bool, label_column: str | None, keep: list[str], feature_names: Any
) -> tuple[str, Any, Any]:
    """``predict`` / ``explain`` in this process: (the sources' description, the feature rows,
    the kept columns) of the files of ``paths``."""
    source = " ".join(paths)
    data = _read_local(paths, "data_path", with_file_name)
    file_column = FILE_COLUMN if with_file_name else None
    features, carried = select_rows(data, source, label_column, keep, feature_names, file_column)
    return source, features, carried


def _read_local(paths: list[str], name: str, with_file_name: bool):
    """The rows of the files of ``paths`` in this process (click's file checks for one plain path)."""
    if len(paths) == 1 and not glob.has_magic(paths[0]):
        paths = [str(_check_path_option(name, paths[0], exists=True, dir_okay=False))]
    return read_tables(paths, FILE_COLUMN if with_file_name else None)


@main.command()
@click.option(
    "--model",
    "model_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    help="dgboost or XGBoost model (JSON or UBJSON).",
)
@click.option(
    "--data",
    "data_path",
    default=None,
    help="[required] CSV, Parquet or .npy features: files or globs, several after --data (an unquoted glob "
    "works); with --cluster, Parquet files, folders or globs.",
)
@click.option(
    "--output",
    "output_path",
    required=True,
    help="Where to write predictions: .csv (default), .npy or .parquet; with --cluster, a folder "
    "of Parquet files (one per partition, in row order).",
)
@click.option("--margin", is_flag=True, help="Write raw margins instead of transformed predictions.")
@click.option("--label-column", default=None, help="Column to drop before predicting (e.g. the label).")
@click.option(
    "--cluster",
    "cluster",
    default=None,
    metavar="CONFIG",
    help="Predict on this Dask cluster (a shipped config name or a cluster YAML); the "
    "predictions are written by the workers, never gathered here.",
)
@click.option("--quiet", is_flag=True, help="No progress output (errors only).")
@_data_lake_options
@_errors_to_exit_code
def predict(
    model_path: str,
    data_path: str | None,
    output_path: str,
    margin: bool,
    label_column: str | None,
    cluster: str | None,
    quiet: bool,
    more_data: tuple[str, ...],
    keep_items: tuple[str, ...],
    with_file_name: bool,
    partition_rows: int | None,
    progress_interval: float | None,
) -> None:
    """Predict with a saved model and write the predictions.

    \b
    dgboost predict --model m.json --data test.csv --output preds.csv
    dgboost predict --model m.json --data day-*.parquet --keep id,ts --with-file-name --output preds.parquet
    dgboost predict --cluster local-cpu --model m.json --data 'lake/*.parquet' --keep id --output preds/

    Several files (paths or globs; in natural sort order) are read one after the other and
    must have the same columns. --keep columns (and with --with-file-name the column "file")
    come first in the output, so that it joins back to the input rows.

    With --cluster: the Parquet files' footers are read and their schemas checked before any
    work starts; their rows are split into partitions of whole row groups (--partition-rows),
    worked on by every worker; --output is a folder that gets one Parquet file per partition
    (part.00000.parquet, ...: in name order, the input's rows in order), column "prediction"
    ("prediction_0".. for several outputs), after the kept columns. The folder appears only
    when every partition is written. Progress: rows done, rows/s and time left on stderr.
    """
    from ..booster import Booster

    paths = _data_paths(data_path, more_data)
    keep = _keep_columns(keep_items)
    if cluster is not None:
        from .cluster_commands import predict_on_cluster

        _on_cluster(
            cluster,
            quiet,
            paths,
            partition_rows,
            with_file_name,
            output_path,
            lambda client, data: predict_on_cluster(
                client,
                model_path,
                data,
                output_path,
                margin=margin,
                label_column=label_column,
                quiet=quiet,
                keep=keep,
                progress_interval=DEFAULT_INTERVAL if progress_interval is None else progress_interval,
            ),
        )
        return
    _cluster_only(cluster, **{"--partition-rows": partition_rows, "--progress-interval": progress_interval})
    output_path = _check_path_option("output_path", output_path, dir_okay=False, path_type=Path)
    booster = Booster(model_file=model_path)
    _, features, carried = _local_rows(paths, with_file_name, label_column, keep, booster.feature_names)
    features = model_categorical_columns(
        features, booster.feature_types, booster.feature_names, booster.meta.get("categories")
    )
    preds = booster.predict(features, output_margin=margin)
    write_predictions(output_path, preds, carried=carried)
    say(quiet, f"wrote {len(preds):,} predictions to {output_path}")


@main.command()
@click.option(
    "--model",
    "model_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    help="dgboost or XGBoost model (JSON or UBJSON), or a LightGBM text model.",
)
@click.option(
    "--data",
    "data_path",
    default=None,
    help="[required] CSV, Parquet or .npy features: files or globs, several after --data (an unquoted glob "
    "works); with --cluster, Parquet files, folders or globs.",
)
@click.option(
    "--output",
    "output_path",
    required=True,
    help="Where to write SHAP values: .csv (default), .npy or .parquet; with --cluster, a folder "
    "of Parquet files (one per partition, in row order).",
)
@click.option("--interactions", is_flag=True, help="Write SHAP interaction values instead.")
@click.option(
    "--algorithm",
    type=click.Choice(["auto", "path", "table"]),
    default="auto",
    show_default=True,
    help="How SHAP values are computed (same numbers).",
)
@click.option("--label-column", default=None, help="Column to drop before explaining (e.g. the label).")
@click.option(
    "--cluster",
    "cluster",
    default=None,
    metavar="CONFIG",
    help="Explain on this Dask cluster (a shipped config name or a cluster YAML); the "
    "values are written by the workers, never gathered here.",
)
@click.option(
    "--device",
    type=DEVICE,
    default="auto",
    show_default=True,
    help="Where to explain: auto = the GPU when there is one (with --cluster: the workers' "
    "GPUs when every worker has one); or cpu, cuda, cuda:N, gpu, gpu:N (docs/devices.md).",
)
@click.option("--quiet", is_flag=True, help="No progress output (errors only).")
@click.option(
    "--resume",
    is_flag=True,
    help="With --cluster: keep the files an earlier run of the same model, data and options wrote "
    "before it was killed or stopped (in .<output>.partial) and explain only the missing ones.",
)
@click.option(
    "--strict",
    is_flag=True,
    help="With --cluster: read every input row on the workers first; if a file cannot be read, "
    "name it and start nothing (without it, the other files are written).",
)
@_data_lake_options
@_errors_to_exit_code
def explain(
    model_path: str,
    data_path: str | None,
    output_path: str,
    interactions: bool,
    algorithm: str,
    label_column: str | None,
    cluster: str | None,
    device: str,
    quiet: bool,
    resume: bool,
    strict: bool,
    more_data: tuple[str, ...],
    keep_items: tuple[str, ...],
    with_file_name: bool,
    partition_rows: int | None,
    progress_interval: float | None,
) -> None:
    """Exact SHAP values (or interaction values) of a saved model for every row of the data.

    Columns: one per feature plus "bias" (the expected value); each row sums to the model's
    raw output (margin). Multi-output models get one block of columns per output, named
    "<feature>[<output>]"; interaction files have "<a>:<b>" columns. --keep columns (and with
    --with-file-name the column "file") come first, so that the output joins back to the
    input rows. Several files (paths or globs) are read one after the other.

    With --cluster: the Parquet files' footers are read and their schemas checked before any
    work starts; their rows are split into partitions of whole row groups (--partition-rows);
    --output is a folder that gets one Parquet file per partition (part.00000.parquet, ...:
    in name order, the input's rows in order), with the same columns; interaction values are
    written flattened the same way, (F+1)^2 columns per output. The folder appears only when
    every partition is written. Progress: rows done, rows/s and time left on stderr. Each file is
    written atomically into .<output>.partial first; an input file that cannot be read is named
    in the error and the others are written there: --resume then explains only the missing
    ones (--strict: read every input first and start nothing if one is bad).
    """
    from ..explain.explainer import TreeExplainer

    paths = _data_paths(data_path, more_data)
    keep = _keep_columns(keep_items)
    if cluster is not None:
        from .cluster_commands import explain_on_cluster

        _on_cluster(
            cluster,
            quiet,
            paths,
            partition_rows,
            with_file_name,
            output_path,
            lambda client, data: explain_on_cluster(
                client,
                model_path,
                data,
                output_path,
                interactions=interactions,
                label_column=label_column,
                quiet=quiet,
                algorithm=algorithm,
                device=device,
                keep=keep,
                progress_interval=DEFAULT_INTERVAL if progress_interval is None else progress_interval,
                resume=resume,
                strict=strict,
            ),
        )
        return
    _cluster_only(
        cluster,
        **{
            "--partition-rows": partition_rows,
            "--progress-interval": progress_interval,
            "--resume": resume or None,
            "--strict": strict or None,
        },
    )
    output_path = _check_path_option("output_path", output_path, dir_okay=False, path_type=Path)

    explainer = TreeExplainer(model_path, algorithm=algorithm, progress=not quiet, device=resolve_device(device))
    source, data, carried = _local_rows(paths, with_file_name, label_column, keep, explainer.meta.get("feature_names"))
    model_meta = explainer.meta.get("booster_meta") or {}
    data = model_categorical_columns(
        data, model_meta.get("feature_types"), model_meta.get("feature_names"), model_meta.get("categories")
    )
    n_rows = len(data)
    if n_rows == 0:
        raise DGBoostValueError(f"{source} has no rows to explain")
    say(
        quiet,
        f"explaining {n_rows:,} rows with {explainer.ensemble.n_trees} trees "
        f"({'interaction values' if interactions else 'SHAP values'})",
    )
    values = explainer.contributions(data, interactions=interactions)
    if explainer.n_outputs == 1:
        values = values[:, 0]
    features = (
        [str(c) for c in data.columns] if hasattr(data, "columns") else explainer._names_for(values.shape[-1] - 1)
    )
    outputs = None
    if explainer.n_outputs > 1:
        outputs = explainer.output_names if explainer.output_names is not None else list(range(explainer.n_outputs))
    write_explanations(output_path, values, features, outputs, interactions, carried=carried)
    say(quiet, f"wrote {'interaction values' if interactions else 'SHAP values'} of {n_rows:,} rows to {output_path}")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
