"""Plain NumPy reference predictors, for tests only.

Every tree is walked for all rows at once, one level per step (no recursion, no
compiled code), with XGBoost's float32 semantics: ``X`` is cast to float32, a row goes
left when ``x < split_value`` (compared in float32) and a missing (NaN) value goes left
when ``default_left`` is set; at a categorical split a present value goes right only when
it is one of the node's categories (XGBoost's ``common::Decision``).
"""

from __future__ import annotations

import numpy as np

__all__ = ["add_tree_outputs", "leaf_index_reference", "predict_margin_reference", "predict_margin_reference_f32"]


def _as_f32_matrix(X) -> np.ndarray:
    X = np.asarray(X, dtype=np.float32)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-d, got shape {X.shape}")
    return X


def _categorical_left(ensemble, nodes, x, go_left) -> np.ndarray:
    """``go_left`` with the rows at categorical nodes decided by XGBoost's rule: a present
    value goes right only when it is a valid category (0 <= x < 2**24, truncated) in the
    node's set."""
    go_left = go_left.copy()
    for node in np.unique(nodes).tolist():
        codes = ensemble.categories_of(node)
        if codes is None:
            continue
        at = (nodes == node) & ~np.isnan(x)
        v = x[at].astype(np.float64)
        valid = (v >= 0) & (v < 2.0**24)
        code = np.where(valid, np.trunc(np.where(valid, v, 0)), -1).astype(np.int64)
        go_left[at] = ~(valid & np.isin(code, codes))
    return go_left


def leaf_index_reference(ensemble, X) -> np.ndarray:
    """Local leaf index reached by every row in every tree; int64 (n_rows, n_trees)."""
    X = _as_f32_matrix(X)
    n = X.shape[0]
    off = np.asarray(ensemble.offsets(), dtype=np.int64)
    L, R = ensemble.left, ensemble.right
    F, S, D = ensemble.feature, ensemble.split_value, ensemble.default_left.astype(bool)
    rows = np.arange(n)
    out = np.empty((n, ensemble.n_trees), dtype=np.int64)
    for t in range(ensemble.n_trees):
        node = np.full(n, off[t], dtype=np.int64)
        size = off[t + 1] - off[t]
        for _ in range(size):  # a path has at most `size` nodes
            active = L[node] >= 0
            if not active.any():
                break
            nd = node[active]
            x = X[rows[active], F[nd]]
            go_left = np.where(np.isnan(x), D[nd], x < S[nd])
            if getattr(ensemble, "cat_arrays", None) is not None:
                go_left = _categorical_left(ensemble, nd, x, go_left)
            node[active] = off[t] + np.where(go_left, L[nd], R[nd])
        else:
            raise ValueError(f"tree {t} has a cycle")
        out[:, t] = node - off[t]
    return out


def add_tree_outputs(ensemble, X, out, tree_begin: int = 0, tree_end: int | None = None) -> np.ndarray:
    """``out[:, group(t)] += leaf value`` for trees ``[tree_begin, tree_end)``, tree by tree in
    ``out``'s dtype; returns ``out`` (n, n_groups)."""
    tree_end = ensemble.n_trees if tree_end is None else tree_end
    leaves = leaf_index_reference(ensemble, X)
    off = ensemble.offsets()
    groups = ensemble.groups()
    V = ensemble.value.astype(out.dtype)
    for t in range(tree_begin, tree_end):
        out[:, groups[t]] += V[off[t] + leaves[:, t]]
    return out


def _margin(ensemble, X, dtype) -> np.ndarray:
    n = _as_f32_matrix(X).shape[0]
    out = np.tile(np.asarray(ensemble.base_margin, dtype=dtype), (n, 1))
    return add_tree_outputs(ensemble, X, out)


def predict_margin_reference(ensemble, X) -> np.ndarray:
    """Margin of every row: base_margin plus the leaf values, summed in float64; (n, n_groups)."""
    return _margin(ensemble, X, np.float64)


def predict_margin_reference_f32(ensemble, X) -> np.ndarray:
    """As :func:`predict_margin_reference`, but accumulated in float32 tree by tree, starting
    from the float32 base margin, as XGBoost's CPU predictor does; float32 (n, n_groups)."""
    return _margin(ensemble, X, np.float32)
