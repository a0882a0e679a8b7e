"""Hostile and broken model files (issue 9, item 3): every one is rejected with a
:class:`dgboost.DGBoostError` that says what is wrong, or loads and predicts exactly what
the file describes -- quickly, and never with another exception, a crash or a hang.

The files are mutations of real models (dgboost's file format, dgboost's internal schema 1
and XGBoost 3.4.1's JSON, trained in a module fixture): wrong types, missing keys, huge
declared sizes, out-of-range or cyclic children, out-of-range features, NaN/inf numbers,
truncated or garbled text. Whatever loads is checked against an oracle that walks the
parsed JSON itself (it shares no code with dgboost's reader) and against
:func:`dgboost.testing.reference.predict_margin_reference`.

Hypothesis draws the seed and the starting model (derandomized, no example database, so CI
sees the same files every run); each example applies ``MUTATIONS_PER_EXAMPLE`` mutations
from that seed, because one hypothesis example per file would spend most of the time in
hypothesis itself. Most files are loaded from memory (bytes/bytearray, the same parser as
files); a share goes through real files and through :class:`dgboost.TreeExplainer`.
"""

from __future__ import annotations

import copy
import json
import math
import random
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dgboost as dg
from dgboost.testing.fuzzing import error_or_result
from dgboost.testing.reference import predict_margin_reference, predict_margin_reference_f32

EXAMPLES = 250
MUTATIONS_PER_EXAMPLE = 40
assert EXAMPLES * MUTATIONS_PER_EXAMPLE >= 10_000  # the acceptance figure
#: one load (parse + validate + predict) of a small model takes milliseconds; anything
#: near this is a hang in the making
SECONDS_PER_FILE = 5.0

FUZZ = settings(
    max_examples=EXAMPLES, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow]
)

_rng = np.random.default_rng(0)
X = _rng.normal(size=(40, 5)).astype(np.float32)
X[::5, 1] = np.nan  # exercise default_left
X[3, :] = np.nan
Y_REG = np.nan_to_num((X[:, 0] + np.nan_to_num(X[:, 1]) > 0) + 0.1 * X[:, 2])
Y_BIN = (np.nan_to_num(X[:, 0]) > 0).astype(np.float32)
Y_MULTI = (np.digitize(np.nan_to_num(X[:, 2]), [-0.5, 0.5])).astype(np.float32)

OUTCOMES = {"loaded": 0, "rejected": 0, "explained": 0, "files": 0}


# -- the starting corpus -------------------------------------------------------------------
def _dgboost_models():
    out = {}
    for name, params, y in (
        ("reg", {"objective": "reg:squarederror"}, Y_REG),
        ("binary", {"objective": "binary:logistic"}, Y_BIN),
        ("multi", {"objective": "multi:softprob", "num_class": 3}, Y_MULTI),
        ("poisson", {"objective": "count:poisson"}, np.abs(Y_REG)),
    ):
        b = dg.train({**params, "max_depth": 3, "eta": 0.5}, dg.DMatrix(X, y), 3)
        out[f"dgboost-{name}-schema1"] = b.to_json()
        out[f"dgboost-{name}-file"] = json.dumps(dg.model_io.model_to_file_dict(b.ensemble, b.meta))
    return out


def _xgboost_models():
    import xgboost as xgb  # a declared test dependency: missing, the test fails

    out = {}
    for name, params, y in (
        ("reg", {"objective": "reg:squarederror"}, Y_REG),
        ("binary", {"objective": "binary:logistic"}, Y_BIN),
        ("multi", {"objective": "multi:softprob", "num_class": 3}, Y_MULTI),
        ("dart", {"objective": "reg:squarederror", "booster": "dart", "rate_drop": 0.5}, Y_REG),
        ("forest", {"objective": "reg:squarederror", "num_parallel_tree": 2, "subsample": 0.8}, Y_REG),
    ):
        b = xgb.train({**params, "max_depth": 3, "eta": 0.5, "seed": 0}, xgb.DMatrix(X, y), 3)
        out[f"xgboost-{name}"] = bytes(b.save_raw("json")).decode()
    return out


@pytest.fixture(scope="module")
def corpus():
    models = {**_dgboost_models(), **_xgboost_models()}
    return sorted(models.items())


# -- an oracle that reads the JSON itself ----------------------------------------------------
def _walk(left, right, feature, threshold, default_left, leaf_value, rows):
    """Leaf value of every row: a plain walk from the root, in float32 like XGBoost.
    (JSON true/false in an integer array read as 1/0, as dgboost reads them.)"""
    left, right = np.asarray(left, dtype=np.int64), np.asarray(right, dtype=np.int64)
    feature, default_left = np.asarray(feature, dtype=np.int64), np.asarray(default_left, dtype=np.int64)
    threshold = np.asarray(threshold, dtype=np.float32)
    out = np.empty(rows.shape[0], dtype=np.float64)
    for r in range(rows.shape[0]):
        node, steps = 0, 0
        while left[node] != -1:
            x = rows[r, feature[node]]
            if np.isnan(x):
                node = left[node] if default_left[node] else right[node]
            else:
                node = left[node] if x < threshold[node] else right[node]
            steps += 1
            assert steps <= len(left), "oracle: the loaded file has a cycle"
        out[r] = leaf_value[node]
    return out


def _link_margin(objective: str, score: float) -> float:
    if objective in ("binary:logistic", "reg:logistic"):
        return math.log(score / (1.0 - score))
    if objective in ("count:poisson", "reg:gamma", "reg:tweedie", "survival:cox", "survival:aft"):
        return math.log(score)
    return score


def oracle_margin(d: dict, rows: np.ndarray) -> np.ndarray:
    """Margins the parsed model ``d`` (dgboost schema 1 or XGBoost JSON) describes."""
    if d.get("format") == "dgboost":
        e = d["ensemble"]
        off, groups = e["tree_offsets"], e["tree_group"]
        out = np.tile(np.asarray(e["base_margin"], dtype=np.float64), (rows.shape[0], 1))
        for t in range(len(off) - 1):
            s = slice(off[t], off[t + 1])
            out[:, int(groups[t])] += _walk(
                e["left"][s],
                e["right"][s],
                e["feature"][s],
                e["split_value"][s],
                e["default_left"][s],
                np.float32(e["value"][s]),
                rows,
            )
        return out
    learner = d["learner"]
    lmp = learner["learner_model_param"]
    n_groups = int(float(lmp["num_class"])) or int(float(lmp.get("num_target", "1")))
    scores = [float(np.float32(v)) for v in str(lmp["base_score"]).strip("[]").split(",")]
    objective = learner["objective"]["name"]
    objective = "reg:squarederror" if objective == "reg:linear" else objective
    base = np.broadcast_to([_link_margin(objective, s) for s in scores], (n_groups,))
    out = np.tile(base, (rows.shape[0], 1))
    gb = learner["gradient_booster"]
    model = gb["model"] if "model" in gb else gb["gbtree"]["model"]
    drop = gb.get("weight_drop", model.get("weight_drop"))
    for t, tree in enumerate(model["trees"]):
        leaf = np.float32(tree["split_conditions"])
        if drop is not None:
            leaf = (leaf * np.float32(drop[t])).astype(np.float32)
        out[:, int(model["tree_info"][t])] += _walk(
            tree["left_children"],
            tree["right_children"],
            tree["split_indices"],
            tree["split_conditions"],
            tree["default_left"],
            leaf,
            rows,
        )
    return out


# -- mutations -------------------------------------------------------------------------------
HOSTILE_VALUES = [
    None,
    True,
    False,
    "",
    "x",
    "nan",
    "-inf",
    "1e400",
    "[",
    -1,
    0,
    1,
    2,
    3,
    10**12,
    -(10**12),
    2**31,
    2**63,
    10**30,
    1.5,
    -0.0,
    1e308,
    1e-45,
    float("nan"),
    float("inf"),
    float("-inf"),
    [],
    {},
    [1, 2],
    [[1]],
    {"a": 1},
    [None],
    ["1"],
    [float("nan")],
    "2147483647",
]
NODE_KEYS_XGB = (
    "left_children",
    "right_children",
    "parents",
    "split_indices",
    "split_conditions",
    "default_left",
    "loss_changes",
    "sum_hessian",
    "base_weights",
)
NODE_KEYS_DG = (
    "left",
    "right",
    "parent",
    "feature",
    "split_value",
    "default_left",
    "gain",
    "cover",
    "value",
    "tree_offsets",
    "tree_group",
    "base_margin",
)


def _paths(obj, prefix=()):
    """Every (path, value) in a parsed JSON document, containers included."""
    yield prefix, obj
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(obj, list) and len(obj) <= 64:  # long lists: the list, not each element
        for i, v in enumerate(obj):
            yield from _paths(v, prefix + (i,))


def _set(doc, path, value):
    node = doc
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value


def _node_arrays(doc):
    """Paths of the per-node lists of every tree (both schemas)."""
    out = []
    for path, v in _paths(doc):
        if isinstance(v, list) and path and path[-1] in NODE_KEYS_XGB + NODE_KEYS_DG:
            out.append((path, v))
    return out


def _trees(doc):
    if doc.get("format") == "dgboost":
        return []
    try:
        gb = doc["learner"]["gradient_booster"]
        return (gb["model"] if "model" in gb else gb["gbtree"]["model"])["trees"]
    except (KeyError, TypeError):
        return []


def mutate_structure(doc, rnd: random.Random) -> str:
    """One semantic mutation of the parsed model, in place; returns its name."""
    arrays = _node_arrays(doc)
    trees = _trees(doc)
    kind = rnd.choice(
        [
            "value",
            "value",
            "delete",
            "list",
            "child",
            "child",
            "feature",
            "threshold",
            "num_nodes",
            "base_score",
            "objective",
            "counts",
            "num_deleted",
            "chain",
        ]
    )
    if kind == "value":
        path, _ = rnd.choice([p for p in _paths(doc) if p[0]])
        _set(doc, path, copy.deepcopy(rnd.choice(HOSTILE_VALUES)))
    elif kind == "delete":
        dicts = [(p, v) for p, v in _paths(doc) if isinstance(v, dict) and v]
        path, v = rnd.choice(dicts)
        del v[rnd.choice(sorted(v))]
    elif kind == "list" and arrays:
        path, v = rnd.choice(arrays)
        op = rnd.choice(["truncate", "extend", "swap", "element"])
        if op == "truncate":
            del v[rnd.randrange(len(v) + 1) :]
        elif op == "extend":
            v.extend(v[: rnd.randrange(1, 4)] or [0])
        elif op == "swap" and len(v) > 1:
            i, j = rnd.randrange(len(v)), rnd.randrange(len(v))
            v[i], v[j] = v[j], v[i]
        elif v:
            v[rnd.randrange(len(v))] = copy.deepcopy(rnd.choice(HOSTILE_VALUES))
    elif kind == "child" and arrays:
        cands = [
            (p, v)
            for p, v in arrays
            if p[-1] in ("left_children", "right_children", "left", "right", "parents", "parent") and v
        ]
        if cands:
            path, v = rnd.choice(cands)
            i = rnd.randrange(len(v))
            v[i] = rnd.choice(
                [-2, -1, 0, i, max(i - 1, 0), len(v) - 1, len(v), len(v) + 5, 10**12, 2147483647, rnd.randrange(len(v))]
            )
    elif kind == "feature" and arrays:
        cands = [(p, v) for p, v in arrays if p[-1] in ("split_indices", "feature") and v]
        if cands:
            path, v = rnd.choice(cands)
            v[rnd.randrange(len(v))] = rnd.choice([-5, -1, 4, 5, 6, 2**31, 10**15, 0])
    elif kind == "threshold" and arrays:
        cands = [
            (p, v)
            for p, v in arrays
            if p[-1] in ("split_conditions", "split_value", "value", "base_weights", "base_margin") and v
        ]
        if cands:
            path, v = rnd.choice(cands)
            v[rnd.randrange(len(v))] = rnd.choice(
                [float("nan"), float("inf"), float("-inf"), 1e308, -1e308, 3.5e38, 1e-45, -0.0, 0.0]
            )
    elif kind == "num_nodes" and trees:
        t = rnd.choice(trees)
        if isinstance(t, dict) and isinstance(t.get("tree_param"), dict):
            n = len(t.get("left_children") or [])
            t["tree_param"]["num_nodes"] = rnd.choice(
                ["1000000000000", str(10**12), "0", "-1", "1e12", str(n + 1), str(n - 1), 10**12]
            )
    elif kind == "base_score":
        lmp = doc.get("learner", {}).get("learner_model_param") if isinstance(doc.get("learner"), dict) else None
        if isinstance(lmp, dict):
            lmp["base_score"] = rnd.choice(
                ["nan", "-1", "0", "1", "2", "[5E-1,5E-1]", "1e400", "[]", "[1,2,3,4]", "0.25", "inf", 0.5]
            )
        elif isinstance(doc.get("ensemble"), dict):
            doc["ensemble"]["base_margin"] = rnd.choice([[float("nan")], [], [0.0, 1.0], [1e308], [-3.0]])
    elif kind == "objective":
        new = rnd.choice(
            [
                "reg:linear",
                "binary:logistic",
                "multi:softmax",
                "count:poisson",
                "reg:gamma",
                "rank:ndcg",
                "survival:aft",
                "custom",
                "no:such",
                "",
                3,
            ]
        )
        learner = doc.get("learner")
        if isinstance(learner, dict) and isinstance(learner.get("objective"), dict):
            learner["objective"]["name"] = new
        elif isinstance(learner, dict):
            learner["objective"] = new
    elif kind == "counts":
        learner = doc.get("learner")
        where = learner.get("learner_model_param", learner) if isinstance(learner, dict) else None
        if isinstance(where, dict):
            key = rnd.choice(["num_class", "num_feature", "num_target"])
            where[key] = rnd.choice(["0", "1", "2", "3", "4", "1000000000000", "-1", "x", 0, 3, 10**12, 2])
    elif kind == "num_deleted" and trees:
        t = rnd.choice(trees)
        if isinstance(t, dict) and isinstance(t.get("tree_param"), dict):
            t["tree_param"]["num_deleted"] = rnd.choice(["1", "2", "-1", "x"])
    elif kind == "chain" and trees:
        # a long chain: the tree declares more depth than any kernel supports
        t = rnd.choice(trees)
        if isinstance(t, dict):
            t.update(_chain_tree(rnd.choice([100, 2000])))
    return kind


def _chain_tree(depth: int) -> dict:
    """An XGBoost tree that is a chain of ``depth`` splits (every left child a leaf)."""
    n = 2 * depth + 1
    left, right, parents = [-1] * n, [-1] * n, [2147483647] * n
    for k in range(depth):
        node = 2 * k
        left[node], right[node] = node + 1, node + 2
        parents[node + 1] = parents[node + 2] = node
    return {
        "left_children": left,
        "right_children": right,
        "parents": parents,
        "split_indices": [k % 5 for k in range(n)],
        "split_conditions": [0.001 * (k % 7) - 0.003 for k in range(n)],
        "default_left": [k % 2 for k in range(n)],
        "loss_changes": [0.0] * n,
        "sum_hessian": [1.0] * n,
        "base_weights": [0.01] * n,
        "categories": [],
        "categories_nodes": [],
        "categories_segments": [],
        "categories_sizes": [],
        "split_type": [0] * n,
        "id": 0,
        "tree_param": {"num_deleted": "0", "num_feature": "5", "num_nodes": str(n), "size_leaf_vector": "1"},
    }


def mutate_text(text: str, rnd: random.Random) -> bytes:
    """One mutation of the text itself."""
    data = text.encode()
    kind = rnd.choice(["truncate", "truncate", "flip", "insert", "garbage", "nest", "bom", "latin1"])
    if kind == "truncate":
        return data[: rnd.randrange(len(data))]
    if kind == "flip":
        b = bytearray(data)
        for _ in range(rnd.randrange(1, 5)):
            b[rnd.randrange(len(b))] = rnd.randrange(256)
        return bytes(b)
    if kind == "insert":
        i = rnd.randrange(len(data))
        return data[:i] + rnd.choice([b"{", b"}", b"[", b"]", b",", b'"', b"\x00", b"NaN", b"-"]) + data[i:]
    if kind == "garbage":
        return bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 200)))
    if kind == "nest":
        depth = rnd.choice([100, 10_000, 100_000])
        return b"[" * depth + b"]" * depth if rnd.random() < 0.5 else b'{"learner":' * depth
    if kind == "bom":
        return b"\xef\xbb\xbf" + data
    return data.replace(b'"', "\u00e9".encode("latin-1"), 1)


def _dumps(doc, rnd: random.Random) -> str:
    return json.dumps(doc, allow_nan=True, sort_keys=rnd.random() < 0.5, indent=rnd.choice([None, None, 1]))


# -- the checks ----------------------------------------------------------------------------
def _is_json_model(text) -> dict | None:
    try:
        d = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return d if isinstance(d, dict) else None


def check_booster(data: bytes, *, path=None, reference: np.ndarray | None = None) -> dg.Booster | None:
    """Load ``data``; a DGBoostError with a message, or a model that predicts what it says."""

    def run():
        if path is not None:
            path.write_bytes(data)
            OUTCOMES["files"] += 1
            booster = dg.Booster(model_file=str(path))
        elif len(data) % 2:
            booster = dg.Booster(model_file=bytearray(data))
        else:
            booster = dg.Booster()
            booster.load_model(bytes(data))
        return booster, booster.predict(dg.DMatrix(X), output_margin=True)

    loaded = error_or_result(run, OUTCOMES, "loaded", SECONDS_PER_FILE)
    if loaded is None:
        return None
    booster, margin = loaded
    margin = np.asarray(margin, dtype=np.float64).reshape(X.shape[0], -1)
    # margins are float32 sums, as in XGBoost: where leaves near float32's largest value
    # add up past it, the float32 reference (also inf) is the right answer
    f32 = predict_margin_reference_f32(booster.ensemble, X).astype(np.float64)
    over = ~np.isfinite(f32)
    np.testing.assert_array_equal(margin[over], f32[over])
    expect = predict_margin_reference(booster.ensemble, X)
    np.testing.assert_allclose(margin[~over], expect[~over], rtol=1e-5, atol=1e-5)
    d = _is_json_model(data.decode("utf-8", errors="replace"))
    assert d is not None, "dgboost loaded something that is not a JSON object"
    if booster.meta.get("objective") != "survival:aft":
        np.testing.assert_allclose(margin[~over], oracle_margin(d, X)[~over], rtol=1e-5, atol=1e-5)
    if reference is not None:
        np.testing.assert_allclose(margin, reference, rtol=1e-6, atol=1e-6)
    return booster


def check_explainer(model) -> None:
    """The importer rejects ``model`` with a DGBoostError, or explains it additively."""
    start = time.perf_counter()
    try:
        explainer = dg.TreeExplainer(model)
        phi = np.asarray(explainer.shap_values(X[:4], check_additivity=False))
    except dg.DGBoostError as e:
        assert str(e).strip()
        return
    finally:
        assert time.perf_counter() - start < SECONDS_PER_FILE
    OUTCOMES["explained"] += 1
    assert np.all(np.isfinite(phi))
    margin = predict_margin_reference(explainer.ensemble, X[:4])
    bias = np.asarray(explainer.expected_value).reshape(1, -1)
    total = phi.reshape(4, X.shape[1], -1).sum(axis=1) + bias
    # mutated covers (a child covering more than its parent, denormal covers) are not
    # rejected -- XGBoost accepts them too -- and can make the expected value and the
    # SHAP values huge with opposite signs: additivity then holds to float64 rounding of
    # those magnitudes, not of the margin
    scale = 1 + np.abs(margin).max() + np.abs(bias).max() + np.abs(phi).sum(axis=1).max()
    np.testing.assert_allclose(total, margin, rtol=1e-4, atol=1e-6 * scale)


# -- the fuzz tests -------------------------------------------------------------------------
@FUZZ
@given(seed=st.integers(0, 2**32 - 1), which=st.integers(0, 1000))
def test_mutated_model_files_are_rejected_with_a_dgboost_error_or_predict_what_they_say(
    corpus, tmp_path_factory, seed, which
):
    rnd = random.Random(seed)
    name, text = corpus[which % len(corpus)]
    folder = tmp_path_factory.getbasetemp() / "fuzz-models"
    folder.mkdir(exist_ok=True)
    for k in range(MUTATIONS_PER_EXAMPLE):
        doc = json.loads(text)
        if rnd.random() < 0.2:
            data = mutate_text(text, rnd)
        else:
            for _ in range(rnd.choice([1, 1, 1, 2, 3])):
                mutate_structure(doc, rnd)
            data = _dumps(doc, rnd).encode()
        path = folder / "m.json" if k % 10 == 0 else None
        check_booster(data, path=path)
        if k % 8 == 0:
            check_explainer(path if path is not None else bytes(data))


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(seed=st.integers(0, 2**32 - 1), which=st.integers(0, 1000))
def test_semantically_neutral_edits_load_and_predict_exactly_as_the_original(corpus, seed, which):
    # key order, whitespace, unknown extra keys and integers written as floats change
    # nothing XGBoost reads: the model must predict bit for bit as before
    rnd = random.Random(seed)
    name, text = corpus[which % len(corpus)]
    reference = dg.Booster(model_file=bytearray(text.encode())).predict(dg.DMatrix(X), output_margin=True)
    reference = np.asarray(reference, dtype=np.float64).reshape(X.shape[0], -1)
    for _ in range(10):
        doc = json.loads(text)
        dicts = [v for _, v in _paths(doc) if isinstance(v, dict)]
        rnd.choice(dicts)["zz_unknown_key"] = rnd.choice([1, "x", [1, 2], {"a": None}])
        check_booster(_dumps(doc, rnd).encode(), reference=reference)


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(seed=st.integers(0, 2**32 - 1), which=st.integers(0, 1000))
def test_reading_all_trees_at_once_gives_what_reading_tree_by_tree_gives_or_its_very_error(corpus, seed, which):
    # the fast reader must never accept what the per-tree reader refuses, and must give its
    # arrays bit for bit; on anything else it hands over, so errors keep naming tree and node
    from unittest import mock

    from dgboost import xgboost_json

    def outcome(doc):
        try:
            ensemble, meta = xgboost_json.import_xgboost_dict(doc)
        except dg.DGBoostError as e:
            return type(e), str(e)
        return (
            {k: (a.dtype.str, a.tobytes()) for k, a in vars(ensemble).items() if isinstance(a, np.ndarray)},
            repr(sorted(meta.items(), key=lambda kv: kv[0])),
        )

    rnd = random.Random(seed)
    xgb_models = [(n, t) for n, t in corpus if n.startswith("xgboost-")]
    name, text = xgb_models[which % len(xgb_models)]
    for k in range(12):
        doc = json.loads(text)
        for _ in range(k % 3):
            mutate_structure(doc, rnd)
        fast = outcome(copy.deepcopy(doc))
        with mock.patch.object(xgboost_json, "_read_trees_at_once", lambda trees, where: None):
            reference = outcome(copy.deepcopy(doc))
        assert fast == reference, name


def test_the_fuzz_runs_both_outcomes_and_real_files():
    # guards the fuzz itself: a mutation engine that only ever produced rejections (or
    # only valid models) would pass vacuously
    if OUTCOMES["loaded"] + OUTCOMES["rejected"] < EXAMPLES * MUTATIONS_PER_EXAMPLE:
        pytest.skip("runs after the fuzz test in the same session")
    assert OUTCOMES["loaded"] > 500 and OUTCOMES["rejected"] > 500, OUTCOMES
    assert OUTCOMES["files"] >= 1000 and OUTCOMES["explained"] > 50, OUTCOMES


# -- regressions: one test per bug the fuzz found, and the named limits of the issue ---------
def _xgb_doc(corpus, name="xgboost-reg") -> dict:
    return json.loads(dict(corpus)[name])


def _load(doc) -> dg.Booster:
    return dg.Booster(model_file=bytearray(json.dumps(doc, allow_nan=True).encode()))


def test_a_declared_class_count_of_ten_to_the_twelve_fails_at_once_instead_of_allocating(corpus):
    doc = _xgb_doc(corpus)
    doc["learner"]["learner_model_param"]["num_class"] = str(10**12)
    start = time.perf_counter()
    with pytest.raises(dg.ModelFormatError, match="declares 1000000000000 outputs"):
        _load(doc)
    assert time.perf_counter() - start < 1.0


def test_deeply_nested_json_given_to_the_explainer_is_a_model_format_error():
    with pytest.raises(dg.ModelFormatError, match="nested too deeply"):
        dg.TreeExplainer(b"[" * 100_000 + b"]" * 100_000)


def test_an_extension_base_margin_that_overflows_the_link_is_ignored_with_a_warning(corpus):
    doc = json.loads(dict(corpus)["dgboost-poisson-file"])
    doc["dgboost"]["base_margin"] = [1000.0]  # a float32, but exp(1000) overflows the log link
    with pytest.warns(UserWarning, match="out of range for the objective"):
        _load(doc)


@pytest.mark.parametrize(
    "key, value, match",
    [
        ("categories", 5, "categories must be a list"),
        ("gbtree_model_param", 3, "gbtree_model_param must be a JSON object"),
        ("feature_names", 1.5, "feature_names must be a list of strings"),
        ("attributes", [1, 2], "attributes must be a JSON object"),
    ],
)
def test_wrong_container_types_in_xgboost_json_are_model_format_errors(corpus, key, value, match):
    doc = _xgb_doc(corpus)
    learner = doc["learner"]
    if key == "categories":
        learner["gradient_booster"]["model"]["trees"][0][key] = value
    elif key == "gbtree_model_param":
        learner["gradient_booster"]["model"][key] = value
    else:
        learner[key] = value
    with pytest.raises(dg.ModelFormatError, match=match):
        _load(doc)


def test_a_base_margin_beyond_float32_range_is_refused_since_margins_are_float32(corpus):
    doc = json.loads(dict(corpus)["dgboost-reg-schema1"])
    doc["ensemble"]["base_margin"] = [1e308]
    with pytest.raises(dg.ModelFormatError, match="beyond float32's range"):
        _load(doc)


def test_a_child_index_below_minus_one_is_refused_even_when_nodes_are_renumbered(corpus):
    doc = _xgb_doc(corpus)
    tree = doc["learner"]["gradient_booster"]["model"]["trees"][0]
    tree["tree_param"]["num_deleted"] = "1"  # takes the renumbering path
    leaf = tree["left_children"].index(-1)
    tree["left_children"][leaf] = -2
    with pytest.raises(dg.ModelFormatError, match="child index out of range"):
        _load(doc)


def test_a_non_integer_num_deleted_is_a_model_format_error(corpus):
    doc = _xgb_doc(corpus)
    doc["learner"]["gradient_booster"]["model"]["trees"][0]["tree_param"]["num_deleted"] = "x"
    with pytest.raises(dg.ModelFormatError, match="num_deleted must be an integer"):
        _load(doc)


def test_a_tree_declaring_ten_to_the_twelve_nodes_fails_without_allocating_them(corpus):
    doc = _xgb_doc(corpus)
    doc["learner"]["gradient_booster"]["model"]["trees"][0]["tree_param"]["num_nodes"] = str(10**12)
    with pytest.raises(dg.ModelFormatError, match="expected num_nodes = 1000000000000"):
        _load(doc)


@pytest.mark.parametrize("renumbered", [False, True])
def test_a_chain_of_one_hundred_thousand_nodes_loads_predicts_and_explains_without_recursion(corpus, renumbered):
    # depth 50,000: far beyond Python's recursion limit and any GPU kernel's depth
    doc = _xgb_doc(corpus)
    tree = _chain_tree(50_000)
    if renumbered:
        tree["tree_param"]["num_deleted"] = "1"  # the breadth-first renumbering (_bfs_order)
    doc["learner"]["gradient_booster"]["model"]["trees"] = [tree]
    doc["learner"]["gradient_booster"]["model"]["tree_info"] = [0]
    doc["learner"]["gradient_booster"]["model"]["gbtree_model_param"]["num_trees"] = "1"
    start = time.perf_counter()
    booster = _load(doc)
    margin = booster.predict(dg.DMatrix(X), output_margin=True).reshape(-1, 1)
    np.testing.assert_allclose(margin, predict_margin_reference(booster.ensemble, X), rtol=1e-6)
    np.testing.assert_allclose(margin, oracle_margin(doc, X), rtol=1e-5, atol=1e-6)
    explainer = dg.TreeExplainer(booster)
    phi = explainer.shap_values(X[:2])
    np.testing.assert_allclose(phi.sum(axis=1) + explainer.expected_value, margin[:2, 0], rtol=1e-4, atol=1e-4)
    assert time.perf_counter() - start < 60
