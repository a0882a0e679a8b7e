"""dgboost vs XGBoost ``hist`` on one GPU: time per round, whole run, test metric, peak memory.

Both libraries train in the same run, on the same GPU, on the same data with the same
parameters (eta 0.1, max_bin 256), on synthetic tables shaped like the data sets of the
GPU boosting papers:

======================  ==========================  ===============================  ======
case                    shape (training rows)       task / parameters                rounds
======================  ==========================  ===============================  ======
``higgs``               10M x 28                    binary:logistic, depth 8         200
``covtype``             581K x 54                   multi:softprob, 8 classes, d. 8  100
``year``                515K x 90                   reg:squarederror, depth 8        200
``bosch``               1M x 968, 80% missing       binary:logistic, depth 8         50
``higgs_lossguide``     10M x 28                    lossguide, max_leaves 255        200
======================  ==========================  ===============================  ======

The data is drawn on the device with CuPy (a seeded generator; labels from a fixed
random linear plus nonlinear function of the features, see :func:`make_data`), so both
libraries get device arrays; another 10% of rows is held out for the test metric (AUC for
binary, accuracy for multiclass, RMSE for regression, computed with scikit-learn/NumPy on
host copies, so neither library's metric code is involved).

For each case and library, ``--repeats`` runs, the libraries taking turns (the order
flips every repeat), after one small warm-up run of each (kernel loading, dgboost's NVRTC
compilation):

* whole run: DMatrix/QuantileDMatrix construction plus training, to a device synchronise;
* per round: a training callback stamps ``time.perf_counter()`` after
  ``cudaDeviceSynchronize`` at the end of every round; the median of the round times after
  the first ``--warm-rounds`` rounds;
* peak device memory above the level before the run, from ``cudaMemGetInfo`` sampled at
  every round's end (the same measure for both libraries: XGBoost allocates outside CuPy);
  for dgboost also the exact high-water mark of CuPy's memory pool, recorded by a wrapping
  allocator in one more run that is not timed (a Python call per allocation would slow
  the timed runs of dgboost only);
* host synchronisations per tree, where ``dgboost.testing.cuda_probes`` exists.

Medians and (min, max) over the repeats are reported, with the ratios dgboost / XGBoost;
peak memory is reported as the largest of the repeats, since caching allocators can only
hide memory in later runs. ``--device cpu`` runs exactly the same code on NumPy data
with both libraries on the CPU (no memory figures), to check the harness anywhere.

    python benchmarks/train_gpu.py                          # the full run, ~GPU minutes
    python benchmarks/train_gpu.py --scale 0.05 --repeats 1 # a quick look
    python benchmarks/train_gpu.py --device cpu --scale 0.002 --rounds-scale 0.1
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import json
import resource
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import RESULTS, machine, versions, write_result  # noqa: E402

LIBRARIES = ("dgboost", "xgboost")
MiB = float(1 << 20)


@dataclass(frozen=True)
class Case:
    """One benchmark case: the data's shape and task, the parameters, the rounds."""

    rows: int  # training rows at --scale 1 (10% more are held out)
    features: int
    task: str  # binary | multiclass | regression
    rounds: int
    params: dict = field(default_factory=dict)
    n_classes: int = 2
    missing_rate: float = 0.0
    what: str = ""
    dataset: str = "synthetic"  # or a set of _scaling_data.DATASETS (its own features and labels)

    @property
    def data_key(self) -> tuple:
        return (self.dataset, self.rows, self.features, self.task, self.n_classes, self.missing_rate)


CASES = {
    "higgs": Case(10_000_000, 28, "binary", 200, {"max_depth": 8}, what="Higgs-like"),
    "covtype": Case(581_012, 54, "multiclass", 100, {"max_depth": 8}, n_classes=8, what="covtype-like"),
    "year": Case(515_345, 90, "regression", 200, {"max_depth": 8}, what="YearPrediction-like"),
    "bosch": Case(1_000_000, 968, "binary", 50, {"max_depth": 8}, missing_rate=0.8, what="Bosch-like"),
    "higgs_lossguide": Case(
        10_000_000,
        28,
        "binary",
        200,
        {"grow_policy": "lossguide", "max_leaves": 255, "max_depth": 0},
        what="Higgs-like, lossguide",
    ),
    # the multi-GPU XGBoost paper's set on one GPU (scaling.py times it through Dask); not
    # among the default cases: 126M rows take a minute a library
    "airline": Case(115_000_000, 13, "binary", 100, {"max_depth": 8}, what="airline-like", dataset="airline"),
}
DEFAULT_CASES = ("higgs", "covtype", "year", "bosch", "higgs_lossguide")
OBJECTIVE = {"binary": "binary:logistic", "multiclass": "multi:softprob", "regression": "reg:squarederror"}
METRIC = {"binary": "auc", "multiclass": "accuracy", "regression": "rmse"}


# ---------------------------------------------------------------------------------------
# data: the same code for NumPy and CuPy
# ---------------------------------------------------------------------------------------
def make_data(
    xp, n_rows: int, n_features: int, task: str, *, n_classes: int = 2, missing_rate: float = 0.0, seed: int = 0
):
    """Standard-normal features and labels from a fixed random function of them.

    The score is ``X @ w`` (random weights of unit norm, mostly on the first 16 features,
    drawn on the host from ``seed`` so that it is the same function for either array
    module) plus interactions and thresholds on the first six features; the labels add Gaussian (binary,
    regression) or Gumbel
    (multiclass) noise. Missing values (NaN) are placed at random after labelling.

    Parameters
    ----------
    xp : module
        ``numpy`` or ``cupy``: where the arrays are made.
    n_rows, n_features : int
    task : {"binary", "multiclass", "regression"}
    n_classes : int
    missing_rate : float
    seed : int

    Returns
    -------
    X : xp.ndarray of float32, shape (n_rows, n_features)
    y : xp.ndarray of float32, shape (n_rows,)
    """
    f32 = xp.float32
    rng = xp.random.default_rng(seed)
    X = rng.standard_normal((n_rows, n_features), dtype=f32)
    host = np.random.default_rng(seed + 1)
    k = n_classes if task == "multiclass" else 1
    # most of the linear signal in the first 16 features, a little in every other one, so
    # that wide tables (Bosch-like) stay learnable
    scale = np.where(np.arange(n_features) < 16, 1.0, 0.2)[:, None]
    w = host.standard_normal((n_features, k)) * scale
    w = xp.asarray((w / np.linalg.norm(w, axis=0)).astype(np.float32))
    amp = xp.asarray(host.uniform(-1.5, 1.5, k).astype(np.float32)) if k > 1 else f32(1.0)
    c = [X[:, j % n_features] for j in range(6)]
    nonlinear = (
        f32(1.2) * xp.sin(f32(1.5) * c[0]) * c[1]
        + f32(0.8) * xp.tanh(c[2] * c[3])
        + f32(0.6) * (c[4] > 0) * c[5]
        - f32(0.4) * xp.abs(c[3])
    )
    score = X @ w + nonlinear[:, None] * amp
    score -= score.mean(axis=0)
    if task == "binary":
        y = (score[:, 0] + f32(0.5) * rng.standard_normal(n_rows, dtype=f32) > 0).astype(f32)
    elif task == "regression":
        y = (score[:, 0] + f32(0.5) * rng.standard_normal(n_rows, dtype=f32)).astype(f32)
    elif task == "multiclass":
        u = rng.random((n_rows, k), dtype=f32)
        gumbel = -xp.log(-xp.log(u + f32(1e-12)) + f32(1e-12))
        y = xp.argmax(f32(2.0) * score + gumbel, axis=1).astype(f32)
    else:
        raise ValueError(f"unknown task {task!r}")
    del score, nonlinear
    if missing_rate > 0:
        # where, not a masked assignment: CuPy's boolean setitem needs an int64 index per value
        X = xp.where(rng.random((n_rows, n_features), dtype=f32) < f32(missing_rate), f32(np.nan), X)
    return X, y


def case_data(xp, case: Case, n_rows: int, seed: int = 0):
    """``n_rows`` rows of ``case``'s table: :func:`make_data`, or the named data set of
    ``_scaling_data`` (drawn as one block).

    Returns
    -------
    X : xp.ndarray of float32, shape (n_rows, case.features)
    y : xp.ndarray of float32, shape (n_rows,)
    """
    if case.dataset == "synthetic":
        return make_data(
            xp, n_rows, case.features, case.task, n_classes=case.n_classes, missing_rate=case.missing_rate, seed=seed
        )
    from _scaling_data import make_block

    return make_block(case.dataset, seed, 0, n_rows, "cpu" if xp is np else "cuda")


def _host(a) -> np.ndarray:
    return a.get() if hasattr(a, "get") and not isinstance(a, np.ndarray) else np.asarray(a)


def _auc(y: np.ndarray, score: np.ndarray) -> float:
    """ROC AUC: scikit-learn's, or the rank-sum formula (ties get average ranks) without it."""
    try:
        from sklearn.metrics import roc_auc_score
    except ImportError:
        _, inverse, counts = np.unique(score, return_inverse=True, return_counts=True)
        ends = np.cumsum(counts)
        ranks = (ends - (counts - 1) / 2.0)[inverse]
        pos = y > 0.5
        n_pos, n_neg = int(pos.sum()), int((~pos).sum())
        return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))
    return float(roc_auc_score(y, score))


def held_out_metric(task: str, y, pred) -> float:
    """AUC (binary), accuracy (multiclass) or RMSE (regression) on host copies."""
    y, pred = _host(y).astype(np.float64), _host(pred).astype(np.float64)
    if task == "binary":
        return _auc(y, pred.reshape(len(y)))
    if task == "multiclass":
        return float(np.mean(pred.reshape(len(y), -1).argmax(axis=1) == y))
    return float(np.sqrt(np.mean((pred.reshape(len(y)) - y) ** 2)))


# ---------------------------------------------------------------------------------------
# the device: synchronise, memory figures (no-ops on the CPU)
# ---------------------------------------------------------------------------------------
class Device:
    """What the harness needs of the device: its array module, a synchronise, memory
    figures. On the CPU the figures are None."""

    def __init__(self, name: str):
        self.name = name
        self.cuda = name.startswith("cuda")
        if self.cuda:
            import cupy

            self.cupy = cupy
            self.xp = cupy
            self.pool = cupy.get_default_memory_pool()
            self.pool_peak = 0
        else:
            self.xp = np
            self.pool = None
        self.reset()

    def track_pool(self, on: bool) -> None:
        """Route every CuPy allocation through :meth:`_malloc`, which records the pool's
        high-water mark exactly (use can only peak right after an allocation), or back to
        the pool. Only for a run that is not timed: a Python call per allocation costs
        dgboost about 1-2 us each, a few hundred a lossguide tree, which XGBoost (no CuPy
        allocations) does not pay."""
        if self.cuda:
            self.cupy.cuda.set_allocator(self._malloc if on else self.pool.malloc)

    def _malloc(self, size: int):
        mem = self.pool.malloc(size)
        used = self.pool.used_bytes()
        if used > self.pool_peak:
            self.pool_peak = used
        return mem

    def sync(self) -> None:
        if self.cuda:
            self.cupy.cuda.runtime.deviceSynchronize()

    def _used(self) -> int:
        free, total = self.cupy.cuda.runtime.memGetInfo()
        return int(total - free)

    def reset(self) -> None:
        """Free what can be freed and make the current use the baseline of both figures."""
        gc.collect()
        self.pool_base = self.pool_peak = self.used_base = self.used_peak = self.held_base = self.held_peak = 0
        if self.cuda:
            self.sync()
            self.pool.free_all_blocks()
            self.pool_base = self.pool_peak = self.pool.used_bytes()
            self.held_base = self.held_peak = self.pool.total_bytes()
            self.used_base = self.used_peak = self._used()

    def sample(self) -> None:
        """Record the device memory in use now (cudaMemGetInfo: every allocator)."""
        if self.cuda:
            self.used_peak = max(self.used_peak, self._used())
            self.held_peak = max(self.held_peak, self.pool.total_bytes())

    def peaks(self) -> tuple[int | None, int | None]:
        """(memGetInfo peak, CuPy pool peak), in bytes above the baselines."""
        if not self.cuda:
            return None, None
        return self.used_peak - self.used_base, self.pool_peak - self.pool_base

    def pool_held(self) -> int | None:
        """The most bytes CuPy's pool held from the driver at a sample, above the baseline
        (in use or cached: what of ``cudaMemGetInfo``'s figure the pool accounts for)."""
        return self.held_peak - self.held_base if self.cuda else None

    def hardware(self) -> dict:
        if not self.cuda:
            return {"device": "cpu", "name": machine().get("cpu_model", "?")}
        rt = self.cupy.cuda.runtime
        props = rt.getDeviceProperties(0)
        name = props["name"]
        return {
            "device": self.name,
            "name": name.decode() if isinstance(name, bytes) else str(name),
            "total_memory_bytes": int(props["totalGlobalMem"]),
            "multiprocessors": int(props["multiProcessorCount"]),
            "compute_capability": f"{props['major']}.{props['minor']}",
        }

    def versions(self) -> dict:
        out = versions("dgboost", "xgboost", "numpy", "cupy")
        if self.cuda:
            rt = self.cupy.cuda.runtime

            def dotted(v: int) -> str:
                return f"{v // 1000}.{v % 1000 // 10}"

            out["cuda_runtime"] = dotted(rt.runtimeGetVersion())
            out["cuda_driver"] = dotted(rt.driverGetVersion())
        return out


def _round_clock(base, device: Device):
    """A training callback (of either library) that stamps the end of every round after a
    device synchronise, and samples the device memory there."""

    class RoundClock(base):
        def __init__(self):
            super().__init__()
            self.stamps = []

        def before_training(self, model):
            device.sync()
            self.stamps.append(time.perf_counter())
            return model

        def after_iteration(self, model, epoch, evals_log):
            device.sync()
            self.stamps.append(time.perf_counter())
            device.sample()
            return False

        def per_round(self, skip: int) -> float:
            """Median seconds per round, leaving out the first ``skip`` rounds (warm-up)."""
            rounds = np.diff(self.stamps)
            return float(np.median(rounds[skip:] if rounds.size > skip else rounds))

    return RoundClock()


def _host_speed(device: Device) -> dict:
    """How fast the host is just before a run: a fixed pure-Python loop, and (on a GPU) the
    time of 2,000 tiny kernel launches. A round that is bound by the host's launches slows
    with both, so these tell a slow spell of the machine from a slow library."""
    t0 = time.perf_counter()
    total = 0
    for i in range(300_000):
        total += i
    out = {"python_loop_s": time.perf_counter() - t0}
    if device.cuda:
        import cupy

        x = cupy.zeros(1, dtype=cupy.float32)
        device.sync()
        t0 = time.perf_counter()
        for _ in range(2000):
            x += 1
        device.sync()
        out["launch_us"] = (time.perf_counter() - t0) / 2000 * 1e6
    return out


def _host_read_probe():
    """dgboost's ``count_host_reads`` context manager, if this dgboost has it."""
    try:
        return importlib.import_module("dgboost.testing.cuda_probes").count_host_reads
    except Exception:  # noqa: BLE001 - no CUDA backend: no counter
        return None


# ---------------------------------------------------------------------------------------
# one library, one run
# ---------------------------------------------------------------------------------------
def shared_params(case: Case, device: str) -> dict:
    """The parameters of ``case`` that both libraries take on ``device`` ("cuda" or "cpu"):
    what every benchmark of these sets trains with."""
    p = {"objective": OBJECTIVE[case.task], "eta": 0.1, "max_bin": 256, "seed": 0, "device": device, **case.params}
    if case.task == "multiclass":
        p["num_class"] = case.n_classes
    return p


def _params(lib: str, case: Case, device: Device, args) -> dict:
    """The parameters of ``lib`` for ``case``: :func:`shared_params`, plus XGBoost's
    ``tree_method`` and, for dgboost, ``--dgboost-params``."""
    p = shared_params(case, device.name)
    if not device.cuda:
        p["nthread"] = args.threads
    if lib == "xgboost":
        p["tree_method"] = "hist"
    else:
        p.update(args.dgboost_params)
    return p


def run_once(lib: str, case: Case, data, rounds: int, device: Device, args, track_pool: bool = False) -> dict:
    """Train ``lib`` once on ``data``; whole-run and per-round time, metric, memory (the
    CuPy pool's high-water mark only with ``track_pool``, which slows dgboost's run)."""
    Xtr, ytr, Xte, yte = data
    params = _params(lib, case, device, args)
    device.reset()
    device.track_pool(track_pool)
    recorder = None
    if lib == "dgboost" and getattr(args, "trace_pool", False) and device.cuda and not track_pool:
        from memory_trace_gpu import PoolRecorder

        recorder = PoolRecorder(device.cupy)
        device.cupy.cuda.set_allocator(recorder)
    probe = _host_read_probe() if lib == "dgboost" else None
    counted = None
    speed = _host_speed(device)
    usage0 = resource.getrusage(resource.RUSAGE_SELF)
    if lib == "dgboost":
        import dgboost as dg

        clock = _round_clock(dg.TrainingCallback, device)
        start = time.perf_counter()
        with probe() if probe is not None else contextlib.nullcontext() as counted:
            dtrain = dg.DMatrix(Xtr, ytr)
            booster = dg.train(params, dtrain, rounds, verbose_eval=False, callbacks=[clock])
    else:
        import xgboost as xgb

        clock = _round_clock(xgb.callback.TrainingCallback, device)
        start = time.perf_counter()
        dtrain = xgb.QuantileDMatrix(Xtr, ytr, max_bin=256, nthread=args.threads or None)
        booster = xgb.train(params, dtrain, rounds, callbacks=[clock])
    device.sync()
    total = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_SELF)
    device.sample()
    device.track_pool(False)
    if recorder is not None:
        print("  allocations that made CuPy's pool ask the driver for more (size, held, in use, MiB):")
        for size, held, used, where in recorder.growths:
            held, used = (held - device.held_base) / MiB, (used - device.pool_base) / MiB
            print(f"    {size / MiB:8.1f} {held:8.1f} {used:8.1f}  {where}")
    mem_used, mem_pool = device.peaks()
    out = {
        "total_s": total,
        "per_round_s": clock.per_round(args.warm_rounds),
        # the process's minor page faults and involuntary context switches during the run:
        # a first run that touches fresh host memory, or a host core taken away, shows here
        "minor_page_faults": usage.ru_minflt - usage0.ru_minflt,
        "involuntary_switches": usage.ru_nivcsw - usage0.ru_nivcsw,
        "host_speed_before": speed,
        "peak_memory_bytes": mem_used,
        "cupy_pool_peak_bytes": mem_pool if track_pool else None,
        "cupy_pool_held_bytes": device.pool_held(),
    }
    if counted is not None:
        out["syncs_per_tree"] = counted.syncs / counted.trees if counted.trees else None
    del dtrain
    if lib == "dgboost":
        import dgboost as dg

        pred = booster.predict(dg.DMatrix(Xte))
    else:
        pred = booster.inplace_predict(Xte)
    out["metric"] = held_out_metric(case.task, yte, pred)
    del booster, pred
    device.reset()
    return out


def _spread(values: list) -> dict | None:
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {
        "median": float(np.median(values)),
        "min": float(np.min(values)),
        "max": float(np.max(values)),
        "runs": [float(v) for v in values],
    }


def run_case(name: str, case: Case, data, args, device: Device) -> dict:
    rounds = max(args.warm_rounds + 3, int(round(case.rounds * args.rounds_scale)))
    runs: dict[str, list] = {lib: [] for lib in args.libraries}
    errors: dict[str, str] = {}
    # warm-up on a slice: loads kernels and compiles dgboost's NVRTC modules, so neither
    # library pays one-off costs inside the measured runs
    n_warm = min(20_000, data[0].shape[0])
    warm = (data[0][:n_warm], data[1][:n_warm], data[2], data[3])
    for lib in args.libraries:
        try:
            run_once(lib, case, warm, args.warm_rounds + 1, device, args)
        except Exception as exc:  # noqa: BLE001 - a failing library is reported, the rest goes on
            errors[lib] = f"{type(exc).__name__}: {exc}"
            print(f"  {lib} failed on {name}: {errors[lib]}", flush=True)
    # the libraries take turns, the order flipping every repeat, so that a slower or
    # faster spell of the machine does not land on one of them only
    for rep in range(args.repeats):
        order = list(args.libraries) if rep % 2 == 0 else list(reversed(args.libraries))
        for lib in order:
            if lib in errors:
                continue
            try:
                r = run_once(lib, case, data, rounds, device, args)
            except Exception as exc:  # noqa: BLE001
                errors[lib] = f"{type(exc).__name__}: {exc}"
                print(f"  {lib} failed on {name}: {errors[lib]}", flush=True)
                continue
            runs[lib].append(r)
            mem = "" if r["peak_memory_bytes"] is None else f", peak {r['peak_memory_bytes'] / MiB:.0f} MiB"
            if r.get("cupy_pool_held_bytes") is not None and lib == "dgboost":
                mem += f" (CuPy's pool held {r['cupy_pool_held_bytes'] / MiB:.0f})"
            syncs = "" if r.get("syncs_per_tree") is None else f", {r['syncs_per_tree']:.1f} syncs/tree"
            print(
                f"  [{rep}] {lib:8s} {r['per_round_s'] * 1e3:9.2f} ms/round {r['total_s']:8.2f} s total "
                f"({r['minor_page_faults']} page faults, {r['involuntary_switches']} preemptions, host loop "
                f"{r['host_speed_before']['python_loop_s'] * 1e3:.1f} ms"
                + (
                    f", launch {r['host_speed_before']['launch_us']:.1f} us"
                    if "launch_us" in r["host_speed_before"]
                    else ""
                )
                + "), "
                f"{METRIC[case.task]} {r['metric']:.4f}{mem}{syncs}",
                flush=True,
            )
    pool_peak = None
    if device.cuda and "dgboost" in args.libraries and "dgboost" not in errors:
        # the pool's exact high-water mark, from one more run that is not timed (the same
        # data and parameters, so the same allocations)
        pool_peak = run_once("dgboost", case, data, rounds, device, args, track_pool=True)["cupy_pool_peak_bytes"]
        print(f"  dgboost's CuPy pool peak {pool_peak / MiB:.0f} MiB (a run not timed)", flush=True)
    result = {
        "what": case.what,
        "task": case.task,
        "rows_train": int(data[0].shape[0]),
        "rows_test": int(data[2].shape[0]),
        "features": case.features,
        "missing_rate": case.missing_rate,
        "rounds": rounds,
        "metric_name": METRIC[case.task],
        "params": {lib: _params(lib, case, device, args) for lib in args.libraries},
    }
    for lib in args.libraries:
        rs = runs[lib]
        mem = [r["peak_memory_bytes"] for r in rs]
        pool = [pool_peak] if lib == "dgboost" and pool_peak is not None else []
        result[lib] = {
            "per_round_s": _spread([r["per_round_s"] for r in rs]),
            "minor_page_faults": _spread([r["minor_page_faults"] for r in rs]),
            "involuntary_switches": _spread([r["involuntary_switches"] for r in rs]),
            "total_s": _spread([r["total_s"] for r in rs]),
            "metric": _spread([r["metric"] for r in rs]),
            "peak_memory_bytes": _spread(mem),
            "peak_memory_bytes_max": max((m for m in mem if m is not None), default=None),
            "cupy_pool_peak_bytes": _spread(pool),
            "syncs_per_tree": _spread([r.get("syncs_per_tree") for r in rs]),
            "error": errors.get(lib),
        }
    a, b = result.get("dgboost"), result.get("xgboost")
    if a and b and a["per_round_s"] and b["per_round_s"]:
        result["ratios_dgboost_over_xgboost"] = {
            "per_round": a["per_round_s"]["median"] / b["per_round_s"]["median"],
            "total": a["total_s"]["median"] / b["total_s"]["median"],
            "peak_memory": (
                a["peak_memory_bytes_max"] / b["peak_memory_bytes_max"]
                if a["peak_memory_bytes_max"] and b["peak_memory_bytes_max"]
                else None
            ),
        }
    return result


def metric_over_seeds(name: str, case: Case, n_train: int, n_test: int, args, device: Device) -> dict:
    """The held-out metric of both libraries on ``args.metric_seeds`` more draws of the data
    (seeds ``args.seed + 1 ...``), one run each: how much of a metric gap is the model and how
    much the draw (two equally good learners with different bin cuts differ per draw)."""
    higher_is_better = METRIC[case.task] in ("auc", "accuracy")
    per_lib: dict[str, list] = {lib: [] for lib in args.libraries}
    gaps = []
    rounds = max(args.warm_rounds + 3, int(round(case.rounds * args.rounds_scale)))
    for seed in range(args.seed + 1, args.seed + 1 + args.metric_seeds):
        X, y = case_data(device.xp, case, n_train + n_test, seed)
        data = (X[:n_train], y[:n_train], X[n_train:], y[n_train:])
        got = {lib: run_once(lib, case, data, rounds, device, args)["metric"] for lib in args.libraries}
        del X, y, data
        for lib in args.libraries:
            per_lib[lib].append(got[lib])
        if "dgboost" in got and "xgboost" in got:
            # relative gap, positive when dgboost is worse
            gap = (got["xgboost"] / got["dgboost"] - 1) if higher_is_better else (got["dgboost"] / got["xgboost"] - 1)
            gaps.append(gap)
        print(
            f"  seed {seed}: "
            + ", ".join(f"{lib} {got[lib]:.4f}" for lib in args.libraries)
            + (f" (dgboost worse by {gaps[-1] * 100:+.2f}%)" if gaps else ""),
            flush=True,
        )
    out = {
        "seeds": list(range(args.seed + 1, args.seed + 1 + args.metric_seeds)),
        "rounds": rounds,
        "metric": {lib: per_lib[lib] for lib in args.libraries},
    }
    if gaps:
        out["relative_gap_dgboost_worse"] = {
            "mean": float(np.mean(gaps)),
            "median": float(np.median(gaps)),
            "min": float(np.min(gaps)),
            "max": float(np.max(gaps)),
            "runs": gaps,
        }
        print(
            f"  {name}: dgboost's metric worse by {np.mean(gaps) * 100:+.2f}% on average over "
            f"{len(gaps)} draws (from {min(gaps) * 100:+.2f}% to {max(gaps) * 100:+.2f}%)",
            flush=True,
        )
    return out


# ---------------------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------------------
def _fmt(v, spec: str, scale: float = 1.0) -> str:
    return "-" if v is None else format(v * scale, spec)


def summary_lines(cases: dict) -> list[str]:
    """The closing table: one line per case."""
    head = (
        f"{'case':16s} {'dgb ms/rnd':>10s} {'xgb ms/rnd':>10s} {'ratio':>6s} {'whole':>6s} "
        f"{'metric':>8s} {'dgboost':>8s} {'xgboost':>8s} {'dgb MiB':>8s} {'(pool)':>8s} {'xgb MiB':>8s} "
        f"{'syncs/tree':>10s}"
    )
    lines = [head]
    for name, r in cases.items():
        a, b = r.get("dgboost") or {}, r.get("xgboost") or {}
        ratios = r.get("ratios_dgboost_over_xgboost") or {}

        def med(d, key):
            return (d.get(key) or {}).get("median")

        lines.append(
            f"{name:16s} {_fmt(med(a, 'per_round_s'), '10.2f', 1e3)} {_fmt(med(b, 'per_round_s'), '10.2f', 1e3)} "
            f"{_fmt(ratios.get('per_round'), '6.2f')} {_fmt(ratios.get('total'), '6.2f')} "
            f"{r['metric_name']:>8s} {_fmt(med(a, 'metric'), '8.4f')} {_fmt(med(b, 'metric'), '8.4f')} "
            f"{_fmt(a.get('peak_memory_bytes_max'), '8.0f', 1 / MiB)} "
            f"{_fmt((a.get('cupy_pool_peak_bytes') or {}).get('max'), '8.0f', 1 / MiB)} "
            f"{_fmt(b.get('peak_memory_bytes_max'), '8.0f', 1 / MiB)} "
            f"{_fmt(med(a, 'syncs_per_tree'), '10.1f')}"
        )
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every row count (e.g. 0.05)")
    ap.add_argument("--rounds-scale", type=float, default=1.0, help="multiply every case's rounds")
    ap.add_argument(
        "--cases",
        default=",".join(DEFAULT_CASES),
        help=f"comma-separated, from {','.join(CASES)} (default: all but airline)",
    )
    ap.add_argument("--repeats", type=int, default=3, help="alternating runs of each library")
    ap.add_argument("--warm-rounds", type=int, default=5, help="rounds left out of the per-round median")
    ap.add_argument("--libraries", default=",".join(LIBRARIES), help="comma-separated: dgboost,xgboost")
    ap.add_argument("--device", default="cuda", help="cuda (CuPy data) or cpu (NumPy data: harness check)")
    ap.add_argument("--threads", type=int, default=0, help="nthread on --device cpu (0: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--metric-seeds",
        type=int,
        default=0,
        help="after the timed runs, the held-out metric of both libraries on this many more "
        "draws of each case's data (one run each)",
    )
    ap.add_argument(
        "--dgboost-params",
        type=json.loads,
        default={},
        help="JSON object of dgboost parameters over the shared ones, e.g. '{\"sketch_sample_rows\": 1048576}'",
    )
    ap.add_argument(
        "--trace-pool",
        action="store_true",
        help="route dgboost's timed runs through memory_trace_gpu.py's recorder and list the allocations "
        "that grew CuPy's pool (slows them: for memory, not time)",
    )
    ap.add_argument(
        "--out",
        default=None,
        help="JSON path (default benchmarks/results/train_gpu.json; with --device cpu a file in the temp folder)",
    )
    args = ap.parse_args(argv)
    args.cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    args.libraries = [lib.strip() for lib in args.libraries.split(",") if lib.strip()]
    unknown = [c for c in args.cases if c not in CASES] + [lib for lib in args.libraries if lib not in LIBRARIES]
    if unknown:
        ap.error(f"unknown case(s) or library(ies): {unknown}")
    if args.out is None:
        args.out = (
            RESULTS / "train_gpu.json"
            if args.device.startswith("cuda")
            else Path(tempfile.gettempdir()) / "dgboost_train_gpu_cpu_check.json"
        )

    device = Device(args.device)
    hardware = device.hardware()
    print(
        f"{hardware['name']} ({args.device}); scale {args.scale}, rounds x{args.rounds_scale}, {args.repeats} repeats",
        flush=True,
    )
    results, data, data_key = {}, None, None
    for name in args.cases:
        case = CASES[name]
        n_train = max(1000, int(round(case.rows * args.scale)))
        n_test = max(200, n_train // 9)  # 10% of all rows
        key = case.data_key + (n_train,)
        if key != data_key:  # cases sharing a table (higgs, higgs_lossguide) draw it once
            data = None
            device.reset()
            X, y = case_data(device.xp, case, n_train + n_test, args.seed)
            data, data_key = (X[:n_train], y[:n_train], X[n_train:], y[n_train:]), key
            del X, y
            device.sync()
        print(f"{name}: {n_train:,} x {case.features} ({case.what})", flush=True)
        results[name] = run_case(name, case, data, args, device)
        if args.metric_seeds > 0:
            data, data_key = None, None  # the draws below replace the table on the device
            device.reset()
            results[name]["metric_over_seeds"] = metric_over_seeds(name, case, n_train, n_test, args, device)
    payload = {
        "device": args.device,
        "hardware": hardware,
        "versions": device.versions(),
        "scale": args.scale,
        "rounds_scale": args.rounds_scale,
        "repeats": args.repeats,
        "warm_rounds": args.warm_rounds,
        "seed": args.seed,
        "cases": results,
        "notes": (
            "per_round_s: median over repeats of each run's median round time after warm_rounds; "
            "peak_memory_bytes: cudaMemGetInfo in use above the level before the run, sampled "
            "at every round's end (both libraries); cupy_pool_peak_bytes: exact high-water mark "
            "of CuPy's default pool above its level before the run (dgboost only: XGBoost "
            "allocates outside CuPy); ratios are dgboost / XGBoost (lower is better for time "
            "and memory)"
        ),
        "table": [
            {
                "what": f"training time per round on the GPU, {r['what']} {r['rows_train']:,} x {r['features']}, "
                f"{r['rounds']} rounds (vs XGBoost hist, device=cuda)",
                "ratio": r["ratios_dgboost_over_xgboost"]["per_round"],
                "note": "lower is better",
            }
            for r in results.values()
            if r.get("ratios_dgboost_over_xgboost")
        ]
        if args.device.startswith("cuda")
        else [],
    }
    path = write_result("train_gpu", payload, args.out)
    if _host_read_probe() is None and args.device.startswith("cuda"):
        print("dgboost.testing.cuda_probes not found: host synchronisations per tree not reported")
    print(f"results in {path}")
    print("\n".join(summary_lines(results)))
    failed = [f"{c}/{lib}" for c, r in results.items() for lib in args.libraries if (r.get(lib) or {}).get("error")]
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
