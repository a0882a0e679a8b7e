"""Synthetic data sets for demos, tests and benchmarks.

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

import numpy as np

from .errors import DGBoostValueError

__all__ = ["make_synthetic", "TASKS"]

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
