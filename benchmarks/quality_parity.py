"""Training quality vs XGBoost ``hist``: every parity case, written to results/quality_parity.json.

    python benchmarks/quality_parity.py
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import versions, write_result  # noqa: E402


def main() -> int:
    from dgboost.testing.parity import CASES, run_case, within_tolerance

    rows, table = [], []
    print(f"{'data set':30s} {'objective':22s} {'metric':16s} {'depth':>5s} {'dgboost':>9s} {'xgboost':>9s} {'gap':>7s}")
    for depth in (6, 8):
        for dataset, objective, metric in CASES:
            r = run_case(dataset, objective, metric, depth)
            ok = within_tolerance(r)
            rows.append({"dataset": dataset, "objective": objective, "metric": metric, "depth": depth,
                         "dgboost": r.dgboost, "xgboost": r.xgboost, "relative_gap": r.relative_gap,
                         "within_tolerance": ok})
            print(f"{dataset:30s} {objective:22s} {metric:16s} {depth:5d} {r.dgboost:9.5f} {r.xgboost:9.5f} "
                  f"{r.relative_gap:+7.2%} {'' if ok else 'OUT OF TOLERANCE'}")
    worst = max(rows, key=lambda x: x["relative_gap"])
    table.append({"what": f"test metric, {len(rows)} data set/objective/depth cases (worst case: "
                          f"{worst['dataset']} {worst['objective']} depth {worst['depth']})",
                  "ratio": 1.0 + worst["relative_gap"],
                  "note": f"{sum(r['within_tolerance'] for r in rows)}/{len(rows)} within 1% (AUC 0.003)"})
    path = write_result("quality_parity", {"versions": versions("dgboost", "xgboost", "numpy"),
                                           "cases": rows, "table": table})
    print(f"{sum(r['within_tolerance'] for r in rows)}/{len(rows)} cases within tolerance; results in {path}")
    return 0 if all(r["within_tolerance"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
