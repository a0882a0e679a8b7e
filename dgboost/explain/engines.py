"""SHAP engines: where an explainer's kernels run, so TreeExplainer never branches on the device.

An engine says which rows it takes where they are (:meth:`keeps`), computes path-dependent
SHAP contributions and the model's margins in its array module, and sizes the row chunks
that bound one call's memory. The engine of a device comes from its backend
(``get_backend(device).shap_engine(max_table_bytes)``, the one per-device lookup): the CPU's
is :class:`CpuEngine` here (the Numba kernels of :mod:`dgboost.explain.treeshap` and
:mod:`dgboost.explain.interventional`), the GPU's lives with the CUDA backend and runs the
same kernels with one thread per row (bitwise the CPU's values).
"""

from __future__ import annotations

import numpy as np

from .._array import to_host
from .tables import DEFAULT_MAX_TABLE_BYTES

__all__ = ["CpuEngine", "margins_from_leaves", "call_row_bytes"]


def margins_from_leaves(xp, ensemble, leaves):
    """The model's raw output from the leaves rows reach.

    Parameters
    ----------
    xp : module
        numpy or cupy: where ``leaves`` are and the result is.
    ensemble : Ensemble
    leaves : ndarray of int, shape (n, T)
        Local node ids of the leaf each row reaches in each tree.

    Returns
    -------
    ndarray of float64, shape (n, k)
        Base margin + the leaf values reached, summed tree by tree (no (n, T) float
        temporaries: inputs may be large).
    """
    vals = xp.asarray(ensemble.value.astype(np.float64))
    offs = ensemble.offsets()
    groups = ensemble.groups()
    out = xp.tile(xp.asarray(ensemble.base_margin, dtype=xp.float64), (leaves.shape[0], 1))
    for t in range(ensemble.n_trees):
        out[:, int(groups[t])] += vals[int(offs[t]) + leaves[:, t].astype(np.int64)]
    return out


class CpuEngine:
    """NumPy rows and outputs; the Numba kernels of :mod:`dgboost.explain.treeshap`.

    Parameters
    ----------
    backend : Backend
        The CPU backend (it finds the leaves rows reach).
    max_table_bytes : int, optional
        Budget of the per-path weight tables; default 256 MiB.
    """

    name = "cpu"
    xp = np

    def __init__(self, backend, max_table_bytes: int | None = None):
        self.backend = backend
        self.max_table_bytes = DEFAULT_MAX_TABLE_BYTES if max_table_bytes is None else int(max_table_bytes)

    def keeps(self, values) -> bool:
        """Whether rows are used where they are (False: device rows are copied to the host)."""
        return False

    def leaves(self, ensemble, rows):
        """int32 (n, T) local node ids of the leaf each row of ``rows`` (float32 (n, F)) reaches."""
        return self.backend.predict_leaf(ensemble, np.ascontiguousarray(to_host(rows), np.float32), 0, ensemble.n_trees)

    def margins(self, ensemble, rows):
        """The model's raw output, float64 (n, k)."""
        return margins_from_leaves(np, ensemble, self.leaves(ensemble, rows))

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


def call_row_bytes(table, n_outputs: int, interactions: bool, n_background: int | None = None) -> int:
    """Bytes one row takes in an engine call: its output and, for interactions, the
    accumulator (twice the output), or for interventional SHAP (``n_background`` given) the
    logistic transform's scratch row and the margins. The rows' on-bits are never stored."""
    width = (table.n_features + 1) ** 2 * 2 if interactions else table.n_features + 1
    if n_background is not None:
        width = 2 * table.n_features + 3
    return max(8 * n_outputs * width, 1)
