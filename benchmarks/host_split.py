"""Host time of the grower's and the CUDA backend's functions over warm GPU boosting rounds.

On a host-bound set (lossguide, multiclass) a round's time is mostly the host's: Python,
CuPy calls and kernel launches, while the device waits (``round_timeline.py`` shows the
waits; this shows where the host spends them). Each listed method is wrapped with a clock
that counts only while the recorded rounds run, and its *inclusive* time a round is printed
(a backend call inside a grower method counts in both), with its calls a round and its time
a call. The wrappers add about a microsecond a call, so small calls read somewhat high.
``to_host`` includes the wait for the device. The dgboost timed is this checkout's.

    python benchmarks/host_split.py higgs_lossguide 14
"""

from __future__ import annotations

import collections
import functools
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from train_gpu import CASES, case_data, shared_params  # noqa: E402

_GROWER = [
    "_grow_best_first", "_split_group", "_split", "_parents", "_node_masks", "_split_on_device",
    "_read_levels", "_finish", "start", "grow_from", "_levels_ahead",
]  # fmt: skip
_BACKEND = [
    "partition", "split_level", "split_nodes", "build_histograms", "children_histograms", "evaluate_splits",
    "evaluate_children", "to_host", "asarray", "empty", "zeros", "concatenate", "take_rows", "_launch", "_upload_small",
    "add_record_leaf_values", "add_leaf_values", "quantise", "logistic_gradient", "_launchable", "_scratch", "_work",
    "_records",
]  # fmt: skip
_WARM_ROUNDS = 6


def _wrap(cls, name: str, clock: dict, calls: collections.Counter, on: list) -> None:
    """Wrap ``cls.name`` (not a staticmethod) with a clock that counts while ``on[0]``."""
    if not hasattr(cls, name) or isinstance(cls.__dict__.get(name), staticmethod):
        return
    f = getattr(cls, name)
    key = f"{cls.__name__}.{name}"

    @functools.wraps(f)
    def clocked(*a, **k):
        if not on[0]:
            return f(*a, **k)
        t = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            clock[key] += time.perf_counter() - t
            calls[key] += 1

    setattr(cls, name, clocked)


def main() -> None:
    import cupy as cp

    import dgboost as dg
    from dgboost import grower
    from dgboost.backend import cuda

    case_name = sys.argv[1] if len(sys.argv) > 1 else "higgs_lossguide"
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 14
    clock: dict = collections.defaultdict(float)
    calls: collections.Counter = collections.Counter()
    on = [False]
    for name in _GROWER:
        _wrap(grower.TreeGrower, name, clock, calls, on)
    for name in _BACKEND:
        _wrap(cuda.CUDABackend, name, clock, calls, on)

    case = CASES[case_name]
    X, y = case_data(cp, case, case.rows)
    walls: list[float] = []

    class _Clock(dg.TrainingCallback):
        def before_iteration(self, model, epoch, log):
            cp.cuda.get_current_stream().synchronize()
            on[0] = epoch >= _WARM_ROUNDS
            self.start = time.perf_counter()
            return False

        def after_iteration(self, model, epoch, log):
            cp.cuda.get_current_stream().synchronize()
            if epoch >= _WARM_ROUNDS:
                walls.append(time.perf_counter() - self.start)
            return False

    dg.train(shared_params(case, "cuda"), dg.DMatrix(X, y), rounds, verbose_eval=False, callbacks=[_Clock()])
    r = len(walls)
    print(f"{case_name}: {r} rounds, wall per round {1e3 * np.median(walls):.2f} ms (min {1e3 * min(walls):.2f})")
    for key, seconds in sorted(clock.items(), key=lambda kv: -kv[1]):
        print(
            f"  {key:40s} {1e3 * seconds / r:8.3f} ms/round  {calls[key] / r:7.1f} calls/round"
            f"  {1e6 * seconds / calls[key]:7.1f} us/call"
        )


if __name__ == "__main__":
    main()
