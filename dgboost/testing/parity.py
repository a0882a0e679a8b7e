"""Training-quality parity with XGBoost ``hist``: same data, same parameters, one test metric.

``run_case`` trains dgboost and XGBoost on the same split of a data set and returns both
test metrics, computed here with NumPy/scikit-learn (neither library's own metric code),
so the comparison is independent of either implementation, and how far apart the two
models' test predictions are. ``CONSTRAINED_CASES`` add training constraints on data whose
bins both libraries agree on, so their predictions must agree as well.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "CASES",
    "CONSTRAINED_CASES",
    "OBJECTIVE_PARAMS",
    "PREDICTION_TOLERANCE",
    "ParityResult",
    "load_dataset",
    "predictions_agree",
    "run_case",
    "within_tolerance",
]

# (data set, objective, test metric) for every objective both libraries have
CASES = [
    ("diabetes", "reg:squarederror", "rmse"),
    ("diabetes", "reg:pseudohubererror", "rmse"),
    ("diabetes", "reg:absoluteerror", "mae"),
    ("diabetes", "count:poisson", "poisson_deviance"),
    ("breast_cancer", "binary:logistic", "auc"),
    ("breast_cancer", "binary:logistic", "logloss"),
    ("breast_cancer", "binary:logitraw", "auc"),
    ("breast_cancer", "reg:logistic", "rmse"),
    ("digits", "multi:softprob", "mlogloss"),
    ("digits", "multi:softmax", "merror"),
    ("wine", "multi:softprob", "mlogloss"),
    ("wine", "multi:softmax", "merror"),
    ("synthetic_missing_regression", "reg:squarederror", "rmse"),
    ("synthetic_missing_regression", "reg:absoluteerror", "mae"),
    ("synthetic_missing_regression", "reg:pseudohubererror", "rmse"),
    ("synthetic_missing_binary", "binary:logistic", "auc"),
    ("synthetic_missing_binary", "binary:logistic", "logloss"),
    ("synthetic_missing_multiclass", "multi:softprob", "mlogloss"),
    ("synthetic_missing_counts", "count:poisson", "poisson_deviance"),
    ("synthetic_missing_ranking", "rank:pairwise", "ndcg@10"),
    ("synthetic_missing_ranking", "rank:ndcg", "ndcg@10"),
    ("diabetes", "reg:quantileerror", "pinball"),
    ("synthetic_missing_regression", "reg:quantileerror", "pinball"),
    ("synthetic_missing_survival", "survival:cox", "concordance"),
]

# (data set, objective, test metric, name, training constraints): diabetes has no missing values
# and few enough distinct values that both libraries' bins agree, so the two models' predictions
# are compared too (``predictions_agree``). The monotone signs follow the data's known trends
# (body mass index, blood pressure and s5 raise the disease measure); the interaction groups
# overlap in feature 2.
CONSTRAINED_CASES = [
    ("diabetes", "reg:squarederror", "rmse", "monotone", {"monotone_constraints": (0, 0, 1, 1, 0, 0, 0, 0, 1, 0)}),
    (
        "diabetes",
        "reg:squarederror",
        "rmse",
        "interaction",
        {"interaction_constraints": [[0, 1, 2], [2, 3, 8], [4, 5, 6, 7, 9]]},
    ),
]

#: largest root-mean-square difference of the two models' test predictions, relative to the
#: spread of XGBoost's, for predictions to agree (the same trees give ~1e-7: float32 rounding)
PREDICTION_TOLERANCE = 1e-4

#: parameters an objective needs beyond the common ones
OBJECTIVE_PARAMS = {"reg:quantileerror": {"quantile_alpha": [0.1, 0.5, 0.9]}}

HIGHER_IS_BETTER = {"auc": True, "ndcg@10": True, "concordance": True}


@dataclass
class ParityResult:
    dataset: str
    objective: str
    metric: str
    depth: int
    dgboost: float
    xgboost: float
    prediction_gap: float = float("nan")
    constraints: str | None = None

    @property
    def relative_gap(self) -> float:
        """How much worse dgboost is, relative to XGBoost (negative: dgboost is better)."""
        sign = -1.0 if HIGHER_IS_BETTER.get(self.metric, False) else 1.0
        return sign * (self.dgboost - self.xgboost) / max(abs(self.xgboost), 1e-12)


def predictions_agree(r: ParityResult) -> bool:
    """Whether the two models' test predictions are the same up to float rounding."""
    return r.prediction_gap <= PREDICTION_TOLERANCE


def within_tolerance(r: ParityResult) -> bool:
    """The acceptance rule: AUC within 0.003 absolute, every other metric within 1% relative."""
    if r.metric == "auc":
        return r.xgboost - r.dgboost <= 0.003
    return r.relative_gap <= 0.01


def _synthetic(kind: str, n: int = 20000, f: int = 12, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, f)).astype(np.float32)
    s = x[:, 0] + np.sin(2 * x[:, 1]) + 0.5 * x[:, 2] * x[:, 3] + np.abs(x[:, 4]) - 0.8
    group = None
    if kind == "regression":
        y = s + rng.normal(scale=0.5, size=n)
    elif kind == "binary":
        y = (s + rng.normal(scale=0.7, size=n) > 0).astype(np.float64)
    elif kind == "multiclass":
        y = np.digitize(s + rng.normal(scale=0.5, size=n), [-0.8, 0.3, 1.2]).astype(np.float64)
    elif kind == "counts":
        y = rng.poisson(np.exp(0.5 * s)).astype(np.float64)
    elif kind == "ranking":
        y = np.clip(np.round(s + rng.normal(scale=0.7, size=n) + 1), 0, 4)
        group = np.full(n // 20, 20)
    elif kind == "survival":  # hazard exp(s); independent censoring; times in tenths (ties)
        time = rng.exponential(np.exp(-s))
        censor = rng.exponential(2.0, size=n)
        y = (np.round(np.minimum(time, censor), 1) + 0.1) * np.where(time <= censor, 1.0, -1.0)
    else:
        raise ValueError(kind)
    x[rng.random(x.shape) < 0.2] = np.nan
    return x, y.astype(np.float32), group


def load_dataset(name: str):
    """(X_train, y_train, group_train, X_test, y_test, group_test) with a fixed split."""
    from sklearn import datasets
    from sklearn.model_selection import train_test_split

    if name.startswith("synthetic_missing_"):
        x, y, group = _synthetic(name.removeprefix("synthetic_missing_"))
        if group is not None:  # split by whole queries
            cut = int(0.75 * len(group)) * 20
            return x[:cut], y[:cut], group[: cut // 20], x[cut:], y[cut:], group[cut // 20 :]
    else:
        loader = {
            "diabetes": datasets.load_diabetes,
            "breast_cancer": datasets.load_breast_cancer,
            "digits": datasets.load_digits,
            "wine": datasets.load_wine,
        }[name]
        x, y = loader(return_X_y=True)
        x, y = x.astype(np.float32), y.astype(np.float32)
    stratify = y if name in ("breast_cancer", "digits", "wine") or "binary" in name or "multiclass" in name else None
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.3, random_state=0, stratify=stratify)
    return xtr, ytr, None, xte, yte, None


def _metric(name: str, y: np.ndarray, pred: np.ndarray, group=None) -> float:
    from sklearn import metrics

    y = y.astype(np.float64)
    pred = np.asarray(pred, dtype=np.float64)
    if name == "rmse":
        return float(np.sqrt(np.mean((pred - y) ** 2)))
    if name == "mae":
        return float(np.mean(np.abs(pred - y)))
    if name == "poisson_deviance":
        return float(metrics.mean_poisson_deviance(y, np.maximum(pred, 1e-12)))
    if name == "auc":
        return float(metrics.roc_auc_score(y, pred))
    if name == "logloss":
        p = np.clip(pred, 1e-15, 1 - 1e-15)
        return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))
    if name == "mlogloss":
        p = np.clip(pred[np.arange(len(y)), y.astype(int)], 1e-15, 1.0)
        return float(-np.mean(np.log(p)))
    if name == "merror":
        return float(np.mean(pred != y))
    if name == "pinball":  # the mean over quantile_alpha's quantiles (columns) of the pinball loss
        alpha = np.asarray(OBJECTIVE_PARAMS["reg:quantileerror"]["quantile_alpha"])
        d = y[:, None] - pred
        return float(np.mean(np.maximum(alpha * d, (alpha - 1) * d)))
    if name == "concordance":  # Harrell's C: pred are hazard ratios, y signed survival times
        return _concordance(y, pred)
    if name == "ndcg@10":
        ptr = np.concatenate([[0], np.cumsum(group)])
        scores = []
        for b, e in zip(ptr[:-1], ptr[1:]):
            if e - b > 1:
                scores.append(metrics.ndcg_score(y[None, b:e], pred[None, b:e], k=10))
        return float(np.mean(scores))
    raise ValueError(name)


def _concordance(y: np.ndarray, hazard: np.ndarray, chunk: int = 512) -> float:
    """Harrell's concordance index of survival labels (``|y|`` the time, ``y > 0`` an event).

    Over the pairs of an event ``i`` and a row ``j`` still at risk later (``t_j > t_i``), the
    share where ``i`` has the higher hazard (ties count half). A ranking measure: unlike the
    partial likelihood it does not blow up with the overconfident hazards of deep trees.
    """
    t = np.abs(y)
    events = np.flatnonzero(y > 0)
    concordant = pairs = 0.0
    for start in range(0, len(events), chunk):
        i = events[start : start + chunk]
        later = t[None, :] > t[i, None]
        pairs += later.sum()
        concordant += (later & (hazard[None, :] < hazard[i, None])).sum()
        concordant += 0.5 * (later & (hazard[None, :] == hazard[i, None])).sum()
    return float(concordant / pairs)


def _xgboost_params(params: dict) -> dict:
    """The same parameters as XGBoost's Python API wants them: monotone constraints as the
    text ``"(1,0,-1)"``, interaction constraints (feature indices) as JSON text; a list
    there would be read as feature names."""
    import json

    out = {**params, "tree_method": "hist"}
    if isinstance(out.get("monotone_constraints"), (list, tuple)):
        out["monotone_constraints"] = "(" + ",".join(str(int(v)) for v in out["monotone_constraints"]) + ")"
    if isinstance(out.get("interaction_constraints"), (list, tuple)):
        out["interaction_constraints"] = json.dumps([list(g) for g in out["interaction_constraints"]])
    return out


def _prediction_gap(ours: np.ndarray, theirs: np.ndarray) -> float:
    """Root-mean-square difference of two predictions, relative to the spread of ``theirs``."""
    ours, theirs = np.asarray(ours, np.float64), np.asarray(theirs, np.float64)
    return float(np.sqrt(np.mean((ours - theirs) ** 2)) / max(float(np.std(theirs)), 1e-12))


def run_case(
    dataset: str,
    objective: str,
    metric: str,
    depth: int,
    rounds: int = 100,
    max_bin: int = 256,
    eta: float = 0.1,
    constraints: str | None = None,
    extra: dict | None = None,
) -> ParityResult:
    """Train both libraries on ``dataset`` and compare their test metrics and predictions.

    Parameters
    ----------
    dataset, objective, metric : str
        A case of :data:`CASES` (or the first three fields of :data:`CONSTRAINED_CASES`).
    depth, rounds, max_bin, eta
        Training parameters shared by both libraries.
    constraints : str, optional
        The name of the constraint case (kept in the result).
    extra : dict, optional
        Further training parameters (the constraints), in dgboost's spelling.
    """
    import xgboost as xgb

    import dgboost as dg

    xtr, ytr, gtr, xte, yte, gte = load_dataset(dataset)
    params = {
        "objective": objective,
        "max_depth": depth,
        "eta": eta,
        "max_bin": max_bin,
        "nthread": 2,
        **OBJECTIVE_PARAMS.get(objective, {}),
        **(extra or {}),
    }
    if objective.startswith("multi:"):
        params["num_class"] = int(max(ytr.max(), yte.max())) + 1
    kind = "margin" if objective in ("binary:logitraw", "rank:pairwise", "rank:ndcg") else "value"
    model = dg.train(params, dg.DMatrix(xtr, ytr, group=gtr), rounds, verbose_eval=False)
    p_dg = model.predict(dg.DMatrix(xte), output_margin=kind == "margin")
    xmodel = xgb.train(_xgboost_params(params), xgb.DMatrix(xtr, ytr, group=gtr), rounds)
    p_xgb = xmodel.predict(xgb.DMatrix(xte), output_margin=kind == "margin")
    return ParityResult(
        dataset,
        objective,
        metric,
        depth,
        _metric(metric, yte, p_dg, gte),
        _metric(metric, yte, p_xgb, gte),
        _prediction_gap(p_dg, p_xgb),
        constraints,
    )
