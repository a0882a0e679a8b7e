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


# -- the import's compiled passes over runs of objects, nodes and trees (issue 32) -------------
@pytest.fixture
def three_threads_always(monkeypatch):
    """Every threaded pass of the import runs in several runs on three threads, whatever the size."""
    from dgboost import _model_schema, _threads, xgboost_json

    monkeypatch.setattr(_threads, "host_threads", lambda: 3)
    monkeypatch.setattr(_ubjson, "_PARALLEL_BYTES", 0)
    monkeypatch.setattr(xgboost_json, "_PARALLEL_NODES", 0)
    monkeypatch.setattr(_model_schema, "_PARALLEL_NODES", 0)


_EVERY_DTYPE = (np.int8, np.uint8, np.int16, np.int32, np.int64, np.float32, np.float64)


def test_typed_arrays_joined_by_threads_are_the_arrays_loads_gives(three_threads_always):
    rng = np.random.default_rng(3)
    trees = []
    for n in rng.integers(0, 50, 40):  # empty arrays among them
        tree = {}
        for j, dt in enumerate(_EVERY_DTYPE):
            info = np.iinfo(dt) if np.dtype(dt).kind in "iu" else None
            if info is None:
                v = rng.standard_normal(int(n)).astype(dt)
            else:  # the whole range: every byte of a value matters
                v = rng.integers(info.min, info.max, int(n), dtype=dt, endpoint=True)
            tree[f"k{j}"] = v
        trees.append(tree)
    raw = bytearray(_ubjson.dumps({"trees": trees}))
    plain = _ubjson.loads(bytes(raw))["trees"]
    cols = _ubjson.loads(raw, columns=("trees",))["trees"]
    names = [f"k{j}" for j in range(len(_EVERY_DTYPE))]
    got = cols.typed_many([*names, "absent"])
    assert got["absent"] is None
    for name in names:
        joined = np.concatenate([t[name] for t in plain])
        values, counts = got[name]
        assert values.dtype == joined.dtype and values.dtype.isnative and values.tobytes() == joined.tobytes(), name
        assert counts.tolist() == [len(t[name]) for t in plain]
        assert cols.typed(name)[0].tobytes() == joined.tobytes()


def _node_fields(n: int, rng) -> dict:
    """XGBoost's node fields of one valid-looking tree in its UBJSON dtypes (not a real tree:
    the node reader checks values, the tree checks come later)."""
    leaf = rng.random(n) < 0.5
    return {
        "left_children": np.where(leaf, -1, rng.integers(1, n + 1, n)).astype(np.int32),
        "right_children": np.where(leaf, -1, rng.integers(1, n + 1, n)).astype(np.int32),
        "parents": np.where(np.arange(n) == 0, 2147483647, rng.integers(-1, n, n)).astype(np.int32),
        "split_indices": rng.integers(0, 10, n).astype(np.int32),
        "split_conditions": rng.standard_normal(n).astype(np.float32),
        "default_left": rng.integers(0, 2, n).astype(np.uint8),
        "loss_changes": rng.standard_normal(n).astype(np.float32),
        "sum_hessian": rng.random(n).astype(np.float32),
        "base_weights": rng.standard_normal(n).astype(np.float32),
    }


def _checked_the_plain_way(fields: dict):
    from dgboost._model_schema import as_array
    from dgboost.errors import ModelFormatError
    from dgboost.xgboost_json import _TREE_FIELDS, _checked_node_arrays, _column_dtype

    try:
        raw = {
            k: as_array(fields[k], _column_dtype(k, fields[k].dtype, dt), k, finite=finite)
            for k, (dt, finite) in _TREE_FIELDS.items()
        }
    except ModelFormatError:
        return None
    got = _checked_node_arrays(raw, [fields["left_children"].shape[0]])
    return None if got is None else got[0]


_CORRUPTIONS = {
    "left child below -1": ("left_children", -2),
    "right child below -1": ("right_children", -7),
    "NaN threshold": ("split_conditions", np.nan),
    "infinite threshold": ("split_conditions", np.inf),  # refused on a leaf only
    "split feature below -1": ("split_indices", -3),  # refused on an inner node only
    "default direction 2": ("default_left", 2),
    "infinite gain": ("loss_changes", -np.inf),
    "NaN cover": ("sum_hessian", np.nan),
    "infinite base weight": ("base_weights", np.inf),
    "negative parent": ("parents", -5),  # read as the root's -1
}


@pytest.mark.parametrize("corruption", [None, *_CORRUPTIONS])
def test_the_one_pass_node_reader_gives_the_checked_arrays_or_refuses_as_they_do(three_threads_always, corruption):
    from dgboost.xgboost_json import _fused_node_arrays

    rng = np.random.default_rng(4)
    for trial in range(20):
        fields = _node_fields(int(rng.integers(1, 300)), rng)
        if corruption is not None:
            name, bad = _CORRUPTIONS[corruption]
            at = int(rng.integers(0, fields[name].shape[0]))
            fields[name][at] = bad
        want = _checked_the_plain_way({k: v.copy() for k, v in fields.items()})
        got = _fused_node_arrays(fields)
        assert (got is None) == (want is None), (corruption, trial)
        if want is not None:
            assert list(got) == list(want)
            for k in want:
                assert got[k].dtype == want[k].dtype and got[k].tobytes() == want[k].tobytes(), (corruption, k)


def _random_forest(n_trees: int, rng):
    """Node arrays of ``n_trees`` random binary trees (children numbered after parents)."""
    lefts, rights, parents, offsets = [], [], [], [0]
    for _ in range(n_trees):
        left, right, parent = [-1], [-1], [-1]
        for _ in range(int(rng.integers(0, 12))):  # split a random leaf
            leaves = [i for i, c in enumerate(left) if c < 0]
            at = int(rng.choice(leaves))
            left[at], right[at] = len(left), len(left) + 1
            left += [-1, -1]
            right += [-1, -1]
            parent += [at, at]
        lefts += left
        rights += right
        parents += parent
        offsets.append(offsets[-1] + len(left))
    i32 = lambda v: np.array(v, np.int32)  # noqa: E731
    return i32(lefts), i32(rights), i32(parents), np.array(offsets, np.int64)


def test_the_tree_check_over_runs_of_trees_answers_as_one_run(three_threads_always, monkeypatch):
    from dgboost import _threads

    rng = np.random.default_rng(5)
    for trial in range(60):
        left, right, parent, off = _random_forest(int(rng.integers(1, 30)), rng)
        n = left.shape[0]
        feature, default_left = np.where(left >= 0, 1, -1).astype(np.int32), np.zeros(n, np.uint8)
        if trial % 4:  # break one node of one tree: a child, a parent, a feature or a direction
            at = int(rng.integers(0, n))
            what = trial % 4
            if what == 1:
                left[at] = int(rng.integers(-1, 20))
            elif what == 2:
                parent[at] = int(rng.integers(-1, 20))
            else:
                feature[at], default_left[at] = int(rng.integers(-1, 3)), int(rng.integers(0, 3))
        args = (left, right, off, trial % 2 == 0, parent, True, feature, default_left, 2)
        runs = _sound(*args)
        monkeypatch.setattr(_threads, "host_threads", lambda: 1)
        one = _sound(*args)
        monkeypatch.setattr(_threads, "host_threads", lambda: 3)
        assert runs == one, trial
        if trial % 4 == 0:
            assert one, trial  # the unbroken forests pass


def test_the_float_check_refuses_what_the_validator_names(three_threads_always):
    from dgboost._model_schema import _floats_are_sound, _name_bad_float
    from dgboost.errors import ModelFormatError

    rng = np.random.default_rng(6)
    for trial in range(80):
        n = int(rng.integers(1, 200))
        arrays = {
            "split_value": rng.standard_normal(n).astype(np.float32),
            "gain": rng.standard_normal(n).astype(np.float32),
            "cover": rng.random(n),
            "value": rng.standard_normal(n).astype(np.float32),
        }
        categorical = rng.integers(0, 2, n).astype(np.uint8) if trial % 2 else None
        for _ in range(int(rng.integers(0, 3))):
            name = str(rng.choice(list(arrays)))
            arrays[name][int(rng.integers(0, n))] = rng.choice([np.nan, np.inf, -np.inf])
        try:
            _name_bad_float(arrays, categorical, "m")
            named = False
        except ModelFormatError:
            named = True
        assert _floats_are_sound(arrays, categorical) is not named, trial


def test_trees_to_renumber_are_found_as_the_array_expression_finds_them():
    from dgboost.xgboost_json import _parents_not_before

    rng = np.random.default_rng(7)
    for _ in range(50):
        sizes = rng.integers(1, 20, int(rng.integers(1, 30)))
        off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        par = np.array([rng.integers(-1, s) for s in sizes for _ in range(s)], np.int32)
        idx = np.arange(off[-1]) - np.repeat(off[:-1], sizes)
        want = np.unique(np.repeat(np.arange(len(sizes)), sizes)[(par >= 0) & (par >= idx)])
        got = _parents_not_before(par, off)
        assert got.dtype == np.int64 and got.tolist() == want.tolist()


def test_a_booster_imported_by_threads_is_the_booster_imported_by_dicts(three_threads_always):
    test_an_xgboost_booster_imports_the_same_through_columns_and_through_dicts()
