"""Host time of queueing one stream-ordered allreduce, piece by piece, on two or more GPUs.

A depth-8 round of the scaling benchmark queues 10 allreduces (the root's sums and the
histograms of every level); with two ranks its rounds took about 1 ms longer than one rank's
rounds on half the rows, and the job profile booked 0.11-0.13 s of host time a job "in"
the collectives, which are queued, not awaited (``NcclComm(stream_ordered=True)``). This
spawns one process per GPU; each opens dgboost's :class:`~dgboost.comm.nccl.NcclComm` as a
Dask rank does and times, on the host, each piece of a queued allreduce of the round's sizes
while the GPU is busy (a kernel of about a millisecond queued before each), and idle:

* ``copy``: the output array, a copy of the input by ``cupy.array(copy=True)`` (before);
* ``copy_on_stream``: the same copy as ``NcclComm`` makes it now (one device-to-device copy);
* ``nccl``: ``ncclAllReduce`` itself (CuPy's ``NcclCommunicator.allReduce``);
* ``event``: a CUDA event made and recorded after it (the watchdog's check);
* ``allreduce_sum``: dgboost's whole call.

Median microseconds over ``--repeats`` rounds, the slowest rank's.

    NCCL_NVLS_ENABLE=0 python benchmarks/nccl_enqueue_host.py --gpus 2 --out enqueue.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

NODE_BYTES = 28 * 256 * 16  # one node's int64 (G, H) histogram in the scaling benchmark
ROUND_SIZES = [16, NODE_BYTES] + [NODE_BYTES * (1 << d) for d in range(7)]
PIECES = ("copy", "copy_on_stream", "nccl", "event", "allreduce_sum")


def _rank(rank: int, world: int, uid, repeats: int, queue) -> None:
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    import cupy
    from cupy.cuda import nccl

    from dgboost.comm.nccl import NcclComm, _copy_on_stream

    cupy.cuda.Device(rank).use()
    busy_src = cupy.ones(64 << 20, cupy.float32)  # 256 MiB: a copy of it keeps the GPU busy ~0.15 ms
    arrays = [cupy.ones(max(1, s // 8), cupy.int64) for s in ROUND_SIZES]
    times: dict[str, dict[str, list[float]]] = {state: {p: [] for p in PIECES} for state in ("busy", "idle")}
    with NcclComm(uid, rank, world, stream_ordered=True) as comm:
        raw = comm._comm
        for state in ("idle", "busy"):
            for r in range(repeats + 3):
                stream = cupy.cuda.get_current_stream()
                stream.synchronize()
                sums = dict.fromkeys(PIECES, 0.0)
                for a in arrays:
                    if state == "busy":
                        for _ in range(6):
                            busy_src.copy()
                    t0 = time.perf_counter()
                    out = cupy.array(a, copy=True, order="C")
                    t1 = time.perf_counter()
                    out = _copy_on_stream(a, stream)
                    t1b = time.perf_counter()
                    raw.allReduce(out.data.ptr, out.data.ptr, out.size, nccl.NCCL_INT64, nccl.NCCL_SUM, stream.ptr)
                    t2 = time.perf_counter()
                    event = cupy.cuda.Event(disable_timing=True)
                    event.record(stream)
                    t3 = time.perf_counter()
                    comm.allreduce_sum(a)
                    t4 = time.perf_counter()
                    sums["copy"] += t1 - t0
                    sums["copy_on_stream"] += t1b - t1
                    sums["nccl"] += t2 - t1b
                    sums["event"] += t3 - t2
                    sums["allreduce_sum"] += t4 - t3
                if r >= 3:  # warm-up rounds left out
                    for p in PIECES:
                        times[state][p].append(sums[p] / len(arrays))
        cupy.cuda.get_current_stream().synchronize()
    queue.put((rank, {s: {p: statistics.median(v) for p, v in d.items()} for s, d in times.items()}))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=50)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    from cupy.cuda import nccl

    uid = nccl.get_unique_id()
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_rank, args=(r, args.gpus, uid, args.repeats, queue)) for r in range(args.gpus)]
    for p in procs:
        p.start()
    results = dict(queue.get(timeout=600) for _ in procs)
    for p in procs:
        p.join()
    slowest = {
        state: {p: max(results[r][state][p] for r in results) * 1e6 for p in PIECES} for state in ("idle", "busy")
    }
    print(
        f"host time of one queued allreduce, us (mean of the round's {len(ROUND_SIZES)} sizes; "
        "median of rounds; slowest rank)"
    )
    print(f"{'GPU':>5} " + " ".join(f"{p:>15}" for p in PIECES))
    for state in ("idle", "busy"):
        print(f"{state:>5} " + " ".join(f"{slowest[state][p]:15.1f}" for p in PIECES))
    if args.out:
        Path(args.out).write_text(
            json.dumps(
                {
                    "benchmark": "nccl_enqueue_host",
                    "gpus": args.gpus,
                    "repeats": args.repeats,
                    "round_sizes": ROUND_SIZES,
                    "nccl_env": {k: v for k, v in os.environ.items() if k.startswith("NCCL_")},
                    "slowest_rank_us": slowest,
                    "per_rank_s": results,
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
