"""The CUDA backend: CuPy arrays and the kernels in ``kernels/`` (compiled by ``_nvrtc``).

Every stage of a boosting round runs on the device: binning into an ELLPACK matrix,
quantisation, histograms (shared-memory int64 atomics per feature group), split evaluation,
stable partition, margin updates and prediction. What crosses to the host in a round is
small, and every read goes through :meth:`CUDABackend.to_host` or :meth:`CUDABackend.read_later`
(:mod:`dgboost.testing.cuda_probes` counts them by wrapping those two): the per-tree gradient
maxima (only to check them: the fixed-point scales are made from them on the device), and the
node records (split decisions, sums, row segments) of the tree's levels: all of them in one
read at the end of a depthwise tree grown in whole levels, copied in stream order
(``read_later``) while the device goes on with the next round, else one read per batch of
nodes (see dgboost/grower.py). In between, the stages run as kernels on device data only (partition,
child records, histograms, siblings, evaluation), so the host never waits inside a level.
The tree's leaf weights are computed on the host from the split decisions' integer sums with
the CPU engine's own kernel, so both devices give the same leaves (with monotone constraints
the nodes' bounds too are replayed there, from the tree); the margins of a tree grown in
whole levels are updated on the device from its records with the same float64 operations
(``record_leaf_values`` in kernels/split.cu), before the host has read the tree.
"""

from __future__ import annotations

import ctypes
import math

import numpy as np

from .._array import check_int64_out
from .._compat import cupy_module
from .._fixed_point import check_row_count
from .._layout import BEGIN, NODE_FIELDS
from ..errors import DeviceMemoryError, DGBoostValueError
from ._allocator import apply_allocator
from ._cuda_exact import device_available_bytes
from ._ellpack import EllpackMatrix, entry_layout, feature_groups, packed_words
from ._launch import PackedLauncher
from ._nvrtc import get_module
from .base import LookaheadBudget
from .cpu import leaf_weights_on_host, node_bounds_on_host

__all__ = ["CUDABackend", "DeviceMemoryError"]

_THREADS = 256
_SELECT_PER_THREAD = 8  # select.cu's kSelectPerThread (its blocks are _THREADS wide)
_HIST_THREADS = 512
_HIST_BLOCKS_PER_SM = 4
_CANDIDATE_BYTES = 48  # split.cu's Candidate record
_GROUPED_SEARCH_WARPS_PER_SM = 16  # best_per_feature_grouped's blocks of 8 warps, 2 an SM
_CAT_THREADS = 256  # split.cu's kCatThreads
_CAT_STATIC_SHARED = 1024  # at least best_per_category_feature's static shared memory (352 bytes)
_PARTITION_TILE = 256 * 8  # partition.cu's kThreads * kItems
_HIST_MIN_ROWS = 2048  # the shortest slice of rows a histogram block takes
# a level's built histograms up to this size go to one work array of this size, made once (a
# larger level's are allocated: the time of an allocation is nothing beside their build, and
# a work array grown level by level would leave its old sizes cached in CuPy's pool)
_WORK_HIST_BYTES = 16 << 20
# host arrays up to this size are uploaded through pinned buffers, this many in a ring
_STAGING_BYTES = 64 << 10
_STAGING_SLOTS = 16


def _grid(n: int, sm_count: int, threads: int = _THREADS) -> int:
    return int(max(1, min((int(n) + threads - 1) // threads, sm_count * 32)))


class _PendingRead:
    """Device arrays being copied to pinned host memory in stream order (``read_later``).

    The device arrays are held until the copies are done; ``result()`` waits for an event
    recorded after the copies (not for the whole stream) and returns host copies.
    """

    def __init__(self, backend: "CUDABackend", arrays):
        cupy = backend.xp
        stream = cupy.cuda.get_current_stream()
        self._sources = [cupy.ascontiguousarray(a) for a in arrays]
        self._hosts = []
        for a in self._sources:
            pinned = cupy.cuda.alloc_pinned_memory(max(a.nbytes, 1))
            if a.nbytes:
                a.data.copy_to_host_async(ctypes.c_void_p(pinned.ptr), a.nbytes, stream)
            self._hosts.append((pinned, a.dtype, a.shape))
        self._done = cupy.cuda.Event(block=False, disable_timing=True, interprocess=False)
        self._done.record(stream)
        self._result = None

    def result(self) -> list:
        if self._result is None:
            self._done.synchronize()
            self._result = [
                np.frombuffer(pinned, dtype, int(np.prod(shape))).reshape(shape).copy()
                for pinned, dtype, shape in self._hosts
            ]
            self._sources = self._hosts = None
        return self._result


class CUDABackend:
    """CuPy + NVRTC implementation of :class:`~dgboost.backend.base.Backend`.

    Parameters
    ----------
    device_id : int
        The CUDA device (``device="cuda:N"``); it becomes the current device of the
        calling thread.
    """

    name = "cuda"
    walks_leaves = True
    partitions_into_out = True  # partition_scatter writes any array; a copy back is a launch more
    # a read costs a device round trip and the levels split ahead cost launches: whole levels
    # ahead (nodes=256, levels=12, hist_bytes=256 MiB) halved the reads of a 255-leaf tree but
    # took far more memory for no steady gain in time; since a level costs four launches, two
    # levels below the children read 23 times a tree against 31 and are faster than one
    # (docs/performance-notes.md, "Lossguide lookahead")
    lookahead = LookaheadBudget(nodes=32, levels=2, hist_bytes=64 << 20)

    def __init__(self, device_id: int = 0):
        cupy = cupy_module()
        if cupy is None:
            raise DGBoostValueError("device='cuda' needs CuPy: pip install 'dgboost[cuda13]' (or [cuda12])")
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except Exception as exc:  # noqa: BLE001 - no driver is the same as no device here
            raise DGBoostValueError(f"device='cuda' but no CUDA device is usable: {exc}") from None
        if not 0 <= device_id < count:
            raise DGBoostValueError(f"device 'cuda:{device_id}' does not exist: {count} CUDA device(s) visible")
        self.xp = cupy
        apply_allocator(cupy)  # dgboost.config's use_rmm, read when a backend is made
        self._functions: dict = {}  # (file, name) -> _loaded's entry
        self._launcher = PackedLauncher(cupy.cuda.driver, cupy.ndarray)
        self._ptr_cache: dict = {}
        self.device_id = int(device_id)
        self.device = cupy.cuda.Device(self.device_id)
        self.device.use()
        attrs = self.device.attributes
        self.sm_count = int(attrs["MultiProcessorCount"])
        self.shared_bytes = int(attrs.get("MaxSharedMemoryPerBlockOptin", attrs["MaxSharedMemoryPerBlock"]))
        per_sm = int(attrs.get("MaxSharedMemoryPerMultiprocessor", self.shared_bytes))
        # a feature group's histogram takes a quarter of an SM's shared memory, so that four
        # histogram blocks share each SM and hide each other's scattered loads
        self.group_bytes = max(16 * 256, min(self.shared_bytes, per_sm // _HIST_BLOCKS_PER_SM - 1024))
        self._no_mask = cupy.ones(1, dtype=cupy.bool_)  # passed where every feature may be used
        # passed where nothing is monotone-constrained (the kernel does not read them)
        self._no_bounds = cupy.zeros(2, dtype=cupy.float64)
        self._no_signs = cupy.zeros(1, dtype=cupy.int8)
        # passed where an ensemble has no categorical split (the prediction kernels' flag is 0)
        self._no_cat_nodes = (
            cupy.zeros(1, dtype=cupy.uint8),
            cupy.zeros(1, dtype=cupy.int64),
            cupy.zeros(1, dtype=cupy.int32),
            cupy.zeros(1, dtype=cupy.uint32),
            np.int32(0),
        )
        self._scratch_arrays: dict = {}
        self._work_arrays: dict = {}  # name -> (the name's scratch array, {shape: view of it})
        self._split_levels = 0  # split_level's calls: its child tiles alternate between two arrays
        self._layout_cache = None  # (CategoricalLayout, its arrays on the device)
        self._staging: list = []  # [pinned buffer, event of its last copy or None] per slot
        self._staging_next = 0
        # scans the last split_nodes (or split_level) made in its own launch, by the array they scan: the
        # built segments' offsets (for build_histograms) and the children's partition tiles
        # (for partition of those children); {id(array): (array, offsets)}
        self._scanned: dict = {}
        # partition_flags' block counter: zero between launches (the last block resets it)
        self._partition_done = cupy.zeros(1, dtype=cupy.uint32)
        # partition_flags' arguments from ``split`` on, for a partition that makes no children
        placeholder = cupy.zeros(2, dtype=cupy.int64)
        self._no_split = (np.int32(0), np.int32(0)) + (placeholder,) * 6 + (np.int64(0),)
        # best_per_feature's counters of the warps done with each node (the same contract)
        self._node_done = cupy.zeros(256, dtype=cupy.uint32)

    # -- plumbing --------------------------------------------------------------------------
    def _device_ptrs(self, cut_ptrs) -> object:
        """int32 copy of ``cut_ptrs`` on the device, uploaded once per cuts array."""
        return self._cuts_entry(cut_ptrs)[1]

    def _cuts_entry(self, cut_ptrs) -> tuple:
        """(``cut_ptrs``, its int32 device copy, the chunks of 32 bins of its widest feature),
        made once per cuts array."""
        key = id(cut_ptrs)
        hit = self._ptr_cache.get(key)
        if hit is None or hit[0] is not cut_ptrs:
            host = np.asarray(cut_ptrs).astype(np.int32)
            widest = int(np.diff(host).max()) if host.size > 1 else 0
            hit = (cut_ptrs, self.xp.asarray(host), -(-widest // 32))
            self._ptr_cache = {key: hit}
        return hit

    def _search_group(self, pairs: int, chunks: int) -> int:
        """Warps that search one (node, feature) together in ``best_per_feature``: 1, or, on a
        level of few pairs, 2, 4 or 8 (at most one per chunk of 32 bins of the widest feature,
        ``chunks``: :meth:`_cuts_entry`), as many as keep the launch within the warps the GPU
        holds at once. One warp per pair left a level of few nodes to a few warps, each running
        its feature's whole chain of dependent shuffles and float64 operations (13-15 us a
        launch on an H200)."""
        group = 1
        while group < 8 and 2 * group <= chunks and 2 * group * pairs <= self.sm_count * _GROUPED_SEARCH_WARPS_PER_SM:
            group *= 2
        return group

    def _scratch(self, name: str, size: int, dtype):
        """A 1-D work array of at least ``size`` elements, reused between calls (one stream
        orders its uses; a subclass that needs fresh arrays from :meth:`empty` overrides this).
        Only for kernel arguments: it may be longer than ``size`` (a view of the first ``size``
        would cost a few microseconds, hundreds of times a lossguide tree)."""
        held = self._scratch_arrays.get(name)
        if held is None or held.size < size or held.dtype != np.dtype(dtype):
            held = self._scratch_arrays[name] = self.empty(max(size, 1), dtype)
        return held

    def _work(self, name: str, shape: tuple, dtype, reserve: int = 0):
        """An array of exactly ``shape`` over the work array ``name`` (:meth:`_scratch`, of at
        least ``reserve`` elements), the same view object whenever the shape is asked again:
        for results that their caller reads before the backend's next call for ``name`` (a
        view costs about as much host time as an allocation, and a lossguide tree asks for
        hundreds)."""
        held = self._work_arrays.get(name)
        if held is not None:
            view = held[1].get(shape)
            if view is not None:
                return view
        size = math.prod(shape)
        base = self._scratch(name, max(size, reserve), dtype)
        if held is None or held[0] is not base:  # new, or grown: the views of the old array go
            held = self._work_arrays[name] = (base, {})
        view = held[1][shape] = base[:size].reshape(shape)
        return view

    def _node_counters(self, n: int):
        """uint32 counters, at least ``n``, zero between launches (the kernel that counts in
        them leaves them zero): best_per_feature's per node."""
        held = self._node_done
        if held.size < n:
            held = self._node_done = self.zeros(max(n, 2 * held.size), np.uint32)
        return held

    def _launch(self, file: str, name: str, n: int, args, threads: int = _THREADS, shared: int = 0, grid=None):
        # a lossguide round makes ~270 launches: the loaded kernel in one lookup when it may
        # use ``shared`` already, the rest through _launchable
        function = self._functions.get((file, name))
        if function is None or shared > function[2]:
            function = self._launchable(file, name, shared)
        if grid is None:
            grid = (_grid(n, self.sm_count, threads),)
        elif not isinstance(grid, tuple):
            grid = (int(grid),)
        stream = self.xp.cuda.get_current_stream().ptr
        if not self._launcher.launch(function[0], grid, threads, shared, stream, args):
            function[1](grid, (threads,), args, shared_mem=shared)

    def _launchable(self, file: str, name: str, shared: int = 0) -> list:
        """A kernel's entry in the backend's one kernel cache (:meth:`_loaded`), loaded at its
        first use (assembling and hashing the source on every launch would cost more than
        many launches), its shared-memory allowance raised to ``shared`` bytes where it is less."""
        function = self._functions.get((file, name))
        if function is None:
            function = self._functions[(file, name)] = self._loaded(get_module(file).get_function(name))
        if shared > function[2]:
            self._allow_shared(file, name, shared)
        return function

    def _loaded(self, kernel) -> list:
        """The cache entry of a RawKernel: [its CUfunction handle on this backend's device, the
        RawKernel, the dynamic shared memory it may use now (the default, 48 KiB, at first)]."""
        with self.device:
            return [kernel.kernel.ptr, kernel, 48 * 1024]

    def _allow_shared(self, file: str, name: str, shared: int) -> None:
        """Let a kernel use ``shared`` bytes of dynamic shared memory (its attribute, which
        every change goes through here, so that :meth:`_launchable` knows it)."""
        function = self._launchable(file, name)
        function[1].max_dynamic_shared_size_bytes = shared
        function[2] = shared

    def asarray(self, array):
        if isinstance(array, np.ndarray) and 0 < array.nbytes <= _STAGING_BYTES:
            return self._upload_small(array)
        return self.xp.asarray(array)

    def resident(self, array):
        """A device copy of a host ``array`` (a GPU job's set-up uploads host rows once, then
        sketches, bins and keeps them there: the host sketch and host sums had made a 10M x 28
        NumPy job 0.9 s against 0.07 s for the same rows in CuPy); a device array or None as it
        is. Large arrays go through pinned staging buffers (``_upload.py``) into an array of
        :meth:`empty`.

        The training's memory check (:meth:`check_training_memory`) comes after the upload,
        as it needs the cuts: a copy that does not fit fails here, as :meth:`empty` does.

        Raises
        ------
        DeviceMemoryError
            When the device array of a large copy cannot be allocated.
        """
        if not isinstance(array, np.ndarray):
            return array
        if array.nbytes <= _STAGING_BYTES:
            return self.asarray(array)
        from ._upload import to_device

        with self.device:
            return to_device({"array": array}, empty=self.empty)["array"]

    def _upload_small(self, array: np.ndarray):
        """A small host array copied to the device in stream order, the host not waiting:
        staged through a ring of pinned buffers (lossguide uploads an index for most
        batches, and a copy from pageable memory may hold the host until the copy is done)."""
        cupy = self.xp
        src = np.ascontiguousarray(array)
        if len(self._staging) < _STAGING_SLOTS:
            self._staging.append([cupy.cuda.alloc_pinned_memory(_STAGING_BYTES), None])
        slot = self._staging[self._staging_next]
        self._staging_next = (self._staging_next + 1) % _STAGING_SLOTS
        if slot[1] is not None:
            slot[1].synchronize()  # its last copy is long done, but it must be before the overwrite
        np.frombuffer(slot[0], np.uint8, src.nbytes)[:] = src.reshape(-1).view(np.uint8)
        out = cupy.empty(src.shape, src.dtype)
        out.data.copy_from_host_async(ctypes.c_void_p(slot[0].ptr), src.nbytes)
        if slot[1] is None:
            slot[1] = cupy.cuda.Event(block=False, disable_timing=True, interprocess=False)
        slot[1].record()
        return out

    def to_host(self, array) -> np.ndarray:
        """A host copy of a device array (the host waits for it); a host array as it is."""
        if isinstance(array, np.ndarray):
            return array
        return self.xp.asnumpy(array)

    def synchronize(self) -> None:
        self.xp.cuda.get_current_stream().synchronize()

    def release_cached_memory(self) -> None:
        """Free the blocks CuPy's default pool caches but no array uses, when that pool is
        the allocator (RMM's or a user's allocator is left alone). A training set-up's
        temporaries come in sizes its rounds' arrays do not fit (32 MiB pieces of the exact
        sums against 38 MiB arrays of 10M rows): left cached, they kept Higgs-like's pool at
        739 MiB for 596 in use (docs/performance-notes.md, "Set-up's blocks given back")."""
        pool = self.xp.get_default_memory_pool()
        if getattr(self.xp.cuda.get_allocator(), "__self__", None) is pool:
            pool.free_all_blocks()

    def concatenate(self, arrays):
        """The arrays (same dtype and trailing shape) one after another along the first axis:
        one allocation and a device-to-device copy per array in stream order (cupy's
        concatenate costs more host time a call than the copies, and lossguide makes dozens a tree)."""
        first = arrays[0]
        out = self.empty((sum(int(a.shape[0]) for a in arrays),) + tuple(first.shape[1:]), first.dtype)
        stream = self.xp.cuda.get_current_stream()
        offset = 0
        for a in arrays:
            a = self.xp.ascontiguousarray(a)
            if a.nbytes:
                (out.data + offset).copy_from_device_async(a.data, a.nbytes, stream)
            offset += a.nbytes
        return out

    def take_rows(self, sources) -> list:
        """For each output, the rows of its pieces one after another: one upload of the rows'
        addresses and one launch (kernels/nodes.cu ``gather_rows``), not a gather per piece
        and a concatenation (lossguide takes a batch's parents from several batches, every
        read). Arrays whose rows are not contiguous are taken piece by piece."""
        k = sum(len(rows) for _, rows in sources[0])
        if not all(a.flags.c_contiguous and (a.nbytes // max(1, a.shape[0])) % 4 == 0 for p in sources for a, _ in p):
            return [self.concatenate([a[self.asarray(np.asarray(rows, np.int64))] for a, rows in p]) for p in sources]
        outs, table, widest = [], [], 0
        for pieces in sources:
            first = pieces[0][0]
            out = self.empty((k,) + tuple(first.shape[1:]), first.dtype)
            words = out.nbytes // max(1, 4 * k)
            widest = max(widest, words)
            table.append(self._address(out))
            table.append(words)
            for a, rows in pieces:
                base, stride = self._address(a), a.strides[0]
                table.extend(base + r * stride for r in rows)
            outs.append(out)
        if k and widest:
            self._launch(
                "nodes.cu",
                "gather_rows",
                k * widest,
                (self.asarray(np.array(table, np.int64)), np.int32(k)),
                grid=(_grid(k * widest, self.sm_count), len(sources)),
            )
        return outs

    @staticmethod
    def _address(array) -> int:
        """The device address of an array's first element."""
        return array.data.ptr

    def empty(self, shape, dtype):
        try:
            return self.xp.empty(shape, dtype=dtype)
        except self.xp.cuda.memory.OutOfMemoryError:
            need = int(np.prod(shape)) * np.dtype(dtype).itemsize
            free, total = self.xp.cuda.runtime.memGetInfo()
            raise DeviceMemoryError(
                f"out of GPU memory allocating {need / 2**20:.1f} MiB {np.dtype(dtype)} {tuple(shape)} "
                f"on cuda:{self.device_id} ({free / 2**20:.0f} MiB free of {total / 2**20:.0f} MiB); "
                "reduce the rows per worker, max_bin or max_depth"
            ) from None

    def zeros(self, shape, dtype):
        out = self.empty(shape, dtype)
        if out.nbytes:  # a memset in stream order (CuPy's fill costs the host more)
            out.data.memset_async(0, out.nbytes)
        return out

    def check_training_memory(
        self,
        n_rows: int,
        n_features: int,
        cut_ptrs,
        total_bins: int,
        n_groups: int,
        level_nodes: int,
        values_on_device: bool,
    ) -> int:
        """Raise :class:`DeviceMemoryError` before training starts if it cannot fit.

        The estimate (bytes, returned) adds the bin matrix, the per-row arrays of a round
        (row order, quantised pairs, partition flags/scan/buffer, margins, float32 and
        float64 gradient temporaries of the objective), the float32 input if it must be
        uploaded, and the histograms of the widest level (built, siblings and parents).
        ``cut_ptrs`` (int, shape (F + 1,)) give each feature's number of bins, which sets the
        width of its entries in the bin matrix.
        """
        row_bits = entry_layout(cut_ptrs)[1]
        estimate = packed_words(n_rows, row_bits) * 4
        estimate += n_rows * (4 + 8 + 12 + n_groups * (4 + 8 + 16) + 8)
        if not values_on_device:
            estimate += n_rows * n_features * 4
        estimate += 3 * level_nodes * total_bins * 16
        available, total = device_available_bytes(self.xp)
        if estimate > available:
            raise DeviceMemoryError(
                f"training needs about {estimate / 2**30:.2f} GiB of GPU memory for {n_rows} rows x "
                f"{n_features} features ({row_bits} bits a row, {total_bins} bins, up to {level_nodes} nodes per "
                f"level) but cuda:{self.device_id} has {available / 2**30:.2f} GiB free of {total / 2**30:.2f} GiB; "
                "use fewer rows per GPU (more Dask workers), a smaller max_bin or max_depth"
            )
        return estimate

    # -- binning ---------------------------------------------------------------------------
    def bin_values(self, values, cut_values, cut_ptrs, dtype=None) -> EllpackMatrix:
        """ELLPACK matrix of ``values`` (float32 (n, F), NaN = missing; host or device)."""
        xp = self.xp
        values = xp.ascontiguousarray(xp.asarray(values, dtype=xp.float32))
        n, n_features = values.shape
        cut_ptrs = np.asarray(cut_ptrs, np.int64)
        max_bins = int(np.diff(cut_ptrs).max()) if n_features else 1
        layout, row_bits = entry_layout(cut_ptrs)
        n_entries = n * n_features
        try:
            packed = self.zeros(packed_words(n, row_bits), np.uint32)
        except DeviceMemoryError as exc:
            raise DeviceMemoryError(f"{exc} (bin matrix of {n} x {n_features} at {row_bits} bits a row)") from None
        dev_cuts = xp.asarray(np.asarray(cut_values, np.float32))
        dev_ptrs = xp.asarray(cut_ptrs.astype(np.int32))
        dev_layout = xp.asarray(layout)
        if n_entries:
            self._launch(
                "binning.cu",
                "bin_and_pack",
                n_entries,
                (
                    values,
                    np.int64(n_entries),
                    np.int32(n_features),
                    dev_cuts,
                    dev_ptrs,
                    dev_layout,
                    np.int32(row_bits),
                    packed,
                ),
            )
        begin, end, fits = feature_groups(cut_ptrs, self.group_bytes // 16)
        widest = int(max(cut_ptrs[e] - cut_ptrs[b] for b, e in zip(begin, end))) if begin.size else 0
        return EllpackMatrix(
            packed=packed,
            row_bits=row_bits,
            layout=dev_layout,
            missing=max_bins,
            shape=(n, n_features),
            cut_ptrs=dev_ptrs,
            group_begin=xp.asarray(begin),
            group_end=xp.asarray(end),
            group_bins=widest,
            use_shared=fits,
        )

    def column_layout(self, bins: EllpackMatrix) -> EllpackMatrix:
        """The partition kernel reads the ELLPACK matrix itself (one symbol per row)."""
        return bins

    def unpack(self, bins: EllpackMatrix) -> np.ndarray:
        """Dense host copy of the bins, uint16 (n, F), missing = ``bins.missing`` (tests)."""
        n_entries = bins.n_rows * bins.n_features
        out = self.empty(bins.shape, np.uint16)
        if n_entries:
            args = (bins.packed, bins.cut_ptrs, bins.layout, np.int32(bins.row_bits), np.int32(bins.n_features))
            args += (np.uint32(bins.missing), np.int64(n_entries), out)
            self._launch("binning.cu", "unpack", n_entries, args)
        return self.to_host(out)

    # -- gradients -------------------------------------------------------------------------
    def abs_max_bits(self, grad, hess):
        """uint32 (2,) on the device: the float32 bits of max |grad| and max |hess|."""
        out = self.zeros(2, np.uint32)
        n = grad.shape[0]
        if n:
            grad, hess, stride = self._same_stride(grad, hess)
            self._launch("quantise.cu", "abs_max", n, (grad, hess, np.int64(stride), np.int64(n), out))
        return out

    def _same_stride(self, grad, hess):
        """float32 device columns with one row stride (in elements), for the gradient kernels."""
        xp = self.xp
        grad = xp.asarray(grad, dtype=xp.float32)
        hess = xp.asarray(hess, dtype=xp.float32)
        if grad.strides[0] != hess.strides[0] or grad.strides[0] % 4:
            grad, hess = xp.ascontiguousarray(grad), xp.ascontiguousarray(hess)
        return grad, hess, grad.strides[0] // 4

    def fixed_point_scales(self, bits, n_global: int):
        """float64 (2,) on the device: the scales of the maxima whose float32 bits are ``bits``."""
        check_row_count(n_global)
        out = self.empty(2, np.float64)
        self._launch(
            "quantise.cu", "fixed_point_scales", 2, (self.xp.asarray(bits, dtype=np.uint32), out), threads=32, grid=1
        )
        return out

    def quantise(self, grad, hess, scales, keep=None):
        xp = self.xp
        n = grad.shape[0]
        out = self.empty((n, 2), np.int32)
        if n == 0:
            return out
        grad, hess, stride = self._same_stride(grad, hess)
        keep_arr = xp.asarray(keep, dtype=xp.bool_) if keep is not None else xp.empty(1, xp.bool_)
        self._launch(
            "quantise.cu",
            "quantise",
            n,
            (
                grad,
                hess,
                np.int64(stride),
                keep_arr,
                np.int32(keep is not None),
                np.int64(n),
                self._scales(scales),
                out,
            ),
        )
        return out

    def root_rows(self, n: int):
        """See ``Backend.root_rows``: partition.cu ``root_rows``, four rows a thread."""
        out = self.empty(n, np.int32)
        if n:
            self._launch("partition.cu", "root_rows", -(-n // 4), (out, np.int64(n)))
        return out

    def gpair_totals(self, gpair):
        """See ``Backend.gpair_totals``."""
        out = self.zeros(2, np.int64)
        n = gpair.shape[0]
        if n:
            self._launch("quantise.cu", "gpair_sums", n, (gpair, np.int64(n), out))
        return out

    # -- node records ------------------------------------------------------------------------
    def root_node(self, sums, n_rows: int):
        out = self.empty((1, NODE_FIELDS), np.int64)
        self._launch(
            "nodes.cu", "root_node", 1, (self.xp.asarray(sums, dtype=np.int64), np.int64(n_rows), out), threads=32
        )
        return out

    def _records(self, records, in_place: bool = False):
        """Node records as the kernels read them: C-contiguous int64 (m, NODE_FIELDS) on the device."""
        if records.dtype != np.int64 or records.ndim != 2 or records.shape[1] != NODE_FIELDS:
            raise DGBoostValueError(
                f"node records must be int64 (m, {NODE_FIELDS}), got {records.dtype} {records.shape}"
            )
        if not records.flags.c_contiguous:
            if in_place:
                raise DGBoostValueError("node records written in place must be C-contiguous")
            records = self.xp.ascontiguousarray(records)
        return records

    def split_nodes(self, parents, counts, global_counts, out=None):
        parents = self._records(parents)
        k = int(parents.shape[0])
        children = self.empty((2 * k, NODE_FIELDS), np.int64) if out is None else self._records(out, in_place=True)
        build_segments = self.empty((k, 2), np.int64)
        build_left = self.empty(k, np.int64)
        # kernel arguments only, read by launches queued before the next split_nodes: reused
        build_offsets = self._scratch("build_offsets", k + 1, np.int64)
        child_tiles = self._scratch("child_tiles", 2 * k + 1, np.int64)
        by_hessian = global_counts is None
        sizes = counts if by_hessian else self.xp.ascontiguousarray(global_counts, dtype=np.int64)
        # one block: it also scans what build_histograms and the next partition would each
        # have scanned in a launch of their own
        self._launch(
            "nodes.cu",
            "split_nodes",
            0,
            (
                parents,
                np.int32(k),
                counts,
                sizes,
                np.int32(by_hessian),
                children,
                build_segments,
                build_left,
                np.int64(_PARTITION_TILE),
                build_offsets,
                child_tiles,
            ),
            threads=256,
            grid=1,
        )
        self._scanned = {id(build_segments): (build_segments, build_offsets), id(children): (children, child_tiles)}
        return children, build_segments, build_left

    def _scanned_offsets(self, array):
        """The offsets split_nodes computed for ``array`` (its built segments or its children),
        or None."""
        hit = self._scanned.get(id(array))
        return hit[1] if hit is not None and hit[0] is array else None

    def children_histograms(self, parent_hist, parent_index, built, build_left, out=None):
        k, total_bins = int(built.shape[0]), int(built.shape[1])
        if out is None:
            out = self.empty((2 * k, total_bins, 2), np.int64)
        else:
            check_int64_out(out, (2 * k, total_bins, 2), "children histograms go to")
        use_index = parent_index is not None
        if k and total_bins:
            self._launch(
                "nodes.cu",
                "children_histograms",
                k * total_bins,
                (
                    parent_hist,
                    parent_index if use_index else build_left,
                    np.int32(use_index),
                    built,
                    build_left,
                    np.int32(k),
                    np.int64(total_bins),
                    out,
                ),
            )
        return out

    def _segment_offsets(self, segments, stride: int, m: int, tile: int):
        """int64 (m + 1,) device: exclusive sums of the segments' sizes in tiles of ``tile``
        rows; a work array, for the launches queued next."""
        out = self._work("segment_offsets", (m + 1,), np.int64)
        self._launch(
            "nodes.cu",
            "segment_offsets",
            1,
            (segments, np.int32(stride), np.int32(m), np.int64(tile), out),
            threads=256,
            grid=1,
        )
        return out

    # -- histograms ------------------------------------------------------------------------
    def build_histograms(self, bins: EllpackMatrix, cut_ptrs, gpair, rows, segments, max_rows=None, out=None):
        xp = self.xp
        segments = xp.ascontiguousarray(segments, dtype=xp.int64)
        m = int(segments.shape[0])
        total_bins = int(np.asarray(cut_ptrs)[-1])
        if out is None:
            hist = self.zeros((m, total_bins, 2), np.int64)
        else:
            check_int64_out(out, (m, total_bins, 2), "histograms are added into")
            hist = out
        if m == 0 or total_bins == 0 or bins.n_rows == 0:
            return hist
        offsets = self._scanned_offsets(segments)
        if offsets is None:
            offsets = self._segment_offsets(segments, 2, m, 1)
        # one wave of resident blocks: each flushes its shared histogram once per segment it
        # touches, so fewer, longer slices move fewer global atomics
        slices = max(1, (self.sm_count * _HIST_BLOCKS_PER_SM) // bins.n_groups)
        if max_rows is not None:  # no more slices than rows to fill them (a slice is >= _HIST_MIN_ROWS)
            slices = max(1, min(slices, -(-int(max_rows) // _HIST_MIN_ROWS)))
        shared = 16 * bins.group_bins if bins.use_shared else 0
        self._launch(
            "histogram.cu",
            "build_histograms",
            0,
            (
                bins.packed,
                np.int32(bins.row_bits),
                bins.layout,
                rows,
                gpair,
                segments,
                offsets,
                np.int32(m),
                np.int64(_HIST_MIN_ROWS),
                bins.cut_ptrs,
                bins.group_begin,
                bins.group_end,
                np.int64(total_bins),
                np.int32(bins.use_shared),
                hist,
            ),
            threads=_HIST_THREADS,
            shared=shared,
            grid=(slices, bins.n_groups),
        )
        return hist

    # -- split evaluation --------------------------------------------------------------------
    def _scales(self, scales):
        """The scales as the kernels read them: C-contiguous float64 (2,) on the device."""
        return self.xp.ascontiguousarray(self.xp.asarray(scales, dtype=self.xp.float64))

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
        self._evaluate(
            hist, None, records, cut_ptrs, feature_mask, scales, params, bounds, monotone, categorical, cat_bits
        )

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
    ):
        """See ``Backend.evaluate_children``: the split search writes the histograms it reads
        (split.cu ``derive_feature_cells``), no children_histograms launch; with ``keep``
        False (and no categorical feature, whose kernels read them after the search) it
        writes none and reads the parents' and built cells instead."""
        # no parent or no feature: no cell to derive, and _evaluate's best_per_node writes no split
        k, total_bins = int(built.shape[0]), int(built.shape[1])
        shape = (2 * k, total_bins, 2)
        derive = (parent_hist, built, build_left)
        if not keep and categorical is None:
            self._evaluate(None, derive, records, cut_ptrs, feature_mask, scales, params, bounds, monotone)
            return None
        if out is None:
            out = self.empty(shape, np.int64)
        else:
            check_int64_out(out, shape, "children histograms go to")
        self._evaluate(
            out, derive, records, cut_ptrs, feature_mask, scales, params, bounds, monotone, categorical, cat_bits
        )
        return out if keep else None

    def _evaluate(
        self,
        hist,
        derive,
        records,
        cut_ptrs,
        feature_mask,
        scales,
        params,
        bounds,
        monotone,
        categorical=None,
        cat_bits=None,
    ) -> None:
        """evaluate_splits of ``hist``; with ``derive`` (parent histograms, built histograms,
        build_left) best_per_feature writes ``hist`` from them first, or with ``hist`` None
        (no categorical feature) reads the cells from them and writes none."""
        records = self._records(records, in_place=True)
        n = int(records.shape[0])
        n_features = len(cut_ptrs) - 1
        if n == 0:
            return
        _, dev_ptrs, chunks = self._cuts_entry(cut_ptrs)
        # one mask row serves every node; None: every feature
        mask_rows = 0 if feature_mask is None else int(feature_mask.shape[0])
        mask = self._no_mask if feature_mask is None else self.xp.ascontiguousarray(feature_mask, dtype=self.xp.bool_)
        constrained = monotone is not None
        if constrained:
            bounds = self.xp.ascontiguousarray(bounds, dtype=self.xp.float64)
            monotone = self.xp.ascontiguousarray(monotone, dtype=self.xp.int8)
        else:
            bounds, monotone = self._no_bounds, self._no_signs
        is_cat = self._no_cat_nodes[0] if categorical is None else self._device_layout(categorical)[0]
        cand = self._scratch("candidates", n * n_features * _CANDIDATE_BYTES // 8, np.int64)
        pairs = n * n_features
        group = self._search_group(pairs, chunks)  # warps a pair, 8 warps a block
        split_args = (
            self._scales(scales),
            np.float64(params.reg_lambda),
            np.float64(params.alpha),
            np.float64(params.min_child_weight),
            np.float64(params.max_delta_step),
            bounds,
            monotone,
            np.int32(constrained),
        )
        # the node's last feature warp picks its split; categorical candidates come later
        pick = categorical is None and pairs > 0
        # the kernel's histogram: without ``hist`` (derive 2) neither read nor written, the built
        # histograms stand in (their bins are the total)
        cells = hist if hist is not None else derive[1]
        if pairs:
            self._launch(
                "split.cu",
                "best_per_feature" if group == 1 else "best_per_feature_grouped",
                0,
                (cells, np.int64(cells.shape[1]), records, dev_ptrs, np.int32(n_features), np.int32(pairs))
                + (mask, np.int32(mask_rows))
                + split_args
                + (is_cat, np.int32(categorical is not None), cand, np.float64(params.gamma))
                + (self._node_counters(n if pick else 0), np.int32(pick))
                + (
                    (hist, hist, hist, np.int32(0))
                    if derive is None
                    else (*derive, np.int32(1 if hist is not None else 2))
                )
                + (np.int32(group),),
                threads=256,
                grid=-(-pairs * group // 8),
            )
        if categorical is not None:
            self._evaluate_categorical(hist, records, cut_ptrs, mask, mask_rows, split_args, params, categorical, cand)
        if not pick:
            self._launch(
                "split.cu",
                "best_per_node",
                32 * n,  # one warp per node
                (cand, np.int32(n), np.int32(n_features), np.float64(params.gamma), records),
                threads=256,
            )
        if categorical is not None:
            self._categorical_split_bits(hist, records, cut_ptrs, split_args[:5], categorical, cand, cat_bits)

    def _evaluate_categorical(self, hist, records, cut_ptrs, mask, mask_rows, split_args, params, categorical, cand):
        """The candidates of the categorical features (split.cu ``best_per_category_feature``):
        one block per (node, feature); a partition feature's categories are sorted in shared
        memory, or in a global scratch slice per block where more than a block's shared memory
        holds (the grid is then a wave of blocks looping over the pairs)."""
        n, n_features = int(hist.shape[0]), len(cut_ptrs) - 1
        _, n_cats, cat_features, partition_sort = self._device_layout(categorical, params)
        pairs = n * int(cat_features.shape[0])
        if pairs == 0:
            return
        # sort entries (a power of two at least the categories) per block: 8 B key + 4 B code
        fits = max(1, (self.shared_bytes - _CAT_STATIC_SHARED) // 12)
        cap = 1 << (fits.bit_length() - 1)
        if partition_sort <= cap:
            shared_entries, slots, grid = max(partition_sort, 1), 0, pairs
        else:  # the widest features sort in global memory, one slice per resident block
            shared_entries, slots = min(cap, 4096), 2 * self.sm_count
            grid = min(pairs, slots)
        if 12 * shared_entries + _CAT_STATIC_SHARED > 48 * 1024:
            # past 48 KiB a block's shared memory (static included) needs the opt-in, which
            # _launch only asks for where the dynamic part alone is past it (4,096 keys are
            # 48 KiB exactly)
            self._allow_shared("split.cu", "best_per_category_feature", 12 * shared_entries)
        keys = self._scratch("category_keys", max(1, slots * partition_sort), np.uint64)
        codes = self._scratch("category_codes", max(1, slots * partition_sort), np.int32)
        self._launch(
            "split.cu",
            "best_per_category_feature",
            0,
            (hist, np.int64(hist.shape[1]), records, self._device_ptrs(cut_ptrs), np.int32(n_features))
            + (cat_features, np.int32(cat_features.shape[0]), np.int64(pairs), mask, np.int32(mask_rows))
            + split_args
            + (np.int32(params.max_cat_to_onehot), np.int32(params.max_cat_threshold), np.int32(shared_entries))
            + (keys, codes, np.int64(partition_sort), cand),
            threads=_CAT_THREADS,
            shared=12 * shared_entries,
            grid=grid,
        )

    def _categorical_split_bits(self, hist, records, cut_ptrs, param_args, categorical, cand, cat_bits) -> None:
        """Each node's right-going categories into ``cat_bits`` (uint32 (m, words) on the
        device), from the candidates ``best_per_node`` chose (split.cu ``categorical_split_bits``)."""
        m, words = int(records.shape[0]), int(categorical.words)
        if cat_bits is None or tuple(cat_bits.shape) != (m, words) or cat_bits.dtype != np.uint32:
            shape = None if cat_bits is None else (cat_bits.dtype, tuple(cat_bits.shape))
            raise DGBoostValueError(
                f"evaluate_splits with categorical features needs cat_bits, uint32 ({m}, {words}) on the device, "
                f"got {shape}"
            )
        out = cat_bits if cat_bits.flags.c_contiguous else self.empty((m, words), np.uint32)
        self._launch(
            "split.cu",
            "categorical_split_bits",
            0,
            (hist, np.int64(hist.shape[1]), records, np.int32(m), self._device_ptrs(cut_ptrs))
            + (np.int32(len(cut_ptrs) - 1), self._device_layout(categorical)[0], cand)
            + param_args
            + (np.int32(words), out),
            threads=64,
            grid=min(m, self.sm_count * 32),
        )
        if out is not cat_bits:
            cat_bits[...] = out

    def child_bounds(self, parents, bounds, monotone, scales, params):
        """float64 (2k, 2) on the device: the weight bounds of the children of ``parents``."""
        xp = self.xp
        parents = self._records(parents)
        k = int(parents.shape[0])
        out = self.empty((2 * k, 2), np.float64)
        if k:
            self._launch(
                "split.cu",
                "child_bounds",
                k,
                (
                    parents,
                    np.int32(k),
                    xp.ascontiguousarray(bounds, dtype=xp.float64),
                    xp.ascontiguousarray(monotone, dtype=xp.int8),
                    self._scales(scales),
                    np.float64(params.reg_lambda),
                    np.float64(params.alpha),
                    np.float64(params.min_child_weight),
                    np.float64(params.max_delta_step),
                    out,
                ),
                threads=64,
            )
        return out

    def leaf_weights(self, sums, scale_g, scale_h, params, bounds=None):
        """float64 (n,) on the host, with the CPU engine's kernel (the sums are host arrays)."""
        return leaf_weights_on_host(sums, scale_g, scale_h, params, bounds)

    def node_bounds(self, left, right, feature, sums, monotone, scale_g, scale_h, params):
        """float64 (n, 2) on the host: every node's bounds, replayed by the CPU engine's kernel
        from the tree's host arrays (the same arithmetic as ``child_bounds`` on the device)."""
        return node_bounds_on_host(left, right, feature, sums, monotone, scale_g, scale_h, params)

    # -- partition and margins -----------------------------------------------------------------
    def _segments(self, begins, ends):
        begins = np.asarray(begins, np.int64)
        sizes = np.asarray(ends, np.int64) - begins
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        return begins, offsets, int(offsets[-1])

    def partition(self, bins: EllpackMatrix, rows, records, max_rows=None, categorical=None, cat_bits=None, out=None):
        records = self._records(records)
        k = int(records.shape[0])
        counts = self.empty((k, 2), np.int64)
        if k:
            self._partition(bins, rows, records, k, counts, max_rows, categorical, cat_bits, out, self._no_split)
        return counts

    def split_level(
        self,
        bins_by_feature: EllpackMatrix,
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
        """See ``Backend.split_level``: the partition's first launch also makes the children
        (its last block, once it has counted the rows) and zeroes ``built`` (every block a
        slice), so a level is the partition's two launches, the histogram's and the search's.
        ``build_segments``, ``build_left`` and ``built`` are work arrays: a level's launches
        read them before the next level's first launch writes them."""
        parents = self._records(parents)
        k = int(parents.shape[0])
        children = self.empty((2 * k, NODE_FIELDS), np.int64) if out is None else self._records(out, in_place=True)
        build_segments = self._work("build_segments", (k, 2), np.int64)
        build_left = self._work("build_left", (k,), np.int64)
        built = None
        if hist_bins and 16 * k * hist_bins <= _WORK_HIST_BYTES:
            built = self._work("built", (k, hist_bins, 2), np.int64, reserve=_WORK_HIST_BYTES // 8)
        if k == 0:
            return children, build_segments, build_left, built
        # the next level's partition reads this level's child tiles while its own first
        # launch writes the children's: two arrays, in turn
        self._split_levels += 1
        child_tiles = self._scratch(f"child_tiles_{self._split_levels % 2}", 2 * k + 1, np.int64)
        build_offsets = self._scratch("build_offsets", k + 1, np.int64)
        split = (
            np.int32(1),
            np.int32(by_hessian),
            children,
            build_segments,
            build_left,
            build_offsets,
            child_tiles,
            self._no_split[7] if built is None else built,
            np.int64(0 if built is None else built.size // 2),
        )
        counts = self._work("counts", (k, 2), np.int64)
        self._partition(bins_by_feature, rows, parents, k, counts, max_rows, categorical, cat_bits, out_rows, split)
        self._scanned = {id(build_segments): (build_segments, build_offsets), id(children): (children, child_tiles)}
        return children, build_segments, build_left, built

    def _partition(
        self, bins: EllpackMatrix, rows, records, k: int, counts, max_rows, categorical, cat_bits, out, split
    ):
        """Queue the partition of ``records``' segments of ``rows`` (into ``out`` when given),
        their (left, right) counts into ``counts``; ``split``: partition_flags' arguments
        from its ``split`` flag on (:attr:`_no_split` for none)."""
        n = int(rows.shape[0])
        tile_offsets = self._scanned_offsets(records)
        if tile_offsets is None:
            tile_offsets = self._segment_offsets(records[:, BEGIN:], NODE_FIELDS, k, _PARTITION_TILE)
        # the split segments are disjoint parts of [0, n): at most this many tiles
        bound = n if max_rows is None else min(n, int(max_rows))
        max_tiles = -(-bound // _PARTITION_TILE) + k
        flags = self._scratch("partition_flags", n, np.uint8)
        tile_lefts = self._scratch("tile_lefts", max_tiles, np.int64)
        tile_scan = self._scratch("tile_scan", max_tiles + 1, np.int64)
        buffer = self._scratch("partition_buffer", n, np.int32) if out is None else out
        tiled = (records, np.int32(k), tile_offsets)
        # flags and tile counts; the last block scans them into the parents' counts (and,
        # with ``split``, makes their children)
        self._launch(
            "partition.cu",
            "partition_flags",
            0,
            (bins.packed, np.int32(bins.row_bits), bins.layout, bins.cut_ptrs, rows)
            + tiled
            + self._partition_categories(categorical, cat_bits, k)
            + (flags, tile_lefts, tile_scan, counts, self._partition_done)
            + split,
            threads=256,
            grid=max_tiles,
        )
        self._launch(
            "partition.cu",
            "partition_scatter",
            0,
            (rows, flags) + tiled + (tile_scan, counts, buffer),
            threads=256,
            grid=max_tiles,
        )
        if out is None:
            self._launch(
                "partition.cu", "partition_copy_back", 0, (buffer,) + tiled + (rows,), threads=256, grid=max_tiles
            )

    def _partition_categories(self, categorical, cat_bits, k: int) -> tuple:
        """partition_flags' categorical arguments: is_cat (uint8 (F,)), the parents' bitsets
        (uint32 (k, words)), words and the flag 1; placeholders and 0 without categorical
        features."""
        if categorical is None:
            return (self._no_cat_nodes[0], self._no_cat_nodes[3], np.int32(1), np.int32(0))
        layout = self._device_layout(categorical)
        words = int(categorical.words)
        if cat_bits is None or tuple(cat_bits.shape) != (k, words) or cat_bits.dtype != np.uint32:
            shape = None if cat_bits is None else (cat_bits.dtype, tuple(cat_bits.shape))
            raise DGBoostValueError(
                f"partition of {k} categorical records needs cat_bits uint32 ({k}, {words}), got {shape}"
            )
        return (layout[0], self.xp.ascontiguousarray(cat_bits), np.int32(words), np.int32(1))

    def _device_layout(self, categorical, params=None) -> tuple:
        """A CategoricalLayout on the device, uploaded once per layout object: is_cat (uint8
        (F,)), n_cats (int32 (F,)), the categorical features' indices (int32, ascending) and,
        with ``params``, the sort size of its widest partition feature (the power of two at
        least its categories; 0 when every categorical feature is one-hot)."""
        hit = self._layout_cache
        if hit is None or hit[0] is not categorical:
            is_cat = np.ascontiguousarray(categorical.is_cat, np.uint8)
            hit = self._layout_cache = (
                categorical,
                (
                    self.xp.asarray(is_cat),
                    self.xp.asarray(np.ascontiguousarray(categorical.n_cats, np.int32)),
                    self.xp.asarray(np.flatnonzero(is_cat).astype(np.int32)),
                ),
            )
        if params is None:
            return hit[1]
        n_cats = np.asarray(categorical.n_cats, np.int64)[np.asarray(categorical.is_cat) != 0]
        widest = int(n_cats[n_cats >= int(params.max_cat_to_onehot)].max(initial=0))
        return hit[1] + (1 << max(0, widest - 1).bit_length() if widest else 0,)

    def add_leaf_values(self, margin, rows, begins, ends, values, group):
        begins, offsets, total = self._segments(begins, ends)
        if total == 0:
            return
        meta = self.asarray(np.concatenate([offsets, begins]))
        n_leaves = begins.size
        dev_values = self.asarray(np.asarray(values, np.float32))
        self._launch(
            "leaf.cu",
            "add_leaf_values",
            total,
            (
                margin,
                np.int32(margin.shape[1]),
                np.int32(group),
                rows,
                meta[: n_leaves + 1],
                meta[n_leaves + 1 :],
                np.int32(n_leaves),
                dev_values,
                np.int64(total),
            ),
        )

    def add_record_leaf_values(
        self, margin, rows, records, scales, params, group, bins=None, categorical=None, cat_bits=None
    ):
        records = self._records(records)
        m = int(records.shape[0])
        n = int(rows.shape[0])
        if m == 0 or n == 0:
            return
        segments = self.empty((m, 2), np.int64)
        values = self.empty(m, np.float32)
        self._launch(
            "split.cu",
            "record_leaf_values",
            m,
            (
                records,
                np.int32(m),
                self._scales(scales),
                np.float64(params.reg_lambda),
                np.float64(params.alpha),
                np.float64(params.min_child_weight),
                np.float64(params.max_delta_step),
                np.float64(params.eta),
                segments,
                values,
            ),
            threads=64,
        )
        if bins is not None:
            self._add_walked_leaf_values(margin, bins, records, values, group, categorical, cat_bits)
            return
        offsets = self._segment_offsets(segments, 2, m, 1)
        # every row is in one leaf: n positions (the kernel also stops at the leaves' total)
        self._launch(
            "leaf.cu",
            "add_leaf_values",
            n,
            (
                margin,
                np.int32(margin.shape[1]),
                np.int32(group),
                rows,
                offsets,
                segments[:, 0].copy(),
                np.int32(m),
                values,
                np.int64(n),
            ),
        )

    def _add_walked_leaf_values(self, margin, bins: EllpackMatrix, records, values, group, categorical, cat_bits):
        """The leaf values (float32 (m,) on the device, one per record) added to the margins of
        the rows that reach them, every row walking the whole-level tree ``records`` (heap
        order, m = 2**(depth + 1) - 1) from its own entries in row order (kernels/leaf.cu)."""
        m = int(records.shape[0])
        max_depth = (m + 1).bit_length() - 2
        if (2 << max_depth) - 1 != m or int(margin.shape[0]) != bins.n_rows:
            raise DGBoostValueError(
                f"a walk needs the records of whole levels (2**(depth + 1) - 1) and a margin row per "
                f"matrix row, got {m} records and {int(margin.shape[0])} margins for {bins.n_rows} rows"
            )
        n_slots = (1 << max_depth) - 1  # the levels above the last: the slots that may split
        # the slots' category arguments as partition_flags takes them (placeholders without)
        slot_bits = None if categorical is None else cat_bits[:n_slots]
        is_cat, bits, words, has_cat = self._partition_categories(categorical, slot_bits, n_slots)
        table = self.empty((max(n_slots, 1), 4), np.int32)
        if n_slots:
            self._launch(
                "leaf.cu",
                "walk_table",
                n_slots,
                (records, np.int32(n_slots), bins.layout, bins.cut_ptrs, is_cat, has_cat, table),
            )
        self._launch(
            "leaf.cu",
            "add_walked_leaf_values",
            bins.n_rows,
            (
                margin,
                np.int32(margin.shape[1]),
                np.int32(group),
                bins.packed,
                np.int32(bins.row_bits),
                table,
                np.int32(max_depth),
                bits,
                words,
                values,
                np.int32(bins.n_rows),
            ),
            threads=256,
        )

    def read_later(self, arrays):
        """Copies of device ``arrays`` into pinned host memory, queued on the stream; the
        returned object's ``result()`` waits for them (:class:`_PendingRead`)."""
        return _PendingRead(self, arrays)

    # -- prediction ------------------------------------------------------------------------------
    def _trees(self, ensemble, t0: int, t1: int):
        """Node arrays of trees [t0, t1) on the device, with offsets rebased to the slice."""
        xp = self.xp
        offsets = ensemble.offsets()
        lo, hi = int(offsets[t0]), int(offsets[t1])
        return (
            xp.asarray(ensemble.left[lo:hi]),
            xp.asarray(ensemble.right[lo:hi]),
            xp.asarray(ensemble.feature[lo:hi]),
            xp.asarray(ensemble.split_value[lo:hi]),
            xp.asarray(ensemble.default_left[lo:hi].view(np.uint8)),
            xp.asarray(ensemble.value[lo:hi]),
            xp.asarray(offsets[t0 : t1 + 1] - lo),
            xp.asarray(ensemble.groups()[t0:t1]),
        )

    def _categorical_nodes(self, ensemble, t0: int, t1: int) -> tuple:
        """The prediction kernels' categorical arguments for trees [t0, t1): split_type (uint8),
        cat_begin (int64, word offsets into the whole ``cat_bits``), cat_words (int32),
        cat_bits (uint32) on the device (``Ensemble.categorical_kernel_arrays``) and the flag
        1; placeholders and 0 for an ensemble without categorical splits (the kernels then
        never read them)."""
        arrays = ensemble.categorical_kernel_arrays() if hasattr(ensemble, "categorical_kernel_arrays") else None
        if arrays is None:
            return self._no_cat_nodes
        split_type, begin, words, bits = arrays
        offsets = ensemble.offsets()
        lo, hi = int(offsets[t0]), int(offsets[t1])
        xp = self.xp
        return (
            xp.asarray(np.ascontiguousarray(split_type[lo:hi], np.uint8)),
            xp.asarray(np.ascontiguousarray(begin[lo:hi], np.int64)),
            xp.asarray(np.ascontiguousarray(words[lo:hi], np.int32)),
            xp.asarray(np.ascontiguousarray(bits, np.uint32) if len(bits) else np.zeros(1, np.uint32)),
            np.int32(1),
        )

    def predict_margin(self, ensemble, values, tree_begin, tree_end, out):
        """Add trees ``[tree_begin, tree_end)`` to ``out`` (float32 (n, n_groups), device or host)."""
        if tree_end <= tree_begin or values.shape[0] == 0:
            return out
        xp = self.xp
        x = xp.ascontiguousarray(xp.asarray(values, dtype=xp.float32))
        target = out if not isinstance(out, np.ndarray) else xp.asarray(out)
        left, right, feature, split_value, dl, value, offsets, groups = self._trees(ensemble, tree_begin, tree_end)
        n = x.shape[0]
        self._launch(
            "predict.cu",
            "predict_margin",
            n,
            (
                left,
                right,
                feature,
                split_value,
                dl,
                value,
                offsets,
                groups,
            )
            + self._categorical_nodes(ensemble, tree_begin, tree_end)
            + (
                x,
                np.int64(n),
                np.int32(x.shape[1]),
                np.int32(0),
                np.int32(tree_end - tree_begin),
                np.int32(target.shape[1]),
                target,
            ),
        )
        if target is not out:
            out[...] = self.to_host(target)
        return out

    def predict_leaf(self, ensemble, values, tree_begin, tree_end):
        xp = self.xp
        x = xp.ascontiguousarray(xp.asarray(values, dtype=xp.float32))
        n, n_trees = x.shape[0], max(tree_end - tree_begin, 0)
        out = self.empty((n, n_trees), np.int32)
        if n_trees and n:
            left, right, feature, split_value, dl, _, offsets, _ = self._trees(ensemble, tree_begin, tree_end)
            self._launch(
                "predict.cu",
                "predict_leaf",
                n,
                (
                    left,
                    right,
                    feature,
                    split_value,
                    dl,
                    offsets,
                )
                + self._categorical_nodes(ensemble, tree_begin, tree_end)
                + (
                    x,
                    np.int64(n),
                    np.int32(x.shape[1]),
                    np.int32(0),
                    np.int32(n_trees),
                    out,
                ),
            )
        return out

    # -- stages of other modules: objective gradients, the sketch, SHAP -----------------------
    def logistic_gradient(self, margin, label, weight, scale_pos_weight: float):
        """float32 (n, 1) gradient and hessian of the logistic loss, one kernel with the CPU's
        float64 arithmetic (tanh may differ by 1 ulp), no float64 temporaries."""
        from ._cuda_objective import logistic_gradient

        return logistic_gradient(margin, label, weight, scale_pos_weight)

    def hashed_below(self, global_index, offset: int, n: int, key: int, threshold: float):
        """bool (n,) on the device: whether each row's hashed uniform is below ``threshold``.

        Parameters
        ----------
        global_index : device array of int64, shape (n,), or None
            The rows' global indices; None: ``offset, offset + 1, ...``.
        offset, n : int
        key : int
            The hash key of (seed, stream), an unsigned 64-bit value.
        threshold : float

        Returns
        -------
        device array of bool, shape (n,)
            ``quantile.hashed_uniform(...) < threshold`` bit for bit, with no temporaries
            (``kernels/hash.cu``).
        """
        out = self.empty(n, np.bool_)
        use_index = global_index is not None
        index = self.xp.ascontiguousarray(global_index, dtype=np.int64) if use_index else self.empty(1, np.int64)
        if n:
            self._launch(
                "hash.cu",
                "hashed_below",
                n,
                (index, np.int32(use_index), np.int64(offset), np.int64(n), np.uint64(key), np.float64(threshold), out),
            )
        return out

    def true_indices(self, mask):
        """int64 on the device: the indices of ``mask``'s true entries, in order
        (``flatnonzero``), by ``kernels/select.cu``: CuPy's own compiles a kernel for large
        arrays at their first use, so a small first job would not warm what a big one runs.

        Parameters
        ----------
        mask : device array of bool, shape (n,)

        Returns
        -------
        device array of int64, shape (number of true entries,)
        """
        mask = self.xp.ascontiguousarray(mask, dtype=np.bool_)
        n = int(mask.size)
        blocks = max(1, -(-n // (_THREADS * _SELECT_PER_THREAD)))
        counts = self.empty(blocks, np.int32)
        self._launch("select.cu", "true_counts", n, (mask, np.int64(n), counts), grid=blocks)
        counts = self.to_host(counts).astype(np.int64)
        starts = np.zeros(blocks, np.int64)
        np.cumsum(counts[:-1], out=starts[1:])
        out = self.empty(int(starts[-1] + counts[-1]), np.int64)
        if out.size:
            self._launch("select.cu", "true_indices", n, (mask, np.int64(n), self.asarray(starts), out), grid=blocks)
        return out

    def take_matrix_rows(self, values, rows):
        """The rows ``rows`` of a float32 device matrix, bit for bit ``values[rows]``, by
        ``kernels/select.cu`` (CuPy's gather compiles a kernel of 64-bit indexing at its first
        use on a matrix of more than 2 GiB, inside the first large job).

        Parameters
        ----------
        values : device array of float32, shape (n, F)
        rows : device array of int64, shape (m,)
            Row indices in [0, n).

        Returns
        -------
        device array of float32, shape (m, F), C order
        """
        if values.dtype != np.float32 or values.ndim != 2:
            raise DGBoostValueError(f"take_matrix_rows takes a float32 matrix, got {values.dtype} {values.shape}")
        m, n_cols = int(rows.size), int(values.shape[1])
        out = self.empty((m, n_cols), np.float32)
        if m and n_cols:
            self._launch(
                "select.cu",
                "take_matrix_rows",
                m * n_cols,
                (
                    values,
                    np.int64(values.strides[0] // 4),
                    np.int64(values.strides[1] // 4),
                    np.int32(n_cols),
                    self.xp.ascontiguousarray(rows, dtype=np.int64),
                    np.int64(m),
                    out,
                ),
            )
        return out

    def first_infinite(self, values) -> int:
        """The lowest C-order index of an infinite entry of the float32 device array
        ``values`` (C-contiguous), or its size when there is none: one kernel and one read of a
        word (``kernels/select.cu``), no mask.

        Parameters
        ----------
        values : device array of float32, C-contiguous

        Returns
        -------
        int
        """
        n = int(values.size)
        first = self.xp.full(1, n, dtype=np.uint64)
        if n:
            self._launch("select.cu", "first_infinite", n, (values, np.int64(n), first))
        return int(self.to_host(first)[0])

    def sketch_cuts(self, values, rows, features: range, max_bin: int, block_values: int, weights=None) -> list:
        """Cut values of ``features`` of device ``values`` (``rows``: the sampled rows, None:
        every row; ``weights``: the rows' device weights, None: unit weights), the host
        sketch's bit for bit: sorted and cut on the device, ``block_values`` values at a time;
        only the cut values cross to the host."""
        from ._cuda_sketch import cut_values

        return cut_values(self, values, rows, features, max_bin, block_values, weights)

    def shap_engine(self, max_table_bytes: int | None = None):
        """The SHAP engine of this GPU (``backend/_cuda_shap.py``)."""
        from ._cuda_shap import CudaEngine

        return CudaEngine(self, max_table_bytes)
