"""Model files: dgboost JSON, XGBoost JSON import/export, validation, text dumps.

Oracles: XGBoost itself (its margins, its loader, its ``get_dump``), the plain NumPy
reference predictor in ``dgboost.testing.reference``, and exact equality of round trips.
"""

from __future__ import annotations

import copy
import json
import math
import os
import warnings

import numpy as np
import pytest
import xgboost as xgb
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dgboost.errors import ModelFormatError
from dgboost.model_io import (
    dump_text,
    export_xgboost_dict,
    export_xgboost_json,
    import_xgboost_booster,
    import_xgboost_dict,
    load_model,
    model_from_dict,
    model_from_json,
    model_to_dict,
    model_to_json,
    save_model,
    validate_ensemble,
)
from dgboost.testing.reference import predict_margin_reference, predict_margin_reference_f32
from dgboost.tree import NODE_ARRAYS, Ensemble, Tree

N_ROWS, N_FEAT = 400, 6


# -- helpers ------------------------------------------------------------------------------
def _data(seed=0, nan_fraction=0.15):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N_ROWS, N_FEAT))
    X[:, 3] = np.round(X[:, 3] * 2)  # ties at split values
    X[rng.random(X.shape) < nan_fraction] = np.nan
    return X, rng


def _train(objective, n_rounds=8, max_depth=8, **params):
    X, rng = _data()
    Z = np.nan_to_num(X)
    if objective == "multi:softprob":
        y = (Z[:, 0] > 0).astype(int) + (Z[:, 1] > 0.5).astype(int)
        params["num_class"] = 3
    elif objective == "binary:logistic":
        y = (Z[:, 0] + rng.normal(size=N_ROWS) > 0).astype(float)
    elif objective == "count:poisson":
        y = rng.poisson(np.exp(0.5 * Z[:, 0])).astype(float)
    else:
        y = 2 * Z[:, 0] - Z[:, 1] * Z[:, 2] + rng.normal(scale=0.1, size=N_ROWS)
    d = xgb.DMatrix(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        booster = xgb.train(
            {"objective": objective, "max_depth": max_depth, "tree_method": "hist", "seed": 0, **params}, d, n_rounds
        )
    return booster, X


def _xgb_margin(booster, X):
    return booster.predict(xgb.DMatrix(X), output_margin=True).reshape(X.shape[0], -1)


def _meta(objective="reg:squarederror", num_feature=4, num_class=0, base_score=0.5, **kw):
    meta = {
        "objective": objective,
        "objective_params": {},
        "base_score": base_score,
        "num_class": num_class,
        "num_feature": num_feature,
        "feature_names": None,
        "feature_types": None,
        "best_iteration": None,
        "best_score": None,
        "params": {},
        "attributes": {},
    }
    meta.update(kw)
    return meta


def _small_model():
    """Tree 0: full depth-2 tree (7 nodes); tree 1: a stump (3 nodes); 4 features."""
    ens = Ensemble(1, 0.25)
    ens.append(
        Tree(
            left=[1, 3, 5, -1, -1, -1, -1],
            right=[2, 4, 6, -1, -1, -1, -1],
            parent=[-1, 0, 0, 1, 1, 2, 2],
            feature=[0, 1, 2, -1, -1, -1, -1],
            split_value=[0.5, -1.25, 3.0, 0, 0, 0, 0],
            default_left=[1, 0, 1, 0, 0, 0, 0],
            gain=[10.0, 2.5, 1.5, 0, 0, 0, 0],
            cover=[100.0, 60.0, 40.0, 30.0, 30.0, 25.0, 15.0],
            value=[0.0, -0.1, 0.1, -0.3, 0.2, 0.05, 0.4],
        )
    )
    ens.append(
        Tree(
            left=[1, -1, -1],
            right=[2, -1, -1],
            parent=[-1, 0, 0],
            feature=[3, -1, -1],
            split_value=[0.1, 0, 0],
            default_left=[0, 0, 0],
            gain=[1.0, 0, 0],
            cover=[100.0, 50.0, 50.0],
            value=[0.0, -0.01, 0.02],
        )
    )
    return ens, _meta(num_feature=4, base_score=0.25)


def _random_ensemble(rng, n_trees, n_groups, num_feature, max_splits):
    """Random valid trees grown by splitting random leaves (children numbered after parents)."""
    ens = Ensemble(n_groups, rng.normal(size=n_groups))
    for t in range(n_trees):
        left, right, parent, feature = [-1], [-1], [-1], [-1]
        for _ in range(int(rng.integers(0, max_splits + 1))):
            leaves = [i for i in range(len(left)) if left[i] < 0]
            i = int(rng.choice(leaves))
            n = len(left)
            left[i], right[i], feature[i] = n, n + 1, int(rng.integers(0, num_feature))
            left += [-1, -1]
            right += [-1, -1]
            parent += [i, i]
            feature += [-1, -1]
        n = len(left)
        inner = np.array(left) >= 0
        split = np.where(inner, np.round(rng.normal(size=n) * 4) / 4, 0.0)
        ens.append(
            Tree(
                left=left,
                right=right,
                parent=parent,
                feature=feature,
                split_value=split,
                default_left=np.where(inner, rng.integers(0, 2, n), 0),
                gain=np.where(inner, rng.exponential(size=n), 0.0),
                cover=np.float32(rng.exponential(10.0, size=n)).astype(np.float64),
                value=rng.normal(size=n),
            ),
            t % n_groups,
        )
    return ens


# -- XGBoost import: predictions ----------------------------------------------------------
@pytest.mark.parametrize("objective", ["reg:squarederror", "binary:logistic", "multi:softprob"])
def test_imported_xgboost_model_predicts_the_same_margins_as_xgboost(objective):
    booster, X = _train(objective)
    ens, meta = import_xgboost_booster(booster)
    expected = _xgb_margin(booster, X)
    assert ens.n_groups == expected.shape[1]
    assert ens.max_depth() <= 8
    np.testing.assert_allclose(predict_margin_reference(ens, X), expected, rtol=0, atol=1e-5)
    # accumulated in float32 like XGBoost: bit-close
    np.testing.assert_allclose(predict_margin_reference_f32(ens, X), expected, rtol=0, atol=4e-7)
    assert meta["objective"] == objective
    assert meta["num_feature"] == N_FEAT
    assert meta["num_class"] == (3 if objective == "multi:softprob" else 0)


def test_xgboost_model_file_written_by_xgboost_loads_transparently(tmp_path):
    booster, X = _train("binary:logistic", n_rounds=4)
    path = tmp_path / "xgb.json"
    booster.save_model(str(path))
    ens, meta = load_model(path)
    assert ens == import_xgboost_booster(booster)[0]
    np.testing.assert_allclose(predict_margin_reference(ens, X), _xgb_margin(booster, X), atol=1e-5)
    ens2, meta2 = model_from_json(path.read_bytes())
    assert ens2 == ens and meta2 == meta


def test_base_margin_is_the_link_of_base_score_logit_log_or_identity():
    for objective, link in [
        ("binary:logistic", lambda p: math.log(p / (1 - p))),
        ("count:poisson", math.log),
        ("reg:squarederror", lambda s: s),
    ]:
        booster, X = _train(objective, n_rounds=2, max_depth=3)
        ens, meta = import_xgboost_booster(booster)
        raw = json.loads(booster.save_raw("json"))["learner"]["learner_model_param"]["base_score"]
        score = float(np.float32(float(raw.strip("[]"))))
        assert meta["base_score"] == score
        assert ens.base_margin[0] == pytest.approx(link(score), abs=1e-12)


def test_num_parallel_tree_and_multi_target_forests_import_with_their_groups():
    X, rng = _data()
    Y = np.c_[np.nan_to_num(X[:, 0]), np.nan_to_num(X[:, 1])]
    booster = xgb.train({"num_parallel_tree": 2, "max_depth": 4}, xgb.DMatrix(X, Y), 3)
    ens, meta = import_xgboost_booster(booster)
    assert ens.n_groups == 2 and ens.n_trees == 12
    assert meta["params"] == {"num_parallel_tree": 2}
    np.testing.assert_allclose(predict_margin_reference(ens, X), _xgb_margin(booster, X), atol=1e-5)
    again = xgb.Booster()
    again.load_model(bytearray(json.dumps(export_xgboost_dict(ens, meta)).encode()))
    np.testing.assert_array_equal(_xgb_margin(again, X), _xgb_margin(booster, X))


def test_dropout_tree_weights_are_applied_to_leaf_values():
    booster, X = _train("reg:squarederror", n_rounds=6, max_depth=4, rate_drop=0.5, skip_drop=0.0)
    model = json.loads(booster.save_raw("json"))["learner"]["gradient_booster"]["model"]
    assert any(w != 1 for w in model["weight_drop"])
    ens, _ = import_xgboost_booster(booster)
    np.testing.assert_allclose(predict_margin_reference(ens, X), _xgb_margin(booster, X), atol=1e-5)


def test_old_style_dart_layout_is_imported_with_its_weights():
    booster, X = _train("reg:squarederror", n_rounds=6, max_depth=4, rate_drop=0.5, skip_drop=0.0)
    d = json.loads(booster.save_raw("json"))
    gb = d["learner"]["gradient_booster"]
    model = gb.pop("model")
    gb.update(name="dart", gbtree={"model": model, "name": "gbtree"}, weight_drop=model.pop("weight_drop"))
    ens, _ = import_xgboost_dict(d)
    np.testing.assert_allclose(predict_margin_reference(ens, X), _xgb_margin(booster, X), atol=1e-5)


# -- XGBoost export -----------------------------------------------------------------------
@pytest.mark.parametrize("objective", ["reg:squarederror", "binary:logistic", "multi:softprob", "count:poisson"])
def test_exported_model_loads_in_xgboost_and_round_trips_to_an_equal_ensemble(objective, tmp_path):
    booster, X = _train(objective, n_rounds=5)
    ens, meta = import_xgboost_booster(booster)
    meta["best_iteration"], meta["best_score"] = 3, 0.125
    meta["attributes"] = {"note": "hello"}
    path = tmp_path / "exported.json"
    export_xgboost_json(path, ens, meta)
    loaded = xgb.Booster(model_file=str(path))
    np.testing.assert_array_equal(_xgb_margin(loaded, X), _xgb_margin(booster, X))
    np.testing.assert_allclose(_xgb_margin(loaded, X), predict_margin_reference(ens, X), atol=1e-5)
    assert loaded.attr("note") == "hello" and loaded.best_iteration == 3
    ens2, meta2 = import_xgboost_booster(loaded)
    assert ens2 == ens
    assert meta2 == meta
    ens3, meta3 = load_model(path)
    assert ens3 == ens and meta3 == meta


def test_exported_objective_parameters_survive_xgboost():
    booster, X = _train("reg:pseudohubererror", n_rounds=2, max_depth=3, huber_slope=2.5)
    ens, meta = import_xgboost_booster(booster)
    assert meta["objective_params"] == {"huber_slope": 2.5}
    loaded = xgb.Booster()
    loaded.load_model(bytearray(json.dumps(export_xgboost_dict(ens, meta)).encode()))
    cfg = json.loads(loaded.save_config())["learner"]["objective"]
    assert float(cfg["pseudo_huber_param"]["huber_slope"]) == 2.5


def test_export_refuses_an_objective_xgboost_does_not_know():
    ens, meta = _small_model()
    meta["objective"] = "my:objective"
    with pytest.raises(ModelFormatError, match="'my:objective' is not a known objective"):
        export_xgboost_dict(ens, meta)


# -- text dump ----------------------------------------------------------------------------
@pytest.mark.parametrize("with_stats", [False, True])
def test_dump_text_matches_xgboost_get_dump(with_stats):
    booster, X = _train("binary:logistic", n_rounds=4, max_depth=5)
    ens, meta = import_xgboost_booster(booster)
    assert dump_text(ens, meta, with_stats=with_stats) == booster.get_dump(with_stats=with_stats)


def test_dump_text_uses_feature_names_and_integer_and_indicator_types():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 4))
    X[:, 1] = X[:, 1] > 0
    X[:, 2] = np.round(X[:, 2] * 3)
    y = X[:, 0] + 2 * X[:, 1] + X[:, 2]
    d = xgb.DMatrix(X, y, feature_names=["a", "b", "c", "d"], feature_types=["q", "i", "int", "float"])
    booster = xgb.train({"max_depth": 3}, d, 3)
    ens, meta = import_xgboost_booster(booster)
    assert meta["feature_names"] == ["a", "b", "c", "d"]
    assert meta["feature_types"] == ["q", "i", "int", "float"]
    dump = dump_text(ens, meta, with_stats=True)
    assert any("[b]" in t for t in dump) and any("[c<" in t for t in dump)
    assert dump == booster.get_dump(with_stats=True)
    assert dump_text(ens, meta) == booster.get_dump()


def test_dump_text_of_a_deep_chain_does_not_recurse():
    ens, meta = _chain_model(3000)
    dump = dump_text(ens, meta)
    assert len(dump) == 1 and dump[0].count("\n") == 2 * 3000 + 1


# -- dgboost JSON -------------------------------------------------------------------------
def test_model_file_round_trip_gives_equal_ensemble_and_meta_and_identical_bytes(tmp_path):
    booster, X = _train("multi:softprob", n_rounds=3)
    ens, meta = import_xgboost_booster(booster)
    meta.update(
        best_iteration=2,
        best_score=0.3333333333333333,
        params={"eta": 0.3, "max_depth": 8},
        attributes={"k": "v"},
        feature_names=[f"x{i}" for i in range(N_FEAT)],
        feature_types=["q"] * N_FEAT,
    )
    path = tmp_path / "m.json"
    save_model(path, ens, meta)
    first = path.read_bytes()
    ens2, meta2 = load_model(path)
    assert ens2 == ens and meta2 == meta
    assert ens2.base_margin.tolist() == ens.base_margin.tolist()
    save_model(path, ens2, meta2)
    assert path.read_bytes() == first
    d = json.loads(first)
    assert set(d) == {"learner", "version", "dgboost"} and d["dgboost"]["schema_version"] == 2
    # dgboost's schema 1 (model_to_json, still read) round-trips the same way
    legacy = json.loads(model_to_json(ens, meta))
    assert legacy["format"] == "dgboost" and legacy["schema_version"] == 1
    assert set(legacy["ensemble"]) == {"n_groups", "base_margin", "tree_offsets", "tree_group", *NODE_ARRAYS}
    ens3, meta3 = model_from_json(model_to_json(ens, meta))
    assert ens3 == ens and meta3 == meta
    np.testing.assert_array_equal(predict_margin_reference(ens2, X), predict_margin_reference(ens, X))


def test_float_arrays_round_trip_exactly_including_awkward_values():
    ens, meta = _small_model()
    ens.value[3:7] = np.array([0.1, 1e-38, -3.4e38, np.float32(1) / 3], dtype=np.float32)
    ens.cover[:] = [0.1, 1e-300, 1 / 3, 2.0**60, 5e-324, 7.0, 1 + 2**-52, 3, 3, 3]
    ens.base_margin[:] = [math.pi]
    ens2, _ = model_from_json(model_to_json(ens, meta))
    assert ens2 == ens


def test_atomic_save_leaves_the_old_file_intact_when_serialisation_fails(tmp_path):
    ens, meta = _small_model()
    path = tmp_path / "model.json"
    save_model(path, ens, meta)
    before = path.read_bytes()
    bad = dict(meta, params={"callback": object()})  # not JSON: fails after the ensemble is written
    with pytest.raises(ModelFormatError, match="serialise"):
        save_model(path, ens, bad)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["model.json"]  # no temporary file left behind
    with pytest.raises(ModelFormatError, match="serialise"):
        save_model(tmp_path / "new.json", ens, bad)
    assert os.listdir(tmp_path) == ["model.json"]


def test_save_refuses_invalid_models_in_either_encoding_and_leaves_no_file(tmp_path):
    ens, meta = _small_model()
    for name in ("m.json", "m.ubj"):
        with pytest.raises(ModelFormatError, match="num_class"):
            save_model(tmp_path / name, ens, dict(meta, num_class=3))
    assert os.listdir(tmp_path) == []


def test_meta_defaults_are_filled_and_unknown_keys_kept():
    ens, _ = _small_model()
    meta = {"objective": "reg:squarederror", "base_score": 0.5, "num_class": 0, "num_feature": 4, "extra": [1, 2]}
    _, meta2 = model_from_dict(model_to_dict(ens, meta))
    assert meta2 == _meta(num_feature=4, extra=[1, 2])


# -- validation ---------------------------------------------------------------------------
def _cycle_not_through_root(d):
    e = d["ensemble"]  # tree 0 becomes 0->(1,2) plus an unreachable loop 3->(4,5), 4->(3,6)
    e["left"][:7] = [1, -1, -1, 4, 3, -1, -1]
    e["right"][:7] = [2, -1, -1, 5, 6, -1, -1]
    e["parent"][:7] = [-1, 0, 0, 4, 3, 3, 4]
    e["feature"][:7] = [0, -1, -1, 1, 1, -1, -1]


def _children_before_parent(d):
    e = d["ensemble"]  # tree 0 with nodes 2 and 5 swapped: a valid tree, but leaf 2 is a child of 5
    e["left"][:7] = [1, 3, -1, -1, -1, 2, -1]
    e["right"][:7] = [5, 4, -1, -1, -1, 6, -1]
    e["parent"][:7] = [-1, 0, 5, 1, 1, 0, 5]
    e["feature"][:7] = [0, 1, -1, -1, -1, 2, -1]


def _set(path, value):
    def mutate(d):
        *keys, last = path
        node = d
        for k in keys:
            node = node[k]
        node[last] = value

    return mutate


def _delete(*path):
    def mutate(d):
        node = d
        for k in path[:-1]:
            node = node[k]
        del node[path[-1]]

    return mutate


CORRUPTIONS = {
    "missing ensemble key": (_delete("ensemble", "left"), "missing key ensemble.left"),
    "missing learner key": (_delete("learner", "num_feature"), r"missing key.*num_feature"),
    "missing top-level key": (_delete("ensemble"), "missing key 'ensemble'"),
    "wrong format name": (_set(["format"], "lightgbm"), "format"),
    "unsupported schema version": (_set(["schema_version"], 2), "unsupported schema_version 2"),
    "short node array": (lambda d: d["ensemble"]["gain"].pop(), "gain has length 9, expected 10"),
    "long node array": (lambda d: d["ensemble"]["cover"].append(1.0), "cover has length 11"),
    "base margin length": (_set(["ensemble", "base_margin"], [0.0, 0.0]), "base_margin has length 2"),
    "nan leaf value": (_set(["ensemble", "value", 3], float("nan")), "value has a non-finite value"),
    "inf split value": (_set(["ensemble", "split_value", 0], float("inf")), "non-finite"),
    "inf base margin": (_set(["ensemble", "base_margin", 0], float("-inf")), "non-finite"),
    "nan base score": (_set(["learner", "base_score"], float("nan")), "base_score is non-finite"),
    "float32 overflow": (_set(["ensemble", "gain", 0], 1e300), "gain has a non-finite value"),
    "child out of range": (_set(["ensemble", "left", 1], 7), "child index out of range"),
    "negative child": (_set(["ensemble", "right", 8], -2), "child index out of range"),
    "own child": (_set(["ensemble", "left", 1], 1), "cycle: tree 0, node 1 is its own child"),
    "root is a child": (_set(["ensemble", "left", 2], 0), "cycle: the root of tree 0"),
    "cycle away from the root": (_cycle_not_through_root, "cycle: tree 0, node 3 is its own ancestor"),
    "node reachable twice": (_set(["ensemble", "right", 2], 3), "node reachable twice"),
    "same left and right": (_set(["ensemble", "right", 7], 1), "reachable twice"),
    "one child missing": (_set(["ensemble", "right", 1], -1), "one child is -1 and the other is not"),
    "inner feature too large": (_set(["ensemble", "feature", 2], 4), "split feature 4 .* out of range"),
    "inner feature negative": (_set(["ensemble", "feature", 0], -1), "split feature -1"),
    "parent inconsistent": (_set(["ensemble", "parent", 3], 2), "parent array inconsistent"),
    "children numbered first": (_children_before_parent, "numbered before its parent"),
    "offsets not monotone": (_set(["ensemble", "tree_offsets"], [0, 8, 7]), "strictly increasing"),
    "empty tree": (_set(["ensemble", "tree_offsets"], [0, 0, 10]), "strictly increasing"),
    "offsets do not start at zero": (_set(["ensemble", "tree_offsets"], [1, 7, 10]), "start with 0"),
    "offsets total": (_set(["ensemble", "tree_offsets"], [0, 7, 9]), "expected 9"),
    "tree group out of range": (_set(["ensemble", "tree_group", 1], 1), "tree_group.1. = 1 is out of range"),
    "tree group length": (_set(["ensemble", "tree_group"], [0]), "tree_group has length 1"),
    "non-integer child": (_set(["ensemble", "left", 0], 1.5), "left must contain only integers"),
    "text in an array": (_set(["ensemble", "cover", 0], "x"), "cover must contain only numbers"),
    "array is not a list": (_set(["ensemble", "value"], {"a": 1}), "value must be a list"),
    "default_left not 0/1": (_set(["ensemble", "default_left", 0], 7), "default_left must be 0 or 1"),
    "num_class mismatch": (_set(["learner", "num_class"], 3), "num_class is 3"),
    "feature names length": (_set(["learner", "feature_names"], ["a"]), "feature_names has length 1"),
    "objective not a string": (_set(["learner", "objective"], 3), "objective"),
    "n_groups zero": (_set(["ensemble", "n_groups"], 0), "n_groups"),
}


@pytest.mark.parametrize("name", list(CORRUPTIONS))
def test_each_corruption_raises_model_format_error_naming_the_problem(name):
    mutate, message = CORRUPTIONS[name]
    d = model_to_dict(*_small_model())
    model_from_dict(copy.deepcopy(d))  # the unmutated dict is valid
    mutate(d)
    with pytest.raises(ModelFormatError, match=message):
        model_from_dict(d)


def test_leaves_may_carry_any_feature_index():
    d = model_to_dict(*_small_model())
    d["ensemble"]["feature"][3] = 2
    d["ensemble"]["feature"][4] = 99
    ens, _ = model_from_dict(d)
    assert ens.feature[4] == 99


def test_truncated_and_non_json_files_raise_model_format_error(tmp_path):
    ens, meta = _small_model()
    path = tmp_path / "m.json"
    save_model(path, ens, meta)
    text = path.read_bytes()
    (tmp_path / "cut.json").write_bytes(text[: len(text) // 2])
    with pytest.raises(ModelFormatError, match="truncated"):
        load_model(tmp_path / "cut.json")
    (tmp_path / "empty.json").write_bytes(b"")
    with pytest.raises(ModelFormatError, match="empty"):
        load_model(tmp_path / "empty.json")
    (tmp_path / "junk.json").write_bytes(b"{'not': json} trailing")
    with pytest.raises(ModelFormatError, match="not valid JSON"):
        load_model(tmp_path / "junk.json")
    (tmp_path / "bin.json").write_bytes(b"\x00\xff\xfe binary")
    with pytest.raises(ModelFormatError, match="not valid JSON"):
        load_model(tmp_path / "bin.json")
    with pytest.raises(ModelFormatError, match="neither a dgboost model"):
        model_from_json('{"hello": 1}')
    with pytest.raises(ModelFormatError, match="neither"):
        model_from_json("[1, 2]")


def _chain_model(depth):
    """One tree that is a chain of ``depth`` splits (2 * depth + 1 nodes)."""
    n = 2 * depth + 1
    left, right, parent = np.full(n, -1), np.full(n, -1), np.full(n, -1)
    for k in range(depth):
        i = 2 * k
        left[i], right[i] = i + 1, i + 2
        parent[i + 1] = parent[i + 2] = i
    inner = left >= 0
    ens = Ensemble(1, 0.0)
    ens.append(
        Tree(
            left=left,
            right=right,
            parent=parent,
            feature=np.where(inner, 0, -1),
            split_value=np.where(inner, np.arange(n, dtype=float), 0),
            default_left=np.zeros(n),
            gain=np.zeros(n),
            cover=np.ones(n),
            value=np.arange(n) * 1e-3,
        )
    )
    return ens, _meta(num_feature=1)


def test_deep_trees_validate_without_recursion_and_deep_cycles_are_found():
    ens, meta = _chain_model(20000)
    d = model_to_dict(ens, meta)
    ens2, _ = model_from_dict(copy.deepcopy(d))
    assert ens2 == ens
    # close the chain: the deepest inner node points back to an early node
    last = 2 * 19999
    d["ensemble"]["right"][last] = 2  # node 2 now has two parents
    with pytest.raises(ModelFormatError, match="reachable twice"):
        model_from_dict(d)
    X = np.array([[10.5], [np.nan], [-1.0], [12.0]])  # missing goes right all the way down
    np.testing.assert_allclose(predict_margin_reference(ens, X)[:, 0], [0.013, 40.0, 0.001, 0.015], rtol=1e-6)


def test_validate_ensemble_checks_feature_range_against_num_feature():
    ens, _ = _small_model()
    validate_ensemble(ens, 4)
    with pytest.raises(ModelFormatError, match="out of range 0..2"):
        validate_ensemble(ens, 3)


# -- XGBoost JSON validation and unsupported models ---------------------------------------
@pytest.fixture(scope="module")
def xgb_dict():
    booster, _ = _train("reg:squarederror", n_rounds=2, max_depth=3)
    return json.loads(booster.save_raw("json"))


def _tree0(d):
    return d["learner"]["gradient_booster"]["model"]["trees"][0]


XGB_CORRUPTIONS = {
    "missing tree key": (lambda d: _tree0(d).pop("left_children"), "missing key .*left_children"),
    "missing learner": (lambda d: d.pop("learner"), "missing key 'learner'"),
    "wrong length": (lambda d: _tree0(d)["sum_hessian"].pop(), "sum_hessian has length"),
    "child out of range": (lambda d: _tree0(d)["left_children"].__setitem__(0, 999), "out of range"),
    "nan split": (lambda d: _tree0(d)["split_conditions"].__setitem__(0, float("nan")), "non-finite"),
    "cycle": (lambda d: _tree0(d)["left_children"].__setitem__(1, 0), "cycle"),
    "tree_info out of range": (
        lambda d: d["learner"]["gradient_booster"]["model"]["tree_info"].__setitem__(0, 5),
        "tree_info .*out of range",
    ),
    "tree_info length": (
        lambda d: d["learner"]["gradient_booster"]["model"]["tree_info"].pop(),
        "tree_info has length",
    ),
    "bad base_score": (lambda d: d["learner"]["learner_model_param"].__setitem__("base_score", "abc"), "base_score"),
    "categorical split without categories": (
        lambda d: _tree0(d)["split_type"].__setitem__(0, 1),
        "split_type disagrees with categories_nodes",
    ),
    "vector leaf": (
        lambda d: _tree0(d)["tree_param"].__setitem__("size_leaf_vector", "2"),
        "multi-target .* not supported",
    ),
    "gblinear": (
        lambda d: d["learner"]["gradient_booster"].__setitem__("name", "gblinear"),
        "'gblinear' is not supported",
    ),
}


@pytest.mark.parametrize("name", list(XGB_CORRUPTIONS))
def test_each_xgboost_json_corruption_raises_model_format_error(name, xgb_dict):
    mutate, message = XGB_CORRUPTIONS[name]
    d = copy.deepcopy(xgb_dict)
    import_xgboost_dict(copy.deepcopy(d))
    mutate(d)
    with pytest.raises(ModelFormatError, match=message):
        import_xgboost_dict(d)


def test_xgboost_trees_with_deleted_or_out_of_order_nodes_are_renumbered(xgb_dict):
    ens0, _ = import_xgboost_dict(copy.deepcopy(xgb_dict))
    X, _ = _data(seed=5)
    d = copy.deepcopy(xgb_dict)
    t = _tree0(d)
    n = len(t["left_children"])
    # keep the root first, number the other nodes in reverse (children before parents),
    # and append one deleted (unreachable) node
    perm = [0] + list(range(n - 1, 0, -1))
    new = {old: i for i, old in enumerate(perm)}
    for key in (
        "base_weights",
        "default_left",
        "loss_changes",
        "split_conditions",
        "split_indices",
        "split_type",
        "sum_hessian",
    ):
        t[key] = [t[key][old] for old in perm] + [0]
    for key in ("left_children", "right_children"):
        t[key] = [new[t[key][old]] if t[key][old] >= 0 else -1 for old in perm] + [-1]
    t["parents"] = [new[p] if p != 2147483647 else p for p in (t["parents"][old] for old in perm)] + [0]
    t["split_indices"][-1] = 4294967295
    t["tree_param"].update(num_nodes=str(n + 1), num_deleted="1")
    ens, _ = import_xgboost_dict(d)
    assert ens.tree(0).n_nodes == n
    assert np.all(ens.parent[1:n] < np.arange(1, n))
    np.testing.assert_array_equal(predict_margin_reference(ens, X), predict_margin_reference(ens0, X))
    validate_ensemble(ens, N_FEAT)


# -- property tests -----------------------------------------------------------------------
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    n_trees=st.integers(0, 6),
    n_groups=st.integers(1, 3),
    num_feature=st.integers(1, 5),
    max_splits=st.integers(0, 12),
)
def test_random_valid_trees_round_trip_through_dgboost_json(seed, n_trees, n_groups, num_feature, max_splits):
    rng = np.random.default_rng(seed)
    ens = _random_ensemble(rng, n_trees, n_groups, num_feature, max_splits)
    meta = _meta(
        num_feature=num_feature,
        num_class=n_groups if n_groups > 1 else 0,
        objective="multi:softprob" if n_groups > 1 else "reg:squarederror",
        feature_names=[f"f_{i}" for i in range(num_feature)],
    )
    text = model_to_json(ens, meta)
    ens2, meta2 = model_from_json(text)
    assert ens2 == ens and meta2 == meta
    assert model_to_json(ens2, meta2) == text


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1), n_trees=st.integers(1, 5), multiclass=st.booleans(), max_splits=st.integers(0, 10)
)
def test_random_trees_exported_to_xgboost_predict_like_the_reference(seed, n_trees, multiclass, max_splits):
    rng = np.random.default_rng(seed)
    n_groups, num_feature = (3 if multiclass else 1), 4
    ens = _random_ensemble(rng, n_trees * n_groups, n_groups, num_feature, max_splits)
    ens.base_margin[:] = np.float32(ens.base_margin)  # XGBoost keeps base_score in float32
    meta = _meta(
        num_feature=num_feature,
        num_class=3 if multiclass else 0,
        objective="multi:softprob" if multiclass else "reg:squarederror",
        base_score=ens.base_margin.tolist() if multiclass else float(ens.base_margin[0]),
    )
    X = np.round(rng.normal(size=(64, num_feature)) * 4) / 4  # lands on split values
    X[rng.random(X.shape) < 0.2] = np.nan
    booster = xgb.Booster()
    booster.load_model(bytearray(json.dumps(export_xgboost_dict(ens, meta)).encode()))
    np.testing.assert_allclose(_xgb_margin(booster, X), predict_margin_reference(ens, X), atol=1e-5)
    np.testing.assert_allclose(_xgb_margin(booster, X), predict_margin_reference_f32(ens, X), atol=1e-6)
    ens2, meta2 = import_xgboost_booster(booster)
    assert ens2 == ens
    # XGBoost writes its objective's parameters with their defaults
    assert meta2 == dict(meta, objective_params={} if multiclass else {"scale_pos_weight": 1})


def test_imported_random_forest_rounds_count_parallel_trees_as_one_round():
    import xgboost as xgb

    import dgboost as dg

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4)).astype(np.float32)
    y = X[:, 0] + rng.normal(scale=0.1, size=300)
    booster = xgb.train(
        {"num_parallel_tree": 3, "max_depth": 3, "subsample": 0.8, "colsample_bynode": 0.8}, xgb.DMatrix(X, label=y), 4
    )
    model = dg.Booster.from_xgboost(booster)
    assert model.num_boosted_rounds() == 4
    np.testing.assert_allclose(
        model.predict(X, iteration_range=(0, 2), output_margin=True),
        booster.predict(xgb.DMatrix(X), iteration_range=(0, 2), output_margin=True),
        atol=1e-5,
    )


def test_an_infinite_split_condition_as_xgboosts_gpu_writes_loads_and_predicts_like_xgboost():
    booster, X = _train("reg:squarederror", n_rounds=2, max_depth=3)
    model = json.loads(booster.save_raw("json"))
    tree = model["learner"]["gradient_booster"]["model"]["trees"][0]
    internal = [i for i, c in enumerate(tree["left_children"]) if c >= 0]
    # XGBoost itself gets the lowest float32 instead (its JSON reader takes no infinity): for
    # finite values the same split, every present value going right
    tree["split_conditions"][internal[1]] = float(np.finfo(np.float32).min)
    edited = xgb.Booster(model_file=bytearray(json.dumps(model).encode()))
    tree["split_conditions"][internal[1]] = -math.inf
    ens, _ = import_xgboost_dict(json.loads(json.dumps(model)))
    np.testing.assert_allclose(predict_margin_reference_f32(ens, X), _xgb_margin(edited, X), rtol=0, atol=4e-7)
    tree["split_conditions"][internal[0]] = math.nan
    with pytest.raises(ModelFormatError, match="non-finite split condition"):
        import_xgboost_dict(model)
