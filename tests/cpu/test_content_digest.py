"""The SHA-256 content key of path tables and model bytes (dgboost.explain._digest)."""

from __future__ import annotations

import hashlib
import struct

import numpy as np
import pytest

from dgboost.explain import _digest
from dgboost.explain._digest import content_digest


def _items(n=3_000_000, seed=0):
    rng = np.random.default_rng(seed)
    return [("a", rng.standard_normal(n)), ("b", rng.integers(0, 9, n // 3).astype(np.int32)), ("n", 7)]


def test_the_content_digest_is_a_sha256_hash_tree_of_1_mib_chunks():
    data = np.arange(3 * (1 << 18) + 5, dtype=np.int32)  # 3 MiB + 20 bytes: 4 chunks
    raw = data.tobytes()
    leaves = [hashlib.sha256(b"\x00" + raw[i : i + (1 << 20)]).digest() for i in range(0, len(raw), 1 << 20)]
    assert len(leaves) == 4
    kind = f"ndarray {data.dtype.str} {data.shape}".encode()
    header = struct.pack("<Q", 1) + b"x" + struct.pack("<Q", len(kind)) + kind + struct.pack("<Q", len(raw))
    expected = hashlib.sha256(b"\x01dgboost content digest 2" + header + b"".join(leaves)).hexdigest()
    assert content_digest([("x", data)]) == expected


def test_the_content_digest_does_not_depend_on_the_number_of_threads(monkeypatch):
    items = _items()
    parallel = content_digest(items)
    monkeypatch.setattr(_digest, "_workers", lambda: 1)
    assert content_digest(items) == parallel
    monkeypatch.setattr(_digest, "_workers", lambda: 3)
    monkeypatch.setattr(_digest, "_PARALLEL_BYTES", 0)
    assert content_digest(items) == parallel


@pytest.mark.parametrize(
    "change",
    [
        lambda it: [("a", np.where(np.arange(it[0][1].size) == 7, 0.5, it[0][1])), it[1], it[2]],  # one value
        lambda it: [it[0], ("b", it[1][1].astype(np.uint32)), it[2]],  # same bytes, other dtype
        lambda it: [it[0], ("c", it[1][1]), it[2]],  # another name
        lambda it: [it[0], it[1], ("n", 8)],
        lambda it: [("a", it[0][1][:-1]), it[1], it[2]],  # one value fewer
        lambda it: [("a", it[0][1].reshape(2, -1)), it[1], it[2]],  # same bytes, other shape
        lambda it: [it[1], it[0], it[2]],  # another order
    ],
)
def test_any_change_of_a_value_its_type_shape_name_or_order_changes_the_content_digest(change):
    base = content_digest(_items(300_000))
    assert content_digest(change(_items(300_000))) != base


def test_bytes_and_arrays_of_the_same_bytes_have_different_content_digests():
    a = np.arange(100, dtype=np.uint8)
    assert content_digest([("m", a.tobytes())]) == content_digest([("m", bytearray(a.tobytes()))])
    assert content_digest([("m", a.tobytes())]) != content_digest([("m", a)])


def test_a_path_tables_fingerprint_is_the_content_digest_of_its_arrays_and_sizes():
    from dgboost.explain.paths import PathTable

    rng = np.random.default_rng(0)
    n = 10
    table = PathTable(
        feature=rng.integers(-1, 3, n),
        lower=rng.standard_normal(n),
        upper=rng.standard_normal(n),
        is_missing_branch=rng.integers(0, 2, n),
        zero_fraction=rng.random(n),
        path_offsets=[0, 4, 10],
        path_v=[0.5, -0.5],
        path_group=[0, 0],
        path_tree=[0, 1],
        n_groups=1,
        base_margin=0.0,
        n_features=3,
    )
    expected = content_digest((k, v) for k, v in sorted(vars(table).items()) if not k.startswith("_") and v is not None)
    assert table.fingerprint == expected
    other = table.select_paths(np.array([1, 0]))
    assert other.fingerprint != table.fingerprint
    assert other.select_paths(np.array([1, 0])).fingerprint == table.fingerprint
