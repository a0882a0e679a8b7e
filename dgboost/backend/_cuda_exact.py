"""The GPU engine of exact greedy split search (``tree_method="exact"``; kernels/exact_split.cu).

The paper's two modes (Mitchell and Frank, 2017): levels shallower than
:data:`SORTED_FROM_DEPTH` are scanned *interleaved* (entries stay in column order; one
masked inclusive scan per node gives that node's running sums in every column), the others
*sorted* (the level's entries grouped by node and feature in column order, one scan for
all nodes). The sorted mode's grouping is kept from level to level by a stable partition of
each split node's entries into its children's, not by a sort per level. Both modes evaluate
the CPU engine's candidates with the same int64 sums and float64 gains and choose by the
same rule, so every mode gives the CPU engine's tree. ``dgboost.testing.exact_modes`` forces
either mode for the tests. docs/design.md §12.

The presorted columns are made on the host by the CPU engine's own code
(:func:`dgboost.backend._cpu_exact.presort_columns`) and uploaded once per training.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..errors import DeviceMemoryError
from ._cpu_exact import exact_memory_estimate, forward_columns, level_inputs, presort_columns

__all__ = ["CUDAExactEngine", "SORTED_FROM_DEPTH", "device_available_bytes", "gpu_memory_estimate", "run_ends"]

#: The first depth scanned in sorted mode: every level. The sorted mode no longer sorts: its
#: layout (entries grouped by node and feature, in column order) is the columns at the root
#: and the last level's, stably partitioned, below; a level costs it about ten passes over
#: the level's entries whatever its node count, where the interleaved mode pays seven passes
#: over all entries per node (2**d at depth d). On an H200 the sort-per-level sorted mode was
#: already faster from depth 3 (benchmarks/results/exact_greedy_h200.json, ``scan_modes``);
#: without the sort it is as cheap as the interleaved mode at the root (one partition against
#: a third scan) and the interleaved root would cost a sort to start the layout at depth 1.
#: ``dgboost.testing.exact_modes`` still forces either mode at every depth for the tests.
SORTED_FROM_DEPTH = 0

_THREADS = 256
_FILE = "exact_split.cu"


def gpu_memory_estimate(n_rows: int, n_present: int, n_features: int) -> int:
    """Bytes the GPU engine holds: the CPU engine's (presorted entries, node map, pairs),
    4 bytes an entry of run ends, 32 of the sorted mode's two layout buffers (entry index,
    row, value), and a level's scratch, 48 bytes an entry at most: the interleaved mode's
    three int64 arrays and their scans, or the sorted mode's two int64 arrays and their scans
    (the partition's flags and their scan come and go before them; a layout made by a sort
    after interleaved levels, its keys and order, fits in the same); 8 bytes an entry of the
    candidate passes' per-entry gains (``entry_bits``); plus 16 bytes a row for the rows'
    leaf order at the end of a tree."""
    return exact_memory_estimate(n_rows, n_present) + (4 + 32 + 48 + 8) * int(n_present) + 16 * int(n_rows)


def device_available_bytes(xp) -> tuple[int, int]:
    """(bytes free on the current device, CuPy's pool's free bytes included; total bytes)."""
    free, total = xp.cuda.runtime.memGetInfo()
    return free + xp.get_default_memory_pool().free_bytes(), total


def run_ends(ptr: np.ndarray, sorted_values: np.ndarray, relative: bool = False) -> np.ndarray:
    """For each entry, the end (exclusive) of its run of equal values within its column:
    int64 (nnz,) absolute indices, or int32 (nnz,) relative to the column's first entry."""
    out = np.empty(sorted_values.shape[0], np.int32 if relative else np.int64)
    for f in range(ptr.shape[0] - 1):
        lo, hi = int(ptr[f]), int(ptr[f + 1])
        if hi == lo:
            continue
        v = sorted_values[lo:hi]
        starts = np.flatnonzero(np.concatenate([[True], v[1:] != v[:-1]]))
        ends = np.append(starts[1:], hi - lo)
        out[lo:hi] = (0 if relative else lo) + np.repeat(ends, np.diff(np.append(starts, hi - lo)))
    return out


class _Layout(NamedTuple):
    """A level's entries grouped by (node slot, feature), each group in column order (device
    arrays): ``begin`` int64 (groups + 1,) the groups' first positions and the live count;
    ``order`` int64 the positions' entry indices (None: the columns themselves), ``row``
    int32, ``val`` float32; ``which`` the buffer pair it lives in (-1: the columns); ``depth``."""

    begin: object
    order: object
    row: object
    val: object
    which: int
    depth: int


def _children_of(left_child: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The next level's (parent slot int32, 1 for a left child uint8) per child slot, from a
    level's ``left_child`` node ids (-1: a leaf); the children are numbered from the smallest."""
    split = np.flatnonzero(left_child >= 0)
    if not split.size:
        return np.zeros(0, np.int32), np.zeros(0, np.uint8)
    slots = left_child[split] - left_child[split].min()
    m = int(slots.max()) + 2
    parent = np.zeros(m, np.int32)
    side = np.zeros(m, np.uint8)
    parent[slots], parent[slots + 1] = split, split
    side[slots] = 1
    return parent, side


class _Packed(list):
    """Device views of one upload; ``base_bytes`` the whole uint8 buffer, ``offsets`` each
    part's first byte in it."""

    base_bytes: object
    offsets: list


def _upload_packed(backend, parts: list[np.ndarray]) -> _Packed:
    """Upload host arrays in one transfer (the backend's: small ones staged through pinned
    memory, the host not waiting): their device views. Each part starts 8-byte aligned."""
    offsets, end = [], 0
    for a in parts:
        offsets.append(end)
        end += -(-a.nbytes // 8) * 8
    host = np.zeros(max(end, 8), np.uint8)
    for a, off in zip(parts, offsets):
        host[off : off + a.nbytes] = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    device = backend.asarray(host)
    views = _Packed(device[off : off + a.nbytes].view(a.dtype).reshape(a.shape) for a, off in zip(parts, offsets))
    views.base_bytes, views.offsets = device, offsets
    return views


def _read_packed(backend, packed: _Packed, first: int, like: list[np.ndarray]) -> list[np.ndarray]:
    """Parts ``first ..`` of an upload, back on the host in one read (``like``: their host
    originals, for dtypes and shapes)."""
    begin = packed.offsets[first]
    host = backend.to_host(packed.base_bytes[begin:])
    out = []
    for a, off in zip(like, packed.offsets[first:]):
        off -= begin
        out.append(host[off : off + a.nbytes].view(a.dtype).reshape(a.shape).copy())
    return out


class CUDAExactEngine:
    """Exact greedy split search on a CUDA backend's device.

    Parameters
    ----------
    backend : CUDABackend
    values : cupy.ndarray of float32, shape (n, F)
        The training rows (NaN missing), on the device.
    """

    name = "cuda"

    def __init__(self, backend, values):
        self.backend = backend
        xp = self.xp = backend.xp
        self.values = xp.ascontiguousarray(xp.asarray(values, dtype=xp.float32))
        self.n_rows, self.n_features = (int(s) for s in self.values.shape)
        host = backend.to_host(self.values)
        n_present = int(host.size - np.count_nonzero(np.isnan(host)))
        self._check_memory(n_present)
        ptr, rows, sorted_values = presort_columns(host)
        self.forward = xp.asarray(forward_columns(ptr, sorted_values, self.n_rows).astype(np.uint8))
        # relative to each column's first entry: int32 whatever the number of entries
        self.run_end = xp.asarray(run_ends(ptr, sorted_values, relative=True))
        self.ptr = xp.asarray(ptr)
        self.rows = xp.asarray(rows)
        self.sorted_values = xp.asarray(sorted_values)
        self.n_entries = int(ptr[-1])
        self._dummy_bounds = xp.zeros(2, xp.float64)
        self._dummy_signs = xp.zeros(1, xp.int8)
        self._dummy_mask = xp.ones(1, xp.bool_)
        self._root_children = (xp.zeros(1, xp.int32), xp.ones(1, xp.uint8))  # the root: one left child
        self.node_of_row = None
        self.gpair = None
        self.depth = 0
        self._layout_buffers = None
        self._layout = None
        self._children = None

    def _check_memory(self, n_present: int) -> None:
        need = gpu_memory_estimate(self.n_rows, n_present, self.n_features)
        available, total = device_available_bytes(self.xp)
        if need > available:
            raise DeviceMemoryError(
                f"tree_method='exact' needs about {need / 2**30:.2f} GiB of GPU memory for {self.n_rows} rows with "
                f"{n_present} present values (presorted entries, node map and a level's scans) but "
                f"cuda:{self.backend.device_id} has {available / 2**30:.2f} GiB free of {total / 2**30:.2f} GiB; "
                "use tree_method='hist' or fewer rows"
            )

    def _launch(self, name: str, n: int, args) -> None:
        self.backend._launch(_FILE, name, n, args, threads=_THREADS)  # the backend's launcher: grid-stride loops

    # -- a tree ------------------------------------------------------------------------------
    def begin_tree(self, gpair) -> None:
        self.gpair = self.xp.ascontiguousarray(gpair, dtype=self.xp.int32)
        self.node_of_row = self.xp.zeros(self.n_rows, self.xp.int32)
        self.depth = 0
        self._layout = None
        self._children = None

    def end_tree(self) -> None:
        self.gpair = None
        self.node_of_row = None
        self._layout = None
        self._children = None

    def best_splits(self, first: int, totals, masks, bounds, monotone, scales, params) -> dict:
        """As :meth:`dgboost.backend._cpu_exact.CPUExactEngine.best_splits` (host arrays in and out)."""
        m = int(totals.shape[0])
        constrained = bounds is not None
        # the CPU engine's own function: the same parent gains
        totals, host_bounds, inv_g, inv_h, reg, parent = level_inputs(totals, bounds, scales, params)
        # one upload of the level's inputs and its outputs' starting values, one read of the
        # outputs: two transfers a level, whatever the node count
        outputs = [
            np.zeros(m, np.uint64),  # best_bits
            np.full(m, 0xFFFF_FFFF_FFFF_FFFF, np.uint64),  # best_key
            np.full(m, -1, np.int32),  # feature
            np.zeros(m, np.float64),  # gain
            np.zeros(m, np.float32),  # value
            np.zeros(m, np.uint8),  # default_left
            np.zeros((m, 2), np.int64),  # left
        ]
        inputs = [totals, parent]
        if constrained:
            inputs += [host_bounds, np.ascontiguousarray(monotone, np.int8)]
        if masks is not None:
            inputs.append(np.ascontiguousarray(masks, np.bool_))
        device = _upload_packed(self.backend, inputs + outputs)
        views = device[: len(inputs)]
        out = device[len(inputs) :]
        level = (
            views[0],
            views[1],
            views[2] if constrained else self._dummy_bounds,
            views[3] if constrained else self._dummy_signs,
            views[-1] if masks is not None else self._dummy_mask,
            np.int32(masks is not None),
            np.int32(constrained),
            np.int32(self.n_features),
            np.float64(inv_g),
            np.float64(inv_h),
            *(np.float64(v) for v in reg),
            *out,
        )
        if self.n_entries:
            if self.depth < SORTED_FROM_DEPTH:
                self._layout = None
                self._interleaved(first, m, level)
            else:
                self._sorted(first, m, level)
        self.depth += 1
        # the decisions, one read (the level's one synchronisation); not the choice's scratch
        read = _read_packed(self.backend, device, len(inputs) + 2, outputs[2:])
        host = dict(zip(("feature", "gain", "value", "default_left", "left"), read))
        host["default_left"] = host["default_left"].astype(bool)
        return host

    def _interleaved(self, first: int, m: int, level: tuple) -> None:
        """Node by node: its entries' pairs in column order, their inclusive scans, its candidates."""
        xp, n = self.xp, self.n_entries
        g, h, c = (xp.empty(n, xp.int64) for _ in range(3))
        entry_bits = xp.empty(n, xp.uint64)  # pass 0's largest gain of each entry (kernels/exact_split.cu)
        for k in range(m):
            self._launch(
                "exact_node_entries",
                n,
                (np.int64(n), self.rows, self.node_of_row, np.int32(first + k), self.gpair, g, h, c),
            )
            sg, sh, sc = xp.cumsum(g), xp.cumsum(h), xp.cumsum(c)
            for phase in range(3):
                self._launch(
                    "exact_interleaved_candidates",
                    n,
                    (
                        np.int32(phase),
                        np.int32(k),
                        np.int64(n),
                        self.ptr,
                        self.sorted_values,
                        self.run_end,
                        self.forward,
                        sg,
                        sh,
                        sc,
                        entry_bits,
                        *level,
                    ),
                )

    def _sorted(self, first: int, m: int, level: tuple) -> None:
        """All nodes at once: the layout's pairs, their inclusive scans, the candidates."""
        xp, n = self.xp, self.n_entries
        lay = self._layout_for(first, m)
        n_segments = np.int64(m * self.n_features)
        g, h = xp.empty(n, xp.int64), xp.empty(n, xp.int64)
        self._launch("exact_layout_pairs", n, (np.int64(n), lay.begin, n_segments, lay.row, self.gpair, g, h))
        # past the live positions g and h hold garbage: no live position reads a sum there
        sg, sh = xp.cumsum(g), xp.cumsum(h)
        del g, h
        entry_bits = xp.empty(n, xp.uint64)  # pass 0's largest gain of each position
        for phase in range(3):
            self._launch(
                "exact_layout_candidates",
                n,
                (
                    np.int32(phase),
                    np.int64(n),
                    lay.begin,
                    lay.order,
                    lay.row,
                    lay.val,
                    self.node_of_row,
                    np.int32(first),
                    self.ptr,
                    self.forward,
                    sg,
                    sh,
                    entry_bits,
                    n_segments,
                    *level,
                ),
            )

    # -- the layout: the level's entries grouped by (node, feature), in column order --------
    def _buffers(self, which: int):
        """Layout buffers ``which`` (0 or 1): order int64, row int32, value float32 (n,)."""
        if self._layout_buffers is None:
            xp, n = self.xp, max(self.n_entries, 1)
            self._layout_buffers = [
                (xp.empty(n, xp.int64), xp.empty(n, xp.int32), xp.empty(n, xp.float32)) for _ in range(2)
            ]
        return self._layout_buffers[which]

    def _layout_for(self, first: int, m: int) -> "_Layout":
        """The layout of the level ``first .. first + m - 1``: the columns' at the root, the
        last level's partitioned into its children where the last level was sorted, else made
        by a stable sort."""
        xp = self.xp
        last = self._layout
        if self.depth == 0:
            src = _Layout(self.ptr, None, self.rows, self.sorted_values, -1, -1)
            parent_d, side_d = self._root_children
        elif last is not None and last.depth == self.depth - 1 and self._children is not None:
            src = last
            parent_d, side_d = self._children
        else:
            self._layout = self._sorted_layout(first, m)
            return self._layout
        which = 0 if src.which != 0 else 1
        order, row, val = self._buffers(which)
        n, n_features = self.n_entries, self.n_features
        src_segments = np.int64(src.begin.shape[0] - 1)
        flag = xp.empty(n, xp.int64)
        self._launch(
            "exact_partition_flags",
            n,
            (
                np.int64(n),
                src.begin,
                src_segments,
                src.row,
                self.node_of_row,
                np.int32(first),
                np.int32(m),
                side_d,
                self.gpair,
                flag,
            ),
        )
        lefts = xp.empty(n + 1, xp.int64)  # exclusive scan of the flags
        lefts[:1] = 0
        lefts[1:] = xp.cumsum(flag)
        del flag
        count = xp.empty(m * n_features, xp.int64)
        self._launch(
            "exact_partition_counts",
            m * n_features,
            (np.int32(m), np.int32(n_features), parent_d, side_d, src.begin, lefts, count),
        )
        begin = xp.empty(m * n_features + 1, xp.int64)
        begin[:1] = 0
        begin[1:] = xp.cumsum(count)
        self._launch(
            "exact_partition_scatter",
            n,
            (
                np.int64(n),
                src.begin,
                src_segments,
                np.int32(src.order is None),
                src.order if src.order is not None else self.ptr,  # unused for the columns
                src.row,
                src.val,
                self.node_of_row,
                np.int32(first),
                np.int32(m),
                parent_d,
                side_d,
                self.gpair,
                self.ptr,
                np.int32(n_features),
                lefts,
                begin,
                order,
                row,
                val,
            ),
        )
        self._layout = _Layout(begin, order, row, val, which, self.depth)
        return self._layout

    def _sorted_layout(self, first: int, m: int) -> "_Layout":
        """A layout made by a stable sort of the entries by node slot (after interleaved levels)."""
        xp, n, n_features = self.xp, self.n_entries, self.n_features
        slot = xp.empty(n, xp.uint32)
        seg_count = xp.zeros(m * n_features, xp.int32)
        self._launch(
            "exact_sort_keys",
            n,
            (
                np.int64(n),
                self.ptr,
                np.int32(n_features),
                self.rows,
                self.node_of_row,
                np.int32(first),
                np.int32(m),
                self.gpair,
                slot,
                seg_count,
            ),
        )
        # a stable sort by slot keeps each node's entries in column order (feature, then
        # value); 16-bit keys where they fit halve the radix sort's passes
        order = xp.argsort(slot.astype(xp.uint16) if m < 0xFFFF else slot, kind="stable").astype(xp.int64)
        _, row, val = self._buffers(0)
        self._launch("exact_layout_gather", n, (np.int64(n), order, self.rows, self.sorted_values, row, val))
        begin = xp.zeros(m * n_features + 1, xp.int64)
        begin[1:] = xp.cumsum(seg_count, dtype=xp.int64)
        return _Layout(begin, order, row, val, 0, self.depth)

    def apply_splits(self, first: int, feature, value, default_left, left_child) -> None:
        m = int(len(feature))
        parent, side = _children_of(np.asarray(left_child))
        # one upload: the level's decisions and the next level's children (for its partition)
        device = _upload_packed(
            self.backend,
            [
                np.ascontiguousarray(feature, np.int32),
                np.ascontiguousarray(value, np.float32),
                np.ascontiguousarray(default_left, np.uint8),
                np.ascontiguousarray(left_child, np.int32),
                parent,
                side,
            ],
        )
        self._children = (device[4], device[5])
        self._launch(
            "exact_apply_splits",
            self.n_rows,
            (
                np.int64(self.n_rows),
                np.int32(self.n_features),
                self.values,
                self.node_of_row,
                np.int32(first),
                np.int32(m),
                *device[:4],
            ),
        )

    def leaf_rows(self, leaf_of_node: np.ndarray, n_leaves: int):
        """(rows int32 (n,) on the device in leaf order, counts int64 (n_leaves,) on the host)."""
        xp = self.xp
        leaf = xp.asarray(np.ascontiguousarray(leaf_of_node, np.int32))[self.node_of_row]
        rows = xp.argsort(leaf, kind="stable").astype(xp.int32)  # a leaf's rows ascending
        counts = self.backend.to_host(xp.bincount(leaf, minlength=n_leaves)).astype(np.int64)
        return rows, counts
