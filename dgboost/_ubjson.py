"""UBJSON (Universal Binary JSON, draft 12) as XGBoost reads and writes it: its binary model form.

XGBoost (``save_model("m.ubj")``, ``save_raw()``) writes each tree's node arrays as *typed*
UBJSON arrays (``[$d#L<count>`` and raw big-endian values: ``d`` float32, ``l`` int32, ``L``
int64, ``U`` uint8), which :func:`loads` turns into NumPy arrays with one ``frombuffer``
each, where the JSON form makes ``json.loads`` parse every number as text (several times
slower on large models). Everything else is decoded as ``json.loads`` would give it:
objects as dicts, untyped arrays as lists, strings, numbers, booleans and null.

:func:`dumps` writes what XGBoost's ``UBJWriter`` writes: objects with their keys in sorted
order (each an int64 length and UTF-8 bytes, no ``S``), arrays as counted untyped arrays
(``[#L<count>``, no ``]``), 1-d NumPy arrays as typed arrays of their dtype, integers in the
smallest signed marker (``i``, ``I``, ``l``, ``L``), strings as ``S`` with an int64 length.
Python floats are written as ``D`` (float64), so that a document's floats (dgboost's exact
base margins, training parameters) come back bit for bit, as they do from JSON text.

:func:`is_ubjson` tells a UBJSON model from JSON text: both start with ``{``, but what
follows differs (a length marker or a container header in UBJSON, whitespace or ``"`` in
JSON), which is how a buffer's encoding is told when loading.
"""

from __future__ import annotations

import math
import struct

import numpy as np

from .errors import ModelFormatError

__all__ = ["loads", "dumps", "is_ubjson"]

# marker -> (big-endian NumPy dtype, struct format)
_NUMBERS = {
    ord("i"): (np.dtype(">i1"), ">b"),
    ord("U"): (np.dtype(">u1"), ">B"),
    ord("I"): (np.dtype(">i2"), ">h"),
    ord("l"): (np.dtype(">i4"), ">i"),
    ord("L"): (np.dtype(">i8"), ">q"),
    ord("d"): (np.dtype(">f4"), ">f"),
    ord("D"): (np.dtype(">f8"), ">d"),
}
_CONSTANTS = {ord("Z"): None, ord("T"): True, ord("F"): False}


_L = ord("L")
_LONG = struct.Struct(">q")


class _Reader:
    def __init__(self, data: bytes):
        self.buf = data
        self.pos = 0
        self.keys: dict[bytes, str] = {}  # XGBoost repeats the same few keys in every tree

    def fail(self, what: str):
        raise ModelFormatError(f"UBJSON: {what} at byte {self.pos}")

    def byte(self) -> int:
        if self.pos >= len(self.buf):
            self.fail("unexpected end of data")
        b = self.buf[self.pos]
        self.pos += 1
        return b

    def number(self, marker: int):
        dtype, fmt = _NUMBERS[marker]
        if self.pos + dtype.itemsize > len(self.buf):
            self.fail("unexpected end of data")
        (v,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += dtype.itemsize
        return v

    def length(self) -> int:
        buf, pos = self.buf, self.pos
        if pos + 9 <= len(buf) and buf[pos] == _L:  # XGBoost's lengths are all int64
            n = _LONG.unpack_from(buf, pos + 1)[0]
            self.pos = pos + 9
        else:
            marker = self.byte()
            if marker not in _NUMBERS or marker in (ord("d"), ord("D")):
                self.fail(f"a length must be an integer, got marker {chr(marker)!r}")
            n = self.number(marker)
        if n < 0:
            self.fail(f"negative length {n}")
        return n

    def text(self) -> str:
        n = self.length()
        end = self.pos + n
        if end > len(self.buf):
            self.fail("unexpected end of data")
        raw = self.buf[self.pos : end]
        self.pos = end
        s = self.keys.get(raw)
        if s is None:
            try:
                s = self.keys[raw] = raw.decode("utf-8")
            except UnicodeDecodeError:
                self.fail("a string is not UTF-8")
        return s

    def value(self, marker: int | None = None):
        if marker is None:
            marker = self.byte()
            while marker == ord("N"):  # no-op
                marker = self.byte()
        if marker in _NUMBERS:
            return self.number(marker)
        if marker in _CONSTANTS:
            return _CONSTANTS[marker]
        if marker == ord("S"):
            return self.text()
        if marker == ord("C"):
            return chr(self.byte())
        if marker == ord("["):
            return self.array()
        if marker == ord("{"):
            return self.object()
        self.fail(f"unsupported marker {chr(marker)!r}")

    def header(self) -> tuple[int | None, int | None]:
        """The optimized container header: (element type or None, count or None)."""
        kind = count = None
        if self.pos >= len(self.buf):
            self.fail("unexpected end of data")
        if self.buf[self.pos] == ord("$"):
            self.pos += 1
            kind = self.byte()
            if self.byte() != ord("#"):
                self.fail("a typed container needs a count")
        elif self.buf[self.pos] == ord("#"):
            self.pos += 1
        else:
            return None, None
        count = self.length()
        return kind, count

    def array(self):
        kind, count = self.header()
        if kind in _NUMBERS:  # a typed numeric array: one read of the raw values
            dtype = _NUMBERS[kind][0]
            end = self.pos + count * dtype.itemsize
            if end > len(self.buf):
                self.fail("unexpected end of data")
            a = np.frombuffer(self.buf, dtype=dtype, count=count, offset=self.pos).astype(dtype.newbyteorder("="))
            self.pos = end
            return a
        if count is not None:
            return [self.value(kind) for _ in range(count)]
        out = []
        while self.buf[self.pos] != ord("]"):
            out.append(self.value())
        self.pos += 1
        return out

    def object(self):
        kind, count = self.header()
        out = {}
        if count is not None:
            for _ in range(count):
                key = self.text()
                out[key] = self.value(kind)
            return out
        while self.buf[self.pos] != ord("}"):
            key = self.text()
            out[key] = self.value()
        self.pos += 1
        return out


def loads(data: bytes | bytearray | memoryview):
    """Decode one UBJSON value.

    Parameters
    ----------
    data : bytes-like
        The whole document (one value, nothing after it).

    Returns
    -------
    object
        dicts, lists, str, int, float, bool and None as ``json.loads`` gives them; typed
        numeric arrays as native-endian 1-d NumPy arrays of their dtype (``d`` float32,
        ``D`` float64, ``l`` int32, ``L`` int64, ``U`` uint8, ``i`` int8, ``I`` int16).

    Raises
    ------
    ModelFormatError
        For truncated or corrupt data, naming the byte offset.
    """
    reader = _Reader(bytes(data))
    try:
        out = reader.value()
    except IndexError:
        reader.fail("unexpected end of data")
    except RecursionError:
        reader.fail("containers nested too deeply")
    if reader.pos != len(reader.buf):
        reader.fail(f"{len(reader.buf) - reader.pos} bytes after the value")
    return out


# -- writing ------------------------------------------------------------------------------
# NumPy dtype -> typed-array marker (XGBoost: F32Array d, I32Array l, I64Array L, U8Array U)
_ARRAY_MARKERS = {
    np.dtype(np.float32): b"d",
    np.dtype(np.float64): b"D",
    np.dtype(np.int8): b"i",
    np.dtype(np.uint8): b"U",
    np.dtype(np.int16): b"I",
    np.dtype(np.int32): b"l",
    np.dtype(np.int64): b"L",
}
_INT_MARKERS = ((b"i", ">b", 8), (b"I", ">h", 16), (b"l", ">i", 32), (b"L", ">q", 64))
_COUNT = struct.Struct(">q")


def _count(n: int) -> bytes:
    return b"L" + _COUNT.pack(n)


def _integer(v: int, out: list) -> None:
    for marker, fmt, bits in _INT_MARKERS:
        # XGBoost's writer takes the smallest type whose open range holds the value
        if -(1 << (bits - 1)) < v < (1 << (bits - 1)) - 1 or bits == 64:
            if not -(1 << 63) <= v < (1 << 63):
                raise ModelFormatError(f"cannot serialise the model to UBJSON: integer {v} is beyond int64")
            out.append(marker + struct.pack(fmt, v))
            return


def _encode(value, out: list) -> None:
    if value is None:
        out.append(b"Z")
    elif value is True or value is False or isinstance(value, np.bool_):
        out.append(b"T" if value else b"F")
    elif isinstance(value, (int, np.integer)):
        _integer(int(value), out)
    elif isinstance(value, (float, np.floating)):
        if not math.isfinite(value):  # as the JSON writer (allow_nan=False): the same documents
            raise ModelFormatError(f"cannot serialise the model to UBJSON: non-finite number {value!r}")
        out.append(b"D" + struct.pack(">d", float(value)))
    elif isinstance(value, str):
        raw = value.encode("utf-8")
        out.append(b"S" + _count(len(raw)) + raw)
    elif isinstance(value, dict):
        out.append(b"{")
        for key in sorted(value):
            if not isinstance(key, str):
                raise ModelFormatError(f"cannot serialise the model to UBJSON: key {key!r} is not a string")
            raw = key.encode("utf-8")
            out.append(_count(len(raw)) + raw)
            _encode(value[key], out)
        out.append(b"}")
    elif isinstance(value, np.ndarray) and value.ndim == 1 and value.dtype in _ARRAY_MARKERS:
        if value.dtype.kind == "f" and not np.all(np.isfinite(value)):
            raise ModelFormatError("cannot serialise the model to UBJSON: an array has a non-finite number")
        marker = _ARRAY_MARKERS[value.dtype]
        out.append(b"[$" + marker + b"#" + _count(value.shape[0]))
        out.append(value.astype(value.dtype.newbyteorder(">"), copy=False).tobytes())
    elif isinstance(value, (list, tuple)):
        out.append(b"[#" + _count(len(value)))
        for item in value:
            _encode(item, out)
    else:
        raise ModelFormatError(f"cannot serialise the model to UBJSON: unsupported {type(value).__name__}")


def dumps(value) -> bytes:
    """Encode ``value`` as UBJSON the way XGBoost's writer does (see the module docstring).

    Parameters
    ----------
    value : dict, list, str, int, float, bool, None or 1-d numpy.ndarray
        Nested freely. Arrays of float32, float64, int8, uint8, int16, int32 or int64
        become typed arrays; lists and tuples untyped ones.

    Returns
    -------
    bytes

    Raises
    ------
    ModelFormatError
        For non-finite numbers (JSON has none either), integers beyond int64, non-string
        keys and other types.
    """
    out: list[bytes] = []
    _encode(value, out)
    return b"".join(out)


#: what may follow an object's ``{`` in UBJSON: a key's length marker, a container header, a no-op
_UBJSON_AFTER_BRACE = frozenset(b"iUIlL$#N")


def is_ubjson(data: bytes | bytearray | memoryview) -> bool:
    """Whether ``data`` (a model file's bytes) is UBJSON rather than JSON text.

    An object starts with ``{`` in both; in UBJSON a key's length marker (``i U I l L``),
    a container header (``$``, ``#``) or a no-op (``N``) follows, none of which can follow
    it in JSON. Anything else (``{}`` included, the empty object either way) is read as
    JSON, whose parser then says what is wrong.
    """
    head = bytes(data[:2])
    return len(head) == 2 and head[0] == ord("{") and head[1] in _UBJSON_AFTER_BRACE
