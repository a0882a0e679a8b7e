"""Tree growth driven only through a Backend and a Communicator.

Both policies share one step, :meth:`TreeGrower._expand`: split a batch of nodes,
partition their rows, build the histogram of the smaller child of each split, allreduce
those histograms across ranks (int64, exact), derive each sibling by subtraction and
evaluate the children's best splits. ``depthwise`` expands every splittable node of a
level in one batch (the 2017 GPU paper's level-wise growth); ``lossguide`` expands the
single best node at a time.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np

from .binned import BinnedMatrix
from .tree import Tree

__all__ = ["TreeGrower", "GrownTree", "FeatureSampler"]


class FeatureSampler:
    """Column sampling by tree, level and node, a pure function of (seed, tree, level, node)."""

    def __init__(self, n_features: int, seed: int, bytree: float, bylevel: float, bynode: float):
        self.n_features = n_features
        self.seed = int(seed) & 0x7FFFFFFF
        self.rates = (bytree, bylevel, bynode)

    def _subset(self, base: np.ndarray, rate: float, key: tuple) -> np.ndarray:
        if rate >= 1.0:
            return base
        chosen = np.flatnonzero(base)
        keep = max(1, int(rate * chosen.size))
        rng = np.random.default_rng([self.seed, *key])
        picked = rng.choice(chosen, size=keep, replace=False)
        out = np.zeros(self.n_features, dtype=bool)
        out[picked] = True
        return out

    def tree_mask(self, tree_index: int) -> np.ndarray:
        return self._subset(np.ones(self.n_features, dtype=bool), self.rates[0], (tree_index, 0))

    def level_mask(self, tree_mask: np.ndarray, tree_index: int, depth: int) -> np.ndarray:
        return self._subset(tree_mask, self.rates[1], (tree_index, 1, depth))

    def node_mask(self, level_mask: np.ndarray, tree_index: int, node: int) -> np.ndarray:
        return self._subset(level_mask, self.rates[2], (tree_index, 2, node))


@dataclass
class GrownTree:
    """A finished tree and where its leaves' rows are.

    Attributes
    ----------
    tree : Tree
    rows : ndarray of int32 (n_local,)
        Local row indices ordered so that leaf ``i``'s rows are ``rows[begins[i]:ends[i]]``.
    leaf_nodes, begins, ends : ndarray of int64 (n_leaves,)
    """

    tree: Tree
    rows: np.ndarray
    leaf_nodes: np.ndarray
    begins: np.ndarray
    ends: np.ndarray


@dataclass
class _Nodes:
    parent: list = field(default_factory=list)
    left: list = field(default_factory=list)
    right: list = field(default_factory=list)
    feature: list = field(default_factory=list)
    split_bin: list = field(default_factory=list)
    default_left: list = field(default_factory=list)
    gain: list = field(default_factory=list)
    sums: list = field(default_factory=list)      # int64 (2,) global (G, H)
    depth: list = field(default_factory=list)
    begin: list = field(default_factory=list)
    end: list = field(default_factory=list)

    def add(self, parent: int, sums: np.ndarray, depth: int, begin: int, end: int) -> int:
        self.parent.append(parent)
        self.left.append(-1)
        self.right.append(-1)
        self.feature.append(-1)
        self.split_bin.append(-1)
        self.default_left.append(False)
        self.gain.append(0.0)
        self.sums.append(np.asarray(sums, dtype=np.int64))
        self.depth.append(depth)
        self.begin.append(begin)
        self.end.append(end)
        return len(self.parent) - 1


class TreeGrower:
    """Grows one tree from quantised gradient pairs.

    Parameters
    ----------
    backend : Backend
    comm : Communicator
    params : TrainParams
    binned : BinnedMatrix
        This rank's rows.
    sampler : FeatureSampler
    """

    def __init__(self, backend, comm, params, binned: BinnedMatrix, sampler: FeatureSampler):
        self.backend = backend
        self.comm = comm
        self.params = params
        self.binned = binned
        self.sampler = sampler
        self.cut_ptrs = binned.cuts.ptrs
        self.cut_values = binned.cuts.values

    # -- helpers --------------------------------------------------------------------------
    def _can_split_at(self, depth: int) -> bool:
        return self.params.max_depth <= 0 or depth < self.params.max_depth

    def _node_masks(self, nodes: list[int], depths: list[int], tree_index: int, tree_mask) -> np.ndarray:
        masks = np.empty((len(nodes), self.binned.n_features), dtype=bool)
        level_cache: dict[int, np.ndarray] = {}
        for k, (nid, depth) in enumerate(zip(nodes, depths)):
            if depth not in level_cache:
                level_cache[depth] = self.sampler.level_mask(tree_mask, tree_index, depth)
            masks[k] = self.sampler.node_mask(level_cache[depth], tree_index, nid)
        return masks

    def _evaluate(self, node_ids, hists, t: _Nodes, tree_index, tree_mask):
        totals = np.stack([t.sums[i] for i in node_ids])
        masks = self._node_masks(node_ids, [t.depth[i] for i in node_ids], tree_index, tree_mask)
        return self.backend.evaluate_splits(hists, totals, self.cut_ptrs, masks,
                                            self.scale_g, self.scale_h, self.params)

    # -- growth ---------------------------------------------------------------------------
    def grow(self, gpair, scale_g: float, scale_h: float, tree_index: int) -> GrownTree:
        """Grow one tree.

        Parameters
        ----------
        gpair : int32 (n_local, 2)
            Quantised (gradient, hessian) of this rank's rows; (0, 0) for rows left out.
        scale_g, scale_h : float
            The fixed-point scales (identical on every rank).
        tree_index : int
            Index of the tree in the ensemble (drives column sampling).
        """
        self.scale_g, self.scale_h = scale_g, scale_h
        self.gpair = gpair
        n_local = self.binned.n_rows
        backend, comm = self.backend, self.comm
        self.rows = backend.xp.arange(n_local, dtype=np.int32)
        tree_mask = self.sampler.tree_mask(tree_index)
        t = _Nodes()
        root_sum = comm.allreduce_sum(backend.gpair_totals(gpair))
        t.add(-1, root_sum, 0, 0, n_local)
        # candidates: node id -> (histogram, split result index) for nodes that may be split
        pending: dict[int, tuple] = {}
        if self._can_split_at(0):
            hist = comm.allreduce_sum(backend.build_histograms(
                self.binned.bins, self.cut_ptrs, gpair, self.rows, [0], [n_local]))
            res = self._evaluate([0], hist, t, tree_index, tree_mask)
            pending[0] = ((hist, 0), res, 0)

        max_leaves = self.params.max_leaves
        n_leaves = 1
        if self.params.grow_policy == "lossguide":
            heap = [(-pending[0][1].gain[0], 0)] if 0 in pending and pending[0][1].feature[0] >= 0 else []
            while heap and (max_leaves <= 0 or n_leaves < max_leaves):
                _, nid = heapq.heappop(heap)
                for child in self._expand([nid], pending, t, tree_index, tree_mask):
                    if child not in pending:  # at max_depth: a leaf, never evaluated
                        continue
                    _, res, k = pending[child]
                    if res.feature[k] >= 0:
                        heapq.heappush(heap, (-res.gain[k], child))
                n_leaves += 1
        else:
            level = [0]
            while level:
                splittable = [nid for nid in level
                              if nid in pending and pending[nid][1].feature[pending[nid][2]] >= 0]
                if max_leaves > 0:
                    splittable = splittable[:max(0, max_leaves - n_leaves)]
                if not splittable:
                    break
                n_leaves += len(splittable)
                level = self._expand(splittable, pending, t, tree_index, tree_mask)
        return self._finish(t)

    def _expand(self, node_ids: list[int], pending: dict, t: _Nodes, tree_index: int, tree_mask) -> list[int]:
        """Split ``node_ids`` (all with valid splits); return the new children, evaluated where allowed."""
        backend, comm = self.backend, self.comm
        feats = np.array([pending[n][1].feature[pending[n][2]] for n in node_ids], np.int32)
        bins_ = np.array([pending[n][1].bin[pending[n][2]] for n in node_ids], np.int32)
        dls = np.array([pending[n][1].default_left[pending[n][2]] for n in node_ids], np.bool_)
        begins = np.array([t.begin[n] for n in node_ids], np.int64)
        ends = np.array([t.end[n] for n in node_ids], np.int64)
        left_counts = backend.partition(self.binned.bins_by_feature, self.rows, begins, ends, feats, bins_, dls)
        # global row counts of the children pick the smaller one to build: the same choice on
        # every rank, and the least work (a hessian sum can favour the child with more rows)
        global_left = comm.allreduce_sum(np.asarray(left_counts, np.int64))
        global_size = comm.allreduce_sum(ends - begins)
        children: list[int] = []
        build_nodes: list[int] = []
        other_nodes: list[int] = []
        parents_of_build: list[int] = []
        for k, nid in enumerate(node_ids):
            _, res, j = pending[nid]
            t.feature[nid] = int(feats[k])
            t.split_bin[nid] = int(bins_[k])
            t.default_left[nid] = bool(dls[k])
            t.gain[nid] = float(res.gain[j])
            left_sum = res.left_sum[j].copy()
            right_sum = t.sums[nid] - left_sum
            depth = t.depth[nid] + 1
            mid = int(begins[k] + left_counts[k])
            lid = t.add(nid, left_sum, depth, int(begins[k]), mid)
            rid = t.add(nid, right_sum, depth, mid, int(ends[k]))
            t.left[nid], t.right[nid] = lid, rid
            children += [lid, rid]
            if self._can_split_at(depth):
                n_left = int(global_left[k])
                small, large = (lid, rid) if 2 * n_left <= int(global_size[k]) else (rid, lid)
                build_nodes.append(small)
                other_nodes.append(large)
                parents_of_build.append(nid)
        if build_nodes:
            built = comm.allreduce_sum(backend.build_histograms(
                self.binned.bins, self.cut_ptrs, self.gpair, self.rows,
                [t.begin[n] for n in build_nodes], [t.end[n] for n in build_nodes]))
            siblings = self._stack_parents([pending[p][0] for p in parents_of_build])
            siblings -= built  # sibling = parent - built child
            hists = backend.xp.concatenate([built, siblings])
            eval_ids = build_nodes + other_nodes
            res = self._evaluate(eval_ids, hists, t, tree_index, tree_mask)
            for k, nid in enumerate(eval_ids):
                pending[nid] = ((hists, k), res, k)
        for nid in node_ids:
            del pending[nid]
        return children

    def _stack_parents(self, parents: list):
        """The parents' histograms as one new array, gathered by row index where they are rows of
        one earlier batch (always, with depthwise growth): one gather instead of one copy per node."""
        xp = self.backend.xp
        first = parents[0]
        if all(p[0] is first[0] for p in parents):
            return first[0][xp.asarray(np.array([p[1] for p in parents], np.int64))]
        return xp.stack([p[0][p[1]] for p in parents])

    def _finish(self, t: _Nodes) -> GrownTree:
        p = self.params
        n = len(t.parent)
        sums = np.stack(t.sums)
        weights = self.backend.leaf_weights(sums, self.scale_g, self.scale_h, p) * p.eta
        feature = np.array(t.feature, np.int32)
        split_bin = np.array(t.split_bin, np.int32)
        split_value = np.zeros(n, np.float32)
        inner = feature >= 0
        split_value[inner] = self.cut_values[self.cut_ptrs[feature[inner]] + split_bin[inner]]
        tree = Tree(left=t.left, right=t.right, parent=t.parent, feature=feature,
                    split_value=split_value, default_left=np.array(t.default_left, np.uint8),
                    gain=np.array(t.gain, np.float32), cover=sums[:, 1] / self.scale_h,
                    value=weights.astype(np.float32), split_bin=split_bin)
        leaves = np.flatnonzero(~inner)
        return GrownTree(tree=tree, rows=self.rows, leaf_nodes=leaves,
                         begins=np.array(t.begin, np.int64)[leaves], ends=np.array(t.end, np.int64)[leaves])
