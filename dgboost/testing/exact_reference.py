"""A NumPy twin of kernels/exact_split.cu, both scan modes, for tests without a GPU.

:class:`TwinExactEngine` is the CPU exact engine with its split search replaced by a line by
line transcription of the GPU kernels' algorithm (entry by entry, Python loops: tiny data
only): the interleaved mode's per-node masked scans with value-run ends, the sorted mode's
stable sort by node and segmented scans, and the three-pass choice (largest gain bits, then
smallest (feature, ordinal), then the write). Tests train with it in place of the CPU engine
and compare the trees: a mistake in the kernels' indexing or candidate rules shows here
first; the GPU tests then compare the kernels themselves with the CPU engine. The kernels keep
the sorted mode's order from level to level by a stable partition (docs/design.md §12); a
stable sort by node, as here, gives the same order.
"""

from __future__ import annotations

import numpy as np

from dgboost.backend._cpu_exact import CPUExactEngine, candidate_gain, parent_gains
from dgboost.backend._cuda_exact import run_ends

__all__ = ["TwinExactEngine"]

_EPS = 1e-6


def _value_between(a, b):
    mid = np.float32(np.float32(a * np.float32(0.5)) + np.float32(b * np.float32(0.5)))
    return np.float32(b) if mid <= a else mid


def _end_value(last, forward):
    gap = np.float32(np.abs(np.float32(last)) + np.float32(1e-6))
    return np.float32(last + gap) if forward else np.float32(last - gap)


class _Level:
    def __init__(self, totals, parent, bounds, monotone, masks, inv_g, inv_h, reg, m):
        self.totals, self.parent, self.bounds, self.monotone, self.masks = totals, parent, bounds, monotone, masks
        self.inv_g, self.inv_h, self.reg = inv_g, inv_h, reg
        self.best_bits = [0] * m
        self.best_key = [(1 << 64) - 1] * m
        self.out = {
            "feature": np.full(m, -1, np.int32),
            "gain": np.zeros(m, np.float64),
            "value": np.zeros(m, np.float32),
            "default_left": np.zeros(m, bool),
            "left": np.zeros((m, 2), np.int64),
        }

    def consider(self, phase, k, f, ordinal, lg, lh, value, dl):
        constrained = self.bounds is not None
        lo, hi = (self.bounds[k, 0], self.bounds[k, 1]) if constrained else (-np.inf, np.inf)
        sign = int(self.monotone[f]) if constrained else 0
        gain = candidate_gain(
            lg, lh, self.totals[k, 0], self.totals[k, 1], self.inv_g, self.inv_h, *self.reg, lo, hi, sign,
            constrained, self.parent[k],
        )  # fmt: skip
        if not gain > _EPS:
            return
        bits = int(np.float64(gain).view(np.uint64))
        if phase == 0:
            self.best_bits[k] = max(self.best_bits[k], bits)
            return
        if bits != self.best_bits[k]:
            return
        key = (f << 34) | int(ordinal)
        if phase == 1:
            self.best_key[k] = min(self.best_key[k], key)
            return
        if key != self.best_key[k]:
            return
        o = self.out
        o["feature"][k], o["gain"][k], o["value"][k], o["default_left"][k] = f, gain, value, dl
        o["left"][k] = (lg, lh)

    def consider_entry(self, phase, k, f, j, c, forward_ok, boundary, v, nxt, last_in, first_in, lg, lh, cg, ch):
        tg, th = int(self.totals[k, 0]), int(self.totals[k, 1])
        if boundary:
            value = _value_between(v, nxt)
            if forward_ok:
                self.consider(phase, k, f, j, lg, lh, value, False)
            self.consider(phase, k, f, 2 * c - j, tg - (cg - lg), th - (ch - lh), value, True)
        if last_in and forward_ok:
            self.consider(phase, k, f, c, cg, ch, _end_value(v, True), False)
        if first_in:
            self.consider(phase, k, f, 2 * c + 1, tg - cg, th - ch, _end_value(v, False), True)


class TwinExactEngine(CPUExactEngine):
    """The CPU exact engine whose ``best_splits`` is the GPU kernels' algorithm in NumPy.

    Parameters
    ----------
    values : ndarray of float32 (n, F)
    mode : {"interleaved", "sorted"}
    """

    def __init__(self, values, mode: str):
        super().__init__(values)
        self.mode = mode
        self.run_end = run_ends(self.ptr, self.sorted_values, relative=True)  # as the GPU engine holds them
        self.feature_of_entry = np.repeat(np.arange(self.ptr.size - 1), np.diff(self.ptr))

    def best_splits(self, first, totals, masks, bounds, monotone, scales, params):
        m = int(totals.shape[0])
        totals = np.ascontiguousarray(totals, np.int64)
        constrained = bounds is not None
        inv_g, inv_h = 1.0 / float(scales[0]), 1.0 / float(scales[1])
        reg = (float(params.reg_lambda), float(params.alpha), float(params.min_child_weight))
        reg += (float(params.max_delta_step),)
        b = np.ascontiguousarray(bounds, np.float64) if constrained else np.zeros((1, 2))
        parent = np.empty(m, np.float64)
        parent_gains(totals, b, constrained, inv_g, inv_h, *reg, parent)
        level = _Level(totals, parent, b if constrained else None, monotone, masks, inv_g, inv_h, reg, m)
        if self.mode == "interleaved":
            self._interleaved(first, m, level)
        else:
            self._sorted(first, m, level)
        return level.out

    def _active_slot(self, e, first, m):
        r = self.rows[e]
        k = int(self.node_of_row[r]) - first
        active = self.gpair[r, 0] != 0 or self.gpair[r, 1] != 0
        return k if 0 <= k < m and active else m

    def _interleaved(self, first, m, level):
        n = self.rows.size
        slots = np.array([self._active_slot(e, first, m) for e in range(n)], np.int64)
        pairs = self.gpair[self.rows].astype(np.int64)
        for k in range(m):
            mine = slots == k
            sg = np.cumsum(np.where(mine, pairs[:, 0], 0))
            sh = np.cumsum(np.where(mine, pairs[:, 1], 0))
            sc = np.cumsum(mine.astype(np.int64))
            for phase in range(3):
                for e in range(n):
                    if sc[e] == (sc[e - 1] if e > 0 else 0):
                        continue
                    f = int(self.feature_of_entry[e])
                    if level.masks is not None and not level.masks[k, f]:
                        continue
                    lo, hi = int(self.ptr[f]), int(self.ptr[f + 1])
                    base = (sg[lo - 1], sh[lo - 1], sc[lo - 1]) if lo > 0 else (0, 0, 0)
                    run, count = lo + int(self.run_end[e]), sc[e]
                    boundary = sc[run - 1] == count and sc[hi - 1] > sc[run - 1]
                    nxt = np.float32(0.0)
                    if boundary:
                        a = run + int(np.searchsorted(sc[run:hi], count, side="right"))
                        nxt = self.sorted_values[a]
                    level.consider_entry(
                        phase, k, f, e - lo, hi - lo, bool(self.forward[f]), boundary, self.sorted_values[e], nxt,
                        count == sc[hi - 1], count == base[2] + 1, int(sg[e] - base[0]), int(sh[e] - base[1]),
                        int(sg[hi - 1] - base[0]), int(sh[hi - 1] - base[1]),
                    )  # fmt: skip

    def _sorted(self, first, m, level):
        n, n_features = self.rows.size, self.ptr.size - 1
        slot = np.empty(n, np.int64)
        seg_count = np.zeros(m * n_features, np.int64)
        for e in range(n):
            slot[e] = k = self._active_slot(e, first, m)
            if k < m:
                seg_count[k * n_features + self.feature_of_entry[e]] += 1
        order = np.argsort(slot, kind="stable")
        seg_begin = np.cumsum(seg_count) - seg_count
        in_level = slot[order] < m
        rows = self.rows[order]
        sg = np.cumsum(np.where(in_level, self.gpair[rows, 0].astype(np.int64), 0))
        sh = np.cumsum(np.where(in_level, self.gpair[rows, 1].astype(np.int64), 0))
        for phase in range(3):
            for q in range(n):
                e = int(order[q])
                k = int(slot[e])
                if k >= m:
                    continue
                f = int(self.feature_of_entry[e])
                seg = k * n_features + f
                if level.masks is not None and not level.masks[k, f]:
                    continue
                begin = int(seg_begin[seg])
                end = begin + int(seg_count[seg])
                base = (sg[begin - 1], sh[begin - 1]) if begin > 0 else (0, 0)
                v = self.sorted_values[e]
                boundary, nxt = False, np.float32(0.0)
                if q + 1 < end:
                    nxt = self.sorted_values[order[q + 1]]
                    boundary = bool(nxt != v)
                lo, hi = int(self.ptr[f]), int(self.ptr[f + 1])
                level.consider_entry(
                    phase, k, f, e - lo, hi - lo, bool(self.forward[f]), boundary, v, nxt, q == end - 1, q == begin,
                    int(sg[q] - base[0]), int(sh[q] - base[1]), int(sg[end - 1] - base[0]), int(sh[end - 1] - base[1]),
                )  # fmt: skip
