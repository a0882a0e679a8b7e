"""Approximate feature contributions: XGBoost's ``approx_contribs`` (the Saabas method).

``Booster.predict(pred_contribs=True, approx_contribs=True)`` gives what XGBoost gives: for
each tree, the row's decision path from the root to its leaf, with the change of the node's
mean value at each step credited to the split feature, and the root's mean value to the bias
(https://blog.datadive.net/interpreting-random-forests/). A node's mean value is its leaf
value at a leaf, else its children's mean values weighted by their covers (hessian sums).
Not Shapley values: cheaper, and order-dependent (a feature higher in the tree gets more).

The arithmetic is XGBoost's, in float32 and in its order (``RegTree::FillNodeMeanValue``,
``RegTree::CalculateContributionsApprox`` and the CPU predictor's sums: each tree's
contributions summed on their own, then added to the row's; the base margin last), so the
values agree with XGBoost's to float32 rounding. The leaves come from the booster's own
``predict_leaf``, so categorical and missing-value decisions are the prediction's.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["node_mean_values", "approx_contributions"]


def node_mean_values(
    cover: np.ndarray, value: np.ndarray, left: np.ndarray, right: np.ndarray, parent: np.ndarray, offsets: np.ndarray
) -> np.ndarray:
    """Each node's mean value, XGBoost's ``FillNodeMeanValue``.

    Parameters
    ----------
    cover, value : ndarray, shape (n_nodes,)
        Hessian sums and leaf values of all trees' nodes (any float dtype; used as float32,
        as XGBoost stores them).
    left, right, parent : ndarray of int, shape (n_nodes,)
        Children and parent within the node's tree (-1: none).
    offsets : ndarray of int64, shape (n_trees + 1,)
        Where each tree's nodes start.

    Returns
    -------
    ndarray of float32, shape (n_nodes,)
        The leaf value at a leaf; elsewhere ``(m_l c_l + m_r c_r) / c`` in float32.
    """
    cover32 = np.asarray(cover, dtype=np.float32)
    mean = np.asarray(value, dtype=np.float32).copy()
    n = len(mean)
    tree_start = np.repeat(offsets[:-1], np.diff(offsets))
    # depth of every node, by hops to its root
    depth = np.zeros(n, dtype=np.int64)
    up = np.asarray(parent, dtype=np.int64).copy()
    while True:
        has_parent = up >= 0
        if not has_parent.any():
            break
        depth += has_parent
        up[has_parent] = parent[tree_start[has_parent] + up[has_parent]]
    inner = np.flatnonzero(np.asarray(left) >= 0)
    for d in range(int(depth.max(initial=0)), -1, -1):  # children before their parents
        at = inner[depth[inner] == d]
        if not len(at):
            continue
        lo, hi = tree_start[at] + left[at], tree_start[at] + right[at]
        total = mean[lo] * cover32[lo]
        total += mean[hi] * cover32[hi]
        mean[at] = total / cover32[at]
    return mean


@njit(cache=True, nogil=True)
def _add_trees(leaves, feature, parent, mean, offsets, tree_group, t0, n_features, out):
    """out[r, g, :] += each tree's approximate contributions for row r (float32, XGBoost's
    order): the root's mean to the bias, then root to leaf the change of mean to the split's
    feature. ``leaves`` (n, t1 - t0) int32: the row's leaf of each tree (local node index)."""
    n, n_trees = leaves.shape
    path = np.empty(256, dtype=np.int64)
    tree_sum = np.zeros(n_features + 1, dtype=np.float32)
    for r in range(n):
        for j in range(n_trees):
            t = t0 + j
            base = offsets[t]
            tree_sum[:] = 0.0
            depth = 0
            node = leaves[r, j]
            while node >= 0:  # leaf to root; applied root to leaf below
                if depth == path.shape[0]:
                    grown = np.empty(2 * depth, dtype=np.int64)
                    grown[:depth] = path
                    path = grown
                path[depth] = node
                depth += 1
                node = parent[base + node]
            node_value = mean[base + path[depth - 1]]
            tree_sum[n_features] += node_value
            for i in range(depth - 2, -1, -1):
                split = feature[base + path[i + 1]]
                new_value = mean[base + path[i]]
                tree_sum[split] += new_value - node_value
                node_value = new_value
            g = tree_group[t]
            for c in range(n_features + 1):
                out[r, g, c] += tree_sum[c]


def approx_contributions(ensemble, leaves: np.ndarray, t0: int, n_features: int, base_margin: np.ndarray) -> np.ndarray:
    """Approximate contributions of trees ``[t0, t0 + leaves.shape[1])``.

    Parameters
    ----------
    ensemble : dgboost.tree.Ensemble
    leaves : ndarray of int32, shape (n, n_trees)
        Each row's leaf (local node index) in each tree, from ``predict_leaf``.
    t0 : int
        The first tree.
    n_features : int
        F: the rows' width.
    base_margin : ndarray of float32, shape (n, n_groups)
        The margin each row starts from (the model's or the caller's), added to the bias.

    Returns
    -------
    ndarray of float32, shape (n, n_groups, F + 1)
        Contributions, bias last; they sum to the rows' margins.
    """
    a = ensemble.arrays
    offsets = ensemble.offsets()
    mean = node_mean_values(a["cover"], a["value"], a["left"], a["right"], a["parent"], offsets)
    n = leaves.shape[0]
    out = np.zeros((n, ensemble.n_groups, n_features + 1), dtype=np.float32)
    _add_trees(
        np.ascontiguousarray(leaves, dtype=np.int32),
        np.ascontiguousarray(a["feature"], dtype=np.int64),
        np.ascontiguousarray(a["parent"], dtype=np.int64),
        mean,
        offsets,
        np.ascontiguousarray(ensemble.groups(), dtype=np.int64),
        int(t0),
        int(n_features),
        out,
    )
    out[:, :, n_features] += np.asarray(base_margin, dtype=np.float32).reshape(n, ensemble.n_groups)
    return out
