"""Where a CPU boosting round's time goes: per stage and per tree level.

Trains ``--rows`` x 28 binary data (``benchmarks/train_cpu.py``'s set: depth 8, max_bin 256,
eta 0.1) with the CPU engine on ``--threads`` threads and times every call the training loop
makes into the CPU backend (the backend's methods wrapped with a clock; nothing else is
changed). Each call is booked to its stage and, for the per-level stages (partition,
histogram build, sibling subtraction, split evaluation), to the tree level of the nodes it
handles. Per round, the median over the rounds after ``--warm-rounds`` is reported; "other"
is the round's wall time not spent in any backend call (the Python of the grower and the
training loop). XGBoost ``hist`` trains the same data in the same run for the ratio.

    python benchmarks/cpu_round_profile.py [--threads 2] [--rows 1000000] [--rounds 30] [--clock wall]

On a machine that other jobs share, ``--threads 1 --clock cpu`` times both libraries' plain
runs by the process's CPU time instead of the wall clock: less disturbed by the other jobs.

Writes ``benchmarks/results/cpu_round_profile.json`` (``--out`` to change; a run on another
machine should name its own file, e.g. ``cpu_round_profile_16t.json``).
"""

from __future__ import annotations

import argparse
import collections
import functools
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import RESULTS, versions, write_result  # noqa: E402

# backend methods of a round, by stage; the per-level ones take the nodes of one level
_STAGES = {
    "gradient": ["logistic_gradient", "abs_max_bits", "fixed_point_scales", "quantise", "gpair_totals"],
    "root": ["root_node"],
    "partition": ["partition"],
    "split_nodes": ["split_nodes", "child_bounds"],
    "histogram_build": ["build_histograms"],
    "histogram_subtract": ["children_histograms"],
    "split_evaluation": ["evaluate_splits"],
    "prediction_update": ["add_record_leaf_values", "add_leaf_values", "predict_margin"],
    "tree_assembly": ["leaf_weights", "node_bounds", "to_host", "read_later", "concatenate", "asarray", "empty"],
}
_PER_LEVEL = {"partition", "histogram_build", "histogram_subtract", "split_evaluation"}


class _Clock:
    """Wraps the CPU backend's methods and books their seconds by (stage, level)."""

    def __init__(self, backend_class):
        self.cls = backend_class
        self.saved = {}
        self.current = collections.defaultdict(float)  # (stage, level) -> s, this round
        self.rows_built = collections.defaultdict(int)  # level -> rows histogrammed, this round
        for stage, names in _STAGES.items():
            for name in names:
                if hasattr(backend_class, name):
                    self.saved[name] = getattr(backend_class, name)
                    setattr(backend_class, name, self._wrap(stage, name, self.saved[name]))

    def _wrap(self, stage, name, fn):
        clock = self

        @functools.wraps(fn)
        def timed(be, *args, **kwargs):
            t0 = time.perf_counter()
            out = fn(be, *args, **kwargs)
            dt = time.perf_counter() - t0
            level = None
            if stage in _PER_LEVEL:
                level = clock._level(name, args)
            clock.current[(stage, level)] += dt
            if name == "build_histograms":
                segments = np.asarray(args[4])
                clock.rows_built[level] += int((segments[:, 1] - segments[:, 0]).sum())
            return out

        return timed

    @staticmethod
    def _level(name, args) -> int:
        """The tree level of the nodes of a call: whole-level growth has 2**d slots at level d."""
        if name == "partition":
            n = args[2].shape[0]  # the parents (level d - 1): their children are level d
            return int(math.log2(n)) + 1
        if name == "build_histograms":
            n = args[4].shape[0]  # one built child per parent at level d
            return 0 if n == 1 and args[3].shape[0] == args[4][0][1] - args[4][0][0] else int(math.log2(n)) + 1
        if name == "children_histograms":
            return int(math.log2(args[2].shape[0])) + 1
        n = args[0].shape[0]  # evaluate_splits: the histograms of the level's slots
        return int(math.log2(n))

    def take(self) -> tuple[dict, dict]:
        out, rows = dict(self.current), dict(self.rows_built)
        self.current.clear()
        self.rows_built.clear()
        return out, rows

    def restore(self):
        for name, fn in self.saved.items():
            setattr(self.cls, name, fn)


def _round_clock(base, now=time.perf_counter):
    class RoundClock(base):
        def __init__(self, clock):
            super().__init__()
            self.clock = clock
            self.stamps = []
            self.rounds = []

        def before_training(self, model):
            self.clock.take()  # the warm-up and setup calls are not a round's
            self.stamps.append(now())
            return model

        def after_iteration(self, model, epoch, evals_log):
            self.stamps.append(now())
            self.rounds.append(self.clock.take())
            return False

    return RoundClock


def _summarise(rounds, walls, skip: int) -> dict:
    """Median seconds per round of each stage and level over the rounds after ``skip``."""
    kept = rounds[skip:]
    walls = walls[skip:]
    keys = sorted({k for r, _ in kept for k in r}, key=lambda k: (k[0], -1 if k[1] is None else k[1]))
    stages = collections.defaultdict(list)
    levels = collections.defaultdict(lambda: collections.defaultdict(list))
    for r, _ in kept:
        per_stage = collections.defaultdict(float)
        for stage, level in keys:
            v = r.get((stage, level), 0.0)
            per_stage[stage] += v
            if level is not None:
                levels[stage][level].append(v)
        for stage, v in per_stage.items():
            stages[stage].append(v)
    inside = [sum(r.values()) for r, _ in kept]
    other = [w - s for w, s in zip(walls, inside)]
    rows = collections.defaultdict(list)
    for _, built in kept:
        for level, n in built.items():
            rows[level].append(n)
    return {
        "wall_s": float(np.median(walls)),
        "stages_s": {k: float(np.median(v)) for k, v in sorted(stages.items())},
        "other_s": float(np.median(other)),
        "levels_s": {s: {str(d): float(np.median(v)) for d, v in sorted(lv.items())} for s, lv in levels.items()},
        "rows_built_per_level": {str(d): int(np.median(v)) for d, v in sorted(rows.items())},
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--warm-rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--no-xgboost", action="store_true", help="leave XGBoost out")
    ap.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="what the plain runs of both libraries time: wall clock, or the process's CPU time "
        "(with --threads 1, a measure of the work that other jobs on a shared machine disturb less)",
    )
    ap.add_argument("--out", default=str(RESULTS / "cpu_round_profile.json"))
    args = ap.parse_args(argv)

    import dgboost as dg
    from dgboost.backend.cpu import CPUBackend
    from dgboost.datasets import make_synthetic

    x, y, _ = make_synthetic(args.rows, 28, task="binary", missing_rate=0.0, seed=0)
    params = {"objective": "binary:logistic", "max_depth": args.depth, "eta": 0.1, "max_bin": 256}
    params["nthread"] = args.threads
    dg.train(params, dg.DMatrix(x[:5000], y[:5000]), 2, verbose_eval=False)  # JIT compilation
    d_dg = dg.DMatrix(x, y)

    # a plain run first: the wall time per round with no clocks in it
    now = time.perf_counter if args.clock == "wall" else time.process_time
    plain = _round_clock(dg.TrainingCallback, now)(_NullClock())
    dg.train(params, d_dg, args.rounds, verbose_eval=False, callbacks=[plain])
    plain_round = float(np.median(np.diff(plain.stamps)[args.warm_rounds :]))

    clock = _Clock(CPUBackend)
    try:
        rc = _round_clock(dg.TrainingCallback)(clock)
        dg.train(params, d_dg, args.rounds, verbose_eval=False, callbacks=[rc])
    finally:
        clock.restore()
    summary = _summarise(rc.rounds, list(np.diff(rc.stamps)), args.warm_rounds)

    xgb_round = None
    if not args.no_xgboost:
        import xgboost as xgb

        d_xgb = xgb.DMatrix(x, y, nthread=args.threads)
        xc = _round_clock(xgb.callback.TrainingCallback, now)(_NullClock())
        xgb.train({**params, "tree_method": "hist"}, d_xgb, args.rounds, callbacks=[xc])
        xgb_round = float(np.median(np.diff(xc.stamps)[args.warm_rounds :]))

    result = {
        "rows": args.rows,
        "features": 28,
        "depth": args.depth,
        "threads": args.threads,
        "rounds": args.rounds,
        "warm_rounds": args.warm_rounds,
        "plain_runs_clock": args.clock,
        "versions": versions("dgboost", "xgboost", "numba", "numpy"),
        "dgboost_round_s_plain": plain_round,
        "xgboost_round_s": xgb_round,
        "ratio_plain": None if xgb_round is None else plain_round / xgb_round,
        "profiled": summary,
        "load_average_after": list(os.getloadavg()),
        "commit": _commit(),
    }
    if xgb_round is not None:
        result["table"] = [
            {
                "what": f"CPU round, {args.rows:,} x 28, depth {args.depth}, {args.threads} threads, "
                f"profile run{', process CPU time' if args.clock == 'cpu' else ''} (vs XGBoost hist)",
                "ratio": plain_round / xgb_round,
                "note": "lower is better; target <= 1.2 (issue 31)",
            }
        ]
    path = write_result("cpu_round_profile", result, args.out)
    print(f"dgboost round {plain_round * 1e3:.1f} ms (plain), {summary['wall_s'] * 1e3:.1f} ms (profiled)", end="")
    if xgb_round is not None:
        print(f"; xgboost {xgb_round * 1e3:.1f} ms; ratio {plain_round / xgb_round:.2f}")
    else:
        print()
    for stage, s in sorted(summary["stages_s"].items(), key=lambda kv: -kv[1]):
        per_level = summary["levels_s"].get(stage)
        lv = " ".join(f"{d}:{v * 1e3:.1f}" for d, v in per_level.items()) if per_level else ""
        print(f"  {stage:20s} {s * 1e3:7.1f} ms  {lv}")
    print(f"  {'other (python)':20s} {summary['other_s'] * 1e3:7.1f} ms")
    print(f"results in {path}")
    return 0


def _commit() -> str | None:
    """The checkout's commit (None outside a git checkout)."""
    try:
        command = ["git", "rev-parse", "--short", "HEAD"]
        out = subprocess.run(command, capture_output=True, text=True, timeout=10, cwd=Path(__file__).parent)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


class _NullClock:
    def take(self):
        return {}, {}


if __name__ == "__main__":
    raise SystemExit(main())
