"""The GPU engine of exact greedy split search (``tree_method="exact"``; kernels/exact_split.cu).

The paper's two modes (Mitchell and Frank, 2017): levels shallower than
:data:`SORTED_FROM_DEPTH` are scanned *interleaved* (entries stay in column order; one
masked inclusive scan per node gives that node's running sums in every column), deeper
levels *sorted* (one stable radix sort of the entries by node per level, then one
segmented scan for all nodes). Both evaluate the CPU engine's candidates with the same int64
sums and float64 gains and choose by the same rule, so every mode gives the CPU engine's
tree. ``dgboost.testing.exact_modes`` forces either mode for the tests.

The presorted columns are made on the host by the CPU engine's own code
(:func:`dgboost.backend._cpu_exact.presort_columns`) and uploaded once per training.
"""

from __future__ import annotations

import numpy as np

from ..errors import DeviceMemoryError
from ._cpu_exact import exact_memory_estimate, forward_columns, parent_gains, presort_columns

__all__ = ["CUDAExactEngine", "SORTED_FROM_DEPTH", "device_available_bytes", "gpu_memory_estimate", "run_ends"]

#: The first depth scanned in sorted mode. A level of 2**d nodes costs the interleaved mode
#: 2**d rounds of seven passes over the entries (pairs, three scans, three candidate passes),
#: the sorted mode about eleven (keys, a 16-bit stable radix sort, pairs, two scans, three
#: candidate passes) whatever d: interleaved pays at the root only. An estimate until
#: ``benchmarks/exact_greedy.py --modes`` measures each level in both modes on the GPU.
SORTED_FROM_DEPTH = 1

_THREADS = 256
_FILE = "exact_split.cu"


def gpu_memory_estimate(n_rows: int, n_present: int, n_features: int) -> int:
    """Bytes the GPU engine holds: the CPU engine's (presorted entries, node map, pairs),
    4 bytes an entry of run ends, and a level's scratch, 64 bytes an entry at most: the
    interleaved mode's three int64 arrays and their scans (48), or the sorted mode's keys,
    the sort's order and its temporaries, and two int64 arrays and their scans; 8 bytes an
    entry of the candidate passes' per-entry gains (``entry_bits``); plus 16
    bytes a row for the rows' leaf order at the end of a tree."""
    return exact_memory_estimate(n_rows, n_present) + (4 + 64 + 8) * int(n_present) + 16 * int(n_rows)


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
        self.node_of_row = None
        self.gpair = None
        self.depth = 0

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

    def end_tree(self) -> None:
        self.gpair = None
        self.node_of_row = None

    def best_splits(self, first: int, totals, masks, bounds, monotone, scales, params) -> dict:
        """As :meth:`dgboost.backend._cpu_exact.CPUExactEngine.best_splits` (host arrays in and out)."""
        xp = self.xp
        m = int(totals.shape[0])
        totals = np.ascontiguousarray(totals, np.int64)
        constrained = bounds is not None
        inv_g, inv_h = 1.0 / float(scales[0]), 1.0 / float(scales[1])
        reg = (
            float(params.reg_lambda),
            float(params.alpha),
            float(params.min_child_weight),
            float(params.max_delta_step),
        )
        host_bounds = np.ascontiguousarray(bounds, np.float64) if constrained else np.zeros((1, 2))
        parent = np.empty(m, np.float64)  # the CPU engine's own function: the same parent gains
        parent_gains(totals, host_bounds, constrained, inv_g, inv_h, *reg, parent)
        out = {
            "best_bits": xp.zeros(m, xp.uint64),
            "best_key": xp.full(m, np.uint64(0xFFFF_FFFF_FFFF_FFFF), dtype=xp.uint64),
            "feature": xp.full(m, -1, xp.int32),
            "gain": xp.zeros(m, xp.float64),
            "value": xp.zeros(m, xp.float32),
            "default_left": xp.zeros(m, xp.uint8),
            "left": xp.zeros((m, 2), xp.int64),
        }
        level = (
            xp.asarray(totals),
            xp.asarray(parent),
            xp.asarray(host_bounds) if constrained else self._dummy_bounds,
            xp.asarray(np.ascontiguousarray(monotone, np.int8)) if constrained else self._dummy_signs,
            xp.asarray(np.ascontiguousarray(masks, np.bool_)) if masks is not None else self._dummy_mask,
            np.int32(masks is not None),
            np.int32(constrained),
            np.int32(self.n_features),
            np.float64(inv_g),
            np.float64(inv_h),
            *(np.float64(v) for v in reg),
            out["best_bits"],
            out["best_key"],
            out["feature"],
            out["gain"],
            out["value"],
            out["default_left"],
            out["left"],
        )
        if self.n_entries:
            if self.depth < SORTED_FROM_DEPTH:
                self._interleaved(first, m, level)
            else:
                self._sorted(first, m, level)
        self.depth += 1
        host = {k: self.backend.to_host(out[k]) for k in ("feature", "gain", "value", "default_left", "left")}
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
        """All nodes at once: entries stably sorted by node, segmented scans, candidates."""
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
        # a stable sort by slot keeps each node's entries in column order (feature, then value);
        # 16-bit keys where they fit halve the radix sort's passes
        order = xp.argsort(slot.astype(xp.uint16) if m < 0xFFFF else slot, kind="stable")
        seg_begin = xp.cumsum(seg_count, dtype=xp.int64) - seg_count
        g, h = xp.empty(n, xp.int64), xp.empty(n, xp.int64)
        self._launch("exact_sorted_pairs", n, (np.int64(n), order, slot, np.int32(m), self.rows, self.gpair, g, h))
        sg, sh = xp.cumsum(g), xp.cumsum(h)
        del g, h
        entry_bits = xp.empty(n, xp.uint64)  # pass 0's largest gain of each sorted position
        for phase in range(3):
            self._launch(
                "exact_sorted_candidates",
                n,
                (
                    np.int32(phase),
                    np.int64(n),
                    order,
                    slot,
                    np.int32(m),
                    self.ptr,
                    self.sorted_values,
                    self.forward,
                    seg_begin,
                    seg_count,
                    sg,
                    sh,
                    entry_bits,
                    *level,
                ),
            )

    def apply_splits(self, first: int, feature, value, default_left, left_child) -> None:
        xp = self.xp
        m = int(len(feature))
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
                xp.asarray(np.ascontiguousarray(feature, np.int32)),
                xp.asarray(np.ascontiguousarray(value, np.float32)),
                xp.asarray(np.ascontiguousarray(default_left, np.uint8)),
                xp.asarray(np.ascontiguousarray(left_child, np.int32)),
            ),
        )

    def leaf_rows(self, leaf_of_node: np.ndarray, n_leaves: int):
        """(rows int32 (n,) on the device in leaf order, counts int64 (n_leaves,) on the host)."""
        xp = self.xp
        leaf = xp.asarray(np.ascontiguousarray(leaf_of_node, np.int32))[self.node_of_row]
        rows = xp.argsort(leaf, kind="stable").astype(xp.int32)  # a leaf's rows ascending
        counts = self.backend.to_host(xp.bincount(leaf, minlength=n_leaves)).astype(np.int64)
        return rows, counts
