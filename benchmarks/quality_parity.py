"""Training quality vs XGBoost ``hist``: every parity case, written to results/quality_parity.json.

    python benchmarks/quality_parity.py                          # every case, a fresh results file
    python benchmarks/quality_parity.py --only monotone interaction
                                                                 # the named cases, merged into it

A case is named ``dataset/objective/metric`` (``.../constraint`` for the constraint cases);
``--only`` runs the cases whose name contains one of the given words and replaces their rows
(same case and depth) in the existing results file, keeping every other row, and records the
partial run (date, machine, versions, cases) under ``partial_runs``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import RESULTS, machine, versions, write_result  # noqa: E402

DEPTHS = (6, 8)


def _cases() -> list[tuple[str, str, str, str, str | None, dict]]:
    """(name, dataset, objective, metric, constraint name, extra parameters) of every case."""
    from dgboost.testing.parity import CASES, CONSTRAINED_CASES

    out = [(f"{d}/{o}/{m}", d, o, m, None, {}) for d, o, m in CASES]
    out += [(f"{d}/{o}/{m}/{c}", d, o, m, c, extra) for d, o, m, c, extra in CONSTRAINED_CASES]
    return out


def _row(result, ok: bool) -> dict:
    return {
        "dataset": result.dataset,
        "objective": result.objective,
        "metric": result.metric,
        "constraints": result.constraints,
        "depth": result.depth,
        "dgboost": result.dgboost,
        "xgboost": result.xgboost,
        "relative_gap": result.relative_gap,
        "prediction_gap": result.prediction_gap,
        "within_tolerance": ok,
    }


def _key(row: dict) -> tuple:
    return (row["dataset"], row["objective"], row["metric"], row.get("constraints"), row["depth"])


def _run(selected) -> list[dict]:
    from dgboost.testing.parity import predictions_agree, run_case, within_tolerance

    rows = []
    print(f"{'case':48s} {'depth':>5s} {'dgboost':>9s} {'xgboost':>9s} {'gap':>7s} {'pred gap':>9s}")
    for depth in DEPTHS:
        for name, dataset, objective, metric, constraint, extra in selected:
            r = run_case(dataset, objective, metric, depth, constraints=constraint, extra=extra)
            # constraint cases must also predict as XGBoost does (their bins agree)
            ok = within_tolerance(r) and (constraint is None or predictions_agree(r))
            rows.append(_row(r, ok))
            print(
                f"{name:48s} {depth:5d} {r.dgboost:9.5f} {r.xgboost:9.5f} {r.relative_gap:+7.2%} "
                f"{r.prediction_gap:9.2e} {'' if ok else 'OUT OF TOLERANCE'}"
            )
    return rows


def _table(rows: list[dict]) -> list[dict]:
    worst = max(rows, key=lambda x: x["relative_gap"])
    label = f"{worst['dataset']} {worst['objective']}"
    if worst.get("constraints"):
        label += f" {worst['constraints']}"
    return [
        {
            "what": f"test metric, {len(rows)} data set/objective/depth cases (worst case: {label} depth "
            f"{worst['depth']})",
            "ratio": 1.0 + worst["relative_gap"],
            "note": f"{sum(r['within_tolerance'] for r in rows)}/{len(rows)} within 1% (AUC 0.003)",
        }
    ]


def _merge(new_rows: list[dict], names: list[str]) -> Path:
    """Replace the rows of the cases just run in the existing results file; keep the rest."""
    path = RESULTS / "quality_parity.json"
    if not path.exists():
        raise SystemExit(f"{path} does not exist: run every case first (no --only)")
    payload = json.loads(path.read_text())
    fresh = {_key(r): r for r in new_rows}
    rows = [fresh.pop(_key(r), r) for r in payload["cases"]] + list(fresh.values())
    payload["cases"] = rows
    payload["table"] = _table(rows)
    payload.setdefault("partial_runs", []).append(
        {
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "machine": machine(),
            "versions": versions("dgboost", "xgboost", "numpy"),
            "cases": names,
        }
    )
    path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    return path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--only",
        nargs="+",
        metavar="WORD",
        help="run the cases whose name contains one of these words, merged into the results",
    )
    args = parser.parse_args(argv)
    cases = _cases()
    if args.only:
        cases = [c for c in cases if any(word in c[0] for word in args.only)]
        if not cases:
            raise SystemExit(f"no case name contains any of {args.only}; cases: {[c[0] for c in _cases()]}")
    rows = _run(cases)
    if args.only:
        path = _merge(rows, [c[0] for c in cases])
    else:
        path = write_result(
            "quality_parity",
            {"versions": versions("dgboost", "xgboost", "numpy"), "cases": rows, "table": _table(rows)},
        )
    print(f"{sum(r['within_tolerance'] for r in rows)}/{len(rows)} cases within tolerance; results in {path}")
    return 0 if all(r["within_tolerance"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
