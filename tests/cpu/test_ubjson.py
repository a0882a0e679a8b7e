"""The UBJSON decoder behind the import of in-memory XGBoost boosters (``save_raw("ubj")``)."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest
import xgboost  # declared test dependency: fail, never skip

from dgboost import ModelFormatError
from dgboost._ubjson import ObjectColumns, dumps, loads
from dgboost.xgboost_json import import_xgboost_booster, import_xgboost_dict, import_xgboost_ubjson


def _ubj_string(s: str) -> bytes:
    data = s.encode()
    return b"l" + struct.pack(">i", len(data)) + data


def test_every_marker_decodes_as_json_would_give_it():
    # {"n": null, "t": true, "f": false, "i": -5, "u": 200, "s": 3000, "l": -70000, "L": 2**40,
    #  "d": 1.5, "D": 0.1, "str": "héllo", "c": "x", "list": [1, "two", [3]], "typed": [1.5, -2.0]}
    def key(k):
        data = k.encode()
        return b"U" + bytes([len(data)]) + data

    body = b"{"
    body += key("n") + b"Z" + key("t") + b"T" + key("f") + b"F"
    body += key("i") + b"i" + struct.pack(">b", -5) + key("u") + b"U" + bytes([200])
    body += key("s") + b"I" + struct.pack(">h", 3000) + key("l") + b"l" + struct.pack(">i", -70000)
    body += key("L") + b"L" + struct.pack(">q", 2**40)
    body += key("d") + b"d" + struct.pack(">f", 1.5) + key("D") + b"D" + struct.pack(">d", 0.1)
    body += key("str") + b"S" + _ubj_string("héllo") + key("c") + b"Cx"
    body += key("list") + b"[" + b"U\x01" + b"S" + _ubj_string("two") + b"N" + b"[U\x03]" + b"]"
    body += key("typed") + b"[$d#U\x02" + struct.pack(">ff", 1.5, -2.0)
    body += key("counted") + b"[#U\x02TF"
    body += b"}"
    out = loads(body)
    typed = out.pop("typed")
    assert typed.dtype == np.float32 and typed.dtype.isnative and typed.tolist() == [1.5, -2.0]
    assert out == {
        "n": None,
        "t": True,
        "f": False,
        "i": -5,
        "u": 200,
        "s": 3000,
        "l": -70000,
        "L": 2**40,
        "d": 1.5,
        "D": 0.1,
        "str": "héllo",
        "c": "x",
        "list": [1, "two", [3]],
        "counted": [True, False],
    }


@pytest.mark.parametrize("data", [b"", b"[U", b"[$d#U\x03\x00\x00", b"{U\x01a", b"Q", b"U\x01U\x02"])
def test_truncated_or_malformed_data_is_a_model_format_error(data):
    with pytest.raises(ModelFormatError, match="UBJSON"):
        loads(data)


@pytest.mark.parametrize(
    "params,rounds",
    [
        ({"objective": "binary:logistic", "max_depth": 5}, 12),
        ({"objective": "multi:softprob", "num_class": 3, "max_depth": 3}, 5),
        ({"objective": "reg:squarederror", "max_depth": 4, "num_parallel_tree": 2, "base_score": 0.25}, 4),
    ],
)
def test_an_xgboost_booster_decoded_from_ubjson_equals_its_json_form(params, rounds):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 6)).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    y = rng.integers(0, params.get("num_class", 2), size=600).astype(np.float32)
    booster = xgboost.train({**params, "tree_method": "hist"}, xgboost.DMatrix(X, y), rounds)
    from_ubj = loads(booster.save_raw(raw_format="ubj"))
    from_json = json.loads(bytes(booster.save_raw(raw_format="json")))
    (ens_u, meta_u), (ens_j, meta_j) = import_xgboost_dict(from_ubj), import_xgboost_dict(from_json)
    for name in ("left", "right", "feature", "split_value", "default_left", "value", "cover", "gain"):
        a, b = getattr(ens_u, name), getattr(ens_j, name)
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), name
    np.testing.assert_array_equal(ens_u.base_margin, ens_j.base_margin)
    assert meta_u["objective"] == meta_j["objective"] and meta_u["num_feature"] == meta_j["num_feature"]
    ens, _ = import_xgboost_booster(booster)  # the in-memory import reads the UBJSON form
    assert ens.split_value.tobytes() == ens_j.split_value.tobytes()


def test_a_bytearray_is_decoded_as_its_bytes_and_nothing_decoded_refers_to_it():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(400, 5)).astype(np.float32)
    y = rng.integers(0, 3, size=400).astype(np.float32)
    params = {"objective": "multi:softprob", "num_class": 3, "max_depth": 4, "tree_method": "hist"}
    raw = xgboost.train(params, xgboost.DMatrix(X, y), 4).save_raw(raw_format="ubj")
    assert isinstance(raw, bytearray)  # what XGBoost gives, read where it lies
    for columns in ((), ("trees",)):
        from_array = loads(raw, columns=columns)
        kept = import_xgboost_dict(from_array)[0]
        want = import_xgboost_dict(loads(bytes(raw), columns=columns))[0]
        raw[:] = bytes(len(raw))  # the buffer overwritten: what was decoded must not change
        for name in ("left", "right", "feature", "split_value", "default_left", "value", "cover", "gain"):
            a, b = getattr(kept, name), getattr(want, name)
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), name
        raw = xgboost.train(params, xgboost.DMatrix(X, y), 4).save_raw(raw_format="ubj")


def test_a_memoryview_is_decoded_where_it_lies_as_its_bytes_are():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(400, 5)).astype(np.float32)
    y = rng.integers(0, 3, size=400).astype(np.float32)
    params = {"objective": "multi:softprob", "num_class": 3, "max_depth": 4, "tree_method": "hist"}
    raw = bytes(xgboost.train(params, xgboost.DMatrix(X, y), 4).save_raw(raw_format="ubj"))
    for columns in ((), ("trees",)):
        buf = np.frombuffer(raw, dtype=np.uint8).copy()
        view = memoryview(buf).toreadonly()
        kept = import_xgboost_dict(loads(view, columns=columns))[0]
        want = import_xgboost_dict(loads(raw, columns=columns))[0]
        buf[:] = 0  # nothing decoded refers to the buffer
        for name in ("left", "right", "feature", "split_value", "default_left", "value", "cover", "gain"):
            a, b = getattr(kept, name), getattr(want, name)
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), name
    # a key that is not ASCII, read from the view by the column scanner
    trees = [{"k\u00e9y": np.arange(3, dtype=np.int32)}, {"k\u00e9y": np.arange(2, dtype=np.int32)}]
    cols = loads(memoryview(dumps({"trees": trees})), columns=("trees",))["trees"]
    assert isinstance(cols, ObjectColumns) and cols.names == ["k\u00e9y"]
    assert cols.typed("k\u00e9y")[0].tolist() == [0, 1, 2, 0, 1]


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("left_children", -5, r"trees\[1\]: child index out of range at node 0"),
        ("split_indices", -3, r"trees\[1\]: feature out of range at node 0"),
        ("default_left", 2, r"trees\[1\].*default_left"),
    ],
)
def test_a_corrupt_node_in_an_xgboost_ubjson_model_is_named_as_a_model_format_error(field, value, message):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 5)).astype(np.float32)
    y = rng.integers(0, 2, size=400).astype(np.float32)
    booster = xgboost.train({"objective": "binary:logistic", "max_depth": 3}, xgboost.DMatrix(X, y), 3)
    doc = loads(bytes(booster.save_raw(raw_format="ubj")))
    tree = doc["learner"]["gradient_booster"]["model"]["trees"][1]
    assert tree[field].dtype in (np.int32, np.uint8)  # XGBoost's dtypes: the one-pass reader takes them
    tree[field][0] = value  # the root: an inner node
    with pytest.raises(ModelFormatError, match=message):
        import_xgboost_ubjson(dumps(doc))
