"""Where a GPU boosting round spends its time: per-stage device time and host syncs per tree.

Wraps every CUDA backend stage with CUDA events (start/stop around the call, synchronised
after it, so this mode is slower than a plain run: use it to apportion time, and
benchmarks/train_gpu.py for the headline figures). Prints one table per data shape.

    python benchmarks/profile_gpu_stages.py --rows 10000000 --features 28 --depth 8 --rounds 30
"""

from __future__ import annotations

import argparse
import collections
import json
import time

import numpy as np


def _wrap(backend, name, totals, counts):
    import cupy

    fn = getattr(backend, name)

    def timed(*args, **kwargs):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        out = fn(*args, **kwargs)
        stop.record()
        stop.synchronize()
        totals[name] += cupy.cuda.get_elapsed_time(start, stop)
        counts[name] += 1
        return out

    setattr(backend, name, timed)
    return fn


def _trace_memory_peak(run) -> None:
    """Run ``run()`` with an allocator that keeps the Python stack at each new high-water mark
    of CuPy's pool (use can only peak right after an allocation), then print the last one."""
    import traceback

    import cupy

    pool = cupy.get_default_memory_pool()
    pool.free_all_blocks()
    base = pool.used_bytes()
    state = {"peak": base, "stack": [], "size": 0}

    def malloc(size: int):
        mem = pool.malloc(size)
        used = pool.used_bytes()
        if used > state["peak"]:
            state.update(peak=used, size=size, stack=traceback.format_stack(limit=14)[:-1])
        return mem

    cupy.cuda.set_allocator(malloc)
    try:
        run()
        cupy.cuda.runtime.deviceSynchronize()
    finally:
        cupy.cuda.set_allocator(pool.malloc)
    print(
        f"\nCuPy pool peak {(state['peak'] - base) / 2**20:.1f} MiB above the start, reached by an allocation "
        f"of {state['size'] / 2**20:.1f} MiB at:"
    )
    print("".join(state["stack"][-9:]))


def main() -> None:
    import cupy

    import dgboost
    from dgboost.backend import cuda as cuda_module
    from dgboost.backend import get_backend
    from dgboost.testing.cuda_probes import count_host_reads

    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--features", type=int, default=28)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--missing", type=float, default=0.0)
    ap.add_argument("--classes", type=int, default=1, help="above 1: multi:softprob with labels in [0, classes)")
    ap.add_argument("--policy", default="depthwise")
    ap.add_argument("--json", default="")
    ap.add_argument(
        "--memory-trace",
        action="store_true",
        help="print where CuPy's pool reaches its high-water mark in a plain run, and what is live",
    )
    ap.add_argument(
        "--lookahead",
        default="",
        help="lossguide: the CUDA backend's LookaheadBudget as nodes:levels:MiB (default: its own)",
    )
    ap.add_argument(
        "--host-profile",
        type=int,
        default=0,
        help="also print the N host functions with the most own time in a plain run (cProfile)",
    )
    args = ap.parse_args()

    rs = cupy.random.RandomState(0)
    x = rs.standard_normal((args.rows, args.features), dtype=cupy.float32)
    logit = x[:, 0] + 0.5 * x[:, 1] * x[:, 2] - 0.3 * cupy.abs(x[:, 3 % args.features])
    y = (rs.random_sample(args.rows) < 1 / (1 + cupy.exp(-logit))).astype(cupy.float32)
    if args.classes > 1:  # classes from the logit's quantiles, so each is learnable
        y = cupy.searchsorted(cupy.quantile(logit, cupy.linspace(0, 1, args.classes + 1)[1:-1]), logit)
        y = y.astype(cupy.float32)
    if args.missing:
        x[rs.random_sample(x.shape) < args.missing] = cupy.nan
    params = {
        "objective": "binary:logistic",
        "max_depth": args.depth,
        "eta": 0.1,
        "max_bin": 256,
        "device": "cuda",
        "grow_policy": args.policy,
    }
    if args.classes > 1:
        params.update(objective="multi:softprob", num_class=args.classes)
    if args.policy == "lossguide":
        params.update(max_depth=0, max_leaves=255)
    if args.lookahead:
        from dgboost.backend.base import LookaheadBudget

        nodes, levels, mib = (int(v) for v in args.lookahead.split(":"))
        cuda_module.CUDABackend.lookahead = LookaheadBudget(nodes=nodes, levels=levels, hist_bytes=mib << 20)
    dtrain = dgboost.DMatrix(x, y.get())
    dgboost.train(params, dtrain, 2, verbose_eval=False)  # compile and warm up

    backend = get_backend("cuda")
    stages = [
        "bin_values",
        "quantise",
        "abs_max_bits",
        "gpair_totals",
        "build_histograms",
        "evaluate_splits",
        "evaluate_children",
        "partition",
        "split_nodes",
        "children_histograms",
        "root_node",
        "add_leaf_values",
        "predict_margin",
        "leaf_weights",
    ]
    totals, counts = collections.defaultdict(float), collections.defaultdict(int)
    # the reads are counted on the class, entered before the stages are timed on the instance
    with count_host_reads() as counted:
        originals = {s: _wrap(backend, s, totals, counts) for s in stages}
        try:
            cupy.cuda.runtime.deviceSynchronize()
            t0 = time.perf_counter()
            dgboost.train(params, dtrain, args.rounds, verbose_eval=False)
            cupy.cuda.runtime.deviceSynchronize()
            wall = time.perf_counter() - t0
        finally:
            for s in originals:
                vars(backend).pop(s, None)  # the class's (uncounted, once the block exits) shows through
    syncs = {"syncs": counted.syncs, "trees": counted.trees}

    class Clock(dgboost.TrainingCallback):
        def __init__(self):
            self.marks = []

        def before_iteration(self, model, epoch, evals_log):
            if not self.marks:
                cupy.cuda.runtime.deviceSynchronize()
                self.marks.append(time.perf_counter())
            return False

        def after_iteration(self, model, epoch, evals_log):
            cupy.cuda.runtime.deviceSynchronize()
            self.marks.append(time.perf_counter())
            return False

    clock = Clock()
    cupy.cuda.runtime.deviceSynchronize()
    t0 = time.perf_counter()
    dgboost.train(params, dtrain, args.rounds, verbose_eval=False, callbacks=[clock])
    cupy.cuda.runtime.deviceSynchronize()
    plain = time.perf_counter() - t0
    rounds_ms = np.diff(clock.marks) * 1e3
    setup_ms = (clock.marks[0] - t0) * 1e3

    if args.memory_trace:
        _trace_memory_peak(lambda: dgboost.train(params, dtrain, args.rounds, verbose_eval=False))

    if args.host_profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
        dgboost.train(params, dtrain, args.rounds, verbose_eval=False)
        cupy.cuda.runtime.deviceSynchronize()
        profiler.disable()
        print(f"\nhost functions by own time over {args.rounds} rounds (cProfile: slows the run)")
        pstats.Stats(profiler).sort_stats("tottime").print_stats(args.host_profile)

    device_ms = sum(totals.values())
    print(
        f"\n{args.rows} x {args.features}, depth {args.depth}, {args.policy} "
        f"(lookahead {cuda_module.CUDABackend.lookahead}), {args.rounds} rounds on "
        f"{cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()}"
    )
    print(
        f"plain run: setup (cuts, binning, margins) {setup_ms:.1f} ms, then per round median "
        f"{np.median(rounds_ms):.2f} ms (min {rounds_ms.min():.2f}, max {rounds_ms.max():.2f}); "
        f"first rounds {', '.join(f'{v:.1f}' for v in rounds_ms[:4])} ms"
    )
    print(
        f"whole plain run {plain * 1e3 / args.rounds:.2f} ms/round; profiled run "
        f"{wall * 1e3 / args.rounds:.2f} ms/round; host syncs per tree "
        f"{syncs['syncs'] / max(1, syncs['trees']):.1f}"
    )
    print(f"{'stage':<18}{'calls':>7}{'ms total':>10}{'ms/round':>10}{'share':>8}")
    for s in sorted(totals, key=totals.get, reverse=True):
        print(
            f"{s:<18}{counts[s]:>7}{totals[s]:>10.2f}{totals[s] / args.rounds:>10.3f}"
            f"{totals[s] / max(device_ms, 1e-9):>8.1%}"
        )
    print(f"{'host/other':<18}{'':>7}{wall * 1e3 - device_ms:>10.2f}{(wall * 1e3 - device_ms) / args.rounds:>10.3f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {
                    "args": vars(args),
                    "plain_ms_per_round": plain * 1e3 / args.rounds,
                    "median_round_ms": float(np.median(rounds_ms)),
                    "setup_ms": setup_ms,
                    "stages_ms": totals,
                    "calls": counts,
                    "syncs": syncs,
                },
                fh,
                indent=1,
            )


if __name__ == "__main__":
    main()
