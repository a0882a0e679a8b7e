"""TreeSHAP values, interactions and interventional values against brute force and XGBoost."""

import importlib.util

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dgboost.explain import (
    build_tables,
    extract_paths,
    pack,
    shap_interactions,
    shap_values,
    shap_values_interventional,
    shap_values_path,
    shap_values_table,
)
from dgboost.explain.tables import InteractionTables, build_interaction_tables, interaction_table_entries, table_entries
from dgboost.testing.shap_oracle import (
    brute_force_interactions,
    brute_force_interventional,
    brute_force_shap,
    chain_tree,
    ensemble_from_xgboost,
    predict_margin,
    random_ensemble,
    random_rows,
    random_tree,
)
from dgboost.tree import Ensemble, Tree

# (seed, n_features, n_trees per group, max_depth, n_groups)
CASES = [
    (0, 1, 2, 1, 1),
    (1, 3, 3, 3, 1),
    (2, 5, 2, 4, 2),
    (3, 8, 2, 6, 1),
    (4, 10, 2, 5, 3),
    (5, 4, 4, 6, 1),
    (6, 10, 1, 6, 2),
    (7, 2, 3, 6, 1),
]


def make_case(seed, n_features, n_trees, max_depth, n_groups, n_rows=25, **kw):
    rng = np.random.default_rng(seed)
    ens = random_ensemble(rng, n_features, n_trees=n_trees, max_depth=max_depth, n_groups=n_groups, **kw)
    X = random_rows(rng, n_rows, n_features)
    return rng, ens, X


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("method", ["path", "table"])
def test_shap_values_equal_brute_force_shapley_values(case, method):
    _, ens, X = make_case(*case)
    got = shap_values(ens, X, method=method)
    assert got.shape == (X.shape[0], ens.n_groups, X.shape[1] + 1)
    np.testing.assert_allclose(got, brute_force_shap(ens, X), rtol=0, atol=1e-6)


@pytest.mark.parametrize("case", CASES[:6])
def test_interaction_values_equal_brute_force_shapley_interactions(case):
    _, ens, X = make_case(*case, n_rows=12)
    got = shap_interactions(ens, X)
    F = X.shape[1]
    assert got.shape == (X.shape[0], ens.n_groups, F + 1, F + 1)
    np.testing.assert_allclose(got, brute_force_interactions(ens, X), rtol=0, atol=1e-6)


@pytest.mark.parametrize("case", CASES[:6])
def test_interventional_values_equal_brute_force_over_the_background(case):
    rng, ens, X = make_case(*case, n_rows=10)
    background = random_rows(rng, 7, X.shape[1])
    got = shap_values_interventional(ens, X, background)
    np.testing.assert_allclose(got, brute_force_interventional(ens, X, background), rtol=0, atol=1e-6)
    # each row sums to its margin; the bias is the mean background margin
    np.testing.assert_allclose(got.sum(-1), predict_margin(ens, X), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(got[0, :, -1], predict_margin(ens, background).mean(0), rtol=1e-12, atol=1e-12)


def test_path_and_table_methods_agree_to_1e_9_whatever_the_table_budget():
    _, ens, X = make_case(11, 10, 12, 6, 2, n_rows=300)
    table = extract_paths(ens)
    ref = shap_values_path(table, X)
    full = build_tables(table)
    assert full.coverage(table) == 1.0
    some = build_tables(table, max_table_bytes=full.n_bytes // 3)
    short = build_tables(table, max_k=3)
    none = build_tables(table, max_table_bytes=0)
    assert some.n_bytes <= full.n_bytes // 3 and 0 < some.coverage(table) < 1
    assert none.n_bytes == 0 and none.coverage(table) == 0.0
    k = table.path_lengths - 1
    assert np.all(short.has_table[(k > 3)] == False)  # noqa: E712
    for tabs in (full, some, short, none):
        np.testing.assert_allclose(shap_values_table(table, X, tables=tabs), ref, rtol=0, atol=1e-9)
    # the budget prefers short paths (most saved per byte)
    if some.coverage(table) < 1:
        assert k[some.has_table & (k > 0)].max() <= k[~some.has_table].min()


def test_weight_tables_hold_the_shapley_weights_of_the_other_elements():
    from math import factorial

    _, ens, _ = make_case(12, 6, 3, 5, 1)
    table = extract_paths(ens)
    tabs = build_tables(table)
    for p in range(table.n_paths):
        s, e = table.path_offsets[p] + 1, table.path_offsets[p + 1]
        z, k = table.zero_fraction[s:e], e - s
        if k == 0:
            continue
        assert tabs.values[tabs.table_offsets[p] :].size >= table_entries(k)
        for i in range(k):
            others = [j for j in range(k) if j != i]
            for P in range(1 << (k - 1)):
                on = [others[b] for b in range(k - 1) if (P >> b) & 1]
                # W_i(P) = sum_{S subset of P} |S|!(k-1-|S|)!/k! prod_{others not in S} z
                w = 0.0
                for m in range(1 << len(on)):
                    S = {on[b] for b in range(len(on)) if (m >> b) & 1}
                    w += (
                        factorial(len(S))
                        * factorial(k - 1 - len(S))
                        / factorial(k)
                        * np.prod([z[j] for j in others if j not in S])
                    )
                half = 1 << (k - 1)
                assert tabs.values[tabs.table_offsets[p] + i * half + P] == pytest.approx(w, abs=1e-12)


@pytest.mark.parametrize("case", CASES)
def test_values_sum_to_the_margin_with_the_base_margin_in_the_bias_column(case):
    _, ens, X = make_case(*case, n_rows=60)
    margin = predict_margin(ens, X)
    table = extract_paths(ens)
    phi = shap_values_table(table, X)
    np.testing.assert_allclose(phi.sum(-1), margin, rtol=1e-5, atol=1e-9)
    np.testing.assert_allclose(
        phi[:, :, -1], np.broadcast_to(ens.base_margin + table.expected_value(), phi[:, :, -1].shape), rtol=1e-12
    )
    inter = shap_interactions(table, X)
    np.testing.assert_allclose(inter.sum((-1, -2)), margin, rtol=1e-5, atol=1e-9)
    np.testing.assert_allclose(inter.sum(-1), phi, rtol=0, atol=1e-9)
    np.testing.assert_allclose(inter, np.swapaxes(inter, -1, -2), rtol=0, atol=1e-9)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    n_features=st.integers(1, 10),
    depth=st.integers(0, 6),
    n_groups=st.integers(1, 3),
    n_rows=st.integers(0, 40),
    nan_prob=st.sampled_from([0.0, 0.3, 1.0]),
)
def test_additivity_and_method_agreement_hold_for_any_shape(seed, n_features, depth, n_groups, n_rows, nan_prob):
    rng = np.random.default_rng(seed)
    ens = random_ensemble(rng, n_features, n_trees=3, max_depth=depth, n_groups=n_groups)
    X = random_rows(rng, n_rows, n_features, nan_prob=nan_prob)
    a = shap_values_path(ens, X)
    b = shap_values_table(ens, X)
    assert a.shape == (n_rows, n_groups, n_features + 1)
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-9)
    np.testing.assert_allclose(a.sum(-1), predict_margin(ens, X), rtol=1e-9, atol=1e-9)


def test_float32_and_float64_rows_give_the_same_values():
    _, ens, X = make_case(13, 6, 3, 5, 2, n_rows=40)
    a = shap_values_table(ens, X.astype(np.float64))
    b = shap_values_table(ens, X.astype(np.float32))
    np.testing.assert_array_equal(a, b)
    # a float64 value just below a float32 threshold rounds onto it, like the model
    tree = Tree(
        left=[1, -1, -1],
        right=[2, -1, -1],
        parent=[-1, 0, 0],
        feature=[0, -1, -1],
        split_value=[0.5, 0, 0],
        default_left=[0, 0, 0],
        gain=[0, 0, 0],
        cover=[2.0, 1, 1],
        value=[0, -1.0, 1.0],
    )
    ens = Ensemble()
    ens.append(tree)
    x = np.array([[0.5 - 1e-12]])
    assert shap_values_table(ens, x)[0, 0, 0] == pytest.approx(1.0)  # went right (+1 - 0)
    np.testing.assert_allclose(brute_force_shap(ens, x), shap_values_path(ens, x))


@pytest.mark.parametrize("method", ["path", "table"])
def test_paths_summed_in_small_slices_give_the_shapley_values_and_are_summed_in_slice_order(monkeypatch, method):
    from dgboost.explain import treeshap

    _, ens, X = make_case(15, 6, 5, 5, 2, n_rows=30)
    one_slice = shap_values(ens, X, method=method)
    monkeypatch.setattr(treeshap, "SLICE_PATHS", 3)
    sliced = shap_values(ens, X, method=method)
    np.testing.assert_allclose(sliced, brute_force_shap(ens, X), rtol=0, atol=1e-6)
    np.testing.assert_allclose(sliced, one_slice, rtol=0, atol=1e-12)
    # the order the GPU's slice mode reproduces: each slice's sum from zero, added in order
    table = extract_paths(ens)
    n_slices = -(-table.n_paths // 3)
    expected = np.zeros_like(sliced)
    for z in range(n_slices):
        part = table.select_paths(np.arange(3 * z, min(3 * z + 3, table.n_paths)))
        monkeypatch.setattr(treeshap, "SLICE_PATHS", 1 << 14)
        contrib = shap_values(part, X, method="path") if method == "path" else shap_values_table(part, X)
        contrib[:, :, -1] = 0.0
        expected += contrib
    expected[:, :, -1] = sliced[:, :, -1]
    np.testing.assert_array_equal(sliced, expected)


@pytest.mark.parametrize("method", ["quadrature", "table"])
def test_interaction_values_summed_in_small_slices_equal_brute_force(monkeypatch, method):
    from dgboost.explain import treeshap

    _, ens, X = make_case(16, 5, 4, 4, 2, n_rows=12)
    one_slice = shap_interactions(ens, X, method=method)
    monkeypatch.setattr(treeshap, "INTERACTION_SLICE_PATHS", 3)
    sliced = shap_interactions(ens, X, method=method)
    np.testing.assert_allclose(sliced, brute_force_interactions(ens, X), rtol=0, atol=1e-6)
    np.testing.assert_allclose(sliced, one_slice, rtol=0, atol=1e-12)


def test_interaction_slices_grow_with_the_square_of_the_row_width():
    from dgboost.explain.treeshap import INTERACTION_SLICE_PATHS, interaction_slice_paths

    assert interaction_slice_paths(1) == interaction_slice_paths(64) == INTERACTION_SLICE_PATHS
    assert interaction_slice_paths(65) == 2 * INTERACTION_SLICE_PATHS
    assert interaction_slice_paths(785) == 151 * INTERACTION_SLICE_PATHS  # ceil((785 / 64) ** 2)


def test_block_size_and_thread_layout_do_not_change_results():
    _, ens, X = make_case(14, 8, 4, 6, 2, n_rows=97)
    ref = shap_values_path(ens, X)
    for block in (1, 7, 1000):
        np.testing.assert_allclose(shap_values_path(ens, X, block_rows=block), ref, rtol=0, atol=1e-12)
        np.testing.assert_allclose(shap_values_table(ens, X, block_rows=block), ref, rtol=0, atol=1e-9)
        np.testing.assert_allclose(
            shap_interactions(ens, X[:20], block_rows=block), shap_interactions(ens, X[:20]), rtol=0, atol=1e-12
        )


def test_a_packed_table_gives_the_same_values_as_the_original():
    _, ens, X = make_case(15, 7, 5, 6, 3, n_rows=30)
    table = extract_paths(ens)
    packed = pack(table, "best_fit_decreasing")
    np.testing.assert_allclose(shap_values_table(packed, X), shap_values_table(table, X), rtol=0, atol=1e-12)
    np.testing.assert_allclose(shap_interactions(packed, X), shap_interactions(table, X), rtol=0, atol=1e-12)


def test_a_depth_40_tree_is_explained_exactly():
    rng = np.random.default_rng(16)
    # few features: merged paths stay small enough for brute force
    ens = Ensemble(base_margin=0.25)
    ens.append(chain_tree(rng, n_features=8, depth=40))
    ens.append(chain_tree(rng, n_features=8, depth=35))
    assert ens.max_depth() == 40
    X = random_rows(rng, 20, 8)
    np.testing.assert_allclose(shap_values_path(ens, X), brute_force_shap(ens, X), atol=1e-6)
    np.testing.assert_allclose(shap_values_table(ens, X), brute_force_shap(ens, X), atol=1e-6)
    np.testing.assert_allclose(shap_interactions(ens, X), brute_force_interactions(ens, X), atol=1e-6)
    # 40 distinct features on one path: no table, no warp; additivity and interventional
    ens = Ensemble()
    ens.append(chain_tree(rng, n_features=70, depth=40, distinct=True))
    ens.append(chain_tree(rng, n_features=70, depth=40, distinct=True))
    X = random_rows(rng, 30, 70, nan_prob=0.05)
    margin = predict_margin(ens, X)
    phi = shap_values_table(ens, X)
    assert np.all(np.isfinite(phi))
    np.testing.assert_allclose(phi.sum(-1), margin, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(phi, shap_values_path(ens, X), rtol=0, atol=1e-9)
    iv = shap_values_interventional(ens, X, random_rows(rng, 5, 70))
    np.testing.assert_allclose(iv.sum(-1), margin, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("case", CASES)
def test_paths_without_a_table_take_the_quadrature_and_still_give_the_shapley_values(case):
    _, ens, X = make_case(*case, zero_cover_prob=0.2)
    table = extract_paths(ens)
    none = build_tables(table, max_table_bytes=0)
    got = shap_values_table(table, X, tables=none)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, brute_force_shap(ens, X), rtol=0, atol=1e-6)
    np.testing.assert_allclose(got, shap_values_path(table, X), rtol=0, atol=1e-12)


def test_the_quadrature_holds_paths_up_to_its_limit_and_longer_ones_take_the_path_method(monkeypatch):
    from dgboost.explain import treeshap

    rng = np.random.default_rng(21)
    limit = treeshap.QUADRATURE_MAX_K
    for depth in (limit, limit + 1):  # k = 16 takes 8 nodes; k = 17 the path method
        ens = Ensemble()
        ens.append(chain_tree(rng, n_features=24, depth=depth, distinct=True))
        ens.append(chain_tree(rng, n_features=24, depth=depth - 3, distinct=True))
        X = random_rows(rng, 40, 24, nan_prob=0.1)
        table = extract_paths(ens)
        assert (table.path_lengths - 1).max() == depth
        none = build_tables(table, max_table_bytes=0)
        got = shap_values_table(table, X, tables=none)
        path = shap_values_path(table, X)
        np.testing.assert_allclose(got.sum(-1), predict_margin(ens, X), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(got, path, rtol=0, atol=1e-12)
        long_only = table.select_paths(np.flatnonzero(table.path_lengths - 1 > limit))
        if long_only.n_paths:  # beyond the limit: EXTEND / UNWOUND-SUM, the path method's bits
            assert np.array_equal(shap_values_table(long_only, X, max_table_bytes=0), shap_values_path(long_only, X))
    monkeypatch.setattr(treeshap, "QUADRATURE_MAX_K", 0)  # no quadrature: the path method's bits
    assert np.array_equal(shap_values_table(table, X, tables=none), path)


def test_interventional_values_handle_paths_longer_than_one_bit_word():
    rng = np.random.default_rng(17)
    ens = Ensemble()
    ens.append(chain_tree(rng, n_features=80, depth=70, distinct=True))
    X = random_rows(rng, 6, 80, nan_prob=0.02)
    bg = random_rows(rng, 4, 80, nan_prob=0.02)
    # all rows reach deep: make the chain's path on for every row by copying rows
    X[3:] = bg[:3]
    iv = shap_values_interventional(ens, X, bg)
    np.testing.assert_allclose(iv.sum(-1), predict_margin(ens, X), rtol=1e-9, atol=1e-9)
    # x equal to a background row: the values against that row alone are zero
    iv1 = shap_values_interventional(ens, bg[:1], bg[:1])
    np.testing.assert_allclose(iv1[..., :-1], 0.0, atol=0)


def test_zero_cover_children_do_not_produce_nan():
    _, ens, X = make_case(18, 5, 4, 5, 1, n_rows=40, zero_cover_prob=0.3)
    a = shap_values_path(ens, X)
    assert np.all(np.isfinite(a))
    np.testing.assert_allclose(a, shap_values_table(ens, X), rtol=0, atol=1e-9)
    np.testing.assert_allclose(a, brute_force_shap(ens, X), rtol=0, atol=1e-6)
    np.testing.assert_allclose(shap_interactions(ens, X), brute_force_interactions(ens, X), rtol=0, atol=1e-6)


def test_single_leaf_trees_only_add_to_the_bias():
    ens = Ensemble(n_groups=2, base_margin=[0.5, -0.5])
    ens.append(Tree.leaf(1.5, 10.0), 0)
    ens.append(Tree.leaf(-2.0, 10.0), 1)
    X = np.zeros((3, 2))
    for fn in (shap_values_path, shap_values_table):
        phi = fn(ens, X)
        np.testing.assert_array_equal(phi[:, :, :2], 0.0)
        np.testing.assert_allclose(phi[:, :, 2], [[2.0, -2.5]] * 3)
    inter = shap_interactions(ens, X)
    np.testing.assert_allclose(inter[:, :, 2, 2], [[2.0, -2.5]] * 3)
    iv = shap_values_interventional(ens, X, X[:1])
    np.testing.assert_allclose(iv[:, :, 2], [[2.0, -2.5]] * 3)


def test_extra_columns_get_zero_values_and_too_few_columns_are_an_error():
    _, ens, X = make_case(19, 4, 2, 3, 1, n_rows=10)
    table = extract_paths(ens)
    wide = np.hstack([X[:, : table.n_features], np.ones((10, 3))])
    phi = shap_values_table(table, wide)
    assert phi.shape == (10, 1, table.n_features + 4)
    np.testing.assert_array_equal(phi[:, :, table.n_features : -1], 0.0)
    with pytest.raises(ValueError, match="columns"):
        shap_values_table(table, X[:, : table.n_features - 1])
    with pytest.raises(TypeError):
        shap_values_path(table, np.array([["a"] * 4]))
    with pytest.raises(ValueError, match="method"):
        shap_values(table, X, method="exact")
    assert shap_values_table(table, X[:0]).shape == (0, 1, X.shape[1] + 1)


# ---------------------------------------------------------------------------------------
# interaction values: quadrature and table methods against O(k^3) and brute force
# ---------------------------------------------------------------------------------------
INTERACTION_VARIANTS = [
    ("quadrature", {}),
    ("table", {}),
    ("table", {"max_k": 16}),
    ("table", {"max_k": 3}),
    ("table", {"max_table_bytes": 0}),
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("method,kw", INTERACTION_VARIANTS)
def test_interaction_methods_equal_the_o_k3_method_and_brute_force(case, method, kw):
    # random trees on few features: repeated features on a path (merged), NaN rows
    _, ens, X = make_case(*case, n_rows=14)
    table = extract_paths(ens)
    got = shap_interactions(table, X, method=method, **kw)
    np.testing.assert_allclose(got, shap_interactions(table, X, method="path"), rtol=0, atol=1e-9)
    np.testing.assert_allclose(got, brute_force_interactions(ens, X), rtol=0, atol=1e-6)


def _exact_pair_weight(z, o, i, j):
    """W_ij = sum_{S subset of on others} |S|!(m-|S|)!/(m+1)! prod_{others not in S} z, in
    rationals (m = number of other elements)."""
    from fractions import Fraction
    from math import factorial

    poly = [Fraction(1)]  # coefficients of prod over others of (z_l + o_l t)
    for l in range(len(z)):
        if l in (i, j):
            continue
        new = [Fraction(0)] * (len(poly) + 1)
        for d, c in enumerate(poly):
            new[d] += c * Fraction(float(z[l]))
            if o[l]:
                new[d + 1] += c
        poly = new
    m = len(poly) - 1
    return sum(c * Fraction(factorial(d) * factorial(m - d), factorial(m + 1)) for d, c in enumerate(poly))


def test_long_paths_fall_back_to_quadrature_and_stay_exact():
    from fractions import Fraction

    rng = np.random.default_rng(31)
    # deep trees on few features: merged paths are short enough for brute force
    ens = Ensemble(base_margin=-0.5)
    ens.append(chain_tree(rng, n_features=9, depth=40))
    ens.append(random_tree(rng, 9, 8))
    X = random_rows(rng, 15, 9)
    table = extract_paths(ens)
    bf = brute_force_interactions(ens, X)
    for method, kw in INTERACTION_VARIANTS:
        np.testing.assert_allclose(shap_interactions(table, X, method=method, **kw), bf, rtol=0, atol=1e-6)
    # 36 distinct features on one path: no table (k > max_k), quadrature with 18 nodes;
    # exact rational weights for some pairs of that path alone
    ens = Ensemble()
    ens.append(chain_tree(rng, n_features=50, depth=36, distinct=True))
    X = random_rows(rng, 6, 50, nan_prob=0.05)
    table = extract_paths(ens)
    p = int(np.argmax(table.path_lengths))
    one = table.select_paths([p])
    s, e = one.path_offsets[0] + 1, one.path_offsets[1]
    k = e - s
    assert k == 36
    tabs = build_interaction_tables(one, max_k=30)
    assert tabs.coverage(one) == 0.0  # 36 > max_k
    got = shap_interactions(one, X, method="table", tables=tabs)
    np.testing.assert_array_equal(got, shap_interactions(one, X))
    ref = shap_interactions(one, X, method="path")  # UNWIND: ~1e-11 here, worse deeper
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-8)
    z, feat, v = one.zero_fraction[s:e], one.feature[s:e], Fraction(float(one.path_v[0]))
    X32 = X.astype(np.float32)
    for r in range(3):
        x = X32[r, feat]
        o = [
            bool((one.lower[s + l] <= x[l] < one.upper[s + l]) or (np.isnan(x[l]) and one.is_missing_branch[s + l]))
            for l in range(k)
        ]
        for i, j in [(0, 1), (3, 35), (17, 18), (20, 33)]:
            w = _exact_pair_weight(z, o, i, j)
            val = float(v / 2 * (int(o[i]) - Fraction(float(z[i]))) * (int(o[j]) - Fraction(float(z[j]))) * w)
            assert got[r, 0, feat[i], feat[j]] == pytest.approx(val, rel=1e-12, abs=1e-15)
            assert got[r, 0, feat[j], feat[i]] == got[r, 0, feat[i], feat[j]]
    # additivity and SHAP values for the whole model
    X = random_rows(rng, 20, 50, nan_prob=0.05)
    inter = shap_interactions(ens, X)
    np.testing.assert_allclose(inter.sum((-1, -2)), predict_margin(ens, X), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(inter.sum(-1), shap_values_path(ens, X), rtol=0, atol=1e-9)


def test_interaction_tables_hold_the_pair_weights_and_the_shap_weights():
    from math import factorial

    _, ens, X = make_case(32, 7, 3, 6, 1, n_rows=30)
    table = extract_paths(ens)
    tabs = build_interaction_tables(table, max_k=16)
    shap_tabs = build_tables(table)
    assert isinstance(tabs, InteractionTables) and tabs.coverage(table) == 1.0
    k_all = table.path_lengths - 1
    assert tabs.n_bytes == 8 * int(interaction_table_entries(k_all).sum())
    for p in range(table.n_paths):
        s, e = table.path_offsets[p] + 1, table.path_offsets[p + 1]
        z, k = table.zero_fraction[s:e], e - s
        if k == 0:
            continue
        off, half = tabs.table_offsets[p], 1 << (k - 1)
        # the SHAP part is the WeightTables table of the path
        np.testing.assert_allclose(
            tabs.values[off : off + k * half],
            shap_tabs.values[shap_tabs.table_offsets[p] : shap_tabs.table_offsets[p] + k * half],
            rtol=0,
            atol=1e-13,
        )
        pair = 0
        for i in range(k):
            for j in range(i + 1, k):
                others = [l for l in range(k) if l not in (i, j)]
                for P in range(1 << (k - 2)):
                    on = {others[b] for b in range(k - 2) if (P >> b) & 1}
                    w = 0.0
                    for msk in range(1 << len(on)):
                        S = {sorted(on)[b] for b in range(len(on)) if (msk >> b) & 1}
                        w += (
                            factorial(len(S))
                            * factorial(k - 2 - len(S))
                            / factorial(k - 1)
                            * np.prod([z[l] for l in others if l not in S])
                        )
                    got = tabs.values[off + k * half + pair * (1 << (k - 2)) + P]
                    assert got == pytest.approx(w, abs=1e-13)
                pair += 1
    # an InteractionTables is also a WeightTables for shap_values_table
    np.testing.assert_allclose(shap_values_table(table, X, tables=tabs), shap_values_path(table, X), rtol=0, atol=1e-9)


def test_interaction_table_budget_prefers_short_paths_and_zero_budget_falls_back():
    _, ens, X = make_case(33, 10, 10, 6, 2, n_rows=60)
    table = extract_paths(ens)
    ref = shap_interactions(table, X, method="path")
    full = build_interaction_tables(table, max_k=16)
    assert full.coverage(table) == 1.0
    some = build_interaction_tables(table, max_table_bytes=full.n_bytes // 4, max_k=16)
    none = build_interaction_tables(table, max_table_bytes=0, max_k=16)
    short = build_interaction_tables(table)
    k = table.path_lengths - 1
    assert some.n_bytes <= full.n_bytes // 4 and 0 < some.coverage(table) < 1
    assert k[some.has_table & (k > 0)].max() <= k[~some.has_table].min()
    assert none.n_bytes == 0 and none.coverage(table) == 0.0
    assert not np.any(short.has_table[k > short.max_k])
    for tabs in (full, some, none, short):
        np.testing.assert_allclose(shap_interactions(table, X, method="table", tables=tabs), ref, rtol=0, atol=1e-9)
    np.testing.assert_allclose(shap_interactions(table, X, method="table", max_table_bytes=0), ref, rtol=0, atol=1e-9)


def test_interaction_tables_are_cached_per_budget_and_not_pickled():
    import pickle

    _, ens, X = make_case(34, 5, 3, 4, 1, n_rows=10)
    table = extract_paths(ens)
    a = shap_interactions(table, X, method="table")
    cache = table._weight_tables
    assert len(cache) == 1
    tabs = next(iter(cache.values()))
    shap_interactions(table, X, method="table")
    assert len(cache) == 1 and next(iter(cache.values())) is tabs
    shap_interactions(table, X, method="table", max_k=8)
    shap_interactions(table, X)  # quadrature builds nothing
    assert len(cache) == 2
    clone = pickle.loads(pickle.dumps(table))
    assert not hasattr(clone, "_weight_tables")
    np.testing.assert_array_equal(shap_interactions(clone, X, method="table"), a)


def test_interaction_arguments_are_checked():
    _, ens, X = make_case(35, 4, 2, 3, 1, n_rows=5)
    table = extract_paths(ens)
    with pytest.raises(ValueError, match="method"):
        shap_interactions(table, X, method="exact")
    with pytest.raises(TypeError, match="InteractionTables"):
        shap_interactions(table, X, method="table", tables=build_tables(table))
    other = extract_paths(make_case(36, 4, 3, 3, 1)[1])
    with pytest.raises(ValueError, match="different path table"):
        shap_interactions(table, X, method="table", tables=build_interaction_tables(other))
    with pytest.raises(ValueError, match="block_rows"):
        shap_interactions(table, X, block_rows=0)
    for method in ("quadrature", "table", "path"):
        assert shap_interactions(table, X[:0], method=method).shape == (0, 1, 5, 5)


def test_interaction_values_do_not_depend_on_blocks_or_threads():
    import numba

    _, ens, X = make_case(37, 8, 4, 6, 2, n_rows=53)
    table = extract_paths(ens)
    tabs = build_interaction_tables(table, max_k=5)
    threads = numba.get_num_threads()
    try:
        for method, kw in (("quadrature", {}), ("table", {"tables": tabs})):
            ref = shap_interactions(table, X, method=method, **kw)
            for block in (1, 6, 1000):
                np.testing.assert_array_equal(shap_interactions(table, X, method=method, block_rows=block, **kw), ref)
            for nt in {1, min(2, numba.config.NUMBA_NUM_THREADS)}:
                numba.set_num_threads(nt)
                np.testing.assert_array_equal(shap_interactions(table, X, method=method, **kw), ref)
            numba.set_num_threads(threads)
    finally:
        numba.set_num_threads(threads)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    n_features=st.integers(1, 9),
    depth=st.integers(0, 7),
    n_groups=st.integers(1, 3),
    n_rows=st.integers(0, 20),
    nan_prob=st.sampled_from([0.0, 0.3, 1.0]),
    zero_cover=st.sampled_from([0.0, 0.3]),
    max_k=st.integers(0, 8),
)
def test_interaction_methods_agree_for_any_shape(
    seed, n_features, depth, n_groups, n_rows, nan_prob, zero_cover, max_k
):
    rng = np.random.default_rng(seed)
    ens = random_ensemble(rng, n_features, n_trees=3, max_depth=depth, n_groups=n_groups, zero_cover_prob=zero_cover)
    X = random_rows(rng, n_rows, n_features, nan_prob=nan_prob)
    table = extract_paths(ens)
    ref = shap_interactions(table, X, method="path")
    quad = shap_interactions(table, X)
    tab = shap_interactions(table, X, method="table", max_k=max_k)
    assert quad.shape == (n_rows, n_groups, n_features + 1, n_features + 1)
    np.testing.assert_allclose(quad, ref, rtol=0, atol=1e-9)
    np.testing.assert_allclose(tab, ref, rtol=0, atol=1e-9)
    np.testing.assert_array_equal(quad, np.swapaxes(quad, -1, -2))
    np.testing.assert_allclose(quad.sum(-1), shap_values_path(table, X), rtol=0, atol=1e-9)
    np.testing.assert_allclose(quad.sum((-1, -2)), predict_margin(ens, X), rtol=1e-9, atol=1e-9)


# ---------------------------------------------------------------------------------------
# XGBoost
# ---------------------------------------------------------------------------------------
import xgboost as xgb  # noqa: E402 (declared test dependency: fail, never skip)

XGB_CASES = [
    ("binary:logistic", 3),
    ("binary:logistic", 8),
    ("reg:squarederror", 3),
    ("reg:squarederror", 8),
    ("multi:softprob", 3),
    ("multi:softprob", 8),
]


def train_xgboost(objective, depth, seed=0, n=600, F=7, rounds=8):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, F))
    X[:, 3] = np.round(X[:, 3])  # ties at thresholds
    X[rng.random(X.shape) < 0.15] = np.nan
    z = np.nan_to_num(X[:, 0]) * np.nan_to_num(X[:, 1]) + np.nan_to_num(X[:, 2]) ** 2
    params = {
        "objective": objective,
        "max_depth": depth,
        "eta": 0.3,
        "nthread": 1,
        "min_child_weight": 0.1,
        "seed": seed,
    }
    if objective == "binary:logistic":
        y = (z + rng.normal(size=n) > 1).astype(float)
    elif objective == "multi:softprob":
        y = np.digitize(z, [0.3, 1.5]).astype(float)
        params["num_class"] = 3
    else:
        y = z + 0.1 * rng.normal(size=n) + 3.0
    booster = xgb.train(params, xgb.DMatrix(X, label=y), rounds)
    return booster, X


def xgb_layout(a, n_groups):
    """XGBoost drops the group axis for one output; put it back."""
    return a[:, None] if n_groups == 1 else a


@pytest.mark.parametrize("objective,depth", XGB_CASES)
def test_shap_values_match_xgboost_pred_contribs(objective, depth):
    booster, X = train_xgboost(objective, depth)
    ens = ensemble_from_xgboost(booster)
    Xq = X[:200]
    dm = xgb.DMatrix(Xq)
    np.testing.assert_allclose(predict_margin(ens, Xq).squeeze(), booster.predict(dm, output_margin=True), atol=1e-5)
    expected = xgb_layout(booster.predict(dm, pred_contribs=True), ens.n_groups)
    for method in ("table", "path"):
        np.testing.assert_allclose(shap_values(ens, Xq, method=method), expected, rtol=0, atol=1e-4)


@pytest.mark.parametrize("objective,depth", XGB_CASES)
def test_interaction_values_match_xgboost_pred_interactions(objective, depth):
    booster, X = train_xgboost(objective, depth, rounds=4)
    ens = ensemble_from_xgboost(booster)
    Xq = X[:40]
    expected = xgb_layout(booster.predict(xgb.DMatrix(Xq), pred_interactions=True), ens.n_groups)
    np.testing.assert_allclose(shap_interactions(ens, Xq), expected, rtol=0, atol=1e-4)


@pytest.mark.parametrize("method,kw", [("table", {"max_k": 16}), ("path", {})])
@pytest.mark.parametrize("objective,depth", XGB_CASES)
def test_other_interaction_methods_match_xgboost_pred_interactions(objective, depth, method, kw):
    booster, X = train_xgboost(objective, depth, rounds=4)
    ens = ensemble_from_xgboost(booster)
    Xq = X[:40]
    expected = xgb_layout(booster.predict(xgb.DMatrix(Xq), pred_interactions=True), ens.n_groups)
    np.testing.assert_allclose(shap_interactions(ens, Xq, method=method, **kw), expected, rtol=0, atol=1e-4)


@pytest.mark.skipif(importlib.util.find_spec("dgboost.model_io") is None, reason="dgboost.model_io not written yet")
@pytest.mark.parametrize("objective,depth", XGB_CASES[::2])
def test_models_imported_by_model_io_match_xgboost_pred_contribs(objective, depth):
    from dgboost.model_io import import_xgboost_booster

    booster, X = train_xgboost(objective, depth)
    ens, _ = import_xgboost_booster(booster)
    dm = xgb.DMatrix(X[:100])
    expected = xgb_layout(booster.predict(dm, pred_contribs=True), ens.n_groups)
    np.testing.assert_allclose(shap_values_table(ens, X[:100]), expected, rtol=0, atol=1e-4)


def test_weight_tables_are_built_once_per_path_table_and_not_pickled():
    import pickle

    _, ens, X = make_case(20, 5, 3, 4, 1, n_rows=10)
    table = extract_paths(ens)
    a = shap_values_table(table, X)
    cached = table._weight_tables
    assert len(cached) == 1
    b = shap_values_table(table, X)
    assert table._weight_tables is cached and len(cached) == 1
    np.testing.assert_array_equal(a, b)
    clone = pickle.loads(pickle.dumps(table))
    assert not hasattr(clone, "_weight_tables")
    np.testing.assert_array_equal(shap_values_table(clone, X), a)


def test_interventional_values_do_not_depend_on_the_row_chunking(monkeypatch):
    import dgboost.explain.interventional as iv_mod

    rng, ens, X = make_case(21, 6, 3, 5, 2, n_rows=23)
    bg = random_rows(rng, 9, 6)
    ref = shap_values_interventional(ens, X, bg)
    monkeypatch.setattr(iv_mod, "_CHUNK_BYTES", 8 * 5 * extract_paths(ens).n_paths)
    np.testing.assert_array_equal(shap_values_interventional(ens, X, bg), ref)
    with pytest.raises(ValueError, match="background"):
        shap_values_interventional(ens, X, bg[:0])


def test_an_ensemble_without_trees_explains_to_its_base_margin():
    ens = Ensemble(n_groups=3, base_margin=[0.1, 0.2, 0.3])
    X = np.ones((4, 2))
    for fn in (shap_values_path, shap_values_table):
        phi = fn(ens, X)
        assert phi.shape == (4, 3, 3)
        np.testing.assert_array_equal(phi[:, :, 2], [[0.1, 0.2, 0.3]] * 4)
        np.testing.assert_array_equal(phi[:, :, :2], 0.0)
    np.testing.assert_array_equal(shap_interactions(ens, X)[:, :, 2, 2], [[0.1, 0.2, 0.3]] * 4)
    np.testing.assert_array_equal(shap_values_interventional(ens, X, X)[:, :, 2], [[0.1, 0.2, 0.3]] * 4)
