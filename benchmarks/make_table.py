"""Write ``docs/benchmarks.md`` from the JSON results in ``benchmarks/results/``.

    python benchmarks/make_table.py          # prints the page
    python benchmarks/make_table.py --write  # writes docs/benchmarks.md

Every figure on the page comes from a results file and sits next to a link to it; nothing on the
page is typed by hand, so the page is rewritten whenever a benchmark writes new results.
``tests/cpu/test_readme.py`` checks that the committed page is what :func:`render` gives.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

__all__ = ["PAGE", "ROOT", "render", "write"]

ROOT = Path(__file__).resolve().parents[1]
PAGE = Path("docs") / "benchmarks.md"
_RESULTS = Path("benchmarks") / "results"

_INTRO = """# Benchmarks

<!-- Written by benchmarks/make_table.py from benchmarks/results/*.json: do not edit by hand;
     run `python benchmarks/make_table.py --write` after a benchmark writes new results. -->

Each benchmark in `benchmarks/` times dgboost and its reference (XGBoost, xgboost.dask, shap) in
one run, on the same machine, data and parameters, and writes a JSON file to
[`benchmarks/results/`](../benchmarks/results/) with the hardware, versions, times and ratios
(see [design, section 8](design.md#8-benchmarks)). Ratios are what travels between machines;
absolute times do not. How each result came about, and the decisions they led to, is told in
[history.md](history.md); how to run the benchmarks is in [development.md](development.md)."""


def _link(path: Path) -> str:
    """A Markdown link from ``docs/`` to a file of the repository, named by its file name."""
    return f"[{path.name}](../{path.as_posix()})"


def _load(root: Path, name: str) -> dict | None:
    path = root / _RESULTS / name
    return json.loads(path.read_text()) if path.is_file() else None


def _hardware(result: dict) -> str:
    machine = result.get("machine", {})
    gpus = machine.get("gpus")
    if gpus:
        return gpus[0] if len(gpus) == 1 else f"{len(gpus)} x {gpus[0]}"
    return machine.get("cpu_model") or machine.get("platform", "?")


def _mib(v: float | None) -> str:
    return "-" if v is None else f"{v / (1 << 20):,.0f}"


def _summary(root: Path) -> list[str]:
    """One row per entry of every results file's ``table``: the ratio, its note, the file."""
    lines = [
        "## Summary",
        "",
        "| benchmark | measure | dgboost / reference | note | hardware | results |",
        "|---|---|---|---|---|---|",
    ]
    for path in sorted((root / _RESULTS).glob("*.json")):
        r = json.loads(path.read_text())
        for row in r.get("table") or []:
            lines.append(
                f"| {r['benchmark']} | {row['what']} | {row['ratio']:.2f} | {row['note']} "
                f"| {_hardware(r)} | {_link(path.relative_to(root))} |"
            )
    return lines


def _median(d: dict, key: str, scale: float = 1.0, spec: str = ".2f") -> str:
    m = (d.get(key) or {}).get("median")
    return "-" if m is None else format(m * scale, spec)


def _median_range(d: dict, key: str, scale: float = 1.0, spec: str = ".2f") -> str:
    v = d.get(key) or {}
    if v.get("min") is None or v.get("max") is None:
        return _median(d, key, scale, spec)
    return f"{_median(d, key, scale, spec)} ({format(v['min'] * scale, spec)}-{format(v['max'] * scale, spec)})"


def _train_gpu_case(name: str, c: dict) -> str:
    a, b = c.get("dgboost") or {}, c.get("xgboost") or {}
    ratios = c.get("ratios_dgboost_over_xgboost") or {}
    ratio = "-" if ratios.get("per_round") is None else f"{ratios['per_round']:.2f}"
    whole = "-" if ratios.get("total") is None else f"{ratios['total']:.2f}"
    pool = _mib((a.get("cupy_pool_peak_bytes") or {}).get("max"))
    return (
        f"| {name} ({c.get('what', '')}) | {c['rows_train']:,} x {c['features']} | {c['rounds']} "
        f"| {_median_range(a, 'per_round_s', 1e3)} | {_median_range(b, 'per_round_s', 1e3)} | {ratio} | {whole} "
        f"| {c['metric_name']} {_median(a, 'metric', spec='.4f')} / {_median(b, 'metric', spec='.4f')} "
        f"| {_mib(a.get('peak_memory_bytes_max'))} ({pool}) / {_mib(b.get('peak_memory_bytes_max'))} |"
    )


def _train_gpu_draws(name: str, c: dict) -> list[str]:
    """The metric over more draws of the data and the runs pooled over processes, where recorded."""
    lines = []
    gap = (c.get("metric_over_seeds") or {}).get("relative_gap_dgboost_worse")
    if gap:
        lines.append(
            f"- {name}: over {len(gap['runs'])} more draws of the data (one run each), dgboost's "
            f"{c['metric_name']} is {abs(gap['mean']) * 100:.2f}% {'worse' if gap['mean'] > 0 else 'better'} "
            f"than XGBoost's on average (median {gap['median'] * 100:+.2f}%, from {gap['min'] * 100:+.2f}% "
            f"to {gap['max'] * 100:+.2f}%; + is worse): the gap on one draw is mostly the draw."
        )
    pooled = c.get("all_runs_pooled")
    if pooled:
        per_process = [o["ratio_of_medians"] for o in c.get("other_runs", [])]
        per_process.append(c["ratios_dgboost_over_xgboost"]["per_round"])
        lo, hi = pooled["dgboost_min_max_s"]
        xlo, xhi = pooled["xgboost_min_max_s"]
        lines.append(
            f"- {name}: over {pooled['n_runs_each']} runs of each library in {len(per_process)} processes, "
            f"median {pooled['dgboost_median_s'] * 1e3:.2f} ms a round for dgboost ({lo * 1e3:.1f}-{hi * 1e3:.1f}) "
            f"and {pooled['xgboost_median_s'] * 1e3:.2f} for XGBoost ({xlo * 1e3:.1f}-{xhi * 1e3:.1f}): "
            f"{pooled['ratio_of_medians']:.2f}x; per process from {min(per_process):.2f}x to "
            f"{max(per_process):.2f}x."
        )
    return lines


def _train_gpu(root: Path) -> list[str]:
    """Per-case details of ``train_gpu.json`` (written by ``benchmarks/train_gpu.py``)."""
    r = _load(root, "train_gpu.json")
    if r is None:
        return []
    v = r.get("versions", {})
    lines = [
        "",
        "## GPU training, case by case",
        "",
        f"{r.get('hardware', {}).get('name', '?')}, dgboost {v.get('dgboost')} against XGBoost "
        f"{v.get('xgboost')} `hist` ({_link(_RESULTS / 'train_gpu.json')}): median of {r.get('repeats')} "
        "alternating runs with the range; ratios dgboost / XGBoost, lower is better; peak memory is "
        "cudaMemGetInfo above the level before the run, and for dgboost in brackets the high-water mark "
        "of CuPy's pool.",
        "",
        "| case | rows x features | rounds | dgboost ms/round | XGBoost ms/round | ratio | whole-run ratio "
        "| test metric dgboost / XGBoost | peak MiB dgboost / XGBoost |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    cases = r.get("cases", {})
    lines += [_train_gpu_case(name, c) for name, c in cases.items()]
    draws = [line for name, c in cases.items() for line in _train_gpu_draws(name, c)]
    return lines + ([""] + draws if draws else [])


def _scaling(root: Path) -> list[str]:
    """Speed-ups over one worker of every scaling run that recorded them, with its plot if there is one."""
    lines = []
    for path in sorted((root / _RESULTS).glob("*.json")):
        r = json.loads(path.read_text())
        speedups = r.get("speedups")
        if r.get("benchmark") != "scaling" or not speedups:
            continue
        rel = path.relative_to(root)
        lines += [
            "",
            f"### {r.get('dataset', '?')}-like {r['rows']:,} x {r['features']}, {r['rounds']} rounds, "
            f"{r.get('device', '?')} workers",
            "",
            f"{_hardware(r)}; speed-up of each library over its own one-worker time ({_link(rel)}):",
            "",
            "| workers | dgboost training | xgboost.dask training | dgboost SHAP | xgboost.dask SHAP |",
            "|---|---|---|---|---|",
        ]
        for key, s in sorted(speedups.items(), key=lambda kv: int(kv[0].split("_")[0])):
            cells = [
                f"{s[k]:.2f}x" if s.get(k) is not None else "-"
                for k in ("train_dgboost", "train_xgboost", "shap_dgboost", "shap_xgboost")
            ]
            lines.append(f"| {key.split('_')[0]} | " + " | ".join(cells) + " |")
        plot = path.with_suffix(".png")
        if plot.is_file():
            lines += [
                "",
                f"![Training time, SHAP rows/s and speed-up ({path.stem})](../{plot.relative_to(root).as_posix()})",
            ]
    return (["", "## Several workers"] + lines) if lines else []


def _explain_parquet(root: Path) -> list[str]:
    """``dgboost explain --cluster`` from Parquet to Parquet, one row per run of ``explain_parquet.py``."""
    rows = []
    for path in sorted((root / _RESULTS).glob("explain_parquet*.json")):
        r = json.loads(path.read_text())
        for x in r.get("results", []):
            rows.append(
                f"| {x['rows']:,} | {x['files']} | {_hardware(r)} | {x['wall_s']:.1f} | {x['explain_s']:.1f} "
                f"| {x['rows_per_s_explaining']:,.0f} | {x['peak_rss_largest_worker_bytes'] / (1 << 30):.2f} "
                f"| {x['peak_device_mib_largest_worker']:,} | {x['checked_partitions_bitwise_single_process']} "
                f"| {_link(path.relative_to(root))} |"
            )
    if not rows:
        return []
    return [
        "",
        "## Explaining Parquet files on a cluster",
        "",
        "`dgboost explain --cluster local-cuda` (a worker per GPU), a depth-8, 100-round model of 28 features; "
        "peaks are of the largest worker; checked partitions are compared with the single-process explainer:",
        "",
        "| rows | files | hardware | command s | explaining s | rows/s explaining | peak host GiB "
        "| peak device MiB | bitwise | results |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ] + rows


def _round_anatomy(root: Path) -> list[str]:
    """Where a GPU round's time goes (``round_anatomy.py``), at each recorded step."""
    r = _load(root, "round_anatomy.json")
    if r is None:
        return []
    lines = [
        "",
        "## One GPU round, kernel by kernel",
        "",
        f"{r.get('device', '?')}, depth {r.get('max_depth')}, {r.get('features')} features, median of "
        f"{r.get('rounds')} rounds after {r.get('skip')} ({_link(_RESULTS / 'round_anatomy.json')}): the round's "
        "wall time, the sum of its kernels' times, and the time the device sat idle waiting for the host.",
        "",
        "| step | rows | round ms | kernels ms | idle ms |",
        "|---|---|---|---|---|",
    ]
    for step, sizes in r.get("history", {}).items():
        for rows, s in sizes.items():
            lines.append(
                f"| {step} | {int(rows):,} | {s['wall_ms']:.2f} | {s['kernel_sum_ms']:.2f} | {s['gap_ms']:.2f} |"
            )
    return lines


def _other_files(root: Path) -> list[str]:
    """Links to every results file with no table of its own above and to the earlier runs."""
    results = root / _RESULTS
    tabled = {"train_gpu.json", "round_anatomy.json"}
    others = [
        p
        for p in sorted(results.iterdir())
        if p.is_file()
        and p.suffix != ".png"
        and p.name not in tabled
        and not p.name.startswith("explain_parquet")
        and not (p.suffix == ".json" and json.loads(p.read_text()).get("table"))
    ]
    history = sorted(p for p in (results / "history").glob("*") if p.is_file())
    lines = ["", "## Other results and earlier runs", ""]
    lines += [f"- {_link(p.relative_to(root))}" for p in others]
    lines.append(
        f"- earlier runs, cited by [history.md](history.md) ({len(history)} files, logs in "
        f"[history/logs/](../{(_RESULTS / 'history' / 'logs').as_posix()}/)): "
        + ", ".join(_link(p.relative_to(root)) for p in history)
    )
    return lines


def render(root: Path = ROOT) -> str:
    """The text of ``docs/benchmarks.md`` for the results under ``root``.

    Parameters
    ----------
    root : Path
        The repository's root folder (the one holding ``benchmarks/results/``).

    Returns
    -------
    str
        The page, Markdown, ending with a newline.
    """
    parts = [_INTRO, ""] + _summary(root) + _train_gpu(root) + _scaling(root) + _explain_parquet(root)
    parts += _round_anatomy(root) + _other_files(root)
    return "\n".join(parts) + "\n"


def write(root: Path = ROOT) -> Path:
    """Write :func:`render`'s page to ``docs/benchmarks.md`` under ``root``.

    Parameters
    ----------
    root : Path
        The repository's root folder.

    Returns
    -------
    Path
        The file written.
    """
    path = root / PAGE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(root), encoding="utf-8")
    return path


def main() -> int:
    if "--write" in sys.argv:
        print(f"wrote {write()}")
    else:
        sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
