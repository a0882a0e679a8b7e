"""Tree growth driven only through a Backend and a Communicator.

Both policies share one step, :meth:`TreeGrower._expand`: split a batch of nodes,
partition their rows, build the histogram of the smaller child of each split, allreduce
those histograms across ranks (int64, exact), derive each sibling by subtraction and
evaluate the children's best splits. ``depthwise`` expands every splittable node of a
level in one batch (the 2017 GPU paper's level-wise growth); ``lossguide`` expands the
single best node at a time.

A batch's bookkeeping stays on the backend's device as int64 node records
(:data:`dgboost._layout.NODE_RECORD_FIELDS`: split decision, global sums, row segment):
the partition reads its decisions there, the child records and the choice of the smaller
child are made there, and the host reads each batch's child records once, after their
splits are evaluated. That one read per level is all the host learns of a level.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np

from ._layout import BEGIN, DEFAULT_LEFT, END, FEATURE, GAIN, SPLIT_BIN, SUM_G, SUM_H
from .binned import BinnedMatrix
from .errors import DGBoostError
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

    def add(self, parent: int, record: np.ndarray, depth: int) -> int:
        """Append a node from its host node record (split fields are filled by :meth:`split`)."""
        self.parent.append(parent)
        self.left.append(-1)
        self.right.append(-1)
        self.feature.append(-1)
        self.split_bin.append(-1)
        self.default_left.append(False)
        self.gain.append(0.0)
        self.sums.append(np.array([record[SUM_G], record[SUM_H]], dtype=np.int64))
        self.depth.append(depth)
        self.begin.append(int(record[BEGIN]))
        self.end.append(int(record[END]))
        return len(self.parent) - 1

    def split(self, nid: int, record: np.ndarray, left: int, right: int) -> None:
        """Record the split of ``nid`` as evaluated in its host node record."""
        self.feature[nid] = int(record[FEATURE])
        self.split_bin[nid] = int(record[SPLIT_BIN])
        self.default_left[nid] = bool(record[DEFAULT_LEFT])
        self.gain[nid] = float(record[GAIN:GAIN + 1].view(np.float64)[0])
        self.left[nid], self.right[nid] = left, right


@dataclass
class _Batch:
    """Nodes evaluated together: their records and histograms on the device, records on the host.

    Attributes
    ----------
    records : backend int64 (m, NODE_FIELDS)
    hist : backend int64 (m, total_bins, 2), or None when the nodes were not evaluated
    host : ndarray int64 (m, NODE_FIELDS), the records as read after evaluation
    """

    records: object
    hist: object
    host: np.ndarray

    def can_split(self, row: int) -> bool:
        return self.hist is not None and self.host[row, FEATURE] >= 0

    def gain(self, row: int) -> float:
        return float(self.host[row, GAIN:GAIN + 1].view(np.float64)[0])


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

    def _node_masks(self, nodes: list[int], depth: int, tree_index: int, tree_mask):
        """bool (len(nodes), F) feature masks on the backend's device, or None when every
        feature may be used (no column sampling)."""
        if all(r >= 1.0 for r in self.sampler.rates):
            return None
        level = self.sampler.level_mask(tree_mask, tree_index, depth)
        masks = np.stack([self.sampler.node_mask(level, tree_index, nid) for nid in nodes])
        return self.backend.asarray(masks)

    def _evaluate(self, hist, records, node_ids: list[int], depth: int, tree_index: int, tree_mask) -> None:
        masks = self._node_masks(node_ids, depth, tree_index, tree_mask)
        self.backend.evaluate_splits(hist, records, self.cut_ptrs, masks, self.scale_g, self.scale_h,
                                     self.params)

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
        root = backend.root_node(comm.allreduce_sum(backend.gpair_totals(gpair)), n_local)
        hist = None
        if self._can_split_at(0):
            hist = comm.allreduce_sum(backend.build_histograms(
                self.binned.bins, self.cut_ptrs, gpair, self.rows, root))
            self._evaluate(hist, root, [0], 0, tree_index, tree_mask)
        batch = _Batch(root, hist, backend.to_host(root))
        t = _Nodes()
        t.add(-1, batch.host[0], 0)
        # nodes that may still be split: node id -> (batch, row of the batch)
        pending: dict[int, tuple[_Batch, int]] = {0: (batch, 0)}

        max_leaves = self.params.max_leaves
        n_leaves = 1
        if self.params.grow_policy == "lossguide":
            heap = [(-batch.gain(0), 0)] if batch.can_split(0) else []
            while heap and (max_leaves <= 0 or n_leaves < max_leaves):
                _, nid = heapq.heappop(heap)
                for child in self._expand([nid], pending, t, tree_index, tree_mask):
                    child_batch, row = pending[child]
                    if child_batch.can_split(row):
                        heapq.heappush(heap, (-child_batch.gain(row), child))
                n_leaves += 1
        else:
            level = [0]
            while level:
                splittable = [nid for nid in level if pending[nid][0].can_split(pending[nid][1])]
                if max_leaves > 0:
                    splittable = splittable[:max(0, max_leaves - n_leaves)]
                if not splittable:
                    break
                n_leaves += len(splittable)
                level = self._expand(splittable, pending, t, tree_index, tree_mask)
        return self._finish(t)

    def _parents(self, node_ids: list[int], pending: dict):
        """The batch the nodes were evaluated in, their records and their rows in it (device)."""
        batch = pending[node_ids[0]][0]
        rows = np.array([pending[n][1] for n in node_ids], np.int64)
        if any(pending[n][0] is not batch for n in node_ids):
            raise DGBoostError("internal error: nodes expanded together come from different batches")
        index = self.backend.asarray(rows)
        if rows.size == batch.host.shape[0] and np.array_equal(rows, np.arange(rows.size)):
            return batch, batch.records, index
        return batch, batch.records[index], index

    def _expand(self, node_ids: list[int], pending: dict, t: _Nodes, tree_index: int, tree_mask) -> list[int]:
        """Split ``node_ids`` (all with valid splits, all of one depth); return the new children.

        Children are evaluated when their depth allows another split. The children's records
        are laid out as [left children of node_ids..., right children of node_ids...].
        """
        backend, comm = self.backend, self.comm
        k = len(node_ids)
        depth = t.depth[node_ids[0]] + 1
        evaluate = self._can_split_at(depth)
        # ids the children will get (t.add below), known before any device work: the
        # feature masks are uploaded while the device is idle
        first = len(t.parent)
        child_ids = [first + 2 * j for j in range(k)] + [first + 2 * j + 1 for j in range(k)]
        batch, parents, parent_index = self._parents(node_ids, pending)
        masks = self._node_masks(child_ids, depth, tree_index, tree_mask) if evaluate else None

        counts = backend.partition(self.binned.bins_by_feature, self.rows, parents)
        # global row counts of the children pick the smaller one to build: the same choice on
        # every rank, and the least work (a hessian sum can favour the child with more rows)
        children, build_segments, build_left = backend.split_nodes(parents, counts, comm.allreduce_sum(counts))
        hist = None
        if evaluate:
            built = comm.allreduce_sum(backend.build_histograms(
                self.binned.bins, self.cut_ptrs, self.gpair, self.rows, build_segments))
            hist = backend.children_histograms(batch.hist, parent_index, built, build_left)
            backend.evaluate_splits(hist, children, self.cut_ptrs, masks, self.scale_g, self.scale_h,
                                    self.params)
        child_batch = _Batch(children, hist, backend.to_host(children))
        for j, nid in enumerate(node_ids):
            lid = t.add(nid, child_batch.host[j], depth)
            rid = t.add(nid, child_batch.host[k + j], depth)
            t.split(nid, batch.host[pending[nid][1]], lid, rid)
            pending[lid] = (child_batch, j)
            pending[rid] = (child_batch, k + j)
        for nid in node_ids:
            del pending[nid]
        return list(range(first, first + 2 * k))  # left, right of each parent in turn

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
