"""Lossguide growth under several lookahead budgets: time per round, reads per tree, memory.

Lossguide picks its next leaf from the gains of the last split's children, so every
batch of splits is read back before the next one. How much the grower splits ahead of a
read is the backend's :class:`dgboost.backend.base.LookaheadBudget` (``nodes`` the best
leaves, ``levels`` whole levels below their children, ``hist_bytes`` for their
histograms). This script trains the Higgs-like lossguide case of ``train_gpu.py`` once per
budget, in one process on one device, and reports for each the median time per round
after warm-up, the host reads per tree (CUDA), the device memory in use at round ends
(``cudaMemGetInfo``, above the baseline, as ``train_gpu.py``'s peak), and
checks that every budget builds byte for byte the same model (a budget changes how many
reads growth takes, never the tree).

    python benchmarks/lossguide_lookahead.py                        # 10M x 28, 60 rounds, CUDA
    python benchmarks/lossguide_lookahead.py --device cpu --rows 200000 --rounds 6

A budget is ``nodes:levels:MiB``; ``default`` is the backend's own.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine, versions, write_result  # noqa: E402
from train_gpu import Device, _host_read_probe, _round_clock, make_data  # noqa: E402

DEFAULT_BUDGETS = "1:0:0,32:1:64,256:12:128,default,256:12:512,256:12:1024"


def parse_budget(text: str, backend_class):
    """``nodes:levels:MiB`` (or ``default``: the backend's own) -> LookaheadBudget."""
    from dgboost.backend.base import LookaheadBudget

    if text == "default":
        return backend_class.lookahead
    nodes, levels, mib = (int(v) for v in text.split(":"))
    return LookaheadBudget(nodes=nodes, levels=levels, hist_bytes=mib << 20)


def run_budget(budget, backend_class, params, X, y, rounds: int, warm: int, device: Device) -> dict:
    """Train once under ``budget``; per-round median, reads per tree, memory peak, the model."""
    import dgboost as dg

    saved = backend_class.lookahead
    backend_class.lookahead = budget
    try:
        device.reset()
        probe = _host_read_probe() if device.cuda else None
        reads = contextlib.nullcontext() if probe is None else probe(backend_class)
        clock = _round_clock(dg.TrainingCallback, device)
        with reads as counts:
            start = time.perf_counter()
            booster = dg.train(params, dg.DMatrix(X, y), rounds, verbose_eval=False, callbacks=[clock])
            device.sync()
            total = time.perf_counter() - start
        used_peak, _ = device.peaks()
    finally:
        backend_class.lookahead = saved
    out = {
        "budget": {"nodes": budget.nodes, "levels": budget.levels, "hist_bytes": budget.hist_bytes},
        "per_round_s": clock.per_round(warm),
        "total_s": total,
        "peak_memory_bytes": used_peak,
    }
    if counts is not None:
        out["reads_per_tree"] = counts.syncs / counts.trees if counts.trees else None
    return out, booster.save_raw("json")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--features", type=int, default=28)
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--warm-rounds", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3, help="runs of each budget, taking turns")
    ap.add_argument("--max-leaves", type=int, default=255)
    ap.add_argument("--max-depth", type=int, default=0)
    ap.add_argument("--budgets", default=DEFAULT_BUDGETS)
    ap.add_argument("--out", default=None, help="result JSON (default: results/lossguide_lookahead.json)")
    args = ap.parse_args(argv)

    device = Device(args.device)
    if device.cuda:
        from dgboost.backend.cuda import CUDABackend as backend_class
    else:
        from dgboost.backend.cpu import CPUBackend as backend_class
    budgets = [(text, parse_budget(text, backend_class)) for text in args.budgets.split(",")]
    X, y = make_data(device.xp, args.rows, args.features, "binary", seed=0)
    params = {
        "objective": "binary:logistic",
        "eta": 0.1,
        "max_bin": 256,
        "seed": 0,
        "device": args.device,
        "grow_policy": "lossguide",
        "max_leaves": args.max_leaves,
        "max_depth": args.max_depth,
    }
    import dgboost as dg

    dg.train(params, dg.DMatrix(X[:10_000], y[:10_000]), 2, verbose_eval=False)  # compile, load kernels
    runs: dict[str, list] = {text: [] for text, _ in budgets}
    models = {}
    for repeat in range(args.repeats):
        order = budgets if repeat % 2 == 0 else budgets[::-1]
        for text, budget in order:
            out, model = run_budget(budget, backend_class, params, X, y, args.rounds, args.warm_rounds, device)
            runs[text].append(out)
            models.setdefault(text, model)
            if model != models[text]:
                raise SystemExit(f"budget {text}: the model changed between repeats")
            print(
                f"  {text:>14}: {out['per_round_s'] * 1e3:7.2f} ms a round, "
                f"{out.get('reads_per_tree') or float('nan'):5.1f} reads a tree, "
                f"memory peak {(out['peak_memory_bytes'] or 0) / 2**20:7.1f} MiB",
                flush=True,
            )
    first = next(iter(models.values()))
    same = {text: model == first for text, model in models.items()}

    def median(text, key):
        values = [r[key] for r in runs[text] if r.get(key) is not None]
        return float(np.median(values)) if values else None

    rows = []
    for text, budget in budgets:
        per_round = [r["per_round_s"] for r in runs[text]]
        rows.append(
            {
                "budget": text,
                "nodes": budget.nodes,
                "levels": budget.levels,
                "hist_bytes": budget.hist_bytes,
                "per_round_s": {
                    "median": float(np.median(per_round)),
                    "min": min(per_round),
                    "max": max(per_round),
                    "runs": per_round,
                },
                "reads_per_tree": median(text, "reads_per_tree"),
                "peak_memory_bytes": median(text, "peak_memory_bytes"),
                "same_model_as_first": same[text],
            }
        )
    payload = {
        "benchmark": "lossguide_lookahead",
        "device": args.device,
        "hardware": device.hardware(),
        "machine": machine(),
        "versions": versions("dgboost", "numpy", "cupy"),
        "rows": args.rows,
        "features": args.features,
        "rounds": args.rounds,
        "warm_rounds": args.warm_rounds,
        "repeats": args.repeats,
        "params": params,
        "default_budget": str(backend_class.lookahead),
        "results": rows,
    }
    path = write_result("lossguide_lookahead", payload, args.out)
    print(f"\n{'budget':>14} {'ms/round':>9} {'(min-max)':>15} {'reads/tree':>10} {'peak MiB':>9} same")
    for r in rows:
        pr = r["per_round_s"]
        print(
            f"{r['budget']:>14} {pr['median'] * 1e3:9.2f} ({pr['min'] * 1e3:6.2f}-{pr['max'] * 1e3:6.2f}) "
            f"{r['reads_per_tree'] or float('nan'):10.1f} {(r['peak_memory_bytes'] or 0) / 2**20:9.1f} "
            f"{r['same_model_as_first']}"
        )
    print(f"wrote {path}")
    return 0 if all(same.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
