"""Brute-force Shapley oracles for TreeSHAP tests (small models only), plus test models.

Everything here is deliberately naive and independent of :mod:`dgboost.explain`: it walks
the trees of a :class:`dgboost.tree.Ensemble` node by node and enumerates feature subsets.
Shapley values are linear in the trees, so each tree's game is solved over the features
*that tree* splits on (the others are null players); this keeps 2^m small (m <= 10).

* path-dependent value function: E[f(x) | x_S], where a split on a feature in S follows x
  and any other split averages its children weighted by cover (child cover / parent cover);
* interventional value function: mean over background rows r of f(x_S, r_{not S});
* Shapley values ``phi_i = sum_S |S|!(m-|S|-1)!/m! (v(S+i) - v(S))``;
* interaction values (shap / XGBoost definition): for i != j,
  ``Phi_ij = sum_{S without i,j} |S|!(m-|S|-2)!/(2 (m-1)!) (v(S+i+j) - v(S+i) - v(S+j) + v(S))``
  and ``Phi_ii = phi_i - sum_{j != i} Phi_ij``.

Outputs follow dgboost's layout: ``(n, n_groups, F + 1)`` / ``(n, n_groups, F + 1, F + 1)``
with the bias (``base_margin`` + expected value) in the last column / at ``[F, F]``.
Rows are compared as float32 with the float32 thresholds (``x < split_value`` goes left,
NaN follows ``default_left``), exactly like the model. A categorical node (``Tree.split_type``
1) sends a value right iff it is a valid category (``0 <= x < 2**24``, truncated to an
integer, XGBoost's ``common::Decision``) found in the node's codes (``Tree.cat_values``,
searched as a list, not as a bitset); any other non-missing value goes left.
"""

from __future__ import annotations

import json
from math import factorial

import numpy as np

from dgboost.testing.reference import predict_margin_reference
from dgboost.tree import Ensemble, Tree

__all__ = [
    "predict_margin",
    "brute_force_shap",
    "brute_force_interactions",
    "brute_force_interventional",
    "random_tree",
    "random_ensemble",
    "random_categorical_tree",
    "random_categorical_ensemble",
    "random_categorical_rows",
    "chain_tree",
    "random_rows",
    "ensemble_from_xgboost",
]

MAX_PLAYERS = 12


# ---------------------------------------------------------------------------------------
# plain evaluation
# ---------------------------------------------------------------------------------------
def _rows32(X) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(X), dtype=np.float32)


def _node_codes(tree: Tree, node: int) -> np.ndarray | None:
    """The codes a categorical node sends right, None for a numeric node."""
    if tree.split_type is None or tree.split_type[node] != 1:
        return None
    begin, size = int(tree.cat_segments[node]), int(tree.cat_sizes[node])
    return np.asarray(tree.cat_values[begin : begin + size], dtype=np.int64)


def _go_left(tree: Tree, node: int, col: np.ndarray) -> np.ndarray:
    codes = _node_codes(tree, node)
    if codes is None:
        goes_left = col < tree.split_value[node]
    else:
        valid = (col >= 0) & (col < 16777216)
        code = np.trunc(np.where(valid, col, 0)).astype(np.int64)
        goes_left = ~(valid & np.isin(code, codes))
    return np.where(np.isnan(col), bool(tree.default_left[node]), goes_left)


def predict_margin(ensemble: Ensemble, X) -> np.ndarray:
    """Margin ``(n, n_groups)``: base margin plus the sum of each group's trees (float64);
    a model with categorical splits is walked here, by this module's own routing."""
    if not getattr(ensemble, "has_categorical", False):
        return predict_margin_reference(ensemble, X)
    X32 = _rows32(X)
    out = np.zeros((X32.shape[0], ensemble.n_groups))
    out[:] = ensemble.base_margin
    for t, g in enumerate(ensemble.groups()):
        tree = ensemble.tree(t)
        for r in range(X32.shape[0]):
            node = 0
            while tree.left[node] >= 0:
                left = _go_left(tree, node, X32[r : r + 1, int(tree.feature[node])])[0]
                node = int(tree.left[node] if left else tree.right[node])
            out[r, g] += float(tree.value[node])
    return out


# ---------------------------------------------------------------------------------------
# value functions over all subsets of one tree's features
# ---------------------------------------------------------------------------------------
def _players(tree: Tree) -> list[int]:
    return sorted(set(int(f) for f in tree.feature[tree.left >= 0]))


def _path_dependent_values(tree: Tree, X32: np.ndarray, players: list[int]) -> np.ndarray:
    """v[S, row] = E[tree(x) | x_S] (cover-weighted), S a bit mask over ``players``."""
    pos = {f: i for i, f in enumerate(players)}
    masks = np.arange(1 << len(players))
    n = X32.shape[0]

    def rec(node: int) -> np.ndarray:
        if tree.left[node] < 0:
            return np.full((masks.shape[0], n), float(tree.value[node]))
        lc, rc = int(tree.left[node]), int(tree.right[node])
        el, er = rec(lc), rec(rc)
        f = int(tree.feature[node])
        in_s = ((masks >> pos[f]) & 1).astype(bool)
        gl = _go_left(tree, node, X32[:, f])
        follow = np.where(gl[None, :], el, er)
        c = float(tree.cover[node])
        wl = float(tree.cover[lc]) / c if c > 0 else 0.0
        wr = float(tree.cover[rc]) / c if c > 0 else 0.0
        return np.where(in_s[:, None], follow, wl * el + wr * er)

    return rec(0)


def _interventional_values(tree: Tree, X32: np.ndarray, B32: np.ndarray, players: list[int]) -> np.ndarray:
    """v[S, row] = mean over background rows r of tree(x_S, r_rest)."""
    pos = {f: i for i, f in enumerate(players)}
    masks = np.arange(1 << len(players))
    n, nb = X32.shape[0], B32.shape[0]

    def rec(node: int) -> np.ndarray:
        if tree.left[node] < 0:
            return np.full((masks.shape[0], n, nb), float(tree.value[node]))
        el, er = rec(int(tree.left[node])), rec(int(tree.right[node]))
        f = int(tree.feature[node])
        in_s = ((masks >> pos[f]) & 1).astype(bool)
        glx = _go_left(tree, node, X32[:, f])
        glr = _go_left(tree, node, B32[:, f])
        fx = np.where(glx[None, :, None], el, er)
        fr = np.where(glr[None, None, :], el, er)
        return np.where(in_s[:, None, None], fx, fr)

    return rec(0).mean(axis=2)


def _popcounts(masks: np.ndarray) -> np.ndarray:
    return np.array([bin(int(s)).count("1") for s in masks], dtype=np.int64)


def _shapley(v: np.ndarray, m: int) -> np.ndarray:
    """phi[i, row] for a game given as v[mask, row] over m players."""
    masks = np.arange(1 << m)
    sizes = _popcounts(masks)
    w = np.array([factorial(s) * factorial(m - s - 1) / factorial(m) for s in range(m)])
    phi = np.zeros((m, v.shape[1]))
    for i in range(m):
        S = masks[((masks >> i) & 1) == 0]
        phi[i] = w[sizes[S]] @ (v[S | (1 << i)] - v[S])
    return phi


def _shapley_interactions(v: np.ndarray, m: int) -> np.ndarray:
    """Phi[i, j, row] (shap definition; diagonal = phi_i - off-diagonal row sum)."""
    phi = _shapley(v, m)
    out = np.zeros((m, m, v.shape[1]))
    if m >= 2:
        masks = np.arange(1 << m)
        sizes = _popcounts(masks)
        c = np.array([factorial(s) * factorial(m - s - 2) / (2.0 * factorial(m - 1)) for s in range(m - 1)])
        for i in range(m):
            for j in range(m):
                if i == j:
                    continue
                S = masks[(((masks >> i) & 1) == 0) & (((masks >> j) & 1) == 0)]
                bi, bj = 1 << i, 1 << j
                out[i, j] = c[sizes[S]] @ (v[S | bi | bj] - v[S | bi] - v[S | bj] + v[S])
    for i in range(m):
        out[i, i] = phi[i] - (out[i].sum(axis=0) - out[i, i])
    return out


def _check_players(players):
    if len(players) > MAX_PLAYERS:
        raise ValueError(f"brute force needs <= {MAX_PLAYERS} distinct features per tree, got {len(players)}")


# ---------------------------------------------------------------------------------------
# public oracles
# ---------------------------------------------------------------------------------------
def _shapley_by_tree(ensemble: Ensemble, X32: np.ndarray, values) -> np.ndarray:
    """Sum over trees of the Shapley values of ``values(tree, players)`` (a v[S, row] table);
    the bias column gets the base margin plus each tree's v[empty set]."""
    n, F = X32.shape
    out = np.zeros((n, ensemble.n_groups, F + 1))
    out[:, :, F] = ensemble.base_margin
    for t, g in enumerate(ensemble.groups()):
        tree = ensemble.tree(t)
        players = _players(tree)
        _check_players(players)
        v = values(tree, players)
        out[:, g, F] += v[0]
        if players:
            phi = _shapley(v, len(players))
            for i, f in enumerate(players):
                out[:, g, f] += phi[i]
    return out


def brute_force_shap(ensemble: Ensemble, X) -> np.ndarray:
    """Path-dependent Shapley values by subset enumeration; ``(n, n_groups, F + 1)``."""
    X32 = _rows32(X)
    return _shapley_by_tree(ensemble, X32, lambda tree, players: _path_dependent_values(tree, X32, players))


def brute_force_interactions(ensemble: Ensemble, X) -> np.ndarray:
    """Path-dependent Shapley interaction values; ``(n, n_groups, F + 1, F + 1)``."""
    X32 = _rows32(X)
    n, F = X32.shape
    out = np.zeros((n, ensemble.n_groups, F + 1, F + 1))
    out[:, :, F, F] = ensemble.base_margin
    for t, g in enumerate(ensemble.groups()):
        tree = ensemble.tree(t)
        players = _players(tree)
        _check_players(players)
        v = _path_dependent_values(tree, X32, players)
        out[:, g, F, F] += v[0]
        if players:
            phi = _shapley_interactions(v, len(players))
            idx = np.array(players)
            out[:, g, idx[:, None], idx[None, :]] += np.moveaxis(phi, 2, 0)
    return out


def brute_force_interventional(ensemble: Ensemble, X, background) -> np.ndarray:
    """Interventional Shapley values over ``background``; ``(n, n_groups, F + 1)``."""
    X32, B32 = _rows32(X), _rows32(background)
    return _shapley_by_tree(ensemble, X32, lambda tree, players: _interventional_values(tree, X32, B32, players))


# ---------------------------------------------------------------------------------------
# random test models
# ---------------------------------------------------------------------------------------
def _finish_tree(left, right, feature, split, dleft, value, leaf_cover) -> Tree:
    n = len(left)
    parent = np.full(n, -1, dtype=np.int32)
    for i in range(n):
        if left[i] >= 0:
            parent[left[i]] = i
            parent[right[i]] = i
    cover = np.zeros(n)
    # children are numbered after their parents: sum covers bottom-up
    for i in range(n - 1, -1, -1):
        cover[i] = leaf_cover[i] if left[i] < 0 else cover[left[i]] + cover[right[i]]
    return Tree(
        left=left,
        right=right,
        parent=parent,
        feature=feature,
        split_value=split,
        default_left=dleft,
        gain=np.zeros(n),
        cover=cover,
        value=value,
    )


def random_tree(
    rng: np.random.Generator,
    n_features: int,
    max_depth: int,
    split_prob: float = 0.8,
    thresholds=None,
    zero_cover_prob: float = 0.0,
) -> Tree:
    """A random tree (nodes numbered breadth first) with consistent covers.

    ``thresholds``: values split points are drawn from (default: a grid in [-2, 2], so that
    rows drawn from the same grid hit ``x == split_value``). Leaf covers are random positive
    (``zero_cover_prob``: chance a leaf gets cover 0); inner covers are sums of children.
    """
    if thresholds is None:
        thresholds = np.linspace(-2, 2, 9)
    left, right, feature, split, dleft, value, lcover = [], [], [], [], [], [], []
    depth = []

    def new(d):
        left.append(-1)
        right.append(-1)
        feature.append(-1)
        split.append(0.0)
        dleft.append(0)
        value.append(0.0)
        lcover.append(0.0)
        depth.append(d)
        return len(left) - 1

    new(0)
    i = 0
    while i < len(left):
        d = depth[i]
        if d < max_depth and (i == 0 or rng.random() < split_prob):
            feature[i] = int(rng.integers(n_features))
            split[i] = float(rng.choice(thresholds))
            dleft[i] = int(rng.integers(2))
            left[i] = new(d + 1)
            right[i] = new(d + 1)
        else:
            value[i] = float(rng.normal())
            lcover[i] = 0.0 if rng.random() < zero_cover_prob else float(rng.uniform(0.5, 10.0))
        i += 1
    return _finish_tree(
        np.array(left),
        np.array(right),
        np.array(feature),
        np.array(split),
        np.array(dleft),
        np.array(value),
        np.array(lcover),
    )


def _category_set(rng: np.random.Generator, k: int) -> np.ndarray:
    """Sorted codes going right: one category (a one-hot split) or a random subset."""
    if k <= 1 or rng.random() < 0.3:
        return np.array([int(rng.integers(max(k, 1)))])
    size = int(rng.integers(1, k))
    return np.sort(rng.choice(k, size=size, replace=False))


def random_categorical_tree(
    rng: np.random.Generator, n_categories, max_depth: int, split_prob: float = 0.8, thresholds=None
) -> Tree:
    """:func:`random_tree` whose splits on features with ``n_categories[f] > 0`` are
    categorical: a random set of the codes 0..K-1 goes right (``split_value`` 0, never read).

    The tree carries ``split_type``, ``cat_segments``, ``cat_sizes`` and ``cat_values`` (the
    sorted codes per categorical node), the fields of :class:`~dgboost.tree.Tree`.
    """
    n_categories = np.asarray(n_categories, dtype=np.int64)
    tree = random_tree(rng, n_categories.shape[0], max_depth, split_prob=split_prob, thresholds=thresholds)
    n = tree.n_nodes
    split_type = np.zeros(n, np.uint8)
    segments = np.zeros(n, np.int64)
    sizes = np.zeros(n, np.int64)
    values: list[np.ndarray] = []
    total = 0
    split_value = tree.split_value.copy()
    for node in range(n):
        f = int(tree.feature[node])
        if tree.left[node] < 0 or n_categories[f] == 0:
            segments[node] = total
            continue
        codes = _category_set(rng, int(n_categories[f]))
        split_type[node] = 1
        segments[node], sizes[node] = total, codes.shape[0]
        split_value[node] = 0.0  # never read (docs/design.md 11.4)
        values.append(codes)
        total += codes.shape[0]
    fields = {name: getattr(tree, name) for name in ("left", "right", "parent", "feature", "default_left")}
    fields.update(gain=tree.gain, cover=tree.cover, value=tree.value, split_value=split_value)
    cat_values = np.concatenate(values).astype(np.int32) if values else np.empty(0, np.int32)
    return Tree(**fields, split_type=split_type, cat_segments=segments, cat_sizes=sizes, cat_values=cat_values)


def random_categorical_ensemble(
    rng: np.random.Generator,
    n_categories,
    n_trees: int = 3,
    max_depth: int = 4,
    n_groups: int = 1,
    base_margin=None,
    **tree_kwargs,
) -> Ensemble:
    """:func:`random_ensemble` of :func:`random_categorical_tree` trees."""
    return _ensemble_of(
        rng,
        lambda: random_categorical_tree(rng, n_categories, max_depth, **tree_kwargs),
        n_trees,
        n_groups,
        base_margin,
    )


def random_categorical_rows(
    rng: np.random.Generator, n: int, n_categories, nan_prob: float = 0.15, invalid_prob: float = 0.1
) -> np.ndarray:
    """float32 rows for :func:`random_categorical_tree` models: codes 0..K-1 in categorical
    columns, with unseen codes (K..K+40), negative, non-integer and infinite values mixed in
    (``invalid_prob``), grid and continuous values in numeric columns, NaN anywhere."""
    n_categories = np.asarray(n_categories, dtype=np.int64)
    X = random_rows(rng, n, n_categories.shape[0], nan_prob=0.0)
    for f in np.flatnonzero(n_categories > 0):
        k = int(n_categories[f])
        col = rng.integers(0, k, size=n).astype(np.float64)
        odd = rng.random(n) < invalid_prob
        pool = np.array([-1.0, -0.5, -0.0, 0.5, k - 0.5, k, k + 40, np.inf, -np.inf, 2.0**24, 1e30])
        col[odd] = rng.choice(pool, size=int(odd.sum()))
        X[:, f] = col
    X[rng.random(X.shape) < nan_prob] = np.nan
    return X.astype(np.float32)


def chain_tree(rng: np.random.Generator, n_features: int, depth: int, thresholds=None, distinct: bool = False) -> Tree:
    """A caterpillar tree of the given depth: every level has one leaf and one inner node.

    ``distinct``: every level splits on a different feature (needs n_features >= depth).
    """
    order = rng.permutation(n_features) if distinct else None
    if thresholds is None:
        thresholds = np.linspace(-2, 2, 9)
    n = 2 * depth + 1
    left = np.full(n, -1)
    right = np.full(n, -1)
    feature = np.full(n, -1)
    split = np.zeros(n)
    dleft = np.zeros(n, dtype=np.int64)
    value = np.zeros(n)
    lcover = np.zeros(n)
    node = 0
    for d in range(depth):
        a, b = 2 * d + 1, 2 * d + 2
        inner_left = bool(rng.integers(2))
        left[node], right[node] = a, b
        feature[node] = int(order[d]) if distinct else int(rng.integers(n_features))
        split[node] = float(rng.choice(thresholds))
        dleft[node] = int(rng.integers(2))
        leaf = b if inner_left else a
        value[leaf] = float(rng.normal())
        lcover[leaf] = float(rng.uniform(0.5, 2.0))
        node = a if inner_left else b
    value[node] = float(rng.normal())
    lcover[node] = float(rng.uniform(0.5, 2.0))
    return _finish_tree(left, right, feature, split, dleft, value, lcover)


def random_ensemble(
    rng: np.random.Generator,
    n_features: int = 6,
    n_trees: int = 3,
    max_depth: int = 4,
    n_groups: int = 1,
    base_margin=None,
    **tree_kwargs,
) -> Ensemble:
    """``n_trees`` random trees per group (interleaved by group, like XGBoost)."""
    return _ensemble_of(
        rng, lambda: random_tree(rng, n_features, max_depth, **tree_kwargs), n_trees, n_groups, base_margin
    )


def _ensemble_of(rng: np.random.Generator, make_tree, n_trees: int, n_groups: int, base_margin) -> Ensemble:
    """``n_trees`` trees ``make_tree()`` per group, interleaved by group (as XGBoost), after
    a random base margin where ``base_margin`` is None."""
    if base_margin is None:
        base_margin = rng.normal(size=n_groups)
    ens = Ensemble(n_groups=n_groups, base_margin=base_margin)
    for _ in range(n_trees):
        for g in range(n_groups):
            ens.append(make_tree(), g)
    return ens


def random_rows(
    rng: np.random.Generator, n: int, n_features: int, nan_prob: float = 0.15, thresholds=None, dtype=np.float64
) -> np.ndarray:
    """Rows mixing grid values (equal to thresholds), continuous values and NaNs."""
    if thresholds is None:
        thresholds = np.linspace(-2, 2, 9)
    X = rng.uniform(-2.5, 2.5, size=(n, n_features))
    on_grid = rng.random(X.shape) < 0.3
    X[on_grid] = rng.choice(thresholds, size=int(on_grid.sum()))
    X[rng.random(X.shape) < nan_prob] = np.nan
    return X.astype(dtype)


# ---------------------------------------------------------------------------------------
# minimal XGBoost JSON -> Ensemble (tests and benchmarks only; gbtree)
# ---------------------------------------------------------------------------------------
def _base_margin(base_score: str, objective: str, n_groups: int) -> np.ndarray:
    vals = np.array([float(s) for s in base_score.strip("[]").split(",") if s.strip()], dtype=np.float64)
    vals = np.broadcast_to(vals, (n_groups,)).copy() if vals.size == 1 else vals
    if objective in ("binary:logistic", "reg:logistic", "binary:logitraw"):
        return np.log(vals / (1.0 - vals))
    if objective in ("count:poisson", "reg:gamma", "reg:tweedie", "survival:cox"):
        return np.log(vals)
    return vals


def ensemble_from_xgboost(booster) -> Ensemble:
    """A :class:`Ensemble` from an ``xgboost.Booster`` (via ``save_raw("json")``).

    Minimal: gbtree boosters with one output per tree. The base score becomes
    ``base_margin`` (logit for logistic objectives, log for log-link ones). Categorical splits
    (``enable_categorical``) keep XGBoost's right-going codes (its ``categories`` arrays).
    """
    j = json.loads(bytes(booster.save_raw("json")))
    learner = j["learner"]
    gb = learner["gradient_booster"]
    if gb.get("name") not in ("gbtree", None):
        raise ValueError(f"only gbtree boosters are supported, got {gb.get('name')}")
    model = gb["model"]
    param = learner["learner_model_param"]
    n_groups = max(1, int(param.get("num_class", "0")), int(param.get("num_target", "1")))
    objective = learner["objective"]["name"]
    ens = Ensemble(n_groups=n_groups, base_margin=_base_margin(param["base_score"], objective, n_groups))
    for tj, g in zip(model["trees"], model["tree_info"]):
        left = np.array(tj["left_children"], dtype=np.int64)
        right = np.array(tj["right_children"], dtype=np.int64)
        parents = np.array(tj["parents"], dtype=np.int64)
        leaf = left < 0
        cond = np.array(tj["split_conditions"], dtype=np.float32)
        split_type = np.array(tj.get("split_type") or np.zeros(left.shape[0]), dtype=np.uint8)
        cat = {}
        if np.any(split_type == 1):
            segments = np.zeros(left.shape[0], np.int64)
            sizes = np.zeros(left.shape[0], np.int64)
            nodes = np.array(tj["categories_nodes"], dtype=np.int64)
            segments[nodes] = tj["categories_segments"]
            sizes[nodes] = tj["categories_sizes"]
            cat = dict(
                split_type=split_type,
                cat_segments=segments,
                cat_sizes=sizes,
                cat_values=np.array(tj["categories"], dtype=np.int32),
            )
            cond = np.where(split_type == 1, np.float32(0.0), cond)  # never read
        ens.append(
            Tree(
                left=left,
                right=right,
                parent=np.where(parents >= 2**31 - 1, -1, parents),
                feature=np.where(leaf, -1, np.array(tj["split_indices"])),
                split_value=np.where(leaf, 0.0, cond).astype(np.float32),
                default_left=np.array(tj["default_left"], dtype=np.uint8),
                gain=np.array(tj["loss_changes"], dtype=np.float32),
                cover=np.array(tj["sum_hessian"], dtype=np.float64),
                value=np.where(leaf, cond, np.array(tj["base_weights"], dtype=np.float32)),
                **cat,
            ),
            int(g),
        )
    return ens
