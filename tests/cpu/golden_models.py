"""The golden-model configurations: small CPU trainings whose model bytes are kept in
``tests/cpu/data/golden/`` and must not change unless an issue changes the algorithm.

Run ``python tests/cpu/golden_models.py`` to (re)write the files — only when a change of the
algorithm is intended, and say so in the commit.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Callable

import numpy as np

import dgboost as dg
from dgboost.datasets import make_synthetic

GOLDEN_DIR = Path(__file__).parent / "data" / "golden"

_ROWS, _FEATURES = 600, 8


def _data(task: str, missing_rate: float = 0.1, seed: int = 3):
    X, y, group = make_synthetic(_ROWS, _FEATURES, task=task, missing_rate=missing_rate, seed=seed)
    return X, y, group


def _dmatrix(task: str, **kwargs) -> dg.DMatrix:
    X, y, group = _data(task)
    if task == "ranking":
        sizes = np.diff(group) if group is not None and group[0] == 0 else group
        return dg.DMatrix(X, y, group=sizes, **kwargs)
    return dg.DMatrix(X, y, **kwargs)


def _train(task: str, params: dict[str, Any], rounds: int = 6, **dmatrix_kwargs) -> Callable[[], bytes]:
    def run() -> bytes:
        booster = dg.train(
            {"max_depth": 4, "eta": 0.3, **params}, _dmatrix(task, **dmatrix_kwargs), rounds, verbose_eval=False
        )
        return booster.to_json().encode()

    return run


def _weighted() -> bytes:
    X, y, _ = _data("regression")
    w = np.random.default_rng(5).uniform(0.2, 3.0, size=len(y)).astype(np.float32)
    booster = dg.train(
        {"max_depth": 4, "min_child_weight": 2.0, "lambda": 2.0, "alpha": 0.5, "gamma": 0.1},
        dg.DMatrix(X, y, weight=w),
        6,
        verbose_eval=False,
    )
    return booster.to_json().encode()


def _early_stopped() -> bytes:
    X, y, _ = _data("binary")
    dtrain, dvalid = dg.DMatrix(X[:400], y[:400]), dg.DMatrix(X[400:], y[400:])
    booster = dg.train(
        {"objective": "binary:logistic", "max_depth": 5, "eta": 0.5},
        dtrain,
        60,
        evals=[(dvalid, "valid")],
        early_stopping_rounds=3,
        verbose_eval=False,
    )
    return booster.to_json().encode()


def _continued() -> bytes:
    dtrain = _dmatrix("regression")
    params = {"max_depth": 3, "subsample": 0.7, "seed": 4}
    first = dg.train(params, dtrain, 3, verbose_eval=False)
    return dg.train(params, dtrain, 4, xgb_model=first, verbose_eval=False).to_json().encode()


def _checkpoint_resumed() -> bytes:
    dtrain = _dmatrix("binary")
    params = {"objective": "binary:logistic", "max_depth": 4, "colsample_bynode": 0.6, "seed": 2}
    with tempfile.TemporaryDirectory() as d:

        class _Stop(dg.TrainingCallback):
            def after_iteration(self, model, epoch, evals_log):
                return epoch == 4

        dg.train(params, dtrain, 9, checkpoint_dir=d, checkpoint_every=2, callbacks=[_Stop()], verbose_eval=False)
        return (
            dg.train(params, dtrain, 9, checkpoint_dir=d, checkpoint_every=2, resume=True, verbose_eval=False)
            .to_json()
            .encode()
        )


def _updated() -> bytes:
    dtrain = _dmatrix("binary")
    booster = dg.train({"objective": "binary:logistic", "max_depth": 3}, dtrain, 0, verbose_eval=False)
    for i in range(5):
        booster.update(dtrain, i)
    return booster.to_json().encode()


#: name -> a function giving the model's bytes (``Booster.to_json().encode()``)
CONFIGS: dict[str, Callable[[], bytes]] = {
    "squarederror": _train("regression", {}),
    "binary_logistic": _train("binary", {"objective": "binary:logistic"}),
    "multi_softprob": _train("multiclass", {"objective": "multi:softprob", "num_class": 3}),
    "absoluteerror_refit": _train("regression", {"objective": "reg:absoluteerror", "subsample": 0.8}),
    "poisson": _train("binary", {"objective": "count:poisson", "max_delta_step": 0.7}),
    "pseudohuber": _train("regression", {"objective": "reg:pseudohubererror", "huber_slope": 2.0}),
    "quantile": _train("regression", {"objective": "reg:quantileerror", "quantile_alpha": [0.2, 0.8]}),
    "rank_ndcg": _train("ranking", {"objective": "rank:ndcg"}),
    "rank_pairwise": _train("ranking", {"objective": "rank:pairwise"}),
    "lossguide": _train("regression", {"grow_policy": "lossguide", "max_leaves": 11, "max_depth": 0}),
    "depthwise_max_leaves": _train("binary", {"objective": "binary:logistic", "max_leaves": 7}),
    "sampling": _train(
        "binary",
        {
            "objective": "binary:logistic",
            "subsample": 0.6,
            "colsample_bytree": 0.8,
            "colsample_bylevel": 0.8,
            "colsample_bynode": 0.7,
            "seed": 11,
        },
    ),
    "monotone": _train("regression", {"monotone_constraints": "(1,-1,0,0,0,0,0,1)"}),
    "interaction": _train("regression", {"interaction_constraints": [[0, 1], [2, 3, 4]]}),
    "max_bin_16": _train("regression", {"max_bin": 16}),
    "dmatrix_max_bin_40": _train("regression", {}, max_bin=40),
    "weighted_regularised": _weighted,
    "early_stopped": _early_stopped,
    "continued_subsample": _continued,
    "checkpoint_resumed": _checkpoint_resumed,
    "booster_update": _updated,
}


def golden_path(name: str) -> Path:
    return GOLDEN_DIR / f"{name}.json"


if __name__ == "__main__":
    GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
    for name, make in CONFIGS.items():
        golden_path(name).write_bytes(make())
        print(f"wrote {golden_path(name)}")
