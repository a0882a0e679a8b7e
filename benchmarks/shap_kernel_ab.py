"""The GPU SHAP kernel of two or more source trees, case by case, in one run (issue 32).

Each case's XGBoost model and rows (``shap_gpu.py``'s cases) are made once; then, in rounds
that alternate the trees, a fresh process per (tree, case) imports dgboost from that tree,
builds the explainer, makes one call (compiling and warming up) and times ``--repeats`` warm
calls. It reports each tree's median warm call, the range over all its calls, the kernel's
registers a thread, and whether its values have the first tree's bits (SHA-256 of the
output): a kernel change that is meant to keep the CPU's bits must give the same digest.

    python benchmarks/shap_kernel_ab.py --trees /tmp/before . --cases c,d,imported,a --rounds 2
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def _child(tree: str, case: str, model_path: str, rows_path: str, repeats: int, interactions: bool) -> None:
    """Time the warm calls of one (tree, case) and print one JSON line."""
    sys.path.insert(0, tree)
    import cupy

    import dgboost as dg
    from dgboost.backend._nvrtc import get_module

    assert Path(dg.__file__).resolve().is_relative_to(Path(tree).resolve()), dg.__file__
    Xd = cupy.asarray(np.load(rows_path))
    explainer = dg.TreeExplainer(model_path, device="cuda")
    out = explainer.contributions(Xd, interactions=interactions)
    cupy.cuda.Device().synchronize()
    seconds = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        explainer.contributions(Xd, interactions=interactions)
        cupy.cuda.Device().synchronize()
        seconds.append(time.perf_counter() - t0)
    module = get_module("treeshap_rows.cu")
    names = (
        [
            "shap_interactions_warp",
            "shap_interactions_warp_nq4",
            "shap_interactions_warp_out",
            "shap_interactions_rows8",
            "shap_interactions_quadrature",
        ]
        if interactions
        else ["shap_rows", "shap_rows_loads8", "shap_rows_tables"]
    )
    registers, local_bytes = {}, {}
    for name in names:
        try:
            function = module.get_function(name)
        except Exception:  # noqa: BLE001 - a tree from before this kernel existed
            continue
        registers[name], local_bytes[name] = function.num_regs, function.local_size_bytes
    digest = hashlib.sha256(cupy.asnumpy(out).tobytes()).hexdigest()
    item = {"seconds": seconds, "registers": registers, "local_bytes": local_bytes}
    print(json.dumps({**item, "sha256": digest}), flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trees", nargs="+", help="source trees (repository roots); the first is the base")
    parser.add_argument("--cases", default="c,d,imported,a")
    parser.add_argument("--train-rows", type=int, default=200_000)
    parser.add_argument(
        "--explain-rows", type=int, default=0, help="rows explained per call (default: the case's, shap_gpu.CASES)"
    )
    parser.add_argument("--repeats", type=int, default=3, help="warm calls timed per process")
    parser.add_argument("--rounds", type=int, default=2, help="processes per (tree, case), alternating trees")
    parser.add_argument("--output", default=None)
    parser.add_argument(
        "--child", nargs=5, metavar=("TREE", "CASE", "MODEL", "ROWS", "INTERACTIONS"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.child:
        tree, case, model, rows, interactions = args.child
        _child(tree, case, model, rows, args.repeats, interactions == "1")
        return
    if not args.trees:
        parser.error("--trees is required")

    sys.path.insert(0, str(HERE.parent))
    sys.path.insert(0, str(HERE))
    from _common import versions, write_result
    from shap_gpu import CASES, make_case

    trees = [str(Path(t).resolve()) for t in args.trees]
    cases = [c for c in args.cases.split(",") if c]
    work = Path(tempfile.mkdtemp(prefix="shap_ab_"))
    files = {}
    for case in cases:
        model, rows, _ = make_case(case, args.train_rows)
        if args.explain_rows:  # the same generator and seed as make_case's rows
            from dgboost.datasets import make_synthetic

            rows, _, _ = make_synthetic(args.explain_rows, rows.shape[1], task="binary", missing_rate=0.1, seed=1)
        files[case] = (work / f"{case}.ubj", work / f"{case}_rows.npy")
        model.save_model(str(files[case][0]))
        np.save(files[case][1], rows)
    runs: dict = {case: {tree: [] for tree in trees} for case in cases}
    for _ in range(args.rounds):
        for case in cases:
            for tree in trees:
                cmd = [
                    sys.executable,
                    str(Path(__file__).resolve()),
                    "--repeats",
                    str(args.repeats),
                    "--child",
                    tree,
                    case,
                ]
                cmd += [str(files[case][0]), str(files[case][1]), "1" if CASES[case][5] else "0"]
                done = subprocess.run(cmd, capture_output=True, text=True)
                if done.returncode != 0:
                    raise SystemExit(f"{tree} {case} failed:\n{done.stderr[-3000:]}")
                runs[case][tree].append(json.loads(done.stdout.strip().splitlines()[-1]))
    results, lines = [], []
    for case in cases:
        base = None
        for tree in trees:
            items = runs[case][tree]
            seconds = [s for item in items for s in item["seconds"]]
            medians = [statistics.median(item["seconds"]) for item in items]
            digests = {item["sha256"] for item in items}
            row = {
                "case": case,
                "tree": tree,
                "warm_call_s": {"median": statistics.median(medians), "min": min(seconds), "max": max(seconds)},
                "process_medians_s": medians,
                "registers": items[0]["registers"],
                "local_bytes": items[0]["local_bytes"],
                "sha256": sorted(digests),
            }
            if base is None:
                base = row
            row["speedup_vs_first"] = base["warm_call_s"]["median"] / row["warm_call_s"]["median"]
            row["same_bits_as_first"] = row["sha256"] == base["sha256"] and len(digests) == 1
            results.append(row)
            lines.append(
                f"{case:16s} {Path(tree).name or tree:14s} {row['warm_call_s']['median']:8.4f} s "
                f"({row['warm_call_s']['min']:.4f}-{row['warm_call_s']['max']:.4f})  x{row['speedup_vs_first']:.3f}  "
                f"regs {row['registers']} local {row['local_bytes']}  same bits: {row['same_bits_as_first']}"
            )
    path = write_result(
        "shap_kernel_ab",
        {
            "versions": versions("cupy", "numpy", "xgboost"),
            "trees": trees,
            "repeats": args.repeats,
            "rounds": args.rounds,
            "explain_rows": args.explain_rows or None,
            "results": results,
        },
        args.output,
    )
    print("\n".join(lines))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
