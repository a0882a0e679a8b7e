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

``loads(data, columns=("trees",))`` returns the value of each key named in ``columns`` that is
an array of objects with the same keys (XGBoost's trees) as an :class:`ObjectColumns` rather
than a list of dicts: one compiled pass over its bytes finds every value, and each key's
typed arrays come out joined, one array for all objects (an 800-tree model: ~11,000 small
arrays and ~16,000 keys not made one by one in Python). Any other shape is decoded as usual.
"""

from __future__ import annotations

import functools
import math
import struct

import numpy as np
from numba import njit

from .errors import ModelFormatError

__all__ = ["loads", "dumps", "is_ubjson", "ObjectColumns"]

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
    def __init__(self, data: bytes | bytearray, columns=()):
        self.buf = data
        self.pos = 0
        self.keys: dict[bytes, str] = {}  # XGBoost repeats the same few keys in every tree
        self.columns = frozenset(columns)

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
        if type(raw) is not bytes:  # a bytearray's slice: a key must be hashable
            raw = bytes(raw)
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
            cols = self.object_columns() if key in self.columns else None
            out[key] = self.value() if cols is None else cols
        self.pos += 1
        return out

    def object_columns(self) -> "ObjectColumns | None":
        """The array of objects at ``pos`` as columns (and ``pos`` past it), or None (``pos``
        unchanged) when it is something else: the caller then decodes it as usual."""
        start = self.pos
        if start >= len(self.buf) or self.buf[start] != ord("["):
            return None
        # read-only whatever the buffer (bytes or a bytearray): one compiled type for Numba
        found = _scan_object_array(np.frombuffer(memoryview(self.buf).toreadonly(), dtype=np.uint8), start, _ITEMSIZE)
        end = found[0]
        if end < 0:
            return None
        names = []
        key_off, key_len, key_parent = found[2], found[3], found[4]
        for j in range(key_off.shape[0]):
            try:
                name = str(self.buf[key_off[j] : key_off[j] + key_len[j]], "utf-8")
            except UnicodeDecodeError:
                return None
            names.append(name if key_parent[j] < 0 else f"{names[key_parent[j]]}.{name}")
        if len(set(names)) != len(names):  # a repeated key: a dict keeps the last, columns cannot
            return None
        self.pos = end
        return ObjectColumns(self.buf, start, end, names, *found[5:])


def loads(data: bytes | bytearray | memoryview, columns=()):
    """Decode one UBJSON value.

    Parameters
    ----------
    data : bytes-like
        The whole document (one value, nothing after it); bytes, a bytearray and a
        contiguous memoryview are read without a copy.
    columns : iterable of str
        Object keys whose value, when it is an array of objects that all have the same keys
        (in the same order) holding typed numeric arrays, integers, strings or objects of
        those, comes back as an :class:`ObjectColumns` instead of a list of dicts.

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
    # bytes, a bytearray or a contiguous memoryview are read where they lie (XGBoost's
    # save_raw gives a bytearray: a depth-16 model's 100+ MB copy cost tens of ms), anything
    # else is copied once. Arrays returned are copies; an ObjectColumns reads the buffer when
    # its columns are asked for, so the buffer must stay unchanged until then (the importers
    # read them at once)
    if isinstance(data, memoryview) and data.c_contiguous:
        data = data.cast("B")  # read where it lies, as bytes and a bytearray are
    elif not isinstance(data, (bytes, bytearray)):
        data = bytes(data)
    reader = _Reader(data, columns)
    try:
        out = reader.value()
    except IndexError:
        reader.fail("unexpected end of data")
    except RecursionError:
        reader.fail("containers nested too deeply")
    if reader.pos != len(reader.buf):
        reader.fail(f"{len(reader.buf) - reader.pos} bytes after the value")
    return out


# -- arrays of objects as columns ----------------------------------------------------------
_ITEMSIZE = np.zeros(256, dtype=np.int64)  # marker -> bytes of a number (0: not a number)
for _m, (_dt, _) in _NUMBERS.items():
    _ITEMSIZE[_m] = _dt.itemsize
_MAX_KEYS = 64  # keys (nested ones included) an object may have to be read as columns


@njit(cache=True, nogil=True)
def _read_int(buf, pos, itemsize):
    """The integer whose marker is at ``pos`` (big-endian, signed but for ``U``):
    ``(ok, value, position after it)``."""
    if pos >= buf.shape[0]:
        return False, 0, pos
    m = buf[pos]
    size = itemsize[m]
    if size == 0 or m == 100 or m == 68 or pos + 1 + size > buf.shape[0]:  # d, D: not integers
        return False, 0, pos
    v = np.int64(0)
    for i in range(size):
        v = (v << 8) | np.int64(buf[pos + 1 + i])
    if m != 85 and size < 8 and v >= (np.int64(1) << (8 * size - 1)):  # 85: U, unsigned
        v -= np.int64(1) << (8 * size)
    return True, v, pos + 1 + size


@njit(cache=True, nogil=True)
def _walk_object(
    buf, pos, itemsize, learn, key_off, key_len, key_parent, n_keys, row, marker, vtype, voff, vcount, vint
):
    """Read the object at ``pos``: learn its keys (``learn``) or check that they are the learnt
    ones, in order, and note each value in row ``row``. Returns ``(end, n_keys)``, end -1 when
    the object is not of the supported shape (see :func:`_scan_object_array`)."""
    n_buf = buf.shape[0]
    if pos >= n_buf or buf[pos] != 123:  # {
        return -1, n_keys
    pos += 1
    j = 0
    parent = -1
    while True:
        if pos >= n_buf:
            return -1, n_keys
        if buf[pos] == 125:  # }
            pos += 1
            if parent < 0:
                break
            parent = -1  # the end of a nested object
            continue
        ok, klen, pos = _read_int(buf, pos, itemsize)
        if not ok or klen < 0 or pos + klen > n_buf:
            return -1, n_keys
        if learn:
            if j >= key_off.shape[0]:
                return -1, n_keys
            key_off[j] = pos
            key_len[j] = klen
            key_parent[j] = parent
        else:
            if j >= n_keys or key_len[j] != klen or key_parent[j] != parent:
                return -1, n_keys
            k0 = key_off[j]
            for i in range(klen):
                if buf[k0 + i] != buf[pos + i]:
                    return -1, n_keys
        pos += klen
        if pos >= n_buf:
            return -1, n_keys
        m = buf[pos]
        pos += 1
        marker[row, j] = m
        if m == 91:  # [: a typed numeric array
            if pos + 3 > n_buf or buf[pos] != 36 or buf[pos + 2] != 35:  # $ t #
                return -1, n_keys
            t = buf[pos + 1]
            size = itemsize[t]
            if size == 0:
                return -1, n_keys
            ok, count, pos = _read_int(buf, pos + 3, itemsize)
            if not ok or count < 0 or count > (n_buf - pos) // size:
                return -1, n_keys
            vtype[row, j] = t
            voff[row, j] = pos
            vcount[row, j] = count
            pos += count * size
        elif m == 83:  # S: a string
            ok, count, pos = _read_int(buf, pos, itemsize)
            if not ok or count < 0 or pos + count > n_buf:
                return -1, n_keys
            voff[row, j] = pos
            vcount[row, j] = count
            pos += count
        elif m == 123:  # {: an object of values (one level)
            if parent >= 0 or pos >= n_buf or buf[pos] == 36 or buf[pos] == 35:
                return -1, n_keys
            parent = j
        else:
            ok, v, pos = _read_int(buf, pos - 1, itemsize)
            if not ok:
                return -1, n_keys
            vint[row, j] = v
        j += 1
    if learn:
        n_keys = j
    elif j != n_keys:
        return -1, n_keys
    return pos, n_keys


@njit(cache=True, nogil=True)
def _scan_object_array(buf, pos, itemsize):
    """Find every value of the counted array of objects at ``pos`` (``[#<count>{...}...``).

    Every object must have the keys of the first, in its order; values are typed numeric
    arrays, integers, strings, or objects (one level) of those. Returns ``(end, n_objects,
    key_off, key_len, key_parent, marker, vtype, voff, vcount, vint)``: the keys' bytes and
    the key they sit in (-1: top level), and per object and key (n_objects, n_keys) the
    value's marker, typed arrays' element marker, data offset and count, strings' offset and
    length, integers' value; ``end`` -1 for anything else."""
    k_off = np.empty(64, np.int64)
    k_len = np.empty(64, np.int64)
    k_par = np.empty(64, np.int64)
    one = np.zeros((1, 64), np.int64)
    one8 = np.zeros((1, 64), np.uint8)
    fail = (-1, 0, k_off[:0], k_len[:0], k_par[:0], one8[:0], one8[:0], one[:0], one[:0], one[:0])
    n_buf = buf.shape[0]
    if pos + 2 > n_buf or buf[pos] != 91 or buf[pos + 1] != 35:  # [#
        return fail
    ok, n_obj, pos = _read_int(buf, pos + 2, itemsize)
    if not ok or n_obj < 1 or n_obj > (n_buf - pos) // 2:  # an object takes 2 bytes at least
        return fail
    end, n_keys = _walk_object(buf, pos, itemsize, True, k_off, k_len, k_par, 0, 0, one8, one8, one, one, one)
    if end < 0 or n_keys == 0:
        return fail
    marker = np.zeros((n_obj, n_keys), np.uint8)
    vtype = np.zeros((n_obj, n_keys), np.uint8)
    voff = np.zeros((n_obj, n_keys), np.int64)
    vcount = np.zeros((n_obj, n_keys), np.int64)
    vint = np.zeros((n_obj, n_keys), np.int64)
    for r in range(n_obj):
        pos, _ = _walk_object(
            buf, pos, itemsize, False, k_off, k_len, k_par, n_keys, r, marker, vtype, voff, vcount, vint
        )
        if pos < 0:
            return fail
    return (
        pos,
        n_obj,
        k_off[:n_keys].copy(),
        k_len[:n_keys].copy(),
        k_par[:n_keys].copy(),
        marker,
        vtype,
        voff,
        vcount,
        vint,
    )


@njit(cache=True, nogil=True, inline="always")
def _bswap16(x):
    return np.uint16((x >> np.uint16(8)) | ((x << np.uint16(8)) & np.uint16(0xFF00)))


@njit(cache=True, nogil=True, inline="always")
def _bswap32(x):
    # Numba shifts a uint32 as a uint64: the cast drops what (x << 24) pushed past 32 bits
    return np.uint32(
        (x >> np.uint32(24))
        | ((x >> np.uint32(8)) & np.uint32(0xFF00))
        | ((x << np.uint32(8)) & np.uint32(0xFF0000))
        | ((x << np.uint32(24)) & np.uint32(0xFF000000))
    )


@njit(cache=True, nogil=True, inline="always")
def _bswap64(x):
    return (np.uint64(_bswap32(np.uint32(x & np.uint64(0xFFFFFFFF)))) << np.uint64(32)) | np.uint64(
        _bswap32(np.uint32(x >> np.uint64(32)))
    )


@njit(cache=True, nogil=True)
def _copy(src, dst, at):
    for k in range(src.shape[0]):
        dst[at + k] = src[k]


@njit(cache=True, nogil=True)
def _copy_swapped2(src, dst, at):
    for k in range(src.shape[0]):
        dst[at + k] = _bswap16(src[k])


@njit(cache=True, nogil=True)
def _copy_swapped4(src, dst, at):
    for k in range(src.shape[0]):
        dst[at + k] = _bswap32(src[k])


@njit(cache=True, nogil=True)
def _copy_swapped8(src, dst, at):
    for k in range(src.shape[0]):
        dst[at + k] = _bswap64(src[k])


@njit(cache=True, nogil=True)
def _gather_values(buf, offsets, counts, starts, itemsize, swap, first, last, out):
    """Objects ``first`` to ``last - 1`` of one key's typed arrays, joined into ``out``.

    Object ``i``'s ``counts[i]`` values of ``itemsize`` bytes at ``buf[offsets[i]:]`` go to
    values ``starts[i]`` onward of ``out`` (uint8, the joined column's bytes), each value's
    bytes reversed when ``swap`` (UBJSON is big-endian): one pass of (unaligned) loads of
    whole values, where a copy of the column and then a swap of it took two."""
    for i in range(first, last):
        s, d, c = offsets[i], starts[i], counts[i]
        run = buf[s : s + c * itemsize]
        if itemsize == 1:
            _copy(run, out, d)
        elif itemsize == 2:
            if swap:
                _copy_swapped2(run.view(np.uint16), out.view(np.uint16), d)
            else:
                _copy(run.view(np.uint16), out.view(np.uint16), d)
        elif itemsize == 4:
            if swap:
                _copy_swapped4(run.view(np.uint32), out.view(np.uint32), d)
            else:
                _copy(run.view(np.uint32), out.view(np.uint32), d)
        elif swap:
            _copy_swapped8(run.view(np.uint64), out.view(np.uint64), d)
        else:
            _copy(run.view(np.uint64), out.view(np.uint64), d)


_PARALLEL_BYTES = 1 << 20  # typed columns of fewer bytes in all are joined by one thread


class ObjectColumns:
    """An array of objects with the same keys, by key (``loads(..., columns=...)``).

    Attributes
    ----------
    names : list of str
        The keys, in order; a key of a nested object is ``"outer.inner"`` (the outer key is
        a name too, its values objects).
    """

    def __init__(self, buf: bytes, start: int, end: int, names, marker, vtype, voff, vcount, vint):
        self._buf, self._start, self._end = buf, start, end
        self.names = list(names)
        self._col = {name: j for j, name in enumerate(self.names)}
        self._marker, self._vtype, self._voff, self._vcount, self._vint = marker, vtype, voff, vcount, vint

    def __len__(self) -> int:
        return int(self._marker.shape[0])

    def to_list(self) -> list:
        """The objects as :func:`loads` gives them without ``columns``: a list of dicts."""
        return loads(self._buf[self._start : self._end])

    def typed(self, name: str) -> tuple[np.ndarray, np.ndarray] | None:
        """Key ``name``'s typed arrays joined, when it holds typed arrays of one element type
        in every object: ``(values, counts)``, the values native-endian of that type (what
        ``np.concatenate`` of :func:`loads`' arrays gives) and int64 ``(n_objects,)`` counts;
        else None."""
        return self.typed_many([name])[name]

    def typed_many(self, names) -> dict:
        """:meth:`typed` of each key in ``names`` (a dict by name), the keys' values joined
        by host threads at once (:func:`dgboost._threads.host_threads`, runs of objects of
        about equal bytes; one thread below ``_PARALLEL_BYTES`` in all)."""
        from ._threads import balanced_runs, host_threads, run_tasks

        plans, out = [], {}
        for name in names:
            j = self._col.get(name)
            out[name] = None
            if j is None or not np.all(self._marker[:, j] == ord("[")):
                continue
            types = self._vtype[:, j]
            if not np.all(types == types[0]):
                continue
            dtype = _NUMBERS[int(types[0])][0]
            counts = self._vcount[:, j].copy()
            starts = np.zeros(counts.shape[0] + 1, dtype=np.int64)
            np.cumsum(counts, out=starts[1:])
            plans.append((name, dtype, counts, starts, np.ascontiguousarray(self._voff[:, j])))
        total = sum(int(starts[-1]) * dtype.itemsize for _, dtype, _, starts, _ in plans)
        threads = host_threads() if total >= _PARALLEL_BYTES else 1
        # read-only whatever the buffer (bytes or a bytearray): one compiled type for Numba
        buf = np.frombuffer(memoryview(self._buf).toreadonly(), dtype=np.uint8)
        tasks = []
        for name, dtype, counts, starts, offsets in plans:
            raw = np.empty(int(starts[-1]) * dtype.itemsize, dtype=np.uint8)
            swap = not dtype.isnative  # one-byte dtypes are native
            cuts = balanced_runs(starts, threads)
            for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist()):
                tasks.append(
                    functools.partial(_gather_values, buf, offsets, counts, starts, dtype.itemsize, swap, a, b, raw)
                )
            out[name] = (raw.view(dtype.newbyteorder("=") if swap else dtype), counts)
        run_tasks(tasks, threads)
        return out

    def scalars(self, name: str) -> list | None:
        """Key ``name``'s values as :func:`loads` gives them, when every object holds a string
        or an integer there; else None."""
        j = self._col.get(name)
        if j is None:
            return None
        out = []
        texts: dict = {}
        for m, off, count, v in zip(
            self._marker[:, j].tolist(),
            self._voff[:, j].tolist(),
            self._vcount[:, j].tolist(),
            self._vint[:, j].tolist(),
        ):
            if m == ord("S"):
                raw = bytes(self._buf[off : off + count])  # hashable, from a bytearray too
                s = texts.get(raw)
                if s is None:
                    try:
                        s = texts[raw] = raw.decode("utf-8")
                    except UnicodeDecodeError:
                        return None
                out.append(s)
            elif _ITEMSIZE[m] and m not in (ord("d"), ord("D")):
                out.append(v)
            else:
                return None
        return out

    def kinds(self, name: str) -> set:
        """The value markers of key ``name`` over the objects (``"["`` typed array, ``"{"``
        object, ``"S"`` string, an integer's marker); empty for an absent key."""
        j = self._col.get(name)
        return set() if j is None else {chr(m) for m in np.unique(self._marker[:, j]).tolist()}


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
