"""A minimal UBJSON (Universal Binary JSON, draft 12) decoder for XGBoost's binary model form.

Used to import an in-memory ``xgboost.Booster`` through ``save_raw("ubj")``: XGBoost writes
each tree's node arrays as *typed* UBJSON arrays (``[$d#L<count>`` and raw big-endian
values), which this decoder turns into NumPy arrays with one ``frombuffer`` each, where the
JSON form makes ``json.loads`` parse every number as text (about 10x slower on large
models). Files in ``.ubj`` form are not read through this module: issue 12 asks for a
maintained UBJSON library there, and none handles XGBoost's typed arrays.

Everything else of the format is decoded as ``json.loads`` would give it: objects as dicts,
untyped arrays as lists, strings, numbers, booleans and null.
"""

from __future__ import annotations

import struct

import numpy as np

from .errors import ModelFormatError

__all__ = ["loads"]

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
            s = self.keys[raw] = raw.decode("utf-8")
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


def loads(data: bytes):
    """Decode one UBJSON value (typed numeric arrays become native-endian NumPy arrays)."""
    reader = _Reader(bytes(data))
    try:
        out = reader.value()
    except IndexError:
        reader.fail("unexpected end of data")
    if reader.pos != len(reader.buf):
        reader.fail(f"{len(reader.buf) - reader.pos} bytes after the value")
    return out
