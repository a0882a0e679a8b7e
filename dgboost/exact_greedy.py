"""Exact greedy tree growth (``tree_method="exact"``), driven only through an exact engine.

As XGBoost's ``exact`` (``updater_colmaker.cc`` followed by ``prune``): depthwise growth to
``max_depth``, every distinct present value of a node's rows a candidate split (the split
value the float32 midpoint of two neighbours), missing values scanned to the right where the
column has some and holds more than one value, then to the left; a split must gain more than
``1e-6``; after the tree is grown, splits whose children are leaves and whose gain is below
``gamma`` are pruned bottom-up. Sums are the int64 fixed-point sums of the quantised
gradient pairs (exact in any order), gains the CPU engine's float64 expressions; the engines
(:mod:`dgboost.backend.exact_engines`: CPU, and the GPU's two scan modes) choose the same
split for every node. The host keeps the tree's bookkeeping (a level's node totals, bounds
and masks), the engine the per-row node-id map. Trees come out as ordinary
:class:`~dgboost.tree.Tree` objects. docs/design.md §12.
"""

from __future__ import annotations

import numpy as np

from .backend.exact_engines import exact_engine
from .errors import DGBoostValueError
from .grower import FeatureSampler, GrowingTree, GrownTree
from .tree import Tree

__all__ = ["ExactGrower"]


class _Nodes:
    """The tree so far, host arrays by node id (children of a level after its nodes)."""

    def __init__(self, root_sums: np.ndarray):
        self.parent = [-1]
        self.depth = [0]
        self.sums = [np.asarray(root_sums, np.int64).reshape(2)]
        self.feature, self.value, self.default_left, self.gain, self.left = {}, {}, {}, {}, {}
        self.paths = [frozenset()]

    @property
    def n(self) -> int:
        return len(self.parent)

    def arrays(self):
        """(left, right, feature, sums) as arrays over every node (children ids as made)."""
        n = self.n
        left = np.full(n, -1, np.int64)
        feature = np.full(n, -1, np.int64)
        for node, child in self.left.items():
            left[node], feature[node] = child, self.feature[node]
        right = np.where(left >= 0, left + 1, -1)
        return left, right, feature, np.stack(self.sums)


class ExactGrower:
    """Grows one tree by exact greedy split search; the interface of
    :class:`dgboost.grower.TreeGrower` the training job uses.

    Parameters
    ----------
    backend : Backend
    comm : Communicator
        One rank only: exact split search is not distributed (as in XGBoost).
    params : TrainParams
    values : float32 (n, F) on the backend's device
        The training rows, NaN missing.
    sampler : FeatureSampler
    interactions : InteractionConstraints or None
    monotone : ndarray of int8 (F,) or None
    """

    def __init__(self, backend, comm, params, values, sampler: FeatureSampler, interactions=None, monotone=None):
        if comm.world_size > 1:
            raise DGBoostValueError(
                "tree_method='exact' runs on one process only (as XGBoost's exact): use tree_method='hist' "
                "for distributed training"
            )
        if params.max_depth <= 0:
            raise DGBoostValueError("tree_method='exact' needs max_depth >= 1")
        self.backend, self.comm, self.params = backend, comm, params
        self.sampler, self.interactions = sampler, interactions
        self.monotone = None if monotone is None else np.ascontiguousarray(monotone, np.int8)
        self.engine = exact_engine(backend, values)

    def grows_without_reads(self) -> bool:
        """False: every level's decisions come to the host."""
        return False

    def grow(self, gpair, scales, tree_index: int) -> GrowingTree:
        """Grow the tree level by level (the host reads each level's decisions)."""
        backend, engine = self.backend, self.engine
        scales = np.asarray(backend.to_host(scales), np.float64)
        root_sums = np.asarray(backend.to_host(backend.gpair_totals(gpair)), np.int64)
        engine.begin_tree(gpair)
        t = _Nodes(root_sums)
        tree_mask = self.sampler.tree_mask(tree_index)
        first, m = 0, 1
        for depth in range(self.params.max_depth):
            first, m = self._grow_level(t, first, m, depth, scales, tree_index, tree_mask)
            if m == 0:
                break
        grown = self._finish(t, scales)
        engine.end_tree()
        return GrowingTree(records=None, rows=grown.rows, finish=lambda rows: grown)

    def _grow_level(self, t: _Nodes, first: int, m: int, depth: int, scales, tree_index: int, tree_mask):
        """Split the level's nodes ``first .. first + m - 1``; the next level's (first, m)."""
        ids = np.arange(first, first + m)
        totals = np.stack([t.sums[i] for i in ids])
        bounds = self._bounds(t, scales)[first : first + m] if self.monotone is not None else None
        masks = self._masks(t, ids, depth, tree_index, tree_mask)
        best = self.engine.best_splits(first, totals, masks, bounds, self.monotone, scales, self.params)
        split = np.flatnonzero(best["feature"] >= 0)
        if not split.size:
            return t.n, 0
        child_first = t.n
        left_child = np.full(m, -1, np.int32)
        left_child[split] = child_first + 2 * np.arange(split.size)
        self.engine.apply_splits(first, best["feature"], best["value"], best["default_left"], left_child)
        for k in split.tolist():
            node, lc = first + k, int(left_child[k])
            left = best["left"][k]
            t.feature[node], t.value[node] = int(best["feature"][k]), np.float32(best["value"][k])
            t.default_left[node], t.gain[node], t.left[node] = bool(best["default_left"][k]), float(best["gain"][k]), lc
            path = t.paths[node] | {int(best["feature"][k])}
            for sums in (left, totals[k] - left):
                t.parent.append(node)
                t.depth.append(depth + 1)
                t.sums.append(np.asarray(sums, np.int64))
                t.paths.append(path)
        return child_first, 2 * split.size

    def _bounds(self, t: _Nodes, scales) -> np.ndarray:
        """float64 (n, 2): every node's weight bounds, replayed from the tree so far."""
        left, right, feature, sums = t.arrays()
        return self.backend.node_bounds(left, right, feature, sums, self.monotone, scales[0], scales[1], self.params)

    def _masks(self, t: _Nodes, ids, depth: int, tree_index: int, tree_mask):
        """bool (m, F) feature masks of the level's nodes, or None when every feature may be used."""
        if not self.sampler.samples and self.interactions is None:
            return None
        level = self.sampler.level_mask(tree_mask, tree_index, depth)
        masks = []
        for node in ids.tolist():
            mask = self.sampler.node_mask(level, tree_index, node) if self.sampler.rates[2] < 1.0 else level
            if self.interactions is not None:
                mask = mask & self.interactions.allowed(t.paths[node])
            masks.append(mask)
        return np.stack(masks)

    # -- the finished tree ------------------------------------------------------------------
    def _prune(self, t: _Nodes) -> np.ndarray:
        """bool (n,): the nodes kept once splits of two leaves that gain less than ``gamma``
        are undone, deepest first (XGBoost's ``prune`` updater after ``exact``)."""
        keep = np.ones(t.n, bool)
        gamma = self.params.gamma
        if gamma <= 0.0:
            return keep
        for node in sorted(t.left, reverse=True):  # children have larger ids than parents
            lc = t.left[node]
            if lc not in t.left and lc + 1 not in t.left and t.gain[node] < gamma:
                keep[lc] = keep[lc + 1] = False
                del t.left[node]
        return keep

    def _finish(self, t: _Nodes, scales) -> GrownTree:
        keep = self._prune(t)
        old_ids = np.flatnonzero(keep)
        new_id = np.full(t.n, -1, np.int64)
        new_id[old_ids] = np.arange(old_ids.size)
        # every node (pruned ones too) to the kept node its rows end in
        final = np.arange(t.n)
        for node in range(t.n):
            if not keep[node]:
                final[node] = final[t.parent[node]]
        left, right, feature, sums = t.arrays()
        p = self.params
        sg, sh = float(scales[0]), float(scales[1])
        bounds = None
        if self.monotone is not None:
            bounds = self.backend.node_bounds(left, right, feature, sums, self.monotone, sg, sh, p)
        weights = self.backend.leaf_weights(sums, sg, sh, p, bounds=bounds) * p.eta
        k = old_ids
        split_value = np.zeros(k.size, np.float32)
        gain = np.zeros(k.size, np.float32)
        default_left = np.zeros(k.size, np.uint8)
        for j, node in enumerate(k.tolist()):
            if node in t.left:
                split_value[j], gain[j], default_left[j] = t.value[node], t.gain[node], t.default_left[node]
        parent = np.asarray(t.parent)[k]
        tree = Tree(
            left=np.where(left[k] >= 0, new_id[np.maximum(left[k], 0)], -1),
            right=np.where(right[k] >= 0, new_id[np.maximum(right[k], 0)], -1),
            parent=np.where(parent >= 0, new_id[np.maximum(parent, 0)], -1),
            feature=feature[k],
            split_value=split_value,
            default_left=default_left,
            gain=gain,
            cover=sums[k, 1] / sh,
            value=weights[k].astype(np.float32),
        )
        leaves = np.flatnonzero(tree.left < 0)
        leaf_index = np.full(k.size, -1, np.int64)
        leaf_index[leaves] = np.arange(leaves.size)
        leaf_of_node = leaf_index[new_id[final]].astype(np.int32)
        rows, counts = self.engine.leaf_rows(leaf_of_node, leaves.size)
        ends = np.cumsum(counts)
        return GrownTree(tree=tree, rows=self.backend.asarray(rows), leaf_nodes=leaves, begins=ends - counts, ends=ends)
