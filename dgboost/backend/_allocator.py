"""Which allocator CuPy's device memory comes from: the ``use_rmm`` option of
:mod:`dgboost.config` (XGBoost's name), applied when a CUDA backend is made.

With ``use_rmm=True`` and RAPIDS Memory Manager installed, CuPy allocates through RMM, so
that dgboost shares one pool with cuDF, cuML and XGBoost in the same process; without RMM
the option warns once and CuPy's own memory pool is used (the default). On the CPU the option
does nothing, as in XGBoost.
"""

from __future__ import annotations

import warnings
from types import ModuleType

from ..config import get_config

__all__ = ["apply_allocator"]

_warned = False


def apply_allocator(cupy: ModuleType) -> str:
    """Route ``cupy``'s allocations through RMM when ``use_rmm`` asks for it.

    Parameters
    ----------
    cupy : module
        The ``cupy`` module.

    Returns
    -------
    str
        ``"rmm"`` when CuPy now allocates through RMM, ``"cupy"`` otherwise (the allocator is
        left as it is: CuPy's pool, or whatever the user set).
    """
    global _warned
    if not get_config()["use_rmm"]:
        return "cupy"
    try:
        from rmm.allocators.cupy import rmm_cupy_allocator
    except ImportError:
        if not _warned:
            _warned = True
            warnings.warn(
                "use_rmm=True but RAPIDS Memory Manager (rmm) is not installed: CuPy's memory pool is used",
                UserWarning,
                stacklevel=3,
            )
        return "cupy"
    cupy.cuda.set_allocator(rmm_cupy_allocator)
    return "rmm"
