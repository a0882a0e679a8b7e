"""SHA-256 content keys of large buffers, hashed in parallel (a two-level hash tree).

A path table of a deep model holds over 100 MB and SHA-256 reads about 0.4 to 1.5 GB/s on
one core, so hashing it whole took 0.1 to 0.35 s, on the critical path of a first GPU
explainer (issue 32). Here every buffer is cut into fixed 1 MiB chunks, each chunk is
hashed on its own (``hashlib`` releases the GIL for large buffers, so threads hash chunks
side by side), and the key is the SHA-256 of a header per buffer (its name, type, shape and
byte length) followed by its chunks' digests. The chunking depends only on the bytes, never
on the number of threads, so the key is the same on any machine; it is as collision-safe as
SHA-256 itself (the header fixes how the digests divide into buffers and chunks, and leaf
and root inputs are domain-separated by a leading byte). The chunks were 4 MiB until issue
32's multiclass model (SHAP case c, 10.9 MB of UBJSON) showed that a model's key took three
chunks, so three threads of a 16-core host; in 1 MiB chunks it takes eleven.
"""

from __future__ import annotations

import functools
import hashlib
import struct

import numpy as np

from .._threads import host_threads, run_tasks

__all__ = ["content_digest", "host_threads"]

_CHUNK = 1 << 20  # bytes a leaf digest covers
_PARALLEL_BYTES = 1 << 21  # below this, threads cost more than they save
_LEAF, _ROOT = b"\x00", b"\x01"
_VERSION = b"dgboost content digest 2"  # 2: 1 MiB chunks


def _leaf(chunk: memoryview) -> bytes:
    h = hashlib.sha256(_LEAF)
    h.update(chunk)
    return h.digest()


def _workers() -> int:
    return host_threads()


def _as_bytes(value) -> tuple[bytes, memoryview]:
    """(header describing ``value``, its bytes as a flat memoryview, without a copy where
    ``value`` is a C-contiguous array or a bytes-like object)."""
    if isinstance(value, np.ndarray):
        a = np.ascontiguousarray(value)
        kind = f"ndarray {a.dtype.str} {a.shape}".encode()
        return kind, memoryview(a.reshape(-1).view(np.uint8))
    if isinstance(value, (bytes, bytearray, memoryview)):
        return b"bytes", memoryview(value).cast("B")
    return b"repr", memoryview(repr(value).encode())


def content_digest(items) -> str:
    """The SHA-256 content key (hex) of named values (module docstring).

    Parameters
    ----------
    items : iterable of (str, object)
        Names and values, in the order they are keyed: NumPy arrays (their dtype, shape and
        C-order bytes), bytes-like objects (their bytes), anything else by its ``repr``.

    Returns
    -------
    str
        64 hex digits; equal sequences of names and values give equal keys.
    """
    headers: list[bytes] = []
    counts: list[int] = []  # chunks per value
    chunks: list[memoryview] = []
    for name, value in items:
        kind, data = _as_bytes(value)
        raw_name = str(name).encode()
        n = data.nbytes
        counts.append(-(-n // _CHUNK))
        headers.append(
            struct.pack("<Q", len(raw_name)) + raw_name + struct.pack("<Q", len(kind)) + kind + struct.pack("<Q", n)
        )
        chunks.extend(data[i : i + _CHUNK] for i in range(0, n, _CHUNK))
    total = sum(c.nbytes for c in chunks)
    threads = _workers() if total >= _PARALLEL_BYTES else 1
    digests = run_tasks([functools.partial(_leaf, c) for c in chunks], threads)
    root = hashlib.sha256(_ROOT + _VERSION)
    at = 0
    for header, count in zip(headers, counts):
        root.update(header)
        root.update(b"".join(digests[at : at + count]))
        at += count
    return root.hexdigest()
