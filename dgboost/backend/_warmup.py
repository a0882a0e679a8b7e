"""Compile the CPU engine's Numba kernels into the on-disk cache ahead of the first ``train``.

With a cold cache the first CPU training of a process spends ~95% of its time to the first
round compiling kernels (8-13 s on two cores, docs/performance-notes.md, "Cold start of the
CPU engine"); later processes load them from Numba's cache in well under a second. Run
:func:`warm_up` (``dgboost warmup``, ``python -m dgboost.warmup``) once where the package is
installed -- in a Dockerfile after ``pip install``, in a CI image -- and the first ``train``
finds the cache warm.

The kernels are compiled by what compiles them in training: small trainings and predictions
through the public API, on data made to take the branches whose kernel signatures depend on
the data (one-byte bins of dense data, two-byte bins with missing values; categorical
features; monotone constraints; an evaluation set; each common objective). So what is
compiled is what a training of that kind asks for, and stays so when the engine changes.
The row count and thread count make the histograms take both of their threaded forms.

Numba keys its cache on the kernel's source file and the CPU: a cache made on another CPU
model is not used (``NUMBA_CPU_NAME=generic`` at warm-up and at run time makes it portable,
for slower code).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

__all__ = ["WarmupCase", "WarmupReport", "warm_up", "WARMUP_CASES"]

# rows of the warm-up data (a fifth of them the evaluation set): the histogram stage gives each
# thread >= 8192 of the rows it builds, and below the root it builds only the smaller child of
# each split, so 80,000 training rows make two threads take both threaded forms (rows cut in
# slices at the top levels, nodes spread over the threads at the levels of >= 8 nodes)
_ROWS = 100_000
_THREADS = 2
_FEATURES = 4


@dataclass(frozen=True)
class WarmupCase:
    """One training of the warm-up: its name, the parameters, and how its data is made.

    Attributes
    ----------
    name : str
        What it warms, for the report.
    params : dict
        ``train`` parameters (``device="cpu"`` and the thread count are added).
    missing : bool
        A tenth of the values NaN (two-byte bins), else dense data (one-byte bins).
    categorical : bool
        The first feature categorical (6 categories).
    task : {"binary", "regression", "multiclass"}
        The labels.
    """

    name: str
    params: dict
    missing: bool = False
    categorical: bool = False
    task: str = "binary"


_MONOTONE = {"objective": "reg:squarederror", "monotone_constraints": "(1,0,0,0)"}

WARMUP_CASES: tuple[WarmupCase, ...] = (
    WarmupCase("binary, missing values", {"objective": "binary:logistic", "eval_metric": ["logloss", "auc"]}, True),
    WarmupCase("binary, dense", {"objective": "binary:logistic"}),
    WarmupCase("regression, dense", {"objective": "reg:squarederror"}, task="regression"),
    WarmupCase("regression, missing values", {"objective": "reg:squarederror"}, True, task="regression"),
    WarmupCase(
        "multiclass, missing values",
        {"objective": "multi:softprob", "num_class": 3, "eval_metric": "mlogloss"},
        True,
        task="multiclass",
    ),
    WarmupCase("categorical feature", {"objective": "binary:logistic"}, True, categorical=True),
    WarmupCase("categorical feature, dense", {"objective": "binary:logistic"}, categorical=True),
    WarmupCase("monotone constraints", _MONOTONE, task="regression"),
    WarmupCase("monotone constraints, missing values", _MONOTONE, True, task="regression"),
    WarmupCase("lossguide, subsample", {"objective": "binary:logistic", "grow_policy": "lossguide", "subsample": 0.8}),
)


@dataclass
class WarmupReport:
    """What :func:`warm_up` did.

    Attributes
    ----------
    seconds : float
        Wall-clock time of the whole warm-up.
    compiled : int
        Numba compilations (kernels and what they inline) the warm-up ran; 0 when the
        cache was already warm.
    cases : list of (str, float, int)
        Per case, and for the large exact sums: its name, seconds, compilations.
    cache_dirs : list of str
        Where Numba keeps the CPU kernels' cache.
    """

    seconds: float = 0.0
    compiled: int = 0
    cases: list = field(default_factory=list)
    cache_dirs: list = field(default_factory=list)


def _case_data(case: WarmupCase, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, list | None]:
    """float32 (n, F) values, float32 (n,) labels and the feature types of ``case``."""
    x = rng.standard_normal((_ROWS, _FEATURES)).astype(np.float32)
    types = None
    if case.categorical:
        x[:, 0] = rng.integers(0, 6, _ROWS)
        types = ["c"] + ["q"] * (_FEATURES - 1)
    signal = x[:, 1] + 0.5 * x[:, 2] + (x[:, 0] % 2 if case.categorical else x[:, 0])
    if case.task == "regression":
        y = signal
    elif case.task == "multiclass":
        y = np.digitize(signal, [-0.5, 0.5])
    else:
        y = signal > 0
    if case.missing:
        x[rng.random(x.shape) < 0.1] = np.nan
    return x, y.astype(np.float32), types


def _compilations(recorder) -> int:
    """Compilations (kernels and what they inline) a ``numba:compile`` recorder has seen."""
    return sum(1 for _, ev in recorder.buffer if ev.is_start)


def _cache_dirs() -> list[str]:
    """Where the CPU kernels' Numba cache lives (one folder for all of them, usually)."""
    from . import _cpu_kernels as K

    dirs = set()
    for value in vars(K).values():
        cache = getattr(value, "_cache", None)
        path = getattr(cache, "cache_path", None)
        if isinstance(path, str):
            dirs.add(path)
    return sorted(dirs)


def _run_case(case: WarmupCase, seed: int) -> None:
    """Train two rounds of ``case`` with an evaluation set, then predict with the model."""
    from ..data import DMatrix
    from ..training import train

    x, y, types = _case_data(case, np.random.default_rng(seed))
    n_test = _ROWS // 5
    dtrain = DMatrix(x[:-n_test], label=y[:-n_test], feature_types=types)
    dtest = DMatrix(x[-n_test:], label=y[-n_test:], feature_types=types, ref=dtrain)
    params = {"max_depth": 6, "device": "cpu", "nthread": _THREADS, "seed": seed, **case.params}
    booster = train(params, dtrain, 2, evals=[(dtest, "test")], verbose_eval=False)
    booster.predict(dtest)
    booster.predict(dtest, output_margin=True)


def warm_up(
    cases: tuple[WarmupCase, ...] = WARMUP_CASES, progress: Callable[[str], None] | None = None
) -> WarmupReport:
    """Compile the CPU kernels that training and prediction use into Numba's on-disk cache.

    Runs a two-round training (with an evaluation set) and a prediction per case on 100,000
    synthetic rows, then the exact sums of host blocks past 2**20 values that larger trainings
    take; with a warm cache it compiles nothing and takes about a second.

    Parameters
    ----------
    cases : tuple of WarmupCase
        The trainings to run (default: :data:`WARMUP_CASES`, the common kinds of data and
        objectives).
    progress : callable, optional
        Called with a line per case (its name, seconds, compilations).

    Returns
    -------
    WarmupReport
    """
    from numba.core import event

    from .. import config
    from .._kernel_switch import compile_in_process
    from ..exact import compile_sum_kernels

    report = WarmupReport()
    started = time.perf_counter()
    # the kernels' compilation notice is for trainings that compile unannounced; the parallel
    # kernels themselves, not their serial twins, are what the cache must hold when this returns
    with (
        config.config_context(verbosity=0),
        compile_in_process(),
        event.install_recorder("numba:compile") as compiles,
    ):
        steps = [(case.name, lambda i=i, case=case: _run_case(case, seed=i)) for i, case in enumerate(cases)]
        # the warm-up's trainings are too small to reach exact_sum's parallel kernels, which a
        # training of more than 2**20 labels (one-hot rows, weighted sums) would otherwise
        # compile in its first job (about 2 s on two cores)
        steps.append(("exact sums of large blocks (labels of over 2**20 rows)", compile_sum_kernels))
        for name, step in steps:
            begin, before = time.perf_counter(), _compilations(compiles)
            step()
            row = (name, time.perf_counter() - begin, _compilations(compiles) - before)
            report.cases.append(row)
            if progress is not None:
                progress(f"{row[0]}: {row[1]:.1f} s, {row[2]} compilations")
    report.seconds = time.perf_counter() - started
    report.compiled = _compilations(compiles)
    report.cache_dirs = _cache_dirs()
    return report
