"""Tree growth driven only through a Backend and a Communicator.

Both policies share one step, :meth:`TreeGrower._split`: split a batch of nodes,
partition their rows, build the histogram of the smaller child of each split, allreduce
those histograms across ranks (int64, exact), derive each sibling by subtraction and
evaluate the children's best splits. ``depthwise`` expands every splittable node of a
level in one batch (the 2017 GPU paper's level-wise growth); ``lossguide`` expands the
single best node at a time, computing the next best nodes' splits (and their children's)
ahead in the same batch.

A batch's bookkeeping stays on the backend's device as int64 node records
(:data:`dgboost._layout.NODE_RECORD_FIELDS`: split decision, global sums, row segment):
the partition reads its decisions there, the child records and the choice of the smaller
child are made there. Where the host must choose among the nodes (``lossguide``,
``max_leaves``, column sampling by node, which is seeded by node id) it reads each batch's
records once, after their splits are evaluated. Otherwise depthwise trees are grown in
*whole levels*: level d has 2**d slots, a leaf keeps its rows and its slots below hold no
node (``NO_NODE``), so no level needs the host, and one read at the end of the tree brings
every level back; node ids are then given in the order the per-level growth gives them,
so both ways build the same tree. That read is queued in stream order (``Backend.read_later``)
and made by :meth:`GrowingTree.finish`, so the caller can queue more work first (the training
loop queues the margins' update and the next round's first tree, whole, before it reads).

With monotone constraints every batch also carries its nodes' weight bounds on the device
(float64 (m, 2), ``_Batch.bounds``): the backend derives the children's bounds from their
parents' split decisions (``Backend.child_bounds``) before evaluating the children, so no
growth policy reads anything more; at the end of a tree the host replays the same bounds
from the tree's arrays (``Backend.node_bounds``) to clip the leaf values.

With categorical features (docs/design.md §11) every batch carries its nodes' category sets
the same way (uint32 (m, words), ``_Batch.cat_bits``): written by the split evaluation, read
by the partition, gathered and concatenated with the records and read with them.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ._layout import BEGIN, DEFAULT_LEFT, END, FEATURE, GAIN, NODE_FIELDS, SPLIT_BIN, SUM_G, SUM_H
from .binned import BinnedMatrix
from .tree import Tree, categorical_tree_fields

__all__ = ["TreeGrower", "GrownTree", "GrowingTree", "FeatureSampler"]

# Whole levels hold the histograms of 2**depth slots (built, siblings, parents): used while
# that stays within these bounds, else the levels are read and compacted.
_WHOLE_LEVEL_MAX_DEPTH = 10
_WHOLE_LEVEL_HIST_BYTES = 4 << 30
# A level's built histograms (one per parent, 16 B a bin) are made this many bytes at a time,
# each chunk's siblings written straight into the level's histograms; the last level that is
# evaluated keeps none (the level under it is all leaves), so its children's are made and
# evaluated a chunk at a time too. On Bosch-like data (968 features) at depth 8 the last
# level's took 726 MB at once, and the one above it 484 MB.
_BUILD_CHUNK_BYTES = 64 << 20


class FeatureSampler:
    """Column sampling by tree, level and node, a pure function of (seed, tree, level, node)."""

    def __init__(self, n_features: int, seed: int, bytree: float, bylevel: float, bynode: float):
        self.n_features = n_features
        self.seed = int(seed) & 0x7FFFFFFF
        self.rates = (bytree, bylevel, bynode)
        # whether any rate leaves features out (else every mask is all features)
        self.samples = not all(r >= 1.0 for r in self.rates)

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


class GrowingTree:
    """A tree whose growth is queued on the backend's device (:meth:`TreeGrower.grow`).

    Attributes
    ----------
    records : backend int64 (m, NODE_FIELDS), or None
        A tree grown in whole levels: every level's records, whose leaves (feature -1) let
        ``Backend.add_record_leaf_values`` update the margins before the host reads the
        tree. None where growth read its batches on the way.
    rows : backend int32 (n_local,)
        The row order: each record's (each leaf's) rows are ``rows[begin:end]`` (not when
        the grower's ``leaf_rows`` is False).
    walk : dict
        ``add_record_leaf_values``' keyword arguments that let a backend walk the records
        from each row's entries (the bins the tree was grown on and, with categorical
        features, the layout and the records' category sets); empty without records.
    """

    def __init__(self, records, rows, finish, walk=None):
        self.records = records
        self.rows = rows
        self.walk = walk or {}
        self._finish = finish
        self._grown = None

    def finish(self) -> GrownTree:
        """The tree, read and built on the host (waits for the device once)."""
        if self._grown is None:
            self._grown = self._finish(self.rows)
            self._finish = None
        return self._grown


class _Nodes:
    """The tree grown so far: arrays indexed by node id, appended a batch at a time.

    Children of a batch of k parents get ids ``first + 2j`` (left) and ``first + 2j + 1``
    (right) in the parents' order, as if each split were recorded in turn.
    """

    # dtype and the value a node has until it is split (set when the arrays are made, so
    # adding a node writes only what its record says)
    _FIELDS = {
        "parent": (np.int64, -1),
        "left": (np.int64, -1),
        "right": (np.int64, -1),
        "feature": (np.int32, -1),
        "split_bin": (np.int32, -1),
        "default_left": (np.bool_, False),
        "gain": (np.float64, 0.0),
        "depth": (np.int64, 0),
        "begin": (np.int64, 0),
        "end": (np.int64, 0),
    }

    def __init__(self, capacity: int = 64, words: int = 0):
        self.n = 0
        for name, (dtype, unsplit) in self._FIELDS.items():
            setattr(self, name, np.full(capacity, unsplit, dtype))
        self.sums = np.zeros((capacity, 2), np.int64)  # global quantised (G, H)
        # each split node's right-going categories (categorical features only)
        self.cat_bits = np.zeros((capacity, words), np.uint32) if words else None

    def _reserve(self, extra: int) -> None:
        capacity = self.parent.shape[0]
        if self.n + extra <= capacity:
            return
        capacity = max(self.n + extra, 2 * capacity)
        extra_fields = [("sums", (np.int64, 0))] + ([("cat_bits", (np.uint32, 0))] if self.cat_bits is not None else [])
        for name, (dtype, unsplit) in [*self._FIELDS.items(), *extra_fields]:
            old = getattr(self, name)
            new = np.full((capacity,) + old.shape[1:], unsplit, dtype)
            new[: self.n] = old[: self.n]
            setattr(self, name, new)

    def add(self, parents, records: np.ndarray, depth) -> np.ndarray:
        """Append nodes from their host records (split fields are set by :meth:`split`) at
        ``depth`` (one int, or int64 (m,)); their ids."""
        m = records.shape[0]
        self._reserve(m)
        new = slice(self.n, self.n + m)
        self.parent[new] = parents
        self.depth[new] = depth
        self.sums[new] = records[:, SUM_G : SUM_H + 1]
        self.begin[new] = records[:, BEGIN]
        self.end[new] = records[:, END]
        self.n += m
        return np.arange(new.start, new.stop)

    def split(self, ids, records: np.ndarray, left, right, bits=None) -> None:
        """Record the splits of nodes ``ids`` (an index array, or a slice) as evaluated in
        their host records (and host category sets ``bits``, uint32 (k, words), with
        categorical features)."""
        if bits is not None:
            self.cat_bits[ids] = bits
        self.feature[ids] = records[:, FEATURE]
        self.split_bin[ids] = records[:, SPLIT_BIN]
        self.default_left[ids] = records[:, DEFAULT_LEFT] != 0
        self.gain[ids] = np.ascontiguousarray(records[:, GAIN]).view(np.float64)
        self.left[ids], self.right[ids] = left, right


@dataclass
class _Batch:
    """Nodes evaluated together: their records and histograms on the device, records on the host.

    Attributes
    ----------
    records : backend int64 (m, NODE_FIELDS)
    hist : backend int64 (m, total_bins, 2), or None when the nodes were not evaluated or
        their histograms are no longer needed (every node already split ahead)
    host : ndarray int64 (m, NODE_FIELDS), the records as read after evaluation
    ids : ndarray int64 (m,), the node id of each row where known when it was split (-1 for
        lossguide's nodes split ahead: lossguide tracks its nodes by (batch, row))
    """

    records: object
    hist: object
    host: np.ndarray
    ids: np.ndarray
    paths: list | None = None  # per row, the features its ancestors split on (interaction constraints)
    bounds: object = None  # backend float64 (m, 2) weight bounds per row (monotone constraints)
    # lossguide: the children of every row, split ahead in the same device batch (rows 2r and
    # 2r + 1 for row r), or None
    ahead: "_Batch | None" = None
    evaluated: bool = True  # whether the nodes' splits were evaluated (else they are leaves)
    cat_bits: object = None  # backend uint32 (m, words) category sets per row (categorical features)
    cat_host: np.ndarray | None = None  # the same, as read with ``host``

    @cached_property
    def sizes(self) -> list:
        """This rank's rows of each row's node (END - BEGIN of its host record)."""
        return (self.host[:, END] - self.host[:, BEGIN]).tolist()

    @cached_property
    def leaf_keys(self) -> list:
        """Per row, lossguide's sort key of its node, ``-gain``, or None when it has no valid
        split (or was not evaluated): one list made at once, read at every step."""
        if not self.evaluated:
            return [None] * self.host.shape[0]
        gains = np.ascontiguousarray(self.host[:, GAIN]).view(np.float64)
        return [-g if f >= 0 else None for g, f in zip(gains.tolist(), self.host[:, FEATURE].tolist())]

    def splittable(self) -> np.ndarray:
        """Rows with a valid split, in node-id order."""
        if not self.evaluated:
            return np.zeros(0, np.int64)
        rows = np.flatnonzero(self.host[:, FEATURE] >= 0)
        return rows[np.argsort(self.ids[rows], kind="stable")]


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
    interactions : InteractionConstraints or None
        Interaction constraints (``dgboost.constraints``): each node's allowed features join
        its column mask, so they need per-node masks (no whole-level growth).
    monotone : ndarray of int8 (F,) or None
        The sign of each feature's monotone constraint (1, -1, 0), None when no feature is
        constrained (``dgboost.constraints.resolve_monotone_constraints``).
    categorical : CategoricalLayout or None
        The categorical features (``dgboost._categorical``), None when there are none.

    Attributes
    ----------
    leaf_rows : bool
        Whether a tree grown in whole levels leaves each leaf's rows at ``rows[begin:end]``
        (True, the default). A caller whose backend walks every row to its leaf from the
        records (``Backend.walks_leaves``) and reads no leaf's rows sets it False: the last
        level is then not partitioned (about 7% of a depth-8 round on 115M rows), each level
        is partitioned into a second array that becomes the rows (no copy back), and no
        leaf's row segment is meaningful. The trees are the same either way.
    """

    def __init__(
        self,
        backend,
        comm,
        params,
        binned: BinnedMatrix,
        sampler: FeatureSampler,
        interactions=None,
        monotone=None,
        categorical=None,
    ):
        self.interactions = interactions
        self.categorical = categorical
        self._words = 0 if categorical is None else int(categorical.words)
        self.monotone = None if monotone is None else np.ascontiguousarray(monotone, np.int8)
        # uploaded once per training job: every evaluation reads it
        self._device_monotone = None if monotone is None else backend.asarray(self.monotone)
        self.backend = backend
        self.comm = comm
        self.params = params
        self.binned = binned
        self.sampler = sampler
        self.cut_ptrs = binned.cuts.ptrs
        self.cut_values = binned.cuts.values
        self.leaf_rows = True
        self._spare_rows = None  # the tree's second row array (:meth:`_row_moves`)
        self._minus_ones = np.zeros(0, np.int64)  # :meth:`_unknown_ids`

    # -- helpers --------------------------------------------------------------------------
    def _can_split_at(self, depth: int) -> bool:
        return self.params.max_depth <= 0 or depth < self.params.max_depth

    def grows_without_reads(self) -> bool:
        """Whether every tree is queued whole on the device (:meth:`grow` returns before the
        host reads any of it, with its records)."""
        return self._whole_levels()

    def _whole_levels(self) -> bool:
        """Whether depthwise trees can grow without reading any level (see the module docstring)."""
        p = self.params
        if p.grow_policy == "lossguide" or p.max_leaves > 0 or self.sampler.rates[2] < 1.0:
            return False
        if self.interactions is not None:
            return False
        if not 1 <= p.max_depth <= _WHOLE_LEVEL_MAX_DEPTH:
            return False
        return 3 * 16 * (1 << p.max_depth) * self._total_bins <= _WHOLE_LEVEL_HIST_BYTES

    def _node_capacity(self) -> int:
        """Nodes the tree can have (at most 2**13 reserved ahead): growing the arrays as a
        depth-8 tree fills them cost more host time than the rest of its bookkeeping."""
        p = self.params
        bound = 2 * p.max_leaves if p.max_leaves > 0 else 1 << 13
        if p.max_depth > 0:
            bound = min(bound, (2 << min(p.max_depth, 12)) - 1)
        return max(bound, 64)

    def _level_masks(self, tree_index: int, tree_mask):
        """bool (1, F) device masks of each depth (every node of a level shares one), or Nones."""
        if self.sampler.rates[0] >= 1.0 and self.sampler.rates[1] >= 1.0:
            return [None] * (self.params.max_depth + 1)
        masks = np.stack([self.sampler.level_mask(tree_mask, tree_index, d) for d in range(self.params.max_depth + 1)])
        device = self.backend.asarray(masks)  # one upload per tree
        return [device[d : d + 1] for d in range(masks.shape[0])]

    @cached_property
    def _masked(self) -> bool:
        """Whether nodes have feature masks (column sampling or interaction constraints):
        else :meth:`_node_masks` is None and their depths are not needed."""
        return self.interactions is not None or self.sampler.samples

    def _node_masks(self, nodes, depths, tree_index: int, tree_mask, paths=None):
        """bool (len(depths), F) feature masks on the backend's device, or None when every
        feature may be used (no column sampling, no interaction constraints). ``nodes`` are
        the node ids, needed only for sampling by node (else None); ``paths`` the features
        above each node (with interaction constraints)."""
        if not self._masked:
            return None
        sampled = self.sampler.samples
        by_node = self.sampler.rates[2] < 1.0
        levels: dict[int, np.ndarray] = {}
        masks = []
        for k, depth in enumerate(np.asarray(depths).tolist()):
            if not sampled:
                mask = np.ones(self.sampler.n_features, dtype=bool)
            else:
                if depth not in levels:
                    levels[depth] = self.sampler.level_mask(tree_mask, tree_index, depth)
                mask = self.sampler.node_mask(levels[depth], tree_index, int(nodes[k])) if by_node else levels[depth]
            if self.interactions is not None:
                mask = mask & self.interactions.allowed(paths[k] if paths is not None else frozenset())
            masks.append(mask)
        return self.backend.asarray(np.stack(masks))

    def _monotone_args(self, bounds) -> dict:
        """evaluate_splits' keyword arguments for nodes with ``bounds``: none without
        constraints, so unconstrained calls are exactly the plain ones."""
        if self.monotone is None:
            return {}
        return {"bounds": bounds, "monotone": self._device_monotone}

    def _cat_args(self, cat_bits) -> dict:
        """evaluate_splits' and partition's keyword arguments for nodes with category sets
        ``cat_bits``: none without categorical features (the plain calls)."""
        if self.categorical is None:
            return {}
        return {"categorical": self.categorical, "cat_bits": cat_bits}

    def _new_cat_bits(self, m: int):
        """uint32 (m, words) on the device for m nodes' category sets; None without categorical features."""
        if self.categorical is None:
            return None
        return self.backend.empty((m, self._words), np.uint32)

    def _root_bounds(self):
        """The root's bounds, [-inf, inf], on the device (None without constraints)."""
        if self.monotone is None:
            return None
        return self.backend.asarray(np.array([[-np.inf, np.inf]]))

    def _child_bounds(self, parents, bounds):
        """Bounds of the children of the evaluated ``parents`` (None without constraints)."""
        if self.monotone is None:
            return None
        return self.backend.child_bounds(parents, bounds, self._device_monotone, self.scales, self.params)

    # -- growth ---------------------------------------------------------------------------
    def grow(self, gpair, scales, tree_index: int) -> "GrowingTree":
        """Grow one tree: queued on the device where its growth needs no host decision.

        Parameters
        ----------
        gpair : int32 (n_local, 2)
            Quantised (gradient, hessian) of this rank's rows; (0, 0) for rows left out.
        scales : float64 (2,) on the backend's device
            The fixed-point scales (identical on every rank).
        tree_index : int
            Index of the tree in the ensemble (drives column sampling).

        Returns
        -------
        GrowingTree
            Its ``finish()`` reads the tree and gives the :class:`GrownTree`. Where
            :meth:`grows_without_reads`, nothing was read yet: the training loop queues the next
            round's first tree before it reads the last one.
        """
        n_local = self.binned.n_rows
        backend, comm = self.backend, self.comm
        self.gpair, self.scales = gpair, scales
        self.rows = backend.root_rows(n_local)
        tree_mask = self.sampler.tree_mask(tree_index)
        root = backend.root_node(comm.allreduce_sum(backend.gpair_totals(gpair)), n_local)
        bounds = self._root_bounds()
        cat_bits = self._new_cat_bits(1)
        if cat_bits is not None:
            cat_bits[...] = 0  # a root that may not split partitions nothing, but is read
        hist = None
        if self._can_split_at(0):
            hist = comm.allreduce_sum(
                backend.build_histograms(self.binned.bins, self.cut_ptrs, gpair, self.rows, root[:, BEGIN : END + 1])
            )
            backend.evaluate_splits(
                hist,
                root,
                self.cut_ptrs,
                self._node_masks([0], [0], tree_index, tree_mask),
                scales,
                self.params,
                **self._monotone_args(bounds),
                **self._cat_args(cat_bits),
            )
        t = _Nodes(capacity=self._node_capacity(), words=self._words)
        if self._whole_levels():
            records, bits = self._grow_whole_levels(root, hist, bounds, cat_bits, tree_index, tree_mask)
            read = backend.read_later([records, scales] + ([bits] if bits is not None else []))
            walk = {"bins": self.binned.bins_by_feature, **self._cat_args(bits)}
            return self._queued(records, lambda rows: self._finish(*self._whole_level_nodes(read, t), rows), walk)
        host = backend.to_host(root)
        batch = _Batch(
            root,
            hist,
            host,
            t.add(np.array([-1]), host, 0),
            [frozenset()],
            bounds,
            evaluated=hist is not None,
            cat_bits=cat_bits,
            cat_host=None if cat_bits is None else backend.to_host(cat_bits),
        )

        if self.params.grow_policy == "lossguide":
            self._grow_best_first(batch, t, tree_index, tree_mask)
        else:
            self._grow_level_by_level(batch, t, tree_index, tree_mask)
        read = backend.read_later([scales])
        return self._queued(None, lambda rows: self._finish(t, read.result()[0], rows))

    def _queued(self, records, finish, walk=None) -> "GrowingTree":
        """The tree just grown, its pairs and row order no longer held by the grower (device
        memory: a tree's 12 bytes a row are freed as soon as its holders let go)."""
        rows, self.rows, self.gpair, self.scales = self.rows, None, None, None
        self._spare_rows = None
        return GrowingTree(records=records, rows=rows, finish=finish, walk=walk)

    def _grow_level_by_level(self, batch: _Batch, t: _Nodes, tree_index: int, tree_mask) -> None:
        """Depthwise growth reading each level: split every splittable node of a level (in id
        order, at most as many as ``max_leaves`` still allows) in one batch."""
        max_leaves = self.params.max_leaves
        n_leaves = 1
        while True:
            rows = batch.splittable()
            if max_leaves > 0:
                rows = rows[: max(0, max_leaves - n_leaves)]
            if not rows.size:
                return
            n_leaves += rows.size
            parent_ids = batch.ids[rows]
            depth = int(t.depth[parent_ids[0]]) + 1
            child_ids = t.n + np.arange(2 * rows.size)
            children = self._split(
                [(batch, int(r)) for r in rows], [depth] * rows.size, child_ids, tree_index, tree_mask
            )
            t.add(np.repeat(parent_ids, 2), children.host, depth)
            bits = None if batch.cat_host is None else batch.cat_host[rows]
            t.split(parent_ids, batch.host[rows], child_ids[0::2], child_ids[1::2], bits)
            batch = children

    def _grow_best_first(self, root: _Batch, t: _Nodes, tree_index: int, tree_mask) -> None:
        """Lossguide: split the leaf of largest gain (ties: lowest id) until ``max_leaves``.

        The next leaf depends on the gains of the last one's children, so a split may wait
        for a read. Each read brings back more than one split, computed ahead in the same
        device batch: the children of the best leaves waiting (up to ``nodes``
        nodes), and below them whole levels (every child split again, levels of 2**m slots
        as in depthwise growth, while their histograms stay within the budget). A node
        split ahead only reorders the rows of its own segment, so if its turn never comes
        (the leaf budget runs out) the tree is unchanged, and when it comes its children
        are already there. Only the best ``max_leaves - leaves`` waiting nodes can still be
        split (each later pop takes the best), so no other node is split ahead. How far
        ahead is the backend's :class:`~dgboost.backend.base.LookaheadBudget`. Ids are given
        at each node's turn: the tree is the one strict best-first growth builds, with a
        fraction of its reads.
        """
        max_leaves = self.params.max_leaves
        ahead = self.backend.lookahead
        per_slot = 16 * max(1, self._total_bins)  # one node's int64 (G, H) histogram
        # children's column masks seeded by node id need the ids first: no splits ahead then;
        # nor levels below the children when their masks need their ancestors' features
        # (interaction constraints)
        lookahead = 1
        if self.sampler.rates[2] >= 1.0:
            lookahead = max(1, min(ahead.nodes, ahead.hist_bytes // (2 * per_slot)))
        levels_allowed = lookahead > 1 and self.interactions is None
        where = {0: (root, 0)}  # splittable node id -> (batch, row)
        ready: dict[int, tuple[_Batch, int]] = {}  # node id -> (batch of its children, j): rows 2j, 2j + 1
        # the leaves that may split, (-gain, id) ascending: the next is the first, and a
        # batch's group a slice (a heap needed a sort of itself for every batch)
        waiting = [(root.leaf_keys[0], 0)] if root.leaf_keys[0] is not None else []
        depths = [0]  # by node id (the host's copy of t.depth, read at every step)
        # the nodes go into ``t`` once, at the end (NumPy writes of two nodes at every split
        # cost more than the rest of a step): by node id its record's (host array, row) and
        # parent; by split node id its left child (the right is the next id)
        hosts, host_of, cat_hosts = [root.host], {id(root.host): 0}, [root.cat_host]
        record_host, record_row, parents, lefts = [0], [0], [-1], {}
        n_nodes = t.n
        n_leaves = 1
        max_depth = self.params.max_depth
        insort = bisect.insort
        while waiting and (max_leaves <= 0 or n_leaves < max_leaves):
            _, nid = waiting.pop(0)
            if nid not in ready:
                remaining = max_leaves - n_leaves if max_leaves > 0 else None  # splits still allowed
                budget = lookahead if remaining is None else min(lookahead, remaining)
                group = [nid] + [n for _, n in waiting[: budget - 1] if n not in ready]
                levels = self._levels_ahead(len(group), remaining, per_slot) if levels_allowed else 0
                self._split_group(group, where, ready, depths, n_nodes, levels, tree_index, tree_mask)
            children, j = ready.pop(nid)
            del where[nid]
            depth = depths[nid] + 1
            left = n_nodes
            n_nodes += 2
            h = host_of.get(id(children.host))
            if h is None:
                h = host_of[id(children.host)] = len(hosts)
                hosts.append(children.host)
                cat_hosts.append(children.cat_host)
            r = 2 * j
            record_host += (h, h)
            record_row += (r, r + 1)
            parents += (nid, nid)
            lefts[nid] = left
            depths += (depth, depth)
            if max_depth <= 0 or depth < max_depth:  # _can_split_at, inlined: a call a step cost more
                keys, ahead = children.leaf_keys, children.ahead
                for node in (left, left + 1):
                    key = keys[r]
                    if key is not None:
                        where[node] = (children, r)
                        insort(waiting, (key, node))
                        if ahead is not None:  # its children are already there
                            ready[node] = (ahead, r)
                    r += 1
            n_leaves += 1
        self._write_nodes(t, hosts, (record_host, record_row), parents, depths, lefts, cat_hosts)

    def _levels_ahead(self, n_parents: int, remaining: int | None, per_slot: int) -> int:
        """Whole levels to split below the children of ``n_parents`` nodes (lossguide's
        lookahead), within the backend's budget and the splits still allowed (``remaining``)."""
        ahead = self.backend.lookahead
        levels, slots = 0, 2 * n_parents  # the parents of the next level: the children
        while (
            levels < ahead.levels
            and (remaining is None or levels + 1 < remaining)
            and 3 * slots * per_slot <= ahead.hist_bytes
        ):
            levels, slots = levels + 1, 2 * slots
        return levels

    def _split_group(
        self,
        group: list[int],
        where: dict,
        ready: dict,
        depths: list[int],
        n_nodes: int,
        levels: int,
        tree_index: int,
        tree_mask,
    ) -> None:
        """Split lossguide's nodes ``group`` in one device batch (``levels`` whole levels below
        their children too); each node's children become ``ready[node] = (batch, j)``."""
        # parents of one batch together, in row order: gathered in a few pieces (the
        # order of a batch's nodes changes where their children sit, not the tree)
        batches: dict[int, int] = {}
        for n in group:
            batches.setdefault(id(where[n][0]), len(batches))
        group.sort(key=lambda n: (batches[id(where[n][0])], where[n][1]))
        child_ids = n_nodes + np.arange(2) if len(group) == 1 else None
        children = self._split(
            [where[n] for n in group],
            [depths[n] + 1 for n in group],
            child_ids,
            tree_index,
            tree_mask,
            levels_ahead=levels,
        )
        for j, n in enumerate(group):
            ready[n] = (children, j)

    @staticmethod
    def _write_nodes(
        t: _Nodes, hosts: list, record_at: tuple, parents: list, depths: list, lefts: dict, cat_hosts: list
    ) -> None:
        """Write lossguide's nodes (all but the root, already in ``t``) and splits into ``t``:
        node i's record is row ``record_at[1][i]`` of ``hosts[record_at[0][i]]`` (two lists of
        ints: NumPy converts them far faster than a list of pairs), a split node's record
        holds its split too (and its category set, the same row of ``cat_hosts``, with
        categorical features)."""
        offsets = np.cumsum([0] + [h.shape[0] for h in hosts])
        where = offsets[np.array(record_at[0], np.int64)] + np.array(record_at[1], np.int64)
        records = np.concatenate(hosts)[where]
        bits = np.concatenate(cat_hosts)[where] if t.cat_bits is not None else None
        if len(parents) > 1:
            t.add(np.asarray(parents[1:], np.int64), records[1:], np.asarray(depths[1:], np.int64))
        if lefts:
            split = np.fromiter(lefts.keys(), np.int64, len(lefts))
            left = np.fromiter(lefts.values(), np.int64, len(lefts))
            t.split(split, records[split], left, left + 1, None if bits is None else bits[split])

    def _parents(self, nodes: list[tuple[_Batch, int]]):
        """(records, histograms, bounds, cat_bits) of ``nodes`` given as (batch, row), the rows
        of a batch together and in order: views where they are consecutive rows of one batch,
        else gathered from their batches in one :meth:`take_rows`; bounds None without
        monotone constraints, cat_bits None without categorical features.
        The gather is queued here, while the device is idle after the last read."""
        pieces = []  # (batch, rows) per batch, in the order of nodes
        for batch, row in nodes:
            if pieces and pieces[-1][0] is batch:
                pieces[-1][1].append(row)
            else:
                pieces.append((batch, [row]))
        bounded = self.monotone is not None
        has_cat = self.categorical is not None
        batch, rows = pieces[0]
        if len(pieces) == 1 and rows[-1] - rows[0] == len(rows) - 1:  # consecutive rows of one batch
            at = slice(rows[0], rows[0] + len(rows))
            return (
                batch.records[at],
                batch.hist[at],
                batch.bounds[at] if bounded else None,
                batch.cat_bits[at] if has_cat else None,
            )
        sources = [[(b.records, r) for b, r in pieces], [(b.hist, r) for b, r in pieces]]
        if bounded:
            sources.append([(b.bounds, r) for b, r in pieces])
        if has_cat:
            sources.append([(b.cat_bits, r) for b, r in pieces])
        taken = self.backend.take_rows(sources)
        return (
            taken[0],
            taken[1],
            taken[2] if bounded else None,
            taken[-1] if has_cat else None,
        )

    def _split(
        self,
        nodes: list[tuple[_Batch, int]],
        child_depths: list[int],
        child_ids,
        tree_index: int,
        tree_mask,
        levels_ahead: int = 0,
    ) -> _Batch:
        """Split ``nodes`` (valid splits; (batch, row) each) on the device and read their children.

        Returns the batch of the children, rows 2j and 2j + 1 for the j-th node, evaluated
        when some child's depth allows another split (the caller checks each child's
        depth). ``child_ids`` (2k,) are their node ids when known now (column masks by node
        need them), else None: the batch's ids are then -1 (lossguide tracks nodes by (batch, row)).
        ``levels_ahead``: so many whole levels below the children are split too, in the same
        device batch, before the one read: the children batch's ``ahead`` is the level
        below it (rows 2r and 2r + 1 under row r; a node without a valid split gets empty
        children), and so on; a lossguide step that picks a node of one level finds its
        children in the next. Only the deepest level keeps its histograms.
        """
        k = len(nodes)
        # a level is evaluated where its shallowest node may split (deeper ones may not first)
        depth = min(child_depths)
        evaluate = self._can_split_at(depth)
        parents, parent_hist, parent_bounds, parent_bits = self._parents(nodes)
        # the levels split here: one more below each evaluated one, up to ``levels_ahead``
        n_levels = 1
        while n_levels <= levels_ahead and self._can_split_at(depth + n_levels - 1):
            n_levels += 1
        moves = self._row_moves(n_levels)
        paths = None
        if self.interactions is not None:  # a child's ancestors: its parent's and the parent's feature
            paths = [b.paths[r] | {int(b.host[r, FEATURE])} for b, r in nodes for _ in (0, 1)]
        masked = self._masked
        depths = np.repeat(child_depths, 2) if masked else None
        masks = self._node_masks(child_ids, depths, tree_index, tree_mask, paths) if evaluate and masked else None
        # this rank's rows under the parents, known from their host records: sizes the launches
        # (a few small leaves need not start a grid for every row); the children's are among them
        n_rows = sum(b.sizes[r] for b, r in nodes)
        # every level's records in one array, level m (2k << m rows) after level m - 1: the
        # read needs no concatenation
        records_of_levels = self.backend.empty(((2 * k) * ((2 << levels_ahead) - 1), NODE_FIELDS), np.int64)
        bits_of_levels = self._new_cat_bits(records_of_levels.shape[0])
        if bits_of_levels is not None:
            bits_of_levels[...] = 0  # levels not evaluated are read too
        levels = [
            self._split_on_device(
                parents,
                parent_hist,
                parent_bounds,
                n_rows,
                masks if evaluate else False,
                moves[0],
                out=records_of_levels[: 2 * k],
                parent_bits=parent_bits,
                out_bits=None if bits_of_levels is None else bits_of_levels[: 2 * k],
            )
        ]
        filled = 2 * k
        evaluated = [evaluate]
        for move in moves[1:]:
            records, hist, bounds, bits = levels[-1]
            depth += 1
            evaluate = self._can_split_at(depth)
            if masked:
                depths = np.repeat(depths, 2) + 1
            masks = False  # not evaluated
            if evaluate:
                masks = self._node_masks(None, depths, tree_index, tree_mask) if masked else None
            size = 2 * records.shape[0]
            levels.append(
                self._split_on_device(
                    records,
                    hist,
                    bounds,
                    n_rows,
                    masks,
                    move,
                    out=records_of_levels[filled : filled + size],
                    parent_bits=bits,
                    out_bits=None if bits_of_levels is None else bits_of_levels[filled : filled + size],
                )
            )
            filled += size
            levels[-2] = (records, None, bounds, bits)  # every node of that level is split: its histograms go
            evaluated.append(evaluate)
        return self._read_levels(levels, evaluated, records_of_levels, bits_of_levels, filled, k, child_ids, paths)

    def _row_moves(self, n_levels: int) -> list[tuple]:
        """(source, target) row arrays of a batch's ``n_levels`` partitions, target None for
        one in place (the backend copies the rows back). Each level's rows lie within its
        parents', so the partitions go from the rows to a spare array and back: the batch
        ends with every row in ``self.rows`` and no copy back, but for a first one in place
        when the count is odd. The spare is the tree's, made at its first use. A backend
        that partitions in place (not ``partitions_into_out``) keeps every one in place."""
        if not self.backend.partitions_into_out:
            return [(self.rows, None)] * n_levels
        moves = [(self.rows, None)] if n_levels % 2 else []
        if n_levels > 1:
            if self._spare_rows is None:
                self._spare_rows = self.backend.empty(self.rows.shape, self.rows.dtype)
            moves += [(self.rows, self._spare_rows), (self._spare_rows, self.rows)] * (n_levels // 2)
        return moves

    def _read_levels(self, levels, evaluated, records_of_levels, bits_of_levels, filled, k, child_ids, paths):
        """The batches of :meth:`_split`'s ``levels`` (their records the first ``filled`` rows
        of ``records_of_levels``, their category sets of ``bits_of_levels``), read at once; the
        first level's batch, each one's ``ahead`` the next."""
        host = self.backend.to_host(
            records_of_levels if filled == records_of_levels.shape[0] else records_of_levels[:filled]
        )
        cat_host = None if bits_of_levels is None else self.backend.to_host(bits_of_levels[:filled])
        below = None
        start = host.shape[0]
        for m in range(len(levels) - 1, -1, -1):
            level_records, hist, bounds, bits = levels[m]
            size = 2 * k << m
            start -= size
            if m:
                ids, level_paths = self._unknown_ids(size), None
            else:
                ids = self._unknown_ids(2 * k) if child_ids is None else np.asarray(child_ids, np.int64)
                level_paths = paths
            below = _Batch(
                level_records,
                hist,
                host[start : start + size],
                ids,
                level_paths,
                bounds,
                ahead=below,
                evaluated=evaluated[m],
                cat_bits=bits,
                cat_host=None if cat_host is None else cat_host[start : start + size],
            )
        return below

    def _unknown_ids(self, size: int) -> np.ndarray:
        """int64 (size,) of -1, read-only: the ids of nodes split ahead (a view of one array
        the grower keeps, not a new one for each of a lossguide tree's dozens of batches)."""
        held = self._minus_ones
        if held.shape[0] < size:
            held = self._minus_ones = np.full(max(size, 2 * held.shape[0]), -1, np.int64)
            held.flags.writeable = False
        return held[:size]

    @property
    def _by_hessian(self) -> bool:
        """What picks the child whose histogram is built (the other is the parent's minus it,
        the same histograms either way): one rank's own row counts, or with several ranks
        the children's hessian sums (as XGBoost): the global counts would cost a collective
        a level, 8 of the 18 a depth-8 round's NCCL ranks waited on each other."""
        return self.comm.world_size > 1

    def _split_on_device(
        self,
        parents,
        parent_hist,
        parent_bounds,
        n_rows: int,
        masks,
        move: tuple,
        out=None,
        parent_bits=None,
        out_bits=None,
    ):
        """Partition the rows of ``parents`` by their splits, make the children's records
        and bounds, and (``masks`` not False: the children's column masks or None) build,
        allreduce and evaluate their histograms. ``move`` is the partition's (source,
        target) row arrays, target None for in place (:meth:`_row_moves`). Returns
        (children, hist or None, bounds, category sets), all on the device; the children's
        records in ``out`` when given, their category sets (with categorical features;
        ``parent_bits`` are the parents') in ``out_bits``."""
        backend, comm = self.backend, self.comm
        source, target = move
        children, build_segments, build_left, built = backend.split_level(
            self.binned.bins_by_feature,
            source,
            parents,
            self._by_hessian,
            hist_bins=0 if masks is False else self._total_bins,
            max_rows=n_rows,
            out_rows=target,
            out=out,
            **self._cat_args(parent_bits),
        )
        rows = source if target is None else target
        bounds = self._child_bounds(parents, parent_bounds)
        hist = None
        if masks is not False:
            built = comm.allreduce_sum(
                backend.build_histograms(
                    self.binned.bins, self.cut_ptrs, self.gpair, rows, build_segments, max_rows=n_rows, out=built
                )
            )
            hist = backend.evaluate_children(
                parent_hist,
                built,
                build_left,
                children,
                self.cut_ptrs,
                masks,
                self.scales,
                self.params,
                **self._monotone_args(bounds),
                **self._cat_args(out_bits),
            )
        return children, hist, bounds, out_bits

    def _grow_whole_levels(self, root, root_hist, root_bounds, root_bits, tree_index: int, tree_mask):
        """Grow every level of 2**d slots on the device; their records, concatenated (int64
        (2**(max_depth + 1) - 1, NODE_FIELDS) on the device, level by level from the root),
        and their category sets the same way (uint32 (., words); None without categorical
        features)."""
        backend, p = self.backend, self.params
        masks = self._level_masks(tree_index, tree_mask)  # (the root was evaluated with its own)
        # every level's records written in place into one array: the read needs no concatenation
        records = backend.empty(((2 << p.max_depth) - 1, NODE_FIELDS), np.int64)
        records[:1] = root
        parents, hist, bounds = root, root_hist, root_bounds
        bit_levels = [root_bits]
        # without leaf rows only the split segments are read on: each level's partition
        # writes a second array, which becomes the rows (no copy back into the first); a
        # one-level tree partitions nothing
        spare = None if self.leaf_rows or p.max_depth < 2 else backend.empty(self.rows.shape, self.rows.dtype)
        for depth in range(1, p.max_depth + 1):
            level = records[(1 << depth) - 1 : (2 << depth) - 1]
            k = int(parents.shape[0])
            if depth < p.max_depth or self.leaf_rows:
                # the built histograms zeroed in the partition's launch when they are made at once
                whole = depth < p.max_depth and self._build_chunk() >= k
                children, build_segments, build_left, built = backend.split_level(
                    self.binned.bins_by_feature,
                    self.rows,
                    parents,
                    self._by_hessian,
                    hist_bins=self._total_bins if whole else 0,
                    out_rows=spare,
                    out=level,
                    **self._cat_args(bit_levels[-1]),
                )
                if spare is not None:
                    self.rows, spare = spare, self.rows
            else:
                # the leaves' rows are not read: their records need only the parents' splits
                # (sums and decisions), and no histogram is built under them
                counts = backend.zeros((k, 2), np.int64)
                children, build_segments, build_left = backend.split_nodes(
                    parents, counts, None if self._by_hessian else counts, out=level
                )
            if depth < p.max_depth:
                bounds = self._child_bounds(parents, bounds)  # slots under a leaf get its bounds: never read
                bits = self._new_cat_bits(children.shape[0])
                hist = self._evaluate_level(
                    hist,
                    children,
                    build_segments,
                    build_left,
                    masks[depth],
                    bounds,
                    bits,
                    depth == p.max_depth - 1,
                    built,
                )
                bit_levels.append(bits)
            parents = children
        if self.categorical is None:
            return records, None
        # the last level is never split: its slots' sets are not read
        return records, backend.concatenate(bit_levels)

    @cached_property
    def _total_bins(self) -> int:
        return int(self.cut_ptrs[-1])

    def _build_chunk(self) -> int:
        """The most nodes whose built histograms :meth:`_evaluate_level` makes at once."""
        return max(1, _BUILD_CHUNK_BYTES // (16 * max(self._total_bins, 1)))

    def _evaluate_level(
        self, parent_hist, children, build_segments, build_left, mask, bounds, bits, last: bool, zeros=None
    ):
        """Build the histograms of a whole level's ``children`` (2k slots under k parents) and
        evaluate their splits (records, ``bounds`` and ``bits`` written in place); the
        level's int64 (2k, total_bins, 2) histograms, or None for the ``last`` level evaluated.
        The built histograms are made, and the children's derived and evaluated,
        ``_BUILD_CHUNK_BYTES`` at a time: integer sums and independent nodes, so the
        histograms and splits are the same whatever the chunks. ``zeros``: int64 zeros for the
        whole level's built histograms at once (``split_level``'s ``built``), or None."""
        backend, k = self.backend, int(build_segments.shape[0])
        chunk = min(k, self._build_chunk())
        # the last level's histograms are not kept: the search reads its cells from the
        # parents' and the built ones (CUDA), nothing is written
        whole = chunk >= k  # one chunk: the arrays themselves (the scans split_level made are theirs)
        hist = None if last or whole else backend.empty((2 * k, self._total_bins, 2), np.int64)
        for a in range(0, k, chunk):
            b = min(a + chunk, k)
            built = self.comm.allreduce_sum(
                backend.build_histograms(
                    self.binned.bins,
                    self.cut_ptrs,
                    self.gpair,
                    self.rows,
                    build_segments if whole else build_segments[a:b],
                    out=zeros if whole else None,
                )
            )
            rows = slice(2 * a, 2 * b)
            piece = backend.evaluate_children(
                parent_hist if whole else parent_hist[a:b],
                built,
                build_left if whole else build_left[a:b],
                children if whole else children[rows],
                self.cut_ptrs,
                mask,
                self.scales,
                self.params,
                **self._monotone_args(None if bounds is None else bounds[rows]),
                **self._cat_args(None if bits is None else bits[rows]),
                out=None if hist is None else hist[rows],
                keep=not last,
            )
            del built  # before the next chunk's are made
            if not last and hist is None:
                hist = piece  # one chunk: the whole level
            del piece  # the last level's, before the next chunk's are made
        return None if last else hist

    def _whole_level_nodes(self, read, t: _Nodes):
        """``t`` filled from the read of a tree grown in whole levels; the scales as read."""
        host, scales, *cat = read.result()
        p = self.params
        # node ids as the per-level growth gives them: children of the split nodes of a level,
        # in slot order (which is id order), left then right
        slot_ids = t.add(np.array([-1]), host[:1], 0)
        start = 1
        for depth in range(1, p.max_depth + 1):
            level = host[start - slot_ids.size : start]
            split = np.flatnonzero((slot_ids >= 0) & (level[:, FEATURE] >= 0))
            if not split.size:
                break
            child_slots = np.stack([2 * split, 2 * split + 1], axis=1).ravel()
            children = host[start : start + 2 * slot_ids.size]
            ids = t.add(np.repeat(slot_ids[split], 2), children[child_slots], depth)
            bits = cat[0][start - slot_ids.size : start][split] if cat else None
            t.split(slot_ids[split], level[split], ids[0::2], ids[1::2], bits)
            start += 2 * slot_ids.size
            slot_ids = np.full(2 * slot_ids.size, -1, np.int64)
            slot_ids[child_slots] = ids
        return t, scales

    def _node_weights(self, t: _Nodes, scale_g: float, scale_h: float) -> np.ndarray:
        """float64 (n,) weight of every node; with monotone constraints clipped into the
        node's bounds, replayed on the host from the tree (the device's were never read)."""
        n, p = t.n, self.params
        sums = t.sums[:n]
        if self.monotone is None:
            return self.backend.leaf_weights(sums, scale_g, scale_h, p)
        bounds = self.backend.node_bounds(
            t.left[:n], t.right[:n], t.feature[:n], sums, self.monotone, scale_g, scale_h, p
        )
        return self.backend.leaf_weights(sums, scale_g, scale_h, p, bounds=bounds)

    def _finish(self, t: _Nodes, scales: np.ndarray, rows) -> GrownTree:
        """The tree of ``t`` with its weights (``scales`` float64 (2,) on the host, as read)."""
        scale_g, scale_h = (float(v) for v in scales)
        p = self.params
        n = t.n
        sums = t.sums[:n]
        weights = self._node_weights(t, scale_g, scale_h) * p.eta
        feature = t.feature[:n].copy()
        split_bin = t.split_bin[:n].copy()
        split_value = np.zeros(n, np.float32)
        inner = feature >= 0
        cat_fields = {}
        if self.categorical is not None:
            cat_fields = categorical_tree_fields(feature, t.cat_bits[:n], self.categorical.is_cat)
        numeric = inner if not cat_fields else inner & (cat_fields["split_type"] == 0)
        split_value[numeric] = self.cut_values[self.cut_ptrs[feature[numeric]] + split_bin[numeric]]
        # a categorical node's split_value stays 0: routing reads its set (docs/design.md §11.4)
        tree = Tree(
            left=t.left[:n].copy(),
            right=t.right[:n].copy(),
            parent=t.parent[:n].copy(),
            feature=feature,
            split_value=split_value,
            default_left=t.default_left[:n].astype(np.uint8),
            gain=t.gain[:n].astype(np.float32),
            cover=sums[:, 1] / scale_h,
            value=weights.astype(np.float32),
            split_bin=split_bin,
            **cat_fields,
        )
        leaves = np.flatnonzero(~inner)
        return GrownTree(
            tree=tree, rows=rows, leaf_nodes=leaves, begins=t.begin[:n][leaves].copy(), ends=t.end[:n][leaves].copy()
        )
