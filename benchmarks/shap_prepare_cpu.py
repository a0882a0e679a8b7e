"""SHAP preparation on the host, stage by stage: what ``TreeExplainer`` does before a row.

Issue 32 says end-to-end SHAP of deep and multiclass models is dominated by preparation.
This script builds three models with dgboost itself (CPU, no GPU needed):

* ``depth16``: 100 trees of max_depth 16 on synthetic rows with 20 features;
* ``ubj300``: 300 trees of max_depth 12 on 60 features, saved as UBJSON (XGBoost's format,
  ``Booster.save_raw("ubj")``) and loaded back;
* ``multiclass8``: 8 classes, 40 rounds of depth 8 (320 trees) on 54 features;

and times, median of ``--repeats`` runs each:

* ``load``: ``Booster(model_file=ubj bytes)`` (decode + model build);
* ``to_ensemble``, ``extract_paths``, ``fingerprint`` (the table's SHA-256, which keys the
  process-wide weight-table cache), ``build_tables`` (the Shapley weight tables);
* ``explainer_cold``: ``TreeExplainer(booster)`` plus its weight tables (what the first
  ``shap_values`` call prepares) on a freshly loaded booster, every cache emptied;
* ``explainer_second``: the same for a second explainer of the same booster object;
* ``explainer_from_bytes``: ``TreeExplainer(ubj bytes)`` twice in a row (the second).

    python benchmarks/shap_prepare_cpu.py [--repeats 5] [--label after] [--train-rows 200000]

Results are merged under ``--label`` into benchmarks/results/shap_prepare_cpu.json with the
machine load (``uptime``): the machine this was written on has 2 cores shared with other
agents running tests, so absolute times are noisy; compare labels measured together.
Trained models are kept in ``--cache-dir`` (UBJSON) so that reruns time the same trees.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from benchmarks._common import RESULTS, machine  # noqa: E402

# name: (features, rounds, classes, depth)
CASES = {
    "depth16": (20, 100, 1, 16),
    "ubj300": (60, 300, 1, 12),
    "multiclass8": (54, 40, 8, 8),
}


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def _model_bytes(name: str, train_rows: int, cache_dir: Path) -> bytes:
    """The case's model as UBJSON bytes, trained once and kept in ``cache_dir``."""
    import dgboost

    F, rounds, classes, depth = CASES[name]
    path = cache_dir / f"{name}_{train_rows}.ubj"
    if path.exists():
        return path.read_bytes()
    rng = np.random.default_rng(0)
    X = rng.standard_normal((train_rows, F)).astype(np.float32)
    score = X[:, 0] + 0.5 * X[:, 1] * X[:, 2] - np.abs(X[:, 3 % F]) + 0.1 * rng.standard_normal(train_rows)
    params = {"max_depth": depth, "eta": 0.1, "tree_method": "hist", "device": "cpu", "seed": 0}
    if classes > 1:
        y = np.digitize(score, np.quantile(score, np.linspace(0, 1, classes + 1)[1:-1])).astype(np.float32)
        params.update(objective="multi:softprob", num_class=classes)
    else:
        y = score.astype(np.float32)
        params.update(objective="reg:squarederror")
    t0 = time.perf_counter()
    booster = dgboost.train(params, dgboost.DMatrix(X, y), rounds)
    print(f"  trained {name} in {time.perf_counter() - t0:.1f} s", flush=True)
    raw = bytes(booster.save_raw("ubj"))
    cache_dir.mkdir(parents=True, exist_ok=True)
    path.write_bytes(raw)
    return raw


def _forget_process_tables() -> None:
    """Empty the process-wide weight-table cache (so that a 'cold' run builds them)."""
    from dgboost.explain import treeshap

    treeshap._PROCESS_TABLES.clear()


def _median(fn, repeats: int) -> dict:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return {"median_s": statistics.median(times), "min_s": min(times), "max_s": max(times)}


def run_case(name: str, repeats: int, train_rows: int, cache_dir: Path) -> dict:
    import dgboost
    from dgboost.explain.importers import to_ensemble
    from dgboost.explain.paths import extract_paths
    from dgboost.explain.tables import build_tables

    raw = _model_bytes(name, train_rows, cache_dir)
    booster = dgboost.Booster(model_file=raw)
    ens, _ = to_ensemble(booster)
    table = extract_paths(ens)
    dgboost.TreeExplainer(raw).weight_tables()  # compile / load every Numba function first

    stages = {}
    stages["load"] = _median(lambda: dgboost.Booster(model_file=raw), repeats)
    stages["to_ensemble"] = _median(lambda: to_ensemble(booster), repeats)
    stages["extract_paths"] = _median(lambda: extract_paths(ens), repeats)

    def fingerprint():
        table.__dict__.pop("_fingerprint", None)
        return table.fingerprint

    stages["fingerprint"] = _median(fingerprint, repeats)
    stages["build_tables"] = _median(lambda: build_tables(table), repeats)

    def cold():
        _forget_process_tables()
        b = dgboost.Booster(model_file=raw)
        t0 = time.perf_counter()
        dgboost.TreeExplainer(b).weight_tables()
        return time.perf_counter() - t0

    cold_times = [cold() for _ in range(repeats)]
    stages["explainer_cold"] = {
        "median_s": statistics.median(cold_times),
        "min_s": min(cold_times),
        "max_s": max(cold_times),
    }
    warm_booster = dgboost.Booster(model_file=raw)
    dgboost.TreeExplainer(warm_booster).weight_tables()
    stages["explainer_second"] = _median(lambda: dgboost.TreeExplainer(warm_booster).weight_tables(), repeats)
    dgboost.TreeExplainer(raw).weight_tables()
    stages["explainer_from_bytes"] = _median(lambda: dgboost.TreeExplainer(raw).weight_tables(), repeats)

    F, rounds, classes, depth = CASES[name]
    return {
        "features": F,
        "rounds": rounds,
        "classes": classes,
        "max_depth": depth,
        "train_rows": train_rows,
        "n_trees": int(ens.n_trees),
        "n_nodes": int(ens.n_nodes),
        "n_paths": int(table.n_paths),
        "n_elements": int(table.n_elements),
        "model_bytes": len(raw),
        "stages": stages,
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--label", default="before", help="key of this run in the JSON (e.g. before / after)")
    ap.add_argument("--train-rows", type=int, default=200_000)
    ap.add_argument("--cases", nargs="*", default=list(CASES))
    ap.add_argument("--cache-dir", default=os.path.join("/tmp", "dgboost_shap_prepare_models"))
    ap.add_argument("--out", default=str(RESULTS / "shap_prepare_cpu.json"))
    args = ap.parse_args(argv)

    out = Path(args.out)
    doc = json.loads(out.read_text()) if out.exists() else {}
    doc.setdefault("benchmark", "shap_prepare_cpu")
    doc["machine"] = machine()
    doc["note"] = (
        "2-core machine shared with other agents running tests: times are noisy; "
        "load_before/load_after are `uptime` around each run"
    )
    run = {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "repeats": args.repeats, "load_before": _uptime()}
    cases = {}
    for name in args.cases:
        print(f"{name} ...", flush=True)
        cases[name] = run_case(name, args.repeats, args.train_rows, Path(args.cache_dir))
        for stage, t in cases[name]["stages"].items():
            print(f"  {stage:22s} {t['median_s'] * 1e3:10.1f} ms", flush=True)
    run["load_after"] = _uptime()
    run["cases"] = cases
    doc.setdefault("runs", {})[args.label] = run
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
