"""Micro-benchmark of the CUDA stages on one level, timed with CUDA events (median of 7).

Histogram variants, made here from kernels/histogram.cu by replacing the body of its
``add_pair``: 0 = real, 1 = loads only (no atomics), 2 = low-word atomics only, 3 = native 64-bit atomics; at the root
(all rows in order) and at a deep level (128 nodes over half the rows, permuted). Partition
sub-steps and split evaluation alone. Prints the achieved bandwidth against a device-to-device
copy of the same size.

    python benchmarks/micro_gpu_stages.py --rows 10000000 --features 28
"""

from __future__ import annotations

import argparse
import re
from functools import partial

import numpy as np
from _common import event_times_ms, histogram_inputs

# the body of histogram.cu's add_pair in each variant (None: the kernel as it is)
_ADD_PAIR_BODIES = {
    0: None,
    # the same loads, no atomics: a store no row makes (no quantised pair is (INT_MAX, INT_MAX))
    # keeps the symbol, row and pair loads alive
    1: "  if ((gp.x & gp.y) == 0x7fffffff) *cell = 0;",
    2: (
        "  atomicAdd(reinterpret_cast<unsigned int*>(cell), static_cast<unsigned int>(gp.x));\n"
        "  atomicAdd(reinterpret_cast<unsigned int*>(cell + 1), static_cast<unsigned int>(gp.y));"
    ),
    # native 64-bit atomics whose old value is not read (exact sums, like the real body; in
    # shared memory sm_90 makes them compare-and-swap loops)
    3: (
        "  typedef unsigned long long u64;\n"
        "  atomicAdd(reinterpret_cast<u64*>(cell), static_cast<u64>(static_cast<long long>(gp.x)));\n"
        "  atomicAdd(reinterpret_cast<u64*>(cell + 1), static_cast<u64>(static_cast<long long>(gp.y)));"
    ),
}
_ADD_PAIR = re.compile(r"(void add_pair\(long long\* cell, int2 gp\) \{\n)(.*?)(\n\})", re.DOTALL)


def histogram_variant(source: str, mode: int) -> str:
    """``source`` (assembled kernels/histogram.cu) with ``add_pair``'s body of ``mode``."""
    body = _ADD_PAIR_BODIES[mode]
    if body is None:
        return source
    out, found = _ADD_PAIR.subn(lambda m: m.group(1) + body + m.group(3), source)
    if found != 1:
        raise SystemExit(f"kernels/histogram.cu: add_pair found {found} times; update this benchmark's variants")
    return out


def timed(fn, repeats=7):
    return float(np.median(event_times_ms(fn, repeats)))


def main():
    import cupy

    from dgboost.backend._nvrtc import assemble, module_from_source

    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--features", type=int, default=28)
    ap.add_argument("--missing", type=float, default=0.0, help="share of values missing (NaN), at random")
    ap.add_argument("--deep-nodes", type=int, default=128, help="nodes of the deep level (over half the rows)")
    args = ap.parse_args()
    n, f = args.rows, args.features
    be, cuts, ell, gpair = histogram_inputs(n, f, args.missing)
    buf = cupy.empty(n * 4, cupy.uint8)
    copy_ms = timed(lambda: buf.copy())
    print(
        f"{n} x {f}; ELLPACK {ell.row_bits} bits a row, {ell.n_groups} groups of up to {ell.group_bins} bins, "
        f"{ell.nbytes / 2**20:.0f} MiB; "
        f"d2d copy of {buf.nbytes / 2**20:.0f} MiB: {copy_ms:.3f} ms ({2 * buf.nbytes / copy_ms / 1e6:.0f} GB/s)"
    )

    from dgboost.testing.kernel_inputs import node_records

    total_bins = int(cuts.ptrs[-1])

    root_rows = cupy.arange(n, dtype=cupy.int32)
    perm = cupy.random.permutation(n).astype(cupy.int32)
    half = n // 2
    k = args.deep_nodes
    edges = np.linspace(0, half, k + 1).astype(np.int64)
    layouts = {
        "root (1 node, ordered)": (root_rows, np.array([[0, n]])),
        "root (1 node, permuted)": (perm, np.array([[0, n]])),
        f"deep ({k} nodes, n/2 permuted)": (perm, np.stack([edges[:-1], edges[1:]], axis=1)),
        f"deep ({k} nodes, n/2 ordered)": (root_rows, np.stack([edges[:-1], edges[1:]], axis=1)),
    }
    key = ("histogram.cu", "build_histograms")
    real = be._launchable(*key)
    print(f"build_histograms: {real[1].num_regs} registers, {real[1].local_size_bytes} bytes of local memory a thread")
    try:
        for mode in (0, 1, 2, 3):
            # the backend launches whatever its kernel cache holds: swap in the measurement variant
            variant = histogram_variant(assemble(key[0]), mode)
            be._functions[key] = be._loaded(module_from_source(variant, key[0]).get_function(key[1]))
            for name, (rows, segments) in layouts.items():
                dev_segments = cupy.asarray(segments)
                ms = timed(partial(be.build_histograms, ell, cuts.ptrs, gpair, rows, dev_segments))
                entries = int((segments[:, 1] - segments[:, 0]).sum()) * f
                print(f"hist mode {mode} {name:<32} {ms:7.3f} ms  {entries / ms / 1e6:8.1f} G entries/s")
    finally:
        be._functions[key] = real

    # the partition and the child records of a level, at the root and at a deep level
    for name, (rows, segments) in layouts.items():
        k = segments.shape[0]
        records = cupy.asarray(
            node_records(
                segments[:, 0],
                segments[:, 1],
                feature=np.arange(k) % f,
                split_bin=np.full(k, 100),
                default_left=np.ones(k),
            )
        )
        work = rows.copy()
        counts = be.partition(ell, work, records)
        steps = {
            "whole partition()": partial(be.partition, ell, work, records),
            "split_nodes()": partial(be.split_nodes, records, counts, counts),
        }
        for s_name, fn in steps.items():
            print(f"partition {name:<32} {s_name:<18} {timed(fn):7.3f} ms")

    from types import SimpleNamespace

    p = SimpleNamespace(reg_lambda=1.0, alpha=0.0, gamma=0.0, min_child_weight=1.0, max_delta_step=0.0)
    for k in (1, 128, 256):
        hist = cupy.asarray(np.random.default_rng(0).integers(0, 1000, (k, total_bins, 2)))
        totals = hist[:, : cuts.ptrs[1]].sum(axis=1).get()
        records = cupy.asarray(node_records(np.zeros(k), np.full(k, n), sums=totals))
        ms = timed(partial(be.evaluate_splits, hist, records, cuts.ptrs, None, np.array([1.0, 1.0]), p))
        print(f"evaluate_splits {k:>4} nodes  {ms:7.3f} ms")


if __name__ == "__main__":
    main()
