"""Host-side preparation of GPU SHAP for an ``xgboost.Booster`` object, stage by stage, A/B.

``TreeExplainer(booster, device="cuda")`` followed by ``contributions(X)`` prepares on the host
everything but the upload (issue 32): for the first explainer of a Booster *object* (since
issue 32 :mod:`dgboost.explain.prepared` keeps what it prepared for later explainers of the
same trees, as it does for model bytes; ``explainer_init`` empties it) that is, in order,

* ``save_raw``: ``booster.save_raw("ubj")`` (XGBoost serialises the model);
* ``ubjson_loads``: :func:`dgboost._ubjson.loads` of those bytes as the importer decodes them
  (after: the trees as columns, ``columns=("trees",)``; before: a dict a tree);
* ``import_dict``: :func:`dgboost.xgboost_json.import_xgboost_dict` (checks, the ensemble);
* ``to_ensemble``: the importer as the explainer calls it (the three above and the meta);
* ``extract_paths``: the path table (:func:`dgboost.explain.paths.extract_paths`);
* ``expected_value``: the table's expected value (the explainer's bias);
* ``fingerprint``: the table's SHA-256 content key (the key of the device's upload cache; a
  flat SHA-256 before issue 32's hash tree, so the sides' keys are compared only where both
  use the same scheme);
* ``device_host_arrays``: what ``DevicePathTable`` makes on the host before uploading
  (``backend/_cuda_treeshap._host_arrays``: group index, weight-table layout, casts; 1 / z
  too before it was made on the device);
* ``explainer_init``: ``TreeExplainer(booster)`` on the CPU device (import, paths, bias: what
  the GPU explainer's constructor does too), cold: the per-model cache
  (:mod:`dgboost.explain.prepared`) is emptied first;
* ``explainer_again``: a second ``TreeExplainer(booster)`` of the same, unchanged booster (the
  cache kept: since issue 32 a booster's trees are prepared once per process);
* ``gpu_host_total``: ``explainer_init`` + ``fingerprint`` + ``device_host_arrays`` in a row on
  a fresh explainer: the host part of what ``benchmarks/shap_gpu.py`` reports as preparation
  (the upload and the device's weight-table fill, which need a GPU, are not in it).

The two sides of the comparison are two copies of the ``dgboost`` package: ``--base DIR`` (a
directory holding the baseline's ``dgboost/``, e.g. made by ``git archive <commit> dgboost |
tar -x -C DIR``) and this checkout. Each timing process imports one of them, prepares once to
warm up (Numba's cached functions load), then times every stage ``--repeats`` times; the
processes alternate (base, new, base, new, ...) ``--alternations`` times, because the machine
this was written on is a 2-core box shared with test loops (``uptime`` is recorded), and each
stage's numbers are the median, min and max over all runs of a side. Every array the stages
produce (the ensemble, the path table, the expected value, the uploaded host arrays) is
compared between the sides bit for bit; a difference fails the run.

The models are trained with XGBoost (``hist``, CPU: the same tree shapes as on a GPU) on
``make_synthetic(train_rows, 54, task="multiclass", n_classes=8, missing_rate=0.1, seed=0)``,
as ``benchmarks/shap_gpu.py`` cases c (depth 8) and d (depth 16): 100 rounds x 8 classes;
they are kept in ``--cache-dir``.

    python benchmarks/shap_prepare_profile.py --base /tmp/base [--cases c d] [--train-rows 200000] [--clock cpu]

``--host-threads N`` makes both sides walk paths and hash with N threads, as on a host of N
cores (on a smaller machine the threads share its cores).

``--clock cpu`` times the processes' CPU time (all threads summed) instead of elapsed time:
steadier where other processes take the cores, but blind to what threads save in latency
(the fingerprint's hashing and, from 4 cores, the path walks run on several threads).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

# name: (features, rounds, classes, depth), benchmarks/shap_gpu.py's cases
CASES = {"c": (54, 100, 8, 8), "d": (54, 100, 8, 16)}
STAGES = (
    "save_raw",
    "ubjson_loads",
    "import_dict",
    "to_ensemble",
    "extract_paths",
    "expected_value",
    "fingerprint",
    "device_host_arrays",
    "explainer_init",
    "explainer_again",
    "gpu_host_total",
)


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def _model_path(name: str, train_rows: int, cache_dir: Path) -> Path:
    """The case's XGBoost model (UBJSON file), trained once and kept in ``cache_dir``."""
    path = cache_dir / f"{name}_{train_rows}.ubj"
    if path.exists():
        return path
    import xgboost as xgb

    sys.path.insert(0, str(ROOT))
    from dgboost.datasets import make_synthetic

    F, rounds, classes, depth = CASES[name]
    X, y, _ = make_synthetic(train_rows, F, task="multiclass", n_classes=classes, missing_rate=0.1, seed=0)
    params = {
        "objective": "multi:softprob",
        "num_class": classes,
        "max_depth": depth,
        "tree_method": "hist",
        "device": "cpu",
    }
    t0 = time.perf_counter()
    booster = xgb.train(params, xgb.DMatrix(X, y), rounds)
    print(f"  trained {name} in {time.perf_counter() - t0:.1f} s", flush=True)
    cache_dir.mkdir(parents=True, exist_ok=True)
    booster.save_model(str(path))
    return path


# ---------------------------------------------------------------------------------------
# one timing process (``--child``): imports the dgboost found first on sys.path
# ---------------------------------------------------------------------------------------
def _forget(table) -> None:
    """Drop what a path table keeps of itself, so a stage computes it again."""
    for key in ("_fingerprint", "_expected_value", "_weight_tables"):
        table.__dict__.pop(key, None)


def _child(
    model_path: str, repeats: int, dump: str | None, clock: str = "wall", host_threads: int | None = None
) -> dict:
    import xgboost as xgb

    if host_threads is not None and _has_module("dgboost.explain._digest"):
        # as on a host of that many cores: the path walk's and the hashing's threads
        from dgboost.explain import _digest, paths

        paths.host_threads = _digest.host_threads = lambda: host_threads

    import dgboost
    from dgboost import _ubjson
    from dgboost.backend import _cuda_treeshap as gpu
    from dgboost.backend._cuda_shap import GPU_TABLE_BYTES
    from dgboost.explain.importers import to_ensemble
    from dgboost.explain.paths import extract_paths
    from dgboost.xgboost_json import import_xgboost_dict

    booster = xgb.Booster(model_file=model_path)

    from dgboost.explain import prepared

    def explainer():  # a cold one: nothing kept of an earlier explainer of the booster
        prepared._PREPARED.clear()
        return dgboost.TreeExplainer(booster)

    def host_total():
        e = explainer()
        _ = e.table.fingerprint
        return gpu._host_arrays(e.table, GPU_TABLE_BYTES)

    import inspect

    # what the importer decodes: the trees as columns where this dgboost reads them so
    as_columns = {"columns": ("trees",)} if "columns" in inspect.signature(_ubjson.loads).parameters else {}

    def decode(raw):
        return _ubjson.loads(raw, **as_columns)

    host_total()  # warm-up: Numba's cached functions load, NumPy's first calls
    raw = booster.save_raw("ubj")
    decode(raw)  # the first decode compiles or loads the column scanner
    ens, meta = to_ensemble(booster)
    table = extract_paths(ens)

    times: dict[str, list] = {s: [] for s in STAGES}
    now = time.process_time if clock == "cpu" else time.perf_counter

    def timed(stage, fn, before=None):
        for _ in range(repeats):
            arg = before() if before is not None else None
            t0 = now()
            fn() if arg is None else fn(arg)
            times[stage].append(now() - t0)

    timed("save_raw", lambda: booster.save_raw("ubj"))
    timed("ubjson_loads", lambda: decode(raw))
    timed("import_dict", import_xgboost_dict, before=lambda: decode(raw))  # a fresh document each time
    timed("to_ensemble", lambda: to_ensemble(booster))
    timed("extract_paths", lambda: extract_paths(ens))
    timed("expected_value", lambda t: t.expected_value(), before=lambda: (_forget(table), table)[1])
    timed("fingerprint", lambda t: t.fingerprint, before=lambda: (_forget(table), table)[1])
    timed("device_host_arrays", lambda t: gpu._host_arrays(t, GPU_TABLE_BYTES), before=lambda: table)
    timed("explainer_init", explainer)
    explainer()
    timed("explainer_again", lambda: dgboost.TreeExplainer(booster))
    timed("gpu_host_total", host_total)

    if dump:
        host = host_total()
        e = explainer()
        out = {f"ensemble.{k}": v for k, v in ens.arrays.items()}
        out.update({"ensemble.tree_offsets": ens.tree_offsets, "ensemble.tree_group": ens.tree_group})
        out["ensemble.base_margin"] = ens.base_margin
        out["table.expected_value"] = e.table.expected_value()  # first: kept on the table either side
        out.update({f"table.{k}": v for k, v in vars(e.table).items() if isinstance(v, np.ndarray)})
        out["explainer.expected"] = np.atleast_1d(np.asarray(e.expected_value, dtype=np.float64))
        out.update({f"host.{k}": v for k, v in host.arrays.items()})
        for k in ("group_paths", "group_ptr", "too_long", "selected", "selected_offsets"):
            out[f"host_layout.{k}"] = getattr(host, k)
        out["host_layout.total"] = np.asarray(host.total)
        np.savez(dump, **out)
        ubj_arrays = {}
        _collect_ubj(_ubjson.loads(raw), "doc", ubj_arrays)
        np.savez(dump + ".ubj.npz", **ubj_arrays)
    return {
        "times": times,
        "n_trees": int(ens.n_trees),
        "n_nodes": int(ens.n_nodes),
        "n_paths": int(table.n_paths),
        "n_elements": int(table.n_elements),
        "model_bytes": len(raw),
        "fingerprint": table.fingerprint,
        "fingerprint_scheme": "hash tree" if _has_module("dgboost.explain._digest") else "flat sha256",
        "host_threads": _host_threads(),
        "dgboost_file": dgboost.__file__,
    }


def _host_threads() -> int | None:
    """The threads this side's preparation hashes and walks paths with (None: one, before issue 32)."""
    if not _has_module("dgboost.explain._digest"):
        return None
    from dgboost.explain._digest import host_threads

    return host_threads()


def _has_module(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def _collect_ubj(node, where: str, out: dict) -> None:
    """Every array of a decoded UBJSON document (typed arrays, and lists of numbers) by path."""
    if isinstance(node, dict):
        for k, v in node.items():
            _collect_ubj(v, f"{where}.{k}", out)
    elif isinstance(node, list):
        if node and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in node):
            out[where] = np.asarray(node)
        else:
            for i, v in enumerate(node):
                _collect_ubj(v, f"{where}[{i}]", out)
    elif isinstance(node, np.ndarray):
        out[where] = node
    else:
        out[where] = np.asarray(repr(node))


# ---------------------------------------------------------------------------------------
# the driver
# ---------------------------------------------------------------------------------------
def _run_child(
    pkg_root: str, model: Path, repeats: int, dump: str | None, clock: str = "wall", host_threads: int | None = None
) -> dict:
    cmd = [sys.executable, __file__, "--child", str(model), "--repeats", str(repeats), "--pkg-root", pkg_root]
    cmd += ["--clock", clock]
    if host_threads is not None:
        cmd += ["--host-threads", str(host_threads)]
    if dump:
        cmd += ["--dump", dump]
    env = dict(os.environ, PYTHONPATH=pkg_root)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"timing process failed ({pkg_root}):\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# host arrays that a later dgboost makes on the device instead (not a difference)
_MOVED_TO_DEVICE = {"host.zero_fraction_inv"}


def _compare(a_path: str, b_path: str) -> list[str]:
    """Names of the arrays that differ (dtype, shape or any bit) between two dumps."""
    a, b = np.load(a_path), np.load(b_path)
    bad = sorted((set(a.files) ^ set(b.files)) - _MOVED_TO_DEVICE)
    for k in sorted(set(a.files) & set(b.files)):
        x, y = a[k], b[k]
        if x.dtype != y.dtype or x.shape != y.shape or x.tobytes() != y.tobytes():
            bad.append(k)
    return bad


def _summary(samples: list) -> dict:
    return {
        "median_s": statistics.median(samples),
        "min_s": min(samples),
        "max_s": max(samples),
        "runs": len(samples),
    }


def run_case(name: str, args, tmp: str) -> dict:
    model = _model_path(name, args.train_rows, Path(args.cache_dir))
    sides = {"before": os.path.abspath(args.base), "after": str(ROOT)}
    samples: dict = {side: {s: [] for s in STAGES} for side in sides}
    info: dict = {}
    prints: dict = {side: set() for side in sides}
    dumps = {side: os.path.join(tmp, f"{name}_{side}.npz") for side in sides}
    for i in range(args.alternations):
        for side, root in sides.items():
            res = _run_child(root, model, args.repeats, dumps[side] if i == 0 else None, args.clock, args.host_threads)
            for s in STAGES:
                samples[side][s].extend(res["times"][s])
            info[side] = {k: v for k, v in res.items() if k != "times"}
            prints[side].add(res["fingerprint"])
    bad = _compare(dumps["before"], dumps["after"]) + _compare(
        dumps["before"] + ".ubj.npz", dumps["after"] + ".ubj.npz"
    )
    same_scheme = info["before"]["fingerprint_scheme"] == info["after"]["fingerprint_scheme"]
    if bad or any(len(p) != 1 for p in prints.values()) or (same_scheme and prints["before"] != prints["after"]):
        raise SystemExit(f"case {name}: outputs differ between before and after: {bad[:20]} {prints}")
    F, rounds, classes, depth = CASES[name]
    stages = {side: {s: _summary(samples[side][s]) for s in STAGES} for side in sides}
    return {
        "features": F,
        "rounds": rounds,
        "classes": classes,
        "max_depth": depth,
        "train_rows": args.train_rows,
        **{k: info["after"][k] for k in ("n_trees", "n_nodes", "n_paths", "n_elements", "model_bytes", "host_threads")},
        "path_table_fingerprint": info["after"]["fingerprint"],
        "path_table_fingerprint_before": info["before"]["fingerprint"],
        "fingerprint_schemes": {side: info[side]["fingerprint_scheme"] for side in sides},
        "outputs_identical": True,
        "stages": stages,
        "speedup": {s: stages["before"][s]["median_s"] / stages["after"][s]["median_s"] for s in STAGES},
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", help="directory holding the baseline's dgboost/ package")
    ap.add_argument("--cases", nargs="*", default=list(CASES))
    ap.add_argument("--train-rows", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=3, help="timed runs of each stage per timing process")
    ap.add_argument("--alternations", type=int, default=3, help="timing processes per side")
    ap.add_argument("--cache-dir", default=os.path.join(tempfile.gettempdir(), "dgboost_shap_prepare_profile"))
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "shap_prepare_profile.json"))
    ap.add_argument("--label", default=None, help="what 'before' and 'after' are, for the JSON")
    ap.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="wall: elapsed time; cpu: the process's CPU time, all threads summed (steadier on a "
        "shared machine, but it counts threads' work, not the latency they save)",
    )
    ap.add_argument(
        "--host-threads",
        type=int,
        default=None,
        help="threads the preparation walks paths and hashes with (default: this host's cores, at most 8)",
    )
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--pkg-root", help=argparse.SUPPRESS)
    ap.add_argument("--dump", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.child:
        sys.path.insert(0, args.pkg_root)
        print(json.dumps(_child(args.child, args.repeats, args.dump, args.clock, args.host_threads)))
        return
    if not args.base:
        ap.error("--base DIR is needed (a copy of the baseline's dgboost/ package lives in DIR)")

    sys.path.insert(0, str(ROOT))
    from benchmarks._common import machine, versions

    doc = {
        "benchmark": "shap_prepare_profile",
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine(),
        "versions": versions("numpy", "numba", "xgboost"),
        "what": "host-side preparation of TreeExplainer(xgboost.Booster, device='cuda'), per stage, "
        "before vs after; seconds (see clock), median over alternations x repeats",
        "label": args.label,
        "repeats": args.repeats,
        "alternations": args.alternations,
        "clock": args.clock,
        "host_threads_override": args.host_threads,
        "load_before": _uptime(),
    }
    cases = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.cases:
            print(f"case {name} ...", flush=True)
            cases[name] = r = run_case(name, args, tmp)
            print(f"  {r['n_trees']} trees, {r['n_paths']:,} paths, {r['n_elements']:,} elements; outputs identical")
            print(f"  {'stage':20s} {'before ms':>10s} {'after ms':>10s} {'speedup':>8s}")
            for s in STAGES:
                b, a = r["stages"]["before"][s]["median_s"], r["stages"]["after"][s]["median_s"]
                print(f"  {s:20s} {b * 1e3:10.1f} {a * 1e3:10.1f} {b / a:8.2f}", flush=True)
    doc["load_after"] = _uptime()
    doc["cases"] = cases
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
