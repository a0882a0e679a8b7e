"""UBJSON models both ways with XGBoost 3.4.1, and XGBoost's attributes (issue 28, "Model formats").

dgboost's ``.ubj`` files and ``save_raw()`` bytes load in ``xgboost.Booster`` and predict as
their JSON twins do there; XGBoost's ``.ubj`` files and ``save_raw()`` bytes load in dgboost
(``Booster``, ``TreeExplainer``, the CLI) as their JSON twins do; the encoding follows the
extension as in XGBoost; typed arrays carry XGBoost's markers; ``best_iteration`` /
``best_score`` and other attributes travel both ways; corrupt UBJSON is a
:class:`~dgboost.errors.ModelFormatError` or a model that predicts what the bytes say.

The test decodes UBJSON with its own small reader (:func:`_walk_ubjson`), which shares no
code with dgboost's, to see markers and to give the fuzz oracle its document.
"""

from __future__ import annotations

import random
import struct
import warnings

import numpy as np
import pandas as pd
import pytest
import xgboost as xgb  # a declared test dependency: missing, the test fails
from click.testing import CliRunner
from test_fuzz_models import oracle_margin

import dgboost as dg
from dgboost.cli import main
from dgboost.errors import DGBoostError, DGBoostValueError, ModelFormatError
from dgboost.testing.fuzzing import error_or_result
from dgboost.testing.reference import predict_margin_reference

NAMES = ["a", "b", "c", "d", "e"]
TYPES = ["q", "float", "int", "q", "float"]
XGB_DEFAULT_WARNING = (
    "Saving model in the UBJSON format as default.  You can use a file extension: `json` or `ubj` to "
    "choose between formats."
)


# -- an independent UBJSON reader: (value, markers by path, typed-array offsets) ----------------
_SCALARS = {"i": ">b", "U": ">B", "I": ">h", "l": ">i", "L": ">q", "d": ">f", "D": ">d"}


def _walk_ubjson(buf: bytes):
    """Decode ``buf``; returns ``(value, markers, arrays)``: ``markers`` maps each path (tree
    indices as ``*``) to the set of markers seen there, ``arrays`` lists ``(offset, marker,
    count)`` of every typed array's payload. Raises ValueError / IndexError / struct.error
    on bad input."""
    pos = 0
    markers: dict[str, set] = {}
    arrays: list[tuple[int, str, int]] = []

    def take(n):
        nonlocal pos
        if pos + n > len(buf):
            raise ValueError("truncated")
        out = buf[pos : pos + n]
        pos += n
        return out

    def scalar(m):
        fmt = _SCALARS[m]
        return struct.unpack(fmt, take(struct.calcsize(fmt)))[0]

    def count():
        m = chr(take(1)[0])
        if m not in "iUIlL":
            raise ValueError("bad length marker")
        n = scalar(m)
        if n < 0:
            raise ValueError("negative length")
        return n

    def value(path, m=None):
        if m is None:
            m = chr(take(1)[0])
            while m == "N":
                m = chr(take(1)[0])
        markers.setdefault(path, set()).add(m)
        if m in _SCALARS:
            return scalar(m)
        if m in "ZTF":
            return {"Z": None, "T": True, "F": False}[m]
        if m == "S":
            return take(count()).decode("utf-8")
        if m == "C":
            return chr(take(1)[0])
        if m == "[":
            return container(path, array=True)
        if m == "{":
            return container(path, array=False)
        raise ValueError(f"marker {m!r}")

    def container(path, array):
        kind = n = None
        if buf[pos : pos + 1] == b"$":
            take(1)
            kind = chr(take(1)[0])
            if take(1) != b"#":
                raise ValueError("typed container without count")
            n = count()
        elif buf[pos : pos + 1] == b"#":
            take(1)
            n = count()
        if array and kind in _SCALARS:
            markers[path].add("$" + kind)
            dtype = np.dtype(_SCALARS[kind])
            arrays.append((pos, kind, n))
            return np.frombuffer(take(n * dtype.itemsize), dtype=dtype).astype(dtype.newbyteorder("="))
        end = b"]" if array else b"}"
        out = [] if array else {}
        i = 0
        while (i < n) if n is not None else (buf[pos : pos + 1] != end):
            if array:
                out.append(value(f"{path}[]", kind))
            else:
                key = take(count()).decode("utf-8")
                out[key] = value(f"{path}.{key}", kind)
            i += 1
        if n is None:
            take(1)
        return out

    doc = value("")
    if pos != len(buf):
        raise ValueError("bytes after the value")
    return doc, markers, arrays


# -- models ------------------------------------------------------------------------------------
def _data(task: str, n: int = 300, seed: int = 5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5)).astype(np.float32)
    X[rng.random(X.shape) < 0.15] = np.nan
    z = np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, 1]) * np.nan_to_num(X[:, 2])
    if task == "binary":
        return X, (z > 0).astype(np.float32), {"objective": "binary:logistic"}
    if task == "multiclass":
        return X, np.digitize(z, [-0.5, 0.5]).astype(np.float32), {"objective": "multi:softprob", "num_class": 3}
    if task == "ranking":
        return X, np.digitize(z, [-1, 0, 1]).astype(np.float32), {"objective": "rank:ndcg"}
    return X, (3 * z + 1).astype(np.float32), {"objective": "reg:squarederror"}


def _dmatrix(lib, task, X, y, named=False):
    kwargs = {"feature_names": NAMES, "feature_types": TYPES} if named else {}
    d = lib.DMatrix(X, y, **kwargs)
    if task == "ranking":
        d.set_group([30] * (X.shape[0] // 30))
    return d


TASKS = ["binary", "multiclass", "ranking", "regression", "named"]


def _dgboost_model(task: str):
    named = task == "named"
    X, y, params = _data("regression" if named else task)
    booster = dg.train({**params, "max_depth": 4, "eta": 0.3}, _dmatrix(dg, task, X, y, named), 8)
    return booster, X, named


def _xgboost_model(task: str):
    named = task == "named"
    X, y, params = _data("regression" if named else task)
    booster = xgb.train({**params, "max_depth": 4, "eta": 0.3, "seed": 1}, _dmatrix(xgb, task, X, y, named), 8)
    return booster, X, named


def _rows(lib, X, named):
    return lib.DMatrix(X, feature_names=NAMES, feature_types=TYPES) if named else lib.DMatrix(X)


# -- dgboost -> XGBoost -------------------------------------------------------------------------
@pytest.mark.parametrize("task", TASKS)
def test_dgboost_ubj_files_and_save_raw_bytes_load_in_xgboost_and_predict_as_the_json_file_does(tmp_path, task):
    booster, X, named = _dgboost_model(task)
    assert np.isnan(X).any()
    booster.save_model(tmp_path / "m.ubj")
    booster.save_model(tmp_path / "m.json")
    from_json = xgb.Booster(model_file=str(tmp_path / "m.json"))
    from_ubj = xgb.Booster(model_file=str(tmp_path / "m.ubj"))
    from_raw = xgb.Booster()
    from_raw.load_model(booster.save_raw())
    rows = _rows(xgb, X, named)
    expected = from_json.predict(rows, output_margin=True)
    np.testing.assert_array_equal(from_ubj.predict(rows, output_margin=True), expected)
    np.testing.assert_array_equal(from_raw.predict(rows, output_margin=True), expected)
    # as tests/cpu/test_model_format.py: XGBoost keeps a float32 base score
    np.testing.assert_allclose(from_ubj.predict(rows), booster.predict(_rows(dg, X, named)), rtol=1e-6, atol=1e-6)
    if named:
        assert from_ubj.feature_names == NAMES and from_ubj.feature_types == TYPES
    assert from_ubj.num_boosted_rounds() == booster.num_boosted_rounds()


def test_save_raw_is_ubjson_by_default_and_json_on_request_and_both_are_the_saved_files(tmp_path):
    booster, _, _ = _dgboost_model("binary")
    booster.save_model(tmp_path / "m.ubj")
    booster.save_model(tmp_path / "m.json")
    raw = booster.save_raw()
    assert isinstance(raw, bytearray)
    assert bytes(raw) == (tmp_path / "m.ubj").read_bytes() == bytes(booster.save_raw("ubj"))
    assert bytes(booster.save_raw("json")) == (tmp_path / "m.json").read_bytes()
    assert raw[:1] == b"{" and raw[1:2] == b"L"  # an object whose first key has an int64 length


@pytest.mark.parametrize("raw_format", ["deprecated", "binary", "UBJ"])
def test_save_raw_refuses_other_formats_naming_the_two_there_are(raw_format):
    booster, _, _ = _dgboost_model("regression")
    with pytest.raises(DGBoostValueError, match="Expecting UBJSON .'ubj'. or JSON .'json'."):
        booster.save_raw(raw_format)
    theirs, _, _ = _xgboost_model("regression")  # XGBoost 3.4.1 refuses them too
    with pytest.raises(xgb.core.XGBoostError, match="Unknown model format"):
        theirs.save_raw(raw_format)


@pytest.mark.parametrize(
    "name, encoding, warns",
    [
        ("m.json", "json", False),
        ("m.JSON", "json", False),
        ("m.ubj", "ubj", False),
        ("m.UBJ", "ubj", False),
        ("m.model", "ubj", True),
        ("m.bin", "ubj", True),
        ("model", "ubj", True),
    ],
)
def test_the_extension_chooses_the_encoding_as_in_xgboost_with_its_warning_otherwise(tmp_path, name, encoding, warns):
    booster, _, _ = _dgboost_model("regression")
    theirs = xgb.Booster(model_file=booster.save_raw())
    for who, model in (("dgboost", booster), ("xgboost", theirs)):
        path = tmp_path / who / name
        path.parent.mkdir()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model.save_model(str(path))
        messages = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
        assert any(XGB_DEFAULT_WARNING in m for m in messages) == warns, (who, messages)
        head = path.read_bytes()[:2]
        assert (head == b'{"') == (encoding == "json"), who
    assert dg.Booster(model_file=str(tmp_path / "dgboost" / name)).to_json() == booster.to_json()


def test_dgboosts_typed_arrays_and_every_other_value_carry_the_markers_xgboost_writes():
    theirs, _, _ = _xgboost_model("multiclass")
    ours = dg.Booster.from_xgboost(theirs)
    _, xgb_markers, _ = _walk_ubjson(bytes(theirs.save_raw("ubj")))
    _, dg_markers, _ = _walk_ubjson(bytes(ours.save_raw("ubj")))
    xgb_part = {p: m for p, m in dg_markers.items() if not p.startswith(".dgboost")}
    assert xgb_part == xgb_markers
    tree = ".learner.gradient_booster.model.trees[]"
    assert xgb_markers[f"{tree}.split_conditions"] == {"[", "$d"}
    assert xgb_markers[f"{tree}.left_children"] == {"[", "$l"}
    assert xgb_markers[f"{tree}.default_left"] == {"[", "$U"}
    assert xgb_markers[f"{tree}.categories_segments"] == {"[", "$L"}
    # the exact float64 additions stay float64
    assert dg_markers[".dgboost.base_margin"] == {"[", "$D"}


# -- XGBoost -> dgboost -------------------------------------------------------------------------
@pytest.mark.parametrize("task", TASKS)
def test_xgboost_ubj_files_and_save_raw_load_in_dgboost_as_their_json_twins(tmp_path, task):
    theirs, X, named = _xgboost_model(task)
    theirs.save_model(str(tmp_path / "x.ubj"))
    theirs.save_model(str(tmp_path / "x.json"))
    from_json = dg.Booster(model_file=str(tmp_path / "x.json"))
    from_ubj = dg.Booster(model_file=str(tmp_path / "x.ubj"))
    from_raw = dg.Booster(model_file=theirs.save_raw())
    from_loaded = dg.Booster()
    from_loaded.load_model(bytes(theirs.save_raw()))
    for other in (from_ubj, from_raw, from_loaded):
        assert other.to_json() == from_json.to_json()  # the very same model, bit for bit
    rows = _rows(dg, X, named)
    # as tests/cpu/test_model_format.py's XGBoost JSON files
    np.testing.assert_allclose(from_ubj.predict(rows), theirs.predict(_rows(xgb, X, named)), rtol=0, atol=1e-6)


def test_tree_explainer_reads_xgboost_and_dgboost_ubj_files_and_bytes(tmp_path):
    theirs, X, _ = _xgboost_model("binary")
    ours, _, _ = _dgboost_model("binary")
    theirs.save_model(str(tmp_path / "x.ubj"))
    ours.save_model(tmp_path / "d.ubj")
    for model, twin in (
        (str(tmp_path / "x.ubj"), theirs.save_raw("json")),
        (bytes(theirs.save_raw()), theirs.save_raw("json")),
        (str(tmp_path / "d.ubj"), ours.save_raw("json")),
        (bytes(ours.save_raw()), ours.save_raw("json")),
    ):
        got = dg.TreeExplainer(model).shap_values(X[:20])
        np.testing.assert_array_equal(got, dg.TreeExplainer(bytes(twin)).shap_values(X[:20]))


def test_the_cli_predicts_from_a_ubj_model_as_from_its_json_twin(tmp_path):
    theirs, X, _ = _xgboost_model("regression")
    theirs.feature_names = [f"x{i}" for i in range(5)]
    theirs.save_model(str(tmp_path / "m.ubj"))
    theirs.save_model(str(tmp_path / "m.json"))
    pd.DataFrame(X, columns=theirs.feature_names).to_csv(tmp_path / "test.csv", index=False)
    outputs = []
    for name in ("m.ubj", "m.json"):
        out = tmp_path / f"{name}.npy"
        args = ["predict", "--model", str(tmp_path / name), "--data", str(tmp_path / "test.csv")]
        result = CliRunner().invoke(main, [*args, "--output", str(out), "--quiet"])
        assert result.exit_code == 0, result.output
        outputs.append(np.load(out))
    np.testing.assert_array_equal(outputs[0], outputs[1])
    np.testing.assert_allclose(
        outputs[0], theirs.predict(xgb.DMatrix(X, feature_names=theirs.feature_names)), rtol=0, atol=1e-6
    )


# -- round trips ----------------------------------------------------------------------------------
@pytest.mark.parametrize("task", TASKS)
def test_dgboost_json_to_ubj_to_json_gives_the_same_bytes(tmp_path, task):
    booster, _, _ = _dgboost_model(task)
    booster.save_model(tmp_path / "a.json")
    dg.Booster(model_file=str(tmp_path / "a.json")).save_model(tmp_path / "b.ubj")
    again = dg.Booster(model_file=str(tmp_path / "b.ubj"))
    again.save_model(tmp_path / "c.json")
    assert (tmp_path / "c.json").read_bytes() == (tmp_path / "a.json").read_bytes()
    assert bytes(again.save_raw()) == (tmp_path / "b.ubj").read_bytes()
    assert again.to_json() == booster.to_json()


def test_the_ubjson_writer_keeps_every_json_value_of_the_extension_exactly():
    booster, _, _ = _dgboost_model("multiclass")
    booster.set_attr(note="é ü 漢", empty="")
    booster.meta["params"]["interaction_constraints"] = [[0, 1], [2, 3, 4]]
    booster.meta["params"]["big"] = 2**62
    booster.meta["params"]["third"] = 1 / 3
    again = dg.Booster(model_file=booster.save_raw())
    assert again.meta == booster.meta
    assert again.save_raw("json") == booster.save_raw("json")


# -- attributes ---------------------------------------------------------------------------------
def _early_stopped(lib):
    X, y, params = _data("binary", n=400)
    dtrain, dvalid = lib.DMatrix(X[:300], y[:300]), lib.DMatrix(X[300:], y[300:])
    return lib.train(
        {**params, "max_depth": 5, "eta": 0.5, "eval_metric": "logloss"},
        dtrain,
        80,
        evals=[(dvalid, "valid")],
        early_stopping_rounds=3,
        verbose_eval=False,
    ), X


def test_attributes_after_early_stopping_are_best_iteration_and_best_score_as_strings_as_in_xgboost():
    ours, _ = _early_stopped(dg)
    theirs, _ = _early_stopped(xgb)
    assert ours.best_iteration < 79  # it stopped early
    assert set(ours.attributes()) == set(theirs.attributes()) == {"best_iteration", "best_score"}
    assert ours.attributes() == {"best_iteration": str(ours.best_iteration), "best_score": str(ours.best_score)}
    assert all(isinstance(v, str) for v in ours.attributes().values())
    assert ours.attr("best_iteration") == str(ours.best_iteration)
    assert ours.attr("missing") is None and theirs.attr("missing") is None


@pytest.mark.parametrize("raw_format", ["ubj", "json"])
def test_xgboost_reads_best_iteration_and_best_score_of_an_early_stopped_dgboost_model(raw_format):
    ours, X = _early_stopped(dg)
    theirs = xgb.Booster()
    theirs.load_model(ours.save_raw(raw_format))
    assert theirs.attributes() == ours.attributes()
    assert theirs.best_iteration == ours.best_iteration
    assert theirs.best_score == ours.best_score
    # XGBoost predicts up to the best iteration by default only through sklearn; both agree on it
    np.testing.assert_allclose(
        theirs.predict(xgb.DMatrix(X), iteration_range=(0, theirs.best_iteration + 1)),
        ours.predict(dg.DMatrix(X), iteration_range=(0, ours.best_iteration + 1)),
        rtol=1e-6,
        atol=1e-6,
    )


def test_set_attr_and_attr_behave_as_xgboosts_and_the_attributes_survive_both_encodings_and_xgboost():
    ours, _ = _early_stopped(dg)
    theirs, _ = _early_stopped(xgb)
    for model in (ours, theirs):
        model.set_attr(owner="team-a", version=2, note="x")
        model.set_attr(note=None, absent=None)
    expected = {"owner": "team-a", "version": "2"}
    assert {k: v for k, v in theirs.attributes().items() if not k.startswith("best_")} == expected
    assert {k: v for k, v in ours.attributes().items() if not k.startswith("best_")} == expected
    assert ours.attr("version") == "2" and ours.attr("note") is None
    for raw_format in ("ubj", "json"):
        assert dg.Booster(model_file=ours.save_raw(raw_format)).attributes() == ours.attributes()
        through_xgboost = xgb.Booster(model_file=ours.save_raw(raw_format))
        assert through_xgboost.attributes() == ours.attributes()
        back = dg.Booster(model_file=through_xgboost.save_raw(raw_format))
        assert back.attributes() == ours.attributes()
        assert back.best_iteration == ours.best_iteration and back.best_score == ours.best_score


def test_set_attr_of_best_iteration_moves_best_iteration_and_none_clears_it_as_in_xgboost():
    ours, _ = _early_stopped(dg)
    theirs, _ = _early_stopped(xgb)
    for model in (ours, theirs):
        model.set_attr(best_iteration="3")
    assert ours.best_iteration == theirs.best_iteration == 3
    assert ours.attr("best_iteration") == theirs.attr("best_iteration") == "3"
    for model in (ours, theirs):
        model.set_attr(best_iteration=None, best_score=None)
    assert ours.attributes() == theirs.attributes() == {}
    with pytest.raises(DGBoostValueError, match="best_iteration must be an integer"):
        ours.set_attr(best_iteration="soon")


# -- corrupt UBJSON -------------------------------------------------------------------------------
def test_truncated_ubjson_is_a_model_format_error_at_every_cut():
    data = bytes(_dgboost_model("binary")[0].save_raw())
    with pytest.raises(ModelFormatError, match="truncated"):  # a lone "{": no encoding to tell, read as JSON
        dg.Booster(model_file=data[:1])
    for cut in sorted({*range(2, 64), *range(64, len(data), max(1, len(data) // 300)), len(data) - 1}):
        with pytest.raises(ModelFormatError, match="not a valid UBJSON model"):
            dg.Booster(model_file=data[:cut])


@pytest.mark.parametrize(
    "data, fragment",
    [
        (b"{L" + struct.pack(">q", -5), "negative length"),
        (b"{L" + struct.pack(">q", 2**62) + b"x", "unexpected end"),
        (b"{i\x01a[$d#L" + struct.pack(">q", 2**60), "unexpected end"),
        (b"{i\x01aH", "unsupported marker"),
        (b"{i\x02\xff\xfeZ}", "UTF-8"),
        (b"{i\x01a" + b"[" * 100_000, "nested too deeply"),
        (b"{i\x01aZ}junk", "bytes after the value"),
    ],
)
def test_corrupt_ubjson_is_a_model_format_error_naming_the_problem(data, fragment):
    with pytest.raises(ModelFormatError, match=fragment):
        dg.Booster(model_file=data)


_HOSTILE_INTS = [-2, -1, 0, 1, 7, 2**31 - 1, -(2**31), 2**20]
_HOSTILE_FLOATS = [np.nan, np.inf, -np.inf, 3e38, -0.0, 1e-45, 1e6]
_MARKER_BYTES = b"{}[]$#iUIlLdDSZTFNCH"
FUZZ_FILES = 1000


def _mutate(data: bytes, arrays, rnd: random.Random) -> bytes:
    buf = bytearray(data)
    kind = rnd.random()
    if kind < 0.4 and arrays:  # a hostile value inside a typed array (children, features, thresholds, ...)
        for _ in range(rnd.choice([1, 1, 2, 3])):
            offset, marker, n = rnd.choice(arrays)
            if n == 0:
                continue
            fmt = _SCALARS[marker]
            size = struct.calcsize(fmt)
            at = offset + size * rnd.randrange(n)
            if marker in "dD":
                value = rnd.choice(_HOSTILE_FLOATS)
            else:
                value = rnd.choice(_HOSTILE_INTS)
                value = max(min(value, 2 ** (8 * size - 1) - 1), -(2 ** (8 * size - 1))) if marker != "U" else value % 3
            buf[at : at + size] = struct.pack(fmt, value)
        return bytes(buf)
    if kind < 0.55:
        return bytes(buf[: rnd.randrange(1, len(buf))])
    if kind < 0.7:
        at = rnd.randrange(len(buf))
        buf[at] = rnd.choice(_MARKER_BYTES)
        return bytes(buf)
    if kind < 0.8:  # a length or count that lies
        at = rnd.randrange(len(buf) - 9)
        while at < len(buf) - 9 and buf[at] != ord("L"):
            at += 1
        buf[at + 1 : at + 9] = struct.pack(">q", rnd.choice([0, 1, 3, 2**31, 2**62, -1, 10**12]))
        return bytes(buf)
    if kind < 0.9:
        at = rnd.randrange(len(buf))
        return bytes(buf[:at] + bytes([rnd.randrange(256)]) + buf[at:])
    at = rnd.randrange(len(buf))
    buf[at] = rnd.randrange(256)
    return bytes(buf)


@pytest.fixture(scope="module")
def ubj_corpus():
    out = []
    for task in ("regression", "binary", "multiclass"):
        out.append(bytes(_dgboost_model(task)[0].save_raw()))
        out.append(bytes(_xgboost_model(task)[0].save_raw()))
    X, y, _ = _data("regression")
    dart = xgb.train({"rate_drop": 0.5, "skip_drop": 0.0, "max_depth": 3, "seed": 0}, xgb.DMatrix(X, y), 4)
    forest = xgb.train({"num_parallel_tree": 2, "subsample": 0.8, "max_depth": 3}, xgb.DMatrix(X, y), 3)
    out += [bytes(dart.save_raw()), bytes(forest.save_raw())]
    return out


def test_mutated_ubjson_models_are_rejected_with_a_dgboost_error_or_predict_what_the_bytes_say(ubj_corpus):
    rnd = random.Random(28)
    outcomes = {"loaded": 0, "rejected": 0}
    rows = _data("regression", n=40)[0]
    walked = [_walk_ubjson(data)[2] for data in ubj_corpus]
    for k in range(FUZZ_FILES):
        which = k % len(ubj_corpus)
        data = _mutate(ubj_corpus[which], walked[which], rnd)

        def run(data=data):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # a mutated extension is ignored with a warning
                booster = dg.Booster(model_file=data)
            return booster, booster.predict(dg.DMatrix(rows), output_margin=True)

        loaded = error_or_result(run, outcomes, "loaded", 5.0)
        if loaded is None:
            continue
        booster, margin = loaded
        margin = np.asarray(margin, dtype=np.float64).reshape(rows.shape[0], -1)
        doc, _, _ = _walk_ubjson(data)  # what dgboost loaded must be UBJSON to an independent reader
        finite = np.isfinite(margin)
        expect = predict_margin_reference(booster.ensemble, rows)
        np.testing.assert_allclose(margin[finite], expect[finite], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(margin[finite], oracle_margin(doc, rows)[finite], rtol=1e-5, atol=1e-5)
    assert outcomes["loaded"] + outcomes["rejected"] == FUZZ_FILES
    assert outcomes["loaded"] > 50 and outcomes["rejected"] > 300, outcomes


def test_a_ubjson_error_is_a_dgboost_error_for_the_explainer_too():
    data = bytes(_dgboost_model("binary")[0].save_raw())[:-3]
    with pytest.raises(DGBoostError, match="UBJSON"):
        dg.TreeExplainer(data)


# -- the writer ---------------------------------------------------------------------------------
def test_the_writer_round_trips_every_json_value_and_typed_arrays_keep_their_dtype():
    from dgboost._ubjson import dumps, loads

    doc = {
        "z": None,
        "t": True,
        "f": False,
        "ints": [0, -1, 126, 127, -127, -128, 32766, 32767, 2**31 - 2, 2**31, -(2**63), 2**63 - 1],
        "floats": [0.1, -0.0, 1e308, 5e-324, 1 / 3],
        "s": "héllo 漢",
        "nested": {"b": [[], {}, [1, "x", None]], "a": ""},
    }
    assert loads(dumps(doc)) == doc
    for dtype in (np.float32, np.float64, np.int8, np.uint8, np.int16, np.int32, np.int64):
        a = (np.arange(-3, 4) * 7).astype(dtype)
        back = loads(dumps({"a": a}))["a"]
        assert back.dtype == np.dtype(dtype) and np.array_equal(back, a)


def test_the_writer_picks_xgboosts_smallest_integer_marker_and_keys_with_int64_lengths():
    from dgboost._ubjson import dumps

    # XGBoost writes id 126 as int8 and 127 / 128 / 299 as int16 (its ranges are open)
    assert dumps(126) == b"i\x7e"
    assert dumps(127)[:1] == dumps(128)[:1] == dumps(-128)[:1] == b"I"
    assert dumps(2**15)[:1] == b"l" and dumps(2**31)[:1] == b"L"
    assert dumps({"k": "v"}) == b"{L" + struct.pack(">q", 1) + b"kSL" + struct.pack(">q", 1) + b"v}"
    assert dumps([1, 2]) == b"[#L" + struct.pack(">q", 2) + b"i\x01i\x02"  # counted, no closing ]


@pytest.mark.parametrize(
    "value, fragment",
    [
        (float("nan"), "non-finite"),
        (np.array([1.0, np.inf], np.float32), "non-finite"),
        (2**63, "beyond int64"),
        ({1: "x"}, "not a string"),
        ({"a": {1, 2}}, "unsupported set"),
    ],
)
def test_the_writer_refuses_what_json_cannot_hold_as_a_model_format_error(value, fragment):
    from dgboost._ubjson import dumps

    with pytest.raises(ModelFormatError, match=fragment):
        dumps(value)


@pytest.mark.parametrize(
    "head, ubjson",
    [(b'{"learner"', False), (b"{ \n", False), (b"{}", False), (b"", False), (b"{", False), (b"[1]", False)]
    + [(b"{" + bytes([m]), True) for m in b"iUIlL$#N"],
)
def test_ubjson_is_told_from_json_by_the_byte_after_the_opening_brace(head, ubjson):
    from dgboost._ubjson import is_ubjson

    assert is_ubjson(head) is ubjson
