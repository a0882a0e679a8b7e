"""TreeSHAP on trees with categorical splits: path tables with category sets, SHAP values,
interaction values and interventional values against the brute-force oracle (which routes
rows by XGBoost's decision rule on the trees' code lists, not by the path tables' bitsets),
and against XGBoost 3.4.1's pred_contribs / pred_interactions on its categorical models."""

import numpy as np
import pytest

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


def _flat_categories(trees: list[Tree]) -> dict:
    """The flat categorical arrays of an Ensemble of ``trees`` (docs/design.md 11.4)."""
    split_type, begin, words, bits = [], [], [], []
    offset = 0
    for tree in trees:
        for node in range(tree.n_nodes):
            cat = tree.split_type is not None and tree.split_type[node] == 1
            split_type.append(1 if cat else 0)
            begin.append(offset)
            if not cat:
                words.append(0)
                continue
            lo, size = int(tree.cat_segments[node]), int(tree.cat_sizes[node])
            codes = np.asarray(tree.cat_values[lo : lo + size], np.int64)
            n_words = (int(codes.max()) + 1 + 31) // 32 if size else 0
            node_bits = np.zeros(n_words, np.uint32)
            for c in codes:
                node_bits[c >> 5] |= np.uint32(1) << np.uint32(c & 31)
            bits.append(node_bits)
            words.append(n_words)
            offset += n_words
    return {
        "split_type": np.array(split_type, np.uint8),
        "cat_begin": np.array(begin, np.int64),
        "cat_words": np.array(words, np.int32),
        "cat_bits": np.concatenate(bits) if bits else np.zeros(0, np.uint32),
    }


class _CategoricalEnsemble(Ensemble):
    """An Ensemble that keeps its trees' categorical fields (for a dgboost.tree without them)."""

    has_categorical = True

    def __init__(self, ens: Ensemble, trees: list[Tree]):
        super().__init__(ens.n_groups, ens.base_margin)
        for tree, g in zip(trees, ens.groups()):
            self.append(tree, int(g))
        self._trees = trees
        self._flat = _flat_categories(trees)

    def categorical_kernel_arrays(self):
        f = self._flat
        return f["split_type"], f["cat_begin"], f["cat_words"], f["cat_bits"]

    def tree(self, i):
        return self._trees[i]


def categorical_case(seed, n_categories, n_trees, max_depth, n_groups, n_rows=25):
    rng = np.random.default_rng(seed)
    ens = random_categorical_ensemble(rng, n_categories, n_trees=n_trees, max_depth=max_depth, n_groups=n_groups)
    if not hasattr(Ensemble, "has_categorical"):  # until dgboost.tree keeps categorical fields
        trees = list(ens._pending_trees()) if hasattr(ens, "_pending_trees") else [t for t, _ in ens._pending]
        ens = _CategoricalEnsemble(ens, trees)
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
    )
    for name, value in dict(
        split_type=np.array([1, 0, 0], np.uint8),
        cat_segments=np.array([0, 2, 2], np.int64),
        cat_sizes=np.array([2, 0, 0], np.int64),
        cat_values=np.array([1, 33], np.int32),
    ).items():
        setattr(tree, name, value)
    base = Ensemble()
    base.append(tree)
    ens = base if hasattr(Ensemble, "has_categorical") else _CategoricalEnsemble(base, [tree])
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
