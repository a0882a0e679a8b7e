"""Saving, loading, validating and dumping models.

A model is an :class:`~dgboost.tree.Ensemble` plus a metadata dict ``meta`` (objective,
base score, feature names, ... see :data:`META_KEYS`). On disk (:func:`save_model`) it is
XGBoost's JSON schema, as ``xgboost.Booster.save_model("m.json")`` writes it (see
:mod:`dgboost.xgboost_json`), so XGBoost loads dgboost's files as they are. What XGBoost's
schema cannot hold travels in one extra top-level key, ``"dgboost"`` (XGBoost ignores it
when loading and drops it when saving)::

    {"learner": {...XGBoost...}, "version": [3, 4, 1],
     "dgboost": {"schema_version": 2,
                 "meta": {<objective, objective_params, params, base_score, ...>},
                 "base_margin": [float64...],   # exact; XGBoost keeps a float32 base_score
                 "cover": [float64...]}}         # exact; XGBoost keeps float32 sum_hessian

On loading, the extension is used only while it still matches the XGBoost part (same
objective, same float32 base score and covers); a file re-saved or edited elsewhere is
read from its XGBoost part alone, with a warning.

dgboost 0.x wrote its own schema (``schema_version`` 1); it is still read, and
:func:`model_to_json` still writes it (an internal text form for comparing models)::

    {"format": "dgboost", "schema_version": 1,
     "learner": {<meta>},
     "ensemble": {"n_groups": int, "base_margin": [float64...],
                  "tree_offsets": [int...], "tree_group": [int...],
                  "left": [...], "right": [...], ... one list per NODE_ARRAYS entry}}

Floats round-trip exactly (float32 arrays are written as the float64 value of each
float32; float64 through ``repr``) and the text is deterministic (sorted keys, fixed
separators), so the same model always gives the same bytes. Files are written to a
temporary file in the target folder and renamed into place, so a failed save never
leaves a half-written model behind.

Every model read from outside (dgboost JSON or XGBoost JSON, see
:mod:`dgboost.xgboost_json`) is validated without recursion: array lengths, finite
values, child ranges, cycles, nodes reachable twice, feature indices, tree offsets and
groups. Problems raise :class:`~dgboost.errors.ModelFormatError` naming what is wrong.
"""
from __future__ import annotations

import json
import math
import os
import uuid
import warnings
from typing import Any

import numpy as np

from dgboost.errors import ModelFormatError
from dgboost.tree import NODE_ARRAYS, Ensemble

__all__ = [
    "SCHEMA_VERSION", "META_KEYS",
    "model_to_dict", "model_from_dict", "model_to_json", "model_from_json",
    "save_model", "load_model", "model_to_file_dict", "model_from_parsed_json",
    "validate_ensemble", "dump_text", "trees_per_round",
    "export_xgboost_dict", "export_xgboost_json", "import_xgboost_dict",
    "import_xgboost_booster",
]

SCHEMA_VERSION = 1
FORMAT_NAME = "dgboost"
#: top-level key of dgboost's additions to an XGBoost JSON model file, and their schema
EXTENSION_KEY = "dgboost"
EXTENSION_SCHEMA_VERSION = 2
#: the objective of models trained with a Python callable (no link: predictions are margins)
CUSTOM_OBJECTIVE = "custom"

#: meta keys and their defaults (``...`` marks a required key)
META_KEYS: dict[str, Any] = {
    "objective": ...,
    "objective_params": {},
    "base_score": ...,
    "num_class": ...,
    "num_feature": ...,
    "feature_names": None,
    "feature_types": None,
    "best_iteration": None,
    "best_score": None,
    "params": {},
    "attributes": {},
}
ENSEMBLE_KEYS = ("n_groups", "base_margin", "tree_offsets", "tree_group") + tuple(NODE_ARRAYS)

_JSON_KW = dict(sort_keys=True, separators=(",", ":"), allow_nan=False, ensure_ascii=True)


# -- links between base_score (output space) and base_margin -----------------------------
_LOGIT = ("binary:logistic", "reg:logistic")
_LOG_LINK = ("count:poisson", "reg:gamma", "reg:tweedie", "survival:cox")  # as objective.LOG_LINK, for the fallback
# XGBoost objectives whose base_score is read and written through log/exp here (the
# dgboost-trained ones among them as their objectives do; survival:aft is import/export only)
_XGB_LOG_ONLY = ("reg:gamma", "reg:tweedie", "survival:cox", "survival:aft")


def _links():
    try:
        from dgboost.objective import margin_from_score, score_from_margin
        return margin_from_score, score_from_margin
    except ImportError:
        pass

    def margin_from_score(name, score):  # XGBoost's links, if objective.py is unavailable
        if name in _LOGIT:
            return math.log(score / (1.0 - score))
        return math.log(score) if name in _LOG_LINK else float(score)

    def score_from_margin(name, margin):
        if name in _LOGIT:
            return 1.0 / (1.0 + math.exp(-margin))
        return math.exp(margin) if name in _LOG_LINK else float(margin)
    return margin_from_score, score_from_margin


def _margin_from_score(objective: str, score: float) -> float:
    try:
        if objective in _XGB_LOG_ONLY:
            m = math.log(score)
        else:
            m = float(_links()[0](objective, float(score)))
    except (ValueError, ZeroDivisionError, OverflowError) as e:
        raise ModelFormatError(f"base_score {score!r} is invalid for objective {objective!r}: {e}") from e
    if not math.isfinite(m):
        raise ModelFormatError(f"base_score {score!r} gives a non-finite margin for objective {objective!r}")
    return m


def _score_from_margin(objective: str, margin: float) -> float:
    if objective in _XGB_LOG_ONLY:
        return math.exp(margin)
    return float(_links()[1](objective, float(margin)))


def canonical_objective(name, where: str = "objective") -> str:
    """The objective a model file's ``name`` stands for.

    Parameters
    ----------
    name : str
        An objective as a model file spells it.
    where : str
        Where it was read, for messages.

    Returns
    -------
    str
        ``name``, or ``"reg:squarederror"`` for XGBoost's old name ``"reg:linear"``
        (with a :class:`DeprecationWarning`).

    Raises
    ------
    ModelFormatError
        When ``name`` is neither an XGBoost objective nor dgboost's ``"custom"``: a model
        with an objective nobody knows would silently predict margins.
    """
    from dgboost.xgboost_json import _OBJECTIVE_SECTIONS

    if not isinstance(name, str) or not name:
        raise ModelFormatError(f"{where} must be a non-empty string, got {name!r}")
    if name == "reg:linear":
        warnings.warn(f"{where} 'reg:linear' is XGBoost's deprecated name for 'reg:squarederror'; "
                      f"reading it as 'reg:squarederror'", DeprecationWarning, stacklevel=3)
        return "reg:squarederror"
    if name != CUSTOM_OBJECTIVE and name not in _OBJECTIVE_SECTIONS:
        known = sorted(set(_OBJECTIVE_SECTIONS) - {"reg:linear"})
        raise ModelFormatError(f"{where} {name!r} is not a known objective (known: {known})")
    return name


# -- array and meta checks ----------------------------------------------------------------
def _as_array(value, dtype, name: str, *, finite: bool = True) -> np.ndarray:
    """A JSON list -> 1-d array of ``dtype``; ModelFormatError naming ``name`` otherwise."""
    dtype = np.dtype(dtype)
    if isinstance(value, np.ndarray):
        a = value
    elif isinstance(value, (list, tuple)):
        try:
            a = np.asarray(value)
        except (ValueError, OverflowError) as e:
            raise ModelFormatError(f"{name} is not a flat list of numbers: {e}") from None
    else:
        raise ModelFormatError(f"{name} must be a list of numbers, got {type(value).__name__}")
    if a.ndim != 1:
        raise ModelFormatError(f"{name} must be a flat list of numbers, got shape {a.shape}")
    if a.size == 0:
        return np.empty(0, dtype=dtype)
    if dtype.kind in "iu":
        if a.dtype.kind not in "iub":
            raise ModelFormatError(f"{name} must contain only integers (found {a.dtype.kind!r} values)")
        info = np.iinfo(dtype)
        if a.dtype.kind != "b" and (a.min() < info.min or a.max() > info.max):
            raise ModelFormatError(f"{name} has values outside the range of {dtype}")
        return np.ascontiguousarray(a, dtype=dtype)
    if a.dtype.kind not in "iubf":
        raise ModelFormatError(f"{name} must contain only numbers (found {a.dtype.kind!r} values)")
    with np.errstate(over="ignore"):
        out = np.ascontiguousarray(a, dtype=dtype)
    if finite:
        bad = np.flatnonzero(~np.isfinite(out))
        if bad.size:
            raise ModelFormatError(f"{name} has a non-finite value ({a[bad[0]]!r} at index {bad[0]})")
    return out


def _int(value, name: str, lo: int | None = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        if isinstance(value, (float, np.floating)) and float(value).is_integer():
            value = int(value)
        else:
            raise ModelFormatError(f"{name} must be an integer, got {value!r}")
    if lo is not None and value < lo:
        raise ModelFormatError(f"{name} must be >= {lo}, got {value}")
    return int(value)


def _float(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ModelFormatError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(float(value)):
        raise ModelFormatError(f"{name} is non-finite ({value!r})")
    return float(value)


def _str_list(value, name: str, n: int) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, (list, tuple)) or not all(isinstance(s, str) for s in value):
        raise ModelFormatError(f"{name} must be a list of strings or null")
    if len(value) != n:
        raise ModelFormatError(f"{name} has length {len(value)} but num_feature is {n}")
    return list(value)


def _normalize_meta(meta, where: str = "learner") -> dict:
    """Checked copy of ``meta`` with defaults filled in and plain Python types."""
    if not isinstance(meta, dict):
        raise ModelFormatError(f"{where} must be a JSON object, got {type(meta).__name__}")
    missing = [k for k, v in META_KEYS.items() if v is ... and k not in meta]
    if missing:
        raise ModelFormatError(f"{where} is missing key(s) {missing}")
    out = dict(meta)
    for k, v in META_KEYS.items():
        if v is not ... and k not in out:
            out[k] = v.copy() if isinstance(v, dict) else v
    out["objective"] = canonical_objective(out["objective"], f"{where}.objective")
    for k in ("objective_params", "params", "attributes"):
        if not isinstance(out[k], dict):
            raise ModelFormatError(f"{where}.{k} must be a JSON object")
        out[k] = dict(out[k])
    if not all(isinstance(a, str) and isinstance(b, str) for a, b in out["attributes"].items()):
        raise ModelFormatError(f"{where}.attributes must map strings to strings")
    bs = out["base_score"]
    if isinstance(bs, (list, tuple, np.ndarray)):
        out["base_score"] = [_float(x, f"{where}.base_score") for x in bs]
        if not out["base_score"]:
            raise ModelFormatError(f"{where}.base_score is an empty list")
    else:
        out["base_score"] = _float(bs, f"{where}.base_score")
    out["num_class"] = _int(out["num_class"], f"{where}.num_class")
    nf = out["num_feature"] = _int(out["num_feature"], f"{where}.num_feature")
    out["feature_names"] = _str_list(out["feature_names"], f"{where}.feature_names", nf)
    out["feature_types"] = _str_list(out["feature_types"], f"{where}.feature_types", nf)
    if out["best_iteration"] is not None:
        out["best_iteration"] = _int(out["best_iteration"], f"{where}.best_iteration")
    if out["best_score"] is not None:
        out["best_score"] = _float(out["best_score"], f"{where}.best_score")
    return out


# -- structure checks (vectorised, no recursion) -----------------------------------------
def _validate_arrays(n_groups: int, base_margin, tree_offsets, tree_group, arrays: dict,
                     num_feature: int, *, where: str = "ensemble", require_order: bool = True) -> None:
    """Check every invariant of a flat ensemble; raise ModelFormatError on the first problem."""
    if n_groups < 1:
        raise ModelFormatError(f"{where}.n_groups must be >= 1, got {n_groups}")
    if base_margin.shape != (n_groups,):
        raise ModelFormatError(f"{where}.base_margin has length {base_margin.shape[0]}, expected "
                               f"n_groups = {n_groups}")
    if not np.all(np.isfinite(base_margin)):
        raise ModelFormatError(f"{where}.base_margin has a non-finite value")
    if np.any(np.abs(base_margin) > np.finfo(np.float32).max):  # margins are float32, as in XGBoost
        raise ModelFormatError(f"{where}.base_margin has a value beyond float32's range: "
                               f"{base_margin[np.argmax(np.abs(base_margin))]!r}")
    off = tree_offsets
    if off.shape[0] < 1 or off[0] != 0:
        raise ModelFormatError(f"{where}.tree_offsets must start with 0")
    sizes = np.diff(off)
    if np.any(sizes <= 0):
        t = int(np.flatnonzero(sizes <= 0)[0])
        raise ModelFormatError(f"{where}.tree_offsets must be strictly increasing (monotone; every tree "
                               f"needs a node): offsets[{t}]={off[t]}, offsets[{t + 1}]={off[t + 1]}")
    n_trees = off.shape[0] - 1
    n = int(off[-1])
    for name, a in arrays.items():
        if a.shape[0] != n:
            raise ModelFormatError(f"{where}.{name} has length {a.shape[0]}, expected {n} "
                                   f"(tree_offsets[-1])")
    if tree_group.shape[0] != n_trees:
        raise ModelFormatError(f"{where}.tree_group has length {tree_group.shape[0]}, expected "
                               f"{n_trees} trees")
    if n_trees and (tree_group.min() < 0 or tree_group.max() >= n_groups):
        t = int(np.flatnonzero((tree_group < 0) | (tree_group >= n_groups))[0])
        raise ModelFormatError(f"{where}.tree_group[{t}] = {tree_group[t]} is out of range for "
                               f"{n_groups} output groups")
    for name in ("split_value", "gain", "cover", "value"):
        a = arrays.get(name)
        # an infinite threshold sends every present value one way (XGBoost's GPU models
        # have them); any other non-finite number is corruption
        if a is None or not a.size:
            continue
        bad = np.isnan(a) if name == "split_value" else ~np.isfinite(a)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ModelFormatError(f"{where}.{name} has a non-finite value at node {i}")
    if n == 0:
        return
    tree_of = np.repeat(np.arange(n_trees, dtype=np.int64), sizes)
    start = off[:-1][tree_of]
    size = sizes[tree_of]
    local = np.arange(n, dtype=np.int64) - start

    def at(i) -> str:
        i = int(i)
        return f"tree {int(tree_of[i])}, node {int(local[i])}"

    left = arrays["left"].astype(np.int64)
    right = arrays["right"].astype(np.int64)
    for name, c in (("left", left), ("right", right)):
        bad = np.flatnonzero((c < -1) | (c >= size))
        if bad.size:
            i = bad[0]
            raise ModelFormatError(f"{where}: child index out of range at {at(i)}: {name} = {c[i]} "
                                   f"(tree has {size[i]} nodes)")
    bad = np.flatnonzero((left < 0) != (right < 0))
    if bad.size:
        i = bad[0]
        raise ModelFormatError(f"{where}: inconsistent children at {at(i)}: one child is -1 and the "
                               f"other is not (left={left[i]}, right={right[i]})")
    bad = np.flatnonzero((left == local) | (right == local))
    if bad.size:
        raise ModelFormatError(f"{where}: cycle: {at(bad[0])} is its own child")
    bad = np.flatnonzero((left >= 0) & (left == right))
    if bad.size:
        raise ModelFormatError(f"{where}: node reachable twice: {at(bad[0])} has the same left and "
                               f"right child")
    inner = np.flatnonzero(left >= 0)
    gl, gr = left[inner] + start[inner], right[inner] + start[inner]
    children = np.concatenate([gl, gr])
    owner = np.concatenate([inner, inner])
    indeg = np.bincount(children, minlength=n)
    bad = np.flatnonzero(indeg > 1)
    if bad.size:
        i = bad[0]
        parents = sorted(int(local[p]) for p in owner[children == i])
        raise ModelFormatError(f"{where}: node reachable twice: {at(i)} is a child of nodes {parents}")
    roots = off[:-1]
    bad = np.flatnonzero(indeg[roots] > 0)
    if bad.size:
        r = roots[bad[0]]
        p = owner[children == r][0]
        raise ModelFormatError(f"{where}: cycle: the root of tree {bad[0]} is a child of {at(p)}")
    par = np.full(n, -1, dtype=np.int64)
    par[children] = owner
    is_root = np.zeros(n, dtype=bool)
    is_root[roots] = True
    bad = np.flatnonzero((par < 0) & ~is_root)
    if bad.size:
        raise ModelFormatError(f"{where}: {at(bad[0])} is not reachable from the root (no parent)")
    # every non-root has exactly one parent: nodes whose ancestor chain never reaches the
    # root lie on a cycle. Pointer doubling finds them in O(n log n) without recursion. When
    # every parent is numbered before its children, ancestor chains strictly descend to the
    # root and there is no cycle to look for (most models: the search is skipped).
    misordered = np.flatnonzero((par >= 0) & (par >= np.arange(n)))
    if not require_order or misordered.size:
        anc = np.where(is_root, np.arange(n), par)
        for _ in range(int(sizes.max()).bit_length() + 1):
            anc = anc[anc]
        bad = np.flatnonzero(anc != roots[tree_of])
        if bad.size:
            raise ModelFormatError(f"{where}: cycle: {at(bad[0])} is its own ancestor (not reachable "
                                   f"from the root)")
    if require_order and misordered.size:
        raise ModelFormatError(f"{where}: {at(misordered[0])} is numbered before its parent "
                               f"(children must come after their parent)")
    parent = arrays.get("parent")
    if parent is not None:
        expect = np.where(par >= 0, par - start, -1)
        bad = np.flatnonzero(parent != expect)
        if bad.size:
            i = bad[0]
            raise ModelFormatError(f"{where}: parent array inconsistent with children at {at(i)}: "
                                   f"parent = {parent[i]}, expected {expect[i]}")
    feature = arrays["feature"]
    bad = np.flatnonzero((left >= 0) & ((feature < 0) | (feature >= num_feature)))
    if bad.size:
        i = bad[0]
        raise ModelFormatError(f"{where}: split feature {feature[i]} at {at(i)} is out of range "
                               f"0..{num_feature - 1} (num_feature = {num_feature})")
    dl = arrays["default_left"]
    bad = np.flatnonzero(dl > 1)
    if bad.size:
        raise ModelFormatError(f"{where}: default_left must be 0 or 1 at {at(bad[0])}")


def validate_ensemble(ensemble: Ensemble, num_feature: int, *, where: str = "ensemble") -> None:
    """Raise :class:`ModelFormatError` unless ``ensemble`` is a well-formed forest over
    ``num_feature`` features (children after parents, no cycles, consistent parents...)."""
    tree_offsets = ensemble.offsets()
    arrays = {name: np.asarray(getattr(ensemble, name)) for name in NODE_ARRAYS}
    _validate_arrays(ensemble.n_groups, np.asarray(ensemble.base_margin, dtype=np.float64),
                     np.asarray(tree_offsets, dtype=np.int64), np.asarray(ensemble.groups()),
                     arrays, num_feature, where=where)


def _check_meta_vs_ensemble(meta: dict, n_groups: int, where: str = "model") -> None:
    if meta["num_class"] > 0 and meta["num_class"] != n_groups:
        raise ModelFormatError(f"{where}: num_class is {meta['num_class']} but the ensemble has "
                               f"{n_groups} output groups")


def _build_ensemble(n_groups, base_margin, tree_offsets, tree_group, arrays) -> Ensemble:
    ens = Ensemble(n_groups, base_margin)
    ens.arrays = {name: np.ascontiguousarray(arrays[name], dtype=dt) for name, dt in NODE_ARRAYS.items()}
    ens.tree_offsets = np.ascontiguousarray(tree_offsets, dtype=np.int64)
    ens.tree_group = np.ascontiguousarray(tree_group, dtype=np.int32)
    return ens


# -- dgboost JSON -------------------------------------------------------------------------
def model_to_dict(ensemble: Ensemble, meta: dict) -> dict:
    """The model as a JSON-able dict in dgboost's schema (validated before it is built)."""
    meta = _normalize_meta(meta, "meta")
    validate_ensemble(ensemble, meta["num_feature"])
    _check_meta_vs_ensemble(meta, ensemble.n_groups)
    ens = {
        "n_groups": int(ensemble.n_groups),
        "base_margin": np.asarray(ensemble.base_margin, dtype=np.float64).tolist(),
        "tree_offsets": np.asarray(ensemble.offsets(), dtype=np.int64).tolist(),
        "tree_group": np.asarray(ensemble.groups(), dtype=np.int64).tolist(),
    }
    for name, dtype in NODE_ARRAYS.items():
        # float32 -> the exact float64 of each float32; ints -> Python ints
        ens[name] = np.asarray(getattr(ensemble, name), dtype=dtype).tolist()
    return {"format": FORMAT_NAME, "schema_version": SCHEMA_VERSION, "learner": meta, "ensemble": ens}


def _require(d: dict, key: str, where: str):
    if not isinstance(d, dict):
        raise ModelFormatError(f"{where} must be a JSON object, got {type(d).__name__}")
    if key not in d:
        raise ModelFormatError(f"missing key {where}.{key}" if where else f"missing key {key!r}")
    return d[key]


def model_from_dict(d: dict) -> tuple[Ensemble, dict]:
    """Read (and validate) a dict in dgboost's schema; returns ``(ensemble, meta)``."""
    if not isinstance(d, dict):
        raise ModelFormatError(f"a dgboost model must be a JSON object, got {type(d).__name__}")
    fmt = _require(d, "format", "")
    if fmt != FORMAT_NAME:
        raise ModelFormatError(f"format is {fmt!r}, expected {FORMAT_NAME!r}")
    version = _require(d, "schema_version", "")
    if isinstance(version, bool) or version != SCHEMA_VERSION:
        raise ModelFormatError(f"unsupported schema_version {version!r} (this dgboost reads "
                               f"schema_version {SCHEMA_VERSION})")
    meta = _normalize_meta(_require(d, "learner", ""), "learner")
    e = _require(d, "ensemble", "")
    for key in ENSEMBLE_KEYS:
        _require(e, key, "ensemble")
    n_groups = _int(e["n_groups"], "ensemble.n_groups", lo=1)
    base_margin = _as_array(e["base_margin"], np.float64, "ensemble.base_margin")
    tree_offsets = _as_array(e["tree_offsets"], np.int64, "ensemble.tree_offsets")
    tree_group = _as_array(e["tree_group"], np.int32, "ensemble.tree_group")
    arrays = {name: _as_array(e[name], dt, f"ensemble.{name}") for name, dt in NODE_ARRAYS.items()}
    _validate_arrays(n_groups, base_margin, tree_offsets, tree_group, arrays, meta["num_feature"])
    _check_meta_vs_ensemble(meta, n_groups)
    return _build_ensemble(n_groups, base_margin, tree_offsets, tree_group, arrays), meta


def model_to_json(ensemble: Ensemble, meta: dict) -> str:
    """Deterministic dgboost JSON text of the model."""
    return _dumps(model_to_dict(ensemble, meta))


def _dumps(d: dict) -> str:
    try:
        return json.dumps(d, **_JSON_KW)
    except (TypeError, ValueError) as e:
        raise ModelFormatError(f"cannot serialise the model to JSON: {e}") from e


def _parse_json(text, source: str = "model"):
    if isinstance(text, (bytes, bytearray, memoryview)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ModelFormatError(f"{source} is not valid JSON (not UTF-8 text; UBJSON and other "
                                   f"binary formats are not supported): {e}") from None
    if not isinstance(text, str):
        raise ModelFormatError(f"{source}: expected JSON text, got {type(text).__name__}")
    if not text.strip():
        raise ModelFormatError(f"{source} is empty (truncated file?)")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        if e.pos >= len(text.rstrip()):
            raise ModelFormatError(f"{source} is truncated: JSON ends unexpectedly ({e.msg} at line "
                                   f"{e.lineno} column {e.colno})") from None
        raise ModelFormatError(f"{source} is not valid JSON: {e.msg} at line {e.lineno} column "
                               f"{e.colno}") from None
    except RecursionError:
        raise ModelFormatError(f"{source} is not a usable JSON model (nested too deeply)") from None


def model_from_parsed_json(d, source: str = "model") -> tuple[Ensemble, dict]:
    """Read (and validate) a parsed model file of any kind dgboost reads.

    Parameters
    ----------
    d : dict
        A parsed model file: XGBoost JSON (with or without dgboost's ``"dgboost"``
        extension, see the module docstring) or dgboost's schema 1.
    source : str
        What ``d`` is, for messages (e.g. ``"model file 'm.json'"``).

    Returns
    -------
    (Ensemble, dict)
        The ensemble and its meta dict.

    Raises
    ------
    ModelFormatError
        When ``d`` is none of these, or is not a valid model.
    """
    if isinstance(d, dict) and d.get("format") == FORMAT_NAME:
        return model_from_dict(d)
    if isinstance(d, dict) and isinstance(d.get("learner"), dict) and "gradient_booster" in d["learner"]:
        ensemble, meta = import_xgboost_dict(d)
        if EXTENSION_KEY in d:
            ensemble, meta = _apply_extension(ensemble, meta, d[EXTENSION_KEY], source)
        return ensemble, meta
    if isinstance(d, dict) and "schema_version" in d and "format" not in d:
        raise ModelFormatError(f"{source}: missing key 'format' (expected {FORMAT_NAME!r})")
    raise ModelFormatError(f"{source} is neither a dgboost model (format = {FORMAT_NAME!r}) nor an "
                           f"XGBoost JSON model (learner.gradient_booster)")


#: meta keys that XGBoost's own JSON holds; the extension holds the others
_XGBOOST_META_KEYS = ("num_class", "num_feature", "feature_names", "feature_types", "best_iteration",
                      "best_score", "attributes")


def model_to_file_dict(ensemble: Ensemble, meta: dict) -> dict:
    """The model as :func:`save_model` writes it: XGBoost JSON plus the ``"dgboost"`` key.

    Parameters
    ----------
    ensemble : Ensemble
        The trees.
    meta : dict
        The model's meta dict (see :data:`META_KEYS`).

    Returns
    -------
    dict
        ``export_xgboost_dict(ensemble, meta)`` with the extension described in the
        module docstring (exact base margins and covers, the meta keys XGBoost has no
        place for).

    Raises
    ------
    ModelFormatError
        When the model is invalid or its objective has no XGBoost equivalent.
    """
    meta = _normalize_meta(meta, "meta")
    d = export_xgboost_dict(ensemble, meta)  # validates the ensemble
    d[EXTENSION_KEY] = {
        "schema_version": EXTENSION_SCHEMA_VERSION,
        "meta": {k: v for k, v in meta.items() if k not in _XGBOOST_META_KEYS},
        "base_margin": np.asarray(ensemble.base_margin, dtype=np.float64).tolist(),
        "cover": np.asarray(ensemble.cover, dtype=np.float64).tolist(),
    }
    return d


def _extension_mismatch(ensemble: Ensemble, meta: dict, ext_meta: dict, base_margin: np.ndarray,
                        cover: np.ndarray) -> str | None:
    """Why the extension no longer describes the XGBoost part (None when it does)."""
    objective = ext_meta.get("objective")
    objective = "reg:squarederror" if objective == "reg:linear" else objective  # warned once, below
    if objective != meta["objective"] and not (objective == CUSTOM_OBJECTIVE
                                               and meta["objective"] == "reg:squarederror"):
        return f"its objective {objective!r} differs from learner.objective {meta['objective']!r}"
    if base_margin.shape != (ensemble.n_groups,):
        return f"it has {base_margin.shape[0]} base margins for {ensemble.n_groups} outputs"
    scores = np.broadcast_to(np.asarray(meta["base_score"], dtype=np.float32), (ensemble.n_groups,))
    try:
        mine = np.asarray([_score_from_margin(meta["objective"], m) for m in base_margin], dtype=np.float32)
    except (OverflowError, ValueError):  # e.g. exp(1e308) under a log link
        return "its base margins are out of range for the objective"
    if not np.array_equal(mine, scores):
        return "its base margins do not match learner_model_param.base_score"
    if cover.shape != ensemble.cover.shape or not np.array_equal(
            cover.astype(np.float32), np.asarray(ensemble.cover).astype(np.float32)):
        return "its covers do not match the trees' sum_hessian"
    return None


def _apply_extension(ensemble: Ensemble, meta: dict, ext, source: str) -> tuple[Ensemble, dict]:
    """``(ensemble, meta)`` read from the XGBoost part, completed by dgboost's extension."""
    where = f"{source}: {EXTENSION_KEY}"
    if not isinstance(ext, dict):
        raise ModelFormatError(f"{where} must be a JSON object, got {type(ext).__name__}")
    version = _require(ext, "schema_version", EXTENSION_KEY)
    if isinstance(version, bool) or version != EXTENSION_SCHEMA_VERSION:
        raise ModelFormatError(f"{where}.schema_version {version!r} is not supported (this dgboost "
                               f"reads {EXTENSION_SCHEMA_VERSION})")
    ext_meta = _require(ext, "meta", EXTENSION_KEY)
    if not isinstance(ext_meta, dict):
        raise ModelFormatError(f"{where}.meta must be a JSON object")
    base_margin = _as_array(_require(ext, "base_margin", EXTENSION_KEY), np.float64, f"{where}.base_margin")
    cover = _as_array(_require(ext, "cover", EXTENSION_KEY), np.float64, f"{where}.cover")
    why = _extension_mismatch(ensemble, meta, ext_meta, base_margin, cover)
    if why is not None:
        warnings.warn(f"{source}: ignoring dgboost's extension ({why}; was the file changed outside "
                      f"dgboost?): the model is read from its XGBoost part alone", UserWarning, stacklevel=4)
        return ensemble, meta
    merged = dict(meta)
    merged.update({k: v for k, v in ext_meta.items() if k not in _XGBOOST_META_KEYS})
    merged = _normalize_meta(merged, f"{where}.meta")
    arrays = {name: getattr(ensemble, name) for name in NODE_ARRAYS}
    arrays["cover"] = cover
    return _build_ensemble(ensemble.n_groups, base_margin, ensemble.offsets(), ensemble.groups(),
                           arrays), merged


def model_from_json(text: str | bytes) -> tuple[Ensemble, dict]:
    """Parse dgboost or XGBoost JSON text (str or bytes); returns ``(ensemble, meta)``."""
    return model_from_parsed_json(_parse_json(text), "model")


def _atomic_write_text(path, text_chunks) -> None:
    """Write chunks to a temp file next to ``path``, fsync, then rename over ``path``."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            for chunk in text_chunks:
                fh.write(chunk)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _atomic_write_json(path, d: dict) -> None:
    def chunks():
        try:
            yield from json.JSONEncoder(**_JSON_KW).iterencode(d)
        except (TypeError, ValueError) as e:
            raise ModelFormatError(f"cannot serialise the model to JSON: {e}") from e
    _atomic_write_text(path, chunks())


def save_model(path, ensemble: Ensemble, meta: dict) -> None:
    """Write the model file, atomically (temp file + rename).

    Parameters
    ----------
    path : str or os.PathLike
        Where to write; ``xgboost.Booster(model_file=path)`` loads the file (see
        :func:`model_to_file_dict`). The same model always gives the same bytes.
    ensemble : Ensemble
        The trees.
    meta : dict
        The model's meta dict.

    Raises
    ------
    ModelFormatError
        For a ``.ubj`` path (only JSON is written) and for invalid models.
    """
    if os.fspath(path).lower().endswith(".ubj"):
        raise ModelFormatError(f"{os.fspath(path)!r}: UBJSON is not supported; save as .json")
    _atomic_write_json(path, model_to_file_dict(ensemble, meta))


def load_model(path) -> tuple[Ensemble, dict]:
    """Read a model file that dgboost or XGBoost wrote (JSON); returns ``(ensemble, meta)``."""
    with open(path, "rb") as fh:
        data = fh.read()
    source = f"model file {os.fspath(path)!r}"
    return model_from_parsed_json(_parse_json(data, source), source)


# -- XGBoost JSON (implemented in dgboost.xgboost_json) ----------------------------------
def export_xgboost_dict(ensemble: Ensemble, meta: dict) -> dict:
    """The model as the dict XGBoost's ``Booster.save_model("m.json")`` writes."""
    from dgboost.xgboost_json import export_xgboost_dict as f
    return f(ensemble, meta)


def export_xgboost_json(path, ensemble: Ensemble, meta: dict) -> None:
    """Write an XGBoost JSON model file (atomically) that ``xgboost.Booster`` can load."""
    from dgboost.xgboost_json import export_xgboost_json as f
    return f(path, ensemble, meta)


def import_xgboost_dict(d: dict) -> tuple[Ensemble, dict]:
    """Read (and validate) a parsed XGBoost JSON model; returns ``(ensemble, meta)``."""
    from dgboost.xgboost_json import import_xgboost_dict as f
    return f(d)


def import_xgboost_booster(booster) -> tuple[Ensemble, dict]:
    """Import an in-memory ``xgboost.Booster`` (through its JSON form)."""
    from dgboost.xgboost_json import import_xgboost_booster as f
    return f(booster)


# -- text dump ----------------------------------------------------------------------------
def _g(x) -> str:
    return "%.9g" % float(np.float32(x))


def trees_per_round(meta: dict, n_groups: int) -> int:
    """Trees in one boosting round: one per output group, times ``num_parallel_tree``
    (kept in ``meta["params"]`` by the XGBoost importer; absent means 1)."""
    return int(n_groups) * int((meta.get("params") or {}).get("num_parallel_tree") or 1)


def dump_text(ensemble: Ensemble, meta: dict, with_stats: bool = False) -> list[str]:
    """One string per tree in XGBoost's ``get_dump()`` text format."""
    names = meta.get("feature_names")
    types = meta.get("feature_types") if names else None
    L, R = ensemble.left, ensemble.right
    F, S, D = ensemble.feature, ensemble.split_value, ensemble.default_left
    G, C, V = ensemble.gain, ensemble.cover, ensemble.value
    off = ensemble.offsets()
    out = []
    for t in range(ensemble.n_trees):
        o = int(off[t])
        lines = []
        stack = [(0, 0)]
        while stack:  # pre-order: node, then its left subtree, then its right subtree
            nid, depth = stack.pop()
            i = o + nid
            tabs = "\t" * depth
            if L[i] < 0:
                line = f"{tabs}{nid}:leaf={_g(V[i])}"
                if with_stats:
                    line += f",cover={_g(C[i])}"
            else:
                f = int(F[i])
                fname = names[f] if names else f"f{f}"
                ftype = types[f] if types else "q"
                left, right = int(L[i]), int(R[i])
                missing = left if D[i] else right
                if ftype == "i":  # XGBoost's indicator template has no indentation
                    yes, no = (right, left) if D[i] else (left, right)
                    line = f"{nid}:[{fname}] yes={yes},no={no}"
                else:
                    if ftype == "int":
                        fl = math.floor(float(S[i]))
                        cond = str(int(fl) if fl == float(S[i]) else int(fl) + 1)
                    else:
                        cond = _g(S[i])
                    line = f"{tabs}{nid}:[{fname}<{cond}] yes={left},no={right},missing={missing}"
                if with_stats:
                    line += f",gain={_g(G[i])},cover={_g(C[i])}"
                stack.append((right, depth + 1))
                stack.append((left, depth + 1))
            lines.append(line + "\n")
        out.append("".join(lines))
    return out
