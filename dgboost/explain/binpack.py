"""Pack paths into 32-lane bins, one bin per warp (GPUTreeShap).

A path of ``k`` elements (bias element included) occupies ``k`` consecutive lanes of one
bin; a bin holds at most ``capacity`` (32) elements. Fewer bins means fewer warps and less
idle lanes. Three heuristics, all O(n log n) or better:

* ``next_fit``: keep one open bin, open a new one when the path does not fit (O(n)).
* ``first_fit_decreasing``: largest paths first, each into the lowest-numbered bin with
  room; a max segment tree over bins finds that bin in O(log n).
* ``best_fit_decreasing``: largest paths first, each into the bin with the least room
  that still fits; bins are bucketed by remaining room (O(n * capacity) = O(n) for 32 lanes).

Paths longer than ``capacity`` fit in no bin; they are marked *oversize* (bin -1) and kept
after all bins, for a device fall-back. On the CPU every path is computed regardless.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from .paths import PathTable

__all__ = [
    "BIN_CAPACITY",
    "METHODS",
    "next_fit",
    "first_fit_decreasing",
    "best_fit_decreasing",
    "bin_items",
    "PackedTable",
    "pack",
]

BIN_CAPACITY = 32


@njit(cache=True, nogil=True)
def _next_fit(sizes, capacity):
    n = sizes.shape[0]
    out = np.full(n, -1, dtype=np.int32)
    n_bins = 0
    room = 0
    for i in range(n):
        s = sizes[i]
        if s > capacity:
            continue
        if n_bins == 0 or s > room:
            n_bins += 1
            room = capacity
        out[i] = n_bins - 1
        room -= s
    return out


@njit(cache=True, nogil=True)
def _first_fit(sizes, order, capacity):
    """First fit in the given item order, with a max segment tree over bin rooms."""
    n = sizes.shape[0]
    out = np.full(n, -1, dtype=np.int32)
    size = 1
    while size < max(n, 1):
        size *= 2
    tree = np.full(2 * size, capacity, dtype=np.int64)  # unopened bins have full room
    for q in range(order.shape[0]):
        i = order[q]
        s = sizes[i]
        if s > capacity:
            continue
        # descend to the leftmost leaf with room >= s (the root always qualifies: a fresh bin)
        node = 1
        while node < size:
            if tree[2 * node] >= s:
                node = 2 * node
            else:
                node = 2 * node + 1
        out[i] = node - size
        tree[node] -= s
        node //= 2
        while node >= 1:
            a = tree[2 * node]
            b = tree[2 * node + 1]
            tree[node] = a if a > b else b
            node //= 2
    return out


@njit(cache=True, nogil=True)
def _best_fit(sizes, order, capacity):
    """Best fit in the given item order; bins bucketed by remaining room (linked lists)."""
    n = sizes.shape[0]
    out = np.full(n, -1, dtype=np.int32)
    head = np.full(capacity + 1, -1, dtype=np.int64)  # room -> first bin with that room
    nxt = np.full(max(n, 1), -1, dtype=np.int64)
    prv = np.full(max(n, 1), -1, dtype=np.int64)
    room_of = np.zeros(max(n, 1), dtype=np.int64)
    n_bins = 0
    for q in range(order.shape[0]):
        i = order[q]
        s = sizes[i]
        if s > capacity:
            continue
        b = -1
        for r in range(s, capacity + 1):
            if head[r] >= 0:
                b = head[r]
                break
        if b < 0:
            b = n_bins
            n_bins += 1
            room_of[b] = capacity
        else:  # unlink b from its bucket
            r = room_of[b]
            if prv[b] >= 0:
                nxt[prv[b]] = nxt[b]
            else:
                head[r] = nxt[b]
            if nxt[b] >= 0:
                prv[nxt[b]] = prv[b]
        out[i] = b
        r = room_of[b] - s
        room_of[b] = r
        prv[b] = -1
        nxt[b] = head[r]
        if head[r] >= 0:
            prv[head[r]] = b
        head[r] = b
    return out


def _sizes(sizes) -> np.ndarray:
    sizes = np.ascontiguousarray(sizes, dtype=np.int64)
    if sizes.ndim != 1 or np.any(sizes < 1):
        raise ValueError("item sizes must be a 1-d array of positive integers")
    return sizes


def _decreasing(sizes):
    return np.argsort(-sizes, kind="stable").astype(np.int64)


def next_fit(sizes, capacity: int = BIN_CAPACITY) -> np.ndarray:
    """Bin of each item (int32, -1 for items larger than ``capacity``), next-fit order."""
    return _next_fit(_sizes(sizes), int(capacity))


def first_fit_decreasing(sizes, capacity: int = BIN_CAPACITY) -> np.ndarray:
    """Bin of each item (int32, -1 for oversize items), first-fit decreasing."""
    sizes = _sizes(sizes)
    return _first_fit(sizes, _decreasing(sizes), int(capacity))


def best_fit_decreasing(sizes, capacity: int = BIN_CAPACITY) -> np.ndarray:
    """Bin of each item (int32, -1 for oversize items), best-fit decreasing."""
    sizes = _sizes(sizes)
    return _best_fit(sizes, _decreasing(sizes), int(capacity))


METHODS = {
    "next_fit": next_fit,
    "first_fit_decreasing": first_fit_decreasing,
    "best_fit_decreasing": best_fit_decreasing,
    "nf": next_fit,
    "ffd": first_fit_decreasing,
    "bfd": best_fit_decreasing,
}


def bin_items(sizes, method: str = "best_fit_decreasing", capacity: int = BIN_CAPACITY):
    """``(bin_of_item, n_bins, utilisation)`` for ``method``; utilisation = packed / (bins * cap)."""
    try:
        fn = METHODS[method]
    except KeyError:
        raise ValueError(f"unknown bin packing method {method!r}; expected one of {sorted(set(METHODS))}") from None
    sizes = _sizes(sizes)
    bins = fn(sizes, capacity)
    packed = bins >= 0
    n_bins = int(bins.max()) + 1 if np.any(packed) else 0
    util = float(sizes[packed].sum()) / (n_bins * capacity) if n_bins else 1.0
    return bins, n_bins, util


@dataclass(eq=False)
class PackedTable:
    """A path table reordered bin by bin, ready to ship to a device.

    ``table`` holds the paths in bin order (bin 0's paths, then bin 1's, ...), then the
    oversize paths; path ``q`` of ``table`` is path ``original_path[q]`` of the input.
    Bin ``b`` is the element range ``bin_offsets[b]:bin_offsets[b + 1]`` of ``table``; the
    element at index ``e`` in it sits in lane ``element_lane[e] = e - bin_offsets[b]``.
    Oversize elements (``element_bin == -1``) start at ``bin_offsets[-1]``.

    Attributes
    ----------
    table : PathTable
    method : str
    capacity : int
    n_bins : int
    utilisation : float
        Packed elements / (n_bins * capacity).
    bin_offsets : ndarray of int64, shape (n_bins + 1,)
    element_bin, element_lane : ndarray of int32, shape (n_elements,)
    path_bin : ndarray of int32, shape (n_paths,)       (-1 for oversize paths)
    original_path : ndarray of int32, shape (n_paths,)
    oversize_paths : ndarray of int32                   (indices into ``table``)
    """

    table: PathTable
    method: str
    capacity: int
    n_bins: int
    utilisation: float
    bin_offsets: np.ndarray
    element_bin: np.ndarray
    element_lane: np.ndarray
    path_bin: np.ndarray
    original_path: np.ndarray
    oversize_paths: np.ndarray

    @property
    def n_paths(self) -> int:
        return self.table.n_paths


def pack(table: PathTable, method: str = "best_fit_decreasing", capacity: int = BIN_CAPACITY) -> PackedTable:
    """Pack the paths of ``table`` into bins of ``capacity`` lanes (see module docstring)."""
    sizes = table.path_lengths.astype(np.int64)
    bins, n_bins, util = bin_items(sizes, method, capacity) if table.n_paths else (np.empty(0, np.int32), 0, 1.0)
    key = np.where(bins >= 0, bins, np.iinfo(np.int32).max).astype(np.int64)
    order = np.argsort(key, kind="stable")
    new = table.select_paths(order)
    path_bin = bins[order].astype(np.int32)
    lengths = new.path_lengths
    element_bin = np.repeat(path_bin, lengths).astype(np.int32)
    counts = np.bincount(element_bin[element_bin >= 0], minlength=n_bins).astype(np.int64)
    bin_offsets = np.zeros(n_bins + 1, dtype=np.int64)
    np.cumsum(counts, out=bin_offsets[1:])
    idx = np.arange(new.n_elements, dtype=np.int64)
    lane = np.where(
        element_bin >= 0, idx - bin_offsets[np.maximum(element_bin, 0)], idx - np.repeat(new.path_offsets[:-1], lengths)
    )
    return PackedTable(
        table=new,
        method=method,
        capacity=int(capacity),
        n_bins=n_bins,
        utilisation=util,
        bin_offsets=bin_offsets,
        element_bin=element_bin,
        element_lane=lane.astype(np.int32),
        path_bin=path_bin,
        original_path=order.astype(np.int32),
        oversize_paths=np.flatnonzero(path_bin < 0).astype(np.int32),
    )
