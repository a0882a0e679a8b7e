"""Numba kernels of the CPU backend.

Each kernel has a plain NumPy twin in ``_reference.py``; the tests run both on the same
inputs. All kernels release the GIL (``nogil``) so the in-process thread communicator can
run several ranks at once.
"""
from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

_KW = dict(cache=True, nogil=True)

KERNEL_EPS = 1e-6  # XGBoost's kRtEps: a split must gain more than this


@njit(parallel=True, **_KW)
def bin_values(values, cut_values, cut_ptrs, missing_bin, out):
    n, n_features = values.shape
    for r in prange(n):
        for f in range(n_features):
            x = values[r, f]
            if np.isnan(x):
                out[r, f] = missing_bin
                continue
            lo = cut_ptrs[f]
            hi = cut_ptrs[f + 1]
            # first cut > x (searchsorted side='right'), clipped to the last bin
            a = lo
            b = hi
            while a < b:
                mid = (a + b) >> 1
                if cut_values[mid] <= x:
                    a = mid + 1
                else:
                    b = mid
            local = a - lo
            if local > hi - lo - 1:
                local = hi - lo - 1
            out[r, f] = local


@njit(**_KW)
def _accumulate(bins, cut_ptrs, gpair, rows, start, stop, missing_bin, hist, k):
    """hist[k] += the rows ``rows[start:stop]``.

    ``hist`` is passed whole with the node index ``k``: a slice taken inside a ``prange``
    body loses its contiguous layout in Numba and makes every update several times slower.
    """
    n_features = bins.shape[1]
    for p in range(start, stop):
        r = rows[p]
        g = gpair[r, 0]
        h = gpair[r, 1]
        if g == 0 and h == 0:
            continue  # sampled-out rows add nothing
        for f in range(n_features):
            b = bins[r, f]
            if b != missing_bin:
                idx = cut_ptrs[f] + b
                hist[k, idx, 0] += g
                hist[k, idx, 1] += h


@njit(parallel=True, **_KW)
def build_histograms(bins, cut_ptrs, gpair, rows, begins, ends, missing_bin, n_threads, out):
    """out[i] (zeroed, int64 (total_bins, 2)) += gpair sums of node i's rows by bin.

    The rows of all nodes are laid end to end and cut into ``n_threads`` equal slices, one
    per thread, each with its own partial histograms; integer sums make the reduction
    order irrelevant.
    """
    n_nodes = begins.shape[0]
    cum = np.zeros(n_nodes + 1, dtype=np.int64)
    for i in range(n_nodes):
        cum[i + 1] = cum[i] + (ends[i] - begins[i])
    total = cum[n_nodes]
    if n_threads <= 1:
        for i in range(n_nodes):
            _accumulate(bins, cut_ptrs, gpair, rows, begins[i], ends[i], missing_bin, out, i)
        return
    partial = np.zeros((n_threads * n_nodes, out.shape[1], 2), dtype=np.int64)
    for t in prange(n_threads):
        lo = total * t // n_threads
        hi = total * (t + 1) // n_threads
        node = np.searchsorted(cum, lo, side="right") - 1
        pos = lo
        while pos < hi:
            while cum[node + 1] <= pos:
                node += 1
            stop = min(hi, cum[node + 1])
            shift = begins[node] - cum[node]
            _accumulate(bins, cut_ptrs, gpair, rows, pos + shift, stop + shift, missing_bin, partial,
                        t * n_nodes + node)
            pos = stop
    total_bins = out.shape[1]
    for i in prange(n_nodes):
        for t in range(n_threads):
            src = t * n_nodes + i
            for b in range(total_bins):
                out[i, b, 0] += partial[src, b, 0]
                out[i, b, 1] += partial[src, b, 1]


@njit(**_KW)
def _threshold_l1(G, alpha):
    """G shrunk towards zero by alpha (the L1 penalty's soft threshold)."""
    if G > alpha:
        return G - alpha
    if G < -alpha:
        return G + alpha
    return 0.0


@njit(parallel=True, **_KW)
def build_histograms_by_node(bins, cut_ptrs, gpair, rows, begins, ends, missing_bin, task_ptr,
                             task_nodes, out):
    """out[i] += sums of node i, whole nodes per thread (no partial histograms to zero and add).

    Used when there are many more nodes than threads: thread t builds the nodes
    ``task_nodes[task_ptr[t]:task_ptr[t + 1]]`` (a balanced assignment made by the caller).
    """
    for t in prange(task_ptr.shape[0] - 1):
        for k in range(task_ptr[t], task_ptr[t + 1]):
            i = task_nodes[k]
            _accumulate(bins, cut_ptrs, gpair, rows, begins[i], ends[i], missing_bin, out, i)


@njit(**_KW)
def _leaf_weight(G, H, lam, alpha, mcw, mds):
    if H < mcw or H <= 0.0:
        return 0.0
    w = -_threshold_l1(G, alpha) / (H + lam)
    if mds != 0.0 and abs(w) > mds:
        w = mds if w > 0 else -mds
    return w


@njit(**_KW)
def _gain(G, H, lam, alpha, mcw, mds):
    if H < mcw or H <= 0.0:
        return 0.0
    if mds == 0.0:
        t = _threshold_l1(G, alpha)
        return t * t / (H + lam)
    w = _leaf_weight(G, H, lam, alpha, mcw, mds)
    return -(2.0 * G * w + (H + lam) * w * w) - 2.0 * alpha * abs(w)


@njit(parallel=True, **_KW)
def evaluate_splits(hist, totals, cut_ptrs, feature_mask, inv_scale_g, inv_scale_h,
                    lam, alpha, gamma, mcw, mds,
                    out_feature, out_bin, out_default_left, out_gain, out_left):
    """Best split per node: first maximum in (feature, bin, missing-right before missing-left) order."""
    n_nodes = hist.shape[0]
    n_features = cut_ptrs.shape[0] - 1
    for i in prange(n_nodes):
        tg = totals[i, 0]
        th = totals[i, 1]
        parent = _gain(tg * inv_scale_g, th * inv_scale_h, lam, alpha, mcw, mds)
        best = KERNEL_EPS
        best_f = -1
        best_b = -1
        best_dl = False
        best_lg = 0
        best_lh = 0
        for f in range(n_features):
            if not feature_mask[i, f]:
                continue
            lo = cut_ptrs[f]
            hi = cut_ptrs[f + 1]
            fg = 0
            fh = 0
            for b in range(lo, hi):
                fg += hist[i, b, 0]
                fh += hist[i, b, 1]
            mg = tg - fg
            mh = th - fh
            has_missing = mg != 0 or mh != 0
            cg = 0
            ch = 0
            for b in range(lo, hi):
                cg += hist[i, b, 0]
                ch += hist[i, b, 1]
                for d in range(2):
                    if d == 0:
                        lg = cg
                        lh = ch
                    else:
                        if not has_missing:
                            break
                        lg = cg + mg
                        lh = ch + mh
                    rg = tg - lg
                    rh = th - lh
                    if lh <= 0 or rh <= 0:
                        continue
                    GL = lg * inv_scale_g
                    HL = lh * inv_scale_h
                    GR = rg * inv_scale_g
                    HR = rh * inv_scale_h
                    if HL < mcw or HR < mcw:
                        continue
                    gain = _gain(GL, HL, lam, alpha, mcw, mds) + _gain(GR, HR, lam, alpha, mcw, mds) - parent
                    if gain > best:
                        best = gain
                        best_f = f
                        best_b = b - lo
                        best_dl = d == 1
                        best_lg = lg
                        best_lh = lh
        if best_f >= 0 and best < gamma:
            best_f = -1
        out_feature[i] = best_f
        out_bin[i] = best_b
        out_default_left[i] = best_dl
        out_gain[i] = best if best_f >= 0 else 0.0
        out_left[i, 0] = best_lg
        out_left[i, 1] = best_lh


@njit(**_KW)
def leaf_weights(sums, inv_scale_g, inv_scale_h, lam, alpha, mcw, mds, out):
    for i in range(sums.shape[0]):
        out[i] = _leaf_weight(sums[i, 0] * inv_scale_g, sums[i, 1] * inv_scale_h, lam, alpha, mcw, mds)


@njit(parallel=True, **_KW)
def partition(bins_by_feature, rows, begins, ends, feature, split_bin, default_left, missing_bin,
              left_counts):
    """Stable partition of each node's segment of ``rows``: left rows first, order kept.

    ``bins_by_feature`` is the (F, n) column-major copy of the bins: a node reads one
    feature of its rows, so a column keeps those reads close together. The loop is
    branch-free (each row is written to both sides, one counter advances) because the
    left/right outcome is unpredictable.
    """
    for i in prange(begins.shape[0]):
        b0 = begins[i]
        e0 = ends[i]
        f = feature[i]
        sb = split_bin[i]
        dl = default_left[i]
        right = np.empty(e0 - b0, dtype=rows.dtype)
        nl = 0
        nr = 0
        for p in range(b0, e0):
            r = rows[p]
            b = bins_by_feature[f, r]
            go = (b <= sb) if b != missing_bin else dl
            rows[b0 + nl] = r
            right[nr] = r
            nl += go
            nr += 1 - go
        for q in range(nr):
            rows[b0 + nl + q] = right[q]
        left_counts[i] = nl


@njit(parallel=True, **_KW)
def add_leaf_values(margin, rows, begins, ends, values, group):
    for i in prange(begins.shape[0]):
        v = values[i]
        for p in range(begins[i], ends[i]):
            margin[rows[p], group] += v


@njit(**_KW)
def _find_leaf(left, right, feature, split_value, default_left, base, x_row):
    node = 0
    while left[base + node] >= 0:
        k = base + node
        x = x_row[feature[k]]
        if np.isnan(x):
            node = left[k] if default_left[k] else right[k]
        elif x < split_value[k]:
            node = left[k]
        else:
            node = right[k]
    return node


@njit(parallel=True, **_KW)
def predict_margin(left, right, feature, split_value, default_left, value, offsets, groups,
                   values, t0, t1, out):
    """out[r, group(t)] += leaf value of row r in tree t, for t in [t0, t1), in tree order."""
    for r in prange(values.shape[0]):
        x_row = values[r]
        for t in range(t0, t1):
            base = offsets[t]
            node = _find_leaf(left, right, feature, split_value, default_left, base, x_row)
            out[r, groups[t]] += value[base + node]


@njit(parallel=True, **_KW)
def predict_leaf(left, right, feature, split_value, default_left, offsets, values, t0, t1, out):
    for r in prange(values.shape[0]):
        x_row = values[r]
        for t in range(t0, t1):
            out[r, t - t0] = _find_leaf(left, right, feature, split_value, default_left, offsets[t], x_row)


def n_threads() -> int:
    return numba.get_num_threads()
