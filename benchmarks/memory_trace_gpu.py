"""Where a GPU training run's device memory goes, stage by stage (issue 32).

Runs one ``train_gpu.py`` set with dgboost as ``train_gpu.py`` does (a warm-up run on a
slice, then the pool emptied and the baselines taken), with every CuPy allocation routed
through a recorder. It prints, above the baselines: ``cudaMemGetInfo``'s use (what
``train_gpu.py`` reports for both libraries), the bytes CuPy's pool holds from the driver
(``total_bytes``) and the bytes in use (``used_bytes``), after the DMatrix, after each of the
first rounds and at the end, with each figure's peak; and the largest allocations live at the
pool's peak, with the Python line that made each. What the pool holds beyond its use is its
cache (blocks freed and kept); what ``cudaMemGetInfo`` shows beyond the pool is memory no
CuPy allocation made (modules, the runtime's own).

    python benchmarks/memory_trace_gpu.py --case higgs --rounds 20
"""

from __future__ import annotations

import argparse
import gc
import sys
import traceback
import weakref
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

MiB = 2**20


class PoolRecorder:
    """Every CuPy allocation through the pool, with the live ones' sizes and callers, and the
    pool's peaks (use and holding) and the live set at the use peak."""

    def __init__(self, cupy):
        self.cupy = cupy
        self.pool = cupy.get_default_memory_pool()
        self.live: dict[int, tuple[int, str]] = {}
        self.used_peak = self.held_peak = 0
        self.at_peak: list[tuple[int, str]] = []
        self.growths: list[tuple[int, int, int, str]] = []  # (size, held after, in use after, caller)

    def __call__(self, size: int):
        held_before = self.pool.total_bytes()
        mem = self.pool.malloc(size)
        if size == 0:
            return mem
        owner = _Owner(mem)  # a Python object that holds the block: it can be watched
        key = id(owner)
        self.live[key] = (size, _caller())
        weakref.finalize(owner, self.live.pop, key, None)
        used, held = self.pool.used_bytes(), self.pool.total_bytes()
        if held > held_before:  # the pool asked the driver for more
            self.growths.append((size, held, used, self.live[key][1]))
        self.held_peak = max(self.held_peak, held)
        if used > self.used_peak:
            self.used_peak = used
            self.at_peak = sorted(self.live.values(), reverse=True)[:12]
        memory = self.cupy.cuda.memory.UnownedMemory(mem.ptr, size, owner, mem.device_id)
        return self.cupy.cuda.memory.MemoryPointer(memory, 0)


class _Owner:
    """Holds a pool block until the last array on it goes."""

    __slots__ = ("mem", "__weakref__")

    def __init__(self, mem):
        self.mem = mem


def _caller() -> str:
    """The innermost frames in dgboost that asked for memory, past the allocation helpers."""
    frames = [
        f"{Path(f.filename).name}:{f.lineno} {f.name}"
        for f in reversed(traceback.extract_stack(limit=40)[:-2])
        if "dgboost" in f.filename and f.name not in ("empty", "zeros", "_scratch", "asarray", "__call__")
    ]
    return " < ".join(frames[:2]) or "?"


def main(argv=None) -> None:
    import cupy
    import train_gpu as tg

    import dgboost as dg

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", default="higgs", choices=sorted(tg.CASES))
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--xgboost-first", action="store_true", help="XGBoost warms up too (train_gpu.py)")
    ap.add_argument("--predict-warmup", action="store_true", help="the warm-up predicts the test rows (train_gpu.py)")
    ap.add_argument("--no-recorder", action="store_true", help="the pool's own allocator: figures only")
    ap.add_argument("--sync-every-round", action="store_true", help="synchronise after every round (train_gpu.py)")
    ap.add_argument("--probe", action="store_true", help="inside the host-read counter (train_gpu.py)")
    args = ap.parse_args(argv)
    case = tg.CASES[args.case]
    device = tg.Device("cuda")
    n_train = case.rows
    X, y = tg.case_data(cupy, case, n_train + max(200, n_train // 9), args.seed)
    X_test = X[n_train:]
    X, y = X[:n_train], y[:n_train]
    params = tg._params("dgboost", case, device, argparse.Namespace(threads=0, dgboost_params={}))
    warm = dg.train(params, dg.DMatrix(X[:20_000], y[:20_000]), 3, verbose_eval=False)  # warm-up, as train_gpu.py
    if args.predict_warmup:
        warm.predict(dg.DMatrix(X_test))
    del warm
    if args.xgboost_first:
        import xgboost as xgb

        xgb_params = tg._params("xgboost", case, device, argparse.Namespace(threads=0, dgboost_params={}))
        xgb.train(xgb_params, xgb.QuantileDMatrix(X[:20_000], y[:20_000], max_bin=256), 3)
    gc.collect()
    device.reset()
    pool = cupy.get_default_memory_pool()
    base_used, base_held, base_info = pool.used_bytes(), pool.total_bytes(), device._used()
    recorder = PoolRecorder(cupy)
    if not args.no_recorder:
        cupy.cuda.set_allocator(recorder)
    info_peak = [0]

    def line(what: str) -> None:
        device.sync()
        info = device._used() - base_info
        info_peak[0] = max(info_peak[0], info)
        print(
            f"{what:<18} memGetInfo {info / MiB:8.1f}   pool holds {(pool.total_bytes() - base_held) / MiB:8.1f}"
            f"   in use {(pool.used_bytes() - base_used) / MiB:8.1f} MiB",
            flush=True,
        )

    class Rounds(dg.TrainingCallback):
        held = [0]

        def after_iteration(self, model, epoch, evals_log):
            if args.sync_every_round:
                device.sync()
            grew = pool.total_bytes() > self.held[0]
            self.held[0] = max(self.held[0], pool.total_bytes())
            if epoch < 5 or epoch == args.rounds - 1 or grew:
                line(f"after round {epoch}")
            return False

    import contextlib

    from dgboost.testing.cuda_probes import count_host_reads

    with count_host_reads() if args.probe else contextlib.nullcontext():
        dtrain = dg.DMatrix(X, y)
        line("after DMatrix")
        booster = dg.train(params, dtrain, args.rounds, verbose_eval=False, callbacks=[Rounds()])
    line("end")
    cupy.cuda.set_allocator(pool.malloc)
    print(
        f"\npeaks above the baselines: memGetInfo (sampled) {info_peak[0] / MiB:.1f} MiB, pool holds "
        f"{(recorder.held_peak - base_held) / MiB:.1f}, in use {(recorder.used_peak - base_used) / MiB:.1f} MiB"
    )
    print("allocations that made the pool ask the driver for more (size, pool holds after, in use after):")
    for size, held, used, where in recorder.growths:
        print(f"  {size / MiB:9.1f} MiB  {(held - base_held) / MiB:8.1f}  {(used - base_used) / MiB:8.1f}  {where}")
    print("largest allocations live at the pool's use peak:")
    for size, where in recorder.at_peak:
        print(f"  {size / MiB:9.1f} MiB  {where}")
    del booster, dtrain


if __name__ == "__main__":
    main()
