"""Saving, loading, validating and dumping models.

A model is an :class:`~dgboost.tree.Ensemble` plus a metadata dict ``meta`` (objective,
base score, feature names, ... see :data:`META_KEYS`). On disk (:func:`save_model`) it is
XGBoost's JSON schema, as ``xgboost.Booster.save_model("m.json")`` writes it (see
:mod:`dgboost.xgboost_json`), so XGBoost loads dgboost's files as they are. The schema is
encoded as JSON text (``.json``) or as UBJSON (``.ubj`` and, as XGBoost does, any other
extension, with XGBoost's warning; see :mod:`dgboost._ubjson`): the same document either
way, node arrays as typed arrays in UBJSON. Loading tells the two apart by content
(:func:`parse_model_bytes`), for files and for bytes alike. What XGBoost's
schema cannot hold travels in one extra top-level key, ``"dgboost"`` (XGBoost ignores it
when loading and drops it when saving)::

    {"learner": {...XGBoost...}, "version": [3, 4, 1],
     "dgboost": {"schema_version": 2,
                 "meta": {<objective, objective_params, params, base_score, ...>},
                 "base_margin": [float64...],   # exact; XGBoost keeps a float32 base_score
                 "cover": [float64...]}}         # exact; XGBoost keeps float32 sum_hessian

On loading, the extension is used only while it still matches the XGBoost part (same
objective, same float32 base score and covers); a file re-saved or edited elsewhere is
read from its XGBoost part alone, with a warning.

dgboost 0.x wrote its own schema (``schema_version`` 1); it is still read, and
:func:`model_to_json` still writes it (an internal text form for comparing models)::

    {"format": "dgboost", "schema_version": 1,
     "learner": {<meta>},
     "ensemble": {"n_groups": int, "base_margin": [float64...],
                  "tree_offsets": [int...], "tree_group": [int...],
                  "left": [...], "right": [...], ... one list per NODE_ARRAYS entry,
                  "categorical": {"split_type": [...], "cat_segments": [...], ...}}}

(``"categorical"``, the flat ``CAT_ARRAYS``, only for models with categorical splits.)

Floats round-trip exactly (float32 arrays are written as the float64 value of each
float32; float64 through ``repr``) and the text is deterministic (sorted keys, fixed
separators), so the same model always gives the same bytes. Files are written to a
temporary file in the target folder and renamed into place, so a failed save never
leaves a half-written model behind.

Every model read from outside (dgboost JSON or XGBoost JSON, see
:mod:`dgboost.xgboost_json`) is validated without recursion: array lengths, finite
values, child ranges, cycles, nodes reachable twice, feature indices, tree offsets and
groups. Problems raise :class:`~dgboost.errors.ModelFormatError` naming what is wrong.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from typing import Any

import numpy as np

from ._model_schema import (
    CUSTOM_OBJECTIVE,
    JSON_KW,
    META_KEYS,
    as_array,
    as_int,
    atomic_write_bytes,
    atomic_write_json,
    base_score_from_margin,
    build_ensemble,
    check_meta_vs_ensemble,
    normalize_meta,
    require_key,
    validate_arrays,
    validate_categorical,
    validate_ensemble,
)
from ._ubjson import dumps as ubjson_dumps
from ._ubjson import is_ubjson
from ._ubjson import loads as ubjson_loads
from .errors import DGBoostValueError, ModelFormatError
from .tree import CAT_ARRAYS, NODE_ARRAYS, Ensemble
from .xgboost_json import export_xgboost_dict, export_xgboost_json, import_xgboost_booster, import_xgboost_dict

__all__ = [
    "SCHEMA_VERSION",
    "META_KEYS",
    "model_to_dict",
    "model_from_dict",
    "model_to_json",
    "model_from_json",
    "save_model",
    "load_model",
    "model_to_file_dict",
    "model_file_bytes",
    "model_from_parsed_json",
    "parse_model_bytes",
    "RAW_FORMATS",
    "validate_ensemble",
    "dump_text",
    "trees_per_round",
    "export_xgboost_dict",
    "export_xgboost_json",
    "import_xgboost_dict",
    "import_xgboost_booster",
]

SCHEMA_VERSION = 1
FORMAT_NAME = "dgboost"
#: top-level key of dgboost's additions to an XGBoost JSON model file, and their schema
EXTENSION_KEY = "dgboost"
EXTENSION_SCHEMA_VERSION = 2

ENSEMBLE_KEYS = ("n_groups", "base_margin", "tree_offsets", "tree_group") + tuple(NODE_ARRAYS)


# -- dgboost JSON -------------------------------------------------------------------------
def model_to_dict(ensemble: Ensemble, meta: dict) -> dict:
    """The model as a JSON-able dict in dgboost's schema (validated before it is built)."""
    meta = normalize_meta(meta, "meta")
    validate_ensemble(ensemble, meta["num_feature"])
    check_meta_vs_ensemble(meta, ensemble.n_groups)
    ens = {
        "n_groups": int(ensemble.n_groups),
        "base_margin": np.asarray(ensemble.base_margin, dtype=np.float64).tolist(),
        "tree_offsets": np.asarray(ensemble.offsets(), dtype=np.int64).tolist(),
        "tree_group": np.asarray(ensemble.groups(), dtype=np.int64).tolist(),
    }
    for name, dtype in NODE_ARRAYS.items():
        # float32 -> the exact float64 of each float32; ints -> Python ints
        ens[name] = np.asarray(getattr(ensemble, name), dtype=dtype).tolist()
    if ensemble.has_categorical:  # numeric models keep the text they had
        ens["categorical"] = {
            name: np.asarray(ensemble.cat_arrays[name], dtype=dt).tolist() for name, dt in CAT_ARRAYS.items()
        }
    return {"format": FORMAT_NAME, "schema_version": SCHEMA_VERSION, "learner": meta, "ensemble": ens}


def model_from_dict(d: dict) -> tuple[Ensemble, dict]:
    """Read (and validate) a dict in dgboost's schema; returns ``(ensemble, meta)``."""
    if not isinstance(d, dict):
        raise ModelFormatError(f"a dgboost model must be a JSON object, got {type(d).__name__}")
    fmt = require_key(d, "format", "")
    if fmt != FORMAT_NAME:
        raise ModelFormatError(f"format is {fmt!r}, expected {FORMAT_NAME!r}")
    version = require_key(d, "schema_version", "")
    if isinstance(version, bool) or version != SCHEMA_VERSION:
        raise ModelFormatError(
            f"unsupported schema_version {version!r} (this dgboost reads schema_version {SCHEMA_VERSION})"
        )
    meta = normalize_meta(require_key(d, "learner", ""), "learner")
    e = require_key(d, "ensemble", "")
    for key in ENSEMBLE_KEYS:
        require_key(e, key, "ensemble")
    n_groups = as_int(e["n_groups"], "ensemble.n_groups", lo=1)
    base_margin = as_array(e["base_margin"], np.float64, "ensemble.base_margin")
    tree_offsets = as_array(e["tree_offsets"], np.int64, "ensemble.tree_offsets")
    tree_group = as_array(e["tree_group"], np.int32, "ensemble.tree_group")
    arrays = {name: as_array(e[name], dt, f"ensemble.{name}") for name, dt in NODE_ARRAYS.items()}
    cat = None
    if "categorical" in e:
        c = e["categorical"]
        if not isinstance(c, dict):
            raise ModelFormatError("ensemble.categorical must be a JSON object")
        cat = {
            name: as_array(require_key(c, name, "ensemble.categorical"), dt, f"ensemble.categorical.{name}")
            for name, dt in CAT_ARRAYS.items()
        }
        arrays["split_type"] = cat["split_type"]
    validate_arrays(n_groups, base_margin, tree_offsets, tree_group, arrays, meta["num_feature"])
    if cat is not None:
        validate_categorical(cat, arrays["left"], arrays["feature"], meta["feature_types"], "ensemble")
    check_meta_vs_ensemble(meta, n_groups)
    return build_ensemble(n_groups, base_margin, tree_offsets, tree_group, arrays, cat), meta


def model_to_json(ensemble: Ensemble, meta: dict) -> str:
    """Deterministic dgboost JSON text of the model."""
    return _dumps(model_to_dict(ensemble, meta))


def _dumps(d: dict) -> str:
    try:
        return json.dumps(d, **JSON_KW)
    except (TypeError, ValueError) as e:
        raise ModelFormatError(f"cannot serialise the model to JSON: {e}") from e


def parse_model_json(text: str | bytes, source: str = "model") -> Any:
    """JSON text (or UTF-8 bytes) of a model file, parsed, with messages naming ``source``.

    Raises
    ------
    ModelFormatError
        For text that is empty, truncated, not UTF-8, not JSON, or nested too deeply.
    """
    if isinstance(text, (bytes, bytearray, memoryview)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ModelFormatError(
                f"{source} is not valid JSON (not UTF-8 text) nor UBJSON (no object at its start): {e}"
            ) from None
    if not isinstance(text, str):
        raise ModelFormatError(f"{source}: expected JSON text, got {type(text).__name__}")
    if not text.strip():
        raise ModelFormatError(f"{source} is empty (truncated file?)")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        if e.pos >= len(text.rstrip()):
            raise ModelFormatError(
                f"{source} is truncated: JSON ends unexpectedly ({e.msg} at line {e.lineno} column {e.colno})"
            ) from None
        raise ModelFormatError(f"{source} is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except RecursionError:
        raise ModelFormatError(f"{source} is not a usable JSON model (nested too deeply)") from None


def model_from_parsed_json(d, source: str = "model") -> tuple[Ensemble, dict]:
    """Read (and validate) a parsed model file of any kind dgboost reads.

    Parameters
    ----------
    d : dict
        A parsed model file: XGBoost JSON (with or without dgboost's ``"dgboost"``
        extension, see the module docstring) or dgboost's schema 1.
    source : str
        What ``d`` is, for messages (e.g. ``"model file 'm.json'"``).

    Returns
    -------
    (Ensemble, dict)
        The ensemble and its meta dict.

    Raises
    ------
    ModelFormatError
        When ``d`` is none of these, or is not a valid model.
    """
    if isinstance(d, dict) and d.get("format") == FORMAT_NAME:
        return model_from_dict(d)
    if isinstance(d, dict) and isinstance(d.get("learner"), dict) and "gradient_booster" in d["learner"]:
        ensemble, meta = import_xgboost_dict(d)
        if EXTENSION_KEY in d:
            ensemble, meta = _apply_extension(ensemble, meta, d[EXTENSION_KEY], source)
        return ensemble, meta
    if isinstance(d, dict) and "schema_version" in d and "format" not in d:
        raise ModelFormatError(f"{source}: missing key 'format' (expected {FORMAT_NAME!r})")
    raise ModelFormatError(
        f"{source} is neither a dgboost model (format = {FORMAT_NAME!r}) nor an "
        f"XGBoost JSON model (learner.gradient_booster)"
    )


#: meta keys that XGBoost's own JSON holds; the extension holds the others
_XGBOOST_META_KEYS = (
    "num_class",
    "num_feature",
    "feature_names",
    "feature_types",
    "best_iteration",
    "best_score",
    "attributes",
)


def model_to_file_dict(ensemble: Ensemble, meta: dict, *, typed: bool = False) -> dict:
    """The model as :func:`save_model` writes it: XGBoost JSON plus the ``"dgboost"`` key.

    Parameters
    ----------
    ensemble : Ensemble
        The trees.
    meta : dict
        The model's meta dict (see :data:`META_KEYS`).
    typed : bool
        Arrays as NumPy arrays of XGBoost's UBJSON dtypes (float64 for the extension's),
        for the UBJSON encoder; lists (JSON-able) when False. Same values either way.

    Returns
    -------
    dict
        ``export_xgboost_dict(ensemble, meta)`` with the extension described in the
        module docstring (exact base margins and covers, the meta keys XGBoost has no
        place for).

    Raises
    ------
    ModelFormatError
        When the model is invalid or its objective has no XGBoost equivalent.
    """
    meta = normalize_meta(meta, "meta")
    d = export_xgboost_dict(ensemble, meta, typed=typed)  # validates the ensemble
    base_margin = np.asarray(ensemble.base_margin, dtype=np.float64)
    cover = np.asarray(ensemble.cover, dtype=np.float64)
    d[EXTENSION_KEY] = {
        "schema_version": EXTENSION_SCHEMA_VERSION,
        "meta": {k: v for k, v in meta.items() if k not in _XGBOOST_META_KEYS},
        "base_margin": base_margin if typed else base_margin.tolist(),
        "cover": cover if typed else cover.tolist(),
    }
    return d


#: ``Booster.save_raw`` formats, as XGBoost 3.4 names them
RAW_FORMATS = ("ubj", "json")


def model_file_bytes(ensemble: Ensemble, meta: dict, raw_format: str = "ubj") -> bytes:
    """The bytes of the model file :func:`save_model` writes, in either encoding.

    Parameters
    ----------
    ensemble : Ensemble
        The trees.
    meta : dict
        The model's meta dict.
    raw_format : {"ubj", "json"}
        UBJSON (XGBoost's default binary form) or JSON text.

    Returns
    -------
    bytes
        What ``xgboost.Booster().load_model(bytearray(...))`` loads, and
        :func:`parse_model_bytes` reads back into the same model.

    Raises
    ------
    DGBoostValueError
        For another ``raw_format`` (as XGBoost 3.4, which dropped its old binary format).
    ModelFormatError
        For invalid models.
    """
    if raw_format == "ubj":
        return ubjson_dumps(model_to_file_dict(ensemble, meta, typed=True))
    if raw_format == "json":
        return _dumps(model_to_file_dict(ensemble, meta)).encode("utf-8")
    raise DGBoostValueError(
        f"Unknown model format: {raw_format!r}. Expecting UBJSON ('ubj') or JSON ('json') "
        f"(XGBoost 3 removed its old binary format)"
    )


def parse_model_bytes(data: bytes | bytearray | memoryview | str, source: str = "model") -> Any:
    """A model file's bytes (UBJSON or JSON, told apart by content) or JSON text, parsed.

    Parameters
    ----------
    data : bytes-like or str
        The whole file.
    source : str
        What ``data`` is, for messages.

    Returns
    -------
    object
        The parsed document: typed UBJSON arrays as NumPy arrays, the rest as
        ``json.loads`` gives it.

    Raises
    ------
    ModelFormatError
        For data that is empty, truncated or corrupt in either encoding.
    """
    if isinstance(data, (bytes, bytearray, memoryview)) and is_ubjson(data):
        try:
            return ubjson_loads(data)
        except ModelFormatError as e:
            raise ModelFormatError(f"{source} is not a valid UBJSON model: {e}") from None
    return parse_model_json(data, source)


def _extension_mismatch(
    ensemble: Ensemble, meta: dict, ext_meta: dict, base_margin: np.ndarray, cover: np.ndarray
) -> str | None:
    """Why the extension no longer describes the XGBoost part (None when it does)."""
    objective = ext_meta.get("objective")
    objective = "reg:squarederror" if objective == "reg:linear" else objective  # warned once, below
    if objective != meta["objective"] and not (
        objective == CUSTOM_OBJECTIVE and meta["objective"] == "reg:squarederror"
    ):
        return f"its objective {objective!r} differs from learner.objective {meta['objective']!r}"
    if base_margin.shape != (ensemble.n_groups,):
        return f"it has {base_margin.shape[0]} base margins for {ensemble.n_groups} outputs"
    scores = np.broadcast_to(np.asarray(meta["base_score"], dtype=np.float32), (ensemble.n_groups,))
    try:
        mine = np.asarray([base_score_from_margin(meta["objective"], m) for m in base_margin], dtype=np.float32)
    except (OverflowError, ValueError):  # e.g. exp(1e308) under a log link
        return "its base margins are out of range for the objective"
    if not np.array_equal(mine, scores):
        return "its base margins do not match learner_model_param.base_score"
    if cover.shape != ensemble.cover.shape or not np.array_equal(
        cover.astype(np.float32), np.asarray(ensemble.cover).astype(np.float32)
    ):
        return "its covers do not match the trees' sum_hessian"
    return None


def _apply_extension(ensemble: Ensemble, meta: dict, ext, source: str) -> tuple[Ensemble, dict]:
    """``(ensemble, meta)`` read from the XGBoost part, completed by dgboost's extension."""
    where = f"{source}: {EXTENSION_KEY}"
    if not isinstance(ext, dict):
        raise ModelFormatError(f"{where} must be a JSON object, got {type(ext).__name__}")
    version = require_key(ext, "schema_version", EXTENSION_KEY)
    if isinstance(version, bool) or version != EXTENSION_SCHEMA_VERSION:
        raise ModelFormatError(
            f"{where}.schema_version {version!r} is not supported (this dgboost reads {EXTENSION_SCHEMA_VERSION})"
        )
    ext_meta = require_key(ext, "meta", EXTENSION_KEY)
    if not isinstance(ext_meta, dict):
        raise ModelFormatError(f"{where}.meta must be a JSON object")
    base_margin = as_array(require_key(ext, "base_margin", EXTENSION_KEY), np.float64, f"{where}.base_margin")
    cover = as_array(require_key(ext, "cover", EXTENSION_KEY), np.float64, f"{where}.cover")
    why = _extension_mismatch(ensemble, meta, ext_meta, base_margin, cover)
    if why is not None:
        warnings.warn(
            f"{source}: ignoring dgboost's extension ({why}; was the file changed outside "
            f"dgboost?): the model is read from its XGBoost part alone",
            UserWarning,
            stacklevel=4,
        )
        return ensemble, meta
    merged = dict(meta)
    merged.update({k: v for k, v in ext_meta.items() if k not in _XGBOOST_META_KEYS})
    merged = normalize_meta(merged, f"{where}.meta")
    arrays = {name: getattr(ensemble, name) for name in NODE_ARRAYS}
    arrays["cover"] = cover
    return (
        build_ensemble(
            ensemble.n_groups, base_margin, ensemble.offsets(), ensemble.groups(), arrays, ensemble.cat_arrays
        ),
        merged,
    )


def model_from_json(text: str | bytes) -> tuple[Ensemble, dict]:
    """Read dgboost or XGBoost JSON text (str), or a model file's bytes (JSON or UBJSON);
    returns ``(ensemble, meta)``."""
    return model_from_parsed_json(parse_model_bytes(text), "model")


#: XGBoost's words when a file name chooses no format (c_api.cc, XGBoosterSaveModel)
_DEFAULT_FORMAT_WARNING = (
    "Saving model in the UBJSON format as default.  You can use a file extension: `json` or `ubj` to "
    "choose between formats."
)


def save_model(path, ensemble: Ensemble, meta: dict) -> None:
    """Write the model file, atomically (temp file + rename).

    Parameters
    ----------
    path : str or os.PathLike
        Where to write; ``xgboost.Booster(model_file=path)`` loads the file (see
        :func:`model_to_file_dict`). The same model always gives the same bytes. The
        extension chooses the encoding as in XGBoost: ``.json`` JSON, ``.ubj`` UBJSON, any
        other UBJSON with XGBoost's warning (case-insensitive).
    ensemble : Ensemble
        The trees.
    meta : dict
        The model's meta dict.

    Raises
    ------
    ModelFormatError
        For invalid models.
    """
    name = os.fspath(path).lower()
    if name.endswith(".json"):
        atomic_write_json(path, model_to_file_dict(ensemble, meta))
        return
    if not name.endswith(".ubj"):
        warnings.warn(_DEFAULT_FORMAT_WARNING, UserWarning, stacklevel=3)
    atomic_write_bytes(path, model_file_bytes(ensemble, meta, "ubj"))


def load_model(path) -> tuple[Ensemble, dict]:
    """Read a model file that dgboost or XGBoost wrote, JSON or UBJSON whatever its name;
    returns ``(ensemble, meta)``."""
    with open(path, "rb") as fh:
        data = fh.read()
    source = f"model file {os.fspath(path)!r}"
    return model_from_parsed_json(parse_model_bytes(data, source), source)


# -- text dump ----------------------------------------------------------------------------
def _g(x) -> str:
    return "%.9g" % float(np.float32(x))


def trees_per_round(meta: dict, n_groups: int) -> int:
    """Trees in one boosting round: one per output group, times ``num_parallel_tree``
    (kept in ``meta["params"]`` by the XGBoost importer; absent means 1)."""
    return int(n_groups) * int((meta.get("params") or {}).get("num_parallel_tree") or 1)


def dump_text(ensemble: Ensemble, meta: dict, with_stats: bool = False) -> list[str]:
    """One string per tree in XGBoost's ``get_dump()`` text format."""
    names = meta.get("feature_names")
    types = meta.get("feature_types") if names else None
    L, R = ensemble.left, ensemble.right
    F, S, D = ensemble.feature, ensemble.split_value, ensemble.default_left
    G, C, V = ensemble.gain, ensemble.cover, ensemble.value
    off = ensemble.offsets()
    out = []
    for t in range(ensemble.n_trees):
        o = int(off[t])
        lines = []
        stack = [(0, 0)]
        while stack:  # pre-order: node, then its left subtree, then its right subtree
            nid, depth = stack.pop()
            i = o + nid
            tabs = "\t" * depth
            if L[i] < 0:
                line = f"{tabs}{nid}:leaf={_g(V[i])}"
                if with_stats:
                    line += f",cover={_g(C[i])}"
            else:
                f = int(F[i])
                fname = names[f] if names else f"f{f}"
                ftype = types[f] if types else "q"
                left, right = int(L[i]), int(R[i])
                missing = left if D[i] else right
                codes = ensemble.categories_of(i)
                if codes is not None:  # XGBoost's categorical template: yes is the set's (right) child
                    cats = ",".join(str(c) for c in codes.tolist())
                    line = f"{tabs}{nid}:[{fname}:{{{cats}}}] yes={right},no={left},missing={missing}"
                elif ftype == "i":  # XGBoost's indicator template has no indentation
                    yes, no = (right, left) if D[i] else (left, right)
                    line = f"{nid}:[{fname}] yes={yes},no={no}"
                else:
                    if ftype == "int":
                        fl = math.floor(float(S[i]))
                        cond = str(int(fl) if fl == float(S[i]) else int(fl) + 1)
                    else:
                        cond = _g(S[i])
                    line = f"{tabs}{nid}:[{fname}<{cond}] yes={left},no={right},missing={missing}"
                if with_stats:
                    line += f",gain={_g(G[i])},cover={_g(C[i])}"
                stack.append((right, depth + 1))
                stack.append((left, depth + 1))
            lines.append(line + "\n")
        out.append("".join(lines))
    return out
