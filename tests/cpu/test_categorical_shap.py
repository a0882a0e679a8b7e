"""TreeSHAP on trees with categorical splits: path tables with category sets, SHAP values,
interaction values and interventional values against the brute-force oracle (which routes
rows by XGBoost's decision rule on the trees' code lists, not by the path tables' bitsets),
and against XGBoost 3.4.1's pred_contribs / pred_interactions on its categorical models."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dgboost.explain import extract_paths, shap_interactions, shap_values, shap_values_interventional
from dgboost.explain.paths import PathTable
from dgboost.testing.shap_oracle import (
    brute_force_interactions,
    brute_force_interventional,
    brute_force_shap,
    predict_margin,
    random_categorical_ensemble,
    random_categorical_rows,
    random_ensemble,
    random_rows,
)
from dgboost.tree import Ensemble, Tree

# (seed, categories per feature (0: numeric), trees per group, max depth, groups)
CASES = [
    (0, [3], 2, 2, 1),
    (1, [5, 0, 2], 3, 3, 1),
    (2, [40, 0, 7, 0], 2, 4, 2),
    (3, [0, 70, 4], 2, 6, 1),  # 70 categories: three bitset words
    (4, [2, 2, 2, 2, 0, 9], 2, 5, 3),
    (5, [100, 3], 3, 6, 1),  # repeated categorical splits on a path: intersected sets
]


def categorical_case(seed, n_categories, n_trees, max_depth, n_groups, n_rows=25):
    rng = np.random.default_rng(seed)
    ens = random_categorical_ensemble(rng, n_categories, n_trees=n_trees, max_depth=max_depth, n_groups=n_groups)
    X = random_categorical_rows(rng, n_rows, n_categories)
    return rng, ens, X


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("method", ["path", "table"])
def test_shap_values_of_categorical_trees_equal_brute_force(case, method):
    _, ens, X = categorical_case(*case)
    got = shap_values(ens, X, method=method)
    np.testing.assert_allclose(got, brute_force_shap(ens, X), rtol=0, atol=1e-9)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("method", ["quadrature", "table", "path"])
def test_interaction_values_of_categorical_trees_equal_brute_force(case, method):
    _, ens, X = categorical_case(*case, n_rows=12)
    got = shap_interactions(ens, X, method=method)
    np.testing.assert_allclose(got, brute_force_interactions(ens, X), rtol=0, atol=1e-9)


@pytest.mark.parametrize("case", CASES)
def test_interventional_values_of_categorical_trees_equal_brute_force(case):
    rng, ens, X = categorical_case(*case, n_rows=10)
    background = random_categorical_rows(rng, 7, case[1])
    got = shap_values_interventional(ens, X, background)
    np.testing.assert_allclose(got, brute_force_interventional(ens, X, background), rtol=0, atol=1e-9)


@pytest.mark.parametrize("case", CASES)
def test_categorical_values_sum_to_the_margin(case):
    _, ens, X = categorical_case(*case)
    margin = predict_margin(ens, X)
    np.testing.assert_allclose(shap_values(ens, X).sum(-1), margin, rtol=0, atol=1e-9)
    np.testing.assert_allclose(shap_interactions(ens, X).sum((-1, -2)), margin, rtol=0, atol=1e-9)


def test_a_numeric_model_has_no_category_arrays_and_its_table_is_unchanged():
    rng = np.random.default_rng(0)
    ens = random_ensemble(rng, 5, n_trees=3, max_depth=4)
    table = extract_paths(ens)
    assert table.cat_offset is None and table.cat_pool is None and not table.has_categorical
    offsets, pool = table.category_arrays()
    assert offsets.shape == (0,)
    X = random_rows(rng, 20, 5)
    np.testing.assert_allclose(shap_values(table, X), brute_force_shap(ens, X), rtol=0, atol=1e-9)


def test_a_categorical_element_carries_its_branch_set_and_the_left_branch_takes_the_rest():
    # root: feature 0 categorical, codes {1, 33} go right (two words); leaves 1 (left), 2 (right)
    tree = Tree(
        left=[1, -1, -1],
        right=[2, -1, -1],
        parent=[-1, 0, 0],
        feature=[0, -1, -1],
        split_value=[np.nan, 0, 0],
        default_left=[1, 0, 0],
        gain=[0, 0, 0],
        cover=[4.0, 3.0, 1.0],
        value=[0, -1.0, 2.0],
        split_type=[1, 0, 0],
        cat_segments=[0, 2, 2],
        cat_sizes=[2, 0, 0],
        cat_values=[1, 33],
    )
    ens = Ensemble()
    ens.append(tree)
    table = extract_paths(ens)
    assert table.has_categorical
    left_set = table.cat_pool[table.cat_offset[1] :][:4]
    right_set = table.cat_pool[table.cat_offset[3] :][:4]
    assert table.cat_offset[0] == -1 and table.cat_offset[2] == -1  # bias elements
    np.testing.assert_array_equal(right_set, [2, 0, 1 << 1, 1 << 1])
    np.testing.assert_array_equal(left_set, [2, 1, ~np.uint32(1 << 1), ~np.uint32(1 << 1)])
    assert np.isinf(table.lower[1]) and np.isinf(table.upper[1])
    X = np.array([[1], [33], [0], [2], [64], [-1], [np.inf], [np.nan], [1.7], [-0.5]], np.float32)
    phi = shap_values(ens, X)[:, 0, 0]
    ev = 0.75 * -1.0 + 0.25 * 2.0
    right, left = 2.0 - ev, -1.0 - ev
    np.testing.assert_allclose(phi, [right, right, left, left, left, left, left, left, right, left], atol=1e-12)


def test_path_tables_of_categorical_models_select_and_pickle_with_their_sets():
    import pickle

    _, ens, X = categorical_case(*CASES[5])
    table = extract_paths(ens)
    order = np.arange(table.n_paths)[::-1]
    picked = table.select_paths(order)
    assert picked.cat_pool is table.cat_pool
    np.testing.assert_allclose(shap_values(picked, X), shap_values(table, X), rtol=0, atol=1e-12)
    again = pickle.loads(pickle.dumps(table))
    assert isinstance(again, PathTable) and again.fingerprint == table.fingerprint
    np.testing.assert_array_equal(shap_values(again, X), shap_values(table, X))


# ---------------------------------------------------------------------------------------
# against XGBoost 3.4.1 on its own categorical models
# ---------------------------------------------------------------------------------------
def _xgboost_frame(seed: int, n: int = 800):
    import pandas as pd

    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "distance": rng.normal(size=n),
            "origin": pd.Categorical(rng.choice(["EWR", "JFK", "LGA"], size=n)),  # one-hot splits
            "carrier": pd.Categorical(rng.choice([f"c{i}" for i in range(16)], size=n)),  # partitions
            "tailnum": pd.Categorical(rng.choice([f"N{i}" for i in range(300)], size=n)),
            "hour": rng.integers(5, 23, size=n).astype(float),
        }
    )
    frame.loc[rng.random(n) < 0.1, "tailnum"] = np.nan
    frame.loc[rng.random(n) < 0.1, "distance"] = np.nan
    codes = frame["carrier"].cat.codes.to_numpy()
    z = np.nan_to_num(frame["distance"].to_numpy()) + (codes % 3 == 0) + 0.1 * (frame["hour"] - 14)
    z = z + 0.5 * (frame["origin"] == "JFK") + (frame["tailnum"].cat.codes.to_numpy() % 7 == 0)
    return frame, z.to_numpy() if hasattr(z, "to_numpy") else z, rng


def _train_xgboost_categorical(objective: str, depth: int, seed: int = 0, rounds: int = 10):
    import xgboost as xgb

    frame, z, rng = _xgboost_frame(seed)
    params = {"objective": objective, "max_depth": depth, "eta": 0.3, "nthread": 1, "seed": seed}
    params.update(max_cat_to_onehot=4, min_child_weight=0.5)
    if objective == "binary:logistic":
        y = (z + rng.normal(size=z.shape[0]) > 1).astype(float)
    elif objective == "multi:softprob":
        y = np.digitize(z, [0.3, 1.5]).astype(float)
        params["num_class"] = 3
    else:
        y = z + 0.1 * rng.normal(size=z.shape[0])
    booster = xgb.train(params, xgb.DMatrix(frame, label=y, enable_categorical=True), rounds)
    return booster, frame


def _codes(frame) -> np.ndarray:
    """float32 rows: category codes (NaN missing) and numbers, as a categorical DMatrix holds them."""
    cols = []
    for c in frame.columns:
        col = frame[c]
        if str(col.dtype) == "category":
            codes = col.cat.codes.to_numpy().astype(np.float64)
            codes[codes < 0] = np.nan
            cols.append(codes)
        else:
            cols.append(col.to_numpy(dtype=np.float64))
    return np.stack(cols, axis=1).astype(np.float32)


XGB_CASES = [("binary:logistic", 6), ("reg:squarederror", 4), ("multi:softprob", 3)]


@pytest.mark.parametrize("objective,depth", XGB_CASES)
def test_shap_values_match_xgboost_pred_contribs_on_its_categorical_models(objective, depth):
    import xgboost as xgb

    from dgboost.testing.shap_oracle import ensemble_from_xgboost

    booster, frame = _train_xgboost_categorical(objective, depth)
    ens = ensemble_from_xgboost(booster)
    assert ens.has_categorical
    X = _codes(frame)[:300]
    dm = xgb.DMatrix(frame.iloc[:300], enable_categorical=True)
    margin = booster.predict(dm, output_margin=True)
    np.testing.assert_allclose(predict_margin(ens, X).squeeze(), margin, rtol=0, atol=1e-5)
    expected = booster.predict(dm, pred_contribs=True)
    expected = expected[:, None] if ens.n_groups == 1 else expected
    for method in ("table", "path"):
        np.testing.assert_allclose(shap_values(ens, X, method=method), expected, rtol=0, atol=1e-5)


@pytest.mark.parametrize("objective,depth", XGB_CASES)
def test_interaction_values_match_xgboost_pred_interactions_on_its_categorical_models(objective, depth):
    import xgboost as xgb

    from dgboost.testing.shap_oracle import ensemble_from_xgboost

    booster, frame = _train_xgboost_categorical(objective, depth, rounds=5)
    ens = ensemble_from_xgboost(booster)
    X = _codes(frame)[:60]
    expected = booster.predict(xgb.DMatrix(frame.iloc[:60], enable_categorical=True), pred_interactions=True)
    expected = expected[:, None] if ens.n_groups == 1 else expected
    for method in ("quadrature", "table", "path"):
        np.testing.assert_allclose(shap_interactions(ens, X, method=method), expected, rtol=0, atol=1e-5)


def _reversed_categories(frame):
    """``frame`` with every category column's categories in reverse order (same values)."""
    out = frame.copy()
    for c in out.columns:
        if str(out[c].dtype) == "category":
            out[c] = out[c].cat.reorder_categories(out[c].cat.categories[::-1])
    return out


@pytest.mark.parametrize("objective,depth", XGB_CASES[:2])
def test_the_explainer_of_an_xgboost_categorical_model_matches_xgboost_on_frames_in_any_category_order(
    objective, depth
):
    import xgboost as xgb

    import dgboost as dg

    booster, frame = _train_xgboost_categorical(objective, depth)
    rows = frame.iloc[:200]
    expected = booster.predict(xgb.DMatrix(rows, enable_categorical=True), pred_contribs=True)
    explainer = dg.TreeExplainer(booster)
    assert explainer.table.has_categorical
    for frame_in in (rows, _reversed_categories(rows)):
        np.testing.assert_allclose(explainer.shap_values(frame_in), expected[:, :-1], rtol=0, atol=1e-5)
    np.testing.assert_allclose(explainer.expected_value, expected[0, -1], rtol=0, atol=1e-5)


def test_booster_predict_contributions_of_a_loaded_xgboost_categorical_model_match_xgboost():
    import xgboost as xgb

    import dgboost as dg

    booster, frame = _train_xgboost_categorical("binary:logistic", 5, rounds=6)
    rows = frame.iloc[:80]
    dm = xgb.DMatrix(rows, enable_categorical=True)
    loaded = dg.Booster.from_xgboost(booster)
    got = loaded.predict(_reversed_categories(rows), pred_contribs=True)
    np.testing.assert_allclose(got, booster.predict(dm, pred_contribs=True), rtol=0, atol=1e-5)
    got = loaded.predict(rows, pred_interactions=True)
    np.testing.assert_allclose(got, booster.predict(dm, pred_interactions=True), rtol=0, atol=1e-5)


def _dgboost_categorical_model(objective="binary:logistic", rounds=12):
    import dgboost as dg

    frame, z, rng = _xgboost_frame(1, n=1500)
    params = {"objective": objective, "max_depth": 6, "max_cat_to_onehot": 4}
    y = (z + rng.normal(size=z.shape[0]) > 1).astype(float)
    if objective == "multi:softprob":
        y = np.digitize(z, [0.3, 1.5]).astype(float)
        params["num_class"] = 3
    booster = dg.train(params, dg.DMatrix(frame, label=y, enable_categorical=True), rounds)
    return booster, frame


@pytest.mark.parametrize("objective", ["binary:logistic", "multi:softprob"])
def test_contributions_of_a_trained_categorical_model_add_up_and_equal_the_explainers(objective):
    import dgboost as dg

    booster, frame = _dgboost_categorical_model(objective, rounds=8 if objective == "binary:logistic" else 3)
    assert booster.ensemble.has_categorical
    rows = frame.iloc[:300]
    margin = booster.predict(rows, output_margin=True)
    contribs = booster.predict(rows, pred_contribs=True)
    np.testing.assert_allclose(contribs.sum(-1), margin, rtol=0, atol=1e-5)
    interactions = booster.predict(rows.iloc[:50], pred_interactions=True)
    np.testing.assert_allclose(interactions.sum((-1, -2)), margin[:50], rtol=0, atol=1e-5)
    explainer = dg.TreeExplainer(booster)
    values = explainer.shap_values(_reversed_categories(rows))
    want = contribs[..., :-1] if contribs.ndim == 2 else np.moveaxis(contribs[..., :-1], 1, 2)
    np.testing.assert_allclose(values, want, rtol=0, atol=1e-6)


def test_trained_categorical_models_equal_brute_force_and_the_interventional_oracle():
    import dgboost as dg

    booster, frame = _dgboost_categorical_model(rounds=3)
    ens = booster.ensemble
    X = _codes(frame)[:20]
    np.testing.assert_allclose(shap_values(ens, X), brute_force_shap(ens, X), rtol=0, atol=1e-9)
    np.testing.assert_allclose(shap_interactions(ens, X), brute_force_interactions(ens, X), rtol=0, atol=1e-9)
    background = _codes(frame)[100:110]
    got = shap_values_interventional(ens, X, background)
    np.testing.assert_allclose(got, brute_force_interventional(ens, X, background), rtol=0, atol=1e-9)
    # the explainer re-codes frames into the same codes
    explainer = dg.TreeExplainer(booster, data=frame.iloc[100:110])
    np.testing.assert_allclose(explainer.shap_values(frame.iloc[:20]), got[:, 0, :-1], rtol=0, atol=1e-9)


def test_a_packed_categorical_table_gives_the_values_of_the_original():
    from dgboost.explain import pack

    _, ens, X = categorical_case(*CASES[3])
    table = extract_paths(ens)
    packed = pack(table)
    assert packed.table.has_categorical
    np.testing.assert_allclose(shap_values(packed, X), shap_values(table, X), rtol=0, atol=1e-12)


def test_covers_recounted_from_category_frames_keep_the_categorical_splits():
    import dgboost as dg

    booster, frame = _dgboost_categorical_model(rounds=4)
    background = _reversed_categories(frame.iloc[:200])
    explainer = dg.TreeExplainer(booster, data=background, feature_perturbation="tree_path_dependent")
    assert explainer.table.has_categorical
    rows = frame.iloc[300:340]
    values = explainer.shap_values(rows)  # checks additivity against the model's margins
    ens = explainer.ensemble
    want = brute_force_shap(ens, _codes(rows))[:, 0, :-1]
    np.testing.assert_allclose(values, want, rtol=0, atol=1e-9)


def test_category_sets_are_stored_per_tree_node_so_a_4000_category_feature_stays_small():
    rng = np.random.default_rng(11)
    ens = random_categorical_ensemble(rng, [4000, 0, 3], n_trees=4, max_depth=8)
    table = extract_paths(ens)
    split_type, _, words, _ = ens.categorical_kernel_arrays()
    parents = np.flatnonzero(split_type == 1)
    # at most one set per child of a categorical split, each of at most the widest set's words
    bound = 2 * parents.size * (2 + int(words.max()))
    assert 0 < table.cat_pool.size <= bound
    assert table.cat_pool.size < (table.cat_offset >= 0).sum() * (2 + int(words.max()))  # shared by paths
    X = random_categorical_rows(rng, 30, [4000, 0, 3])
    np.testing.assert_allclose(shap_values(table, X), brute_force_shap(ens, X), rtol=0, atol=1e-9)


def test_numeric_and_categorical_splits_on_one_feature_of_a_path_both_hold():
    # a hand-made tree (XGBoost never makes one): feature 0 split as a number (x < 2.5), then
    # as categories {1, 2} (right) below the left child, then as a number again (x < 1.5)
    tree = Tree(
        left=[1, 3, -1, 5, -1, -1, -1],
        right=[2, 4, -1, 6, -1, -1, -1],
        parent=[-1, 0, 0, 1, 1, 3, 3],
        feature=[0, 0, -1, 0, -1, -1, -1],
        split_value=[2.5, 0, 0, 1.5, 0, 0, 0],
        default_left=[0, 1, 0, 0, 0, 0, 0],
        gain=np.zeros(7),
        cover=[10.0, 7.0, 3.0, 4.0, 3.0, 1.0, 3.0],
        value=[0, 0, 1.0, 0, -2.0, 0.5, 3.0],
        split_type=[0, 1, 0, 0, 0, 0, 0],
        cat_segments=[0, 0, 2, 2, 2, 2, 2],
        cat_sizes=[0, 2, 0, 0, 0, 0, 0],
        cat_values=[1, 2],
    )
    ens = Ensemble(base_margin=0.5)
    ens.append(tree)
    X = np.array([[v] for v in (0, 1, 1.5, 2, 2.4, 2.5, 3, -1, np.nan, 7)], np.float32)
    np.testing.assert_allclose(shap_values(ens, X), brute_force_shap(ens, X), rtol=0, atol=1e-12)
    np.testing.assert_allclose(shap_values(ens, X).sum(-1), predict_margin(ens, X), rtol=0, atol=1e-12)


@settings(max_examples=12, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    n_categories=st.lists(st.sampled_from([0, 1, 2, 5, 33, 200]), min_size=1, max_size=6),
    depth=st.integers(0, 6),
    n_groups=st.integers(1, 2),
    n_rows=st.integers(0, 20),
    nan_prob=st.sampled_from([0.0, 0.3, 1.0]),
)
def test_categorical_values_equal_brute_force_for_any_shape(seed, n_categories, depth, n_groups, n_rows, nan_prob):
    rng = np.random.default_rng(seed)
    ens = random_categorical_ensemble(rng, n_categories, n_trees=2, max_depth=depth, n_groups=n_groups)
    X = random_categorical_rows(rng, n_rows, n_categories, nan_prob=nan_prob)
    got = shap_values(ens, X)
    assert got.shape == (n_rows, n_groups, len(n_categories) + 1)
    np.testing.assert_allclose(got, brute_force_shap(ens, X), rtol=0, atol=1e-9)
    np.testing.assert_allclose(shap_values(ens, X, method="path"), got, rtol=0, atol=1e-9)
    np.testing.assert_allclose(shap_interactions(ens, X).sum(-1), got, rtol=0, atol=1e-9)


def test_contributions_of_a_tree_range_of_a_categorical_model_add_up_to_its_margin():
    booster, frame = _dgboost_categorical_model(rounds=6)
    rows = frame.iloc[:100]
    for iteration_range in ((0, 2), (2, 6)):
        contribs = booster.predict(rows, pred_contribs=True, iteration_range=iteration_range)
        margin = booster.predict(rows, output_margin=True, iteration_range=iteration_range)
        np.testing.assert_allclose(contribs.sum(-1), margin, rtol=0, atol=1e-5)
