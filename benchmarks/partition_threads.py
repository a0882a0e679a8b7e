"""The CPU partition kernel alone on a level's rows, by thread count (issue 31, 16-core host).

1,000,000 rows of 28 one-byte features, a level of 2, 32 or 128 nodes (each node's rows
ascending, scattered over the matrix as below the first levels), ``K.partition`` timed on 1,
2, 4, 8 and 16 threads (median of 15 calls) against a variant whose right rows go through one
buffer passed in instead of a fresh array a node; both give the same rows. Prints a line a
level: milliseconds and minor page faults a call.

    python benchmarks/partition_threads.py
"""

from __future__ import annotations

import inspect
import resource
import sys
import time
from pathlib import Path

import numba
import numpy as np
from numba import njit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dgboost.backend import _cpu_kernels as K  # noqa: E402


def _variant():
    """``K.partition`` with its right rows through ``right_buf[pos:stop]`` (one buffer passed in)."""
    src = inspect.getsource(K.partition.py_func)
    src = src[src.index("def partition(") :]
    src = src.replace("def partition(", "def partition_one_buffer(")
    src = src.replace("n_slices, scratch, left_counts", "n_slices, scratch, left_counts, right_buf")
    src = src.replace("right = np.empty(b - a, rows.dtype)", "right = right_buf[pos:stop]")
    assert src.count("right_buf") == 2, "the kernel changed: the variant no longer applies"
    namespace = dict(vars(K))
    exec(src, namespace)  # noqa: S102 - the kernel's own source, edited above
    return njit(parallel=True, nogil=True)(namespace["partition_one_buffer"])


def main() -> None:
    one_buffer = _variant()
    n, n_features = 1_000_000, 28
    rng = np.random.default_rng(0)
    columns = rng.integers(0, 255, (n_features, n), dtype=np.uint8)
    for nodes in (2, 32, 128):
        rows0 = rng.permutation(n).astype(np.int32)
        bounds = np.linspace(0, n, nodes + 1).astype(np.int64)
        begins, ends = bounds[:-1].copy(), bounds[1:].copy()
        for i in range(nodes):
            rows0[begins[i] : ends[i]].sort()
        feature = rng.integers(0, n_features, nodes).astype(np.int32)
        split_bin = rng.integers(0, 255, nodes).astype(np.int32)
        default_left = np.ones(nodes, np.bool_)
        line = []
        for threads in (1, 2, 4, 8, 16):
            if threads > numba.config.NUMBA_NUM_THREADS:
                continue
            numba.set_num_threads(threads)
            results = {}
            for name, kernel, extra in (("cur", K.partition, ()), ("v2", one_buffer, (np.empty(n, np.int32),))):
                times = []
                faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                for _ in range(15):
                    rows = rows0.copy()
                    left = np.zeros(nodes, np.int64)
                    scratch = np.empty(2 * n, np.int32)
                    args = (columns, rows, begins, ends, feature, split_bin, default_left, 255, threads, scratch, left)
                    start = time.perf_counter()
                    kernel(*args, *extra)
                    times.append(time.perf_counter() - start)
                faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / 15
                results[name] = (float(np.median(times)) * 1e3, faults, rows)
            assert np.array_equal(results["cur"][2], results["v2"][2])
            line.append("t%d cur %.2f (%d flt) v2 %.2f (%d flt)" % (threads, *results["cur"][:2], *results["v2"][:2]))
        print("nodes", nodes, " | ".join(line), flush=True)


if __name__ == "__main__":
    main()
