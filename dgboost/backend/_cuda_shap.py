"""The GPU's SHAP engine (``CUDABackend.shap_engine``): ``kernels/treeshap_rows.cu`` and
``kernels/treeshap_interventional.cu`` through :mod:`dgboost.backend._cuda_treeshap` and
:mod:`dgboost.backend._cuda_interventional`, bitwise the CPU engine's values.

It has :class:`dgboost.explain.engines.CpuEngine`'s interface; the explainer finds it through
its backend and never imports it.
"""

from __future__ import annotations

from .._compat import is_cupy_array
from ..explain.engines import call_row_bytes, margins_from_leaves

__all__ = ["CudaEngine", "GPU_TABLE_BYTES", "DEVICE_CALL_BYTES"]

#: the GPU's default weight-table budget: device memory is rarely short of it, and a model
#: whose paths all have tables explains several times faster than with the CPU's 256 MiB
#: (docs/benchmarks.md)
GPU_TABLE_BYTES = 1 << 30

DEVICE_CALL_BYTES = 256 << 20  # a GPU engine call's outputs and scratch, by default


class CudaEngine:
    """CuPy rows (host rows are uploaded per chunk) and outputs; ``kernels/treeshap_rows.cu``.

    Parameters
    ----------
    backend : CUDABackend or None
        The backend of the GPU the engine runs on (it finds the leaves rows reach); None for
        an engine that only sizes chunks.
    max_table_bytes : int, optional
        Budget of the per-path weight tables; default :data:`GPU_TABLE_BYTES`.
    """

    name = "cuda"

    def __init__(self, backend, max_table_bytes: int | None = None):
        self.backend = backend
        self.max_table_bytes = GPU_TABLE_BYTES if max_table_bytes is None else int(max_table_bytes)

    @property
    def xp(self):
        import cupy

        return cupy

    def keeps(self, values) -> bool:
        """Whether rows are used where they are: device rows are, host rows are uploaded."""
        return is_cupy_array(values)

    def margins(self, ensemble, rows):
        """The model's raw output, float64 (n, k), on the device."""
        leaves = self.backend.predict_leaf(ensemble, rows, 0, ensemble.n_trees)
        return margins_from_leaves(self.xp, ensemble, leaves)

    def path_dependent(self, table, rows, algorithm: str, weight_tables):
        """Contributions (n, k, F + 1), float64, on the device (``weight_tables`` unused: the
        device builds its own within ``max_table_bytes``)."""
        from ._cuda_treeshap import shap_values_device

        if algorithm == "table":
            return shap_values_device(table, rows, self.max_table_bytes)
        return shap_values_device(table, rows, 0, quad_max_k=0)  # EXTEND / UNWOUND-SUM, as the CPU's

    def interactions(self, table, rows, method: str | None):
        """The CPU's quadrature method on the GPU, whatever ``method`` (all give the same
        values up to rounding)."""
        from ._cuda_treeshap import shap_interactions_device

        return shap_interactions_device(table, rows)

    def interventional(self, table, rows, background, transform: str | None):
        """Interventional SHAP on the GPU (``kernels/treeshap_interventional.cu``), bitwise
        the CPU engine's; a CuPy array (n, k, F + 1), float64, whatever the rows' module."""
        from ._cuda_interventional import shap_values_interventional_device

        return shap_values_interventional_device(table, rows, background, transform)

    def chunk_rows(self, table, n_outputs: int, interactions: bool, n_background: int | None = None) -> int:
        """Rows per call: about :data:`DEVICE_CALL_BYTES` a call, but at least 256 rows (wide
        interaction outputs: more)."""
        per_row = call_row_bytes(table, n_outputs, interactions, n_background)
        return max(256, min(1 << 22, DEVICE_CALL_BYTES // per_row))
