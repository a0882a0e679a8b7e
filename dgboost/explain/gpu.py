"""TreeSHAP on a CUDA GPU: the packed path table on the device and the warp kernel over rows.

The path table is packed into 32-lane bins (:mod:`.binpack`), laid out lane by lane (one
array per element field, ``n_bins * 32`` entries, empty lanes zeroed) and uploaded once per
(path table fingerprint, device) in a process; ``kernels/treeshap_path.cu`` then maps one warp
over each (bin, tile of rows). Paths longer than 32 elements (trees deeper than 31) fit no
bin: their contributions are computed by the CPU engine and added (slower, never an error).
"""
from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from .binpack import BIN_CAPACITY, pack
from .paths import PathTable

__all__ = ["DevicePathTable", "device_path_table", "shap_values_device"]

_WARPS_PER_BLOCK = 4
_ROWS_PER_TILE = 32           # shap_path_warp
_MAX_TILE_ROWS = 64           # shap_path_tiled: rows of the shared-memory tile, at most
_BINS_PER_BLOCK = 64          # shap_path_tiled: bins whose contributions one tile gathers
_TILE_BYTES = 48 << 10        # shared memory per block (no opt-in needed up to 48 KiB)
_MAX_GRID_Y = 65535

_CACHE: "OrderedDict[tuple, DevicePathTable]" = OrderedDict()
_CACHE_MAX = 4
_LOCK = threading.Lock()


class DevicePathTable:
    """A path table packed into warp bins and uploaded to the current CUDA device.

    Attributes
    ----------
    n_bins : int
    lanes : dict of str -> cupy.ndarray, each of shape (n_bins * 32,)
        ``feature`` int32 (-1: bias or empty), ``lower`` / ``upper`` float32, ``missing``
        uint8, ``zero_fraction`` / ``v`` float64, ``group`` / ``first`` / ``length`` int32.
    oversize : PathTable or None
        The paths longer than 32 elements (computed on the CPU), if any.
    """

    def __init__(self, table: PathTable):
        import cupy

        packed = pack(table)
        t = packed.table
        lengths = t.path_lengths.astype(np.int64)
        path_of = np.repeat(np.arange(t.n_paths), lengths)
        local = np.arange(t.n_elements, dtype=np.int64) - t.path_offsets[:-1][path_of]
        binned = packed.element_bin >= 0
        pos = packed.element_bin[binned].astype(np.int64) * BIN_CAPACITY + packed.element_lane[binned]
        n_lanes = packed.n_bins * BIN_CAPACITY
        host = {
            "feature": np.full(n_lanes, -1, np.int32), "lower": np.zeros(n_lanes, np.float32),
            "upper": np.zeros(n_lanes, np.float32), "missing": np.zeros(n_lanes, np.uint8),
            "zero_fraction": np.ones(n_lanes, np.float64), "v": np.zeros(n_lanes, np.float64),
            "group": np.zeros(n_lanes, np.int32), "first": np.arange(n_lanes, dtype=np.int32) % BIN_CAPACITY,
            "length": np.zeros(n_lanes, np.int32),
        }
        host["feature"][pos] = t.feature[binned]
        host["lower"][pos] = t.lower[binned]
        host["upper"][pos] = t.upper[binned]
        host["missing"][pos] = t.is_missing_branch[binned]
        host["zero_fraction"][pos] = t.zero_fraction[binned]
        host["v"][pos] = t.path_v[path_of[binned]]
        host["group"][pos] = t.path_group[path_of[binned]]
        host["first"][pos] = (packed.element_lane[binned] - local[binned]).astype(np.int32)
        host["length"][pos] = lengths[path_of[binned]].astype(np.int32)
        self.n_bins = int(packed.n_bins)
        self.lanes = {k: cupy.asarray(v) for k, v in host.items()}
        self.n_groups = int(t.n_groups)
        self.n_features = int(t.n_features)
        self.oversize = t.select_paths(np.sort(packed.oversize_paths)) if len(packed.oversize_paths) else None


def device_path_table(table: PathTable) -> DevicePathTable:
    """The uploaded form of ``table`` on the current device, built once per process."""
    import cupy

    key = (table.fingerprint, cupy.cuda.Device().id)
    with _LOCK:
        found = _CACHE.get(key)
        if found is not None:
            _CACHE.move_to_end(key)
            return found
    built = DevicePathTable(table)
    with _LOCK:
        _CACHE[key] = built
        while len(_CACHE) > _CACHE_MAX:
            _CACHE.popitem(last=False)
    return built


def shap_values_device(table: PathTable, rows) -> "object":
    """Path-dependent SHAP contributions on the GPU.

    Parameters
    ----------
    table : PathTable
    rows : numpy.ndarray or cupy.ndarray of float32, shape (n, F)
        F at least ``table.n_features``; NaN marks a missing value.

    Returns
    -------
    cupy.ndarray of float64, shape (n, n_groups, F + 1)
        Contributions, bias (the expected value) last; the engine layout of the CPU's
        :func:`~dgboost.explain.treeshap.shap_values_path`.
    """
    import cupy

    from ..backend._nvrtc import get_module
    from .treeshap import shap_values_path

    X = cupy.ascontiguousarray(cupy.asarray(rows, dtype=cupy.float32))
    n, F = X.shape
    dev = device_path_table(table)
    out = cupy.zeros((n, dev.n_groups, F + 1), dtype=cupy.float64)
    if n and dev.n_bins:
        module = get_module("treeshap_path.cu")
        lanes = [dev.lanes[k] for k in ("feature", "lower", "upper", "missing", "zero_fraction", "v", "group",
                                        "first", "length")]
        width = dev.n_groups * (F + 1)
        tile_rows = min(_MAX_TILE_ROWS, _TILE_BYTES // (8 * width))
        threads = (_WARPS_PER_BLOCK * 32,)
        if tile_rows >= 1:  # contributions gathered per block in shared memory
            kernel = module.get_function("shap_path_tiled")
            grid_x = -(-dev.n_bins // _BINS_PER_BLOCK)
            step = _MAX_GRID_Y * tile_rows
            for r0 in range(0, n, step):
                m = min(n, r0 + step) - r0
                kernel((grid_x, -(-m // tile_rows)), threads,
                       (X[r0:r0 + m], np.int64(m), np.int32(F), *lanes, np.int32(dev.n_bins),
                        np.int32(_BINS_PER_BLOCK), np.int32(tile_rows), np.int32(dev.n_groups), out[r0:r0 + m]),
                       shared_mem=8 * width * tile_rows)
        else:  # outputs too wide for a shared tile: straight to ``out``
            kernel = module.get_function("shap_path_warp")
            grid_x = -(-dev.n_bins // _WARPS_PER_BLOCK)
            step = _MAX_GRID_Y * _ROWS_PER_TILE
            for r0 in range(0, n, step):
                m = min(n, r0 + step) - r0
                kernel((grid_x, -(-m // _ROWS_PER_TILE)), threads,
                       (X[r0:r0 + m], np.int64(m), np.int32(F), *lanes, np.int32(dev.n_bins),
                        np.int32(_ROWS_PER_TILE), np.int32(dev.n_groups), out[r0:r0 + m]))
    if dev.oversize is not None:  # paths deeper than a warp: the CPU engine, then added
        extra = shap_values_path(dev.oversize, cupy.asnumpy(X))
        extra[:, :, F] = 0.0
        out += cupy.asarray(extra)
    out[:, :, F] = cupy.asarray(table.base_margin + table.expected_value())
    return out
