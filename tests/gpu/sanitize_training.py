"""A small GPU training job (depthwise level by level and in whole levels, lossguide, missing
values, sampling, multiclass, monotone constraints) for compute-sanitizer: ``tests/gpu/run_sanitizer.sh`` runs it
under memcheck and racecheck."""

import dgboost
from dgboost.datasets import make_synthetic

for params, task, extra in [
    ({"objective": "binary:logistic", "max_depth": 5, "subsample": 0.8, "colsample_bynode": 0.8}, "binary", {}),
    ({"objective": "binary:logistic", "grow_policy": "lossguide", "max_leaves": 15, "max_depth": 0}, "binary", {}),
    ({"objective": "multi:softprob", "num_class": 3, "max_depth": 4}, "multiclass", {"n_classes": 3}),
    # whole levels with level masks, deep enough for leaves above the last level
    (
        {
            "objective": "reg:squarederror",
            "max_depth": 7,
            "colsample_bytree": 0.8,
            "colsample_bylevel": 0.7,
            "min_child_weight": 30,
        },
        "regression",
        {},
    ),
    # monotone constraints: bounds per node in whole levels and with lossguide (split.cu's child_bounds)
    ({"objective": "reg:squarederror", "max_depth": 6, "monotone_constraints": (1, -1, 0) * 4}, "regression", {}),
    (
        {
            "objective": "binary:logistic",
            "grow_policy": "lossguide",
            "max_leaves": 15,
            "max_depth": 0,
            "monotone_constraints": (1, 0, -1) * 4,
        },
        "binary",
        {},
    ),
]:
    X, y, _ = make_synthetic(3000, 12, task=task, missing_rate=0.2, seed=1, **extra)
    booster = dgboost.train({**params, "device": "cuda", "max_bin": 64}, dgboost.DMatrix(X, y), 4, verbose_eval=False)
    booster.set_param({"device": "cuda"})
    booster.predict(dgboost.DMatrix(X[:500]))
    booster.predict(dgboost.DMatrix(X[:500]), pred_leaf=True)

# the quantile sketch on the device (kernels/sketch.cu): every row, a hashed sample of the
# rows, a column-major matrix, and a training job on device input
import cupy  # noqa: E402

from dgboost.quantile import compute_cuts  # noqa: E402

X, y, _ = make_synthetic(3000, 12, task="binary", missing_rate=0.2, seed=2)
for values, sample_rows in (
    (cupy.asarray(X), 1 << 20),
    (cupy.asarray(X), 1024),
    (cupy.asfortranarray(cupy.asarray(X)), 1024),
):
    compute_cuts(values, None, 64, sample_rows=sample_rows)
dgboost.train(
    {"objective": "binary:logistic", "max_depth": 4, "device": "cuda"},
    dgboost.DMatrix(cupy.asarray(X), y),
    2,
    verbose_eval=False,
)
print("sanitized training finished")
