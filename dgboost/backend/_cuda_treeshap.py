"""TreeSHAP on a CUDA GPU: the path table and its weight tables on the device, one thread per row.

``kernels/treeshap_rows.cu`` runs the CPU engine's kernel (table method where a path has a
weight table, else the quadrature up to ``treeshap.QUADRATURE_MAX_K`` elements, else
EXTEND / UNWOUND-SUM) with one thread per row, summing the paths per
slice of ``treeshap.SLICE_PATHS`` as the CPU does (for few rows, the slices run in parallel
and their sums are added in order), so the values are bitwise those of the CPU engine with
the same table budget, and do not depend on how the rows are batched or spread over
workers. The tables are chosen as on the CPU (:func:`~dgboost.explain.tables.table_layout`)
and filled on the device; everything is uploaded once per (path table, budget, device) in a
process. Interaction values take the CPU's default quadrature method the same way, in slices
of ``treeshap.interaction_slice_paths`` (bitwise the CPU's for paths of at most 16
elements; longer ones take the path method, O(k^3)). Paths longer than ``SHAP_MAX_LEN``
elements (trees deeper than 63) are computed by the CPU engine and added.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numba import njit

from ..explain.paths import PathTable, flagged_category_arrays
from ..explain.tables import DEFAULT_MAX_K, table_layout
from ._device_cache import DeviceCache, device_bytes
from ._upload import to_device

__all__ = ["DevicePathTable", "device_path_table", "shap_values_device", "shap_interactions_device"]

_MAX_LEN = 64  # kernels/treeshap_rows.cu SHAP_MAX_LEN
_THREADS = 128  # rows per block (the kernel's launch bound)
_ACC_SMEM_BYTES = 48 << 10  # shared accumulators up to this size (no opt-in needed)
_FILL_THREADS = 256
_MAX_GRID_X = (1 << 31) - 1
_MAX_GRID_Z = 65535
_PARTIAL_BYTES = 256 << 20  # slice sums held at once by shap_rows' slice mode
# shap_rows runs the slices of paths in parallel below this many (row, group) pairs: about
# one wave of threads on a 132-SM GPU (132 SMs x 2048); above it the rows alone fill the GPU
# (docs/performance-notes.md, "GPU SHAP: slices of paths in parallel").
_SLICES_BELOW = 1 << 18
# shap_rows' instance by launch mode (slice mode or not): how many elements of a tabled path
# it loads together. Eight (167 registers a thread) keep more table reads in flight, which
# paid in slice mode (case c 1.09x, the imported model 1.04x against four) and not in the
# one-thread-a-row mode of many rows, where the registers cost a block an SM (case a 0.88x)
# (benchmarks/results/shap_table_loads/). The same bits either way: the sums keep their order.
_ROWS_KERNEL = {True: "shap_rows_loads8", False: "shap_rows"}

_CACHE = DeviceCache()  # uploaded path tables by (fingerprint, budget, max_k, device)


class _HostArrays:
    """What :class:`DevicePathTable` uploads, made on the host (:func:`_host_arrays`)."""

    __slots__ = ("arrays", "group_paths", "group_ptr", "too_long", "selected", "selected_offsets", "total")


@njit(cache=True, nogil=True)
def _by_group(computed, path_group, n_groups):
    """``(by_group, group_ptr)``: the paths ``computed`` (int64, ascending) ordered by their
    group, in path order within a group (a stable sort of their groups, by counting: a
    depth-16 model's 1.56M paths took NumPy's stable argsort 21 ms on an H200's host), and
    where each group's run starts (int64, (n_groups + 1,))."""
    group_ptr = np.zeros(n_groups + 1, np.int64)
    for i in range(computed.shape[0]):
        group_ptr[path_group[computed[i]] + 1] += 1
    for g in range(n_groups):
        group_ptr[g + 1] += group_ptr[g]
    at = group_ptr[:-1].copy()
    by_group = np.empty(computed.shape[0], np.int64)
    for i in range(computed.shape[0]):
        g = path_group[computed[i]]
        by_group[at[g]] = computed[i]
        at[g] += 1
    return by_group, group_ptr


def _element_arrays(table: PathTable) -> dict:
    """The table's own arrays as :class:`DevicePathTable` uploads them (its elements and paths:
    most of the bytes), in the dtypes the kernels read; no copy where the dtype is right."""
    cat_offset, cat_pool = flagged_category_arrays(table)  # category sets behind a header word
    return {
        "feature": np.ascontiguousarray(table.feature, dtype=np.int32),
        "lower": table.lower,
        "upper": table.upper,
        "missing": np.ascontiguousarray(table.is_missing_branch, dtype=np.uint8),
        "cat_offset": cat_offset,
        "cat_pool": cat_pool,
        "zero_fraction": table.zero_fraction,
        "path_offsets": np.ascontiguousarray(table.path_offsets, dtype=np.int64),
        "path_v": table.path_v,
    }


def _host_arrays(
    table: PathTable, max_table_bytes: int, max_k: int = DEFAULT_MAX_K, elements: dict | None = None
) -> _HostArrays:
    """The host side of :class:`DevicePathTable`: every array it uploads, and the weight-table
    layout the device fills.

    Parameters
    ----------
    table : PathTable
    max_table_bytes, max_k : int
        The weight-table budget (:func:`~dgboost.explain.tables.table_layout`).
    elements : dict, optional
        :func:`_element_arrays` of ``table``, when made already.

    Returns
    -------
    _HostArrays
        ``arrays`` (the uploaded arrays by name, see :class:`DevicePathTable`),
        ``group_paths`` int64 (n_computed,) and ``group_ptr`` int64 (n_groups + 1,): the
        paths the kernel computes by group; ``too_long`` bool (n_paths,): paths the kernel
        does not hold; ``selected`` / ``selected_offsets`` int64 (n_sel,) and ``total``: the
        tabled paths, where their tables start, and the entries of all tables.
    """
    lengths = table.path_lengths  # int64
    too_long = lengths > _MAX_LEN
    computed = np.flatnonzero(~too_long & (lengths > 1))
    by_group, group_ptr = _by_group(computed, table.path_group, table.n_groups)
    table_offsets, selected, selected_offsets, total = table_layout(table, max_table_bytes, max_k)
    host = {
        **(_element_arrays(table) if elements is None else elements),
        "table_offsets": table_offsets,
        "group_paths": by_group.astype(np.int32),
        "group_ptr": group_ptr,
        # the path method's divisions, done once: 1 / n for n <= _MAX_LEN + 1 (1 / z per
        # element is made on the device where needed: DevicePathTable.zero_fraction_inv)
        "recip": np.divide(
            1.0,
            np.arange(_MAX_LEN + 2, dtype=np.float64),
            out=np.zeros(_MAX_LEN + 2),
            where=np.arange(_MAX_LEN + 2) > 0,
        ),
        **_node_constants(),
    }
    out = _HostArrays()
    out.arrays, out.group_paths, out.group_ptr, out.too_long = host, by_group, group_ptr, too_long
    out.selected, out.selected_offsets, out.total = selected, selected_offsets, total
    return out


class DevicePathTable:
    """A path table, its group index and its weight tables on the current CUDA device.

    Attributes
    ----------
    arrays : dict of str -> cupy.ndarray
        Element arrays (``feature`` int32, ``lower`` / ``upper`` float32, ``missing`` uint8,
        ``cat_offset`` int64 and ``cat_pool`` uint32 (the category sets behind a header word,
        :func:`~dgboost.explain.paths.flagged_category_arrays`),
        ``zero_fraction`` float64; (n_elements,)), ``path_offsets`` int64 (n_paths + 1,),
        ``path_v`` float64 and ``table_offsets`` int64 (n_paths,), ``group_paths`` int32:
        the paths the kernel computes, by group then path order, ``group_ptr`` int64
        (n_groups + 1,), ``table_values`` float64 (the weight tables).
    oversize : PathTable or None
        Paths longer than the kernel holds (computed on the CPU), if any.
    quadrature : dict or None
        The interaction kernel's per-node constants (``_quadrature_arrays``), once made.
    shortest_untabled, longest_untabled : int
        The fewest and the most non-bias elements of a path the kernels compute without a
        weight table (0: every such path has one).
    unused : cupy.ndarray
        One float64: the pointer a kernel gets for an array it does not read in a launch.
    """

    def __init__(self, table: PathTable, max_table_bytes: int, max_k: int = DEFAULT_MAX_K):
        import cupy

        from ._nvrtc import get_module

        elements = _element_arrays(table)
        device_id = cupy.cuda.Device().id

        def upload_elements():
            with cupy.cuda.Device(device_id):
                return to_device(elements)

        # the elements (most of the bytes) go up while the group index and table layout are made
        with ThreadPoolExecutor(max_workers=1) as pool:
            uploading = pool.submit(upload_elements)
            prep = _host_arrays(table, max_table_bytes, max_k, elements)
            rest = to_device({k: v for k, v in prep.arrays.items() if k not in elements})
            uploaded = {**uploading.result(), **rest}
        host = prep.arrays
        by_group, group_ptr, too_long = prep.group_paths, prep.group_ptr, prep.too_long
        selected, selected_offsets, total = prep.selected, prep.selected_offsets, prep.total
        self.arrays = {k: uploaded[k] for k in host}
        self._group_paths, self._group_ptr, self._n_paths = by_group, group_ptr, int(table.n_paths)
        self._slice_ptrs: dict = {}
        values = cupy.empty(max(total, 1), dtype=cupy.float64)
        if total:
            ends = cupy.asarray(np.append(selected_offsets, total).astype(np.int64))
            blocks = int(min(-(-total // _FILL_THREADS), 1 << 20))
            get_module("treeshap_rows.cu").get_function("weight_tables")(
                (blocks,),
                (_FILL_THREADS,),
                (
                    self.arrays["path_offsets"],
                    self.arrays["zero_fraction"],
                    cupy.asarray(selected),
                    ends,
                    np.int64(len(selected)),
                    values,
                ),
            )
        self.arrays["table_values"] = values
        self.table_bytes = int(total) * 8
        self.n_groups = int(table.n_groups)
        self.quadrature = None  # the interaction kernel's constants, made on first use
        # the fewest elements of a computed path without a table (0: none), so shap_rows
        # reserves the quadrature's shared memory only where some path may take it
        untabled_k = table.path_lengths[by_group[host["table_offsets"][by_group] < 0]] - 1
        self.shortest_untabled = int(untabled_k.min()) if len(untabled_k) else 0
        self.longest_untabled = int(untabled_k.max()) if len(untabled_k) else 0
        self._zero_fraction_inv = None
        self.unused = cupy.empty(1, dtype=cupy.float64)  # a pointer argument a kernel does not read
        self.oversize = table.select_paths(np.flatnonzero(too_long)) if too_long.any() else None

    def zero_fraction_inv(self):
        """``1 / zero_fraction`` per element (0 where it is 0), float64 (n_elements,) on the
        device, made at first use: only the path method (EXTEND / UNWOUND-SUM) reads it. An
        IEEE division, as the CPU's, so the same bits; made here rather than uploaded, it costs
        the host nothing (8 bytes an element: 150 MB for a model of 18.7M path elements)."""
        if self._zero_fraction_inv is None:
            import cupy

            z = self.arrays["zero_fraction"]
            inv = cupy.zeros(z.shape, dtype=cupy.float64)
            on = z != 0.0
            inv[on] = 1.0 / z[on]
            self._zero_fraction_inv = inv
        return self._zero_fraction_inv

    def slice_ptr(self, slice_paths: int):
        """``(slice_ptr, n_slices)``: int64 (n_groups, n_slices + 1) on the device, the first
        entry of ``group_paths`` of each group and slice of ``slice_paths`` paths (by path
        index) and the end; for shap_rows' slice mode."""
        import cupy

        if slice_paths not in self._slice_ptrs:
            n_slices = max(1, -(-self._n_paths // slice_paths))
            starts = np.arange(n_slices + 1, dtype=np.int64) * slice_paths
            ptr = np.empty((self.n_groups, n_slices + 1), np.int64)
            for g in range(self.n_groups):
                lo, hi = self._group_ptr[g], self._group_ptr[g + 1]
                ptr[g] = lo + np.searchsorted(self._group_paths[lo:hi], starts)
            self._slice_ptrs[slice_paths] = (cupy.asarray(ptr), n_slices)
        return self._slice_ptrs[slice_paths]

    @property
    def nbytes(self) -> int:
        """Device bytes held: the arrays, weight tables and interaction constants."""
        quad = [v for v in (self.quadrature or {}).values() if hasattr(v, "nbytes")]
        return device_bytes(*self.arrays.values(), *quad)


def _clear_cache() -> None:
    """Forget every uploaded table (benchmarks time a first call as a fresh process pays it)."""
    _CACHE.clear()


def device_path_table(table: PathTable, max_table_bytes: int, max_k: int = DEFAULT_MAX_K) -> DevicePathTable:
    """The uploaded form of ``table`` on the current device, built once per process (kept
    while recently used: :class:`~dgboost.backend._device_cache.DeviceCache`)."""
    import cupy

    key = (table.fingerprint, int(max_table_bytes), int(max_k), cupy.cuda.Device().id)
    return _CACHE.get(key, lambda: DevicePathTable(table, max_table_bytes, max_k))


def shap_values_device(
    table: PathTable, rows, max_table_bytes: int, max_k: int = DEFAULT_MAX_K, quad_max_k: int | None = None
):
    """Path-dependent SHAP contributions on the GPU.

    Parameters
    ----------
    table : PathTable
    rows : numpy.ndarray or cupy.ndarray, shape (n, F)
        F at least ``table.n_features``; NaN marks a missing value (converted to float32).
    max_table_bytes, max_k : int
        The weight-table budget (as :func:`~dgboost.explain.tables.build_tables`).
    quad_max_k : int, optional
        Paths without a table of at most this many elements take the quadrature, longer
        ones EXTEND / UNWOUND-SUM; None: ``treeshap.QUADRATURE_MAX_K`` (the CPU's table
        method), 0: the path method for all (the CPU's ``shap_values_path``).

    Returns
    -------
    cupy.ndarray of float64, shape (n, n_groups, F + 1)
        Contributions, bias (the expected value) last; the CPU engine's layout and values.
    """
    import cupy

    from ..explain import treeshap

    X = cupy.ascontiguousarray(cupy.asarray(rows, dtype=cupy.float32))
    n, F = X.shape
    dev = device_path_table(table, max_table_bytes, max_k)
    quad_max_k = treeshap.QUADRATURE_MAX_K if quad_max_k is None else int(quad_max_k)
    if not 0 <= quad_max_k <= _QUAD_MAX_K:
        from ..errors import DGBoostValueError

        raise DGBoostValueError(f"quad_max_k must be in [0, {_QUAD_MAX_K}], got {quad_max_k}")
    G = dev.n_groups
    out = cupy.empty((n, G, F + 1), dtype=cupy.float64)
    if n:
        threads = _THREADS
        quad_warp_bytes = _QUAD_MAX_K * _QUAD_MAX_NQ * 8 if 0 < dev.shortest_untabled <= quad_max_k else 0
        while threads > 32 and threads * F * 8 + threads // 32 * quad_warp_bytes > _ACC_SMEM_BYTES:
            threads -= 32
        shared = threads * F * 8 + threads // 32 * quad_warp_bytes <= _ACC_SMEM_BYTES
        # dynamic shared memory: the accumulators (if they fit), then each warp's g_on
        shared_bytes = (threads * F * 8 if shared else 0) + threads // 32 * quad_warp_bytes
        if -(-n // threads) > _MAX_GRID_X:
            from ..errors import DGBoostValueError

            raise DGBoostValueError(f"{n} rows exceed one kernel launch; explain them in chunks (TreeExplainer does)")
        slice_paths = treeshap.SLICE_PATHS  # read per call: tests shrink it
        slice_ptr, n_slices = dev.slice_ptr(slice_paths)
        if n * G < _SLICES_BELOW and 1 < n_slices <= _MAX_GRID_Z:
            _shap_rows_by_slice(
                dev, X, out, threads, shared, shared_bytes, slice_paths, slice_ptr, n_slices, quad_max_k
            )
        else:
            # wide rows: the accumulator is a scratch row per thread (out takes whole slices)
            scratch = dev.unused if shared else cupy.empty((n, G, F), dtype=cupy.float64)
            _launch_shap_rows(
                dev,
                X,
                out,
                threads,
                shared,
                shared_bytes,
                slice_paths,
                dev.unused,  # no slice pointers in this mode
                1,
                False,
                scratch,
                (-(-n // threads), G, 1),
                quad_max_k,
            )
    if dev.oversize is not None:  # paths deeper than the kernel holds: the CPU engine, then added
        extra = treeshap.shap_values_path(dev.oversize, cupy.asnumpy(X))
        extra[:, :, F] = 0.0
        out += cupy.asarray(extra)
    out[:, :, F] = cupy.asarray(table.base_margin + table.expected_value())
    return out


def _chunk_step(bytes_per_row: int, multiple: int) -> int:
    """Rows of a chunk whose slice sums (``bytes_per_row`` each) fit in _PARTIAL_BYTES: a
    whole multiple of ``multiple`` rows (a block's), at least one block's worth."""
    return max(multiple, _PARTIAL_BYTES // bytes_per_row // multiple * multiple)


def _row_chunks(n: int, bytes_per_row: int, multiple: int):
    """``(first row, rows)`` of consecutive chunks of ``n`` rows of :func:`_chunk_step` rows."""
    step = _chunk_step(bytes_per_row, multiple)
    for r0 in range(0, n, step):
        yield r0, min(step, n - r0)


def _launch_shap_rows(
    dev, X, out, threads, shared, shared_bytes, slice_paths, slice_ptr, n_slices, slice_mode, partial, grid, quad_max_k
) -> None:
    from ._nvrtc import get_module

    a = dev.arrays
    n, F = X.shape
    get_module("treeshap_rows.cu").get_function(_ROWS_KERNEL[bool(slice_mode)])(
        grid,
        (threads,),
        (
            X,
            np.int64(n),
            np.int32(F),
            a["path_offsets"],
            a["group_paths"],
            a["group_ptr"],
            a["feature"],
            a["lower"],
            a["upper"],
            a["missing"],
            a["cat_offset"],
            a["cat_pool"],
            a["zero_fraction"],
            a["path_v"],
            a["table_offsets"],
            a["table_values"],
            dev.zero_fraction_inv() if dev.longest_untabled > quad_max_k else dev.unused,
            a["recip"],
            np.int32(dev.n_groups),
            np.int32(1 if shared else 0),
            np.int64(slice_paths),
            slice_ptr,
            np.int32(n_slices),
            np.int32(1 if slice_mode else 0),
            np.int32(quad_max_k),
            a["gl_nodes"],
            a["gl_weights"],
            a["gl_off"],
            partial,
            out,
        ),
        shared_mem=shared_bytes,
    )


def _shap_rows_by_slice(
    dev, X, out, threads, shared, shared_bytes, slice_paths, slice_ptr, n_slices, quad_max_k
) -> None:
    """shap_rows' slice mode: (rows, groups, slices) blocks, then the slice sums added in
    order; in row chunks whose slice sums fit in _PARTIAL_BYTES."""
    import cupy

    from ._nvrtc import get_module

    n, F = X.shape
    G = dev.n_groups
    sum_kernel = get_module("treeshap_rows.cu").get_function("shap_slices_sum")
    for r0, m in _row_chunks(n, n_slices * G * F * 8, threads):
        partial = cupy.empty((n_slices, m, G, F), dtype=cupy.float64)
        rows_out = out[r0 : r0 + m]
        _launch_shap_rows(
            dev,
            X[r0 : r0 + m],
            rows_out,
            threads,
            shared,
            shared_bytes,
            slice_paths,
            slice_ptr,
            n_slices,
            True,
            partial,
            (-(-m // threads), G, n_slices),
            quad_max_k,
        )
        total = m * G * F
        sum_kernel(
            (int(min(-(-total // _FILL_THREADS), 1 << 20)),),
            (_FILL_THREADS,),
            (partial, np.int64(m), np.int32(G), np.int32(F), np.int32(n_slices), rows_out),
        )


_QUAD_MAX_K = 16  # kernels/treeshap_rows.cu SHAP_QUAD_MAX_K
_QUAD_MAX_NQ = (_QUAD_MAX_K + 1) // 2
_OPTIN_BYTES: dict = {}
# with fewer (row, group) pairs than this, a thread per row would leave most of the GPU idle
_FEW_ROWS = 1 << 15
# (row, group) pairs from which tables of short paths (at most 8 elements) take a thread per
# row (shap_interactions_rows8) instead of half a warp per row: on an H200, case a's 38K paths
# took 1.40x less time that way at 1,000 rows, 1.5x more at 250 (docs/performance-notes.md)
_ROWS8_FROM = 1000


def _node_constants() -> dict:
    """Gauss-Legendre nodes and weights ((nq, t), row stride _QUAD_MAX_NQ) and ``g_off`` =
    -1 / (1 - u) per node, as the CPU evaluates them; for both quadrature kernels."""
    from ..explain.tables import gauss_legendre_01

    nodes, weights = gauss_legendre_01(_QUAD_MAX_NQ)  # (nq + 1, _QUAD_MAX_NQ)
    g_off = np.zeros_like(nodes)
    for nq in range(1, _QUAD_MAX_NQ + 1):
        g_off[nq, :nq] = -1.0 / (1.0 - nodes[nq, :nq])
    return {"gl_nodes": nodes, "gl_weights": weights, "gl_off": g_off}


def _quadrature_arrays(table: PathTable, dev: DevicePathTable) -> dict:
    """The interaction quadrature kernel's constants, made once per device table: the node
    constants (``dev.arrays``) and ``g_on`` = (1 - z) / ((1 - u) z + u) per node and element,
    shape (_QUAD_MAX_NQ, n_elements) (paths of at most _QUAD_MAX_K elements), the CPU's
    expressions evaluated the same way on the device (``interaction_g_on``: neither a host
    pass nor an upload of its 64 bytes an element)."""
    import cupy

    from ._nvrtc import get_module

    if dev.quadrature is not None:
        return dev.quadrature
    n_paths = len(table.path_lengths)
    g_on = cupy.zeros((_QUAD_MAX_NQ, table.n_elements), dtype=cupy.float64)
    if n_paths:
        a = dev.arrays
        get_module("treeshap_rows.cu").get_function("interaction_g_on")(
            (-(-n_paths // _FILL_THREADS),),
            (_FILL_THREADS,),
            (
                a["path_offsets"],
                np.int64(n_paths),
                a["zero_fraction"],
                a["gl_nodes"],
                np.int64(table.n_elements),
                g_on,
            ),
        )
    k = table.path_lengths.astype(np.int64) - 1
    dev.quadrature = {
        "g_on": g_on,
        "has_long": bool((k > _QUAD_MAX_K).any()),
        "max_k": int(k[k <= _QUAD_MAX_K].max(initial=0)),  # the longest path the quadrature takes
    }
    return dev.quadrature


def _shared_optin_bytes() -> int:
    """The most shared memory one block of the current device may opt in to."""
    import cupy

    device = cupy.cuda.Device()
    if device.id not in _OPTIN_BYTES:
        _OPTIN_BYTES[device.id] = int(device.attributes.get("MaxSharedMemoryPerBlockOptin", 0))
    return _OPTIN_BYTES[device.id]


def _stage_bytes(nq: int) -> int:
    """Shared bytes of a row's staging area in ``shap_interactions_warp`` with ``nq`` nodes
    (kernels/treeshap_rows.cu ``interaction_stage_doubles``)."""
    return 8 * (2 * 16 * nq + 16 + nq + 16 + (nq & 1))


def _interaction_layout(F: int, n: int, n_groups: int) -> tuple[str, int, int]:
    """How ``shap_interactions_device`` runs: ``(kernel, rows per block, accumulator bytes)``.

    ``"warp-shared"``: half a warp per row with its F (F + 1) / 2 float64 accumulators in
    shared memory (2 to 8 rows a block); ``"warp-out"``: half a warp per row accumulating in
    its own output matrix, for F too wide for shared memory and few rows; ``"rows"``: a
    thread per row with coalesced global accumulators, for F too wide and many rows. All give
    the same bits. The half-warp kernels also take a staging area per row in shared memory
    (:func:`_stage_bytes`, counted here at its widest). (A quarter warp per row, for paths of
    at most 8 elements, was measured slower: more pair rounds for the same work per row;
    docs/performance-notes.md.)
    """
    acc_row = F * (F + 1) // 2 * 8
    per_row = acc_row + _stage_bytes(_QUAD_MAX_NQ)
    if 2 * per_row <= max(_ACC_SMEM_BYTES, _shared_optin_bytes()):  # a warp's two rows fit
        rows = 8
        while rows > 2 and rows * per_row > _ACC_SMEM_BYTES:
            rows //= 2
        return "warp-shared", rows, rows * acc_row
    if n * n_groups < _FEW_ROWS:
        return "warp-out", 8, 0
    return "rows", 0, 0


def shap_interactions_device(table: PathTable, rows):
    """SHAP interaction values on the GPU, bitwise the CPU's default (quadrature) method for
    paths of at most 16 elements; longer ones take the path method (O(k^3)) and are added.

    Parameters
    ----------
    table : PathTable
    rows : numpy.ndarray or cupy.ndarray, shape (n, F)

    Returns
    -------
    cupy.ndarray of float64, shape (n, n_groups, F + 1, F + 1)
        Bias (the expected value) at ``[F, F]``.
    """
    import cupy

    from ..explain import treeshap
    from ._nvrtc import get_module

    X = cupy.ascontiguousarray(cupy.asarray(rows, dtype=cupy.float32))
    n, F = X.shape
    dev = device_path_table(table, 0)  # no weight tables: interactions walk the paths
    G = dev.n_groups
    out = cupy.zeros((n, G, F + 1, F + 1), dtype=cupy.float64)
    if n and F:
        a = dev.arrays
        quad = _quadrature_arrays(table, dev)
        module = get_module("treeshap_rows.cu")
        grid = (-(-n // _THREADS), G)
        common = (
            X,
            np.int64(n),
            np.int32(F),
            a["path_offsets"],
            a["group_paths"],
            a["group_ptr"],
            a["feature"],
            a["lower"],
            a["upper"],
            a["missing"],
            a["cat_offset"],
            a["cat_pool"],
            a["zero_fraction"],
        )
        quad_args = (
            a["path_v"],
            a["gl_nodes"],
            a["gl_weights"],
            quad["g_on"],
            np.int64(quad["g_on"].shape[1]),  # node t's values start at t times this
            a["gl_off"],
        )
        kind, per_block, shared = _interaction_layout(F, n, G)
        short_paths = quad["max_k"] <= 8  # every per-path value fits in a thread's registers
        if short_paths and kind == "warp-shared" and n * G >= _ROWS8_FROM:
            kind = "rows"
        slice_paths = treeshap.interaction_slice_paths(F)  # per call: tests shrink the slices
        slice_ptr, n_slices = dev.slice_ptr(slice_paths)
        warp = _warp_kernel(kind == "warp-shared", quad["max_k"])
        if kind == "rows" and short_paths:
            _interactions_rows8(module, X, out, common + quad_args, slice_paths, slice_ptr, n_slices, G, dev.unused)
        elif kind == "rows":  # a thread per row, its per-path values in local arrays
            _interactions_rows_in_turn(
                module, "shap_interactions_quadrature", X, out, common + quad_args + (np.int64(slice_paths),), G
            )
        elif kind == "warp-shared" and n * G < _SLICES_BELOW and 1 < n_slices <= _MAX_GRID_Z:
            _interactions_by_slice(
                module, X, out, common + quad_args, per_block, shared, slice_paths, slice_ptr, n_slices, G, warp
            )
        else:  # half a warp per row, its slices in turn
            _launch_interactions_warp(
                module,
                common + quad_args,
                G,
                warp,
                per_block,
                shared,
                slice_paths,
                dev.unused,  # no slice pointers, no slice sums in this mode
                1,
                False,
                dev.unused,
                out,
                (-(-n // per_block), G, 1),
            )
        if quad["has_long"]:  # paths longer than the quadrature kernel holds: the path method, added
            acc = cupy.zeros((G, F, F, n), dtype=cupy.float64)
            module.get_function("shap_interactions_rows")(
                grid,
                (_THREADS,),
                common + (dev.zero_fraction_inv(), a["path_v"], a["recip"], np.int32(_QUAD_MAX_K + 1), acc),
            )
            out[:, :, :F, :F] += cupy.moveaxis(acc, 3, 0)
            del acc
    if dev.oversize is not None:
        extra = treeshap.shap_interactions(dev.oversize, cupy.asnumpy(X), method="path")
        extra[:, :, F, F] = 0.0
        out += cupy.asarray(extra)
    out[:, :, F, F] = cupy.asarray(table.base_margin + table.expected_value())
    return out


def _interactions_rows8(module, X, out, args, slice_paths, slice_ptr, n_slices, G, unused) -> None:
    """``shap_interactions_rows8`` (a thread per row, for tables whose quadrature paths have
    at most 8 elements) and the matrices into ``out``. Below _SLICES_BELOW (row, group)
    pairs a row's slices of paths run in parallel (blocks.z), their sums added in order by
    ``interaction_rows_slices_finish``, in row chunks whose sums fit in _PARTIAL_BYTES
    (when a chunk has as many (row, slice) threads as there are rows: wide rows' chunks
    may not); otherwise a row's slices in turn. ``args``: the kernel's arguments up to
    ``g_off``."""
    import cupy

    n, F = X.shape
    kernel = module.get_function("shap_interactions_rows8")
    tri = F * (F + 1) // 2
    row_bytes = n_slices * G * tri * 8
    if n * G < _SLICES_BELOW and 1 < n_slices <= _MAX_GRID_Z and _chunk_step(row_bytes, _THREADS) * n_slices >= n:
        finish = module.get_function("interaction_rows_slices_finish")
        for r0, m in _row_chunks(n, row_bytes, _THREADS):
            partial = cupy.zeros((n_slices, G, tri, m), dtype=cupy.float64)  # row fastest
            kernel(
                (-(-m // _THREADS), G, n_slices),
                (_THREADS,),
                (X[r0 : r0 + m], np.int64(m))
                + args[2:]
                + (np.int64(slice_paths), slice_ptr, np.int32(n_slices), np.int32(1), partial),
            )
            finish(
                (-(-m // _THREADS), G),
                (_THREADS,),
                (partial, np.int64(m), np.int32(F), np.int32(G), np.int32(n_slices), out[r0 : r0 + m]),
            )
            del partial
        return
    _interactions_rows_in_turn(
        module,
        "shap_interactions_rows8",
        X,
        out,
        args + (np.int64(slice_paths), unused, np.int32(1), np.int32(0)),  # no slice pointers in this mode
        G,
    )


def _interactions_rows_in_turn(module, name: str, X, out, args, G) -> None:
    """Thread-per-row interaction kernel ``name`` with a row's slices in turn, then
    ``interaction_finish`` into ``out``. ``args``: the kernel's arguments but its
    accumulator, (G, F + 1, F, n) float64 (row fastest: coalesced updates; slice sums on and
    above the diagonal, totals below and in row F), which this makes."""
    import cupy

    n, F = X.shape
    acc = cupy.zeros((G, F + 1, F, n), dtype=cupy.float64)
    grid = (-(-n // _THREADS), G)
    module.get_function(name)(grid, (_THREADS,), args + (acc,))
    module.get_function("interaction_finish")(grid, (_THREADS,), (acc, np.int64(n), np.int32(F), np.int32(G), out))


def _warp_kernel(in_shared: bool, max_k: int) -> tuple[str, int]:
    """The instance of ``shap_interactions_warp`` and its nodes per path: accumulators in
    shared memory or in the output, four nodes when no quadrature path is longer than 8."""
    if not in_shared:
        return "shap_interactions_warp_out", _QUAD_MAX_NQ
    if max_k <= 8:
        return "shap_interactions_warp_nq4", min(4, _QUAD_MAX_NQ)
    return "shap_interactions_warp", _QUAD_MAX_NQ


def _launch_interactions_warp(
    module, args, G, warp, per_block, shared, slice_paths, slice_ptr, n_slices, slice_mode, partial, out, grid
) -> None:
    """Launch instance ``warp`` (``(name, nq)``, :func:`_warp_kernel`): a block's dynamic
    shared memory is its rows' staging areas, then ``shared`` bytes of accumulators."""
    name, nq = warp
    kernel = module.get_function(name)
    shared += per_block * _stage_bytes(nq)
    if shared > _ACC_SMEM_BYTES:
        kernel.max_dynamic_shared_size_bytes = shared
    kernel(
        grid,
        (16 * per_block,),
        args
        + (
            np.int32(G),
            np.int64(slice_paths),
            slice_ptr,
            np.int32(n_slices),
            np.int32(1 if slice_mode else 0),
            partial,
            out,
        ),
        shared_mem=shared,
    )


def _interactions_by_slice(module, X, out, args, per_block, shared, slice_paths, slice_ptr, n_slices, G, warp) -> None:
    """shap_interactions_warp's slice mode (few rows: a row's slices of paths in parallel, so
    the last wave of rows does not leave the GPU idle), then the slice sums added in order
    and the matrices made; in row chunks whose slice sums fit in _PARTIAL_BYTES. ``args``:
    the kernel's arguments up to ``g_off``, for all rows."""
    import cupy

    n, F = X.shape
    tri = F * (F + 1) // 2
    finish = module.get_function("interaction_slices_finish")
    for r0, m in _row_chunks(n, n_slices * G * tri * 8, per_block):
        rows_args = (X[r0 : r0 + m], np.int64(m)) + args[2:]
        partial = cupy.empty((n_slices, m, G, tri), dtype=cupy.float64)
        rows_out = out[r0 : r0 + m]
        _launch_interactions_warp(
            module,
            rows_args,
            G,
            warp,
            per_block,
            shared,
            slice_paths,
            slice_ptr,
            n_slices,
            True,
            partial,
            rows_out,
            (-(-m // per_block), G, n_slices),
        )
        finish(
            (-(-m // _THREADS), G),
            (_THREADS,),
            (partial, np.int64(m), np.int32(F), np.int32(G), np.int32(n_slices), rows_out),
        )
