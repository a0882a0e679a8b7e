"""Where a lossguide batch's time goes, on the host and on the device.

A lossguide tree reads its batches (one device batch, then a read, about 25 a tree): the host
picks the next nodes, gathers their parents, queues the batch's launches and waits for the
read. This script wraps three methods only (``TreeGrower._split_group``, ``_parents`` and
``CUDABackend.to_host``; a few calls a batch, so the clocks cost next to nothing), records
device events at the parents' gather and at the read, and prints per round (and per batch,
median) the time between batches (the heap's work), up to the parents gathered, the launches
(host), the read (its wait for the device and the copy), after the read, and the device's
time from the gather to the read (which includes what it waited for the host's launches).

    python benchmarks/lossguide_batch_clock.py [case] [rounds]

(``case`` a ``train_gpu.py`` case, ``higgs_lossguide`` by default; rounds 6 to 13 are recorded.)
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from train_gpu import CASES, case_data, shared_params  # noqa: E402

_FIRST, _LAST = 6, 14  # the recorded rounds: [_FIRST, _LAST)


def main() -> None:
    import cupy as cp

    import dgboost as dg
    from dgboost import grower
    from dgboost.backend import cuda

    case = CASES[sys.argv[1] if len(sys.argv) > 1 else "higgs_lossguide"]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 16
    X, y = case_data(cp, case, case.rows)
    on, last_end, current, batches = [False], [None], {}, []
    split_group, parents, to_host = grower.TreeGrower._split_group, grower.TreeGrower._parents, cuda.CUDABackend.to_host

    def clocked_split_group(self, *a, **k):
        if not on[0]:
            return split_group(self, *a, **k)
        current.clear()
        current["t0"] = time.perf_counter()
        current["gap"] = None if last_end[0] is None else current["t0"] - last_end[0]
        out = split_group(self, *a, **k)
        current["t4"] = last_end[0] = time.perf_counter()
        batches.append(dict(current))
        return out

    def clocked_parents(self, *a, **k):
        out = parents(self, *a, **k)
        if on[0] and "t1" not in current:
            current["t1"] = time.perf_counter()
            current["e1"] = cp.cuda.Event()
            current["e1"].record()
        return out

    def clocked_to_host(self, array):
        if not (on[0] and "t1" in current and "t2" not in current):
            return to_host(self, array)
        current["t2"] = time.perf_counter()
        read = cp.cuda.Event()
        read.record()
        out = to_host(self, array)
        current["t3"] = time.perf_counter()
        current["device"] = cp.cuda.get_elapsed_time(current.pop("e1"), read) / 1e3
        return out

    grower.TreeGrower._split_group = clocked_split_group
    grower.TreeGrower._parents = clocked_parents
    cuda.CUDABackend.to_host = clocked_to_host
    walls: list[float] = []
    per_round: list[int] = []

    class _Clock(dg.TrainingCallback):
        def before_iteration(self, model, epoch, log):
            cp.cuda.get_current_stream().synchronize()
            on[0], last_end[0] = _FIRST <= epoch < _LAST, None
            self.batches, self.start = len(batches), time.perf_counter()
            return False

        def after_iteration(self, model, epoch, log):
            cp.cuda.get_current_stream().synchronize()
            walls.append(time.perf_counter() - self.start)
            if _FIRST <= epoch < _LAST:
                per_round.append(len(batches) - self.batches)
            return False

    dg.train(shared_params(case, "cuda"), dg.DMatrix(X, y), rounds, verbose_eval=False, callbacks=[_Clock()])
    print("rounds ms", [round(w * 1e3, 1) for w in walls])
    print("batches a round", per_round)
    print(f"recorded rounds: median {statistics.median(walls[_FIRST:_LAST]) * 1e3:.2f} ms")
    complete = [b for b in batches if all(k in b for k in ("t1", "t2", "t3"))]
    stages = {
        "between batches (heap, after the last)": lambda b: b["gap"] or 0.0,
        "_split_group to parents gathered": lambda b: b["t1"] - b["t0"],
        "parents -> read (launches, host)": lambda b: b["t2"] - b["t1"],
        "read: wait + copy": lambda b: b["t3"] - b["t2"],
        "after the read (_read_levels, ids)": lambda b: b["t4"] - b["t3"],
        "device: parents -> read event": lambda b: b["device"],
    }
    print(f"{'':42s} {'ms a round':>10s} {'us a batch (median)':>20s}")
    for name, stage in stages.items():
        values = [stage(b) for b in complete]
        print(f"{name:42s} {sum(values) / len(per_round) * 1e3:10.2f} {statistics.median(values) * 1e6:20.1f}")


if __name__ == "__main__":
    main()
