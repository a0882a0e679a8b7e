"""Host arrays to the current CUDA device through pinned staging buffers filled by host threads.

``cupy.asarray`` of a NumPy array copies from pageable memory: the driver stages it through
its own pinned buffer with one host thread, about 5 GB/s on an H200's host (a depth-16
model's path table, 440 MB, took 83 ms: issue 32). Here large arrays go through two pinned
buffers of ``_STAGE_BYTES``: host threads copy a chunk into one (NumPy's copies release the
GIL) while the DMA engine moves the other to the device on a stream of its own, so the
copies of host memory run side by side and overlap the transfers. The bytes are the same;
the call returns once every copy has landed.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .._threads import even_runs, host_threads

__all__ = ["to_device"]

_STAGE_BYTES = 16 << 20  # bytes a staging buffer holds
_DIRECT_BELOW = 4 << 20  # arrays smaller than this are copied by cupy.asarray
# threads that fill a staging buffer: on the H200's host 4 threads moved 150 MB in 9.8 ms,
# 8 in 10.9 ms, 1 in 22.2 ms, cupy.asarray 30.0 ms
# (benchmarks/results/shap_prep_threads/upload_parts_h200_181be0d.log)
_MAX_COPY_THREADS = 4


def to_device(arrays: dict, empty=None) -> dict:
    """Upload NumPy arrays to the current device.

    Parameters
    ----------
    arrays : dict of str -> numpy.ndarray
        Any dtypes and shapes (copied in C order).
    empty : callable, optional
        ``empty(shape, dtype)`` allocates the device array of each array copied through the
        staging buffers (default ``cupy.empty``): a backend's ``empty`` turns a failed
        allocation into its :class:`~dgboost.errors.DeviceMemoryError`.

    Returns
    -------
    dict of str -> cupy.ndarray
        The same keys, each array's values, dtype and shape on the device; all copies are
        complete when it returns.
    """
    import cupy

    out, large = {}, []
    for name, value in arrays.items():
        host = np.ascontiguousarray(value)
        if host.nbytes < _DIRECT_BELOW:
            out[name] = cupy.asarray(host)
        else:
            out[name] = cupy.empty(host.shape, dtype=host.dtype) if empty is None else empty(host.shape, host.dtype)
            large.append((host.reshape(-1).view(np.uint8), out[name]))
    if large:
        _staged(large, max(1, min(_MAX_COPY_THREADS, host_threads())))
    return out


def _staged(pairs: list, threads: int) -> None:
    """Copy each ``(host bytes, device array)`` pair through two pinned buffers in turn."""
    import cupy

    buffers = [cupy.cuda.alloc_pinned_memory(_STAGE_BYTES) for _ in range(2)]
    views = [np.frombuffer(b, dtype=np.uint8, count=_STAGE_BYTES) for b in buffers]
    landed = [None, None]  # the event after each buffer's last transfer
    stream = cupy.cuda.Stream(non_blocking=True)
    # the destinations come from the memory pool of the caller's stream, where work queued
    # earlier may still read a block just freed: the copies start after that work
    stream.wait_event(cupy.cuda.get_current_stream().record())
    k = 0
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for src, dst in pairs:
            for at in range(0, src.shape[0], _STAGE_BYTES):
                m = min(_STAGE_BYTES, src.shape[0] - at)
                if landed[k] is not None:
                    landed[k].synchronize()  # its previous chunk is on the device: refill it
                _fill(pool, threads, views[k][:m], src[at : at + m])
                cupy.cuda.runtime.memcpyAsync(
                    dst.data.ptr + at, views[k].ctypes.data, m, cupy.cuda.runtime.memcpyHostToDevice, stream.ptr
                )
                landed[k] = stream.record()
                k ^= 1
    stream.synchronize()


def _fill(pool: ThreadPoolExecutor, threads: int, dst: np.ndarray, src: np.ndarray) -> None:
    """``dst[:] = src`` (uint8, equal lengths) in ``threads`` parts side by side."""
    cuts = even_runs(src.shape[0], threads).tolist()
    parts = [(dst[a:b], src[a:b]) for a, b in zip(cuts[:-1], cuts[1:])]
    list(pool.map(lambda pair: np.copyto(*pair), parts))
