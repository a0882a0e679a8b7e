"""Plain NumPy versions of the CPU kernels (``dgboost/backend/_cpu_kernels.py``): slow,
obvious, and the oracle the tests hold the Numba ones to."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from dgboost.testing.reference import add_tree_outputs

__all__ = [
    "abs_max_bits",
    "bin_values",
    "build_histograms",
    "evaluate_splits",
    "categorical_candidates",
    "child_bounds",
    "partition",
    "predict_margin",
]


def bin_values(values, cut_values, cut_ptrs, dtype):
    out = np.empty(values.shape, dtype=dtype)
    missing = np.iinfo(dtype).max
    for f in range(values.shape[1]):
        cuts = cut_values[cut_ptrs[f] : cut_ptrs[f + 1]]
        col = values[:, f]
        local = np.minimum(np.searchsorted(cuts, col, side="right"), cuts.size - 1)
        out[:, f] = np.where(np.isnan(col), missing, local)
    return out


def abs_max_bits(grad, hess):
    """uint32 (2,): the float32 bits of max |grad| and max |hess| (0 for none)."""
    return np.array([np.abs(grad).max(initial=0.0), np.abs(hess).max(initial=0.0)], np.float32).view(np.uint32)


def build_histograms(bins, cut_ptrs, gpair, rows, begins, ends):
    total = int(cut_ptrs[-1])
    missing = np.iinfo(bins.dtype).max
    out = np.zeros((len(begins), total, 2), dtype=np.int64)
    for i, (b, e) in enumerate(zip(begins, ends)):
        r = rows[b:e]
        for f in range(bins.shape[1]):
            col = bins[r, f].astype(np.int64)
            ok = col != missing
            idx = cut_ptrs[f] + col[ok]
            np.add.at(out[i, :, 0], idx, gpair[r[ok], 0])
            np.add.at(out[i, :, 1], idx, gpair[r[ok], 1])
    return out


def _weight(G, H, p):
    if H < p.min_child_weight or H <= 0:
        return 0.0
    t = np.sign(G) * max(abs(G) - p.alpha, 0.0)
    w = -t / (H + p.reg_lambda)
    if p.max_delta_step and abs(w) > p.max_delta_step:
        w = np.sign(w) * p.max_delta_step
    return w


def _gain(G, H, p):
    if H < p.min_child_weight or H <= 0:
        return 0.0
    if not p.max_delta_step:
        t = np.sign(G) * max(abs(G) - p.alpha, 0.0)
        return t * t / (H + p.reg_lambda)
    w = _weight(G, H, p)
    return -(2 * G * w + (H + p.reg_lambda) * w * w) - 2 * p.alpha * abs(w)


def _clipped(G, H, bounds, p):
    """The weight clipped into ``bounds`` (lower, upper)."""
    return float(np.clip(_weight(G, H, p), bounds[0], bounds[1]))


def _gain_of_weight(G, H, w, p):
    """-2 x the regularised loss of weight w (XGBoost 3.4's gain with monotone constraints)."""
    if H <= 0:
        return 0.0
    return -(2 * G * w + (H + p.reg_lambda) * w * w) - 2 * p.alpha * abs(w)


def _candidate_gain(GL, HL, GR, HR, parent, p, bounds=None, sign=0):
    """Gain of one candidate split, None when a monotone constraint refuses it."""
    if bounds is None:
        return _gain(GL, HL, p) + _gain(GR, HR, p) - parent
    wl, wr = _clipped(GL, HL, bounds, p), _clipped(GR, HR, bounds, p)
    if (sign > 0 and wl > wr) or (sign < 0 and wl < wr):
        return None
    return _gain_of_weight(GL, HL, wl, p) + _gain_of_weight(GR, HR, wr, p) - parent


def categorical_candidates(h, tg, th, scale_g, scale_h, p):
    """XGBoost's categorical candidates of one feature in scan order (docs/design.md §11.2):
    a list of (left (g, h) int sums, default_left, split_bin, right set (frozenset)).

    ``h`` is the feature's int64 (K, 2) histogram, (tg, th) the node's totals.
    """
    k = h.shape[0]
    out = []
    if k < p.max_cat_to_onehot:
        mg, mh = tg - int(h[:, 0].sum()), th - int(h[:, 1].sum())
        for c in range(k):
            g, hh = int(h[c, 0]), int(h[c, 1])
            out.append(((tg - g, th - hh), True, c, frozenset([c])))
            out.append(((tg - g - mg, th - hh - mh), False, c, frozenset([c])))
        return out
    unfloored = SimpleNamespace(**{**vars(p), "min_child_weight": 0.0})  # XGBoost's CalcWeightCat
    keys = [_weight(int(h[c, 0]) / scale_g, int(h[c, 1]) / scale_h, unfloored) for c in range(k)]
    order = sorted(range(k), key=lambda c: keys[c])  # Python's sort is stable
    n = min(p.max_cat_threshold, k)
    for j in range(n - 1):
        right = order[: j + 1]
        rg, rh = int(h[right, 0].sum()), int(h[right, 1].sum())
        out.append(((tg - rg, th - rh), True, -1, frozenset(right)))
    for j in range(k - 1, k - n, -1):
        left = order[j:]
        out.append(((int(h[left, 0].sum()), int(h[left, 1].sum())), False, -1, frozenset(order[:j])))
    return out


def evaluate_splits(hist, totals, cut_ptrs, feature_mask, scale_g, scale_h, p, bounds=None, monotone=None, is_cat=None):
    """Returns a list of (feature, bin, default_left, gain, (left_g, left_h)) per node.

    With ``monotone`` (int (F,)) and ``bounds`` (float (n, 2)), XGBoost's monotone rule.
    With ``is_cat`` (bool (F,)), categorical features are searched by
    :func:`categorical_candidates` and every entry gets a sixth item, the right-going
    category set (a frozenset; None for numeric splits and no split).
    """
    out = []
    for i in range(hist.shape[0]):
        tg, th = int(totals[i, 0]), int(totals[i, 1])
        node_bounds = None if monotone is None else bounds[i]
        if node_bounds is None:
            parent = _gain(tg / scale_g, th / scale_h, p)
        else:
            G, H = tg / scale_g, th / scale_h
            parent = _gain_of_weight(G, H, _clipped(G, H, node_bounds, p), p)
        best = (-1, -1, False, 0.0, (0, 0))
        best_gain = 1e-6
        for f in range(len(cut_ptrs) - 1):
            if not feature_mask[i, f]:
                continue
            sign = 0 if monotone is None else int(monotone[f])
            h = hist[i, cut_ptrs[f] : cut_ptrs[f + 1]]
            if is_cat is not None and is_cat[f]:
                for (lg, lh), dl, b, right in categorical_candidates(h, tg, th, scale_g, scale_h, p):
                    rg, rh = tg - lg, th - lh
                    if lh <= 0 or rh <= 0 or lh / scale_h < p.min_child_weight or rh / scale_h < p.min_child_weight:
                        continue
                    gain = _candidate_gain(
                        lg / scale_g, lh / scale_h, rg / scale_g, rh / scale_h, parent, p, node_bounds, sign
                    )
                    if gain is not None and gain > best_gain:
                        best_gain = gain
                        best = (f, b, dl, gain, (lg, lh), right)
                continue
            cg, ch = np.cumsum(h[:, 0]), np.cumsum(h[:, 1])
            mg, mh = tg - int(cg[-1]), th - int(ch[-1])
            for b in range(h.shape[0]):
                options = [(int(cg[b]), int(ch[b]), False)]
                if mg or mh:
                    options.append((int(cg[b]) + mg, int(ch[b]) + mh, True))
                for lg, lh, dl in options:
                    rg, rh = tg - lg, th - lh
                    if lh <= 0 or rh <= 0:
                        continue
                    HL, HR = lh / scale_h, rh / scale_h
                    if HL < p.min_child_weight or HR < p.min_child_weight:
                        continue
                    gain = _candidate_gain(lg / scale_g, HL, rg / scale_g, HR, parent, p, node_bounds, sign)
                    if gain is not None and gain > best_gain:
                        best_gain = gain
                        best = (f, b, dl, gain, (lg, lh))
        if best[0] >= 0 and best_gain < p.gamma:
            best = (-1, -1, False, 0.0, (0, 0))
        if is_cat is not None:
            best = best[:5] + ((best[5] if len(best) > 5 else None) if best[0] >= 0 else None,)
        out.append(best)
    return out


def child_bounds(feature, left_sums, totals, bounds, monotone, scale_g, scale_h, p):
    """float (2k, 2): children's bounds, the parent's narrowed to meet at the mean of the
    clipped child weights on a constrained split (left above for sign -1, below for 1)."""
    out = np.repeat(np.asarray(bounds, np.float64), 2, axis=0)
    for j, f in enumerate(feature):
        sign = int(monotone[f]) if f >= 0 else 0
        if not sign:
            continue
        lg, lh = left_sums[j]
        tg, th = totals[j]
        wl = _clipped(lg / scale_g, lh / scale_h, bounds[j], p)
        wr = _clipped((tg - lg) / scale_g, (th - lh) / scale_h, bounds[j], p)
        mid = (wl + wr) / 2
        out[2 * j, 0 if sign < 0 else 1] = mid
        out[2 * j + 1, 1 if sign < 0 else 0] = mid
    return out


def partition(bins_by_feature, rows, begins, ends, feature, split_bin, default_left, right_sets=None):
    """``right_sets``: per node None (numeric) or the set of bins that go right (categorical)."""
    rows = rows.copy()
    missing = np.iinfo(bins_by_feature.dtype).max
    counts = []
    sets = right_sets if right_sets is not None else [None] * len(begins)
    for b, e, f, sb, dl, right in zip(begins, ends, feature, split_bin, default_left, sets):
        seg = rows[b:e]
        col = bins_by_feature[f, seg]
        goes = (col <= sb) if right is None else ~np.isin(col, list(right))
        left = np.where(col == missing, bool(dl), goes)
        rows[b:e] = np.concatenate([seg[left], seg[~left]])
        counts.append(int(left.sum()))
    return rows, np.array(counts, dtype=np.int64)


def predict_margin(ensemble, values, t0, t1, out):
    return add_tree_outputs(ensemble, values, out, t0, t1)
