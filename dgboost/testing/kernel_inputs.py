"""Random inputs shared by the kernel tests of every backend (tests/cpu/test_backend_kernels.py,
tests/gpu/test_cuda_kernels.py), so both devices face the same kinds of data."""

from __future__ import annotations

import numpy as np

from .._layout import BEGIN, DEFAULT_LEFT, END, FEATURE, SPLIT_BIN, SUM_G, SUM_H
from ..backend._records import new_records
from ..quantile import Cuts, compute_cuts
from ..tree import Ensemble, Tree

__all__ = ["binning_data", "mixed_width_data", "random_ensemble", "node_records", "random_segments"]


def node_records(begins, ends, feature=None, split_bin=None, default_left=None, sums=None) -> np.ndarray:
    """int64 (m, NODE_FIELDS) host node records with the given segments, decisions and sums."""
    out = new_records(len(begins))
    out[:, BEGIN], out[:, END] = begins, ends
    for column, values in ((FEATURE, feature), (SPLIT_BIN, split_bin), (DEFAULT_LEFT, default_left)):
        if values is not None:
            out[:, column] = np.asarray(values, np.int64)
    if sums is not None:
        out[:, SUM_G : SUM_H + 1] = np.asarray(sums, np.int64)
    return out


def random_segments(rng: np.random.Generator, n: int, m: int, empty: float = 0.2) -> np.ndarray:
    """int64 (m, 2) disjoint ``[begin, end)`` segments of ``range(n)`` in order, about
    ``empty`` of them empty (gaps between segments are rows of no segment)."""
    edges = np.sort(rng.choice(np.arange(1, n), size=2 * m, replace=False)).reshape(m, 2)
    drop = rng.random(m) < empty
    edges[drop, 1] = edges[drop, 0]
    return edges.astype(np.int64)


def binning_data(
    seed: int, n: int = 500, f: int = 6, missing: float = 0.2, max_bin: int = 16
) -> tuple[np.random.Generator, np.ndarray, Cuts]:
    """Normal features with a few-valued column, missing values and an all-missing last column.

    Returns
    -------
    rng : numpy.random.Generator
        The generator after drawing ``x`` (for further draws in the test).
    x : ndarray of float32, shape (n, f)
    cuts : Cuts
        ``compute_cuts(x, None, max_bin)``.
    """
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, f)).astype(np.float32)
    x[:, 0] = np.round(x[:, 0])  # few distinct values
    x[rng.random(x.shape) < missing] = np.nan
    x[:, -1] = np.nan if f > 2 else x[:, -1]  # an all-missing column
    return rng, x, compute_cuts(x, None, max_bin)


def mixed_width_data(
    seed: int, n_bins, n: int = 500, missing: float = 0.2
) -> tuple[np.random.Generator, np.ndarray, Cuts]:
    """Integer-valued features of the given numbers of bins (so of different ELLPACK widths),
    with missing values.

    Feature f takes the values ``0 .. n_bins[f] - 1`` (the first rows run through all of them
    before missing values are put in) and ``n_bins[f]``, past the last cut (clipped to the
    last bin); its cuts are ``1 .. n_bins[f]``, so a value's bin is the value itself.

    Returns
    -------
    rng : numpy.random.Generator
        The generator after drawing ``x``.
    x : ndarray of float32, shape (n, len(n_bins))
    cuts : Cuts
    """
    rng = np.random.default_rng(seed)
    n_bins = [int(k) for k in n_bins]
    x = np.stack([rng.integers(0, k + 1, n) for k in n_bins], axis=1).astype(np.float32)
    for f, k in enumerate(n_bins):
        x[: min(n, k), f] = np.arange(min(n, k))
    x[rng.random(x.shape) < missing] = np.nan
    values = np.concatenate([np.arange(1, k + 1) for k in n_bins]).astype(np.float32)
    return rng, x, Cuts(values, np.concatenate([[0], np.cumsum(n_bins)]).astype(np.int64))


def random_ensemble(rng: np.random.Generator, n_trees: int = 5, n_features: int = 4, n_groups: int = 2) -> Ensemble:
    """``n_trees`` random trees of up to 15 nodes (breadth-first splits on random features and
    thresholds, random default directions and leaf values), round-robin over ``n_groups``."""
    ens = Ensemble(n_groups, rng.normal(size=n_groups))
    for t in range(n_trees):
        left, right, parent, feature, split = [-1], [-1], [-1], [-1], [0.0]
        frontier = [0]
        while frontier and len(left) < 15:
            node = frontier.pop(0)
            for side in (0, 1):
                left.append(-1)
                right.append(-1)
                parent.append(node)
                feature.append(-1)
                split.append(0.0)
                (left if side == 0 else right)[node] = len(left) - 1
                frontier.append(len(left) - 1)
            feature[node] = int(rng.integers(n_features))
            split[node] = float(rng.normal())
        n = len(left)
        ens.append(
            Tree(
                left=left,
                right=right,
                parent=parent,
                feature=feature,
                split_value=split,
                default_left=rng.integers(0, 2, n),
                gain=np.zeros(n),
                cover=np.ones(n),
                value=rng.normal(size=n),
            ),
            t % n_groups,
        )
    return ens
