"""Regenerate the README's benchmark table from ``benchmarks/results/*.json``.

    python benchmarks/make_table.py          # prints the table
    python benchmarks/make_table.py --write  # replaces the table between the README markers
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
START, END = "<!-- bench:start -->", "<!-- bench:end -->"


def _rows() -> list[str]:
    rows = []
    for path in sorted((ROOT / "benchmarks" / "results").glob("*.json")):
        r = json.loads(path.read_text())
        where = r.get("machine", {}).get("cpu_model") or r.get("machine", {}).get("platform", "?")
        gpus = r.get("machine", {}).get("gpus")
        if gpus:
            where = gpus[0]
        for line in r.get("table", []):
            rows.append(f"| {r['benchmark']} | {line['what']} | {line['ratio']:.2f} | {line['note']} | {where} |")
    return rows


def _mib(v) -> str:
    return "-" if v is None else f"{v / (1 << 20):,.0f}"


def _train_gpu_section() -> list[str]:
    """Per-case details of ``train_gpu.json`` (written by benchmarks/train_gpu.py), if present."""
    path = ROOT / "benchmarks" / "results" / "train_gpu.json"
    if not path.exists():
        return []
    r = json.loads(path.read_text())
    hw = r.get("hardware", {}).get("name", "?")
    v = r.get("versions", {})
    lines = ["", f"GPU training on {hw}, dgboost {v.get('dgboost')} vs XGBoost {v.get('xgboost')} `hist` "
             f"(median of {r.get('repeats')} alternating runs; ratios dgboost / XGBoost, lower is better; "
             f"peak memory: cudaMemGetInfo above the level before the run, and for dgboost in brackets the "
             f"high-water mark of CuPy's pool):", "",
             "| case | rows x features | rounds | dgboost ms/round (min-max) | XGBoost ms/round (min-max) | ratio | whole-run ratio "
             "| test metric dgboost / XGBoost | peak MiB dgboost / XGBoost |",
             "|---|---|---|---|---|---|---|---|---|"]

    def med(d, key, scale=1.0, spec=".2f"):
        m = (d.get(key) or {}).get("median")
        return "-" if m is None else format(m * scale, spec)

    def med_spread(d, key, scale=1.0, spec=".2f"):
        v = d.get(key) or {}
        if v.get("min") is None or v.get("max") is None:
            return med(d, key, scale, spec)
        return f"{med(d, key, scale, spec)} ({format(v['min'] * scale, spec)}-{format(v['max'] * scale, spec)})"

    for name, c in r.get("cases", {}).items():
        a, b = c.get("dgboost") or {}, c.get("xgboost") or {}
        ratios = c.get("ratios_dgboost_over_xgboost") or {}
        ratio = "-" if ratios.get("per_round") is None else f"{ratios['per_round']:.2f}"
        whole = "-" if ratios.get("total") is None else f"{ratios['total']:.2f}"
        lines.append(f"| {name} ({c.get('what', '')}) | {c['rows_train']:,} x {c['features']} | {c['rounds']} "
                     f"| {med_spread(a, 'per_round_s', 1e3)} | {med_spread(b, 'per_round_s', 1e3)} | {ratio} | {whole} "
                     f"| {c['metric_name']} {med(a, 'metric', spec='.4f')} / {med(b, 'metric', spec='.4f')} "
                     f"| {_mib(a.get('peak_memory_bytes_max'))} ({_mib((a.get('cupy_pool_peak_bytes') or {}).get('max'))})"
                     f" / {_mib(b.get('peak_memory_bytes_max'))} |")
    for name, c in r.get("cases", {}).items():
        gap = (c.get("metric_over_seeds") or {}).get("relative_gap_dgboost_worse")
        if gap:
            n = len(gap["runs"])
            lines.append(f"\n{name}: over {n} more draws of the data (one run each), dgboost's {c['metric_name']} is "
                         f"{abs(gap['mean']) * 100:.2f}% {'worse' if gap['mean'] > 0 else 'better'} than XGBoost's on "
                         f"average (median {gap['median'] * 100:+.2f}%, from {gap['min'] * 100:+.2f}% to "
                         f"{gap['max'] * 100:+.2f}%; + is worse): the gap on one draw is mostly the draw.")
        pooled = c.get("all_runs_pooled")
        if pooled:
            lo, hi = pooled["dgboost_min_max_s"]
            lines.append(f"\n{name}: over {pooled['n_runs_each']} runs of each library in {1 + len(c.get('other_runs', []))} "
                         f"processes, median {pooled['dgboost_median_s'] * 1e3:.2f} ms a round for dgboost "
                         f"({lo * 1e3:.1f}-{hi * 1e3:.1f}) and {pooled['xgboost_median_s'] * 1e3:.2f} for XGBoost "
                         f"({pooled['xgboost_min_max_s'][0] * 1e3:.1f}-{pooled['xgboost_min_max_s'][1] * 1e3:.1f}): "
                         f"{pooled['ratio_of_medians']:.2f}x; per process from "
                         f"{min(o['ratio_of_medians'] for o in c['other_runs'] + [{'ratio_of_medians': c['ratios_dgboost_over_xgboost']['per_round']}]):.2f}x to "
                         f"{max(o['ratio_of_medians'] for o in c['other_runs'] + [{'ratio_of_medians': c['ratios_dgboost_over_xgboost']['per_round']}]):.2f}x "
                         "(dgboost's lossguide waits on the host, and its time varies from run to run).")
    return lines


def render() -> str:
    head = ["| benchmark | measure | dgboost / reference | note | hardware |", "|---|---|---|---|---|"]
    return "\n".join(head + _rows() + _train_gpu_section())


def main() -> int:
    table = render()
    if "--write" in sys.argv:
        readme = ROOT / "README.md"
        text = readme.read_text()
        a, b = text.index(START) + len(START), text.index(END)
        readme.write_text(text[:a] + "\n" + table + "\n" + text[b:])
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
