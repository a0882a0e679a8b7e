"""Array-module dispatch: code written once against ``xp`` runs on NumPy or CuPy arrays.

The module is chosen from the arrays themselves, never from a device string, and CuPy is
imported only when a CuPy array is actually present (so CPU-only installs never touch it).
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

from ._compat import is_cupy_array
from .errors import DGBoostValueError

__all__ = [
    "array_module",
    "as_rows",
    "check_int64_out",
    "float32_from_order_keys",
    "float32_order_keys",
    "is_device_array",
    "to_host",
]


def is_device_array(a) -> bool:
    """True when ``a`` is a CuPy array (checked by type, without importing CuPy)."""
    return is_cupy_array(a)


def array_module(*arrays) -> ModuleType:
    """The array module of the arguments: ``cupy`` if any of them is a CuPy array, else ``numpy``.

    Parameters
    ----------
    *arrays : ndarray, cupy.ndarray, scalar or None
        Anything; only CuPy arrays change the answer.

    Returns
    -------
    module
        ``cupy`` or ``numpy``.
    """
    if any(is_device_array(a) for a in arrays):
        import cupy  # only reached when the caller already holds a CuPy array

        return cupy
    return np


def to_host(a):
    """A NumPy array with the values of ``a`` (a copy for a CuPy array, else ``np.asarray(a)``).

    ``None`` stays ``None`` (optional weights pass through).

    Parameters
    ----------
    a : ndarray, cupy.ndarray, array-like or None

    Returns
    -------
    ndarray or None
        Same shape and dtype as ``a``.
    """
    if a is None:
        return None
    if is_device_array(a):
        return a.get()
    return np.asarray(a)


def as_rows(a, n_rows: int):
    """``a`` viewed as a matrix of ``n_rows`` rows: ``a.reshape(n_rows, -1)`` that also works
    for 0 rows (where NumPy cannot infer the column count).

    Parameters
    ----------
    a : ndarray or cupy.ndarray, shape (n_rows, k) or (n_rows * k,)
    n_rows : int

    Returns
    -------
    ndarray or cupy.ndarray, shape (n_rows, k)
        ``a`` itself when it is already 2-D; a 1-D array with no elements becomes (0, 1).
    """
    if a.ndim == 2:
        return a
    if n_rows == 0:
        return a.reshape(0, 1)
    return a.reshape(n_rows, -1)


def check_int64_out(out, shape: tuple, what: str) -> None:
    """Raise unless ``out`` is a C-contiguous int64 array of ``shape``.

    Parameters
    ----------
    out : ndarray or cupy.ndarray
        The array a backend call was given to write into.
    shape : tuple of int
        The shape the call writes.
    what : str
        The message's start, e.g. "histograms go to".

    Raises
    ------
    DGBoostValueError
        Naming the shape wanted and the dtype and shape given.
    """
    if out.shape != shape or out.dtype != np.int64 or not out.flags.c_contiguous:
        raise DGBoostValueError(f"{what} C-contiguous int64 {shape}, got {out.dtype} {out.shape}")


def float32_order_keys(x: np.ndarray) -> np.ndarray:
    """uint32 keys of float32 values whose unsigned order is the values' order (-0.0 just
    below +0.0).

    Parameters
    ----------
    x : ndarray, shape (n,)
        Converted to float32.

    Returns
    -------
    ndarray of uint32, shape (n,)
    """
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return np.where(bits & np.uint32(0x80000000), ~bits, bits | np.uint32(0x80000000)).astype(np.uint32)


def float32_from_order_keys(keys: np.ndarray) -> np.ndarray:
    """The float32 values of :func:`float32_order_keys`' keys, bit for bit.

    Parameters
    ----------
    keys : ndarray of uint32, shape (n,)

    Returns
    -------
    ndarray of float32, shape (n,)
    """
    keys = np.asarray(keys, dtype=np.uint32)
    bits = np.where(keys & np.uint32(0x80000000), keys & np.uint32(0x7FFFFFFF), ~keys).astype(np.uint32)
    return bits.view(np.float32)
