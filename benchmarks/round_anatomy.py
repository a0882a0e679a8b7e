"""Where a GPU boosting round's time goes at two sizes: which part of it does not shrink with rows.

Trains the Higgs-like set of ``benchmarks/scaling.py`` in one process on one GPU at each
``--rows`` size and reports, per round (median over the rounds after ``--skip``):

* ``wall``: the round as the training loop sees it, with nothing instrumented (a run of its own);
* in a second, instrumented run: the device time of each kernel the backend launches (CUDA
  events around every launch, never waited for inside a round), the stream's span from the
  round's first event to its last, the host's time blocked in device reads (plain and
  ``read_later``), and the host's time from each read's return to the next launch (the
  device may have nothing queued then).

The part of a stage that does not shrink with rows is estimated from two sizes ``a < b`` as
``(b * t_a - a * t_b) / (b - a)`` (a straight line through both). One GPU alone: the
collectives of several ranks are not in it.

    python benchmarks/round_anatomy.py --rows 10000000 40000000 --rounds 30
"""

from __future__ import annotations

import argparse
import collections
import time

import numpy as np


class _Recorder:
    """Patches the CUDA backend's launch and read paths to time a round's pieces."""

    def __init__(self, backend_class, pending_class):
        import cupy

        self.cupy = cupy
        self.cls, self.pending_cls = backend_class, pending_class
        self.launch, self.read = backend_class._launch, backend_class._read
        self.result = pending_class.result
        self.events = []  # (name, start event, stop event) of the current round
        self.read_s = 0.0
        self.gap_s = 0.0
        self.last_read_end = None
        self.n_reads = 0
        recorder = self

        def launch(be, file, name, *args, **kwargs):
            if recorder.last_read_end is not None:
                recorder.gap_s += time.perf_counter() - recorder.last_read_end
                recorder.last_read_end = None
            start, stop = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            out = recorder.launch(be, file, name, *args, **kwargs)
            stop.record()
            recorder.events.append((name, start, stop))
            return out

        def read(be, array):
            t0 = time.perf_counter()
            out = recorder.read(be, array)
            t1 = time.perf_counter()
            recorder.read_s += t1 - t0
            recorder.n_reads += 1
            recorder.last_read_end = t1
            return out

        def result(pending):
            waits = pending._result is None
            t0 = time.perf_counter()
            out = recorder.result(pending)
            if waits:
                t1 = time.perf_counter()
                recorder.read_s += t1 - t0
                recorder.n_reads += 1
                recorder.last_read_end = t1
            return out

        backend_class._launch, backend_class._read = launch, read
        pending_class.result = result

    def restore(self):
        self.cls._launch, self.cls._read = self.launch, self.read
        self.pending_cls.result = self.result

    def begin_round(self):
        self.events.clear()
        self.read_s = self.gap_s = 0.0
        self.n_reads = 0
        self.last_read_end = None
        self.mark = self.cupy.cuda.Event()
        self.mark.record()

    def end_round(self) -> dict:
        end = self.cupy.cuda.Event()
        end.record()
        end.synchronize()
        elapsed = self.cupy.cuda.get_elapsed_time
        per_kernel = collections.Counter()
        launches = collections.Counter()
        for name, a, b in self.events:
            per_kernel[name] += elapsed(a, b)
            launches[name] += 1
        return {
            "span_ms": elapsed(self.mark, end),
            "kernels_ms": dict(per_kernel),
            "launches": dict(launches),
            "read_ms": 1e3 * self.read_s,
            "gap_ms": 1e3 * self.gap_s,
            "reads": self.n_reads,
        }


def _data(rows: int):
    import cupy
    from _scaling_data import make_block

    starts = range(0, rows, 2_500_000)
    blocks = [make_block("higgs", 42, i, min(2_500_000, rows - s), "cuda") for i, s in enumerate(starts)]
    return cupy.concatenate([b[0] for b in blocks]), cupy.concatenate([b[1] for b in blocks])


def _run(x, y, rounds: int, recorder=None) -> list:
    import dgboost
    from dgboost.training import TrainingCallback

    out = []

    class Clock(TrainingCallback):
        def before_iteration(self, model, epoch, log):
            self.t0 = time.perf_counter()
            if recorder is not None:
                recorder.begin_round()
            return False

        def after_iteration(self, model, epoch, log):
            item = recorder.end_round() if recorder is not None else {}
            item["wall_ms"] = 1e3 * (time.perf_counter() - self.t0)
            out.append(item)
            return False

    params = {"device": "cuda", "objective": "binary:logistic", "max_depth": 8, "eta": 0.1, "max_bin": 256}
    dgboost.train(params, dgboost.DMatrix(x, label=y), rounds, callbacks=[Clock()])
    return out


def main() -> None:
    import cupy

    from dgboost.backend.cuda import CUDABackend, _PendingRead

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[10_000_000, 40_000_000])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--skip", type=int, default=5, help="first rounds left out of the medians")
    ap.add_argument("--output", help="result JSON (default: results/round_anatomy.json)")
    args = ap.parse_args()
    report = {}
    for rows in args.rows:
        x, y = _data(rows)
        plain = _run(x, y, args.rounds)[args.skip :]
        recorder = _Recorder(CUDABackend, _PendingRead)
        try:
            timed = _run(x, y, args.rounds, recorder)[args.skip :]
        finally:
            recorder.restore()
        kernels = sorted({k for r in timed for k in r["kernels_ms"]})
        report[rows] = {
            "wall_ms": float(np.median([r["wall_ms"] for r in plain])),
            "wall_ms_range": [float(min(r["wall_ms"] for r in plain)), float(max(r["wall_ms"] for r in plain))],
            "instrumented_wall_ms": float(np.median([r["wall_ms"] for r in timed])),
            "span_ms": float(np.median([r["span_ms"] for r in timed])),
            "read_ms": float(np.median([r["read_ms"] for r in timed])),
            "gap_ms": float(np.median([r["gap_ms"] for r in timed])),
            "reads": float(np.median([r["reads"] for r in timed])),
            "kernels_ms": {k: float(np.median([r["kernels_ms"].get(k, 0.0) for r in timed])) for k in kernels},
            "launches": {k: float(np.median([r["launches"].get(k, 0) for r in timed])) for k in kernels},
        }
        report[rows]["kernel_sum_ms"] = sum(report[rows]["kernels_ms"].values())
        del x, y
        cupy.get_default_memory_pool().free_all_blocks()

    sizes = sorted(report)
    print(f"{'per round, ms':<28}" + "".join(f"{s:>14,}" for s in sizes) + ("   fixed part" if len(sizes) > 1 else ""))

    def line(label, values):
        text = f"{label:<28}" + "".join(f"{v:14.3f}" for v in values)
        if len(values) > 1:
            a, b = sizes[0], sizes[-1]
            text += f"{(b * values[0] - a * values[-1]) / (b - a):13.3f}"
        print(text)

    for key in ("wall_ms", "instrumented_wall_ms", "span_ms", "kernel_sum_ms", "read_ms", "gap_ms", "reads"):
        line(key, [report[s][key] for s in sizes])
    names = sorted(
        {k for s in sizes for k in report[s]["kernels_ms"]}, key=lambda k: -report[sizes[0]]["kernels_ms"].get(k, 0.0)
    )
    for k in names:
        launches = report[sizes[0]]["launches"].get(k, 0)
        line(f"  {k} x{launches:.0f}", [report[s]["kernels_ms"].get(k, 0.0) for s in sizes])
    from _common import versions, write_result

    write_result(
        "round_anatomy",
        {
            "rounds": args.rounds,
            "skip": args.skip,
            "features": 28,
            "max_depth": 8,
            "versions": versions("dgboost", "numpy", "cupy"),
            "sizes": {str(k): v for k, v in report.items()},
        },
        args.output,
    )


if __name__ == "__main__":
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
