"""The host-side shortcuts of SHAP preparation give what the plain code gives, bit for bit:
trees decoded as UBJSON columns, the weight-table selection without a sort, and the one-pass
tree check in front of the model validator."""

from __future__ import annotations

import numpy as np
import pytest

from dgboost import _ubjson
from dgboost._model_schema import _trees_are_sound as _sound
from dgboost.explain import tables


def _tree(n: int, rng) -> dict:
    return {
        "base_weights": rng.standard_normal(n).astype(np.float32),
        "default_left": rng.integers(0, 2, n).astype(np.uint8),
        "id": int(rng.integers(0, 1000)),
        "left_children": np.arange(n, dtype=np.int32),
        "tree_param": {"num_nodes": str(n), "size_leaf_vector": "1"},
    }


def _same(a, b) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and a.tobytes() == b.tobytes()
    return type(a) is type(b) and a == b


def test_trees_read_as_columns_hold_what_the_list_of_dicts_holds():
    rng = np.random.default_rng(0)
    doc = {"model": {"trees": [_tree(int(n), rng) for n in rng.integers(1, 40, 30)]}, "version": [3, 4]}
    raw = _ubjson.dumps(doc)
    plain = _ubjson.loads(raw)
    cols = _ubjson.loads(raw, columns=("trees",))["model"]["trees"]
    assert isinstance(cols, _ubjson.ObjectColumns)
    assert len(cols) == 30
    assert _same(cols.to_list(), plain["model"]["trees"])
    for name in ("base_weights", "default_left", "left_children"):
        values, counts = cols.typed(name)
        joined = np.concatenate([t[name] for t in plain["model"]["trees"]])
        assert values.dtype == joined.dtype and values.tobytes() == joined.tobytes()
        assert counts.tolist() == [len(t[name]) for t in plain["model"]["trees"]]
    assert cols.scalars("id") == [t["id"] for t in plain["model"]["trees"]]
    assert cols.scalars("tree_param.num_nodes") == [t["tree_param"]["num_nodes"] for t in plain["model"]["trees"]]
    assert cols.typed("id") is None and cols.scalars("base_weights") is None


@pytest.mark.parametrize(
    "trees",
    [
        [{"a": np.zeros(2, np.float32)}, {"b": np.zeros(2, np.float32)}],  # other keys
        [{"a": np.zeros(2, np.float32)}, {"a": [1.5, 2.5]}],  # an untyped array
        [{"a": 1.5}],  # a float
        [{"a": {"b": {"c": 1}}}],  # nested twice
        [],  # empty
    ],
)
def test_arrays_of_other_shapes_are_decoded_as_lists(trees):
    raw = _ubjson.dumps({"trees": trees})
    got = _ubjson.loads(raw, columns=("trees",))
    assert isinstance(got["trees"], list)
    assert _same(got, _ubjson.loads(raw))


def test_an_xgboost_booster_imports_the_same_through_columns_and_through_dicts():
    xgb = pytest.importorskip("xgboost")
    from dgboost.xgboost_json import import_xgboost_dict

    rng = np.random.default_rng(1)
    X = rng.standard_normal((500, 6)).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    y = rng.integers(0, 3, 500)
    booster = xgb.train(
        {"objective": "multi:softprob", "num_class": 3, "max_depth": 4, "nthread": 1}, xgb.DMatrix(X, y), 5
    )
    raw = booster.save_raw("ubj")
    a, meta_a = import_xgboost_dict(_ubjson.loads(raw))
    b, meta_b = import_xgboost_dict(_ubjson.loads(raw, columns=("trees",)))
    assert meta_a == meta_b
    for k in a.arrays:
        assert a.arrays[k].dtype == b.arrays[k].dtype and a.arrays[k].tobytes() == b.arrays[k].tobytes(), k
    assert a.tree_offsets.tobytes() == b.tree_offsets.tobytes() and a.tree_group.tobytes() == b.tree_group.tobytes()


def _select_by_sorting(k, max_k, budget, entries_fn):
    """The weight-table selection as a sort (the rule :func:`tables._select_paths` implements)."""
    cand = np.flatnonzero((k >= 1) & (k <= max_k))
    cand = cand[np.argsort(k[cand], kind="stable")]
    return np.sort(cand[np.cumsum(entries_fn(k[cand])) * 8 <= budget])


@pytest.mark.parametrize("entries_fn", [tables.table_entries, tables.interaction_table_entries])
def test_weight_tables_go_to_the_paths_a_sort_by_length_would_pick(entries_fn):
    rng = np.random.default_rng(2)
    for _ in range(400):
        k = rng.integers(0, int(rng.integers(1, 20)), int(rng.integers(0, 200))).astype(np.int64)
        max_k = int(rng.integers(0, 18))
        sizes = np.sort(entries_fn(k[(k >= 1) & (k <= max_k)]))
        cum = np.cumsum(sizes) * 8
        budget = int(rng.choice(cum)) + int(rng.integers(-1, 2)) if cum.size else int(rng.integers(0, 100))
        budget = max(budget, 0)
        offsets, order, off, total = tables._select_paths(k, max_k, budget, entries_fn)
        want = _select_by_sorting(k, max_k, budget, entries_fn)
        assert order.dtype == np.int64 and np.array_equal(order, want)
        assert total == int(entries_fn(k[want]).sum())
        assert np.array_equal(offsets[order], off) and np.all(offsets[k == 0] == 0)


def _trees_are_sound(left, right, off, require_order, parent=None, feature=None, default_left=None, n_features=4):
    n = left.shape[0]
    feature = np.where(left >= 0, 0, -1) if feature is None else feature
    default_left = np.zeros(n, np.uint8) if default_left is None else default_left
    given = parent is not None
    parent = np.empty(0, np.int64) if parent is None else parent
    return _sound(left, right, off, require_order, parent, given, feature, default_left, n_features)


def test_the_one_pass_tree_check_passes_trees_and_refuses_broken_ones():
    left = np.array([1, 3, -1, -1, -1], np.int32)
    right = np.array([2, 4, -1, -1, -1], np.int32)
    off = np.array([0, 5], np.int64)
    assert _trees_are_sound(left, right, off, True)
    broken = {
        "child out of range": ([1, 5, -1, -1, -1], [2, 4, -1, -1, -1]),
        "one child missing": ([1, -1, -1, -1, -1], [2, 4, -1, -1, -1]),
        "shared child": ([1, 3, -1, -1, -1], [2, 3, -1, -1, -1]),
        "root as a child": ([1, 0, -1, -1, -1], [2, 4, -1, -1, -1]),
    }
    for what, (lc, rc) in broken.items():
        assert not _trees_are_sound(np.array(lc, np.int32), np.array(rc, np.int32), off, False), what
    # every node has one parent, but 3 -> 4 -> 3 is a cycle the root does not reach
    cyc_l, cyc_r = np.array([1, -1, -1, 4, 3, -1, -1], np.int32), np.array([2, -1, -1, 5, 6, -1, -1], np.int32)
    assert not _trees_are_sound(cyc_l, cyc_r, np.array([0, 7], np.int64), False)
    # a child numbered before its parent: a tree, refused only when the order is required
    lc, rc = np.array([2, -1, 1, -1, -1], np.int32), np.array([4, -1, 3, -1, -1], np.int32)
    assert _trees_are_sound(lc, rc, off, False) and not _trees_are_sound(lc, rc, off, True)


def test_the_one_pass_tree_check_refuses_wrong_parents_features_and_default_directions():
    left = np.array([1, 3, -1, -1, -1], np.int32)
    right = np.array([2, 4, -1, -1, -1], np.int32)
    off = np.array([0, 5], np.int64)
    parent = np.array([-1, 0, 0, 1, 1], np.int32)
    assert _trees_are_sound(left, right, off, True, parent=parent)
    assert not _trees_are_sound(left, right, off, True, parent=np.array([-1, 0, 0, 1, 0], np.int32))
    assert not _trees_are_sound(left, right, off, True, feature=np.array([0, 4, -1, -1, -1]))
    assert not _trees_are_sound(left, right, off, True, feature=np.array([-1, 0, -1, -1, -1]))
    assert not _trees_are_sound(left, right, off, True, default_left=np.array([0, 0, 2, 0, 0], np.uint8))
