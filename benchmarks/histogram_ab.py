"""The histogram kernel of two or more source files, layout by layout, in one run (issue 32).

Builds one ELLPACK matrix and quantised pairs (``micro_gpu_stages.py``'s data: standard
normal columns, ``--missing`` of them NaN at random, ``--max-bin`` bins), then times
``CUDABackend.build_histograms`` with each source of ``kernels/histogram.cu`` swapped into the
backend's kernel cache, the sources taking turns (``--rounds`` rounds, median of
``--repeats`` launches each, CUDA events). Layouts: the root (all rows in one node, in order),
a deep level (``--deep-nodes`` nodes over half the rows, in order: training's case, where
the partitions are stable) and the same rows permuted. Every variant's histograms must have
the first source's bits (they are integer sums): a mismatch is reported and fails the run.

    python benchmarks/histogram_ab.py --sources /tmp/histogram_head.cu kernels/histogram.cu \\
        --rows 1000000 --features 968 --missing 0.8
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from functools import partial
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from _common import event_times_ms, histogram_inputs  # noqa: E402


def main(argv=None) -> None:
    import cupy

    from dgboost.backend._nvrtc import assemble, module_from_source

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sources", nargs="+", required=True, help="histogram.cu files (the first is the reference)")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--features", type=int, default=968)
    ap.add_argument("--missing", type=float, default=0.8)
    ap.add_argument("--deep-nodes", type=int, default=128)
    ap.add_argument("--max-bin", type=int, default=256, help="bins a feature (fewer: narrower entries, longer runs)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--json", default=None, help="write the times here")
    args = ap.parse_args(argv)

    n, f = args.rows, args.features
    be, cuts, ell, gpair = histogram_inputs(n, f, args.missing, args.max_bin)
    in_order = cupy.arange(n, dtype=cupy.int32)
    permuted = cupy.random.permutation(n).astype(cupy.int32)
    k = args.deep_nodes
    edges = np.linspace(0, n // 2, k + 1).astype(np.int64)
    deep = np.stack([edges[:-1], edges[1:]], axis=1)
    layouts = {
        "root, in order": (in_order, np.array([[0, n]])),
        f"{k} nodes over n/2, in order": (in_order, deep),
        f"{k} nodes over n/2, permuted": (permuted, deep),
    }
    print(
        f"{n} x {f}, {args.missing:.0%} missing; ELLPACK {ell.row_bits} bits a row, {ell.n_groups} groups "
        f"of up to {ell.group_bins} bins",
        flush=True,
    )

    key = ("histogram.cu", "build_histograms")
    real = be._launchable(*key)
    kernels = []
    for path in args.sources:
        kernel = module_from_source(assemble(key[0], Path(path).read_text()), key[0]).get_function(key[1])
        kernels.append(be._loaded(kernel))
        print(f"{path}: {kernel.num_regs} registers, {kernel.local_size_bytes} bytes of local memory a thread")

    times = {(s, name): [] for s in range(len(kernels)) for name in layouts}
    mismatches = []
    try:
        for rnd in range(args.rounds):
            order = list(range(len(kernels)))
            if rnd % 2:
                order.reverse()
            for name, (rows, segments) in layouts.items():
                dev_segments = cupy.asarray(segments)
                call = partial(be.build_histograms, ell, cuts.ptrs, gpair, rows, dev_segments)
                reference = None
                for s in sorted(order):  # the check: every source against the first
                    be._functions[key] = kernels[s]
                    hist = call()
                    if s == 0:
                        reference = hist
                    elif not bool(cupy.array_equal(hist, reference)):
                        mismatches.append((args.sources[s], name))
                for s in order:
                    be._functions[key] = kernels[s]
                    times[(s, name)] += event_times_ms(call, args.repeats)
    finally:
        be._functions[key] = real

    print()
    print(f"{'layout':<32}" + "".join(f"{Path(p).name[-24:]:>26}" for p in args.sources) + "  (ms, median [range])")
    result = {"rows": n, "features": f, "missing": args.missing, "sources": args.sources, "layouts": {}}
    for name in layouts:
        row, entry = f"{name:<32}", {}
        for s, path in enumerate(args.sources):
            t = times[(s, name)]
            row += f"{statistics.median(t):>10.3f} [{min(t):.3f}-{max(t):.3f}]"
            entry[path] = {"median_ms": statistics.median(t), "min_ms": min(t), "max_ms": max(t), "n": len(t)}
        result["layouts"][name] = entry
        print(row)
    result["mismatches"] = mismatches
    print("histograms identical to the first source's:", "yes" if not mismatches else f"NO {mismatches}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    if mismatches:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
