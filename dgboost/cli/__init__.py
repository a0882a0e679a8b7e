"""The ``dgboost`` command line: ``demo``, ``train``, ``predict`` and ``explain``.

::

    dgboost demo --rows 100000 --rounds 50        # on the default local Dask cluster
    dgboost demo --local                          # in this process
    dgboost train --config train.yaml
    dgboost predict --model model.json --data test.csv --output predictions.csv
    dgboost explain --model model.json --data test.csv --output shap.csv [--interactions]

On a Dask cluster (``--cluster``: a shipped config name or a cluster YAML, see
:mod:`dgboost.cluster`), reading and writing Parquet through Dask (:mod:`dgboost.cli.cluster_commands`)::

    dgboost train --cluster local-cpu --data 'train/*.parquet' --label target --output model.json \
        --rounds 200 --param max_depth=8 --param eta=0.1 [--validation 'valid/*.parquet']
    dgboost train --cluster local-cpu --config train.yaml   # its data / validation may be globs
    dgboost predict --cluster local-cpu --model model.json --data test/*.parquet --output preds/ \
        [--keep id,ts] [--with-file-name] [--partition-rows N]
    dgboost explain --cluster local-cpu --model model.json --data 'test/*.parquet' --output shap/

``--data`` takes several paths (an unquoted glob works), globs and folders; with ``--cluster``
the files' footers are read and their schemas checked before any work starts, and their rows
split into partitions of whole row groups, so that one large file is worked on by every worker.
docs/cli.md documents every option and every key of the training and cluster configs.

Errors that dgboost raises on purpose (:class:`~dgboost.errors.DGBoostError`: bad data,
bad parameters, bad config, bad model file) are printed as one ``Error: ...`` line on
stderr with exit code 2, without a traceback. Progress goes through ``train()``'s own
verbose output (round, metrics, ETA) and, with ``--cluster``, lines on stderr at most every
``--progress-interval`` seconds (rounds, rows done, rows/s, time left); ``--quiet`` leaves only
errors and final outputs.

A training config (YAML or JSON; relative paths are relative to the config file)::

    data: train.csv            # CSV or Parquet
    label: target              # label column (default "label")
    weight: w                  # optional weight column
    validation: valid.csv      # optional; evaluated every round, drives early stopping
    params: {objective: binary:logistic, max_depth: 6, eta: 0.1, eval_metric: [logloss, auc]}
    num_boost_round: 200
    early_stopping_rounds: 20  # optional, needs validation
    output: model.json         # where the model is written
    verbose_eval: 10           # optional: print every 10 rounds (default 1)

Modules, one job each: :mod:`~dgboost.cli.commands` (the click commands),
:mod:`~dgboost.cli.config` (training configs), :mod:`~dgboost.cli.files` (tables read and
written in this process), :mod:`~dgboost.cli.demo` (the in-process demo),
:mod:`~dgboost.cli.device` (``--device auto``), and for ``--cluster``:
:mod:`~dgboost.cli.cluster_session` (starting and describing a cluster),
:mod:`~dgboost.cli.parquet_files` (Parquet footers, schemas and partitions),
:mod:`~dgboost.cli.cluster_io` (Parquet read and written by the workers),
:mod:`~dgboost.cli.cluster_progress` (rounds and rows reported by the workers, printed here),
:mod:`~dgboost.cli.cluster_commands` and :mod:`~dgboost.cli.cluster_demo`.
"""

from __future__ import annotations

from .commands import main
from .config import TrainConfig, load_config
from .device import resolve_device

__all__ = ["main", "TrainConfig", "load_config", "resolve_device"]
