"""Plot ``benchmarks/results/scaling_multigpu.json``: training time and speed-up against GPUs.

    python benchmarks/plot_scaling.py [RESULT_JSON] [PNG]

Speed-up is the 1-GPU median over the n-GPU median of the same library, with the ideal line.
SHAP is drawn only where the result says every worker explained rows (``rows_per_worker``);
the 4-H100 run at 597ec77 (``results/history/``) explained rows held by one worker, so its
plot has no SHAP panel.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
LIBS = {"dgboost": "dgboost.dask", "xgboost": "xgboost.dask 3.4.1"}


def _shap_spread(result: dict) -> bool:
    held = (result.get("rows_per_worker") or {}).get("shap") or {}
    return len([v for v in held.values() if v > 0]) == result["workers"]


def plot(payload: dict, path: Path) -> Path:
    results = sorted(payload["results"], key=lambda r: r["workers"])
    gpus = [r["workers"] for r in results]
    panels = [("train_s", "training time (s)", False)]
    if all(_shap_spread(r) for r in results):
        panels.append(("shap_rows_per_s", "SHAP rows/s", True))
    fig, axes = plt.subplots(len(panels), 2, figsize=(10, 3.6 * len(panels)), squeeze=False)
    for row, (key, label, higher_is_better) in enumerate(panels):
        value_ax, speed_ax = axes[row]
        for lib, name in LIBS.items():
            med = [r[key][lib]["median"] for r in results]
            lo = [r[key][lib]["min"] for r in results]
            hi = [r[key][lib]["max"] for r in results]
            value_ax.errorbar(
                gpus,
                med,
                yerr=[[m - a for m, a in zip(med, lo)], [b - m for m, b in zip(med, hi)]],
                marker="o",
                capsize=3,
                label=name,
            )
            base = med[0]
            speed_ax.plot(gpus, [(m / base) if higher_is_better else (base / m) for m in med], marker="o", label=name)
        speed_ax.plot(gpus, [g / gpus[0] for g in gpus], ls="--", color="grey", label="ideal")
        value_ax.set(
            xlabel="GPUs", ylabel=label, xticks=gpus, title=f"{label}: median, min-max of {payload['repeats']}"
        )
        speed_ax.set(xlabel="GPUs", ylabel=f"speed-up over {gpus[0]} GPU", xticks=gpus, title="speed-up")
        for ax in (value_ax, speed_ax):
            ax.grid(alpha=0.3)
            ax.legend()
    gpu = payload["machine"]["gpus"][0]
    fig.suptitle(
        f"{payload['rows']:,} x {payload['features']}, {payload['rounds']} rounds, depth 8, "
        f"from persisted CuPy arrays; {len(payload['machine']['gpus'])}x {gpu}",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    src = Path(argv[0]) if argv else RESULTS / "scaling_multigpu.json"
    dst = Path(argv[1]) if len(argv) > 1 else src.with_suffix(".png")
    print(f"wrote {plot(json.loads(src.read_text()), dst)}")


if __name__ == "__main__":
    main()
