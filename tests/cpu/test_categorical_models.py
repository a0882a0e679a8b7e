"""Categorical training and models end to end on the CPU (docs/design.md §11).

Trees against XGBoost 3.4.1's ``hist`` with ``enable_categorical`` on data where the two
cannot disagree (every feature categorical or integer-valued, so both have the same bins;
no near-ties), model files both ways, identity across ranks, XGBoost's decision rule.
"""

import json

import numpy as np
import pandas as pd
import pytest

import dgboost as dg
from dgboost.comm import run_in_threads
from dgboost.model_io import model_to_json
from dgboost.testing.reference import leaf_index_reference, predict_margin_reference_f32
from dgboost.tree import Ensemble, Tree

xgb = pytest.importorskip("xgboost")

TYPES = ["c", "c", "c", "q"]


def _data(n=3000, seed=0, missing=0.05):
    """Codes of three categorical features (3, 12 and 40 categories) and an integer feature,
    NaN missing; a target driven by all of them."""
    rng = np.random.default_rng(seed)
    k = [3, 12, 40]
    x = np.stack([rng.integers(0, c, n) for c in k] + [rng.integers(0, 8, n)], axis=1).astype(np.float32)
    effects = [rng.normal(size=c) * s for c, s in zip(k, (1.0, 2.0, 1.5))]
    y = sum(e[x[:, j].astype(int)] for j, e in enumerate(effects)) + 0.3 * x[:, 3] + rng.normal(size=n) * 0.2
    x[rng.random(x.shape) < missing] = np.nan
    return x, y.astype(np.float32)


def _both(params, x, y, rounds, types=TYPES):
    ours = dg.train(params, dg.DMatrix(x, y, feature_types=types), rounds)
    theirs = xgb.train(
        {**params, "tree_method": "hist"}, xgb.DMatrix(x, y, feature_types=types, enable_categorical=True), rounds
    )
    return ours, theirs


def _frames(ours, theirs):
    a, b = ours.trees_to_dataframe(), theirs.trees_to_dataframe()
    assert len(a) == len(b)
    return a, b


def _assert_same_trees(ours, theirs, x, rel_gain=1e-3, atol_leaf=1e-5, types=TYPES):
    """Same structure, features, category sets and routing; gains and leaves to tolerance."""
    a, b = _frames(ours, theirs)
    for col in ("Node", "Feature", "Yes", "No", "Missing"):
        assert a[col].tolist() == b[col].tolist(), col
    assert [c if c is None else list(c) for c in a["Category"]] == [c if c is None else list(c) for c in b["Category"]]
    leaf = (a["Feature"] == "Leaf").to_numpy()
    # XGBoost's gains are float32 differences of the children's and the node's own gains:
    # a small gain of a large node carries the float32 rounding of the large terms
    np.testing.assert_allclose(a["Gain"][~leaf].astype(float), b["Gain"][~leaf].astype(float), rtol=rel_gain, atol=1e-3)
    np.testing.assert_allclose(a["Gain"][leaf].astype(float), b["Gain"][leaf].astype(float), atol=atol_leaf)
    np.testing.assert_allclose(
        ours.predict(dg.DMatrix(x, feature_types=types)),
        theirs.predict(xgb.DMatrix(x, feature_types=types, enable_categorical=True)),
        atol=1e-5,
    )


@pytest.mark.parametrize(
    "params",
    [
        {"max_depth": 4},
        {"max_depth": 3, "max_cat_to_onehot": 16, "reg_lambda": 0.5},
        {"max_depth": 4, "max_cat_threshold": 5, "min_child_weight": 3},
        {"grow_policy": "lossguide", "max_leaves": 12, "max_depth": 0},
    ],
    ids=["depthwise", "more-one-hot", "threshold-5", "lossguide"],
)
def test_trees_match_xgboost_hist_on_categorical_data(params):
    x, y = _data()
    ours, theirs = _both({**params, "base_score": 0.5}, x, y, 4)
    _assert_same_trees(ours, theirs, x)


def test_a_binary_classifier_on_categorical_data_matches_xgboost():
    x, y = _data(seed=2)
    label = (y > np.median(y)).astype(np.float32)
    ours, theirs = _both({"objective": "binary:logistic", "max_depth": 3, "base_score": 0.5}, x, label, 4)
    _assert_same_trees(ours, theirs, x)


def test_a_multiclass_model_on_categorical_data_matches_xgboost():
    x, y = _data(seed=4)
    label = np.digitize(y, np.quantile(y, [0.33, 0.66])).astype(np.float32)
    params = {"objective": "multi:softprob", "num_class": 3, "max_depth": 3, "base_score": 0.5}
    ours, theirs = _both(params, x, label, 3)
    _assert_same_trees(ours, theirs, x)


def test_a_monotone_constraint_on_a_categorical_feature_is_applied_as_xgboost_applies_it():
    x, y = _data(seed=5)
    params = {"max_depth": 3, "monotone_constraints": "(0,1,0,1)", "base_score": 0.5}
    ours, theirs = _both(params, x, y, 3)
    _assert_same_trees(ours, theirs, x)


def test_interaction_constraints_apply_to_categorical_features():
    x, y = _data(seed=6)
    params = {"max_depth": 3, "interaction_constraints": "[[0, 3], [1, 2]]", "base_score": 0.5}
    ours, theirs = _both(params, x, y, 3)
    _assert_same_trees(ours, theirs, x)


def _awkward_data(n=2000, seed=3):
    """A column with no value, sparse codes (0, 50, 51), exactly 4 categories, 3 categories
    and an integer column; weights."""
    rng = np.random.default_rng(seed)
    cols = [
        np.full(n, np.nan),
        rng.choice([0, 50, 51], n).astype(float),
        rng.integers(0, 4, n).astype(float),
        rng.integers(0, 3, n).astype(float),
        rng.integers(0, 8, n).astype(float),
    ]
    x = np.stack(cols, 1).astype(np.float32)
    x[rng.random(x.shape) < 0.05] = np.nan
    b, c, d = (np.nan_to_num(x[:, j]) for j in (1, 2, 3))
    y = (b == 50) * 2.0 + c % 2 + d * 0.5 + rng.normal(size=n) * 0.1
    return x, y.astype(np.float32), rng.uniform(0.5, 2.0, n).astype(np.float32)


@pytest.mark.parametrize(
    "params",
    [
        {"max_depth": 3},
        {"max_depth": 3, "max_cat_to_onehot": 1},
        {"max_depth": 3, "max_cat_to_onehot": 100},
        {"max_depth": 3, "alpha": 1.0, "max_delta_step": 0.5, "gamma": 0.5},
    ],
    ids=["defaults", "always-partition", "always-one-hot", "regularised"],
)
def test_trees_match_xgboost_on_empty_sparse_and_boundary_categorical_columns(params):
    x, y, w = _awkward_data()
    types = ["c", "c", "c", "c", "q"]
    params = {**params, "base_score": 0.5}
    ours = dg.train(params, dg.DMatrix(x, y, weight=w, feature_types=types), 3)
    theirs = xgb.train(
        {**params, "tree_method": "hist"}, xgb.DMatrix(x, y, weight=w, feature_types=types, enable_categorical=True), 3
    )
    _assert_same_trees(ours, theirs, x, types=types)


def _frame(n=2000, seed=0):
    rng = np.random.default_rng(seed)
    names = np.array([f"airport_{i:02d}" for i in range(25)])
    df = pd.DataFrame(
        {
            "origin": pd.Categorical(rng.choice(names, n), categories=sorted(names, reverse=True)),
            "distance": rng.integers(0, 20, n).astype(np.float32),
            "carrier": pd.Categorical(rng.choice([10, 20, 30], n)),
        }
    )
    df.loc[rng.random(n) < 0.05, "origin"] = np.nan
    effect = dict(zip(names, rng.normal(size=25) * 2))
    y = df["origin"].map(effect).astype(float).fillna(0.5) + 0.1 * df["distance"] + (df["carrier"] == 20) * 1.5
    return df, y.to_numpy(np.float32)


@pytest.mark.parametrize("ext", ["json", "ubj"])
def test_an_xgboost_categorical_model_predicts_the_same_in_dgboost(tmp_path, ext):
    df, y = _frame()
    theirs = xgb.train({"max_depth": 4}, xgb.DMatrix(df, y, enable_categorical=True), 6)
    theirs.save_model(tmp_path / f"m.{ext}")
    ours = dg.Booster(model_file=str(tmp_path / f"m.{ext}"))
    want = theirs.predict(xgb.DMatrix(df, enable_categorical=True))
    np.testing.assert_array_equal(ours.predict(dg.DMatrix(df, enable_categorical=True)), want)
    assert ours.get_dump(with_stats=True) == theirs.get_dump(with_stats=True)
    assert ours.get_dump(dump_format="json") == theirs.get_dump(dump_format="json")
    assert ours.trees_to_dataframe()["Category"].tolist() == theirs.trees_to_dataframe()["Category"].tolist()
    # the stored categories re-code a frame whose category order differs, and are written back as read
    shuffled = df.assign(origin=df["origin"].cat.reorder_categories(sorted(df["origin"].cat.categories)))
    np.testing.assert_array_equal(ours.predict(dg.DMatrix(shuffled, enable_categorical=True)), want)
    cats = json.loads(theirs.save_raw("json"))["learner"]["gradient_booster"]["model"]["cats"]
    assert json.loads(ours.save_raw("json"))["learner"]["gradient_booster"]["model"]["cats"] == cats


@pytest.mark.parametrize("ext", ["json", "ubj"])
def test_a_dgboost_categorical_model_predicts_the_same_in_xgboost(tmp_path, ext):
    df, y = _frame(seed=1)
    ours = dg.train({"max_depth": 4}, dg.DMatrix(df, y, enable_categorical=True), 6)
    assert any(":{" in t for t in ours.get_dump())
    ours.save_model(tmp_path / f"m.{ext}")
    theirs = xgb.Booster(model_file=str(tmp_path / f"m.{ext}"))
    # XGBoost reads the stored categories: a frame whose category order differs is re-coded
    shuffled = df.assign(origin=df["origin"].cat.reorder_categories(sorted(df["origin"].cat.categories)))
    want = ours.predict(dg.DMatrix(df, enable_categorical=True))
    np.testing.assert_array_equal(theirs.predict(xgb.DMatrix(shuffled, enable_categorical=True)), want)
    back = dg.Booster(model_file=str(tmp_path / f"m.{ext}"))
    assert model_to_json(back.ensemble, back.meta) == model_to_json(ours.ensemble, ours.meta)


def test_a_model_trained_on_codes_saves_no_category_values_as_xgboost():
    x, y = _data(n=500)
    ours = dg.train({"max_depth": 2}, dg.DMatrix(x, y, feature_types=TYPES), 2)
    saved = ours.save_raw("json").decode()
    assert '"cats":{"enc":[],"feature_segments":[],"sorted_idx":[]}' in saved
    theirs = xgb.Booster()
    theirs.load_model(bytearray(ours.save_raw("ubj")))
    np.testing.assert_array_equal(
        theirs.predict(xgb.DMatrix(x, feature_types=TYPES, enable_categorical=True)),
        ours.predict(dg.DMatrix(x, feature_types=TYPES)),
    )


@pytest.mark.parametrize("policy", ["depthwise", "lossguide"])
def test_categorical_models_are_byte_identical_on_one_two_and_three_ranks(policy):
    x, y = _data(n=1500, seed=7)
    x[:500, 2] = np.where(x[:500, 2] > 30, 1, x[:500, 2])  # the first rank never sees the top codes
    params = {"max_depth": 4, "grow_policy": policy, "max_leaves": 10 if policy == "lossguide" else 0}

    def train(world):
        edges = np.linspace(0, x.shape[0], world + 1).astype(int)
        edges[1:-1] += 37  # uneven parts

        def rank(comm, r):
            part = slice(edges[r], edges[r + 1])
            booster = dg.train(params, dg.DMatrix(x[part], y[part], feature_types=TYPES), 4, comm=comm)
            assert booster.ensemble.has_categorical
            return booster.save_raw("json")

        return run_in_threads(world, rank, timeout=300)[0]

    one = train(1)
    assert train(2) == one
    assert train(3) == one


def _one_split_tree(codes, default_left=0):
    """A stump on feature 0 sending ``codes`` right (leaf values -1 left, +1 right)."""
    codes = np.asarray(codes, np.int32)
    return Tree(
        left=[1, -1, -1],
        right=[2, -1, -1],
        parent=[-1, 0, 0],
        feature=[0, -1, -1],
        split_value=[0, 0, 0],
        default_left=[default_left, 0, 0],
        gain=[1, 0, 0],
        cover=[3, 1, 2],
        value=[0, -1, 1],
        split_type=[1, 0, 0],
        cat_segments=[0, 0, 0],
        cat_sizes=[codes.size, 0, 0],
        cat_values=codes,
    )


def test_a_category_not_seen_in_training_goes_left_and_values_are_truncated_as_xgboost():
    ens = Ensemble(1, 0.0)
    ens.append(_one_split_tree([1, 3, 40]))
    x = np.array(
        [[1], [3], [40], [3.7], [0], [2], [41], [64], [1e7], [2.0**24], [-1], [-0.5], [np.inf], [-np.inf], [np.nan]],
        np.float32,
    )
    want_right = [1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]  # NaN: the default child, right here
    leaves = dg.backend.get_backend("cpu").predict_leaf(ens, x, 0, 1)[:, 0]
    np.testing.assert_array_equal(leaves == 2, want_right)
    np.testing.assert_array_equal(leaf_index_reference(ens, x)[:, 0] == 2, want_right)
    np.testing.assert_array_equal(predict_margin_reference_f32(ens, x)[:, 0], np.where(want_right, 1.0, -1.0))


def test_an_unseen_category_goes_left_in_xgboost_too(tmp_path):
    x, y = _data(n=800, seed=9)
    ours = dg.train({"max_depth": 3}, dg.DMatrix(x, y, feature_types=TYPES), 3)
    ours.save_model(tmp_path / "m.json")
    theirs = xgb.Booster(model_file=str(tmp_path / "m.json"))
    unseen = x[:50].copy()
    unseen[:, 1] = 12  # feature 1 has codes 0..11
    unseen[:, 2] = 45.0  # feature 2 has codes 0..39
    np.testing.assert_allclose(
        ours.predict(dg.DMatrix(unseen, feature_types=TYPES)),
        theirs.predict(xgb.DMatrix(unseen, feature_types=TYPES, enable_categorical=True)),
        atol=1e-6,
    )


def test_numeric_models_carry_no_categorical_arrays():
    x, y = _data(n=500)
    booster = dg.train({"max_depth": 2}, dg.DMatrix(x, y), 2)
    assert booster.ensemble.cat_arrays is None and not booster.ensemble.has_categorical
    assert '"categorical"' not in model_to_json(booster.ensemble, booster.meta)


def test_categorical_split_parameters_are_validated():
    x, y = _data(n=200)
    for bad in ({"max_cat_to_onehot": 0}, {"max_cat_threshold": 0}):
        with pytest.raises(dg.DGBoostError, match=next(iter(bad))):
            dg.train(bad, dg.DMatrix(x, y, feature_types=TYPES), 1)


def _tree0(doc):
    return doc["learner"]["gradient_booster"]["model"]["trees"][0]


def _cats(doc):
    return doc["learner"]["gradient_booster"]["model"]["cats"]


def _set_at(key, i, value):
    def mutate(doc):
        _tree0(doc)[key][i] = value

    return mutate


_CATEGORICAL_CORRUPTIONS = {
    "segment past the end": (_set_at("categories_segments", 0, 10**6), "outside the .* stored categories"),
    "empty set": (_set_at("categories_sizes", 0, 0), "outside the .* stored categories \\(or none\\)"),
    "negative code": (_set_at("categories", 0, -3), "category code is out of range"),
    "unsorted codes": (lambda d: _tree0(d)["categories"].reverse(), "not sorted and distinct"),
    "node out of range": (_set_at("categories_nodes", 0, 10**6), "categories_nodes has a node out of range"),
    "split type 2": (_set_at("split_type", 0, 2), "split_type disagrees|split_type must be 0 or 1"),
    "type without node": (_set_at("split_type", -1, 1), "split_type disagrees with categories_nodes"),
    "lengths differ": (lambda d: _tree0(d)["categories_sizes"].append(1), "differ in length"),
    "numeric feature": (
        lambda d: d["learner"]["feature_types"].__setitem__(0, "q"),
        "splits categorically on feature 0, whose type is not 'c'",
    ),
    "float categories": (
        lambda d: _cats(d)["enc"].__setitem__(2, {"type": 8, "values": [1.5]}),
        "floating-point categories are not supported",
    ),
    "enc of another width": (lambda d: _cats(d)["enc"].pop(), "enc has 2 features, num_feature is 3"),
    "names past their bytes": (
        lambda d: _cats(d)["enc"][0]["offsets"].__setitem__(-1, 10**4),
        "offsets do not delimit",
    ),
}


@pytest.mark.parametrize("name", sorted(_CATEGORICAL_CORRUPTIONS))
def test_corrupt_categorical_arrays_in_an_xgboost_model_are_model_format_errors(name):
    df, y = _frame(n=600)
    booster = xgb.train({"max_depth": 3}, xgb.DMatrix(df, y, enable_categorical=True), 2)
    doc = json.loads(booster.save_raw("json"))
    assert _tree0(doc)["split_type"][0] == 1 and len(_tree0(doc)["categories"]) > 1
    dg.model_io.import_xgboost_dict(json.loads(json.dumps(doc)))  # the intact model loads
    mutate, message = _CATEGORICAL_CORRUPTIONS[name]
    mutate(doc)
    with pytest.raises(dg.ModelFormatError, match=message):
        dg.model_io.import_xgboost_dict(doc)


def test_graphviz_shows_category_sets_and_edges_as_xgboost(tmp_path):
    import re

    pytest.importorskip("graphviz")
    df, y = _frame(n=800)
    theirs = xgb.train({"max_depth": 3}, xgb.DMatrix(df, y, enable_categorical=True), 1)
    theirs.save_model(tmp_path / "m.json")
    ours = dg.Booster(model_file=str(tmp_path / "m.json"))
    want, got = xgb.to_graphviz(theirs, num_trees=0).source, dg.to_graphviz(ours, num_trees=0).source
    node = re.compile(r'^\s*(\d+) \[ label="([^"]*)"', re.M)
    edge = re.compile(r'^\s*(\d+) -> (\d+) \[label="([^"]*)"', re.M)
    assert dict(node.findall(got)) == dict(node.findall(want))
    assert any(":{" in label for _, label in node.findall(got))
    assert sorted(edge.findall(got)) == sorted(edge.findall(want))


@pytest.mark.slow
def test_trees_match_xgboost_with_thousands_of_long_tailed_categories():
    rng = np.random.default_rng(0)
    n, sizes = 300_000, [16, 3, 100, 4000]
    x = np.stack([rng.zipf(1.3, n) % k for k in sizes], axis=1).astype(np.float32)
    x[rng.random(x.shape) < 0.02] = np.nan
    effects = [rng.normal(size=k) for k in sizes]
    y = sum(e[np.nan_to_num(x[:, j]).astype(int)] for j, e in enumerate(effects)) + rng.normal(size=n)
    types = ["c"] * 4
    params = {"max_depth": 6, "base_score": 0.5}
    ours = dg.train(params, dg.DMatrix(x, y, feature_types=types), 20)
    theirs = xgb.train(
        {**params, "tree_method": "hist"}, xgb.DMatrix(x, y, feature_types=types, enable_categorical=True), 20
    )
    _assert_same_trees(ours, theirs, x, types=types)
