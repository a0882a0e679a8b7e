"""Node records on the host: the CPU backend's record stages and the CUDA kernels' oracle.

A node record is one int64 row of :data:`dgboost._layout.NODE_RECORD_FIELDS`. These NumPy
functions define what the record stages compute; ``kernels/nodes.cu`` does the same on the
device (tests compare the two).
"""

from __future__ import annotations

import numpy as np

from .._layout import (
    BEGIN,
    DEFAULT_LEFT,
    END,
    FEATURE,
    GAIN,
    LEFT_G,
    LEFT_H,
    NO_NODE,
    NODE_FIELDS,
    SPLIT_BIN,
    SUM_G,
    SUM_H,
)

__all__ = ["new_records", "root_node", "split_nodes", "children_histograms", "write_splits"]


def new_records(n: int) -> np.ndarray:
    """int64 (n, NODE_FIELDS) records of unevaluated nodes (feature -1, everything else 0)."""
    out = np.zeros((n, NODE_FIELDS), np.int64)
    out[:, FEATURE] = -1
    out[:, SPLIT_BIN] = -1
    return out


def root_node(sums, n_rows: int) -> np.ndarray:
    """int64 (1, NODE_FIELDS): the root with global ``sums`` (int64 (2,)) and rows [0, n_rows)."""
    out = new_records(1)
    out[0, SUM_G : SUM_H + 1] = np.asarray(sums, np.int64)
    out[0, END] = n_rows
    return out


def split_nodes(
    parents: np.ndarray, counts: np.ndarray, global_counts: np.ndarray | None, out: np.ndarray | None = None
):
    """Children records, the segments to build and which side they are (see Backend.split_nodes;
    ``global_counts`` None: the child of smaller hessian sum is built; ``out``: int64
    (2k, NODE_FIELDS) to hold the children).

    Children of parent j are rows 2j (left) and 2j + 1 (right). A parent that is not split
    (feature < 0) gets two NO_NODE children with empty segments and builds nothing.
    """
    k = parents.shape[0]
    children = new_records(2 * k)
    left, right = children[0::2], children[1::2]
    split = parents[:, FEATURE] >= 0
    left[:, SUM_G] = np.where(split, parents[:, LEFT_G], 0)
    left[:, SUM_H] = np.where(split, parents[:, LEFT_H], 0)
    right[:, SUM_G] = np.where(split, parents[:, SUM_G] - parents[:, LEFT_G], 0)
    right[:, SUM_H] = np.where(split, parents[:, SUM_H] - parents[:, LEFT_H], 0)
    mid = np.where(split, parents[:, BEGIN] + counts[:, 0], parents[:, BEGIN])
    left[:, BEGIN], left[:, END] = parents[:, BEGIN], mid
    right[:, BEGIN], right[:, END] = mid, np.where(split, parents[:, END], parents[:, BEGIN])
    left[~split, FEATURE] = right[~split, FEATURE] = NO_NODE
    sizes = np.stack([left[:, SUM_H], right[:, SUM_H]], axis=1) if global_counts is None else global_counts
    build_left = ((sizes[:, 0] <= sizes[:, 1]) | ~split).astype(np.int64)
    chosen = np.where(build_left[:, None] == 1, left[:, BEGIN : END + 1], right[:, BEGIN : END + 1])
    if out is not None:
        out[...] = children
        children = out
    return children, np.ascontiguousarray(chosen), build_left


def children_histograms(parent_hist, parent_index, built, build_left) -> np.ndarray:
    """int64 (2k, B, 2): built children in their slots (2j, 2j + 1), siblings by subtraction.

    ``parent_index`` None means parent j is row j of ``parent_hist``.
    """
    parents = parent_hist if parent_index is None else parent_hist[np.asarray(parent_index, np.int64)]
    other = parents - built
    is_left = np.asarray(build_left, bool)[:, None, None]
    out = np.empty((2 * built.shape[0],) + built.shape[1:], np.int64)
    out[0::2] = np.where(is_left, built, other)
    out[1::2] = np.where(is_left, other, built)
    return out


def write_splits(records: np.ndarray, feature, split_bin, default_left, gain, left_sum) -> None:
    """Store evaluated splits (host arrays of one value per record) into ``records``."""
    records[:, FEATURE] = feature
    records[:, SPLIT_BIN] = split_bin
    records[:, DEFAULT_LEFT] = default_left
    records[:, GAIN] = np.asarray(gain, np.float64).view(np.int64)
    records[:, LEFT_G] = left_sum[:, 0]
    records[:, LEFT_H] = left_sum[:, 1]
