"""The Backend protocol: every numerical stage of training and prediction.

The driver code (grower, boosting loop, booster) never branches on the device; it calls
these methods. ``cpu`` implements them with NumPy + Numba, ``cuda`` with CuPy and the
kernels in ``kernels/``. Integer histograms make both backends produce identical trees.

Array conventions (``xp`` is numpy or cupy):
- ``bins``: uint8/uint16 (n, F), missing = dtype max.
- ``gpair``: int32 (n, 2), quantised gradient and hessian of each row (|value| <= 2**30).
- ``rows``: int32 (n,), a permutation of the local rows in which every node's rows are the
  contiguous segment ``rows[begin:end]``.
- ``hist``: int64 (n_nodes, total_bins, 2).
- ``records``: int64 (n_nodes, NODE_FIELDS) node records (``dgboost._layout``): split
  decision, global quantised sums, local row segment. A batch of nodes lives on the device
  as records from partition to evaluation; the host reads them once per batch.
- ``segments``: int64 (m, 2) row segments ``[begin, end)``.
- ``scales``: float64 (2,) on the device, the fixed-point scales ``(scale_g, scale_h)``
  (powers of two, :func:`dgboost._fixed_point.fixed_point_scale`): made there from the
  allreduced maxima (:meth:`Backend.fixed_point_scales`), so no round needs the host to read
  them before its tree is grown; the host reads them with the tree.
- ``bounds``: float64 (m, 2) ``[lower, upper]`` weight bounds of each node (monotone
  constraints; the root's are ``[-inf, inf]``); ``monotone``: int8 (F,) sign of each feature
  (1 increasing, -1 decreasing, 0 free). Both None when nothing is constrained.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

__all__ = ["Backend", "LookaheadBudget", "SplitParams"]


@dataclass(frozen=True)
class LookaheadBudget:
    """How much work lossguide growth may do ahead of each read.

    Lossguide reads every batch of splits back before it picks the next leaf. Splits made
    ahead of that read (the children of the best leaves, whole levels below them) save
    reads, and are wasted where a node's turn never comes: worth a lot where a read is a
    device round trip, little where it is a function return on the host.

    Attributes
    ----------
    nodes : int
        The most leaves one batch splits; at most so many that their children's int64
        (G, H) histograms fit in ``hist_bytes``.
    levels : int
        The most whole levels below a batch's children that it splits too.
    hist_bytes : int
        The bytes a batch's levels may take: a level below the children is split while
        three times its parents' histograms fit.
    """

    nodes: int
    levels: int
    hist_bytes: int


class SplitParams(Protocol):
    reg_lambda: float
    alpha: float
    gamma: float
    min_child_weight: float
    max_delta_step: float
    max_cat_to_onehot: int
    max_cat_threshold: int


class Backend(Protocol):
    """Numerical stages, one implementation per device."""

    name: str
    xp: Any
    lookahead: LookaheadBudget
    #: whether ``add_record_leaf_values`` walks each row to its leaf from the records and its
    #: own entries (given ``bins``), rather than reading the leaves' row segments
    walks_leaves: bool
    #: whether ``partition(out=...)`` writes the split segments straight into ``out``, so that
    #: a caller alternating two row arrays copies nothing (False: it partitions in place and
    #: then copies every row into ``out``)
    partitions_into_out: bool

    def asarray(self, array): ...

    def resident(self, array):
        """``array`` where this backend's kernels read it, for a training job's set-up: a host
        array is copied to a GPU's memory once (then sketched, binned and kept there), any
        other array is returned as it is. The CPU returns every array as it is."""

    def to_host(self, array) -> np.ndarray: ...

    def synchronize(self) -> None:
        """Wait for the work queued so far (a no-op on the CPU); used to time stages."""

    def release_cached_memory(self) -> None:
        """Give back to the device the memory its allocator holds but no array uses (a no-op
        on the CPU): training calls it once its set-up is done, whose temporaries (input
        checks, exact sums, the sketch) would otherwise stay held for all its rounds."""

    def bin_values(self, values, cut_values, cut_ptrs, dtype): ...

    def abs_max_bits(self, grad, hess):
        """uint32 (2,) on the device: the float32 bit patterns of max |grad| and max |hess|
        (float32 (n,) each). Non-negative floats order as their bits, NaN above inf, so the
        max of the bits over ranks is the bits of the max, NaN kept."""

    def fixed_point_scales(self, bits, n_global: int):
        """float64 (2,) ``scales`` on the device from ``bits`` (uint32 (2,) on the device, the
        global maxima's float32 bits, :meth:`abs_max_bits` allreduced by max): each the
        :func:`~dgboost._fixed_point.fixed_point_scale` of its maximum, 1.0 for a maximum
        that is not positive and finite. Raises when ``n_global`` is 2**32 or more."""

    def quantise(self, grad, hess, scales, keep=None):
        """int32 (n, 2) fixed-point gradient pairs ``rint(x * scale)`` (``scales`` float64 (2,)
        on the device); rows where ``keep`` is False get (0, 0).

        Histograms sum them in int64.
        """

    def gpair_totals(self, gpair):
        """int64 (2,) on the device: the column sums of ``gpair`` (int32 (n, 2))."""

    def root_rows(self, n: int):
        """int32 (n,) on the device: 0, 1, ..., n - 1, the root's order of the local rows (the
        splits below permute it)."""

    def root_node(self, sums, n_rows: int):
        """int64 (1, NODE_FIELDS) record of the root: ``sums`` (int64 (2,), global) and rows [0, n_rows)."""

    def build_histograms(self, bins, cut_ptrs, gpair, rows, segments, max_rows: int | None = None, out=None):
        """int64 (m, total_bins, 2): sums of ``gpair`` per segment and bin.

        ``segments`` are int64 (m, 2) ``[begin, end)`` pairs (a view of node records' begin and
        end columns will do); ``max_rows``, when known, bounds their total rows (it sizes the
        launch). ``out``, int64 (m, total_bins, 2) zeros of this backend (:meth:`split_level`'s
        ``built``), receives the sums and is returned; else a new array does.
        """

    def evaluate_splits(
        self,
        hist,
        records,
        cut_ptrs,
        feature_mask,
        scales,
        params: SplitParams,
        bounds=None,
        monotone=None,
        categorical=None,
        cat_bits=None,
    ) -> None:
        """Write the best split of each node into its record (feature -1 when none).

        Reads the records' sums; records of slots with no node (feature NO_NODE) are left
        as they are. ``feature_mask`` is bool (m, F) on the device, (1, F) for one mask of
        every node, or None for every feature. Ties go to the lowest feature, then bin,
        then missing-right. With ``monotone`` (and the nodes' ``bounds``, both on the
        device) XGBoost's monotone rule applies: child weights clipped into the node's
        bounds, splits against a feature's sign refused, gains from the clipped weights
        (``dgboost.constraints``).

        With ``categorical`` (a :class:`dgboost._categorical.CategoricalLayout`) its
        categorical features are searched by XGBoost's one-hot and partition rules
        (docs/design.md §11.2) and ``cat_bits`` (uint32 (m, words) on the device) receives each
        node's set of right-going categories (bit c of word c >> 5); zeros where the node's
        best split is numeric or there is none. A categorical split's ``split_bin`` is its
        one-hot category, -1 for a partition split (routing reads ``cat_bits``).
        """

    def child_bounds(self, parents, bounds, monotone, scales, params: SplitParams):
        """float64 (2k, 2) on the device: the bounds of the children of evaluated ``parents``.

        Rows 2j and 2j + 1 belong to parent j's left and right child (as ``split_nodes``
        lays out their records): parent j's ``bounds``, narrowed when it splits on a
        constrained feature so that they meet at the mean of the two clipped child weights.
        """

    def partition(
        self, bins_by_feature, rows, records, max_rows: int | None = None, categorical=None, cat_bits=None, out=None
    ):
        """Stable partition of each record's segment by its split decision (in place unless
        ``out`` is given).

        With ``categorical`` (a CategoricalLayout) and ``cat_bits`` (uint32 (k, words), the
        records' category sets as :meth:`evaluate_splits` wrote them): on a categorical
        feature a bin goes RIGHT iff its bit is set, a missing bin by default_left.

        ``max_rows``, when known, bounds the rows of the records' segments (it sizes the launch).

        ``out``, an array of ``rows``' shape and dtype on the device, receives the partitioned
        segments in place of ``rows``, whose contents are then not meaningful (nor are
        ``out``'s outside the segments). A caller that reads only these segments' rows from
        then on takes ``out`` as its rows and reuses ``rows`` for the next call: the CUDA
        backend then copies nothing back.

        Returns int64 (k, 2) local (left, right) row counts; a record that is not split
        (feature < 0) keeps its rows, all counted left. ``bins_by_feature`` is the
        backend's column layout of the bins (:meth:`column_layout`).
        """

    def split_nodes(self, parents, counts, global_counts, out=None):
        """Records of the children of split ``parents`` and which child to build.

        Returns ``(children, build_segments, build_left)``: children int64 (2k, NODE_FIELDS),
        rows 2j and 2j + 1 the left and right child of parent j, with their sums and local
        segments (a parent that is not split gets two NO_NODE children with empty segments);
        build_segments int64 (k, 2), the local segment of each parent's child with fewer
        rows over all ranks (``global_counts``, int64 (k, 2); ties build the left), or, when
        ``global_counts`` is None, with the smaller hessian sum (XGBoost's choice: the sums
        are known on every rank without a collective); build_left int64 (k,), 1 where that
        child is the left one. Which child is built never changes the histograms (the
        sibling is the parent's minus it, exactly), only the work. ``out``, a C-contiguous
        int64 (2k, NODE_FIELDS) array on the device, receives the children (a batch's
        levels then need no concatenation before their one read).
        """

    def split_level(
        self,
        bins_by_feature,
        rows,
        parents,
        by_hessian: bool,
        hist_bins: int = 0,
        max_rows: int | None = None,
        categorical=None,
        cat_bits=None,
        out_rows=None,
        out=None,
    ):
        """One level's :meth:`partition` of ``parents``' segments of ``rows`` (into
        ``out_rows`` when given, as :meth:`partition`'s ``out``) and :meth:`split_nodes` of
        ``parents`` (the children into ``out`` when given), in as few launches as the backend
        can.

        ``by_hessian``: the child to build is the one with the smaller hessian sum (several
        ranks: their global counts would cost a collective), else the one with fewer of the
        rows counted here. ``hist_bins``: when not 0, ``built`` is int64 (k, hist_bins, 2)
        zeros, for :meth:`build_histograms`' ``out`` (the level's built histograms).

        Returns ``(children, build_segments, build_left, built)`` as :meth:`split_nodes`,
        ``built`` None when ``hist_bins`` is 0 (or where the backend makes them in
        :meth:`build_histograms`). ``build_segments``, ``build_left`` and ``built`` may be work
        arrays of the backend, overwritten by its next ``split_level``: read them before.
        """

    def concatenate(self, arrays):
        """Device arrays of one dtype and trailing shape, one after another along axis 0."""

    def take_rows(self, sources) -> list:
        """Rows of several arrays, gathered: for each output (an entry of ``sources``, a
        list of (array, rows) pieces, ``rows`` a list of ints; every array of an entry of one
        dtype and row shape) a new array of the pieces' rows one after another."""

    def empty(self, shape, dtype):
        """An uninitialised array on the device."""

    def zeros(self, shape, dtype):
        """An array of zeros on the device."""

    def children_histograms(self, parent_hist, parent_index, built, build_left, out=None):
        """int64 (2k, total_bins, 2) histograms of the children, laid out as their records.

        The built child of parent ``j`` is ``built[j]``; its sibling is
        ``parent_hist[parent_index[j]] - built[j]`` (``parent_hist[j]`` when
        ``parent_index`` is None). Written into ``out`` (C-contiguous int64 (2k,
        total_bins, 2) of this backend, e.g. rows of a level's histograms) when given.
        """

    def evaluate_children(
        self,
        parent_hist,
        built,
        build_left,
        records,
        cut_ptrs,
        feature_mask,
        scales,
        params: SplitParams,
        bounds=None,
        monotone=None,
        categorical=None,
        cat_bits=None,
        out=None,
        keep: bool = True,
    ):
        """:meth:`children_histograms` (parents ``parent_hist[j]``, no index) then
        :meth:`evaluate_splits` of the children's ``records``: the same histograms, returned,
        and the same records, in fewer passes where the backend can (the CUDA split search
        writes the histograms it reads). ``keep`` False: the children's histograms are not
        needed after the search (the level below is all leaves): None is returned, and the
        backend may write none (``out`` is then not used)."""

    def leaf_weights(self, sums, scale_g: float, scale_h: float, params, bounds=None) -> np.ndarray:
        """float64 (n,) on the host, from int64 (n, 2) host sums, clipped into float64
        (n, 2) host ``bounds`` when given."""

    def node_bounds(self, left, right, feature, sums, monotone, scale_g: float, scale_h: float, params) -> np.ndarray:
        """float64 (n, 2) on the host: the bounds of every node of a grown tree (host arrays,
        node 0 the root, parents before children), the same numbers ``child_bounds`` gave
        its splits on the device."""

    def add_leaf_values(self, margin, rows, begins, ends, values, group: int) -> None:
        """``margin[rows[begins[i]:ends[i]], group] += values[i]`` (float32 (n_leaves,) host values)."""

    def add_record_leaf_values(
        self, margin, rows, records, scales, params, group: int, bins=None, categorical=None, cat_bits=None
    ) -> None:
        """Add each leaf's value to its rows' margins, on the device, from node records.

        The leaves are the records of feature -1 (``NO_NODE`` slots are skipped); a leaf's
        value is float32(eta * weight), the weight from its sums as :meth:`leaf_weights`
        computes it (no bounds: not for monotone constraints), so the margins are those
        :meth:`add_leaf_values` gives with the grown tree's values, without waiting for the
        host to read the tree.

        ``bins`` (the matrix the tree was grown on), with ``categorical`` and the records'
        category sets ``cat_bits`` (uint32 (m', words), the levels above the last) where
        there are categorical features, lets a backend find each row's leaf by walking
        ``records`` of a tree grown in whole levels (heap order: record j's children are
        2j + 1 and 2j + 2) from the row's own entries, instead of the leaves' segments of
        ``rows``: the same leaves, the same margins. A backend may ignore them.
        """

    def read_later(self, arrays):
        """Start copying device ``arrays`` to the host in stream order; returns an object
        whose ``result()`` waits for the copies and gives the host arrays (a list), so the
        host can queue more work before it waits."""

    def predict_margin(self, ensemble_arrays, values, tree_begin: int, tree_end: int, out): ...

    def predict_leaf(self, ensemble_arrays, values, tree_begin: int, tree_end: int): ...

    def logistic_gradient(self, margin, label, weight, scale_pos_weight: float):
        """float32 (n, 1) gradient and hessian of the logistic loss, computed in float64 from
        ``margin`` and ``label`` (n,) and ``weight`` (n,) or None; rows labelled 1 weigh
        ``scale_pos_weight`` times more (``dgboost.objective.RegLogistic``)."""

    def sketch_cuts(self, values, rows, features: range, max_bin: int, block_values: int, weights=None):
        """Cut values of ``features`` of ``values`` (float32 (n, F) on this device; ``rows``
        int64 (m,), the sampled rows, or None for every row; ``weights`` float32 (n,) on this
        device, or None for unit weights) sorted and cut where they live, ``block_values``
        sampled values at a time: a list of float32 host arrays, the host sketch's
        (``dgboost.quantile``) bit for bit; None when the host sketch applies."""

    def shap_engine(self, max_table_bytes: int | None = None):
        """The SHAP engine of this device (``dgboost.explain.engines``' interface), with a
        weight-table budget of ``max_table_bytes`` (None: the device's default)."""
