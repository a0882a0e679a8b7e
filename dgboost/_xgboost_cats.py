"""XGBoost 3.x's stored categories (``learner.gradient_booster.model.cats``) to and from
dgboost's ``meta["categories"]``.

XGBoost 3.4.1 keeps the training data's category values in the model so that prediction can
re-code a frame whose categories are ordered differently (``src/data/cat_container.cc``)::

    "cats": {"enc": [<one object per feature>],
             "feature_segments": int32 [F + 1],   # cumulative category counts
             "sorted_idx": int32 [total]}         # per feature, the argsort of its values

A feature's object is ``{"offsets": int32 [K + 1], "values": int8 [bytes]}`` for string
categories (Arrow's string layout, UTF-8; empty arrays for a numeric feature) or
``{"type": code, "values": [...]}`` for integer ones (``type`` 9..16: int8, uint8, int16,
uint16, int32, uint32, int64, uint64; floating-point categories are refused, as XGBoost
does). A model trained on codes given as numbers has empty ``cats``.

``meta["categories"]``: None, or a list of length F: None for a numeric feature (or one
whose codes were given as numbers), else its category values in code order (str or int).
"""

from __future__ import annotations

import numpy as np

from .errors import ModelFormatError

__all__ = ["cats_from_categories", "categories_from_cats"]

# XGBoost's CatIndexType codes of integer categories
_TYPE_CODES = {
    np.dtype(np.int8): 9,
    np.dtype(np.uint8): 10,
    np.dtype(np.int16): 11,
    np.dtype(np.uint16): 12,
    np.dtype(np.int32): 13,
    np.dtype(np.uint32): 14,
    np.dtype(np.int64): 15,
    np.dtype(np.uint64): 16,
}
_CODE_TYPES = {code: dtype for dtype, code in _TYPE_CODES.items()}
_FLOAT_CODES = (7, 8)


def _empty_cats(typed: bool) -> dict:
    return {
        "enc": [],
        "feature_segments": np.empty(0, np.int32) if typed else [],
        "sorted_idx": np.empty(0, np.int32) if typed else [],
    }


def _signed_bytes(value: str) -> tuple:
    """A string as XGBoost compares category names: its UTF-8 bytes as signed chars."""
    return tuple(np.frombuffer(value.encode("utf-8"), np.int8).tolist())


def _feature_enc(values, typed: bool) -> tuple[dict, np.ndarray, int]:
    """(enc object, local sorted index int32, number of categories) of one feature."""
    if values is None or len(values) == 0:
        empty = {"offsets": np.empty(0, np.int32), "values": np.empty(0, np.int8)}
        return ({k: (v if typed else []) for k, v in empty.items()}, np.empty(0, np.int32), 0)
    if all(isinstance(v, str) for v in values):
        encoded = [v.encode("utf-8") for v in values]
        offsets = np.concatenate([[0], np.cumsum([len(b) for b in encoded])]).astype(np.int32)
        data = np.frombuffer(b"".join(encoded), np.int8)
        order = sorted(range(len(values)), key=lambda i: _signed_bytes(values[i]))
        enc = {"offsets": offsets if typed else offsets.tolist(), "values": data if typed else data.tolist()}
        return enc, np.asarray(order, np.int32), len(values)
    if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values):
        array = np.asarray([int(v) for v in values], np.int64)
        order = np.argsort(array, kind="stable").astype(np.int32)
        enc = {"type": _TYPE_CODES[np.dtype(np.int64)], "values": array if typed else array.tolist()}
        return enc, order, len(values)
    raise ModelFormatError(
        "XGBoost's model format stores string or integer categories only; got "
        f"{type(values[0]).__name__} values ({list(values)[:3]}...)"
    )


def cats_from_categories(categories, typed: bool = False) -> dict:
    """XGBoost's ``cats`` object of ``meta["categories"]`` (empty when no values are known).

    Parameters
    ----------
    categories : list or None
        Per feature None or the category values in code order.
    typed : bool
        Arrays as NumPy arrays of XGBoost's UBJSON dtypes (else lists).
    """
    if categories is None or all(c is None for c in categories):
        return _empty_cats(typed)
    encs, orders, counts = [], [], []
    for values in categories:
        enc, order, k = _feature_enc(values, typed)
        encs.append(enc)
        orders.append(order)
        counts.append(k)
    segments = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    sorted_idx = np.concatenate(orders).astype(np.int32) if orders else np.empty(0, np.int32)
    return {
        "enc": encs,
        "feature_segments": segments if typed else segments.tolist(),
        "sorted_idx": sorted_idx if typed else sorted_idx.tolist(),
    }


def _int_array(value, dtype, where: str) -> np.ndarray:
    if not isinstance(value, (list, np.ndarray)):
        raise ModelFormatError(f"{where} must be an array, got {type(value).__name__}")
    array = np.asarray(value)
    if array.size == 0:
        return np.empty(0, dtype)
    if array.ndim != 1 or array.dtype.kind not in "iu":
        raise ModelFormatError(f"{where} must be a flat array of integers")
    return array.astype(dtype)


def _feature_categories(obj, where: str):
    """One feature's category values (list) from its ``enc`` object, None when it has none."""
    if not isinstance(obj, dict):
        raise ModelFormatError(f"{where} must be a JSON object, got {type(obj).__name__}")
    if "offsets" in obj:
        offsets = _int_array(obj["offsets"], np.int64, f"{where}.offsets")
        data = _int_array(obj.get("values", []), np.int64, f"{where}.values")
        if offsets.size == 0:
            return None
        if offsets[0] != 0 or np.any(np.diff(offsets) < 0) or offsets[-1] != data.size:
            raise ModelFormatError(f"{where}.offsets do not delimit its {data.size} bytes of names")
        raw = data.astype(np.int8).tobytes()
        try:
            return [raw[a:b].decode("utf-8") for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())]
        except UnicodeDecodeError as e:
            raise ModelFormatError(f"{where}: a category name is not UTF-8: {e}") from None
    code = obj.get("type")
    if code in _FLOAT_CODES:
        raise ModelFormatError(f"{where}: floating-point categories are not supported (as in XGBoost)")
    if code not in _CODE_TYPES:
        raise ModelFormatError(f"{where}.type {code!r} is not an XGBoost category type")
    values = _int_array(obj.get("values"), np.int64, f"{where}.values")
    if _CODE_TYPES[code].kind == "u" and values.size and values.min() < 0:  # UBJSON keeps them as signed
        values = values.astype(_CODE_TYPES[code].str.replace("u", "i")).view(_CODE_TYPES[code]).astype(np.int64)
    return [int(v) for v in values] if values.size else None


def categories_from_cats(cats, num_feature: int, where: str) -> list | None:
    """``meta["categories"]`` from XGBoost's ``cats`` (None when it holds none)."""
    if cats is None:
        return None
    if not isinstance(cats, dict):
        raise ModelFormatError(f"{where} must be a JSON object, got {type(cats).__name__}")
    enc = cats.get("enc") or []
    if not isinstance(enc, list):
        raise ModelFormatError(f"{where}.enc must be a list")
    if not enc:
        return None
    if len(enc) != num_feature:
        raise ModelFormatError(f"{where}.enc has {len(enc)} features, num_feature is {num_feature}")
    out = [_feature_categories(obj, f"{where}.enc[{f}]") for f, obj in enumerate(enc)]
    return None if all(c is None for c in out) else out
