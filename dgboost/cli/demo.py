"""``dgboost demo --local``: synthetic data trained on in this process, step by step."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import DGBoostValueError
from ._format import say, seconds

__all__ = ["DemoRun", "demo_data", "demo_train", "demo_evaluate", "DEMO_STEPS"]


@dataclass
class DemoRun:
    """Everything one demo run produced; each step reads and extends it, and every
    ``summary`` row ends up in the final table (later steps, e.g. a Dask cluster or SHAP,
    add their own rows)."""

    rows: int
    rounds: int
    device: str
    quiet: bool
    seed: int = 0
    test_fraction: float = 0.2
    missing_rate: float = 0.1
    data: dict = field(default_factory=dict)
    booster: Any = None
    history: dict = field(default_factory=dict)
    summary: list = field(default_factory=list)


def demo_data(run: DemoRun) -> None:
    """Synthetic binary data (10% missing) and a held-out split."""
    from ..datasets import make_synthetic

    X, y, _ = make_synthetic(run.rows, task="binary", missing_rate=run.missing_rate, seed=run.seed)
    n_test = max(1, int(round(run.rows * run.test_fraction)))
    if run.rows - n_test < 1:
        raise DGBoostValueError(f"--rows {run.rows} is too small for a train/test split")
    run.data = {"X_train": X[:-n_test], "y_train": y[:-n_test], "X_test": X[-n_test:], "y_test": y[-n_test:]}
    run.summary += [
        ("rows (train / test)", f"{run.rows - n_test:,} / {n_test:,}"),
        ("features", str(X.shape[1])),
        ("missing values", f"{run.missing_rate:.0%}"),
    ]


def demo_train(run: DemoRun) -> None:
    """Train binary:logistic with the test split as evaluation set (progress: train()'s own)."""
    from ..data import DMatrix
    from ..training import train

    d = run.data
    dtrain = DMatrix(d["X_train"], label=d["y_train"])
    dtest = DMatrix(d["X_test"], label=d["y_test"], ref=dtrain)
    params = {
        "objective": "binary:logistic",
        "eval_metric": ["logloss", "auc"],
        "max_depth": 6,
        "eta": 0.1,
        "device": run.device,
        "seed": run.seed,
    }
    every = max(1, run.rounds // 10)
    say(
        run.quiet,
        f"training {run.rounds} rounds on {dtrain.num_row():,} rows x {dtrain.num_col()} "
        f"features (device {run.device})",
    )
    started = time.perf_counter()
    run.booster = train(
        params,
        dtrain,
        num_boost_round=run.rounds,
        evals=[(dtest, "test")],
        evals_result=run.history,
        verbose_eval=False if run.quiet else every,
    )
    elapsed = time.perf_counter() - started
    run.summary += [
        ("rounds", str(run.booster.num_boosted_rounds())),
        ("device", run.device),
        ("train time", seconds(elapsed)),
    ]


def demo_evaluate(run: DemoRun) -> None:
    """Test-set AUC and logloss of the final model."""
    test = run.history.get("test", {})
    if "auc" in test:
        run.summary.append(("test AUC", f"{test['auc'][-1]:.4f}"))
    if "logloss" in test:
        run.summary.append(("test logloss", f"{test['logloss'][-1]:.4f}"))


DEMO_STEPS: list[Callable[[DemoRun], None]] = [demo_data, demo_train, demo_evaluate]
