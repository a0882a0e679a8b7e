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


def render() -> str:
    head = ["| benchmark | measure | dgboost / reference | note | hardware |", "|---|---|---|---|---|"]
    return "\n".join(head + _rows())


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
