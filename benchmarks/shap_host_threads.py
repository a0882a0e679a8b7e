"""Host preparation of GPU SHAP with 1 to 16 threads: where more threads stop paying (issue 32).

A first GPU explainer of an ``xgboost.Booster`` walks the trees' paths
(:func:`dgboost.explain.paths.extract_paths`, several threads from four on) and hashes the
model's bytes (:func:`dgboost.explain._digest.content_digest`, 1 MiB chunks side by side), both
with :func:`dgboost.explain._digest.host_threads` threads. This times each, with the thread count
forced to 1, 2, 4, 8 and 16, on ``shap_gpu.py``'s models (trained on the GPU, as there), and for
scale the steps that do not use threads: ``save_raw("ubj")``, the import of its bytes and the
table's expected value. Also the hash of the path table's arrays (its content fingerprint, which
a table made from cached model bytes no longer needs). Median of ``--repeats`` after one warm-up.

    python benchmarks/shap_host_threads.py --cases c,imported --output results/shap_host_threads/x.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine, versions, write_result  # noqa: E402

THREADS = (1, 2, 4, 8, 16)


def _timed(fn, repeats: int) -> dict:
    """Milliseconds of ``fn()``: median, min and max of ``repeats`` calls after one warm-up."""
    fn()
    ms = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ms.append(1e3 * (time.perf_counter() - t0))
    return {"median": statistics.median(ms), "min": min(ms), "max": max(ms)}


def run_case(name: str, train_rows: int, repeats: int) -> dict:
    from shap_gpu import make_case

    import dgboost.explain._digest as digest
    import dgboost.explain.paths as paths
    from dgboost.explain.importers import from_xgboost_ubjson

    model, _, _ = make_case(name, train_rows)
    raw = model.save_raw("ubj")
    ensemble, _ = from_xgboost_ubjson(raw, model)
    table = paths.extract_paths(ensemble)

    def expected_value():
        table.__dict__.pop("_expected_value", None)  # the table keeps it: recompute each time
        return table.expected_value()

    ms = {
        "save_raw": _timed(lambda: model.save_raw("ubj"), repeats),
        "import": _timed(lambda: from_xgboost_ubjson(raw, model), repeats),
        "expected_value": _timed(expected_value, repeats),
    }
    real = paths.host_threads, digest.host_threads
    try:
        for threads in THREADS:
            paths.host_threads = digest.host_threads = lambda threads=threads: threads
            ms[f"walk_{threads}"] = _timed(lambda: paths.extract_paths(ensemble), repeats)
            ms[f"model_key_{threads}"] = _timed(lambda: digest.content_digest([("model", raw)]), repeats)
            ms[f"table_print_{threads}"] = _timed(table._content_print, repeats)
    finally:
        paths.host_threads, digest.host_threads = real
    for stage, t in ms.items():
        print(f"{name:>9} {stage:>16}: {t['median']:7.1f} ms ({t['min']:.1f}-{t['max']:.1f})", flush=True)
    return {
        "case": name,
        "paths": table.n_paths,
        "elements": table.n_elements,
        "model_bytes": len(raw),
        "milliseconds": ms,
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default="c,imported", help="comma-separated shap_gpu.py cases")
    parser.add_argument("--train-rows", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--output", default=None)
    args = parser.parse_args(argv)
    results = [run_case(name, args.train_rows, args.repeats) for name in args.cases.split(",")]
    payload = {
        "benchmark": "shap_host_threads",
        "repeats": args.repeats,
        "machine": machine(),
        "versions": versions("dgboost", "xgboost", "numba"),
        "results": results,
    }
    print(f"wrote {write_result('shap_host_threads', payload, args.output)}")


if __name__ == "__main__":
    main()
