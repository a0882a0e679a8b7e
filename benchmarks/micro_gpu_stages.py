"""Micro-benchmark of the CUDA stages on one level, timed with CUDA events (median of 7).

Histogram variants (kernels/histogram.cu HIST_MODE): 0 = real, 1 = loads only (no atomics),
2 = low-word atomics only; at the root (all rows in order) and at a deep level (128 nodes
over half the rows, permuted). Partition sub-steps and split evaluation alone. Prints the
achieved bandwidth against a device-to-device copy of the same size.

    python benchmarks/micro_gpu_stages.py --rows 10000000 --features 28
"""
from __future__ import annotations

import argparse

import numpy as np


def timed(fn, repeats=7):
    import cupy

    fn()
    times = []
    for _ in range(repeats):
        a, b = cupy.cuda.Event(), cupy.cuda.Event()
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(cupy.cuda.get_elapsed_time(a, b))
    return float(np.median(times))


def main():
    import cupy

    from dgboost.backend import get_backend
    from dgboost.backend._nvrtc import get_module
    from dgboost.quantile import compute_cuts

    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--features", type=int, default=28)
    args = ap.parse_args()
    n, f = args.rows, args.features
    be = get_backend("cuda")
    rs = cupy.random.RandomState(0)
    x = rs.standard_normal((n, f), dtype=cupy.float32)
    cuts = compute_cuts(x[:300_000].get(), None, 256)
    ell = be.bin_values(x, cuts.values, cuts.ptrs)
    gpair = be.quantise(rs.standard_normal(n, dtype=cupy.float32), rs.random_sample(n, dtype=cupy.float32),
                        2.0 ** 27, 2.0 ** 29)
    buf = cupy.empty(n * 4, cupy.uint8)
    copy_ms = timed(lambda: buf.copy())
    print(f"{n} x {f}; ELLPACK {ell.bits} bits, {ell.n_groups} groups, {ell.nbytes / 2**20:.0f} MiB; "
          f"d2d copy of {buf.nbytes / 2**20:.0f} MiB: {copy_ms:.3f} ms ({2 * buf.nbytes / copy_ms / 1e6:.0f} GB/s)")

    root_rows = cupy.arange(n, dtype=cupy.int32)
    perm = cupy.random.permutation(n).astype(cupy.int32)
    half = n // 2
    edges = np.linspace(0, half, 129).astype(np.int64)
    layouts = {"root (1 node, ordered)": (root_rows, np.array([0]), np.array([n])),
               "deep (128 nodes, n/2 permuted)": (perm, edges[:-1], edges[1:])}
    total_bins = int(cuts.ptrs[-1])
    for mode in (0, 1, 2):
        kern = get_module("histogram.cu", {"HIST_MODE": mode}).get_function("build_histograms")
        for name, (rows, begins, ends) in layouts.items():
            node, starts, stops = be._tasks(begins, ends, ell.n_groups)
            t = node.size
            tb, te, tn = cupy.asarray(starts), cupy.asarray(stops), cupy.asarray(node.astype(np.int64))
            hist = cupy.zeros((begins.size, total_bins, 2), cupy.int64)
            shared = 16 * ell.group_bins
            kern.max_dynamic_shared_size_bytes = shared

            def run():
                kern((t, ell.n_groups), (512,), (ell.packed, np.int32(ell.bits), np.int32(f), np.uint32(ell.missing),
                                                  rows, gpair, tn, tb, te, ell.cut_ptrs, ell.group_begin,
                                                  ell.group_end, np.int64(total_bins), np.int32(1), hist),
                     shared_mem=shared)
            ms = timed(run)
            entries = int((ends - begins).sum()) * f
            print(f"hist mode {mode} {name:<32} {ms:7.3f} ms  {entries / ms / 1e6:8.1f} G entries/s  tasks {t}")

    # partition sub-steps at the root and a deep level
    for name, (rows, begins, ends) in layouts.items():
        begins_, offsets, total = be._segments(begins, ends)
        k = begins_.size
        meta = cupy.asarray(np.concatenate([offsets, begins_]))
        dev_off, dev_beg = meta[:k + 1], meta[k + 1:]
        feat = cupy.asarray(np.arange(k, dtype=np.int64) % f)
        sbin = cupy.full(k, 100, cupy.int64)
        dl = cupy.ones(k, cupy.int64)
        flags = cupy.empty(total, cupy.int32)
        lefts = cupy.empty(k, cupy.int64)
        buffer = cupy.empty(total, cupy.int32)
        work = rows.copy()
        steps = {
            "go_left": lambda: be._launch("partition.cu", "go_left", total,
                                          (ell.packed, np.int32(ell.bits), np.int32(f), np.uint32(ell.missing), work,
                                           dev_off, dev_beg, np.int32(k), feat, sbin, dl, np.int64(total), flags)),
            "cumsum": lambda: cupy.cumsum(flags, dtype=cupy.int32),
        }
        steps["go_left"]()
        scan = cupy.cumsum(flags, dtype=cupy.int32)
        be._launch("partition.cu", "left_counts", k, (scan, dev_off, np.int32(k), lefts), threads=64)
        steps["scatter"] = lambda: be._launch("partition.cu", "scatter", total,
                                              (work, flags, scan, dev_off, dev_beg, lefts, np.int32(k),
                                               np.int64(total), buffer))
        steps["gather_back"] = lambda: be._launch("partition.cu", "gather_back", total,
                                                  (buffer, dev_off, dev_beg, np.int32(k), np.int64(total), work))
        steps["whole partition()"] = lambda: be.partition(ell, work, begins, ends, np.arange(k) % f,
                                                         np.full(k, 100), np.ones(k, bool))
        for s, fn in steps.items():
            print(f"partition {name:<32} {s:<18} {timed(fn):7.3f} ms")

    from types import SimpleNamespace

    p = SimpleNamespace(reg_lambda=1.0, alpha=0.0, gamma=0.0, min_child_weight=1.0, max_delta_step=0.0)
    for k in (1, 128, 256):
        hist = cupy.asarray(np.random.default_rng(0).integers(0, 1000, (k, total_bins, 2)))
        totals = hist[:, :cuts.ptrs[1]].sum(axis=1).get()
        mask = np.ones((k, f), bool)
        print(f"evaluate_splits {k:>4} nodes  {timed(lambda: be.evaluate_splits(hist, totals, cuts.ptrs, mask, 1.0, 1.0, p)):7.3f} ms")


if __name__ == "__main__":
    main()
