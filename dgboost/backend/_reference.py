"""Plain NumPy versions of the CPU kernels: slow, obvious, and the oracle for the Numba ones."""
from __future__ import annotations

import numpy as np

from ..testing.reference import add_tree_outputs

__all__ = ["bin_values", "build_histograms", "evaluate_splits", "partition", "predict_margin"]


def bin_values(values, cut_values, cut_ptrs, dtype):
    out = np.empty(values.shape, dtype=dtype)
    missing = np.iinfo(dtype).max
    for f in range(values.shape[1]):
        cuts = cut_values[cut_ptrs[f]:cut_ptrs[f + 1]]
        col = values[:, f]
        local = np.minimum(np.searchsorted(cuts, col, side="right"), cuts.size - 1)
        out[:, f] = np.where(np.isnan(col), missing, local)
    return out


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


def evaluate_splits(hist, totals, cut_ptrs, feature_mask, scale_g, scale_h, p):
    """Returns a list of (feature, bin, default_left, gain, (left_g, left_h)) per node."""
    out = []
    for i in range(hist.shape[0]):
        tg, th = int(totals[i, 0]), int(totals[i, 1])
        parent = _gain(tg / scale_g, th / scale_h, p)
        best = (-1, -1, False, 0.0, (0, 0))
        best_gain = 1e-6
        for f in range(len(cut_ptrs) - 1):
            if not feature_mask[i, f]:
                continue
            h = hist[i, cut_ptrs[f]:cut_ptrs[f + 1]]
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
                    gain = _gain(lg / scale_g, HL, p) + _gain(rg / scale_g, HR, p) - parent
                    if gain > best_gain:
                        best_gain = gain
                        best = (f, b, dl, gain, (lg, lh))
        if best[0] >= 0 and best_gain < p.gamma:
            best = (-1, -1, False, 0.0, (0, 0))
        out.append(best)
    return out


def partition(bins_by_feature, rows, begins, ends, feature, split_bin, default_left):
    rows = rows.copy()
    missing = np.iinfo(bins_by_feature.dtype).max
    counts = []
    for b, e, f, sb, dl in zip(begins, ends, feature, split_bin, default_left):
        seg = rows[b:e]
        col = bins_by_feature[f, seg]
        left = np.where(col == missing, bool(dl), col <= sb)
        rows[b:e] = np.concatenate([seg[left], seg[~left]])
        counts.append(int(left.sum()))
    return rows, np.array(counts, dtype=np.int64)


def predict_margin(ensemble, values, t0, t1, out):
    return add_tree_outputs(ensemble, values, out, t0, t1)
