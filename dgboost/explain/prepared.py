"""Per-model cache of the explainer's preparation for models given as bytes, files or XGBoost boosters.

``TreeExplainer(model_bytes)`` (a dgboost / XGBoost JSON or UBJSON model, its bytes or its
file) decodes the model and extracts its path table; for deep models that is most of what
an explainer costs before its first row (a 100-tree depth-16 model: 0.3 s of decoding and
0.2 s of path extraction). A second explainer of the same model prepares nothing: the
imported ensemble, its meta and its path table are kept in a small process-wide LRU cache
keyed by a SHA-256 content key of the model's bytes
(:func:`~dgboost.explain._digest.content_digest`), so any other bytes (another model, more
rounds, one leaf changed) miss it. The path table being the same object, its fingerprint
(derived from the same content key, not hashed again) and weight tables
(:func:`~dgboost.explain.treeshap.cached_tables`, kept on the table) are reused as well.

An ``xgboost.Booster`` object is keyed the same way by the bytes of ``save_raw("ubj")``
(which the importer reads anyway): the same trees give the same key, and a booster trained
further, or changed in any other way its saved model shows, gives another (issue 32).

dgboost boosters are cached on the booster itself (:func:`~dgboost.explain.api.booster_path_table`);
other model objects (XGBoost scikit-learn wrappers, LightGBM, scikit-learn) are imported
afresh, their weight tables still found by the table's fingerprint.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Any

from .._compat import library_of
from .._xgboost_raw import booster_ubjson
from ._digest import content_digest
from .importers import from_model_bytes, from_xgboost_ubjson, to_ensemble
from .paths import PathTable, extract_paths

__all__ = ["import_model", "model_path_table"]

# digest -> [ensemble, meta, path table or None]; a deep model's table is ~100 MB, so few
_PREPARED: "OrderedDict[tuple, list]" = OrderedDict()
_PREPARED_MAX = 2
_LOCK = threading.Lock()


def _model_bytes(model: Any) -> bytes | None:
    """The bytes of a model given as JSON / UBJSON bytes or as such a file, else None
    (LightGBM text files and every model object: not cached here)."""
    if isinstance(model, (bytes, bytearray)):
        return bytes(model)
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not os.path.isfile(path):
            return None  # the importer raises its own error
        with open(path, "rb") as fh:
            raw = fh.read()
        return raw if raw.lstrip()[:1] == b"{" else None
    return None


def _is_xgboost_booster(model: Any) -> bool:
    """Whether ``model`` is an ``xgboost.Booster`` (not a scikit-learn wrapper, whose
    iteration range and classes the importer reads from the wrapper)."""
    return type(model).__name__ == "Booster" and library_of(model) == "xgboost" and hasattr(model, "save_raw")


def import_model(model: Any) -> tuple[Any, dict, tuple | None]:
    """:func:`~dgboost.explain.importers.to_ensemble` of ``model``, cached for model bytes.

    Parameters
    ----------
    model
        Anything :func:`to_ensemble` accepts.

    Returns
    -------
    ensemble : dgboost.tree.Ensemble
        Shared between explainers of the same bytes: treat it as read-only.
    meta : dict
        A fresh (shallow) copy per call.
    key : tuple or None
        The cache key (the content key of the bytes, and the kind of ``model``, which
        ``meta`` names), for :func:`model_path_table`; None when ``model`` is not cached.
    """
    raw = _model_bytes(model)
    if raw is not None:
        kind = type(model).__name__
    elif _is_xgboost_booster(model):
        raw, kind = booster_ubjson(model), "xgboost.Booster"  # save_raw("ubj")'s bytes
    else:
        ensemble, meta = to_ensemble(model)
        return ensemble, meta, None
    key = (content_digest([("model", raw)]), kind)
    with _LOCK:
        entry = _PREPARED.get(key)
        if entry is not None:
            _PREPARED.move_to_end(key)
    if entry is None:
        # what to_ensemble does with this model, from the bytes hashed (a file is read once,
        # a booster saved once)
        if kind == "xgboost.Booster":
            ensemble, meta = from_xgboost_ubjson(raw, model)
        else:
            ensemble, meta = from_model_bytes(raw, model)
        entry = [ensemble, meta, None]
        with _LOCK:
            _PREPARED[key] = entry
            while len(_PREPARED) > _PREPARED_MAX:
                _PREPARED.popitem(last=False)
    return entry[0], dict(entry[1]), key


def model_path_table(ensemble: Any, key: tuple | None) -> PathTable:
    """:func:`~dgboost.explain.paths.extract_paths` of ``ensemble``, kept with the cache
    entry ``key`` from :func:`import_model` (None: extracted, not kept)."""
    with _LOCK:
        entry = _PREPARED.get(key) if key is not None else None
    if entry is None or entry[0] is not ensemble:
        return extract_paths(ensemble)
    if entry[2] is None:
        table = extract_paths(ensemble)  # two threads may both extract: same table, same print
        table._derive_fingerprint(key)  # the bytes' key already names it: no second hash
        entry[2] = table
    return entry[2]
