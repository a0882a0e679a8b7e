"""A least-recently-used cache of device uploads, bounded by entries and by bytes.

The GPU explainers upload a path table (and its weight tables, up to 1 GiB by default) or a
background once per process and reuse it across calls and explainers with equal
fingerprints. A long-lived Dask worker explaining many models would otherwise keep every
upload it ever made: entries are dropped, least recently used first, once there are more
than ``max_entries`` or their device bytes exceed ``max_bytes`` (the entry just used is
always kept, whatever its size). An entry's size is read when entries are counted, so one
that grows after it is built (a path table's interaction constants) is counted as it is.
Unless a cache is given its own bound, ``max_bytes`` is the ``device_cache_bytes`` option of
:mod:`dgboost.config`, read whenever entries are counted (so a change applies to the
module-level caches made at import).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Hashable

from ..config import get_config

__all__ = ["DeviceCache", "device_bytes"]


def device_bytes(*arrays) -> int:
    """Total ``nbytes`` of ``arrays`` (None and objects without ``nbytes`` count 0)."""
    return sum(int(getattr(a, "nbytes", 0)) for a in arrays if a is not None)


class DeviceCache:
    """``get(key, build)``: the entry of ``key``, built by ``build()`` on a miss (outside the
    lock, so a slow upload does not block other threads' hits).

    Parameters
    ----------
    max_entries : int
    max_bytes : int or None
        Bound on the sum of the entries' ``nbytes`` (each entry has an ``nbytes`` property);
        None: ``dgboost.get_config()["device_cache_bytes"]`` at the time entries are counted.
    """

    def __init__(self, max_entries: int = 4, max_bytes: int | None = None):
        self.max_entries = int(max_entries)
        self._max_bytes = None if max_bytes is None else int(max_bytes)
        self._entries: "OrderedDict[Hashable, object]" = OrderedDict()
        self._lock = threading.Lock()

    @property
    def max_bytes(self) -> int:
        """The bound on the entries' device bytes now (the configured one unless given)."""
        return get_config()["device_cache_bytes"] if self._max_bytes is None else self._max_bytes

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
        max_bytes = self.max_bytes
        while len(self._entries) > 1 and (
            len(self._entries) > self.max_entries or sum(int(e.nbytes) for e in self._entries.values()) > max_bytes
        ):
            self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
