"""The cache of device uploads is bounded by entries and by bytes, least recently used out."""

from __future__ import annotations

from dgboost.backend._device_cache import DeviceCache, device_bytes


class _Upload:
    def __init__(self, nbytes: int):
        self.nbytes = nbytes


def test_the_least_recently_used_entry_goes_when_there_are_too_many():
    cache = DeviceCache(max_entries=2, max_bytes=1 << 40)
    a = cache.get("a", lambda: _Upload(1))
    cache.get("b", lambda: _Upload(1))
    assert cache.get("a", lambda: _Upload(99)) is a  # a hit: not rebuilt, now the most recent
    cache.get("c", lambda: _Upload(1))
    assert "a" in cache and "c" in cache and "b" not in cache and len(cache) == 2


def test_entries_go_until_their_bytes_fit_but_the_newest_always_stays():
    cache = DeviceCache(max_entries=10, max_bytes=100)
    cache.get("a", lambda: _Upload(40))
    cache.get("b", lambda: _Upload(40))
    cache.get("c", lambda: _Upload(40))  # 120 bytes: a goes
    assert "a" not in cache and "b" in cache and "c" in cache
    cache.get("huge", lambda: _Upload(500))  # larger than the bound alone: kept, the rest go
    assert len(cache) == 1 and "huge" in cache


def test_an_entry_that_grew_after_it_was_built_is_counted_as_it_is_now():
    cache = DeviceCache(max_entries=10, max_bytes=100)
    a = cache.get("a", lambda: _Upload(10))
    a.nbytes = 95  # e.g. a path table that later gained its interaction constants
    cache.get("b", lambda: _Upload(10))
    assert "a" not in cache and "b" in cache


def test_device_bytes_adds_the_arrays_and_skips_none():
    import numpy as np

    assert device_bytes(np.zeros(3), None, np.zeros(2, np.int32)) == 24 + 8


def test_a_cache_without_its_own_bound_follows_the_configured_device_cache_bytes_when_it_counts(monkeypatch):
    import dgboost as dg

    cache = DeviceCache(max_entries=10)  # made before the bound is set, as the module-level caches are
    monkeypatch.setenv("DGBOOST_DEVICE_CACHE_BYTES", "100")
    assert cache.max_bytes == 100
    cache.get("a", lambda: _Upload(60))
    cache.get("b", lambda: _Upload(30))
    assert "a" in cache and "b" in cache
    with dg.config_context(device_cache_bytes=80):
        cache.get("c", lambda: _Upload(30))  # 120 bytes against 80: a goes
    assert "a" not in cache and "b" in cache and "c" in cache


def test_a_bound_given_to_the_cache_is_kept_whatever_the_configuration():
    import dgboost as dg

    cache = DeviceCache(max_entries=10, max_bytes=1000)
    with dg.config_context(device_cache_bytes=1):
        cache.get("a", lambda: _Upload(400))
        cache.get("b", lambda: _Upload(400))
        assert cache.max_bytes == 1000 and len(cache) == 2
