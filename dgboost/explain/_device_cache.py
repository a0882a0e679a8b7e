"""A least-recently-used cache of device uploads, bounded by entries and by bytes.

The GPU explainers upload a path table (and its weight tables, up to 1 GiB by default) or a
background once per process and reuse it across calls and explainers with equal
fingerprints. A long-lived Dask worker explaining many models would otherwise keep every
upload it ever made: entries are dropped, least recently used first, once there are more
than ``max_entries`` or their device bytes exceed ``max_bytes`` (the entry just used is
always kept, whatever its size). An entry's size is read when entries are counted, so one
that grows after it is built (a path table's interaction constants) is counted as it is.
"""
from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Callable, Hashable

__all__ = ["DeviceCache", "device_bytes", "DEFAULT_MAX_BYTES"]

#: bytes of device memory the uploads of one cache may hold (``DGBOOST_DEVICE_CACHE_BYTES``)
DEFAULT_MAX_BYTES = int(os.environ.get("DGBOOST_DEVICE_CACHE_BYTES", 4 << 30))


def device_bytes(*arrays) -> int:
    """Total ``nbytes`` of ``arrays`` (None and objects without ``nbytes`` count 0)."""
    return sum(int(getattr(a, "nbytes", 0)) for a in arrays if a is not None)


class DeviceCache:
    """``get(key, build)``: the entry of ``key``, built by ``build()`` on a miss (outside the
    lock, so a slow upload does not block other threads' hits).

    Parameters
    ----------
    max_entries : int
    max_bytes : int
        Bound on the sum of the entries' ``nbytes`` (each entry has an ``nbytes`` property).
    """

    def __init__(self, max_entries: int = 4, max_bytes: int = DEFAULT_MAX_BYTES):
        self.max_entries = int(max_entries)
        self.max_bytes = int(max_bytes)
        self._entries: "OrderedDict[Hashable, object]" = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key) -> bool:
        return key in self._entries

    def get(self, key: Hashable, build: Callable[[], object]):
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                return found
        built = build()
        with self._lock:
            self._entries[key] = built
            self._entries.move_to_end(key)
            self._evict()
        return built

    def _evict(self) -> None:
        while len(self._entries) > 1 and (
                len(self._entries) > self.max_entries
                or sum(int(e.nbytes) for e in self._entries.values()) > self.max_bytes):
            self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
