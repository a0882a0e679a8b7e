"""The rules a model must follow, shared by dgboost's JSON reader and writer (:mod:`dgboost.model_io`)
and XGBoost's (:mod:`dgboost.xgboost_json`).

Checked meta dicts (:data:`META_KEYS`), objectives a model file may name, the link between a
base score and a base margin, array checks, the structural validation of a flat ensemble
(vectorised, without recursion), and atomic JSON writing. Problems raise
:class:`~dgboost.errors.ModelFormatError` naming what is wrong.
"""

from __future__ import annotations

import json
import math
import os
import uuid
import warnings
from typing import Any

import numpy as np
from numba import njit

from ._links import margin_from_score, score_from_margin
from .errors import ModelFormatError
from .tree import CAT_ARRAYS, NODE_ARRAYS, Ensemble

__all__ = [
    "CUSTOM_OBJECTIVE",
    "META_KEYS",
    "JSON_KW",
    "OBJECTIVE_SECTIONS",
    "canonical_objective",
    "base_margin_from_score",
    "base_score_from_margin",
    "as_array",
    "as_int",
    "as_float",
    "normalize_meta",
    "validate_arrays",
    "validate_ensemble",
    "validate_categorical",
    "check_meta_vs_ensemble",
    "build_ensemble",
    "require_key",
    "atomic_write_text",
    "atomic_write_bytes",
    "atomic_write_json",
]

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

JSON_KW = dict(sort_keys=True, separators=(",", ":"), allow_nan=False, ensure_ascii=True)

_REG_LOSS = ("reg_loss_param", {"scale_pos_weight": 1})
_LAMBDARANK = (
    "lambdarank_param",
    {
        "lambdarank_bias_norm": 1,
        "lambdarank_normalization": 1,
        "lambdarank_num_pair_per_sample": 4294967295,
        "lambdarank_pair_method": "topk",
        "lambdarank_score_normalization": 1,
        "lambdarank_unbiased": 0,
        "ndcg_exp_gain": 1,
    },
)
# objective -> (parameter section XGBoost expects, its parameters with defaults) or None
OBJECTIVE_SECTIONS: dict[str, tuple[str, dict] | None] = {
    "reg:squarederror": _REG_LOSS,
    "reg:linear": _REG_LOSS,
    "reg:logistic": _REG_LOSS,
    "binary:logistic": _REG_LOSS,
    "binary:logitraw": _REG_LOSS,
    "reg:gamma": _REG_LOSS,
    "reg:squaredlogerror": None,
    "reg:absoluteerror": None,
    "binary:hinge": None,
    "survival:cox": None,
    "reg:pseudohubererror": ("pseudo_huber_param", {"huber_slope": 1}),
    "reg:quantileerror": ("quantile_loss_param", {"quantile_alpha": None}),
    "count:poisson": ("poisson_regression_param", {"max_delta_step": 0.7}),
    "reg:tweedie": ("tweedie_regression_param", {"tweedie_variance_power": 1.5}),
    "multi:softmax": ("softmax_multiclass_param", {"num_class": None}),
    "multi:softprob": ("softmax_multiclass_param", {"num_class": None}),
    "rank:ndcg": _LAMBDARANK,
    "rank:pairwise": _LAMBDARANK,
    "rank:map": _LAMBDARANK,
    "survival:aft": ("aft_loss_param", {"aft_loss_distribution": "normal", "aft_loss_distribution_scale": 1}),
}


# -- links between base_score (output space) and base_margin -----------------------------
# XGBoost objectives whose base_score is read and written through log/exp here (the
# dgboost-trained ones among them as their objectives do; survival:aft is import/export only)
_XGB_LOG_ONLY = ("reg:gamma", "reg:tweedie", "survival:cox", "survival:aft")


def base_margin_from_score(objective: str, score: float) -> float:
    """The margin of a model file's base ``score`` (ModelFormatError when it has none)."""
    try:
        if objective in _XGB_LOG_ONLY:
            m = math.log(score)
        else:
            m = float(margin_from_score(objective, float(score)))
    except (ValueError, ZeroDivisionError, OverflowError) as e:
        raise ModelFormatError(f"base_score {score!r} is invalid for objective {objective!r}: {e}") from e
    if not math.isfinite(m):
        raise ModelFormatError(f"base_score {score!r} gives a non-finite margin for objective {objective!r}")
    return m


def base_score_from_margin(objective: str, margin: float) -> float:
    """The base score a model file records for ``margin``."""
    if objective in _XGB_LOG_ONLY:
        return math.exp(margin)
    return float(score_from_margin(objective, float(margin)))


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
    if not isinstance(name, str) or not name:
        raise ModelFormatError(f"{where} must be a non-empty string, got {name!r}")
    if name == "reg:linear":
        warnings.warn(
            f"{where} 'reg:linear' is XGBoost's deprecated name for 'reg:squarederror'; "
            f"reading it as 'reg:squarederror'",
            DeprecationWarning,
            stacklevel=3,
        )
        return "reg:squarederror"
    if name != CUSTOM_OBJECTIVE and name not in OBJECTIVE_SECTIONS:
        known = sorted(set(OBJECTIVE_SECTIONS) - {"reg:linear"})
        raise ModelFormatError(f"{where} {name!r} is not a known objective (known: {known})")
    return name


# -- array and meta checks ----------------------------------------------------------------
def as_array(value, dtype, name: str, *, finite: bool = True) -> np.ndarray:
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
        # a safe cast (int32 -> int64, uint8 -> int64, ...) keeps every value: no scan needed
        if (
            a.dtype.kind != "b"
            and not np.can_cast(a.dtype, dtype, "safe")
            and (a.min() < info.min or a.max() > info.max)
        ):
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


def as_int(value, name: str, lo: int | None = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        if isinstance(value, (float, np.floating)) and float(value).is_integer():
            value = int(value)
        else:
            raise ModelFormatError(f"{name} must be an integer, got {value!r}")
    if lo is not None and value < lo:
        raise ModelFormatError(f"{name} must be >= {lo}, got {value}")
    return int(value)


def as_float(value, name: str) -> float:
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


def normalize_meta(meta, where: str = "learner") -> dict:
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
        out["base_score"] = [as_float(x, f"{where}.base_score") for x in bs]
        if not out["base_score"]:
            raise ModelFormatError(f"{where}.base_score is an empty list")
    else:
        out["base_score"] = as_float(bs, f"{where}.base_score")
    out["num_class"] = as_int(out["num_class"], f"{where}.num_class")
    nf = out["num_feature"] = as_int(out["num_feature"], f"{where}.num_feature")
    out["feature_names"] = _str_list(out["feature_names"], f"{where}.feature_names", nf)
    out["feature_types"] = _str_list(out["feature_types"], f"{where}.feature_types", nf)
    if out["best_iteration"] is not None:
        out["best_iteration"] = as_int(out["best_iteration"], f"{where}.best_iteration")
    if out["best_score"] is not None:
        out["best_score"] = as_float(out["best_score"], f"{where}.best_score")
    return out


# -- structure checks (vectorised, no recursion) -----------------------------------------
def _trees_are_sound(
    left, right, tree_offsets, require_order, parent, check_parent, feature, default_left, num_feature
) -> bool:
    """Whether the node arrays pass :func:`validate_arrays`' checks from the children on: in
    every tree children in range, both or neither -1, each node the child of at most one node
    and the root of none, every node reached from the root (so no cycle), with
    ``require_order`` children numbered after their parent; ``parent`` (when
    ``check_parent``) each node's parent (-1 at the root); split features in
    ``0..num_feature - 1``; ``default_left`` at most 1. One pass, for the valid models nearly
    all are: True means those checks pass, False that they run to name the first problem.
    Runs of trees of about equal node counts are checked by host threads (a depth-16 model's
    3.1M nodes took one thread 76 ms on an H200's host: issue 32)."""
    from ._threads import balanced_runs, host_threads, run_over_runs

    threads = host_threads() if left.shape[0] >= _PARALLEL_NODES else 1
    cuts = balanced_runs(np.asarray(tree_offsets, dtype=np.int64), threads)
    args = (left, right, tree_offsets, require_order, parent, check_parent, feature, default_left, num_feature)
    return all(run_over_runs(lambda a, b: _trees_sound_in(*args, a, b), cuts, threads))


_PARALLEL_NODES = 1 << 16  # models of fewer nodes are checked by one thread


@njit(cache=True, nogil=True)
def _trees_sound_in(
    left, right, tree_offsets, require_order, parent, check_parent, feature, default_left, num_feature, t0, t1
):
    """:func:`_trees_are_sound` of trees ``t0`` to ``t1 - 1``."""
    first, last = tree_offsets[t0], tree_offsets[t1]
    for i in range(first, last):
        if default_left[i] > 1:
            return False
    biggest = 0
    for t in range(t0, t1):
        biggest = max(biggest, tree_offsets[t + 1] - tree_offsets[t])
    local_parent = np.full(last - first, -1, dtype=np.int64)  # by node, counted from first
    stack = np.empty(biggest + 1, dtype=np.int64)
    for t in range(t0, t1):
        base = tree_offsets[t]
        size = tree_offsets[t + 1] - base
        for i in range(size):
            lc = np.int64(left[base + i])
            rc = np.int64(right[base + i])
            if lc < -1 or lc >= size or rc < -1 or rc >= size or (lc < 0) != (rc < 0):
                return False
            if lc < 0:
                continue
            if lc == i or rc == i or lc == rc or lc == 0 or rc == 0:
                return False
            if require_order and (lc < i or rc < i):
                return False
            if local_parent[base - first + lc] >= 0 or local_parent[base - first + rc] >= 0:
                return False
            local_parent[base - first + lc] = i
            local_parent[base - first + rc] = i
            f = np.int64(feature[base + i])
            if f < 0 or f >= num_feature:
                return False
        if check_parent:
            for i in range(size):
                if np.int64(parent[base + i]) != local_parent[base - first + i]:
                    return False
        stack[0] = 0  # every node reached from the root: no cycle, no orphan
        top = 1
        reached = 0
        while top > 0:
            top -= 1
            node = stack[top]
            reached += 1
            if reached > size:
                return False
            lc = np.int64(left[base + node])
            if lc >= 0:
                stack[top] = lc
                stack[top + 1] = np.int64(right[base + node])
                top += 2
        if reached != size:
            return False
    return True


_FLOAT_DTYPES = {"split_value": np.float32, "gain": np.float32, "cover": np.float64, "value": np.float32}


def _floats_are_sound(arrays: dict, categorical) -> bool:
    """Whether no split value is NaN (but a categorical split's) and every gain, cover and
    value is finite, checked by host threads in one compiled pass for the dtypes of
    :data:`~dgboost.tree.NODE_ARRAYS` (False for other dtypes: :func:`_name_bad_float`
    then checks them)."""
    from ._threads import even_runs, host_threads, run_over_runs

    got = [arrays.get(name) for name in _FLOAT_DTYPES]
    if any(a is None or a.dtype != dt or a.ndim != 1 for a, dt in zip(got, _FLOAT_DTYPES.values())):
        return False
    if categorical is None:
        categorical = np.empty(0, np.uint8)
    elif categorical.dtype != np.uint8:
        return False
    n = got[0].shape[0]
    if any(a.shape[0] != n for a in got) or categorical.shape[0] not in (0, n):
        return False
    threads = host_threads() if n >= _PARALLEL_NODES else 1
    return all(run_over_runs(lambda a, b: _floats_sound_in(*got, categorical, a, b), even_runs(n, threads), threads))


@njit(cache=True, nogil=True)
def _floats_sound_in(split_value, gain, cover, value, categorical, first, last):
    """:func:`_floats_are_sound` of nodes ``first`` to ``last - 1`` (``categorical`` empty: none)."""
    has_categorical = categorical.shape[0] > 0
    for i in range(first, last):
        if np.isnan(split_value[i]) and not (has_categorical and categorical[i] == 1):
            return False
        if not (np.isfinite(gain[i]) and np.isfinite(cover[i]) and np.isfinite(value[i])):
            return False
    return True


def _name_bad_float(arrays: dict, categorical, where: str) -> None:
    """Raise ModelFormatError naming the first non-finite float :func:`validate_arrays` refuses."""
    for name in ("split_value", "gain", "cover", "value"):
        a = arrays.get(name)
        # an infinite threshold sends every present value one way (XGBoost's GPU models
        # have them); any other non-finite number is corruption
        if a is None or not a.size:
            continue
        bad = np.isnan(a) if name == "split_value" else ~np.isfinite(a)
        if name == "split_value" and categorical is not None:
            bad &= categorical != 1  # a categorical split has no threshold (NaN, as XGBoost)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ModelFormatError(f"{where}.{name} has a non-finite value at node {i}")


def validate_arrays(
    n_groups: int,
    base_margin,
    tree_offsets,
    tree_group,
    arrays: dict,
    num_feature: int,
    *,
    where: str = "ensemble",
    require_order: bool = True,
) -> None:
    """Check every invariant of a flat ensemble; raise ModelFormatError on the first problem."""
    if n_groups < 1:
        raise ModelFormatError(f"{where}.n_groups must be >= 1, got {n_groups}")
    if base_margin.shape != (n_groups,):
        raise ModelFormatError(f"{where}.base_margin has length {base_margin.shape[0]}, expected n_groups = {n_groups}")
    if not np.all(np.isfinite(base_margin)):
        raise ModelFormatError(f"{where}.base_margin has a non-finite value")
    if np.any(np.abs(base_margin) > np.finfo(np.float32).max):  # margins are float32, as in XGBoost
        raise ModelFormatError(
            f"{where}.base_margin has a value beyond float32's range: {base_margin[np.argmax(np.abs(base_margin))]!r}"
        )
    off = tree_offsets
    if off.shape[0] < 1 or off[0] != 0:
        raise ModelFormatError(f"{where}.tree_offsets must start with 0")
    sizes = np.diff(off)
    if np.any(sizes <= 0):
        t = int(np.flatnonzero(sizes <= 0)[0])
        raise ModelFormatError(
            f"{where}.tree_offsets must be strictly increasing (monotone; every tree "
            f"needs a node): offsets[{t}]={off[t]}, offsets[{t + 1}]={off[t + 1]}"
        )
    n_trees = off.shape[0] - 1
    n = int(off[-1])
    for name, a in arrays.items():
        if a.shape[0] != n:
            raise ModelFormatError(f"{where}.{name} has length {a.shape[0]}, expected {n} (tree_offsets[-1])")
    if tree_group.shape[0] != n_trees:
        raise ModelFormatError(f"{where}.tree_group has length {tree_group.shape[0]}, expected {n_trees} trees")
    if n_trees and (tree_group.min() < 0 or tree_group.max() >= n_groups):
        t = int(np.flatnonzero((tree_group < 0) | (tree_group >= n_groups))[0])
        raise ModelFormatError(
            f"{where}.tree_group[{t}] = {tree_group[t]} is out of range for {n_groups} output groups"
        )
    categorical = arrays.get("split_type")
    if not _floats_are_sound(arrays, categorical):  # (or dtypes it does not take)
        _name_bad_float(arrays, categorical, where)
    if n == 0:
        return
    parent = arrays.get("parent")
    if _trees_are_sound(
        arrays["left"],
        arrays["right"],
        off,
        require_order,
        np.empty(0, np.int64) if parent is None else parent,
        parent is not None,
        arrays["feature"],
        arrays["default_left"],
        num_feature,
    ):
        return  # the checks below would all pass: they run to name the first problem
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
            raise ModelFormatError(
                f"{where}: child index out of range at {at(i)}: {name} = {c[i]} (tree has {size[i]} nodes)"
            )
    bad = np.flatnonzero((left < 0) != (right < 0))
    if bad.size:
        i = bad[0]
        raise ModelFormatError(
            f"{where}: inconsistent children at {at(i)}: one child is -1 and the "
            f"other is not (left={left[i]}, right={right[i]})"
        )
    bad = np.flatnonzero((left == local) | (right == local))
    if bad.size:
        raise ModelFormatError(f"{where}: cycle: {at(bad[0])} is its own child")
    bad = np.flatnonzero((left >= 0) & (left == right))
    if bad.size:
        raise ModelFormatError(f"{where}: node reachable twice: {at(bad[0])} has the same left and right child")
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
            raise ModelFormatError(f"{where}: cycle: {at(bad[0])} is its own ancestor (not reachable from the root)")
    if require_order and misordered.size:
        raise ModelFormatError(
            f"{where}: {at(misordered[0])} is numbered before its parent (children must come after their parent)"
        )
    parent = arrays.get("parent")
    if parent is not None:
        expect = np.where(par >= 0, par - start, -1)
        bad = np.flatnonzero(parent != expect)
        if bad.size:
            i = bad[0]
            raise ModelFormatError(
                f"{where}: parent array inconsistent with children at {at(i)}: "
                f"parent = {parent[i]}, expected {expect[i]}"
            )
    feature = arrays["feature"]
    bad = np.flatnonzero((left >= 0) & ((feature < 0) | (feature >= num_feature)))
    if bad.size:
        i = bad[0]
        raise ModelFormatError(
            f"{where}: split feature {feature[i]} at {at(i)} is out of range "
            f"0..{num_feature - 1} (num_feature = {num_feature})"
        )
    dl = arrays["default_left"]
    bad = np.flatnonzero(dl > 1)
    if bad.size:
        raise ModelFormatError(f"{where}: default_left must be 0 or 1 at {at(bad[0])}")


def validate_ensemble(ensemble: Ensemble, num_feature: int, *, where: str = "ensemble") -> None:
    """Raise :class:`ModelFormatError` unless ``ensemble`` is a well-formed forest over
    ``num_feature`` features (children after parents, no cycles, consistent parents...)."""
    tree_offsets = ensemble.offsets()
    arrays = {name: np.asarray(getattr(ensemble, name)) for name in NODE_ARRAYS}
    if ensemble.cat_arrays is not None:
        arrays["split_type"] = ensemble.cat_arrays["split_type"]
    validate_arrays(
        ensemble.n_groups,
        np.asarray(ensemble.base_margin, dtype=np.float64),
        np.asarray(tree_offsets, dtype=np.int64),
        np.asarray(ensemble.groups()),
        arrays,
        num_feature,
        where=where,
    )
    if ensemble.cat_arrays is not None:
        validate_categorical(ensemble.cat_arrays, arrays["left"], arrays["feature"], None, where)


def validate_categorical(cat: dict, left: np.ndarray, feature: np.ndarray, meta_types, where: str = "ensemble") -> None:
    """Check flat categorical arrays (:data:`dgboost.tree.CAT_ARRAYS`, ``cat_segments``
    global offsets into ``cat_values``) against the nodes' ``left`` children and
    ``feature``: only split nodes are categorical, each with a non-empty set of codes in
    0..2**24-1, sorted and distinct, within ``cat_values``; with ``meta_types`` (the feature
    types), only on features of type ``"c"``."""
    n = left.shape[0]
    st, seg, size, values = (cat[k] for k in CAT_ARRAYS)
    for name in ("split_type", "cat_segments", "cat_sizes"):
        if cat[name].shape[0] != n:
            raise ModelFormatError(f"{where}.{name} has length {cat[name].shape[0]}, expected {n}")
    bad = np.flatnonzero(st > 1)
    if bad.size:
        raise ModelFormatError(f"{where}.split_type must be 0 or 1, got {st[bad[0]]} at node {bad[0]}")
    is_cat = st == 1
    bad = np.flatnonzero(is_cat & (left < 0))
    if bad.size:
        raise ModelFormatError(f"{where}: leaf {bad[0]} is marked categorical (split_type 1)")
    bad = np.flatnonzero(is_cat & ((size < 1) | (seg < 0) | (seg + size > values.shape[0])))
    if bad.size:
        i = bad[0]
        raise ModelFormatError(
            f"{where}: categorical node {i} has categories [{seg[i]}, {seg[i] + size[i]}) outside the "
            f"{values.shape[0]} stored categories (or none)"
        )
    if values.size and (values.min() < 0 or values.max() >= 1 << 24):
        raise ModelFormatError(f"{where}: a category code is out of range 0..{(1 << 24) - 1}")
    for i in np.flatnonzero(is_cat).tolist():
        codes = values[seg[i] : seg[i] + size[i]]
        if codes.size > 1 and np.any(np.diff(codes) <= 0):
            raise ModelFormatError(f"{where}: categorical node {i}'s categories are not sorted and distinct")
    if meta_types is not None and is_cat.any():
        kinds = np.array([t == "c" for t in meta_types], dtype=bool)
        bad = np.flatnonzero(is_cat & ~kinds[np.clip(feature, 0, len(kinds) - 1)])
        if bad.size:
            i = bad[0]
            raise ModelFormatError(
                f"{where}: node {i} splits categorically on feature {feature[i]}, whose type is not 'c'"
            )


def check_meta_vs_ensemble(meta: dict, n_groups: int, where: str = "model") -> None:
    if meta["num_class"] > 0 and meta["num_class"] != n_groups:
        raise ModelFormatError(
            f"{where}: num_class is {meta['num_class']} but the ensemble has {n_groups} output groups"
        )


def build_ensemble(n_groups, base_margin, tree_offsets, tree_group, arrays, cat_arrays=None) -> Ensemble:
    """An Ensemble of flat node ``arrays`` (and flat categorical arrays, or None)."""
    ens = Ensemble(n_groups, base_margin)
    ens.arrays = {name: np.ascontiguousarray(arrays[name], dtype=dt) for name, dt in NODE_ARRAYS.items()}
    ens.tree_offsets = np.ascontiguousarray(tree_offsets, dtype=np.int64)
    ens.tree_group = np.ascontiguousarray(tree_group, dtype=np.int32)
    if cat_arrays is not None and np.any(np.asarray(cat_arrays["split_type"]) == 1):
        ens.cat_arrays = {name: np.ascontiguousarray(cat_arrays[name], dtype=dt) for name, dt in CAT_ARRAYS.items()}
    return ens


def require_key(d: dict, key: str, where: str):
    if not isinstance(d, dict):
        raise ModelFormatError(f"{where} must be a JSON object, got {type(d).__name__}")
    if key not in d:
        raise ModelFormatError(f"missing key {where}.{key}" if where else f"missing key {key!r}")
    return d[key]


def atomic_write_text(path, text_chunks) -> None:
    """Write chunks to a temp file next to ``path``, fsync, then rename over ``path``."""
    _atomic_write(path, text_chunks, binary=False)


def atomic_write_bytes(path, data: bytes) -> None:
    """Write ``data`` to a temp file next to ``path``, fsync, then rename over ``path``."""
    _atomic_write(path, [data], binary=True)


def _atomic_write(path, chunks, binary: bool) -> None:
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8") as fh:
            for chunk in chunks:
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


def atomic_write_json(path, d: dict) -> None:
    def chunks():
        try:
            yield from json.JSONEncoder(**JSON_KW).iterencode(d)
        except (TypeError, ValueError) as e:
            raise ModelFormatError(f"cannot serialise the model to JSON: {e}") from e

    atomic_write_text(path, chunks())
