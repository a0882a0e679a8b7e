"""Interventional TreeSHAP on a CUDA GPU: ``kernels/treeshap_interventional.cu``, one thread per row.

The kernels are the CPU engine's (:mod:`dgboost.explain.interventional`) with one thread per
row of X, walking paths and background rows in the CPU's order, so every value is bitwise the
CPU engine's and does not depend on how the rows are batched. What only depends on the
background (its on-bits, its margins, the bias column) is computed on the host by the CPU
engine's own functions (:func:`~dgboost.explain.interventional.background_terms`) and uploaded
once; so are the sigmoids of the logistic transform
(:func:`~dgboost.explain.interventional.sigmoid_values`), since CUDA's ``exp`` need not round
as the host's does. The path arrays are uploaded once per (path table, device) and the
background once per (path table, background, transform, device), in small caches.
"""

from __future__ import annotations

import hashlib

import numpy as np

from ..errors import DGBoostValueError
from ..explain import interventional as iv
from ..explain.paths import PathTable, flagged_category_arrays
from ._device_cache import DeviceCache, device_bytes

__all__ = ["DeviceInterventionalPaths", "DeviceBackground", "path_arrays", "shap_values_interventional_device"]

_KERNELS = "treeshap_interventional.cu"
_THREADS = 128  # rows per block (the kernels' launch bound)
_ACC_SMEM_BYTES = 48 << 10  # shared accumulators up to this size (no opt-in needed)
_MAX_GRID_X = (1 << 31) - 1
_MAX_GRID_Y = 65535  # output groups per launch

_PATHS = DeviceCache()  # by (table fingerprint, device)
_BACKGROUNDS = DeviceCache()  # by (table fingerprint, background digest, transform, device)


class DeviceInterventionalPaths:
    """The path table as the interventional kernels read it, on the current CUDA device.

    Attributes
    ----------
    arrays : dict of str -> cupy.ndarray
        ``path_offsets`` and ``word_offsets`` int64 (n_paths + 1,); ``group_paths`` int32
        (n_paths,): every path, by group then path order, ``group_ptr`` int64 (n_groups + 1,);
        element arrays ``feature`` int32, ``lower`` / ``upper`` float32, ``missing`` uint8,
        ``cat_offset`` int64 and ``cat_pool`` uint32 (the category sets behind a header word,
        :func:`~dgboost.explain.paths.flagged_category_arrays`); ``path_v`` float64
        (n_paths,); ``wtab`` float64 (W, W): the Shapley weights; ``base_margin`` float64 (n_groups,).
    wtab_stride : int
        W, the row stride of ``wtab``.
    n_groups : int
    """

    def __init__(self, table: PathTable):
        import cupy

        host = path_arrays(table)
        self.arrays = {k: cupy.asarray(v) for k, v in host.items()}
        self.wtab_stride = int(host["wtab"].shape[1])
        self.n_groups = int(table.n_groups)

    @property
    def nbytes(self) -> int:
        return device_bytes(*self.arrays.values())


def path_arrays(table: PathTable) -> dict:
    """The host arrays of :class:`DeviceInterventionalPaths` (see its ``arrays``)."""
    order = np.argsort(table.path_group, kind="stable")  # by group, path order within
    group_ptr = np.zeros(table.n_groups + 1, np.int64)
    np.cumsum(np.bincount(table.path_group, minlength=table.n_groups), out=group_ptr[1:])
    cat_offset, cat_pool = flagged_category_arrays(table)  # behind a header word (path_element.cuh)
    return {
        "path_offsets": table.path_offsets.astype(np.int64),
        "word_offsets": iv.path_word_offsets(table),
        "group_paths": order.astype(np.int32),
        "group_ptr": group_ptr,
        "feature": table.feature.astype(np.int32),
        "lower": table.lower.astype(np.float32),
        "upper": table.upper.astype(np.float32),
        "missing": table.is_missing_branch.astype(np.uint8),
        "cat_offset": cat_offset,
        "cat_pool": cat_pool,
        "path_v": table.path_v.astype(np.float64),
        "wtab": np.ascontiguousarray(iv.table_weights(table)),
        "base_margin": table.base_margin.astype(np.float64),
    }


class DeviceBackground:
    """A background's terms (:func:`~dgboost.explain.interventional.background_terms`) on the device.

    Attributes
    ----------
    rbitsT : cupy.ndarray of int64, shape (n_words, n_background)
        The background's on-bits, background row fastest.
    full : cupy.ndarray of int64, shape (n_words,)
    mr, sr : cupy.ndarray of float64, shape (n_background, n_groups), or None
        The background's margins and their sigmoids (``transform="logistic"`` only).
    bias : ndarray of float64, shape (n_groups,)
        The bias column, as the CPU engine computes it (host).
    n_background : int
    """

    def __init__(self, table: PathTable, Bf: np.ndarray, transform: str | None):
        import cupy

        terms = iv.background_terms(table, Bf, transform)
        self.rbitsT = cupy.asarray(terms["rbitsT"])
        self.full = cupy.asarray(terms["full"])
        self.mr = self.sr = None
        if terms["mr"] is not None:
            self.mr = cupy.asarray(terms["mr"])
            self.sr = cupy.asarray(iv.sigmoid_values(terms["mr"]))
        self.bias = np.asarray(terms["bias"], dtype=np.float64)
        self.n_background = int(Bf.shape[0])

    @property
    def nbytes(self) -> int:
        return device_bytes(self.rbitsT, self.full, self.mr, self.sr)


def _clear_cache() -> None:
    """Forget every uploaded path table and background."""
    _PATHS.clear()
    _BACKGROUNDS.clear()


def device_paths(table: PathTable) -> DeviceInterventionalPaths:
    """The uploaded path arrays of ``table`` on the current device, built once per process."""
    import cupy

    key = (table.fingerprint, cupy.cuda.Device().id)
    return _PATHS.get(key, lambda: DeviceInterventionalPaths(table))


def device_background(table: PathTable, Bf: np.ndarray, transform: str | None) -> DeviceBackground:
    """The uploaded terms of background ``Bf`` (float32 (n_background, F)) for ``table``."""
    import cupy

    digest = hashlib.sha256(np.ascontiguousarray(Bf).tobytes())
    digest.update(repr(Bf.shape).encode())
    key = (table.fingerprint, digest.hexdigest(), transform, cupy.cuda.Device().id)
    return _BACKGROUNDS.get(key, lambda: DeviceBackground(table, Bf, transform))


def _device_rows(rows, n_features: int):
    """``rows`` as C-contiguous float32 on the device, checked as
    :func:`~dgboost.explain.treeshap.prepare_rows` checks host rows."""
    import cupy

    from .._array import is_device_array
    from ..explain.treeshap import check_rows, prepare_rows

    if not is_device_array(rows):
        return cupy.asarray(prepare_rows(rows, n_features))
    check_rows(rows, n_features)
    return cupy.ascontiguousarray(rows, dtype=cupy.float32)


def _host_background(background, n_features: int) -> np.ndarray:
    from .._array import to_host
    from ..explain.treeshap import prepare_rows

    return prepare_rows(to_host(background), n_features)


def _grid(n: int, n_groups: int) -> tuple[int, int]:
    """Blocks of _THREADS rows covering n rows, one grid row per output group."""
    blocks = -(-n // _THREADS)
    if blocks > _MAX_GRID_X:
        raise DGBoostValueError(f"{n} rows exceed one kernel launch; explain them in chunks (TreeExplainer does)")
    if n_groups > _MAX_GRID_Y:
        raise DGBoostValueError(f"{n_groups} outputs exceed one kernel launch ({_MAX_GRID_Y} at most)")
    return blocks, n_groups


def _path_args(X, n: int, F: int, dev: DeviceInterventionalPaths) -> tuple:
    """The kernels' leading arguments: rows, then the path arrays."""
    a = dev.arrays
    return (
        X,
        np.int64(n),
        np.int32(F),
        a["path_offsets"],
        a["word_offsets"],
        a["group_paths"],
        a["group_ptr"],
        a["feature"],
        a["lower"],
        a["upper"],
        a["missing"],
        a["cat_offset"],
        a["cat_pool"],
        a["path_v"],
    )


def _margins(module, X, n: int, F: int, dev: DeviceInterventionalPaths, bg: DeviceBackground):
    """The rows' margins (n, n_groups) float64 on the device, the CPU's _margins_from_bits."""
    import cupy

    G = dev.n_groups
    out = cupy.empty((n, G), dtype=cupy.float64)
    module.get_function("interventional_margins")(
        _grid(n, G), (_THREADS,), _path_args(X, n, F, dev) + (bg.full, dev.arrays["base_margin"], np.int32(G), out)
    )
    return out


def _launch_plain(module, X, n: int, F: int, dev, bg, out) -> None:
    G = dev.n_groups
    shared_bytes = _THREADS * F * 8
    shared = shared_bytes <= _ACC_SMEM_BYTES
    module.get_function("interventional_rows")(
        _grid(n, G),
        (_THREADS,),
        _path_args(X, n, F, dev)
        + (
            bg.rbitsT,
            np.int64(bg.n_background),
            bg.full,
            dev.arrays["wtab"],
            np.int32(dev.wtab_stride),
            np.int32(G),
            np.int32(1 if shared else 0),
            out,
        ),
        shared_mem=shared_bytes if shared else 0,
    )


def _launch_logistic(module, X, n: int, F: int, dev, bg, out) -> None:
    import cupy

    G = dev.n_groups
    mx = _margins(module, X, n, F, dev, bg)
    # the host's sigmoids (the CPU kernel's exp): CUDA's exp may differ in the last bit
    sx = cupy.asarray(iv.sigmoid_values(cupy.asnumpy(mx)))
    shared_bytes = 2 * _THREADS * F * 8  # acc and tmp
    shared = shared_bytes <= _ACC_SMEM_BYTES
    scratch = cupy.empty(1 if shared else max(n * G * F, 1), dtype=cupy.float64)
    module.get_function("interventional_logistic_rows")(
        _grid(n, G),
        (_THREADS,),
        _path_args(X, n, F, dev)
        + (
            bg.rbitsT,
            np.int64(bg.n_background),
            bg.full,
            dev.arrays["wtab"],
            np.int32(dev.wtab_stride),
            mx,
            sx,
            bg.mr,
            bg.sr,
            np.int32(G),
            np.int32(1 if shared else 0),
            scratch,
            out,
        ),
        shared_mem=shared_bytes if shared else 0,
    )


def shap_values_interventional_device(table: PathTable, rows, background, transform: str | None = None):
    """Interventional SHAP values on the GPU, bitwise the CPU engine's.

    Parameters
    ----------
    table : PathTable
    rows : numpy.ndarray or cupy.ndarray, shape (n, F)
        Numeric, F at least ``table.n_features``; NaN marks a missing value (converted to
        float32; host rows are uploaded).
    background : numpy.ndarray or cupy.ndarray, shape (n_background, F)
        At least one row, the same columns as ``rows``.
    transform : {None, "logistic"}
        ``"logistic"`` explains sigmoid(margin) (shap's ``model_output="probability"``), as
        :func:`~dgboost.explain.interventional.shap_values_interventional`.

    Returns
    -------
    cupy.ndarray of float64, shape (n, n_groups, F + 1)
        The CPU engine's layout and values: contributions, the bias last.
    """
    import cupy

    from ._nvrtc import get_module

    iv.check_transform(transform)
    X = _device_rows(rows, table.n_features)
    Bf = _host_background(background, table.n_features)
    iv.check_background(Bf, X.shape[1])
    n, F = X.shape
    dev = device_paths(table)
    bg = device_background(table, Bf, transform)
    out = cupy.empty((n, dev.n_groups, F + 1), dtype=cupy.float64)
    if n:
        module = get_module(_KERNELS)
        launch = _launch_plain if transform is None else _launch_logistic
        launch(module, X, n, F, dev, bg, out)
    out[:, :, F] = cupy.asarray(bg.bias)
    return out
