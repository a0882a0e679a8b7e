"""Where an explainer's kernels run: one object per device, so TreeExplainer never branches on it.

An engine says which rows it takes where they are (:meth:`keeps`), computes path-dependent
SHAP contributions and the model's margins in its array module, and sizes the row chunks
that bound one call's memory. Interventional SHAP runs on both: the CPU engine's Numba
kernels (:mod:`dgboost.explain.interventional`), or the same kernels with one thread per row
on the GPU (:mod:`dgboost.explain.gpu_interventional`, bitwise the CPU's values).
"""
from __future__ import annotations

import numpy as np

from .._array import is_device_array, to_host

__all__ = ["CpuEngine", "CudaEngine", "engine_for", "default_table_bytes", "GPU_TABLE_BYTES"]

#: the GPU's default weight-table budget: on an H100, a 100-round x 8-class depth-8 model
#: (920 MB of tables) explained 3.1x faster with every path tabled than with 256 MiB
#: (benchmarks/shap_gpu.py case c); device memory is rarely that short
GPU_TABLE_BYTES = 1 << 30


def default_table_bytes(device: str) -> int:
    """The weight-table budget of ``device`` when none is given (the CPU's: 256 MiB)."""
    from .tables import DEFAULT_MAX_TABLE_BYTES

    return GPU_TABLE_BYTES if device == "cuda" else DEFAULT_MAX_TABLE_BYTES


def _margins_from_leaves(xp, ensemble, leaves):
    """(n, k) float64: base margin + the leaf values reached (``leaves``: (n, T) local node ids),
    summed tree by tree (no (n, T) float temporaries: inputs may be large)."""
    vals = xp.asarray(ensemble.value.astype(np.float64))
    offs = ensemble.offsets()
    groups = ensemble.groups()
    out = xp.tile(xp.asarray(ensemble.base_margin, dtype=xp.float64), (leaves.shape[0], 1))
    for t in range(ensemble.n_trees):
        out[:, int(groups[t])] += vals[int(offs[t]) + leaves[:, t].astype(np.int64)]
    return out


class CpuEngine:
    """NumPy rows and outputs; the Numba kernels of :mod:`dgboost.explain.treeshap`."""

    name = "cpu"
    xp = np

    def keeps(self, values) -> bool:
        """Whether rows are used where they are (False: device rows are copied to the host)."""
        return False

    def leaves(self, ensemble, rows):
        from ..backend import get_backend

        return get_backend("cpu").predict_leaf(ensemble, np.ascontiguousarray(rows, np.float32), 0,
                                               ensemble.n_trees)

    def margins(self, ensemble, rows):
        """The model's raw output, float64 (n, k)."""
        return _margins_from_leaves(np, ensemble, self.leaves(ensemble, rows))

    def path_dependent(self, table, rows, algorithm: str, weight_tables):
        """Contributions (n, k, F + 1), float64; ``weight_tables()`` gives the CPU tables."""
        from .treeshap import shap_values_path, shap_values_table

        if algorithm == "path":
            return shap_values_path(table, rows)
        return shap_values_table(table, rows, tables=weight_tables())

    def interactions(self, table, rows, method: str | None):
        """Interaction values (n, k, F + 1, F + 1), float64, by ``method`` (None: the default)."""
        from .treeshap import shap_interactions

        return shap_interactions(table, rows) if method is None else shap_interactions(table, rows, method=method)

    def interventional(self, table, rows, background, transform: str | None):
        """Interventional SHAP contributions (n, k, F + 1), float64, over ``background``
        ((n_background, F), NumPy or CuPy); ``transform``: None or "logistic" (explain
        sigmoid(margin)), as :func:`~dgboost.explain.interventional.shap_values_interventional`."""
        from .interventional import shap_values_interventional

        return shap_values_interventional(table, to_host(rows), to_host(background), transform=transform)

    def chunk_rows(self, table, n_outputs: int, interactions: bool, n_background: int | None = None) -> int | None:
        """Rows per call (None: the explainer's CPU cost model). ``n_background``: the
        background's rows for interventional SHAP, None for path-dependent SHAP."""
        return None


DEVICE_CALL_BYTES = 256 << 20  # a GPU engine call's outputs and scratch, by default


class CudaEngine:
    """CuPy rows (host rows are uploaded per chunk) and outputs; ``kernels/treeshap_rows.cu``."""

    name = "cuda"

    def __init__(self, max_table_bytes: int):
        self.max_table_bytes = int(max_table_bytes)

    @property
    def xp(self):
        import cupy

        return cupy

    def keeps(self, values) -> bool:
        return is_device_array(values)

    def margins(self, ensemble, rows):
        from ..backend import get_backend

        leaves = get_backend("cuda").predict_leaf(ensemble, rows, 0, ensemble.n_trees)
        return _margins_from_leaves(self.xp, ensemble, leaves)

    def path_dependent(self, table, rows, algorithm: str, weight_tables):
        from .gpu import shap_values_device

        if algorithm == "table":
            return shap_values_device(table, rows, self.max_table_bytes)
        return shap_values_device(table, rows, 0, quad_max_k=0)  # EXTEND / UNWOUND-SUM, as the CPU's

    def interactions(self, table, rows, method: str | None):
        """The CPU's quadrature method on the GPU, whatever ``method`` (all give the same
        values up to rounding)."""
        from .gpu import shap_interactions_device

        return shap_interactions_device(table, rows)

    def interventional(self, table, rows, background, transform: str | None):
        """Interventional SHAP on the GPU (``kernels/treeshap_interventional.cu``), bitwise
        the CPU engine's; a CuPy array (n, k, F + 1), float64, whatever the rows' module."""
        from .gpu_interventional import shap_values_interventional_device

        return shap_values_interventional_device(table, rows, background, transform)

    def chunk_rows(self, table, n_outputs: int, interactions: bool, n_background: int | None = None) -> int:
        # about DEVICE_CALL_BYTES a call, but at least 256 rows (wide interaction outputs: more)
        per_row = call_row_bytes(table, n_outputs, interactions, n_background)
        return max(256, min(1 << 22, DEVICE_CALL_BYTES // per_row))


def call_row_bytes(table, n_outputs: int, interactions: bool, n_background: int | None = None) -> int:
    """Bytes one row takes in an engine call: its output and, for interactions, the
    accumulator (twice the output), or for interventional SHAP (``n_background`` given) the
    logistic transform's scratch row and the margins. The rows' on-bits are never stored."""
    width = (table.n_features + 1) ** 2 * 2 if interactions else table.n_features + 1
    if n_background is not None:
        width = 2 * table.n_features + 3
    return max(8 * n_outputs * width, 1)


def engine_for(device: str, max_table_bytes: int | None = None):
    """The engine of ``device`` ("cpu" or "cuda"); ``max_table_bytes`` None: the device's default."""
    if device != "cuda":
        return CpuEngine()
    return CudaEngine(default_table_bytes(device) if max_table_bytes is None else max_table_bytes)
