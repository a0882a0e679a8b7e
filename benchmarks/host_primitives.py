"""Host time of the CUDA backend's primitives: what one allocation, launch, copy or view costs.

Each is called 2,000 times with the device idle (after 50 warm-up calls); the median, 10th and
90th percentiles are printed in microseconds. A host-bound round (lossguide, many classes) is a
sum of these and of Python, so this table says which of its calls are worth removing.

    python benchmarks/host_primitives.py
"""

from __future__ import annotations

import ctypes
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _clock(name: str, call, synchronize, reps: int = 2000) -> None:
    for _ in range(50):
        call()
    synchronize()
    times = []
    for _ in range(reps):
        start = time.perf_counter_ns()
        call()
        times.append(time.perf_counter_ns() - start)
    synchronize()
    times.sort()
    median, p10, p90 = (times[int(q * (reps - 1))] / 1e3 for q in (0.5, 0.1, 0.9))
    print(f"{name:40s} median {median:7.2f} us  p10 {p10:7.2f}  p90 {p90:7.2f}", flush=True)


def main() -> None:
    import cupy as cp

    from dgboost.backend.cuda import CUDABackend

    backend = CUDABackend(0)
    sync = cp.cuda.get_current_stream().synchronize
    records = backend.zeros((64, 16), np.int64)
    host = np.arange(70, dtype=np.int64)
    scratch = cp.empty((64, 16), np.int64)
    pinned = cp.cuda.alloc_pinned_memory(1 << 16)
    event = cp.cuda.Event(block=False, disable_timing=True)
    counts = backend.zeros((1, 2), np.int64)
    pairs = backend.zeros(2, np.int32)
    _clock("python loop of 100 adds", lambda: sum(range(100)), sync)
    _clock("cupy.empty (64, 16) int64", lambda: cp.empty((64, 16), np.int64), sync)
    _clock("backend.empty", lambda: backend.empty((64, 16), np.int64), sync)
    _clock("backend.zeros (empty + fill)", lambda: backend.zeros((64, 16), np.int64), sync)
    _clock("memset_async", lambda: scratch.data.memset_async(0, scratch.nbytes), sync)
    _clock("_upload_small 560 B (pinned staging)", lambda: backend._upload_small(host), sync)
    _clock("cupy.asarray 560 B (pageable)", lambda: cp.asarray(host), sync)
    _clock("asnumpy 8 KB, device idle", lambda: records.get(), sync)
    _clock(
        "memcpyAsync 560 B from pinned",
        lambda: scratch.data.copy_from_host_async(ctypes.c_void_p(pinned.ptr), 560),
        sync,
    )
    _clock("event record", lambda: event.record(), sync)
    _clock("get_current_stream().ptr", lambda: cp.cuda.get_current_stream().ptr, sync)
    _clock(
        "_launch of a 3-argument kernel",
        lambda: backend._launch("quantise.cu", "gpair_sums", 1, (pairs, np.int64(0), counts)),
        sync,
    )
    _clock("view a[:32]", lambda: records[:32], sync)
    _clock("a.reshape(-1)", lambda: records.reshape(-1), sync)
    _clock("a.flags.c_contiguous", lambda: records.flags.c_contiguous, sync)


if __name__ == "__main__":
    main()
