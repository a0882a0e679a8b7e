"""Importers: tree models dgboost did not train, as an :class:`~dgboost.tree.Ensemble`.

:func:`to_ensemble` turns a model into ``(ensemble, meta)`` so that the TreeSHAP engine
(which knows dgboost's split rules: ``x < split_value`` in float32, NaN follows
``default_left``, and XGBoost's categorical splits, a set of category codes going right)
explains it *exactly*. Supported:

* dgboost: :class:`~dgboost.booster.Booster`, ``DGBRegressor`` / ``DGBClassifier`` /
  ``DGBRanker`` (rounds up to the best iteration when fitted with early stopping, as
  ``predict`` does), a dgboost or XGBoost JSON model file / its text / its parsed dict.
* XGBoost: ``xgboost.Booster``, ``XGBRegressor`` / ``XGBClassifier`` / ``XGBRanker``
  (through :mod:`dgboost.model_io`), categorical splits included (``enable_categorical``:
  the model's feature types and category values come with it, so DataFrame category columns
  are re-coded to its categories); vector-leaf trees raise.
* LightGBM: ``lightgbm.Booster``, ``LGBMRegressor`` / ``LGBMClassifier`` / ``LGBMRanker``,
  a LightGBM text model file, or the dict of ``Booster.dump_model()``. The trees' raw
  score is explained (log-odds for ``binary``, one output per class for ``multiclass``; the
  sum of the trees for ``boosting="rf"``, as LightGBM's ``pred_contrib`` and shap do);
  covers are ``internal_count`` / ``leaf_count`` (what LightGBM's own TreeSHAP and
  ``shap.TreeExplainer`` use). Categorical splits and linear trees raise.
* scikit-learn: ``DecisionTreeRegressor/Classifier``, ``RandomForest*``, ``ExtraTrees*``,
  ``GradientBoostingRegressor/Classifier`` and ``HistGradientBoostingRegressor/Classifier``
  (numerical splits). Covers are ``weighted_n_node_samples`` (``count`` for
  HistGradientBoosting), as in ``shap.TreeExplainer``. Outputs:

  - regressors: the prediction (one output per target for multi-output trees/forests);
  - tree / forest classifiers: the class probabilities (one output per class, also for
    two classes; forests average the trees' leaf class fractions), as ``shap`` does;
  - gradient boosting classifiers: the raw decision function (log-odds; one output per
    class for more than two classes), init estimator included in the base margin.

Exact split conversion
----------------------
scikit-learn trees send ``x <= threshold`` (threshold float64) left after casting ``x`` to
float32. For a float32 ``x`` that is ``x < s`` with ``s`` the float32 right after the
largest float32 not above the threshold, so those thresholds convert exactly.

LightGBM and HistGradientBoosting compare float64 inputs with float64 thresholds (and
LightGBM has its own missing rules: ``missing_type`` ``None`` turns NaN into 0.0,
``Zero`` treats 0 and NaN as missing, ``NaN`` treats NaN as missing). Those models get an
:class:`ThresholdEncoder` in ``meta["input_encoder"]``: it maps every input column to the
rank of the value among that feature's thresholds (a small integer, exact in float32) and
turns "missing by the model's rules" into NaN; split values become ``rank + 0.5``. Every
decision is then exactly the model's own, for float32 and float64 inputs alike. The
explainer applies the encoder for you; users of :func:`to_ensemble` must call
``meta["input_encoder"](X)`` before handing rows to the engine.

Unsupported models or model features raise :class:`UnsupportedModelError` (a
:class:`~dgboost.errors.DGBoostTypeError`) or :class:`~dgboost.errors.ModelFormatError`
naming what is not supported, never wrong numbers.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from .._compat import library_of
from ..errors import DGBoostTypeError, DGBoostValueError, ModelFormatError
from ..model_io import trees_per_round
from ..tree import Ensemble, Tree

__all__ = ["to_ensemble", "from_model_bytes", "UnsupportedModelError", "ThresholdEncoder", "sklearn_split_values"]


class UnsupportedModelError(DGBoostTypeError):
    """A model type, or a feature of a model (categorical splits, linear leaves...), that the
    explainer cannot reproduce exactly."""


_MISSING_NONE, _MISSING_ZERO, _MISSING_NAN = 0, 1, 2
_LGB_ZERO = float(np.float32(1e-35))  # LightGBM's kZeroThreshold (a float)


# ---------------------------------------------------------------------------------------
# exact threshold handling
# ---------------------------------------------------------------------------------------
def sklearn_split_values(threshold) -> np.ndarray:
    """float32 ``s`` with ``x < s  <=>  float64(x) <= threshold`` for every float32 ``x``.

    ``s`` is the float32 following the largest float32 not above ``threshold``
    (``+inf`` stays ``+inf``).
    """
    t = np.asarray(threshold, dtype=np.float64)
    with np.errstate(over="ignore"):
        f = t.astype(np.float32)
        above = f.astype(np.float64) > t  # rounded up (or overflowed to +inf): step back down
        f = np.where(above, np.nextafter(f, np.float32(-np.inf)), f)
        return np.nextafter(f, np.float32(np.inf)).astype(np.float32)


@dataclass(eq=False)
class ThresholdEncoder:
    """Maps raw rows to threshold ranks so float64 ``x <= t`` splits become exact float32 splits.

    ``thresholds[f]``: sorted unique float64 thresholds of feature ``f`` (empty when unused);
    ``missing_type[f]``: 0 (None: NaN -> 0.0), 1 (Zero: 0 and NaN are missing), 2 (NaN:
    NaN is missing). A value ``x`` becomes ``#(thresholds < x)`` (so ``x <= thresholds[j]``
    iff the code is ``< j + 0.5``), missing values become NaN.
    """

    thresholds: list
    missing_type: np.ndarray

    @property
    def n_features(self) -> int:
        return len(self.thresholds)

    def __call__(self, X) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise DGBoostValueError(f"X must be 2-dimensional, got shape {X.shape}")
        if X.shape[1] < self.n_features:
            raise DGBoostValueError(f"X has {X.shape[1]} columns, the model has {self.n_features} features")
        out = np.zeros(X.shape, dtype=np.float32)
        for f in range(self.n_features):
            col = X[:, f]
            mt = int(self.missing_type[f])
            nan = np.isnan(col)
            if mt == _MISSING_NONE:
                col = np.where(nan, 0.0, col)
                miss = None
            elif mt == _MISSING_ZERO:
                col = np.where(nan, 0.0, col)
                miss = (col >= -_LGB_ZERO) & (col <= _LGB_ZERO)
            else:
                miss = nan
            code = np.searchsorted(self.thresholds[f], col, side="left").astype(np.float32)
            if miss is not None:
                code[miss] = np.nan
            out[:, f] = code
        return out


def _encode_splits(trees: list[dict], n_features: int) -> ThresholdEncoder:
    """Replace each tree's float64 ``threshold`` by rank + 0.5 (in ``split_value``)."""
    per_feature: list[list[np.ndarray]] = [[] for _ in range(n_features)]
    mtypes = np.full(n_features, -1, dtype=np.int64)
    for t in trees:
        inner = t["left"] >= 0
        for f in np.unique(t["feature"][inner]):
            sel = inner & (t["feature"] == f)
            per_feature[f].append(t["threshold"][sel])
            kinds = np.unique(t["missing_type"][sel])
            for k in kinds:
                if mtypes[f] not in (-1, k):
                    raise UnsupportedModelError(
                        f"feature {f} is split with different missing-value rules in different "
                        "nodes; this model cannot be explained exactly"
                    )
                mtypes[f] = k
    thresholds = [np.unique(np.concatenate(p)) if p else np.empty(0) for p in per_feature]
    for t in trees:
        inner = t["left"] >= 0
        sv = np.zeros(t["left"].shape[0], dtype=np.float32)
        for i in np.flatnonzero(inner):
            f = t["feature"][i]
            sv[i] = np.float32(np.searchsorted(thresholds[f], t["threshold"][i]) + 0.5)
        t["split_value"] = sv
    return ThresholdEncoder(
        thresholds=thresholds, missing_type=np.where(mtypes < 0, _MISSING_NAN, mtypes).astype(np.int8)
    )


def _parents(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    parent = np.full(left.shape[0], -1, dtype=np.int32)
    inner = np.flatnonzero(left >= 0)
    parent[left[inner]] = inner
    parent[right[inner]] = inner
    return parent


def _tree(left, right, feature, split_value, default_left, cover, value, gain=None) -> Tree:
    left = np.asarray(left, dtype=np.int32)
    right = np.asarray(right, dtype=np.int32)
    leaf = left < 0
    n = left.shape[0]
    if n == 0:
        raise ModelFormatError("a tree with no nodes")
    inner = ~leaf
    if np.any((left[inner] >= n) | (right[inner] < 0) | (right[inner] >= n)):
        raise ModelFormatError("a tree has child indices out of range")
    return Tree(
        left=left,
        right=np.where(leaf, -1, right),
        parent=_parents(left, right),
        feature=np.where(leaf, -1, feature),
        split_value=np.where(leaf, 0, split_value),
        default_left=np.where(leaf, 0, default_left),
        gain=np.zeros(n) if gain is None else gain,
        cover=cover,
        value=value,
    )


def _tree_range(n_trees: int, rounds, per_round: int) -> tuple[int, int]:
    """Trees ``[t0, t1)`` of boosting rounds ``rounds`` (None or (0, 0): all of them)."""
    if rounds is None or tuple(rounds) == (0, 0):
        return 0, n_trees
    begin, end = int(rounds[0]), int(rounds[1])
    return min(begin * per_round, n_trees), min(end * per_round, n_trees)


def _slice(ensemble: Ensemble, t0: int, t1: int) -> Ensemble:
    return ensemble if (t0, t1) == (0, ensemble.n_trees) else ensemble.slice(t0, t1)


def _meta(
    source: str,
    model,
    ensemble: Ensemble,
    *,
    objective=None,
    output="margin",
    num_feature=0,
    feature_names=None,
    output_names=None,
    encoder=None,
    extra=None,
) -> dict:
    meta = dict(extra or {})
    meta.update(
        {
            "source": source,
            "model_type": f"{type(model).__module__}.{type(model).__name__}",
            "objective": objective,
            "output": output,
            "num_feature": int(num_feature or 0),
            "feature_names": None if feature_names is None else [str(n) for n in feature_names],
            "output_names": None if output_names is None else list(output_names),
            "input_encoder": encoder,
            "n_outputs": ensemble.n_groups,
        }
    )
    return meta


# ---------------------------------------------------------------------------------------
# dgboost and XGBoost
# ---------------------------------------------------------------------------------------
def _from_dgboost_booster(booster, model=None, rounds=None) -> tuple[Ensemble, dict]:
    per = trees_per_round(booster.meta, booster.ensemble.n_groups)
    t0, t1 = _tree_range(booster.ensemble.n_trees, rounds, per)
    ens = _slice(booster.ensemble, t0, t1)
    m = booster.meta
    return ens, _meta(
        "dgboost",
        model if model is not None else booster,
        ens,
        objective=m.get("objective"),
        num_feature=booster.num_features(),
        feature_names=m.get("feature_names"),
        output_names=getattr(model, "classes_", None) if ens.n_groups > 1 else None,
        extra={"booster_meta": m, "booster": booster, "tree_range": (t0, t1)},
    )


def _from_model_io(ensemble: Ensemble, meta: dict, model, source: str, rounds=None) -> tuple[Ensemble, dict]:
    per = trees_per_round(meta, ensemble.n_groups)
    ens = _slice(ensemble, *_tree_range(ensemble.n_trees, rounds, per))
    names = getattr(model, "classes_", None) if ens.n_groups > 1 else None
    return ens, _meta(
        source,
        model,
        ens,
        objective=meta.get("objective"),
        num_feature=meta.get("num_feature"),
        feature_names=meta.get("feature_names"),
        output_names=names,
        extra={"booster_meta": meta},
    )


def _from_xgboost(model) -> tuple[Ensemble, dict]:
    from ..model_io import import_xgboost_booster

    rounds = None
    booster = model
    if hasattr(model, "get_booster"):
        booster = model.get_booster()
        try:  # what XGBModel.predict uses (best iteration after early stopping)
            rounds = model._get_iteration_range(None)
        except Exception:  # noqa: BLE001 - older/newer wrappers: all rounds
            rounds = None
    ens, meta = import_xgboost_booster(booster)
    return _from_model_io(ens, meta, model, "xgboost", rounds)


def from_xgboost_ubjson(raw: bytes | bytearray | memoryview, booster: Any) -> tuple[Ensemble, dict]:
    """:func:`to_ensemble` of the ``xgboost.Booster`` ``booster`` from its
    ``save_raw("ubj")`` bytes ``raw`` (what :func:`to_ensemble` reads of it: the same result)."""
    from ..xgboost_json import import_xgboost_ubjson

    ens, meta = import_xgboost_ubjson(raw)
    return _from_model_io(ens, meta, booster, "xgboost")


def _from_json_text(text: str | bytes, model) -> tuple[Ensemble, dict]:
    from ..model_io import parse_model_bytes

    # the loader's parser (JSON text, or a model file's bytes in JSON or UBJSON): deep nesting is an error too
    d = parse_model_bytes(text, "the model text")
    if not isinstance(d, dict):
        raise ModelFormatError("the model JSON is not an object")
    return _from_dict(d, model)


def from_model_bytes(raw: bytes, model: Any = None) -> tuple[Ensemble, dict]:
    """:func:`to_ensemble` of a dgboost / XGBoost model file's bytes (JSON or UBJSON).

    Parameters
    ----------
    raw : bytes
        The file's bytes.
    model : optional
        What the user passed (the bytes, or the file's path): ``meta["model_type"]`` names
        its type. Default: ``raw``.
    """
    return _from_json_text(raw, raw if model is None else model)


def _from_path(path) -> tuple[Ensemble, dict]:
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise DGBoostValueError(f"model file not found: {path}")
    with open(path, "rb") as fh:
        head = fh.read(64).lstrip()
    if head.startswith(b"{"):
        with open(path, "rb") as fh:  # JSON or UBJSON: the model loader tells them apart
            return _from_json_text(fh.read(), path)
    if head.startswith(b"tree") or b"version=v" in head:
        try:
            import lightgbm
        except ImportError:
            raise UnsupportedModelError(
                f"{path} looks like a LightGBM model; reading it needs lightgbm (pip install lightgbm)"
            ) from None
        return _from_lightgbm(lightgbm.Booster(model_file=path))
    raise ModelFormatError(f"{path} is neither a dgboost/XGBoost JSON model nor a LightGBM text model")


def _from_dict(d: dict, model) -> tuple[Ensemble, dict]:
    if "tree_info" in d and "max_feature_idx" in d:
        return _from_lightgbm_dump(d, model)
    from ..model_io import EXTENSION_KEY, FORMAT_NAME, model_from_parsed_json

    if "learner" in d or d.get("format") == FORMAT_NAME:
        # every model file dgboost writes (XGBoost JSON + extension, or its schema 1) and
        # XGBoost's own: the one reader model_io uses
        source = "dgboost" if d.get("format") == FORMAT_NAME or EXTENSION_KEY in d else "xgboost"
        ens, meta = model_from_parsed_json(d, "the model")
        return _from_model_io(ens, meta, model, source)
    raise ModelFormatError("the dict is not a dgboost/XGBoost JSON model nor a LightGBM dump_model() dict")


# ---------------------------------------------------------------------------------------
# LightGBM
# ---------------------------------------------------------------------------------------
_LGB_MISSING = {"None": _MISSING_NONE, "Zero": _MISSING_ZERO, "NaN": _MISSING_NAN}


def _lgb_tree(info: dict, where: str) -> dict:
    """One LightGBM tree (dump_model dict) as node arrays in DFS pre-order (parents first)."""
    root = info.get("tree_structure")
    if not isinstance(root, dict):
        raise ModelFormatError(f"{where}: no tree_structure")
    if info.get("num_cat", 0):
        raise UnsupportedModelError(
            f"{where}: categorical splits are not supported (train without categorical_feature to explain exactly)"
        )
    nodes: list[dict] = []
    left: list[int] = []
    right: list[int] = []
    stack = [(root, -1, False)]
    while stack:
        node, parent, is_left = stack.pop()
        i = len(nodes)
        nodes.append(node)
        left.append(-1)
        right.append(-1)
        if parent >= 0:
            (left if is_left else right)[parent] = i
        if "split_index" in node:
            stack.append((node["right_child"], i, False))
            stack.append((node["left_child"], i, True))
        elif "leaf_coeff" in node and node.get("leaf_coeff"):
            raise UnsupportedModelError(f"{where}: linear trees (linear_tree=True) are not supported")
    n = len(nodes)
    feature = np.full(n, -1, np.int64)
    threshold = np.zeros(n, np.float64)
    mtype = np.full(n, _MISSING_NAN, np.int64)
    dleft = np.zeros(n, np.uint8)
    cover = np.zeros(n, np.float64)
    value = np.zeros(n, np.float64)
    gain = np.zeros(n, np.float32)
    for i, node in enumerate(nodes):
        if "split_index" in node:
            if node.get("decision_type", "<=") != "<=" or isinstance(node.get("threshold"), str):
                raise UnsupportedModelError(
                    f"{where}: categorical split at node {node['split_index']} is not supported"
                )
            feature[i] = int(node["split_feature"])
            threshold[i] = float(node["threshold"])
            mt = node.get("missing_type", "None")
            if mt not in _LGB_MISSING:
                raise ModelFormatError(f"{where}: unknown missing_type {mt!r}")
            mtype[i] = _LGB_MISSING[mt]
            dleft[i] = 1 if node.get("default_left", False) else 0
            cover[i] = float(node.get("internal_count", 0))
            value[i] = float(node.get("internal_value", 0.0))
            gain[i] = float(node.get("split_gain", 0.0))
        else:
            cover[i] = float(node.get("leaf_count", 0))
            value[i] = float(node["leaf_value"])
    return {
        "left": np.asarray(left, np.int32),
        "right": np.asarray(right, np.int32),
        "feature": feature,
        "threshold": threshold,
        "missing_type": mtype,
        "default_left": dleft,
        "cover": cover,
        "value": value,
        "gain": gain,
    }


def _from_lightgbm_dump(d: dict, model) -> tuple[Ensemble, dict]:
    infos = d.get("tree_info")
    if not isinstance(infos, list):
        raise ModelFormatError("LightGBM dump has no tree_info list")
    per_iter = int(d.get("num_tree_per_iteration", 1) or 1)
    n_features = int(d.get("max_feature_idx", -1)) + 1
    trees = [_lgb_tree(t, f"LightGBM tree {i}") for i, t in enumerate(infos)]
    encoder = _encode_splits(trees, n_features)
    # (boosting="rf" models: like LightGBM's raw_score / pred_contrib and shap, the raw score
    # is the sum of the trees; LightGBM's predict() divides it by the number of iterations)
    ens = Ensemble(per_iter, 0.0)
    for i, t in enumerate(trees):
        ens.append(
            _tree(
                t["left"],
                t["right"],
                t["feature"],
                t["split_value"],
                t["default_left"],
                t["cover"],
                t["value"].astype(np.float32),
                t["gain"],
            ),
            i % per_iter,
        )
    objective = str(d.get("objective", "")).split(" ")[0] or None
    names = getattr(model, "classes_", None) if per_iter > 1 else None
    return ens, _meta(
        "lightgbm",
        model,
        ens,
        objective=objective,
        num_feature=n_features,
        feature_names=d.get("feature_names"),
        output_names=names,
        encoder=encoder,
    )


def _from_lightgbm(model) -> tuple[Ensemble, dict]:
    booster = model
    if hasattr(model, "booster_"):
        try:
            booster = model.booster_
        except Exception as exc:  # noqa: BLE001 - LightGBM raises its own NotFittedError
            raise DGBoostValueError(f"the LightGBM model is not fitted: {exc}") from None
    ens, meta = _from_lightgbm_dump(booster.dump_model(), model)
    return ens, meta


# ---------------------------------------------------------------------------------------
# scikit-learn
# ---------------------------------------------------------------------------------------
def _sk_tree_arrays(tree_):
    left = tree_.children_left.astype(np.int32)
    right = tree_.children_right.astype(np.int32)
    mgl = getattr(tree_, "missing_go_to_left", None)
    dleft = np.ones_like(left, dtype=np.uint8) if mgl is None else np.asarray(mgl, np.uint8)
    return (
        left,
        right,
        tree_.feature.astype(np.int64),
        sklearn_split_values(tree_.threshold),
        dleft,
        tree_.weighted_n_node_samples.astype(np.float64),
    )


def _sk_trees(estimator, values_of, scale: float):
    """``(tree, group)`` pairs, one per output: ``values_of(tree_)`` gives the node values
    as an (n_nodes, n_outputs) float64 matrix."""
    t = estimator.tree_
    left, right, feature, sv, dleft, cover = _sk_tree_arrays(t)
    vals = values_of(t) * scale
    return [
        (_tree(left, right, feature, sv, dleft, cover, vals[:, g].astype(np.float32)), g) for g in range(vals.shape[1])
    ]


def _class_fractions(tree_) -> np.ndarray:
    """Leaf class fractions (what predict_proba returns), (n_nodes, n_classes)."""
    v = tree_.value[:, 0, :].astype(np.float64)
    s = v.sum(axis=1, keepdims=True)
    return np.divide(v, s, out=np.zeros_like(v), where=s > 0)


def _regression_values(tree_) -> np.ndarray:
    return tree_.value[:, :, 0].astype(np.float64)


def _n_features_in(model) -> int:
    return int(getattr(model, "n_features_in_", 0) or 0)


def _from_sklearn_forest(model, estimators, classifier: bool) -> tuple[Ensemble, dict]:
    name = type(model).__name__
    if not estimators:
        raise DGBoostValueError(f"the {name} has no fitted trees")
    n_outputs = int(getattr(model, "n_outputs_", 1))
    scale = 1.0 / len(estimators)
    if classifier:
        if n_outputs != 1:
            raise UnsupportedModelError(f"multi-output {name} models are not supported")
        n_groups = int(np.ravel(model.n_classes_)[0])
        values_of, output, names = _class_fractions, "probability", list(model.classes_)
    else:
        n_groups, values_of, output, names = n_outputs, _regression_values, "raw", None
    ens = Ensemble(n_groups, 0.0)
    for est in estimators:
        ens.extend(_sk_trees(est, values_of, scale))
    return ens, _meta(
        "sklearn",
        model,
        ens,
        objective=getattr(model, "criterion", None),
        output=output,
        num_feature=_n_features_in(model),
        feature_names=getattr(model, "feature_names_in_", None),
        output_names=names,
    )


def _gb_init_margin(model, n_groups: int) -> np.ndarray:
    init = model.init_
    if isinstance(init, str) and init == "zero":
        return np.zeros(n_groups)
    kind = type(init).__name__
    if kind not in ("DummyRegressor", "DummyClassifier"):
        raise UnsupportedModelError(
            f"GradientBoosting with init estimator {kind} is not supported "
            "(only the default DummyRegressor/DummyClassifier or 'zero')"
        )
    X0 = np.zeros((1, max(_n_features_in(model), 1)), dtype=np.float32)
    raw = np.asarray(model._raw_predict_init(X0), dtype=np.float64).reshape(-1)
    if raw.shape[0] != n_groups:
        raise UnsupportedModelError(f"unexpected init margin shape {raw.shape} for {n_groups} outputs")
    return raw


def _from_sklearn_gb(model) -> tuple[Ensemble, dict]:
    est = model.estimators_  # (n_stages, K)
    if est.size == 0:
        raise DGBoostValueError(f"the {type(model).__name__} has no fitted trees")
    K = est.shape[1]
    ens = Ensemble(K, _gb_init_margin(model, K))
    lr = float(model.learning_rate)
    for stage in est:
        for k, tree in enumerate(stage):
            ((t, _),) = _sk_trees(tree, _regression_values, lr)
            ens.append(t, k)
    classifier = hasattr(model, "classes_")
    names = list(model.classes_) if classifier and K > 1 else None
    return ens, _meta(
        "sklearn",
        model,
        ens,
        objective=getattr(model, "loss", None),
        output="margin" if classifier else "raw",
        num_feature=_n_features_in(model),
        feature_names=getattr(model, "feature_names_in_", None),
        output_names=names,
    )


def _from_sklearn_hgb(model) -> tuple[Ensemble, dict]:
    predictors = getattr(model, "_predictors", None)
    if not predictors:
        raise DGBoostValueError(f"the {type(model).__name__} is not fitted")
    K = len(predictors[0])
    base = np.asarray(model._baseline_prediction, dtype=np.float64).reshape(-1)
    if base.shape[0] != K:
        base = np.broadcast_to(base, (K,))
    n_features = _n_features_in(model)
    trees, groups = [], []
    for it in predictors:
        for k, pred in enumerate(it):
            nodes = pred.nodes
            categorical = nodes["is_categorical"] if "is_categorical" in nodes.dtype.names else None
            if categorical is not None and np.any(categorical & ~nodes["is_leaf"].astype(bool)):
                raise UnsupportedModelError("HistGradientBoosting with categorical splits is not supported")
            leaf = nodes["is_leaf"].astype(bool)
            trees.append(
                {
                    "left": np.where(leaf, -1, nodes["left"].astype(np.int64)).astype(np.int32),
                    "right": np.where(leaf, -1, nodes["right"].astype(np.int64)).astype(np.int32),
                    "feature": np.where(leaf, -1, nodes["feature_idx"].astype(np.int64)),
                    "threshold": nodes["num_threshold"].astype(np.float64),
                    "missing_type": np.full(leaf.shape[0], _MISSING_NAN, np.int64),
                    "default_left": nodes["missing_go_to_left"].astype(np.uint8),
                    "cover": nodes["count"].astype(np.float64),
                    "value": nodes["value"].astype(np.float64),
                }
            )
            groups.append(k)
    encoder = _encode_splits(trees, n_features)
    ens = Ensemble(K, base)
    for t, g in zip(trees, groups):
        ens.append(
            _tree(
                t["left"],
                t["right"],
                t["feature"],
                t["split_value"],
                t["default_left"],
                t["cover"],
                t["value"].astype(np.float32),
            ),
            g,
        )
    classifier = hasattr(model, "classes_")
    names = list(model.classes_) if classifier and K > 1 else None
    return ens, _meta(
        "sklearn",
        model,
        ens,
        objective=str(getattr(model, "loss", None)),
        output="margin" if classifier else "raw",
        num_feature=n_features,
        feature_names=getattr(model, "feature_names_in_", None),
        output_names=names,
        encoder=encoder,
    )


def _from_sklearn(model) -> tuple[Ensemble, dict]:
    from sklearn import ensemble as ske
    from sklearn import tree as skt
    from sklearn.utils.validation import check_is_fitted

    name = type(model).__name__
    known = (
        skt.DecisionTreeRegressor,
        skt.DecisionTreeClassifier,
        skt.ExtraTreeRegressor,
        skt.ExtraTreeClassifier,
        ske.RandomForestRegressor,
        ske.RandomForestClassifier,
        ske.ExtraTreesRegressor,
        ske.ExtraTreesClassifier,
        ske.GradientBoostingRegressor,
        ske.GradientBoostingClassifier,
        ske.HistGradientBoostingRegressor,
        ske.HistGradientBoostingClassifier,
    )
    if not isinstance(model, known):
        raise UnsupportedModelError(
            f"scikit-learn model {name} is not supported; supported are decision trees, random "
            "forests, extra trees and (hist) gradient boosting regressors/classifiers"
        )
    try:
        check_is_fitted(model)
    except Exception as exc:  # noqa: BLE001 - NotFittedError
        raise DGBoostValueError(f"the {name} is not fitted: {exc}") from None
    if isinstance(model, (ske.HistGradientBoostingRegressor, ske.HistGradientBoostingClassifier)):
        return _from_sklearn_hgb(model)
    if isinstance(model, (ske.GradientBoostingRegressor, ske.GradientBoostingClassifier)):
        return _from_sklearn_gb(model)
    classifier = isinstance(model, (skt.DecisionTreeClassifier, ske.RandomForestClassifier, ske.ExtraTreesClassifier))
    estimators = list(model.estimators_) if hasattr(model, "estimators_") else [model]
    return _from_sklearn_forest(model, estimators, classifier)


# ---------------------------------------------------------------------------------------
# dispatch
# ---------------------------------------------------------------------------------------
class BoosterLike(Protocol):
    """What the importer reads of a dgboost :class:`~dgboost.booster.Booster`: its trees,
    its meta dict (objective, feature names, ...) and its feature count. The explainer
    recognises a booster by these, so that it never imports the booster module (which
    imports the explainer for ``predict(pred_contribs=True)``)."""

    ensemble: Ensemble
    meta: dict

    def num_features(self) -> int: ...


def _is_dgboost_booster(model) -> bool:
    """Whether ``model`` is a dgboost booster (see :class:`BoosterLike`)."""
    return (
        isinstance(getattr(model, "ensemble", None), Ensemble)
        and isinstance(getattr(model, "meta", None), dict)
        and callable(getattr(model, "num_features", None))
    )


def to_ensemble(model: Any) -> tuple[Ensemble, dict]:
    """``(ensemble, meta)`` for any supported model (see the module docstring).

    ``meta`` keys: ``source`` (dgboost / xgboost / lightgbm / sklearn), ``model_type``,
    ``objective``, ``output`` (what the trees' sum is: ``margin``, ``probability`` or
    ``raw``), ``num_feature`` (0 if unknown), ``feature_names``, ``output_names`` (class
    labels of multi-output classifiers), ``n_outputs`` and ``input_encoder`` (None, or a
    callable that must be applied to raw rows before the engine sees them).

    Raises
    ------
    UnsupportedModelError
        For model types and model features that cannot be explained exactly.
    ModelFormatError
        For model files / dicts that are not valid.
    """
    if isinstance(model, tuple) and len(model) == 2 and isinstance(model[0], Ensemble):
        ens, meta = model
        meta = dict(meta)
        meta.setdefault("source", "dgboost")
        meta.setdefault("input_encoder", None)
        meta.setdefault("output", "margin")
        meta.setdefault("n_outputs", ens.n_groups)
        meta.setdefault("num_feature", 0)
        meta.setdefault("feature_names", None)
        meta.setdefault("output_names", None)
        return ens, meta
    if isinstance(model, Ensemble):
        return _meta_only(model)
    if _is_dgboost_booster(model):
        return _from_dgboost_booster(model)
    if hasattr(model, "get_booster") and library_of(model) == "dgboost":
        booster = model.get_booster()
        rounds = model._iteration_range(None) if hasattr(model, "_iteration_range") else None
        return _from_dgboost_booster(booster, model, rounds)
    if isinstance(model, (str, os.PathLike)):
        return _from_path(model)
    if isinstance(model, (bytes, bytearray)):
        return _from_json_text(bytes(model), model)
    if isinstance(model, dict):
        return _from_dict(model, model)
    root = library_of(model)
    if root == "xgboost":
        if hasattr(model, "save_raw") or hasattr(model, "get_booster"):
            return _from_xgboost(model)
    if root == "lightgbm":
        if hasattr(model, "dump_model") or hasattr(model, "booster_"):
            return _from_lightgbm(model)
    if root == "sklearn":
        return _from_sklearn(model)
    if hasattr(model, "estimators_") or hasattr(model, "tree_"):
        try:
            return _from_sklearn(model)
        except UnsupportedModelError:
            pass
    raise UnsupportedModelError(
        f"cannot explain a {type(model).__module__}.{type(model).__name__}: supported are dgboost "
        "Booster/estimators, xgboost Booster/XGB* estimators, lightgbm Booster/LGBM* estimators, "
        "scikit-learn decision trees, random forests, extra trees and gradient boosting, and "
        "dgboost/XGBoost JSON or LightGBM model files"
    )


def _meta_only(ens: Ensemble) -> tuple[Ensemble, dict]:
    return ens, _meta("dgboost", ens, ens)
