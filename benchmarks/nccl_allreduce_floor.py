"""The floor of a training round's allreduces: NCCL int64 allreduce time on this host's GPUs.

One process per GPU (spawned), each with a cupy NCCL communicator, times an in-place int64
sum allreduce of each size with CUDA events (after warm-up, median of ``--repeats``): the
latency of the tiny ones and the bandwidth of the large ones. A depth-8 round of the scaling
benchmark (28 features x 256 bins, int64 (G, H) pairs) allreduces the root's gradient sums
(16 B), the root's histogram (115 KB) and the smaller children's of 7 levels (115 KB x 1, 2,
..., 64 nodes), 14 MiB in all; ``--round`` also times exactly that sequence back to back,
queued on one stream as training queues it.

    NCCL_NVLS_ENABLE=0 python benchmarks/nccl_allreduce_floor.py --gpus 4 --out floor.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics

NODE_BYTES = 28 * 256 * 16  # one node's int64 (G, H) histogram in the scaling benchmark
ROUND_SIZES = [16, NODE_BYTES] + [NODE_BYTES * (1 << d) for d in range(7)]


def _rank(rank: int, world: int, uid, sizes: list[int], repeats: int, queue) -> None:
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    import cupy
    from cupy.cuda import nccl

    cupy.cuda.Device(rank).use()
    comm = nccl.NcclCommunicator(world, uid, rank)
    stream = cupy.cuda.Stream(non_blocking=True)
    out = {}

    def timed(buffers) -> float:
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record(stream)
        for buf in buffers:
            comm.allReduce(buf.data.ptr, buf.data.ptr, buf.size, nccl.NCCL_INT64, nccl.NCCL_SUM, stream.ptr)
        stop.record(stream)
        stop.synchronize()
        return cupy.cuda.get_elapsed_time(start, stop) * 1e-3

    for size in sizes:
        buf = cupy.ones(max(size // 8, 1), cupy.int64)
        for _ in range(5):
            timed([buf])
        runs = [timed([buf]) for _ in range(repeats)]
        out[str(size)] = {"median_s": statistics.median(runs), "min_s": min(runs), "max_s": max(runs)}
    bufs = [cupy.ones(max(s // 8, 1), cupy.int64) for s in ROUND_SIZES]
    for _ in range(5):
        timed(bufs)
    runs = [timed(bufs) for _ in range(repeats)]
    out["round"] = {
        "median_s": statistics.median(runs),
        "min_s": min(runs),
        "max_s": max(runs),
        "collectives": len(ROUND_SIZES),
        "bytes": sum(ROUND_SIZES),
    }
    comm.destroy()
    queue.put((rank, out))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, default=0, help="0: every visible GPU")
    ap.add_argument("--repeats", type=int, default=50)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    import cupy
    from cupy.cuda import nccl

    world = args.gpus or cupy.cuda.runtime.getDeviceCount()
    sizes = [8, 1 << 10, 16 << 10, NODE_BYTES, 1 << 20, 8 << 20, 64 << 20]
    uid = nccl.get_unique_id()
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_rank, args=(r, world, uid, sizes, args.repeats, queue)) for r in range(world)]
    for p in procs:
        p.start()
    results = dict(queue.get(timeout=300) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    # every rank waits for the slowest: a collective costs what the slowest rank saw
    table = {}
    for key in results[0]:
        table[key] = max(results[r][key]["median_s"] for r in results)
    name = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"{world} x {name}, NCCL int64 sum allreduce, median of {args.repeats} (slowest rank)")
    print(f"{'bytes':>12} {'us':>9} {'GB/s algbw':>11} {'GB/s busbw':>11}")
    for key, seconds in table.items():
        if key == "round":
            continue
        size = int(key)
        alg = size / seconds / 1e9
        print(f"{size:>12,} {seconds * 1e6:>9.1f} {alg:>11.2f} {alg * 2 * (world - 1) / world:>11.2f}")
    r = table["round"]
    print(
        f"a depth-8 round's {len(ROUND_SIZES)} allreduces ({sum(ROUND_SIZES):,} bytes) back to back: {r * 1e3:.3f} ms"
    )
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(
                {
                    "gpus": world,
                    "device": name,
                    "repeats": args.repeats,
                    "ranks": results,
                    "slowest_rank_median_s": table,
                    "round_sizes": ROUND_SIZES,
                },
                fh,
                indent=1,
            )


if __name__ == "__main__":
    main()
