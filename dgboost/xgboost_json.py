"""Import and export of XGBoost's JSON model format (as XGBoost 3.4 writes it).

``import_xgboost_dict`` reads what ``xgboost.Booster.save_model("m.json")`` writes
(``gbtree``; ``dart`` and 3.x dropout models by scaling each tree by its ``weight_drop``;
any ``num_parallel_tree``; one output per tree) into an :class:`~dgboost.tree.Ensemble`
and a meta dict; ``export_xgboost_dict`` writes the reverse, which ``xgboost.Booster``
loads. Vector-leaf (multi-target) trees and ``gblinear`` are refused with
:class:`~dgboost.errors.ModelFormatError`.

Categorical splits (docs/design.md §11): per tree ``split_type`` (1 categorical),
``categories_nodes`` (the categorical nodes, ascending), ``categories_segments`` /
``categories_sizes`` (each one's codes in ``categories``: the sorted codes that go right);
a categorical node's ``split_conditions`` entry is not read (dgboost writes 0). The category
values of the training data are XGBoost 3.x's ``model.cats`` (:mod:`dgboost._xgboost_cats`),
read into and written from ``meta["categories"]``.

Correspondence (per node): ``left_children/right_children`` -> left/right,
``parents`` (root: 2147483647) -> parent (root: -1), ``split_indices`` -> feature (-1 at
leaves), ``split_conditions`` -> split_value at inner nodes and value at leaves,
``base_weights`` -> value at inner nodes, ``loss_changes`` -> gain, ``sum_hessian`` -> cover
(float32 in XGBoost), ``default_left`` -> default_left. ``base_score`` is in output space;
the ensemble's base_margin is its margin under the objective's link.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import njit

from ._model_schema import (
    CUSTOM_OBJECTIVE,
    OBJECTIVE_SECTIONS,
    as_array,
    as_int,
    atomic_write_json,
    base_margin_from_score,
    base_score_from_margin,
    build_ensemble,
    canonical_objective,
    check_meta_vs_ensemble,
    normalize_meta,
    require_key,
    validate_arrays,
    validate_categorical,
    validate_ensemble,
)
from ._ubjson import ObjectColumns
from ._xgboost_cats import categories_from_cats, cats_from_categories
from .errors import ModelFormatError
from .tree import CAT_ARRAYS, NODE_ARRAYS, Ensemble

__all__ = [
    "export_xgboost_dict",
    "export_xgboost_json",
    "import_xgboost_dict",
    "import_xgboost_booster",
    "import_xgboost_ubjson",
    "XGBOOST_FORMAT_VERSION",
]

#: the XGBoost version whose JSON layout the exporter writes
XGBOOST_FORMAT_VERSION = (3, 4, 1)
_ROOT_PARENT = 2147483647
#: most outputs (classes or targets) a model file may declare: a corrupt count such as
#: 10**12 must fail at once, not allocate a base margin per output
MAX_OUTPUTS = 1 << 20


# -- small parsers ------------------------------------------------------------------------
def _parse_param(s):
    """XGBoost stores parameters as strings: "1" -> 1, "0.7" -> 0.7, "[3E-1]" -> [0.3]."""
    if not isinstance(s, str):
        return s
    t = s.strip()
    try:
        return int(t)
    except ValueError:
        pass
    try:
        return float(t)
    except ValueError:
        pass
    if t.startswith("[") and t.endswith("]"):
        try:
            return [float(x) for x in t[1:-1].split(",") if x.strip()]
        except ValueError:
            pass
    return s


def _fmt_param(v) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return repr(float(v))
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_fmt_param(x) for x in v) + "]"
    return str(v)


def _parse_base_score(s, where: str) -> list[float]:
    if isinstance(s, (int, float)) and not isinstance(s, bool):
        vals = [s]
    elif isinstance(s, str):
        t = s.strip()
        if t.startswith("[") and t.endswith("]"):
            t = t[1:-1]
        try:
            vals = [float(x) for x in t.split(",")]
        except ValueError:
            raise ModelFormatError(f"{where} {s!r} is not a number or a list of numbers") from None
    else:
        raise ModelFormatError(f"{where} must be a string, got {type(s).__name__}")
    out = [float(np.float32(v)) for v in vals]
    if not all(np.isfinite(out)):
        raise ModelFormatError(f"{where} {s!r} has a non-finite value")
    return out


def _fmt_f32(x: float) -> str:
    return np.format_float_scientific(np.float32(x), unique=True, exp_digits=1).upper()


# -- import -------------------------------------------------------------------------------
_TREE_FIELDS = {  # XGBoost name -> (dtype read as, finite required)
    "left_children": (np.int64, True),
    "right_children": (np.int64, True),
    "parents": (np.int64, True),
    "split_indices": (np.int64, True),
    # +-inf thresholds occur in XGBoost's GPU models (every present value goes one way);
    # NaN ones and non-finite leaf values are refused in _read_tree
    "split_conditions": (np.float32, False),
    "default_left": (np.int64, True),
    "loss_changes": (np.float32, True),
    "sum_hessian": (np.float32, True),  # float32 in XGBoost
    "base_weights": (np.float32, True),
}


def _bfs_order(left: np.ndarray, right: np.ndarray, where: str) -> np.ndarray:
    """Nodes reachable from the root, breadth first (iterative; errors on revisits)."""
    n = left.shape[0]
    seen = np.zeros(n, dtype=bool)
    seen[0] = True
    order = [0]
    k = 0
    while k < len(order):
        i = order[k]
        k += 1
        for c in (left[i], right[i]):
            if c < 0:
                continue
            if c >= n:
                raise ModelFormatError(f"{where}: child index out of range at node {i}: {c}")
            if seen[c]:
                raise ModelFormatError(f"{where}: node reachable twice or cycle at node {c}")
            seen[c] = True
            order.append(int(c))
    return np.asarray(order, dtype=np.int64)


def _renumber(arrs: dict, order: np.ndarray) -> dict:
    """Keep the nodes in ``order`` and renumber them 0..len(order)-1 in that order."""
    new = np.full(arrs["left"].shape[0], -1, dtype=np.int64)
    new[order] = np.arange(order.shape[0])
    out = {k: v[order] for k, v in arrs.items()}
    inner = out["left"] >= 0
    out["left"] = np.where(inner, new[out["left"]], -1)
    out["right"] = np.where(inner, new[out["right"]], -1)
    parent = np.full(order.shape[0], -1, dtype=np.int64)
    idx = np.flatnonzero(inner)
    parent[out["left"][idx]] = idx
    parent[out["right"][idx]] = idx
    out["parent"] = parent
    return out


def _out_of_int32(left: np.ndarray, right: np.ndarray, parents: np.ndarray) -> np.ndarray:
    """Nodes whose child or parent index is below -1 or would wrap as int32 (bool mask)."""
    top = np.iinfo(np.int32).max
    return (left < -1) | (right < -1) | (left > top) | (right > top) | (parents > top)


def _read_tree(t: dict, where: str) -> dict:
    tp = require_key(t, "tree_param", where)
    n = as_int(_parse_param(require_key(tp, "num_nodes", f"{where}.tree_param")), f"{where}.num_nodes", lo=1)
    slv = _parse_param(tp.get("size_leaf_vector", "1"))
    if slv not in (0, 1):
        raise ModelFormatError(
            f"{where}: multi-target (vector-leaf) trees are not supported (size_leaf_vector = {slv})"
        )
    cat = _read_tree_categories(t, n, where)
    raw = {}
    for name, (dt, finite) in _TREE_FIELDS.items():
        a = as_array(require_key(t, name, where), dt, f"{where}.{name}", finite=finite)
        if a.shape[0] != n:
            raise ModelFormatError(f"{where}.{name} has length {a.shape[0]}, expected num_nodes = {n}")
        raw[name] = a
    left, right = raw["left_children"], raw["right_children"]
    # -1 marks a leaf; nothing else is below 0, and no index may wrap when stored as int32
    bad = np.flatnonzero(_out_of_int32(left, right, raw["parents"]))
    if bad.size:
        i = int(bad[0])
        if -1 <= min(left[i], right[i]) and max(left[i], right[i]) <= np.iinfo(np.int32).max:
            raise ModelFormatError(f"{where}: parent index out of range at node {i}: {raw['parents'][i]}")
        raise ModelFormatError(f"{where}: child index out of range at node {i}: left = {left[i]}, right = {right[i]}")
    leaf = left < 0
    conditions = raw["split_conditions"]
    if cat is not None:  # a categorical node's condition is not read (XGBoost writes a placeholder)
        conditions = raw["split_conditions"] = np.where(cat["split_type"] == 1, np.float32(0), conditions)
    bad = np.flatnonzero(np.isnan(conditions) | (leaf & ~np.isfinite(conditions)))
    if bad.size:
        i = int(bad[0])
        what = "leaf value" if leaf[i] else "split condition"
        raise ModelFormatError(f"{where}.split_conditions has a non-finite {what} ({conditions[i]!r} at node {i})")
    arrs = _node_arrays(raw)
    if cat is not None:
        arrs.update({k: cat[k] for k in ("split_type", "cat_start", "cat_sizes")})
    if as_int(_parse_param(tp.get("num_deleted", "0")), f"{where}.num_deleted") > 0:
        arrs = _renumber(arrs, _bfs_order(left, right, where))  # deleted nodes are unreachable
    if cat is not None:
        arrs["tree_categories"] = cat["categories"]  # per tree, not per node
    for name in ("feature", "default_left"):
        bad = np.flatnonzero(_out_of_range(arrs, name))
        if bad.size:
            i = int(bad[0])
            raise ModelFormatError(f"{where}: {name} out of range at node {i}: {arrs[name][i]}")
    return arrs


def _read_tree_categories(t: dict, n: int, where: str) -> dict | None:
    """A tree's categorical splits as per-node ``split_type``, ``cat_start`` (into the tree's
    ``categories``), ``cat_sizes``, and the tree's ``categories``; None without any."""
    st = t.get("split_type")
    st = None if st is None else as_array(st, np.uint8, f"{where}.split_type")
    if st is not None and st.shape[0] != n:
        raise ModelFormatError(f"{where}.split_type has length {st.shape[0]}, expected num_nodes = {n}")
    arrays = {}
    for k, dt in (
        ("categories", np.int32),
        ("categories_nodes", np.int32),
        ("categories_segments", np.int64),
        ("categories_sizes", np.int64),
    ):
        v = t.get(k)
        if v is not None and not isinstance(v, (list, np.ndarray)):
            raise ModelFormatError(f"{where}.{k} must be a list, got {type(v).__name__}")
        arrays[k] = as_array([] if v is None else v, dt, f"{where}.{k}")
    if (st is None or not np.any(st != 0)) and not arrays["categories_nodes"].size:
        return None
    if st is None:  # (checked before anything of num_nodes' size is made: the count may be corrupt)
        raise ModelFormatError(f"{where}: categories_nodes is given without split_type")
    nodes, segments, sizes = arrays["categories_nodes"], arrays["categories_segments"], arrays["categories_sizes"]
    if not (nodes.shape[0] == segments.shape[0] == sizes.shape[0]):
        raise ModelFormatError(f"{where}: categories_nodes, categories_segments and categories_sizes differ in length")
    if nodes.size and (nodes.min() < 0 or nodes.max() >= n):
        raise ModelFormatError(f"{where}.categories_nodes has a node out of range 0..{n - 1}")
    marked = np.zeros(n, bool)
    marked[nodes] = True
    if np.any(marked != (st == 1)):
        i = int(np.flatnonzero(marked != (st == 1))[0])
        raise ModelFormatError(f"{where}: node {i}'s split_type disagrees with categories_nodes")
    start = np.zeros(n, np.int64)
    size = np.zeros(n, np.int64)
    start[nodes], size[nodes] = segments, sizes
    return {"split_type": st, "cat_start": start, "cat_sizes": size, "categories": arrays["categories"]}


def _node_arrays(raw: dict) -> dict:
    """dgboost's node arrays from XGBoost's fields (read by ``_TREE_FIELDS``): leaves get
    feature -1, split value 0 and their leaf value (XGBoost's split condition) as value."""
    leaf = raw["left_children"] < 0
    parents, conditions = raw["parents"], raw["split_conditions"]
    return {
        "left": raw["left_children"],
        "right": raw["right_children"],
        "parent": np.where((parents == _ROOT_PARENT) | (parents < 0), -1, parents),
        "feature": np.where(leaf, -1, raw["split_indices"]),
        "split_value": np.where(leaf, np.float32(0), conditions),
        "default_left": raw["default_left"],
        "gain": raw["loss_changes"],
        "cover": raw["sum_hessian"],
        "value": np.where(leaf, conditions, raw["base_weights"]),
    }


def _out_of_range(arrs: dict, name: str) -> np.ndarray:
    """Nodes whose ``feature`` (-1 .. int32 max) or ``default_left`` (0 or 1) is out of range."""
    a = arrs[name]
    if name == "feature":
        return (a < -1) | (a > np.iinfo(np.int32).max)
    return (a < 0) | (a > 1)


def _read_trees_at_once(trees: list, where: str):
    """Every tree's node arrays read as one, or None when some tree needs :func:`_read_tree`.

    For a valid model of ordinary trees (no deleted nodes, no categorical splits), the result
    is what ``_concat([_read_tree(t) ...])`` gives, with the same checks made on all trees'
    values at once instead of about forty small array operations a tree (an 800-tree model
    read 0.18 s -> 0.03 s). Anything unusual or invalid returns None, and the per-tree reader
    then gives its answer or its error, naming the tree and node as before.

    Returns
    -------
    (dict, ndarray of int64) or None
        ``NODE_ARRAYS`` of all trees (local indices), and each tree's node count.
    """
    fields: dict[str, list] = {name: [] for name in _TREE_FIELDS}
    sizes, split_types = [], []
    for t in trees:
        tp = t.get("tree_param") if isinstance(t, dict) else None
        if not isinstance(tp, dict) or "num_nodes" not in tp:
            return None
        n = _parse_param(tp["num_nodes"])
        if (
            type(n) is not int
            or n < 1
            or _parse_param(tp.get("size_leaf_vector", "1")) not in (0, 1)
            or _parse_param(tp.get("num_deleted", "0")) != 0
        ):
            return None
        for k in ("categories", "categories_nodes", "categories_segments", "categories_sizes"):
            v = t.get(k)
            if v is not None and (not isinstance(v, (list, np.ndarray)) or len(v)):
                return None
        if t.get("split_type") is not None:
            split_types.append(t["split_type"])
        for name, pieces in fields.items():
            v = t.get(name)
            if not isinstance(v, (list, np.ndarray)) or len(v) != n:
                return None
            pieces.append(v)
        sizes.append(n)
    raw = {}
    try:
        for name, (dt, finite) in _TREE_FIELDS.items():
            pieces = [np.asarray(v) for v in fields[name]]
            if any(a.ndim != 1 for a in pieces):
                return None
            raw[name] = as_array(np.concatenate(pieces) if pieces else np.empty(0), dt, name, finite=finite)
        if split_types and np.any(
            as_array(np.concatenate([np.asarray(v) for v in split_types]), np.int64, "split_type") != 0
        ):
            return None
    except (ModelFormatError, ValueError, TypeError, OverflowError):
        return None
    return _checked_node_arrays(raw, sizes)


def _read_tree_columns(trees: ObjectColumns, where: str):
    """:func:`_read_trees_at_once` of trees decoded as columns (``_ubjson.loads(...,
    columns=("trees",))``): the same checks and the same arrays, from each key's values of
    all trees joined, without a dict a tree. None where :func:`_read_trees_at_once` gives
    None, and where the columns do not show a value plainly (the lists of dicts then
    decide)."""
    if trees.kinds("tree_param") != {"{"}:
        return None
    defaults = {"num_nodes": None, "size_leaf_vector": "1", "num_deleted": "0"}
    params = {}
    for key, default in defaults.items():
        name = f"tree_param.{key}"
        values = [default] * len(trees) if name not in trees.names else trees.scalars(name)
        if values is None or (default is None and name not in trees.names):
            return None
        # the trees repeat a few strings ("0", "1"): each parsed once (typed: 1 and True apart)
        parse = functools.lru_cache(maxsize=None, typed=True)(_parse_param)
        params[key] = [parse(v) for v in values]
    sizes = params["num_nodes"]
    if any(type(n) is not int or n < 1 for n in sizes):
        return None
    if any(v not in (0, 1) for v in params["size_leaf_vector"]) or any(v != 0 for v in params["num_deleted"]):
        return None
    for k in ("categories", "categories_nodes", "categories_segments", "categories_sizes"):
        if k in trees.names:
            got = trees.typed(k)
            if got is None or got[1].any():
                return None
    sizes = np.asarray(sizes, dtype=np.int64)
    columns = trees.typed_many([*_TREE_FIELDS, "split_type"])
    if any(columns[name] is None or not np.array_equal(columns[name][1], sizes) for name in _TREE_FIELDS):
        return None
    if "split_type" in trees.names:
        got = columns["split_type"]  # integers, all 0 (what as_array's int64 check passes)
        if got is None or got[0].dtype.kind not in "iub" or np.any(got[0] != 0):
            return None
    fields = {name: columns[name][0] for name in _TREE_FIELDS}
    if all(fields[name].dtype == dt for name, dt in _XGBOOST_DTYPES.items()):
        arrays = _fused_node_arrays(fields)  # XGBoost's own dtypes: one threaded pass
        return None if arrays is None else (arrays, sizes)
    raw = {}
    try:
        for name, (dt, finite) in _TREE_FIELDS.items():
            raw[name] = as_array(fields[name], _column_dtype(name, fields[name].dtype, dt), name, finite=finite)
    except (ModelFormatError, ValueError, TypeError, OverflowError):
        return None
    return _checked_node_arrays(raw, sizes)


# the dtypes XGBoost's UBJSON writer gives the node arrays (I32Array, F32Array, U8Array)
_XGBOOST_DTYPES = {
    "left_children": np.dtype(np.int32),
    "right_children": np.dtype(np.int32),
    "parents": np.dtype(np.int32),
    "split_indices": np.dtype(np.int32),
    "split_conditions": np.dtype(np.float32),
    "default_left": np.dtype(np.uint8),
    "loss_changes": np.dtype(np.float32),
    "sum_hessian": np.dtype(np.float32),
    "base_weights": np.dtype(np.float32),
}
_PARALLEL_NODES = 1 << 16  # fewer nodes are read by one thread


def _fused_node_arrays(fields: dict) -> dict | None:
    """What ``_checked_node_arrays`` of the checked fields gives (``NODE_ARRAYS``, or None
    where a value needs :func:`_read_tree`'s check), for fields in :data:`_XGBOOST_DTYPES`:
    the checks of ``as_array`` and ``_checked_node_arrays`` and the arrays of
    :func:`_node_arrays` in one compiled pass, by host threads over runs of nodes, where
    NumPy took about ten passes and their temporaries (a depth-16 model's 3.1M nodes: 0.14 s
    on an H200's host, issue 32). The children, default directions and gains are XGBoost's
    arrays themselves, as there."""
    from ._threads import even_runs, host_threads, run_over_runs

    left, right, parents = fields["left_children"], fields["right_children"], fields["parents"]
    split_indices, conditions = fields["split_indices"], fields["split_conditions"]
    default_left, gain, hessian = fields["default_left"], fields["loss_changes"], fields["sum_hessian"]
    base_weights = fields["base_weights"]
    n = left.shape[0]
    out = {
        "left": left,
        "right": right,
        "parent": np.empty(n, np.int32),
        "feature": np.empty(n, np.int32),
        "split_value": np.empty(n, np.float32),
        "default_left": default_left,
        "gain": gain,
        "cover": np.empty(n, np.float64),
        "value": np.empty(n, np.float32),
    }
    threads = host_threads() if n >= _PARALLEL_NODES else 1
    ins = (left, right, parents, split_indices, conditions, default_left, gain, hessian, base_weights)
    outs = (out["parent"], out["feature"], out["split_value"], out["cover"], out["value"])
    runs = run_over_runs(lambda a, b: _node_arrays_in(*ins, a, b, *outs), even_runs(n, threads), threads)
    return out if all(runs) else None


@njit(cache=True, nogil=True)
def _node_arrays_in(
    left, right, parents, split_indices, conditions, default_left, gain, hessian, base_weights,
    first, last, parent, feature, split_value, cover, value,
):  # fmt: skip
    """Nodes ``first`` to ``last - 1`` of :func:`_fused_node_arrays`: False at the first node
    that fails a check (the outputs then are not all written)."""
    for i in range(first, last):
        lc, rc, c = left[i], right[i], conditions[i]
        if lc < -1 or rc < -1:  # _out_of_int32 (int32 children cannot exceed its range)
            return False
        leaf = lc < 0
        if np.isnan(c) or (leaf and not np.isfinite(c)):
            return False
        # as_array's finite checks
        if not (np.isfinite(gain[i]) and np.isfinite(hessian[i]) and np.isfinite(base_weights[i])):
            return False
        f = np.int32(-1) if leaf else split_indices[i]
        if f < -1 or default_left[i] > 1:  # _out_of_range
            return False
        p = parents[i]
        parent[i] = -1 if (p == _ROOT_PARENT or p < 0) else p
        feature[i] = f
        split_value[i] = np.float32(0) if leaf else c
        cover[i] = np.float64(hessian[i])
        value[i] = c if leaf else base_weights[i]
    return True


def _column_dtype(name: str, stored: np.dtype, wanted: np.dtype) -> np.dtype:
    """The dtype field ``name``'s joined column is checked in: the stored one where ``wanted``
    is int64 and the stored integers are XGBoost's I32Array (or int64; ``default_left`` also
    U8Array), else ``wanted``. The checks and :func:`_node_arrays` give the same values in
    either (``np.where(leaf, -1, a)`` keeps a signed dtype), and the int32 node arrays need
    no int64 copy on the way (a depth-16 model: 5 x 0.9M values)."""
    keep = (np.int32, np.int64, np.uint8) if name == "default_left" else (np.int32, np.int64)
    if np.dtype(wanted) == np.int64 and any(np.dtype(stored) == k for k in keep):
        return np.dtype(stored)
    return np.dtype(wanted)


def _checked_node_arrays(raw: dict, sizes) -> tuple[dict, np.ndarray] | None:
    """The end of :func:`_read_trees_at_once`: ``NODE_ARRAYS`` of XGBoost's fields of all trees
    (``raw``) and the node counts, or None when a value needs :func:`_read_tree`'s check."""
    left, right, conditions = raw["left_children"], raw["right_children"], raw["split_conditions"]
    if np.any(_out_of_int32(left, right, raw["parents"])) or np.any(
        np.isnan(conditions) | ((left < 0) & ~np.isfinite(conditions))
    ):
        return None
    arrs = _node_arrays(raw)
    if np.any(_out_of_range(arrs, "feature")) or np.any(_out_of_range(arrs, "default_left")):
        return None
    # what _concat([arrs]) gives, copying only what needs a cast: the arrays are this call's own
    return {k: np.ascontiguousarray(arrs[k], dtype=dt) for k, dt in NODE_ARRAYS.items()}, np.asarray(
        sizes, dtype=np.int64
    )


def _read_trees(trees: list | ObjectColumns, where: str) -> tuple[dict, np.ndarray]:
    """All trees' ``NODE_ARRAYS`` (local indices) and node counts; errors name tree and node."""
    if isinstance(trees, ObjectColumns):
        at_once = _read_tree_columns(trees, where)
        if at_once is not None:
            return at_once
        trees = trees.to_list()  # what the columns do not settle, the dicts do
    at_once = _read_trees_at_once(trees, where)
    if at_once is not None:
        return at_once
    per_tree = [_read_tree(t, f"{where}.trees[{i}]") for i, t in enumerate(trees)]
    return _concat(per_tree), np.array([a["left"].shape[0] for a in per_tree], dtype=np.int64)


def _concat(per_tree: list[dict]) -> dict:
    # the joined arrays are new: cast without a second copy where the dtype is right already
    out = {
        k: np.concatenate([np.empty(0, dt)] + [a[k] for a in per_tree]).astype(dt, copy=False)
        for k, dt in NODE_ARRAYS.items()
    }
    if any("split_type" in a for a in per_tree):
        out["categorical"] = _concat_categorical(per_tree)
    return out


def _concat_categorical(per_tree: list[dict]) -> dict:
    """The flat ``CAT_ARRAYS`` of trees read by :func:`_read_tree` (zeros for numeric trees)."""
    parts = {k: [] for k in CAT_ARRAYS}
    at = 0
    for a in per_tree:
        n = a["left"].shape[0]
        if "split_type" not in a:
            parts["split_type"].append(np.zeros(n, np.uint8))
            parts["cat_segments"].append(np.zeros(n, np.int64))
            parts["cat_sizes"].append(np.zeros(n, np.int64))
            continue
        parts["split_type"].append(a["split_type"])
        parts["cat_segments"].append(np.where(a["split_type"] == 1, a["cat_start"] + at, 0))
        parts["cat_sizes"].append(np.where(a["split_type"] == 1, a["cat_sizes"], 0))
        parts["cat_values"].append(a["tree_categories"])
        at += a["tree_categories"].shape[0]
    return {k: np.concatenate([np.empty(0, dt)] + parts[k]).astype(dt) for k, dt in CAT_ARRAYS.items()}


@njit(cache=True, nogil=True)
def _parents_not_before(parent, offsets):
    """The trees (int64, ascending) with a node whose parent's local index is not below its
    own: the trees to renumber, found in one pass."""
    n_trees = offsets.shape[0] - 1
    out = np.empty(n_trees, np.int64)
    k = 0
    for t in range(n_trees):
        base = offsets[t]
        for i in range(offsets[t + 1] - base):
            p = parent[base + i]
            if p >= 0 and p >= i:
                out[k] = t
                k += 1
                break
    return out[:k]


def import_xgboost_dict(d: dict) -> tuple[Ensemble, dict]:
    """Read a parsed XGBoost JSON model; returns ``(ensemble, meta)`` (validated)."""
    learner = require_key(d, "learner", "")
    gb = require_key(learner, "gradient_booster", "learner")
    name = require_key(gb, "name", "learner.gradient_booster")
    weight_drop = None
    if name == "gbtree":
        model = require_key(gb, "model", "learner.gradient_booster")
    elif name == "dart":
        if "gbtree" in gb:
            model = require_key(
                require_key(gb, "gbtree", "learner.gradient_booster"), "model", "learner.gradient_booster.gbtree"
            )
        else:
            model = require_key(gb, "model", "learner.gradient_booster")
        weight_drop = gb.get("weight_drop")
    else:
        raise ModelFormatError(f"XGBoost booster {name!r} is not supported (only gbtree and dart)")
    where = "learner.gradient_booster.model"
    if isinstance(model, dict) and "weight_drop" in model:
        weight_drop = model["weight_drop"]
    lmp = require_key(learner, "learner_model_param", "learner")
    w = "learner.learner_model_param"
    num_class = as_int(_parse_param(require_key(lmp, "num_class", w)), f"{w}.num_class")
    num_feature = as_int(_parse_param(require_key(lmp, "num_feature", w)), f"{w}.num_feature")
    num_target = as_int(_parse_param(lmp.get("num_target", "1")), f"{w}.num_target", lo=1)
    n_groups = num_class if num_class > 0 else num_target
    if n_groups > MAX_OUTPUTS:  # checked before anything is allocated per output
        raise ModelFormatError(
            f"{w} declares {n_groups} outputs (num_class / num_target); at most {MAX_OUTPUTS} are supported"
        )
    obj_sec = require_key(learner, "objective", "learner")
    objective = canonical_objective(require_key(obj_sec, "name", "learner.objective"), "learner.objective.name")
    if objective == CUSTOM_OBJECTIVE:  # dgboost's marker is never an XGBoost objective name
        raise ModelFormatError(f"learner.objective.name {objective!r} is not an XGBoost objective")
    scores = _parse_base_score(require_key(lmp, "base_score", w), f"{w}.base_score")
    if len(scores) not in (1, n_groups):
        raise ModelFormatError(f"{w}.base_score has {len(scores)} values for {n_groups} outputs")
    base_margin = [base_margin_from_score(objective, s) for s in np.broadcast_to(scores, (n_groups,))]

    trees = require_key(model, "trees", where)
    tree_info = as_array(require_key(model, "tree_info", where), np.int64, f"{where}.tree_info")
    if not isinstance(trees, (list, ObjectColumns)):
        raise ModelFormatError(f"{where}.trees must be a list")
    if tree_info.shape[0] != len(trees):
        raise ModelFormatError(f"{where}.tree_info has length {tree_info.shape[0]} but there are {len(trees)} trees")
    gmp = model.get("gbtree_model_param", {})
    if not isinstance(gmp, dict):
        raise ModelFormatError(f"{where}.gbtree_model_param must be a JSON object, got {type(gmp).__name__}")
    if "num_trees" in gmp and _parse_param(gmp["num_trees"]) != len(trees):
        raise ModelFormatError(
            f"{where}.gbtree_model_param.num_trees is {gmp['num_trees']!r} but there are {len(trees)} trees"
        )
    npt = as_int(_parse_param(gmp.get("num_parallel_tree", "1")), f"{where}.num_parallel_tree", lo=1)
    categories = categories_from_cats(model.get("cats"), num_feature, f"{where}.cats")
    if tree_info.size and (tree_info.min() < 0 or tree_info.max() >= n_groups):
        raise ModelFormatError(f"{where}.tree_info has an output group out of range 0..{n_groups - 1}")
    if weight_drop is not None:
        weight_drop = as_array(weight_drop, np.float32, f"{where}.weight_drop")
        if weight_drop.shape[0] != len(trees):
            raise ModelFormatError(f"{where}.weight_drop has length {weight_drop.shape[0]} for {len(trees)} trees")

    arrays, sizes = _read_trees(trees, where)
    cat = arrays.pop("categorical", None)
    if cat is not None:
        arrays["split_type"] = cat["split_type"]  # (validate_arrays: a categorical split has no threshold)
    if weight_drop is not None:  # a factor of 1 leaves every value's bits as they are
        arrays["value"] = (arrays["value"] * np.repeat(weight_drop, sizes)).astype(np.float32)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    bm = np.asarray(base_margin, dtype=np.float64)
    validate_arrays(
        n_groups,
        bm,
        offsets,
        tree_info.astype(np.int32),
        arrays,
        num_feature,
        where="XGBoost model",
        require_order=False,
    )
    # dgboost numbers children after their parents: renumber trees that do not
    bad_trees = _parents_not_before(arrays["parent"], offsets)
    if cat is not None:
        del arrays["split_type"]
        # per node under names _concat does not take for a tree's: renumbered with the nodes
        arrays.update({"_split_type": cat["split_type"], "_seg": cat["cat_segments"], "_size": cat["cat_sizes"]})
    if bad_trees.size:
        per_tree = [{k: v[lo:hi] for k, v in arrays.items()} for lo, hi in zip(offsets[:-1], offsets[1:])]
        for t in bad_trees:
            local = {k: v.astype(np.int64) if k in ("left", "right", "parent") else v for k, v in per_tree[t].items()}
            per_tree[t] = _renumber(local, _bfs_order(local["left"], local["right"], "XGBoost model"))
        merged = _concat(per_tree)
        if cat is not None:
            for k in ("_split_type", "_seg", "_size"):
                merged[k] = np.concatenate([a[k] for a in per_tree])
        arrays = merged
    if cat is not None:
        cat = {
            "split_type": arrays.pop("_split_type"),
            "cat_segments": arrays.pop("_seg"),
            "cat_sizes": arrays.pop("_size"),
            "cat_values": cat["cat_values"],
        }

    attrs = learner.get("attributes") or {}
    if not isinstance(attrs, dict):
        raise ModelFormatError(f"learner.attributes must be a JSON object, got {type(attrs).__name__}")
    attrs = dict(attrs)
    for key in ("feature_names", "feature_types"):
        if not isinstance(learner.get(key) or [], list):
            raise ModelFormatError(f"learner.{key} must be a list of strings, got {type(learner[key]).__name__}")
    best_iteration = attrs.pop("best_iteration", None)
    best_score = attrs.pop("best_score", None)
    objective_params = {}
    for sec_name, sec in obj_sec.items():
        if sec_name != "name" and isinstance(sec, dict):
            objective_params.update({k: _parse_param(v) for k, v in sec.items()})
    if objective in ("multi:softmax", "multi:softprob"):
        objective_params.pop("num_class", None)
    meta = {
        "objective": objective,
        "objective_params": objective_params,
        "base_score": scores[0] if len(scores) == 1 else scores,
        "num_class": num_class,
        "num_feature": num_feature,
        "feature_names": list(learner.get("feature_names") or []) or None,
        "feature_types": list(learner.get("feature_types") or []) or None,
        "best_iteration": None if best_iteration is None else _parse_param(best_iteration),
        "best_score": None if best_score is None else _parse_param(best_score),
        "params": {"num_parallel_tree": npt} if npt > 1 else {},
        "attributes": attrs,
    }
    if categories is not None:
        meta["categories"] = categories
    meta = normalize_meta(meta, "XGBoost learner")
    if cat is not None:
        validate_categorical(cat, arrays["left"], arrays["feature"], meta["feature_types"], "XGBoost model")
    return build_ensemble(n_groups, bm, offsets, tree_info, arrays, cat), meta


def import_xgboost_booster(booster) -> tuple[Ensemble, dict]:
    """Import an in-memory ``xgboost.Booster`` through its binary form, ``save_raw("ubj")``:
    the node arrays arrive as typed arrays, decoded in bulk (:mod:`dgboost._ubjson`), where
    ``json.loads`` of ``save_raw("json")`` parses every number as text. Same values: XGBoost
    writes float32 either way (tested). The bytes are copied out of XGBoost's buffer by host
    threads (:func:`dgboost._xgboost_raw.booster_ubjson`, the same bytes)."""
    from ._xgboost_raw import booster_ubjson

    return import_xgboost_ubjson(booster_ubjson(booster))


def import_xgboost_ubjson(raw: bytes | bytearray | memoryview) -> tuple[Ensemble, dict]:
    """:func:`import_xgboost_booster` of a booster whose ``save_raw("ubj")`` is ``raw`` (an
    XGBoost UBJSON model's bytes): ``(ensemble, meta)``, validated."""
    from dgboost._ubjson import loads

    # the trees as columns: each node array of all trees joined in one compiled pass
    return import_xgboost_dict(loads(raw, columns=("trees",)))


# -- export -------------------------------------------------------------------------------
def _objective_section(meta: dict) -> dict:
    """XGBoost's ``learner.objective`` object for ``meta``'s objective.

    A model trained with a custom (callable) objective predicts margins; XGBoost does the
    same with ``reg:squarederror`` (identity link), which is what XGBoost itself records.
    """
    name = meta["objective"]
    if name == CUSTOM_OBJECTIVE:
        name = "reg:squarederror"
    if name not in OBJECTIVE_SECTIONS:
        raise ModelFormatError(
            f"cannot export objective {name!r} to XGBoost JSON (known: {sorted(OBJECTIVE_SECTIONS)})"
        )
    out = {"name": "reg:squarederror" if name == "reg:linear" else name}
    spec = OBJECTIVE_SECTIONS[name]
    if spec is None:
        return out
    section, defaults = spec
    params = {}
    for k, default in defaults.items():
        v = meta["objective_params"].get(k, default)
        if k == "num_class":
            v = meta["num_class"]
        if v is None:
            raise ModelFormatError(f"cannot export objective {name!r}: objective_params needs {k!r}")
        if k == "quantile_alpha" and not isinstance(v, (list, tuple)):
            v = [v]
        params[k] = _fmt_param(v)
    out[section] = params
    return out


def export_xgboost_dict(ensemble: Ensemble, meta: dict, *, typed: bool = False) -> dict:
    """The model as the dict XGBoost 3.4's ``Booster.save_model("m.json")`` writes.

    Parameters
    ----------
    ensemble : Ensemble
        The trees.
    meta : dict
        The model's meta dict.
    typed : bool
        False: every array is a list (JSON-able). True: each tree's node arrays (and
        ``cats``' index arrays) are 1-d NumPy arrays of the dtypes XGBoost's UBJSON writer
        uses (float32, int32, int64, uint8), for :func:`dgboost._ubjson.dumps`; the values
        are the same either way.

    Returns
    -------
    dict
    """
    meta = normalize_meta(meta, "meta")
    nf = meta["num_feature"]
    validate_ensemble(ensemble, nf)
    check_meta_vs_ensemble(meta, ensemble.n_groups)
    objective = _objective_section(meta)
    n_groups = ensemble.n_groups
    num_class = meta["num_class"]
    scores = [base_score_from_margin(meta["objective"], m) for m in ensemble.base_margin]
    off = ensemble.offsets()
    groups = ensemble.groups()
    n_trees = ensemble.n_trees
    L, R, P, F = ensemble.left, ensemble.right, ensemble.parent, ensemble.feature
    S, D, G, C, V = (ensemble.split_value, ensemble.default_left, ensemble.gain, ensemble.cover, ensemble.value)
    cat = ensemble.cat_arrays if ensemble.has_categorical else None
    trees = []
    for t in range(n_trees):
        lo, hi = int(off[t]), int(off[t + 1])
        leaf = L[lo:hi] < 0
        fields = {  # the dtypes of XGBoost's typed arrays (F32Array, I32Array, U8Array, I64Array)
            "base_weights": V[lo:hi].astype(np.float32),
            **_tree_categories(cat, lo, hi),
            "default_left": D[lo:hi].astype(np.uint8),
            "left_children": L[lo:hi].astype(np.int32),
            "loss_changes": G[lo:hi].astype(np.float32),
            "parents": np.where(P[lo:hi] < 0, _ROOT_PARENT, P[lo:hi]).astype(np.int32),
            "right_children": R[lo:hi].astype(np.int32),
            "split_conditions": np.where(leaf, V[lo:hi], S[lo:hi]).astype(np.float32),
            "split_indices": np.where(leaf & (F[lo:hi] < 0), 0, F[lo:hi]).astype(np.int32),
            "split_type": np.zeros(hi - lo, np.uint8) if cat is None else cat["split_type"][lo:hi].astype(np.uint8),
            "sum_hessian": C[lo:hi].astype(np.float32),
        }
        tree = {k: (v if typed else v.tolist()) for k, v in fields.items()}
        tree["id"] = t
        tree["tree_param"] = {
            "num_deleted": "0",
            "num_feature": str(nf),
            "num_nodes": str(hi - lo),
            "size_leaf_vector": "1",
        }
        trees.append(tree)
    npt = int(meta["params"].get("num_parallel_tree", 1) or 1)
    per_round = n_groups * npt
    if n_trees % per_round:
        per_round = 1
    attrs = {str(k): str(v) for k, v in meta["attributes"].items()}
    if meta["best_iteration"] is not None:
        attrs["best_iteration"] = str(meta["best_iteration"])
    if meta["best_score"] is not None:
        attrs["best_score"] = repr(meta["best_score"])
    learner = {
        "attributes": attrs,
        "feature_names": list(meta["feature_names"] or []),
        "feature_types": list(meta["feature_types"] or []),
        "gradient_booster": {
            "model": {
                "cats": cats_from_categories(meta.get("categories"), typed=typed),
                "gbtree_model_param": {"num_parallel_tree": str(npt), "num_trees": str(n_trees)},
                "iteration_indptr": list(range(0, n_trees + 1, per_round)),
                "tree_info": groups.astype(np.int64).tolist(),
                "trees": trees,
            },
            "name": "gbtree",
        },
        "learner_model_param": {
            "base_score": "[" + ",".join(_fmt_f32(s) for s in scores) + "]",
            "boost_from_average": "1",
            "num_class": str(num_class),
            "num_feature": str(nf),
            "num_target": str(n_groups if num_class == 0 else 1),
        },
        "objective": objective,
    }
    return {"learner": learner, "version": list(XGBOOST_FORMAT_VERSION)}


def _tree_categories(cat: dict | None, lo: int, hi: int) -> dict:
    """XGBoost's four category arrays of the tree of nodes ``lo:hi`` (empty without categorical splits)."""
    if cat is None or not np.any(cat["split_type"][lo:hi] == 1):
        return {
            "categories": np.empty(0, np.int32),
            "categories_nodes": np.empty(0, np.int32),
            "categories_segments": np.empty(0, np.int64),
            "categories_sizes": np.empty(0, np.int64),
        }
    nodes = np.flatnonzero(cat["split_type"][lo:hi] == 1)
    sizes = cat["cat_sizes"][lo:hi][nodes].astype(np.int64)
    starts = cat["cat_segments"][lo:hi][nodes]
    values = [cat["cat_values"][s : s + z] for s, z in zip(starts.tolist(), sizes.tolist())]
    return {
        "categories": np.concatenate(values).astype(np.int32),
        "categories_nodes": nodes.astype(np.int32),
        "categories_segments": np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64),
        "categories_sizes": sizes,
    }


def export_xgboost_json(path, ensemble: Ensemble, meta: dict) -> None:
    """Write an XGBoost JSON model file atomically (``xgboost.Booster(model_file=path)`` loads it)."""
    atomic_write_json(path, export_xgboost_dict(ensemble, meta))
