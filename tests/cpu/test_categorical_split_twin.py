"""A NumPy twin of the CUDA categorical split search picks the CPU kernel's splits bit for bit.

``kernels/split.cu`` cannot run here, so its algorithm is written out step by step in plain
Python below (``_gpu_twin``): numeric candidates per (node, feature) as ``best_per_feature``
keeps them; categorical ones as ``best_per_category_feature`` finds them (one-hot orders
2c + d; partition keys = float64 weights made unsigned with -0.0 keyed as +0.0, the
bitonic network of the kernel run over the padded keys, int64 scans of both ends, orders t
and n - 1 + t, the set kept as a pivot); ``best_per_node``'s first strictly larger gain
from KERNEL_EPS over the features; and ``categorical_split_bits``'s rebuild of the set from
the pivot. The twin is held to ``CPUBackend.evaluate_splits`` (docs/design.md §11.2) on
random histograms full of ties (equal weights, -0.0 and +0.0 weights, empty categories),
missing values, min_child_weight, max_delta_step, L1, monotone constraints, masks and
several ``max_cat_threshold`` / ``max_cat_to_onehot`` values. The GPU tests
(``tests/gpu/test_categorical_gpu.py``) hold the kernel itself to the CPU.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

import numpy as np
import pytest

from dgboost._categorical import CategoricalLayout, n_words
from dgboost._layout import DEFAULT_LEFT, FEATURE, GAIN, LEFT_G, LEFT_H, NODE_FIELDS, SPLIT_BIN, SUM_G, SUM_H
from dgboost.backend.cpu import CPUBackend

KERNEL_EPS = 1e-6
NO_NODE = -2


@dataclass(frozen=True)
class _Params:
    reg_lambda: float = 1.0
    alpha: float = 0.0
    gamma: float = 0.0
    min_child_weight: float = 1.0
    max_delta_step: float = 0.0
    max_cat_to_onehot: int = 4
    max_cat_threshold: int = 64
    eta: float = 0.3


# -- split.cu's float64 helpers, operation for operation --------------------------------------
def _threshold_l1(G, alpha):
    if G > alpha:
        return G - alpha
    if G < -alpha:
        return G + alpha
    return 0.0


def _leaf_weight(G, H, p):
    if H < p.min_child_weight or H <= 0.0:
        return 0.0
    w = -_threshold_l1(G, p.alpha) / (H + p.reg_lambda)
    if p.max_delta_step != 0.0 and abs(w) > p.max_delta_step:
        w = p.max_delta_step if w > 0 else -p.max_delta_step
    return w


def _bounded_weight(G, H, lo, hi, p):
    w = _leaf_weight(G, H, p)
    return lo if w < lo else hi if w > hi else w


def _gain_given_weight(G, H, w, p):
    if H <= 0.0:
        return 0.0
    return -(2.0 * G * w + (H + p.reg_lambda) * w * w) - 2.0 * p.alpha * abs(w)


def _split_gain(G, H, p):
    if H < p.min_child_weight or H <= 0.0:
        return 0.0
    if p.max_delta_step == 0.0:
        t = _threshold_l1(G, p.alpha)
        return t * t / (H + p.reg_lambda)
    w = _leaf_weight(G, H, p)
    return -(2.0 * G * w + (H + p.reg_lambda) * w * w) - 2.0 * p.alpha * abs(w)


def _better(gain, key, other_gain, other_key):
    if key < 0:
        return False
    if other_key < 0:
        return True
    if gain != other_gain:
        return gain > other_gain
    return key < other_key


def _weight_key(w: float) -> int:
    """split.cu's ``weight_key``: the float64 as an unsigned key in order, -0.0 as +0.0."""
    if w == 0.0:
        w = 0.0
    bits = struct.unpack("<Q", struct.pack("<d", w))[0]
    return (~bits) & 0xFFFFFFFFFFFFFFFF if bits >> 63 else bits | 0x8000000000000000


def _bitonic_sort(keys: list, codes: list) -> None:
    """split.cu's ``bitonic_sort`` (sequentially: the pairs of a step are disjoint)."""
    n = len(keys)
    k = 2
    while k <= n:
        j = k >> 1
        while j > 0:
            for i in range(n):
                x = i ^ j
                if x > i:
                    after = keys[i] > keys[x] or (keys[i] == keys[x] and codes[i] > codes[x])
                    if after == ((i & k) == 0):
                        keys[i], keys[x] = keys[x], keys[i]
                        codes[i], codes[x] = codes[x], codes[i]
            j >>= 1
        k <<= 1


class _Node:
    def __init__(self, tg, th, lo, hi, sign, constrained, p, sg, sh):
        self.tg, self.th, self.lo, self.hi, self.sign, self.constrained = tg, th, lo, hi, sign, constrained
        TG, TH = tg * sg, th * sh
        self.parent = (
            _gain_given_weight(TG, TH, _bounded_weight(TG, TH, lo, hi, p), p)
            if constrained
            else (_split_gain(TG, TH, p))
        )


def _candidate(lg, lh, rg, rh, nd, p, sg, sh):
    """split.cu's ``category_candidate`` (and the numeric warp's checks): gain or None."""
    if lh <= 0 or rh <= 0:
        return None
    GL, HL, GR, HR = lg * sg, lh * sh, rg * sg, rh * sh
    if HL < p.min_child_weight or HR < p.min_child_weight:
        return None
    if nd.constrained:
        wl, wr = _bounded_weight(GL, HL, nd.lo, nd.hi, p), _bounded_weight(GR, HR, nd.lo, nd.hi, p)
        if (nd.sign > 0 and wl > wr) or (nd.sign < 0 and wl < wr):
            return None
        gain = _gain_given_weight(GL, HL, wl, p) + _gain_given_weight(GR, HR, wr, p) - nd.parent
    else:
        gain = _split_gain(GL, HL, p) + _split_gain(GR, HR, p) - nd.parent
    return gain if gain > KERNEL_EPS else None


def _numeric_feature(h, nd, p, sg, sh):
    """best_per_feature: (gain, key, split_bin, lg, lh, pivot) of one numeric feature."""
    fg, fh = int(h[:, 0].sum()), int(h[:, 1].sum())
    mg, mh = nd.tg - fg, nd.th - fh
    has_missing = mg != 0 or mh != 0
    best = (0.0, -1, -1, 0, 0, None)
    cg = ch = 0
    for b in range(h.shape[0]):
        cg += int(h[b, 0])
        ch += int(h[b, 1])
        for d in range(2):
            if d == 1 and not has_missing:
                break
            lg, lh = (cg, ch) if d == 0 else (cg + mg, ch + mh)
            gain = _candidate(lg, lh, nd.tg - lg, nd.th - lh, nd, p, sg, sh)
            if gain is not None and _better(gain, 2 * b + d, best[0], best[1]):
                best = (gain, 2 * b + d, b, lg, lh, None)
    return best


def _category_key(h, c, p, sg, sh):
    """split.cu's ``category_key``: the weight without min_child_weight's floor (CalcWeightCat)."""
    unfloored = _unfloored(p)
    return _weight_key(_leaf_weight(int(h[c, 0]) * sg, int(h[c, 1]) * sh, unfloored))


def _unfloored(p):
    from dataclasses import replace

    return replace(p, min_child_weight=0.0)


def _categorical_feature(h, nd, p, sg, sh):
    """best_per_category_feature: (gain, key, split_bin, lg, lh, pivot) of one categorical feature."""
    K = h.shape[0]
    best_gain, best_order, blg, blh = 0.0, -1, 0, 0
    if K < p.max_cat_to_onehot:
        mg, mh = nd.tg - int(h[:, 0].sum()), nd.th - int(h[:, 1].sum())
        for c in range(K):
            for d in range(2):
                rg, rh = int(h[c, 0]) + (mg if d else 0), int(h[c, 1]) + (mh if d else 0)
                gain = _candidate(nd.tg - rg, nd.th - rh, rg, rh, nd, p, sg, sh)
                if gain is not None and _better(gain, 2 * c + d, best_gain, best_order):
                    best_gain, best_order, blg, blh = gain, 2 * c + d, nd.tg - rg, nd.th - rh
        if best_order < 0:
            return (0.0, -1, -1, 0, 0, None)
        dl = 1 if best_order & 1 == 0 else 0
        return (best_gain, 2 * best_order + dl, best_order >> 1, blg, blh, None)
    n_sort = 1
    while n_sort < K:
        n_sort <<= 1
    keys = [_category_key(h, c, p, sg, sh) if c < K else (1 << 64) - 1 for c in range(n_sort)]
    codes = [c if c < K else 0x7FFFFFFF for c in range(n_sort)]
    _bitonic_sort(keys, codes)
    count = min(p.max_cat_threshold, K) - 1
    for forward, first in ((True, 0), (False, max(count, 0))):
        scan = np.cumsum([h[codes[t] if forward else codes[K - 1 - t]] for t in range(max(count, 0))], axis=0)
        for t in range(max(count, 0)):
            vg, vh = int(scan[t, 0]), int(scan[t, 1])
            lg, lh = (nd.tg - vg, nd.th - vh) if forward else (vg, vh)
            gain = _candidate(lg, lh, nd.tg - lg, nd.th - lh, nd, p, sg, sh)
            if gain is not None and _better(gain, first + t, best_gain, best_order):
                best_gain, best_order, blg, blh = gain, first + t, lg, lh
    if best_order < 0:
        return (0.0, -1, -1, 0, 0, None)
    forward = best_order < count
    last = best_order if forward else K - 2 - (best_order - count)
    return (best_gain, 2 * best_order + (1 if forward else 0), -1, blg, blh, (keys[last], codes[last]))


def _gpu_twin(hist, records, cut_ptrs, mask, scales, p, layout, bounds=None, monotone=None):
    """The CUDA evaluation's records and cat_bits, step by step as kernels/split.cu takes them."""
    records = records.copy()
    n, F = hist.shape[0], len(cut_ptrs) - 1
    sg, sh = 1.0 / scales[0], 1.0 / scales[1]
    bits = np.zeros((n, layout.words), np.uint32)
    for i in range(n):
        if records[i, FEATURE] == NO_NODE:
            continue
        constrained = monotone is not None
        cands = []
        for f in range(F):
            nd = _Node(
                int(records[i, SUM_G]),
                int(records[i, SUM_H]),
                bounds[i, 0] if constrained else 0.0,
                bounds[i, 1] if constrained else 0.0,
                int(monotone[f]) if constrained else 0,
                constrained,
                p,
                sg,
                sh,
            )
            h = hist[i, cut_ptrs[f] : cut_ptrs[f + 1]]
            if not mask[i, f]:
                cands.append((0.0, -1, -1, 0, 0, None))
            elif layout.is_cat[f]:
                cands.append(_categorical_feature(h, nd, p, sg, sh))
            else:
                cands.append(_numeric_feature(h, nd, p, sg, sh))
        best, best_f = KERNEL_EPS, -1
        for f, c in enumerate(cands):  # best_per_node
            if c[1] >= 0 and c[0] > best:
                best, best_f = c[0], f
        if best_f >= 0 and best < p.gamma:
            best_f = -1
        c = cands[best_f] if best_f >= 0 else (0.0, 0, -1, 0, 0, None)
        records[i, FEATURE] = best_f
        records[i, SPLIT_BIN] = c[2] if best_f >= 0 else -1
        records[i, DEFAULT_LEFT] = c[1] & 1 if best_f >= 0 else 0
        records[i, GAIN] = np.float64(best if best_f >= 0 else 0.0).view(np.int64)
        records[i, LEFT_G], records[i, LEFT_H] = (c[3], c[4]) if best_f >= 0 else (0, 0)
        if best_f >= 0 and layout.is_cat[best_f]:  # categorical_split_bits
            h = hist[i, cut_ptrs[best_f] : cut_ptrs[best_f + 1]]
            if c[5] is None:
                b = int(records[i, SPLIT_BIN])
                bits[i, b >> 5] |= np.uint32(1 << (b & 31))
            else:
                pk, pc = c[5]
                for code in range(h.shape[0]):
                    k = _category_key(h, code, p, sg, sh)
                    if not (k > pk or (k == pk and code > pc)):
                        bits[i, code >> 5] |= np.uint32(1 << (code & 31))
    return records, bits


# -- random inputs full of ties -------------------------------------------------------------------
def _histograms(rng, n_nodes, n_bins, with_missing=True):
    """int64 (n, total, 2) histograms and node totals: small integer (g, h) drawn from a few
    values so that weights tie, empty categories (g = h = 0: weight -0.0), categories below
    min_child_weight (weight +0.0) and categories with g = 0 (weight -0.0)."""
    total = int(sum(n_bins))
    g_choices = np.array([-6, -3, -2, 0, 0, 1, 2, 3, 5, 8]) * 2**20
    h_choices = np.array([0, 1, 2, 2, 3, 4, 6]) * 2**20
    g = rng.choice(g_choices, size=(n_nodes, total))
    h = rng.choice(h_choices, size=(n_nodes, total))
    g[h == 0] = np.where(rng.random((n_nodes, total))[h == 0] < 0.7, 0, g[h == 0])
    hist = np.stack([g, h], axis=2).astype(np.int64)
    totals = hist.sum(axis=1)
    if with_missing:
        totals[:, 0] += rng.choice([0, 3 * 2**20, -5 * 2**20], size=n_nodes)
        totals[:, 1] += rng.choice([0, 0, 2 * 2**20, 7 * 2**20], size=n_nodes)
    return hist, totals


def _records(totals):
    rec = np.zeros((totals.shape[0], NODE_FIELDS), np.int64)
    rec[:, SUM_G] = totals[:, 0]
    rec[:, SUM_H] = totals[:, 1]
    rec[:, FEATURE] = -1
    rec[:, SPLIT_BIN] = -1
    return rec


def _compare(hist, records, cut_ptrs, mask, p, layout, bounds=None, monotone=None):
    scales = np.array([2.0**20, 2.0**20])
    cpu_records = records.copy()
    cpu_bits = np.zeros((records.shape[0], layout.words), np.uint32)
    CPUBackend().evaluate_splits(
        hist,
        cpu_records,
        cut_ptrs,
        mask,
        scales,
        p,
        bounds=bounds,
        monotone=monotone,
        categorical=layout,
        cat_bits=cpu_bits,
    )
    full_mask = np.broadcast_to(
        np.ones((1, len(cut_ptrs) - 1), bool) if mask is None else mask, (records.shape[0], len(cut_ptrs) - 1)
    )
    twin_records, twin_bits = _gpu_twin(hist, records, cut_ptrs, full_mask, scales, p, layout, bounds, monotone)
    np.testing.assert_array_equal(twin_records, cpu_records)
    np.testing.assert_array_equal(twin_bits, cpu_bits)
    return cpu_records


def _layout(n_bins, is_cat):
    n_cats = np.where(is_cat, n_bins, 0).astype(np.int32)
    return CategoricalLayout(np.asarray(is_cat, np.uint8), n_cats, n_words(int(n_cats.max())))


CASES = {
    "partition, default parameters": (_Params(), [40, 7, 300], [1, 0, 1]),
    "one-hot and partition": (_Params(max_cat_to_onehot=8), [3, 5, 9, 70], [1, 1, 1, 1]),
    "max_cat_threshold above the categories": (_Params(max_cat_threshold=500), [33, 64, 5], [1, 1, 0]),
    "max_cat_threshold of 1 and 2": (_Params(max_cat_threshold=2), [20, 12], [1, 1]),
    "min_child_weight, L1 and max_delta_step": (
        _Params(min_child_weight=3.0, alpha=0.7, max_delta_step=0.9, reg_lambda=0.0),
        [50, 8, 17],
        [1, 0, 1],
    ),
    "gamma refusing small gains": (_Params(gamma=4.0), [25, 25], [1, 0]),
    "one-hot only, many categories": (_Params(max_cat_to_onehot=100), [60, 2], [1, 1]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_cuda_algorithm_twin_picks_the_cpu_kernels_splits_and_sets(case):
    p, n_bins, is_cat = CASES[case]
    rng = np.random.default_rng(abs(hash(case)) % 2**32)
    hist, totals = _histograms(rng, 12, n_bins)
    cut_ptrs = np.concatenate([[0], np.cumsum(n_bins)]).astype(np.int64)
    layout = _layout(np.asarray(n_bins), np.asarray(is_cat, bool))
    records = _records(totals)
    records[3, FEATURE], records[3, SPLIT_BIN] = NO_NODE, -1  # as split_nodes leaves a slot below a leaf
    out = _compare(hist, records, cut_ptrs, None, p, layout)
    assert (out[:, FEATURE] >= 0).sum() >= 3, "too few splits for the comparison to mean much"


def test_the_twin_agrees_with_masks_and_monotone_constraints():
    p = _Params()
    n_bins = [30, 6, 80]
    rng = np.random.default_rng(5)
    hist, totals = _histograms(rng, 10, n_bins)
    cut_ptrs = np.concatenate([[0], np.cumsum(n_bins)]).astype(np.int64)
    layout = _layout(np.asarray(n_bins), np.array([1, 0, 1], bool))
    mask = rng.random((10, 3)) < 0.7
    bounds = np.tile([-np.inf, np.inf], (10, 1))
    bounds[::2] = [-0.5, 0.4]
    _compare(hist, _records(totals), cut_ptrs, mask, p, layout, bounds, np.array([1, 0, -1], np.int8))


def test_weights_of_minus_zero_and_zero_tie_and_keep_code_order():
    # categories 0..5: g = 0 with h >= mcw (weight -0.0), h below mcw (weight +0.0), and
    # empty; the set of a forward split must take them in code order
    assert _weight_key(-0.0) == _weight_key(0.0)
    assert _weight_key(-1e-300) < _weight_key(0.0) < _weight_key(1e-300)
    assert _weight_key(-2.0) < _weight_key(-1.0) < _weight_key(math.inf)
    hist = np.array([[[0, 3], [0, 0], [-40, 5], [0, 1], [0, 4], [25, 6], [0, 0], [9, 3]]], np.int64) * 2**20
    totals = hist.sum(axis=1)
    layout = _layout(np.array([8]), np.array([1], bool))
    _compare(hist, _records(totals), np.array([0, 8], np.int64), None, _Params(min_child_weight=2.0), layout)
