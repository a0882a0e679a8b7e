"""The parts of :class:`~dgboost.Booster` that inspect or step a model as XGBoost's do.

Feature importance (``get_score``), the JSON tree dump, ``trees_to_dataframe``, the
one-round training steps (``update`` / ``boost``), evaluation strings (``eval_set``)
and ``save_config`` / ``load_config``. The Booster methods are thin wrappers around the
functions here; every function takes the booster as its first argument.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

import numpy as np

from .errors import DGBoostTypeError, DGBoostValueError

__all__ = [
    "feature_score",
    "dump_json",
    "write_dump",
    "trees_dataframe",
    "train_one_round",
    "eval_set",
    "save_config",
    "load_config",
]

_IMPORTANCE_TYPES = ("weight", "gain", "cover", "total_gain", "total_cover")


# -- feature names -------------------------------------------------------------------------
def _read_fmap(fmap) -> tuple[dict[int, str], dict[int, str]]:
    """XGBoost's feature map file: ``index<TAB>name<TAB>type`` lines -> (names, types)."""
    names: dict[int, str] = {}
    types: dict[int, str] = {}
    if not fmap:
        return names, types
    path = os.fspath(os.path.expanduser(fmap))
    with open(path, encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, 1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) < 3:
                raise DGBoostValueError(f"{path}:{line_no}: a feature map line is 'index name type'")
            idx = int(parts[0])
            names[idx], types[idx] = parts[1], parts[2]
    return names, types


def _names_and_types(booster, fmap="") -> tuple[dict[int, str], dict[int, str]]:
    names, types = _read_fmap(fmap)
    if names:
        return names, types
    return (
        dict(enumerate(booster.feature_names or [])),
        dict(enumerate(booster.feature_types or [])) if booster.feature_names else {},
    )


# -- importance ----------------------------------------------------------------------------
def feature_score(booster, fmap="", importance_type: str = "weight") -> dict[str, float]:
    """XGBoost's ``get_score``: per used feature, split count, mean or total gain / cover.

    Gains and covers are taken as XGBoost stores them (float32), so the result equals
    ``xgboost.Booster.get_score`` on the saved model.
    """
    if importance_type not in _IMPORTANCE_TYPES:
        raise DGBoostValueError(f"importance_type must be one of {_IMPORTANCE_TYPES}, got {importance_type!r}")
    e = booster.ensemble
    inner = e.left >= 0
    feats = e.feature[inner].astype(np.int64)
    n = max(booster.num_features(), int(feats.max(initial=-1)) + 1)
    counts = np.bincount(feats, minlength=n).astype(np.float64)
    if importance_type == "weight":
        score = counts
    else:
        stat = e.gain if "gain" in importance_type else e.cover
        source = stat[inner].astype(np.float32).astype(np.float64)
        score = np.bincount(feats, weights=source, minlength=n)
        if not importance_type.startswith("total"):
            score = np.divide(score, counts, out=np.zeros_like(score), where=counts > 0)
    names, _ = _names_and_types(booster, fmap)
    return {names.get(i, f"f{i}"): float(score[i]) for i in range(n) if counts[i] > 0}


# -- dumps ---------------------------------------------------------------------------------
def _g(x) -> str:
    return "%.9g" % float(np.float32(x))


def _node_json(booster, t: int, fmap, with_stats: bool) -> str:
    """One tree in XGBoost's ``get_dump(dump_format="json")`` layout (same spacing)."""
    e = booster.ensemble
    o = int(e.offsets()[t])
    names, types = _names_and_types(booster, fmap)
    L, R, F, S, D = e.left, e.right, e.feature, e.split_value, e.default_left
    G, C, V = e.gain, e.cover, e.value

    def node(nid: int, depth: int) -> str:
        i = o + nid
        pad = "  " * (depth + 1)
        if L[i] < 0:
            s = f'{pad}{{ "nodeid": {nid}, "leaf": {_g(V[i])} '
            if with_stats:
                s += f', "cover": {_g(C[i])} '
            return s + "}"
        f = int(F[i])
        fname = names.get(f, f"f{f}")
        ftype = types.get(f, "q")
        left, right = int(L[i]), int(R[i])
        missing = left if D[i] else right
        codes = e.categories_of(i)
        if codes is not None:  # the set's child (right) is "yes", as XGBoost
            cond = "[" + ", ".join(str(c) for c in codes.tolist()) + "]"
            s = (
                f'{pad}{{ "nodeid": {nid}, "depth": {depth}, "split": "{fname}", '
                f'"split_condition": {cond}, "yes": {right}, "no": {left}, "missing": {missing} '
            )
        elif ftype == "i":
            yes, no = (right, left) if D[i] else (left, right)
            s = f'{pad}{{ "nodeid": {nid}, "depth": {depth}, "split": "{fname}", "yes": {yes}, "no": {no}'
        else:
            if ftype == "int":
                cond = str(int(math.ceil(float(S[i]))))
            else:
                cond = _g(S[i])
            s = (
                f'{pad}{{ "nodeid": {nid}, "depth": {depth}, "split": "{fname}", '
                f'"split_condition": {cond}, "yes": {left}, "no": {right}, "missing": {missing} '
            )
        if with_stats:
            s += f', "gain": {_g(G[i])}, "cover": {_g(C[i])}'
        kids = ", \n".join(node(c, depth + 1) for c in (left, right))
        return f'{s}, "children": [\n{kids}\n{pad}]}}'

    return node(0, 0)


def dump_json(booster, fmap="", with_stats: bool = False) -> list[str]:
    return [_node_json(booster, t, fmap, with_stats) for t in range(booster.ensemble.n_trees)]


def write_dump(fout, dump: list[str], dump_format: str) -> None:
    """Write ``get_dump``'s strings as ``xgboost.Booster.dump_model`` does.

    Parameters
    ----------
    fout : str or os.PathLike or text stream
        A path is opened (UTF-8) and closed; a stream is written to and left open.
    dump : list of str, one per tree
    dump_format : {"text", "json"}
        Text: ``booster[i]:`` then tree ``i``; JSON: the trees as one JSON array.
    """
    if isinstance(fout, (str, os.PathLike)):
        with open(os.path.expanduser(os.fspath(fout)), "w", encoding="utf-8") as fh:
            write_dump(fh, dump, dump_format)
        return
    if dump_format == "json":
        fout.write("[\n" + ",\n".join(dump) + "\n]")
    else:
        for i, tree in enumerate(dump):
            fout.write(f"booster[{i}]:\n{tree}")


def trees_dataframe(booster, fmap=""):
    """XGBoost's ``trees_to_dataframe``: one row per node, the same columns and dtypes."""
    try:
        import pandas as pd
    except ImportError as exc:  # pragma: no cover - pandas is an optional dependency
        raise ImportError("pandas must be available to use this method.") from exc
    if fmap:
        import warnings

        warnings.warn(
            "`fmap` has been deprecated. XGBoost now uses the `Booster.feature_names` and "
            "`Booster.feature_types` by default.",
            FutureWarning,
            stacklevel=3,
        )
    e = booster.ensemble
    names = dict(enumerate(booster.feature_names or []))
    types = dict(enumerate(booster.feature_types or []))
    off, groups = e.offsets(), e.groups()
    cols: dict[str, list] = {
        k: []
        for k in ("Tree", "Target", "Node", "Feature", "Split", "Yes", "No", "Missing", "Gain", "Cover", "Category")
    }
    L, R, F, S, D = e.left, e.right, e.feature, e.split_value, e.default_left
    G, C, V = e.gain, e.cover, e.value
    for t in range(e.n_trees):
        o = int(off[t])
        stack = [0]
        while stack:
            nid = stack.pop()
            i = o + nid
            cols["Tree"].append(t)
            cols["Target"].append(int(groups[t]))
            cols["Node"].append(nid)
            cover = float(np.float32(C[i]))
            if L[i] < 0:
                for k, v in (
                    ("Feature", "Leaf"),
                    ("Split", None),
                    ("Yes", None),
                    ("No", None),
                    ("Missing", None),
                    ("Gain", float(V[i])),
                    ("Cover", cover),
                    ("Category", None),
                ):
                    cols[k].append(v)
                continue
            left, right = int(L[i]), int(R[i])
            stack.append(left)
            stack.append(right)
            f = int(F[i])
            dft = left if D[i] else right
            ftype = types.get(f, "q")
            codes = e.categories_of(i)
            cols["Category"].append(None if codes is None else codes.tolist())
            if codes is not None:  # the set's child (right) is "Yes", as XGBoost
                yes, no, split = right, left, None
            elif ftype == "i":
                yes, no, split = (right if D[i] else left), dft, None
            else:
                yes, no = left, right
                split = float(math.ceil(float(S[i]))) if ftype == "int" else float(S[i])
            cols["Feature"].append(names.get(f, f"f{f}"))
            cols["Split"].append(split)
            cols["Yes"].append(f"{t}-{yes}")
            cols["No"].append(f"{t}-{no}")
            cols["Missing"].append(f"{t}-{dft}")
            cols["Gain"].append(float(G[i]))
            cols["Cover"].append(cover)
    ids = [f"{t}-{n}" for t, n in zip(cols["Tree"], cols["Node"])]
    df = pd.DataFrame(
        {
            "Tree": cols["Tree"],
            "Target": cols["Target"],
            "Node": cols["Node"],
            "ID": ids,
            "Feature": cols["Feature"],
            "Split": cols["Split"],
            "Yes": cols["Yes"],
            "No": cols["No"],
            "Missing": cols["Missing"],
            "Gain": cols["Gain"],
            "Cover": cols["Cover"],
            "Category": cols["Category"],
        }
    )
    df = df.astype(
        {
            "Tree": "Int64",
            "Target": "Int64",
            "Node": "Int64",
            "ID": "string",
            "Feature": "string",
            "Split": "Float64",
            "Yes": "string",
            "No": "string",
            "Missing": "string",
            "Gain": "Float64",
            "Cover": "Float64",
        }
    )
    return df.sort_values(["Tree", "Node", "Target"]).reset_index(drop=True)


# -- training steps --------------------------------------------------------------------------
def training_params(booster) -> dict[str, Any]:
    """The parameters a further round trains with: the model's training parameters, then
    every known parameter given to :meth:`Booster.set_param` (unknown names are ignored,
    as XGBoost ignores unused parameters)."""
    from .params import PARAMETER_NAMES, canonical_name, is_parameter_name

    params = {k: v for k, v in (booster.meta.get("params") or {}).items() if k in PARAMETER_NAMES and v is not None}
    for key, value in booster._predict_params.items():
        if is_parameter_name(key):
            params[canonical_name(key)] = value
    if "objective" not in booster._predict_params and booster.meta.get("objective") not in (None, "custom"):
        params["objective"] = booster.meta["objective"]
    if booster.meta.get("num_class") and "num_class" not in booster._predict_params:
        params["num_class"] = booster.meta["num_class"]
    alpha = (booster.meta.get("objective_params") or {}).get("quantile_alpha")
    if alpha is not None and "quantile_alpha" not in params:
        params["quantile_alpha"] = alpha  # an XGBoost model file keeps it with its objective only
    return params


def train_one_round(booster, dtrain, fobj=None) -> None:
    """One boosting round on ``dtrain`` appended to ``booster`` in place (the model object keeps
    its identity, as XGBoost's does): the round ``train(..., xgb_model=booster)`` would add.

    The booster keeps the :class:`~dgboost._training_job.TrainingJob` for the next call (as
    ``booster._job``, never pickled) and uses it again while it is still valid
    (:func:`_kept_job`); otherwise a new job prepares the data.
    """
    from ._training_job import TrainingJob
    from .data import DMatrix
    from .params import parse_params

    if not isinstance(dtrain, DMatrix):
        raise DGBoostTypeError(f"invalid training matrix: {type(dtrain).__name__}")
    p = parse_params(training_params(booster))
    job = _kept_job(booster, dtrain, p, fobj)
    previous = booster if booster.ensemble.n_trees > 0 else None
    if job is None:
        booster._job = None  # the old job's memory goes before the new job's is taken
        job = TrainingJob(p, dtrain, obj=fobj, start=previous)
    job.set_eta(p.eta)
    job.obj = fobj
    if fobj is not None:
        job.objective.fn = fobj
    job.run_round(booster.num_boosted_rounds(), queue_next=fobj is None)
    new = type(booster)._from_training(
        job.ensemble,
        job.params,
        job.objective,
        job.base_score,
        dtrain.feature_names,
        dtrain.feature_types,
        dtrain.num_col(),
        previous,
    )
    if fobj is not None and previous is not None:
        # a custom gradient does not change what the model is: keep its objective (link)
        for key in ("objective", "objective_params"):
            new.meta[key] = booster.meta[key]
    booster.ensemble, booster.meta = new.ensemble, new.meta
    booster._job = job


def _kept_job(booster, dtrain, p, fobj):
    """The job ``booster`` kept from its last :func:`train_one_round`, if it can boost the next
    round: the same ``dtrain`` object, the booster's trees are the job's (not loaded, sliced or
    replaced since), equal parameters (``eta`` aside: it applies to the next trees only), and
    a custom objective again where there was one. Else None."""
    import dataclasses

    job = getattr(booster, "_job", None)
    if job is None or job.dtrain is not dtrain or booster.ensemble is not job.ensemble:
        return None
    if (job.obj is None) != (fobj is None) or dataclasses.replace(p, eta=job.params.eta) != job.params:
        return None
    return job


def boost_gradients(booster, dtrain, grad, hess) -> None:
    """One round from given gradient statistics (XGBoost's ``boost(dtrain, it, grad, hess)``)."""
    n = dtrain.num_row()
    grad = np.asarray(grad, np.float32)
    hess = np.asarray(hess, np.float32)
    if grad.shape != hess.shape:
        raise DGBoostValueError(f"grad has shape {grad.shape} but hess has shape {hess.shape}")
    if grad.size % max(n, 1) or grad.shape[0] != n:
        raise DGBoostValueError(f"grad has shape {grad.shape}; expected {n} rows")

    def fixed(margin, dmat):
        return grad, hess

    train_one_round(booster, dtrain, fixed)


# -- evaluation ------------------------------------------------------------------------------
def _fmt_metric(value: float) -> str:
    return f"{float(value):.17f}"  # XGBoost's EvalOneIter prints fixed, 17 decimals


def eval_set(booster, evals, iteration: int = 0, feval=None, output_margin: bool = True) -> str:
    """``[iteration]\\tname-metric:value...`` for every set and metric, as XGBoost's."""
    from ._training_job import metrics_for
    from .comm import LocalComm
    from .data import DMatrix
    from .params import parse_params

    for item in evals:
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            raise DGBoostTypeError("evals must be a sequence of (DMatrix, name) pairs")
        if not isinstance(item[0], DMatrix):
            raise DGBoostTypeError(f"expected DMatrix, got {type(item[0]).__name__}")
        if not isinstance(item[1], str):
            raise DGBoostTypeError(f"expected string, got {type(item[1]).__name__}")
    objective = booster._objective()
    params = training_params(booster)
    p = parse_params(
        {
            k: v
            for k, v in params.items()
            if k in ("objective", "num_class", "eval_metric", "huber_slope", "scale_pos_weight")
        }
    )
    metrics = metrics_for(p, objective) if objective is not None else []
    comm = LocalComm()
    parts = [f"[{int(iteration)}]"]
    for dmat, name in evals:
        if metrics and dmat.label is None:
            raise DGBoostValueError(f"evaluation set {name!r} has no label")
        margin = np.asarray(booster.predict(dmat, output_margin=True, strict_shape=True), np.float32)
        margin = margin.reshape(dmat.num_row(), -1)
        for m in metrics:
            value = m.evaluate(margin, dmat.label, dmat.weight, dmat.group_ptr, objective, comm)
            parts.append(f"{name}-{m.name}:{_fmt_metric(value)}")
    res = "\t".join(parts)
    if feval is not None:
        for dmat, name in evals:
            ret = feval(booster.predict(dmat, output_margin=output_margin), dmat)
            for mname, val in ret if isinstance(ret, list) else [ret]:
                res += "\t%s-%s:%f" % (name, mname, val)
    return res


# -- configuration ---------------------------------------------------------------------------
_TREE_PARAMS = (
    "alpha",
    "colsample_bylevel",
    "colsample_bynode",
    "colsample_bytree",
    "eta",
    "gamma",
    "grow_policy",
    "lambda",
    "max_bin",
    "max_cat_threshold",
    "max_cat_to_onehot",
    "max_delta_step",
    "max_depth",
    "max_leaves",
    "min_child_weight",
    "subsample",
)


def _s(v) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def save_config(booster) -> str:
    """The learner's parameters as JSON, in XGBoost's ``save_config`` layout (string values),
    plus a ``"dgboost"`` key with the exact, typed parameters :func:`load_config` restores."""
    params = training_params(booster)
    meta = booster.meta
    metrics = params.get("eval_metric") or []
    metrics = [metrics] if isinstance(metrics, str) else [m for m in metrics if isinstance(m, str)]
    obj = meta.get("objective") or params.get("objective", "reg:squarederror")
    config = {
        "learner": {
            "generic_param": {
                "device": _s(params.get("device", "cpu")),
                "nthread": _s(params.get("nthread", 0)),
                "n_jobs": _s(params.get("nthread", 0)),
                "seed": _s(params.get("seed", 0)),
                "random_state": _s(params.get("seed", 0)),
            },
            "gradient_booster": {
                "name": "gbtree",
                "gbtree_model_param": {
                    "num_parallel_tree": _s(params.get("num_parallel_tree", 1)),
                    "num_trees": str(booster.ensemble.n_trees),
                },
                "tree_train_param": _tree_train_param(params, booster),
            },
            "learner_model_param": {
                "num_class": str(meta.get("num_class") or 0),
                "num_feature": str(booster.num_features()),
                "num_target": str(booster.ensemble.n_groups if not meta.get("num_class") else 1),
            },
            "learner_train_param": {"booster": "gbtree", "multi_strategy": "one_output_per_tree", "objective": obj},
            "metrics": [{"name": m} for m in metrics],
            "objective": {
                "name": obj,
                **(
                    {"reg_loss_param": {k: _s(v) for k, v in (meta.get("objective_params") or {}).items()}}
                    if meta.get("objective_params")
                    else {}
                ),
            },
        },
        "dgboost": {
            "params": _jsonable(meta.get("params") or {}),
            "predict_params": _jsonable(booster._predict_params),
        },
    }
    return json.dumps(config, sort_keys=True)


def _tree_train_param(params: dict, booster) -> dict:
    """XGBoost's ``tree_train_param`` section: string values, monotone constraints as XGBoost
    writes them (``"(1,0,-1)"``, ``"()"`` when unset)."""
    from .constraints import monotone_constraints_text

    out = {k: _s(params[k]) for k in _TREE_PARAMS if k in params}
    out["monotone_constraints"] = monotone_constraints_text(
        params.get("monotone_constraints"), booster.num_features(), booster.meta.get("feature_names")
    )
    return out


def _jsonable(d: dict) -> dict:
    out = {}
    for k, v in d.items():
        if callable(v):
            continue
        try:
            json.dumps(v)
        except TypeError:
            v = str(v)
        out[k] = v
    return out


def load_config(booster, config: str) -> None:
    """Restore parameters from :func:`save_config`'s JSON (or an XGBoost ``save_config``
    string: its known tree parameters, objective and metrics)."""
    try:
        d = json.loads(config)
    except (TypeError, ValueError) as exc:
        raise DGBoostValueError(f"load_config: not a JSON configuration: {exc}") from exc
    if not isinstance(d, dict) or "learner" not in d and "dgboost" not in d:
        raise DGBoostValueError("load_config: expected a configuration with a 'learner' key")
    ours = d.get("dgboost")
    if isinstance(ours, dict):
        booster.meta["params"] = dict(ours.get("params") or {})
        booster._predict_params = dict(ours.get("predict_params") or {})
        obj = booster.meta["params"].get("objective")
        if isinstance(obj, str) and (booster.ensemble.n_trees == 0 or booster.meta.get("objective") == obj):
            booster.meta["objective"] = obj
        return
    from .params import PARAMETER_NAMES, coerce_value

    learner = d["learner"]
    params: dict[str, Any] = {}
    tree = (learner.get("gradient_booster") or {}).get("tree_train_param") or {}
    for k, v in tree.items():
        if k in _TREE_PARAMS:
            params[k] = coerce_value(k, v)
    if "monotone_constraints" in tree:
        from .constraints import parse_monotone_constraints

        signs = parse_monotone_constraints(tree["monotone_constraints"])  # "()" -> None
        params["monotone_constraints"] = None if signs is None else list(signs)
    generic = learner.get("generic_param") or {}
    for src, dst in (("seed", "seed"), ("nthread", "nthread"), ("device", "device")):
        if src in generic and dst in PARAMETER_NAMES:
            params[dst] = coerce_value(dst, generic[src])
    obj = (learner.get("learner_train_param") or {}).get("objective")
    if obj:
        params["objective"] = obj
        if booster.ensemble.n_trees == 0:
            booster.meta["objective"] = obj
    metrics = [m.get("name") for m in learner.get("metrics") or [] if isinstance(m, dict)]
    if metrics:
        params["eval_metric"] = metrics
    booster.meta["params"] = {**(booster.meta.get("params") or {}), **params}
