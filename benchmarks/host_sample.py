"""Where a host-bound GPU round's host time goes, by sampling its stack (no wrappers).

``host_split.py`` clocks methods by wrapping them, which adds a microsecond or more a call and
so reads small calls high; cProfile costs more again. This script instead interrupts the
main thread every ``interval`` microseconds of wall time (``signal.setitimer``) during warm
rounds and records the Python stack where it stood. A sample lands on the line that was
running, or had just returned from C: a wait in ``cudaStreamSynchronize`` shows as the line
that called it. The interpreter handles a signal only at its next check, often the entry of
the next function called, so a small function's first ("def") line and its self time read
high; sums over a caller are sound. Printed per round: the share of samples by function *inclusive* (anywhere
on the stack), by function *self* (innermost Python frame), and by line of the innermost
frame in ``dgboost/``, each as ms a round.

    python benchmarks/host_sample.py [case] [rounds] [interval_us]

(``case`` a ``train_gpu.py`` case, ``higgs_lossguide`` by default; rounds from 6 on are sampled.)
"""

from __future__ import annotations

import collections
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from train_gpu import CASES, case_data, shared_params  # noqa: E402

_WARM_ROUNDS = 6
_ROOT = str(Path(__file__).resolve().parents[1])


def _name(code) -> str:
    path = code.co_filename
    short = path[len(_ROOT) + 1 :] if path.startswith(_ROOT) else Path(path).name
    return f"{short}:{code.co_qualname}"


def main() -> None:
    import cupy as cp

    import dgboost as dg

    name = sys.argv[1] if len(sys.argv) > 1 else "higgs_lossguide"
    case = CASES[name]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 16
    interval = (int(sys.argv[3]) if len(sys.argv) > 3 else 50) * 1e-6
    X, y = case_data(cp, case, case.rows)
    inclusive: collections.Counter = collections.Counter()
    own: collections.Counter = collections.Counter()
    lines: collections.Counter = collections.Counter()
    state = {"on": False, "samples": 0, "wall": 0.0, "t": 0.0, "rounds": 0}

    def sample(signum, frame) -> None:
        if not state["on"] or frame is None:
            return
        state["samples"] += 1
        own[_name(frame.f_code)] += 1
        seen, f, line_done = set(), frame, False
        while f is not None:
            key = _name(f.f_code)
            if key not in seen:
                seen.add(key)
                inclusive[key] += 1
            if not line_done and "dgboost/" in f.f_code.co_filename:
                lines[f"{key}:{f.f_lineno}"] += 1
                line_done = True
            f = f.f_back

    class Clock(dg.TrainingCallback):
        def before_iteration(self, model, epoch, evals_log):
            cp.cuda.get_current_stream().synchronize()
            if epoch >= _WARM_ROUNDS:
                state["t"] = time.perf_counter()
                state["on"] = True
            return False

        def after_iteration(self, model, epoch, evals_log):
            cp.cuda.get_current_stream().synchronize()
            if state["on"]:
                state["on"] = False
                state["wall"] += time.perf_counter() - state["t"]
                state["rounds"] += 1
            return False

    signal.signal(signal.SIGALRM, sample)
    signal.setitimer(signal.ITIMER_REAL, interval, interval)
    try:
        dg.train(shared_params(case, "cuda"), dg.DMatrix(X, y), rounds, verbose_eval=False, callbacks=[Clock()])
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
    n, r = max(1, state["samples"]), max(1, state["rounds"])
    ms = 1e3 * state["wall"] / r
    print(
        f"{name}: {r} rounds sampled, {ms:.2f} ms a round, "
        f"{state['samples'] / r:.0f} samples a round ({interval * 1e6:.0f} us)"
    )
    reports = (("inclusive", inclusive, 45), ("self", own, 40), ("line (innermost dgboost frame)", lines, 60))
    for title, counter, top in reports:
        print(f"\n{title}: ms a round")
        for key, count in counter.most_common(top):
            print(f"  {ms * count / n:8.3f}  {key}")


if __name__ == "__main__":
    main()
