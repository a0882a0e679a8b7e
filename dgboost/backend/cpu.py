"""The CPU backend: NumPy arrays and the Numba kernels of ``_cpu_kernels``."""

from __future__ import annotations

import functools

import numba
import numpy as np

from .._array import check_int64_out, to_host
from .._fixed_point import scales_from_bits
from .._kernel_switch import KernelTable
from .._layout import BEGIN, DEFAULT_LEFT, END, FEATURE, LEFT_G, LEFT_H, NO_NODE, SPLIT_BIN, SUM_G, SUM_H
from . import _cpu_kernels, _records
from ._compile_notice import watch_compilation
from ._threads import numba_threads, resolve_threads, start_pool
from .base import LookaheadBudget

__all__ = ["CPUBackend"]

# the kernels, their parallel ones run as serial twins while a cold Numba cache fills in the background
K = KernelTable(_cpu_kernels)


def _on_own_threads(method):
    """Run a method that calls parallel kernels on its backend's thread count (``self.threads``).

    Numba keeps one thread count per calling thread, used by every parallel kernel that thread
    calls. Setting it once, when the backend is made, did not hold: a backend made later on the
    same thread with another ``nthread`` (the default one that binning or prediction makes)
    changed it for the training's backend too, whose rounds then ran on every core of a
    16-core machine under ``nthread=2``. The count is set for the call and put back after it.
    """

    @functools.wraps(method)
    def on_own_threads(self, *args, **kwargs):
        with numba_threads(self.threads):
            return method(self, *args, **kwargs)

    return on_own_threads


def _balance(sizes: np.ndarray, n_threads: int) -> tuple[np.ndarray, np.ndarray]:
    """Greedy largest-first assignment of nodes to threads by row count.

    Returns (task_ptr int64 (n_threads + 1,), task_nodes int64 (n,)): thread t gets
    ``task_nodes[task_ptr[t]:task_ptr[t + 1]]``.
    """
    load = np.zeros(n_threads, dtype=np.int64)
    owner = np.empty(sizes.shape[0], dtype=np.int64)
    for i in np.argsort(-sizes, kind="stable"):
        t = int(np.argmin(load))
        owner[i] = t
        load[t] += sizes[i]
    task_nodes = np.argsort(owner, kind="stable")
    task_ptr = np.concatenate([[0], np.cumsum(np.bincount(owner, minlength=n_threads))])
    return task_ptr.astype(np.int64), task_nodes.astype(np.int64)


class _DenseBins(np.ndarray):
    """uint8 bins of a matrix with no missing value whose features have at most 256 bins (as
    the default ``max_bin=256`` gives): the uint16 layout that 256 bins and a missing marker
    need takes twice the bytes, which the histograms and the partition read row by row.

    Here the uint8 maximum, 255, is a bin; ``missing`` (what ``BinnedMatrix.missing_bin``
    reads) is 256, which no bin equals. The kernels take the plain array (:func:`_plain`).
    """

    missing = 256


def _plain(bins) -> tuple[np.ndarray, int]:
    """(``bins`` as a plain ndarray, its missing marker): the dtype's maximum, or 256 for
    :class:`_DenseBins`."""
    if isinstance(bins, _DenseBins):
        return bins.view(np.ndarray), _DenseBins.missing
    return bins, int(np.iinfo(bins.dtype).max)


# the binning kernel's buckets: four a cut (at most one cut in most buckets), in a table of at
# most 1 MiB (int32) however many features
_BUCKETS_PER_CUT = 4
_BUCKET_TABLE_ENTRIES = 1 << 18


def _bin_buckets(cut_values: np.ndarray, cut_ptrs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The binning kernel's buckets: a value ``x`` of feature ``f`` falls in bucket
    ``k = clip(floor((x - origin[f]) * scale[f]), 0, nb)`` (float64), and at least
    ``bucket_cuts[f, k]`` of the feature's cuts lie below it.

    The ``nb`` buckets of a feature split the range of its cuts but the last (values from the
    last but one up all take the last bin) evenly; a feature of at most two cuts, or of a range
    that is not finite, has one bucket (scale 0).

    Parameters
    ----------
    cut_values : ndarray of float32, shape (total_bins,)
    cut_ptrs : ndarray of int64, shape (F + 1,)

    Returns
    -------
    origin, scale : ndarray of float64, shape (F,)
    bucket_cuts : ndarray of int32, shape (F, nb + 1)
        ``bucket_cuts[f, k]``: the number of the feature's cuts whose bucket is below ``k``.
    """
    ptrs = np.asarray(cut_ptrs, np.int64)
    n_features = ptrs.size - 1
    counts = np.diff(ptrs)
    widest = int(counts.max()) if n_features else 1
    nb = max(1, min(_BUCKETS_PER_CUT * widest, _BUCKET_TABLE_ENTRIES // max(n_features, 1) - 1))
    cuts = np.asarray(cut_values, np.float32).astype(np.float64)
    origin = np.zeros(n_features)
    scale = np.zeros(n_features)
    wide = np.flatnonzero(counts >= 3)
    if wide.size:
        low, high = cuts[ptrs[wide]], cuts[ptrs[wide + 1] - 2]
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            s = nb / (high - low)
        ok = np.isfinite(low) & np.isfinite(s) & (s > 0)
        origin[wide[ok]], scale[wide[ok]] = low[ok], s[ok]
    feature = np.repeat(np.arange(n_features), counts)
    # each cut's bucket, as the kernel computes a value's
    with np.errstate(invalid="ignore"):
        t = (cuts - origin[feature]) * scale[feature]
    bucket = np.where(t > 0.0, np.minimum(t, float(nb)), 0.0).astype(np.int64)
    # within a feature the buckets do not decrease: one search over (feature, bucket) keys
    keys = feature * (nb + 1) + bucket
    grid = np.arange(n_features)[:, None] * (nb + 1) + np.arange(nb + 1)[None, :]
    below = np.searchsorted(keys, grid, side="left") - ptrs[:-1, None]
    return origin, scale, below.astype(np.int32)


# rows of the bin matrix transposed at a time by CPUBackend.column_layout
_LAYOUT_ROWS = 16384

# quantise's row mask when every row is kept
_NO_KEEP = np.zeros(0, np.bool_)


def _regularisers(params) -> tuple:
    """(lambda, alpha, min_child_weight, max_delta_step) as the kernels take them."""
    return (float(params.reg_lambda), float(params.alpha), float(params.min_child_weight), float(params.max_delta_step))


def _host_scales(scales) -> tuple[float, float]:
    """(scale_g, scale_h) as floats from the float64 (2,) scales array."""
    scale_g, scale_h = np.asarray(scales, np.float64).tolist()
    return scale_g, scale_h


def _split_arrays(ensemble) -> tuple:
    """The ensemble's (left, right, feature, split_value, default_left) as the prediction
    kernels take them (``default_left`` as bool)."""
    return (ensemble.left, ensemble.right, ensemble.feature, ensemble.split_value, ensemble.default_left.view(np.bool_))


class _Ready:
    """A read that has already happened (``Backend.read_later`` on the host)."""

    def __init__(self, arrays: list):
        self._arrays = arrays

    def result(self) -> list:
        return self._arrays


def leaf_weights_on_host(sums, scale_g: float, scale_h: float, params, bounds=None) -> np.ndarray:
    """float64 (n,) leaf weights from quantised int64 (n, 2) sums (every backend's leaves),
    clipped into float64 (n, 2) host ``bounds`` when given (monotone constraints)."""
    out = np.empty(sums.shape[0], np.float64)
    sums = np.ascontiguousarray(sums, np.int64)
    if bounds is None:
        K.leaf_weights(sums, 1.0 / scale_g, 1.0 / scale_h, *_regularisers(params), out)
    else:
        K.bounded_leaf_weights(
            sums, np.ascontiguousarray(bounds, np.float64), 1.0 / scale_g, 1.0 / scale_h, *_regularisers(params), out
        )
    return out


def node_bounds_on_host(left, right, feature, sums, monotone, scale_g: float, scale_h: float, params) -> np.ndarray:
    """float64 (n, 2) weight bounds of every node of a grown tree (every backend's leaves).

    Replays the children's bounds split by split from the host arrays of the tree (node 0
    the root, parents before children; ``sums`` int64 (n, 2) quantised), with the CPU
    engine's arithmetic, so the leaves are clipped into the bounds the splits were
    evaluated with on either device.
    """
    n = int(feature.shape[0])
    out = np.empty((n, 2), np.float64)
    if n:
        K.tree_bounds(
            np.ascontiguousarray(left, np.int64),
            np.ascontiguousarray(right, np.int64),
            np.ascontiguousarray(feature, np.int64),
            np.ascontiguousarray(sums, np.int64),
            np.ascontiguousarray(monotone, np.int8),
            1.0 / scale_g,
            1.0 / scale_h,
            *_regularisers(params),
            out,
        )
    return out


class CPUBackend:
    """NumPy + Numba implementation of :class:`~dgboost.backend.base.Backend`."""

    name = "cpu"
    xp = np
    walks_leaves = False  # leaf values are added by the leaves' row segments
    partitions_into_out = False  # the kernels partition in place
    # work ahead costs as much as any other here, and a read nothing: the best leaves'
    # children and one level below them, faster than none ahead or whole levels
    # (docs/performance-notes.md, "Lossguide lookahead")
    lookahead = LookaheadBudget(nodes=32, levels=1, hist_bytes=64 << 20)

    def __init__(self, nthread: int = 0):
        watch_compilation()
        start_pool()
        #: the Numba threads of this backend's calls (:func:`._threads.resolve_threads`), set
        #: for each call that runs parallel kernels (:func:`_on_own_threads`)
        self.threads = resolve_threads(nthread, numba.config.NUMBA_NUM_THREADS)
        numba.set_num_threads(self.threads)

    def _scratch(self, size: int, dtype) -> np.ndarray:
        """A buffer of at least ``size`` elements of ``dtype``, kept from call to call (the
        partition's: writing fresh pages costs a page fault each)."""
        held = getattr(self, "_scratch_buffer", None)
        if held is None or held.dtype != dtype or held.shape[0] < size:
            held = np.empty(size, dtype)
            self._scratch_buffer = held
        return held

    def asarray(self, array):
        return to_host(array)

    def resident(self, array):
        """``array`` as it is: the host engine reads it where it lies."""
        return array

    def to_host(self, array) -> np.ndarray:
        return to_host(array)

    def synchronize(self) -> None:
        pass  # every stage has finished when it returns

    def release_cached_memory(self) -> None:
        pass  # NumPy's memory goes back to the system as arrays go

    @_on_own_threads
    def bin_values(self, values, cut_values, cut_ptrs, dtype):
        values = np.ascontiguousarray(values, np.float32)
        # no value missing (a NaN makes the minimum NaN): 256 bins fit a byte, binned into it
        dense = (
            np.dtype(dtype) == np.uint16
            and values.size > 0
            and int(np.diff(cut_ptrs).max()) <= 256
            and not np.isnan(values.min())
        )
        out = np.empty(values.shape, dtype=np.uint8 if dense else dtype)
        origin, scale, bucket_cuts = _bin_buckets(cut_values, cut_ptrs)
        missing = np.iinfo(out.dtype).max
        K.bin_values(values, cut_values, cut_ptrs, origin, scale, bucket_cuts, missing, out)
        return out.view(_DenseBins) if dense else out

    def check_training_memory(self, *args, **kwargs) -> None:
        """Host memory is not checked ahead: NumPy raises MemoryError with the size itself."""
        return None

    def column_layout(self, bins: np.ndarray) -> np.ndarray:
        """Column-major (F, n) copy of ``bins`` for the partition kernel (one feature, many rows)."""
        columns = np.empty(bins.shape[::-1], dtype=bins.dtype)
        # a block of rows at a time (16384 rows of 28 one-byte bins: 448 KiB, in the cache while
        # its columns are written): a column at a time read every row once per feature (3x slower)
        for start in range(0, bins.shape[0], _LAYOUT_ROWS):
            columns[:, start : start + _LAYOUT_ROWS] = bins[start : start + _LAYOUT_ROWS].T
        return columns.view(_DenseBins) if isinstance(bins, _DenseBins) else columns

    def abs_max_bits(self, grad, hess) -> np.ndarray:
        """uint32 (2,): the float32 bits of max |grad| and max |hess|."""
        out = np.empty(2, np.uint32)
        # as float32 first: rounding keeps the order, so the maximum rounds to the same float
        grad, hess = np.asarray(grad, np.float32), np.asarray(hess, np.float32)
        K.abs_max_bits(grad.view(np.uint32), hess.view(np.uint32), out)
        return out

    @_on_own_threads
    def gpair_totals(self, gpair) -> np.ndarray:
        """See ``Backend.gpair_totals``."""
        out = np.empty(2, np.int64)
        K.gpair_totals(gpair, out)
        return out

    def root_rows(self, n: int) -> np.ndarray:
        """See ``Backend.root_rows``."""
        return np.arange(n, dtype=np.int32)

    def root_node(self, sums, n_rows: int) -> np.ndarray:
        return _records.root_node(sums, n_rows)

    def split_nodes(self, parents, counts, global_counts, out=None):
        return _records.split_nodes(parents, counts, global_counts, out=out)

    def split_level(
        self,
        bins_by_feature,
        rows,
        parents,
        by_hessian: bool,
        hist_bins: int = 0,
        max_rows=None,
        categorical=None,
        cat_bits=None,
        out_rows=None,
        out=None,
    ):
        """See ``Backend.split_level``: :meth:`partition` then :meth:`split_nodes`; ``built``
        None (:meth:`build_histograms` writes every cell of its own array)."""
        counts = self.partition(bins_by_feature, rows, parents, max_rows, categorical, cat_bits, out=out_rows)
        return (*self.split_nodes(parents, counts, None if by_hessian else counts, out=out), None)

    def concatenate(self, arrays):
        return np.concatenate(arrays)

    def take_rows(self, sources) -> list:
        return [np.concatenate([a[rows] for a, rows in pieces]) for pieces in sources]

    def empty(self, shape, dtype):
        return np.empty(shape, dtype)

    def zeros(self, shape, dtype):
        return np.zeros(shape, dtype)

    @_on_own_threads
    def children_histograms(self, parent_hist, parent_index, built, build_left, out=None):
        built = np.ascontiguousarray(built, np.int64)
        shape = (2 * built.shape[0],) + built.shape[1:]
        if out is None:
            out = np.empty(shape, np.int64)
        else:
            check_int64_out(out, shape, "children histograms go to")
        use_index = parent_index is not None
        index = np.ascontiguousarray(parent_index if use_index else np.zeros(0), np.int64)
        # one pass, no temporaries: the NumPy form took 9% of a 1M-row job on one thread
        K.children_histograms(
            np.ascontiguousarray(parent_hist, np.int64),
            index,
            use_index,
            built,
            np.ascontiguousarray(build_left, np.int64),
            out,
        )
        return out

    def evaluate_children(
        self,
        parent_hist,
        built,
        build_left,
        records,
        cut_ptrs,
        feature_mask,
        scales,
        params,
        bounds=None,
        monotone=None,
        categorical=None,
        cat_bits=None,
        out=None,
        keep=True,
    ) -> np.ndarray | None:
        hist = self.children_histograms(parent_hist, None, built, build_left, out=out)
        self.evaluate_splits(
            hist, records, cut_ptrs, feature_mask, scales, params, bounds, monotone, categorical, cat_bits
        )
        return hist if keep else None

    def fixed_point_scales(self, bits, n_global: int) -> np.ndarray:
        """float64 (2,): the scales of the gradients and hessians whose maxima have the
        float32 bits ``bits`` (uint32 (2,))."""
        return scales_from_bits(bits, n_global)

    @_on_own_threads
    def quantise(self, grad, hess, scales, keep=None):
        """int32 (n, 2) fixed-point pairs (the scales keep every value within 2**30)."""
        scale_g, scale_h = _host_scales(scales)
        out = np.empty((grad.shape[0], 2), dtype=np.int32)
        # one pass on the threads (NumPy's took 10 ms a round on a million rows in temporaries);
        # a non-finite value casts to garbage, quietly: its round raises when the training loop
        # reads the maxima, and the tree grown from these pairs is dropped
        K.quantise(grad, hess, scale_g, scale_h, _NO_KEEP if keep is None else np.asarray(keep, np.bool_), out)
        return out

    @_on_own_threads
    def build_histograms(self, bins, cut_ptrs, gpair, rows, segments, max_rows=None, out=None):
        segments = np.asarray(segments, np.int64)
        begins, ends = np.ascontiguousarray(segments[:, 0]), np.ascontiguousarray(segments[:, 1])
        total_bins = int(cut_ptrs[-1])
        if out is None:
            out = np.empty((begins.shape[0], total_bins, 2), dtype=np.int64)  # zeroed by the kernels' threads
        else:
            check_int64_out(out, (begins.shape[0], total_bins, 2), "histograms go to")
        bins, missing = _plain(bins)
        n_rows = int((ends - begins).sum())
        threads = max(1, min(K.n_threads(), n_rows // 8192))
        if threads > 1 and begins.shape[0] >= 4 * threads:
            task_ptr, task_nodes = _balance(ends - begins, threads)
            K.build_histograms_by_node(bins, cut_ptrs, gpair, rows, begins, ends, missing, task_ptr, task_nodes, out)
            return out
        # rows cut in equal slices, partial histograms only for the nodes two slices share
        K.build_histograms(bins, cut_ptrs, gpair, rows, begins, ends, missing, threads, out)
        return out

    @_on_own_threads
    def evaluate_splits(
        self,
        hist,
        records,
        cut_ptrs,
        feature_mask,
        scales,
        params,
        bounds=None,
        monotone=None,
        categorical=None,
        cat_bits=None,
    ) -> None:
        scale_g, scale_h = _host_scales(scales)
        n = hist.shape[0]
        feature = np.empty(n, np.int32)
        split_bin = np.empty(n, np.int32)
        default_left = np.empty(n, np.bool_)
        gain = np.empty(n, np.float64)
        left = np.empty((n, 2), np.int64)
        n_features = len(cut_ptrs) - 1
        mask = (
            np.ones((n, n_features), np.bool_)
            if feature_mask is None
            else np.broadcast_to(np.asarray(feature_mask, np.bool_), (n, n_features)).copy()
        )
        no_node = records[:, FEATURE] == NO_NODE
        mask[no_node] = False
        # both None when nothing is constrained: the kernel's unconstrained specialisation
        # then leaves the constrained arithmetic out (compiled only when used)
        if monotone is not None:
            bounds = np.ascontiguousarray(bounds, np.float64)
            monotone = np.ascontiguousarray(monotone, np.int8)
        else:
            bounds = None
        lam, alpha, mcw, mds = _regularisers(params)
        # None, not placeholder arrays, when nothing is categorical: the kernel's numeric
        # specialisation then leaves the categorical search out (compiled only when used)
        is_cat = None if categorical is None else np.ascontiguousarray(categorical.is_cat, np.uint8)
        bits = None if categorical is None else cat_bits
        K.evaluate_splits(
            hist,
            np.ascontiguousarray(records[:, SUM_G : SUM_H + 1]),
            cut_ptrs,
            np.ascontiguousarray(mask, np.bool_),
            1.0 / scale_g,
            1.0 / scale_h,
            lam,
            alpha,
            float(params.gamma),
            mcw,
            mds,
            bounds,
            monotone,
            feature,
            split_bin,
            default_left,
            gain,
            left,
            is_cat,
            int(getattr(params, "max_cat_to_onehot", 4)),
            int(getattr(params, "max_cat_threshold", 64)),
            bits,
        )
        # slots with no node keep their record as split_nodes made it
        feature[no_node], split_bin[no_node], default_left[no_node] = NO_NODE, -1, False
        gain[no_node], left[no_node] = 0.0, 0
        _records.write_splits(records, feature, split_bin, default_left, gain, left)

    def child_bounds(self, parents, bounds, monotone, scales, params) -> np.ndarray:
        """float64 (2k, 2): the weight bounds of the children of ``parents`` (rows 2j, 2j + 1)."""
        scale_g, scale_h = _host_scales(scales)
        out = np.empty((2 * parents.shape[0], 2), np.float64)
        K.child_bounds(
            np.ascontiguousarray(parents[:, FEATURE]),
            np.ascontiguousarray(parents[:, LEFT_G : LEFT_H + 1]),
            np.ascontiguousarray(parents[:, SUM_G : SUM_H + 1]),
            np.ascontiguousarray(bounds, np.float64),
            np.ascontiguousarray(monotone, np.int8),
            1.0 / scale_g,
            1.0 / scale_h,
            *_regularisers(params),
            out,
        )
        return out

    def leaf_weights(self, sums, scale_g, scale_h, params, bounds=None):
        return leaf_weights_on_host(sums, scale_g, scale_h, params, bounds)

    def node_bounds(self, left, right, feature, sums, monotone, scale_g, scale_h, params):
        return node_bounds_on_host(left, right, feature, sums, monotone, scale_g, scale_h, params)

    @_on_own_threads
    def partition(
        self, bins_by_feature, rows, records, max_rows=None, categorical=None, cat_bits=None, out=None
    ) -> np.ndarray:
        begins = np.ascontiguousarray(records[:, BEGIN])
        ends = np.ascontiguousarray(records[:, END])
        counts = np.stack([ends - begins, np.zeros_like(begins)], axis=1)  # unsplit: rows stay left
        split = np.flatnonzero(records[:, FEATURE] >= 0)
        left_counts = np.empty(split.size, np.int64)
        bins_by_feature, missing = _plain(bins_by_feature)
        nodes = (bins_by_feature, rows, begins[split], ends[split], records[split, FEATURE].astype(np.int32))
        split_bin = records[split, SPLIT_BIN].astype(np.int32)
        default_left = records[split, DEFAULT_LEFT].astype(np.bool_)
        if categorical is not None:
            is_cat = np.ascontiguousarray(categorical.is_cat, np.uint8)
            bits = np.ascontiguousarray(cat_bits[split], np.uint32)
            K.partition_categorical(*nodes, default_left, missing, is_cat, split_bin, bits, left_counts)
        else:
            # the kernel's buffer for the nodes that its slice boundaries cut
            size = int((ends[split] - begins[split]).sum())
            scratch = self._scratch(2 * size, rows.dtype)
            K.partition(*nodes, split_bin, default_left, missing, self.threads, scratch, left_counts)
        counts[split, 0] = left_counts
        counts[split, 1] = ends[split] - begins[split] - left_counts
        if out is not None:  # the kernels partition in place (the grower never asks: no walked leaves)
            out[...] = rows
        return counts

    @_on_own_threads
    def add_leaf_values(self, margin, rows, begins, ends, values, group):
        K.add_leaf_values(
            margin,
            rows,
            np.asarray(begins, np.int64),
            np.asarray(ends, np.int64),
            np.asarray(values, np.float32),
            int(group),
            self.threads,
        )

    def add_record_leaf_values(
        self, margin, rows, records, scales, params, group, bins=None, categorical=None, cat_bits=None
    ):
        """Add ``eta`` times the weight of every leaf record (feature -1) to its rows' margins
        (over the leaves' segments of ``rows``: the walk's arguments are not needed here)."""
        leaves = np.flatnonzero(records[:, FEATURE] == -1)
        scale_g, scale_h = _host_scales(scales)
        weights = leaf_weights_on_host(records[leaves, SUM_G : SUM_H + 1], scale_g, scale_h, params) * params.eta
        self.add_leaf_values(
            margin, rows, records[leaves, BEGIN], records[leaves, END], weights.astype(np.float32), group
        )

    def read_later(self, arrays):
        """The arrays, already on the host: a read with nothing to wait for."""
        return _Ready(list(arrays))

    @_on_own_threads
    def predict_margin(self, ensemble, values, tree_begin, tree_end, out):
        """Add trees ``[tree_begin, tree_end)`` of ``ensemble`` to ``out`` (float32 (n, n_groups))."""
        if tree_end <= tree_begin:
            return out
        splits, cat = _split_arrays(ensemble), ensemble.categorical_kernel_arrays()
        rest = (ensemble.offsets(), ensemble.groups(), np.ascontiguousarray(values, np.float32))
        if cat is not None:
            K.predict_margin_cat(*splits, ensemble.value, *cat, *rest, int(tree_begin), int(tree_end), out)
        else:
            K.predict_margin(*splits, ensemble.value, *rest, int(tree_begin), int(tree_end), out)
        return out

    @_on_own_threads
    def predict_leaf(self, ensemble, values, tree_begin, tree_end):
        out = np.empty((values.shape[0], max(tree_end - tree_begin, 0)), np.int32)
        if tree_end <= tree_begin:
            return out
        splits, cat = _split_arrays(ensemble), ensemble.categorical_kernel_arrays()
        rest = (ensemble.offsets(), np.ascontiguousarray(values, np.float32), int(tree_begin), int(tree_end), out)
        if cat is not None:
            K.predict_leaf_cat(*splits, *cat, *rest)
        else:
            K.predict_leaf(*splits, *rest)
        return out

    # -- stages of other modules: objective gradients, the sketch, SHAP -----------------------
    @_on_own_threads
    def logistic_gradient(self, margin, label, weight, scale_pos_weight: float):
        """float32 (n, 1) gradient and hessian of the logistic loss (float64 arithmetic).

        ``margin`` and ``label`` are (n,), ``weight`` (n,) or None; ``scale_pos_weight``
        multiplies the weight of rows labelled 1.
        """
        n = len(label)
        g = np.empty((n, 1), np.float32)
        h = np.empty((n, 1), np.float32)
        w = np.empty(0, np.float32) if weight is None else np.asarray(weight, np.float32)
        K.logistic_gradient(
            np.asarray(margin, np.float32), np.asarray(label, np.float32), w, float(scale_pos_weight), g[:, 0], h[:, 0]
        )
        return g, h

    def sketch_cuts(self, values, rows, features: range, max_bin: int, block_values: int, weights=None):
        """None: the CPU has no sketch of its own, the host sketch of :mod:`dgboost.quantile` applies."""
        return None

    def shap_engine(self, max_table_bytes: int | None = None):
        """The SHAP engine of this device (:class:`dgboost.explain.engines.CpuEngine`)."""
        from ..explain.engines import CpuEngine

        return CpuEngine(self, max_table_bytes)
