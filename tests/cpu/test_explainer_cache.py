"""A second explainer of an unchanged model reuses its preparation; a changed model does not."""

from __future__ import annotations

import numpy as np
import pytest

import dgboost
from dgboost import TreeExplainer
from dgboost.explain import prepared


def _data(n=800, F=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, F)).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    y = (np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) * np.nan_to_num(X[:, 2]) > 0).astype(np.float32)
    return X, y


def _train(rounds=4, seed=0, depth=4):
    X, y = _data(seed=seed)
    params = {"objective": "binary:logistic", "max_depth": depth, "eta": 0.3, "seed": seed}
    return dgboost.train(params, dgboost.DMatrix(X, y), rounds), X, y


def _fresh_values(model_bytes, X):
    """SHAP values of an explainer that finds nothing in any cache."""
    prepared._PREPARED.clear()
    from dgboost.explain import treeshap

    treeshap._PROCESS_TABLES.clear()
    return TreeExplainer(model_bytes).shap_values(X)


@pytest.fixture(autouse=True)
def _empty_cache():
    prepared._PREPARED.clear()
    yield
    prepared._PREPARED.clear()


@pytest.mark.parametrize("fmt", ["ubj", "json"])
def test_a_second_explainer_of_the_same_model_bytes_reuses_the_path_and_weight_tables(fmt):
    booster, X, _ = _train()
    raw = bytes(booster.save_raw(fmt))
    first = TreeExplainer(raw)
    phi = first.shap_values(X[:50])
    second = TreeExplainer(bytearray(raw) if fmt == "json" else raw)
    assert second.table is not None
    if fmt == "ubj":
        assert second.table is first.table
        assert second.weight_tables() is first.weight_tables()
    np.testing.assert_array_equal(second.shap_values(X[:50]), phi)
    assert second.meta is not first.meta  # each explainer owns its meta


def test_a_second_explainer_of_the_same_model_file_reuses_the_path_table(tmp_path):
    booster, X, _ = _train()
    path = tmp_path / "model.ubj"
    booster.save_model(str(path))
    first = TreeExplainer(str(path))
    second = TreeExplainer(str(path))
    assert second.table is first.table
    np.testing.assert_array_equal(second.shap_values(X[:20]), first.shap_values(X[:20]))


def test_a_rewritten_model_file_is_prepared_again(tmp_path):
    path = tmp_path / "model.json"
    short, X, _ = _train(rounds=3)
    short.save_model(str(path))
    first = TreeExplainer(str(path))
    longer, _, _ = _train(rounds=5)
    longer.save_model(str(path))
    second = TreeExplainer(str(path))
    assert second.table is not first.table
    assert second.ensemble.n_trees == 5
    np.testing.assert_array_equal(second.shap_values(X[:30]), _fresh_values(bytes(longer.save_raw("json")), X[:30]))


def test_model_bytes_differing_in_one_leaf_value_do_not_share_a_path_table():
    booster, X, _ = _train()
    raw = bytes(booster.save_raw("json"))
    first = TreeExplainer(raw)
    other = dgboost.Booster(model_file=raw)
    ens = other.ensemble.copy()
    leaf = int(np.flatnonzero(ens.left < 0)[0])
    ens.arrays["value"][leaf] += 0.25  # same shape, sizes and tree count: only the content differs
    other._set_ensemble(ens)
    raw2 = bytes(other.save_raw("json"))
    assert raw2 != raw and len(other.ensemble.left) == len(booster.ensemble.left)
    second = TreeExplainer(raw2)
    assert second.table is not first.table
    assert not np.array_equal(second.table.path_v, first.table.path_v)
    np.testing.assert_array_equal(second.shap_values(X[:30]), _fresh_values(raw2, X[:30]))


def test_a_second_explainer_of_an_unchanged_booster_reuses_the_prepared_tables():
    booster, X, _ = _train()
    first = TreeExplainer(booster)
    phi = first.shap_values(X[:40])
    second = TreeExplainer(booster)
    assert second.table is first.table
    assert second.weight_tables() is first.weight_tables()
    np.testing.assert_array_equal(second.shap_values(X[:40]), phi)


def test_a_booster_trained_further_with_update_is_prepared_again():
    booster, X, y = _train(rounds=3)
    first = TreeExplainer(booster)
    first.shap_values(X[:10])
    booster.update(dgboost.DMatrix(X, y), 3)
    second = TreeExplainer(booster)
    assert second.table is not first.table
    assert second.table.path_tree.max() == 3  # the fourth tree is explained
    np.testing.assert_array_equal(second.shap_values(X[:30]), _fresh_values(bytes(booster.save_raw("ubj")), X[:30]))


def test_a_booster_that_loads_other_model_bytes_is_prepared_again():
    a, X, _ = _train(seed=0)
    b, _, _ = _train(seed=1)
    booster = dgboost.Booster(model_file=bytes(a.save_raw("ubj")))
    first = TreeExplainer(booster)
    first.shap_values(X[:10])
    raw_b = bytes(b.save_raw("ubj"))
    booster.load_model(raw_b)
    second = TreeExplainer(booster)
    assert second.table is not first.table
    np.testing.assert_array_equal(second.shap_values(X[:30]), _fresh_values(raw_b, X[:30]))


def test_the_model_cache_keeps_only_a_few_models():
    for seed in range(prepared._PREPARED_MAX + 2):
        booster, _, _ = _train(rounds=1, seed=seed)
        TreeExplainer(bytes(booster.save_raw("ubj")))
    assert len(prepared._PREPARED) == prepared._PREPARED_MAX


def test_a_path_tables_expected_value_is_kept_and_handed_out_as_a_copy():
    booster, _, _ = _train()
    table = TreeExplainer(booster).table
    first = table.expected_value()
    first[:] = 123.0  # a caller's copy: the table's value is not touched
    again = table.expected_value()
    from dgboost.explain.paths import extract_paths

    np.testing.assert_array_equal(again, extract_paths(booster.ensemble).expected_value())
    assert again is not table.expected_value()


# -- xgboost.Booster objects (issue 32): keyed by their save_raw("ubj") bytes ----------------
def _xgb_train(rounds=3, seed=0):
    xgb = pytest.importorskip("xgboost")
    X, y = _data(seed=seed)
    params = {"objective": "binary:logistic", "max_depth": 4, "eta": 0.3, "seed": seed, "nthread": 1}
    dtrain = xgb.DMatrix(X, y)
    return xgb.train(params, dtrain, rounds), dtrain, X


def _xgb_fresh_values(booster, X):
    """SHAP values of an explainer of ``booster`` that finds nothing in any cache."""
    prepared._PREPARED.clear()
    from dgboost.explain import treeshap

    treeshap._PROCESS_TABLES.clear()
    return TreeExplainer(booster).shap_values(X)


def test_a_second_explainer_of_the_same_xgboost_booster_prepares_nothing(monkeypatch):
    booster, _, X = _xgb_train()
    first = TreeExplainer(booster)
    phi = first.shap_values(X[:40])
    from dgboost.explain import importers

    def no_import(*args, **kwargs):
        raise AssertionError("the booster was imported again")

    monkeypatch.setattr(prepared, "from_xgboost_ubjson", no_import)
    monkeypatch.setattr(importers, "_from_xgboost", no_import)
    second = TreeExplainer(booster)
    assert second.ensemble is first.ensemble and second.table is first.table
    assert second.weight_tables() is first.weight_tables()
    assert second.meta == first.meta and second.meta is not first.meta
    np.testing.assert_array_equal(second.shap_values(X[:40]), phi)


def test_an_xgboost_booster_explainer_is_the_uncached_importers_bit_for_bit():
    from dgboost.explain.importers import to_ensemble
    from dgboost.explain.paths import extract_paths

    booster, _, X = _xgb_train(rounds=4)
    explainer = TreeExplainer(booster)
    ens, meta = to_ensemble(booster)  # the importer without the cache
    assert set(explainer.ensemble.arrays) == set(ens.arrays)
    for name, a in ens.arrays.items():
        b = explainer.ensemble.arrays[name]
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), name
    assert {k: v for k, v in meta.items() if k != "input_encoder"} == {
        k: v for k, v in explainer.meta.items() if k != "input_encoder"
    }
    table = extract_paths(ens)
    for name, value in vars(table).items():
        if not name.startswith("_"):
            kept = getattr(explainer.table, name)
            if isinstance(value, np.ndarray):
                assert value.dtype == kept.dtype and value.tobytes() == kept.tobytes(), name
            else:
                assert value == kept, name


def test_a_cached_models_path_table_is_keyed_by_the_model_bytes_without_hashing_its_arrays(monkeypatch):
    from dgboost.explain import _digest

    booster, X, _ = _train()
    raw = bytes(booster.save_raw("ubj"))
    hashed = []
    real = _digest.content_digest

    def counting(items):
        items = list(items)
        hashed.append([name for name, _ in items])
        return real(items)

    monkeypatch.setattr(_digest, "content_digest", counting)
    table = TreeExplainer(raw).table
    print_ = table.fingerprint
    assert all("feature" not in names for names in hashed)  # the arrays were never hashed
    assert print_ != real((k, v) for k, v in sorted(vars(table).items()) if not k.startswith("_") and v is not None)
    prepared._PREPARED.clear()
    assert TreeExplainer(raw).table.fingerprint == print_  # the same bytes: the same print (a content key)
    assert TreeExplainer(bytes(booster.save_raw("json"))).table.fingerprint != print_  # other bytes


def test_tables_of_two_models_keyed_by_their_bytes_never_share_a_device_cache_entry():
    from dgboost.explain import treeshap

    first_booster, X, _ = _train(seed=0)
    second_booster, _, _ = _train(seed=1)
    first = TreeExplainer(bytes(first_booster.save_raw("ubj")))
    second = TreeExplainer(bytes(second_booster.save_raw("ubj")))
    assert first.table.fingerprint != second.table.fingerprint
    first.shap_values(X[:20])
    phi = second.shap_values(X[:20])  # the weight tables are found by the print: must be its own
    treeshap._PROCESS_TABLES.clear()
    np.testing.assert_array_equal(phi, _fresh_values(bytes(second_booster.save_raw("ubj")), X[:20]))


def test_an_xgboost_booster_trained_further_is_not_served_its_earlier_trees():
    booster, dtrain, X = _xgb_train(rounds=3)
    first = TreeExplainer(booster)
    first.shap_values(X[:10])
    for i in range(3, 5):
        booster.update(dtrain, i)  # the same object, two more trees
    second = TreeExplainer(booster)
    assert second.table is not first.table and second.ensemble.n_trees == 5
    np.testing.assert_array_equal(second.shap_values(X[:30]), _xgb_fresh_values(booster, X[:30]))
    xgb = pytest.importorskip("xgboost")
    ref = booster.predict(xgb.DMatrix(X[:30]), pred_contribs=True)
    np.testing.assert_allclose(second.shap_values(X[:30]), ref[:, :-1], rtol=1e-4, atol=1e-5)  # XGBoost's own


def test_two_xgboost_boosters_with_the_same_trees_share_one_preparation():
    booster, _, X = _xgb_train()
    xgb = pytest.importorskip("xgboost")
    twin = xgb.Booster(model_file=booster.save_raw("ubj"))
    first = TreeExplainer(booster)
    assert TreeExplainer(twin).table is first.table


def test_an_xgboost_scikit_learn_wrapper_is_not_keyed_as_its_booster():
    xgb = pytest.importorskip("xgboost")
    X, y = _data()
    model = xgb.XGBClassifier(n_estimators=3, max_depth=3, n_jobs=1).fit(X, y)
    TreeExplainer(model.get_booster())
    assert len(prepared._PREPARED) == 1
    TreeExplainer(model)  # its iteration range and classes are the wrapper's: imported afresh
    assert len(prepared._PREPARED) == 1


def test_an_explainers_expected_value_is_made_at_first_use_and_is_the_tables(monkeypatch):
    from dgboost.explain import paths

    booster, X, _ = _train(rounds=3, seed=9)
    calls = []
    real = paths.PathTable.expected_value
    monkeypatch.setattr(paths.PathTable, "expected_value", lambda self: calls.append(1) or real(self))
    explainer = TreeExplainer(booster.save_raw("json"))
    assert calls == []  # the GPU engine makes it while its kernel runs: the constructor does not wait for it
    want = explainer.table.base_margin[0] + real(explainer.table)[0]
    assert explainer.expected_value == want
    phi = explainer.shap_values(X[:50])  # the additivity check reads it as well
    margin = booster.predict(dgboost.DMatrix(X[:50]), output_margin=True)
    np.testing.assert_allclose(phi.sum(1) + explainer.expected_value, margin, rtol=1e-5, atol=1e-5)


def test_an_xgboost_boosters_bytes_copied_by_threads_are_save_raws(monkeypatch):
    xgb = pytest.importorskip("xgboost")
    from dgboost import _threads, _xgboost_raw

    X, y = _data(n=3000, F=8, seed=3)
    booster = xgb.train({"objective": "binary:logistic", "max_depth": 6, "nthread": 1}, xgb.DMatrix(X, y), 30)
    want = bytes(booster.save_raw(raw_format="ubj"))
    monkeypatch.setattr(_xgboost_raw, "_PARALLEL_BYTES", 0)  # copied in several runs
    monkeypatch.setattr(_threads, "host_threads", lambda: 3)
    got = _xgboost_raw.booster_ubjson(booster)
    assert isinstance(got, memoryview) and got.readonly and bytes(got) == want
    booster.set_attr(changed="yes")  # XGBoost's next call on the booster: the copy keeps its bytes
    booster.save_raw(raw_format="ubj")
    assert bytes(got) == want
    monkeypatch.setattr(_xgboost_raw, "_save_to_buffer", lambda b: None)  # no C API as expected: save_raw
    assert bytes(_xgboost_raw.booster_ubjson(booster)) == bytes(booster.save_raw(raw_format="ubj"))
