"""Numba kernels of the CPU backend.

Each kernel has a plain NumPy twin in ``dgboost/testing/kernel_reference.py``; the tests run both on the same
inputs. All kernels release the GIL (``nogil``) so the in-process thread communicator can
run several ranks at once.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

_KW = dict(cache=True, nogil=True)
# the gain arithmetic: a float division by zero gives IEEE's inf or NaN instead of raising
# ZeroDivisionError. None happens (the divisor is a hessian sum, positive where used, plus
# lambda >= 0), but the check and its raise would keep the split search's candidate loops
# from being vectorised.
_KW_GAIN = dict(_KW, error_model="numpy")

KERNEL_EPS = 1e-6  # XGBoost's kRtEps: a split must gain more than this


@njit(parallel=True, **_KW)
def bin_values(values, cut_values, cut_ptrs, origin, scale, bucket_cuts, missing_bin, out):
    """Each value's bin: the first cut above it (``searchsorted(side='right')``), clipped to
    the feature's last bin; ``missing_bin`` for NaN.

    A binary search over a feature's 256 cuts mispredicts half of its eight branches (four
    times this kernel's time); here the value's bucket (``(x - origin[f]) * scale[f]``,
    float64, clamped to ``[0, nb]``) gives the number of cuts below it, and the search steps
    over the bucket's own cuts (most often one or none) from there. The cut before the answer
    is checked, and a value the bucket misplaces (none should: the buckets of the cuts are
    computed the same way) gets the whole binary search, so the bins never depend on it.

    Parameters
    ----------
    values : float32 (n, F)
    cut_values : float32 (total_bins,); cut_ptrs : int64 (F + 1,)
    origin, scale : float64 (F,)
    bucket_cuts : int32 (F, nb + 1)
        ``bucket_cuts[f, k]``: the number of feature ``f``'s cuts whose bucket is below ``k``
        (:func:`dgboost.backend.cpu._bin_buckets`).
    missing_bin : int
    out : uint8 or uint16 (n, F)
    """
    n, n_features = values.shape
    nb = bucket_cuts.shape[1] - 1
    for r in prange(n):
        for f in range(n_features):
            x = values[r, f]
            if np.isnan(x):
                out[r, f] = missing_bin
                continue
            lo = cut_ptrs[f]
            m = cut_ptrs[f + 1] - lo
            t = (np.float64(x) - origin[f]) * scale[f]
            k = 0
            if t > 0.0:  # not NaN (an infinite x times a zero scale)
                k = nb if t >= nb else np.int64(t)
            a = np.int64(bucket_cuts[f, k])
            while a < m and cut_values[lo + a] <= x:
                a += 1
            if a > 0 and not cut_values[lo + a - 1] <= x:
                a = 0
                b = m
                while a < b:
                    mid = (a + b) >> 1
                    if cut_values[lo + mid] <= x:
                        a = mid + 1
                    else:
                        b = mid
            out[r, f] = min(a, m - 1)


@intrinsic
def _prefetch(typingctx, array, row):
    """Ask the cache for ``array[row]`` (1-D: the element; 2-D C array: the first and last
    elements of the row, whose cache lines differ where a row straddles two) ahead of its
    read: LLVM's ``llvm.prefetch`` (read, keep in all levels), which never faults."""
    sig = types.void(array, row)

    def codegen(context, builder, signature, args):
        array_type, row_type = signature.args
        arr = context.make_array(array_type)(context, builder, args[0])
        shape = cgutils.unpack_tuple(builder, arr.shape)
        strides = cgutils.unpack_tuple(builder, arr.strides)
        i = context.cast(builder, args[1], row_type, types.intp)
        zero = context.get_constant(types.intp, 0)
        ends = [[zero] * (array_type.ndim - 1)]
        if array_type.ndim == 2:
            ends.append([builder.sub(shape[1], context.get_constant(types.intp, 1))])
        byte_ptr = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        # the name is mangled by the pointer type (p0i8, or p0 where LLVM's pointers are opaque)
        fn = builder.module.declare_intrinsic(
            "llvm.prefetch", [byte_ptr], ir.FunctionType(ir.VoidType(), [byte_ptr, i32, i32, i32])
        )
        read, keep, data = ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)
        for rest in ends:
            ptr = cgutils.get_item_pointer2(
                context, builder, data=arr.data, shape=shape, strides=strides, layout=array_type.layout, inds=[i, *rest]
            )
            builder.call(fn, [builder.bitcast(ptr, byte_ptr), read, keep, data])
        return context.get_dummy_value()

    return sig, codegen


# Rows ahead whose bins and pairs are prefetched: a node's rows are scattered over the
# matrix below the first levels, and a row's 28 histogram updates leave the processor too
# few instructions ahead to start the next rows' cache misses on its own.
_PREFETCH_ROWS = 10
_U1 = np.uint64(1)
_U2 = np.uint64(2)


@njit(inline="always", **_KW)
def _last_at_most(cum, pos):
    """The last index i with ``cum[i] <= pos`` (``cum`` int64, ascending): the segment that a
    position of segments laid end to end falls in. ``np.searchsorted(cum, pos, "right") - 1``
    by hand: NumPy's searchsorted costs a second of compilation on a cold start."""
    a = 0
    b = cum.shape[0]
    while a < b:
        mid = (a + b) >> 1
        if cum[mid] <= pos:
            a = mid + 1
        else:
            b = mid
    return a - 1


@intrinsic
def _add_pair(typingctx, hist, idx, g, h):
    """``hist[idx] += g; hist[idx + 1] += h`` (int64) as one 16-byte load, add and store: two
    scalar read-modify-writes cost twice the memory operations of the histogram's inner loop,
    and LLVM does not pair them by itself. ``hist``: a 1-D C-contiguous int64 array."""
    if not (isinstance(hist, types.Array) and hist.ndim == 1 and hist.layout == "C" and hist.dtype == types.int64):
        return None  # the address arithmetic below is a contiguous int64 array's
    sig = types.void(hist, idx, g, h)

    def codegen(context, builder, signature, args):
        arr = context.make_array(signature.args[0])(context, builder, args[0])
        i64 = ir.IntType(64)
        pair = ir.VectorType(i64, 2)
        i = context.cast(builder, args[1], signature.args[1], types.intp)
        ptr = builder.bitcast(builder.gep(arr.data, [i]), pair.as_pointer())
        add = ir.Constant(pair, ir.Undefined)
        for k in range(2):
            value = context.cast(builder, args[2 + k], signature.args[2 + k], types.int64)
            add = builder.insert_element(add, value, ir.Constant(ir.IntType(32), k))
        old = builder.load(ptr, align=8)
        builder.store(builder.add(old, add), ptr, align=8)
        return context.get_dummy_value()

    return sig, codegen


@njit(**_KW)
def _accumulate(bins, cut_ptrs, gpair, rows, start, stop, missing_bin, hist, base):
    """hist[base:base + 2 * total_bins] (a flat int64 view: bin b's (g, h) at 2b, 2b + 1)
    += the rows ``rows[start:stop]``.

    Unsigned offsets into a flat histogram: a signed index into a 3-D array costs a
    negative-index fix-up and a multiply by a stride kept in memory for every update. Bins
    of one byte with a missing marker above 255 (a matrix with no missing value) have no
    bin to compare with the marker: their loop leaves the compare out.
    """
    n_features = bins.shape[1]
    offsets = np.empty(n_features, np.uint64)
    for f in range(n_features):
        offsets[f] = np.uint64(base) + _U2 * np.uint64(cut_ptrs[f])
    dense = bins.itemsize == 1 and missing_bin > 255
    ahead = stop - _PREFETCH_ROWS
    for p in range(start, stop):
        if p < ahead:
            later = rows[p + _PREFETCH_ROWS]
            _prefetch(bins, later)
            _prefetch(gpair, later)
        r = np.uint64(rows[p])
        g = np.int64(gpair[r, 0])
        h = np.int64(gpair[r, 1])
        if g == 0 and h == 0:
            continue  # sampled-out rows add nothing
        if dense:
            for f in range(n_features):
                _add_pair(hist, offsets[f] + _U2 * np.uint64(bins[r, f]), g, h)
        else:
            for f in range(n_features):
                b = bins[r, f]
                if b != missing_bin:
                    _add_pair(hist, offsets[f] + _U2 * np.uint64(b), g, h)


@njit(parallel=True, **_KW)
def build_histograms(bins, cut_ptrs, gpair, rows, begins, ends, missing_bin, n_threads, out):
    """out[i] (int64 (total_bins, 2), C-contiguous, zeroed here) = gpair sums of node i's rows by bin.

    The rows of all nodes are laid end to end and cut into ``n_threads`` equal slices, one
    per thread. A node within one slice is summed straight into ``out``; only the nodes a
    slice shares with its neighbours (its first and last, at most) get partial histograms,
    two slots per thread, added into ``out`` afterwards by bin ranges on the threads.
    Integer sums make the order irrelevant.
    """
    n_nodes = begins.shape[0]
    cum = np.zeros(n_nodes + 1, dtype=np.int64)
    for i in range(n_nodes):
        cum[i + 1] = cum[i] + (ends[i] - begins[i])
    total = cum[n_nodes]
    stride = 2 * out.shape[1]
    flat_out = out.reshape(-1)
    n_blocks = 4 * n_threads
    for k in prange(n_blocks):  # zeroed here on the threads, not by one memset in the caller
        flat_out[flat_out.shape[0] * k // n_blocks : flat_out.shape[0] * (k + 1) // n_blocks] = 0
    if n_threads <= 1:
        for i in range(n_nodes):
            _accumulate(bins, cut_ptrs, gpair, rows, begins[i], ends[i], missing_bin, flat_out, i * stride)
        return
    partial = np.empty(2 * n_threads * stride, dtype=np.int64)  # a slot is zeroed by its thread
    slot_node = np.full(2 * n_threads, -1, np.int64)  # the node of each partial slot, -1 unused
    for t in prange(n_threads):
        lo = total * t // n_threads
        hi = total * (t + 1) // n_threads
        node = _last_at_most(cum, lo)
        pos = lo
        while pos < hi:
            while cum[node + 1] <= pos:
                node += 1
            stop = min(hi, cum[node + 1])
            shift = begins[node] - cum[node]
            a, b = pos + shift, stop + shift
            if cum[node] >= lo and cum[node + 1] <= hi:  # the whole node is this slice's
                _accumulate(bins, cut_ptrs, gpair, rows, a, b, missing_bin, flat_out, node * stride)
            else:  # shared: only a slice's first and last nodes can be
                slot = 2 * t if pos == lo else 2 * t + 1
                slot_node[slot] = node
                partial[slot * stride : (slot + 1) * stride] = 0
                _accumulate(bins, cut_ptrs, gpair, rows, a, b, missing_bin, partial, slot * stride)
            pos = stop
    n_blocks = 4 * n_threads
    for k in prange(n_blocks):
        b0 = stride * k // n_blocks
        b1 = stride * (k + 1) // n_blocks
        for slot in range(2 * n_threads):
            node = slot_node[slot]
            if node >= 0:
                dst = node * stride
                src = slot * stride
                for b in range(b0, b1):
                    flat_out[dst + b] += partial[src + b]


@njit(parallel=True, **_KW)
def children_histograms(parent_hist, parent_index, use_index, built, build_left, out):
    """Children's histograms in one pass (twin: ``_records.children_histograms``): the built
    child of parent j in its slot (2j left, 2j + 1 right), its sibling the parent's minus it."""
    k, n_bins = built.shape[0], built.shape[1]
    for j in prange(k):
        jj = np.int64(j)  # a prange index may be unsigned: int64 throughout
        p = parent_index[jj] if use_index else jj
        built_slot = 2 * jj if build_left[jj] != 0 else 2 * jj + 1
        other_slot = 4 * jj + 1 - built_slot
        for b in range(n_bins):
            for c in range(2):
                x = built[jj, b, c]
                out[built_slot, b, c] = x
                out[other_slot, b, c] = parent_hist[p, b, c] - x


@njit(**_KW_GAIN)
def _threshold_l1(G, alpha):
    """G shrunk towards zero by alpha (the L1 penalty's soft threshold)."""
    if G > alpha:
        return G - alpha
    if G < -alpha:
        return G + alpha
    return 0.0


@njit(parallel=True, **_KW)
def build_histograms_by_node(bins, cut_ptrs, gpair, rows, begins, ends, missing_bin, task_ptr, task_nodes, out):
    """out[i] = sums of node i (zeroed here), whole nodes per thread (no partial histograms).

    Used when there are many more nodes than threads: thread t builds the nodes
    ``task_nodes[task_ptr[t]:task_ptr[t + 1]]`` (a balanced assignment made by the caller).
    """
    flat = out.reshape(-1)
    stride = 2 * out.shape[1]
    for t in prange(task_ptr.shape[0] - 1):
        for k in range(task_ptr[t], task_ptr[t + 1]):
            i = task_nodes[k]
            flat[i * stride : (i + 1) * stride] = 0  # zeroed by the thread that fills it
            _accumulate(bins, cut_ptrs, gpair, rows, begins[i], ends[i], missing_bin, flat, i * stride)


@njit(**_KW_GAIN)
def _leaf_weight(G, H, lam, alpha, mcw, mds):
    if H < mcw or H <= 0.0:
        return 0.0
    w = -_threshold_l1(G, alpha) / (H + lam)
    if mds != 0.0 and abs(w) > mds:
        w = mds if w > 0 else -mds
    return w


@njit(**_KW_GAIN)
def _gain(G, H, lam, alpha, mcw, mds):
    if H < mcw or H <= 0.0:
        return 0.0
    if mds == 0.0:
        t = _threshold_l1(G, alpha)
        return t * t / (H + lam)
    w = _leaf_weight(G, H, lam, alpha, mcw, mds)
    return -(2.0 * G * w + (H + lam) * w * w) - 2.0 * alpha * abs(w)


@njit(**_KW_GAIN)
def _bounded_weight(G, H, lo, hi, lam, alpha, mcw, mds):
    """The Newton weight clipped into a node's bounds ``[lo, hi]`` (monotone constraints)."""
    w = _leaf_weight(G, H, lam, alpha, mcw, mds)
    if w < lo:
        return lo
    if w > hi:
        return hi
    return w


@njit(**_KW_GAIN)
def _gain_given_weight(G, H, w, lam, alpha):
    """The gain of weight ``w`` (-2 x the regularised loss), XGBoost 3.4's gain with monotone
    constraints: -(2 G w + (H + lambda) w^2) - 2 alpha |w|; 0 without hessian.

    The L1 term matters where a bound clips w to the other sign of -G (checked against the
    loss changes of XGBoost 3.4.1's trees).
    """
    if H <= 0.0:
        return 0.0
    return -(2.0 * G * w + (H + lam) * w * w) - 2.0 * alpha * abs(w)


@njit(inline="always", **_KW)
def _node_gain(G, H, lo, hi, constrained, lam, alpha, mcw, mds):
    """A node's own gain: with constraints, from its weight clipped into its bounds.

    Inlined, so that a caller's constant ``constrained`` prunes the other branch.
    """
    if constrained:
        return _gain_given_weight(G, H, _bounded_weight(G, H, lo, hi, lam, alpha, mcw, mds), lam, alpha)
    return _gain(G, H, lam, alpha, mcw, mds)


@njit(**_KW_GAIN)
def _constrained_split_gain(GL, HL, GR, HR, lo, hi, sign, lam, alpha, mcw, mds):
    """Children's gain from their weights clipped into the parent's bounds; -inf when the
    weights break the feature's constraint (sign 1: left <= right, -1: left >= right)."""
    wl = _bounded_weight(GL, HL, lo, hi, lam, alpha, mcw, mds)
    wr = _bounded_weight(GR, HR, lo, hi, lam, alpha, mcw, mds)
    if (sign > 0 and wl > wr) or (sign < 0 and wl < wr):
        return -np.inf
    return _gain_given_weight(GL, HL, wl, lam, alpha) + _gain_given_weight(GR, HR, wr, lam, alpha)


@njit(inline="always", **_KW)
def _candidate_gain(lg, lh, tg, th, inv_scale_g, inv_scale_h, lam, alpha, mcw, mds, lo, hi, sign, constrained, parent):
    """The gain of the split with left sums (lg, lh) of a node of totals (tg, th): the
    numeric candidates' validity rule and arithmetic; -inf when the split is not valid.

    Unconstrained, the gain is computed whether the split is valid or not and -inf chosen
    after: a select, not an early return, so that a loop of candidates vectorises. An
    invalid split's arithmetic raises nothing (:func:`_gain` is 0 for a hessian sum that is
    not positive, and divides by no zero otherwise).
    """
    rg = tg - lg
    rh = th - lh
    GL = lg * inv_scale_g
    HL = lh * inv_scale_h
    GR = rg * inv_scale_g
    HR = rh * inv_scale_h
    valid = lh > 0 and rh > 0 and not (HL < mcw or HR < mcw)
    if constrained:
        if not valid:
            return -np.inf
        return _constrained_split_gain(GL, HL, GR, HR, lo, hi, sign, lam, alpha, mcw, mds) - parent
    gain = _gain(GL, HL, lam, alpha, mcw, mds) + _gain(GR, HR, lam, alpha, mcw, mds) - parent
    return gain if valid else -np.inf


@njit(inline="always", **_KW)
def _feature_sums(hist, i, lo_b, hi_b):
    """(g, h): node i's sums over the bins ``lo_b:hi_b`` of one feature (its present rows)."""
    fg = 0
    fh = 0
    for b in range(lo_b, hi_b):
        fg += hist[i, b, 0]
        fh += hist[i, b, 1]
    return fg, fh


@njit(**_KW)
def _categorical_best(
    hist,
    i,
    lo_b,
    hi_b,
    tg,
    th,
    inv_scale_g,
    inv_scale_h,
    lam,
    alpha,
    mcw,
    mds,
    lo,
    hi,
    sign,
    constrained,
    parent,
    max_onehot,
    max_threshold,
    best,
    out_cat_bits,
):
    """XGBoost's categorical split search of one feature (bins ``lo_b:hi_b``) of node i
    (docs/design.md §11.2): one-hot below ``max_onehot`` categories, else the categories
    sorted by their own leaf weight (stable) and scanned forward (missing left) then
    backward (missing right), at most ``max_threshold - 1`` categories added by a scan.

    Returns (found, gain, split_bin, default_left, left_g, left_h): found when a candidate's
    gain beats ``best`` (strictly); its set of right-going categories is then written to
    ``out_cat_bits[i]``.
    """
    k = hi_b - lo_b
    kind = 0  # 0 none, 1 one-hot, 2 forward, 3 backward
    at = 0
    b_dl = False
    b_lg = 0
    b_lh = 0
    order = np.empty(0, np.int64)
    if k < max_onehot:
        fg, fh = _feature_sums(hist, i, lo_b, hi_b)
        mg = tg - fg
        mh = th - fh
        for c in range(k):
            hg = hist[i, lo_b + c, 0]
            hh = hist[i, lo_b + c, 1]
            for d in range(2):
                # d 0: the category alone right, missing left; d 1: missing right with it
                lg = tg - hg if d == 0 else tg - hg - mg
                lh = th - hh if d == 0 else th - hh - mh
                gain = _candidate_gain(
                    lg, lh, tg, th, inv_scale_g, inv_scale_h, lam, alpha, mcw, mds, lo, hi, sign, constrained, parent
                )
                if gain > best:
                    best, kind, at, b_dl, b_lg, b_lh = gain, 1, c, d == 0, lg, lh
    else:
        keys = np.empty(k, np.float64)
        for c in range(k):
            # XGBoost 3.4.1's CalcWeightCat: the Newton weight without min_child_weight's floor
            keys[c] = _leaf_weight(
                hist[i, lo_b + c, 0] * inv_scale_g, hist[i, lo_b + c, 1] * inv_scale_h, lam, alpha, 0.0, mds
            )
        order = np.argsort(keys, kind="mergesort")
        n = min(max_threshold, k)
        cg = 0
        ch = 0
        for j in range(n - 1):  # forward: the first j + 1 categories right, missing left
            cg += hist[i, lo_b + order[j], 0]
            ch += hist[i, lo_b + order[j], 1]
            lg = tg - cg
            lh = th - ch
            gain = _candidate_gain(
                lg, lh, tg, th, inv_scale_g, inv_scale_h, lam, alpha, mcw, mds, lo, hi, sign, constrained, parent
            )
            if gain > best:
                best, kind, at, b_dl, b_lg, b_lh = gain, 2, j, True, lg, lh
        cg = 0
        ch = 0
        for j in range(k - 1, k - n, -1):  # backward: categories j.. left, the rest and missing right
            cg += hist[i, lo_b + order[j], 0]
            ch += hist[i, lo_b + order[j], 1]
            gain = _candidate_gain(
                cg, ch, tg, th, inv_scale_g, inv_scale_h, lam, alpha, mcw, mds, lo, hi, sign, constrained, parent
            )
            if gain > best:
                best, kind, at, b_dl, b_lg, b_lh = gain, 3, j, False, cg, ch
    if kind == 0:
        return False, best, -1, False, 0, 0
    out_cat_bits[i, :] = 0
    if kind == 1:
        out_cat_bits[i, at >> 5] |= np.uint32(1) << np.uint32(at & 31)
        return True, best, at, b_dl, b_lg, b_lh
    count = at + 1 if kind == 2 else at
    for j in range(count):
        c = order[j]
        out_cat_bits[i, c >> 5] |= np.uint32(1) << np.uint32(c & 31)
    return True, best, -1, b_dl, b_lg, b_lh


@njit(**_KW_GAIN)
def _numeric_best(
    hist, i, lo_b, hi_b, tg, th, inv_scale_g, inv_scale_h, lam, alpha, mcw, mds, lo, hi, sign, bounds, parent, best,
    work_left, work_gain,
):  # fmt: skip
    """The best numeric split of one feature (bins ``lo_b:hi_b``) of node i better than
    ``best``: (found, gain, bin, missing left, left g, left h); ``bounds`` None unless constrained.

    The bins' left sums first, then every candidate's gain in a loop of its own, which the
    compiler vectorises (two divisions a gain: the search's cost), then the first maximum
    in (bin, missing right before missing left) order, the order of one loop over the
    candidates. ``work_left`` (int64 (2, >= bins)) and ``work_gain`` (float64 (2, >= bins))
    hold the sums and gains. A function of its own, not inlined: the parallel kernel's
    compilation would grow by a second (its loops go through the parfor passes).
    """
    constrained = bounds is not None  # a constant of each specialisation
    nb = hi_b - lo_b
    cg = 0
    ch = 0
    for j in range(nb):
        cg += hist[i, lo_b + j, 0]
        ch += hist[i, lo_b + j, 1]
        work_left[0, j] = cg
        work_left[1, j] = ch
    mg = tg - cg  # the feature's missing rows: the node's sums less its bins'
    mh = th - ch
    n_dirs = 2 if mg != 0 or mh != 0 else 1  # missing rows right (d 0), then left
    for d in range(n_dirs):
        add_g = mg if d == 1 else 0
        add_h = mh if d == 1 else 0
        for j in range(nb):
            work_gain[d, j] = _candidate_gain(
                work_left[0, j] + add_g, work_left[1, j] + add_h, tg, th, inv_scale_g, inv_scale_h, lam, alpha,
                mcw, mds, lo, hi, sign, constrained, parent,
            )  # fmt: skip
    found = False
    at = 0
    at_d = 0
    for j in range(nb):
        for d in range(n_dirs):
            if work_gain[d, j] > best:  # an invalid split's -inf never is
                best = work_gain[d, j]
                found = True
                at = j
                at_d = d
    if not found:
        return False, best, -1, False, 0, 0
    lg = work_left[0, at] + (mg if at_d == 1 else 0)
    lh = work_left[1, at] + (mh if at_d == 1 else 0)
    return True, best, at, at_d == 1, lg, lh


@njit(parallel=True, **_KW_GAIN)
def evaluate_splits(
    hist,
    totals,
    cut_ptrs,
    feature_mask,
    inv_scale_g,
    inv_scale_h,
    lam,
    alpha,
    gamma,
    mcw,
    mds,
    bounds,
    monotone,
    out_feature,
    out_bin,
    out_default_left,
    out_gain,
    out_left,
    is_cat,
    max_onehot,
    max_threshold,
    out_cat_bits,
):
    """Best split per node: first maximum in (feature, bin, missing-right before missing-left) order.

    With monotone constraints, node i's weights are bounded by ``bounds[i]`` (float64
    (n, 2)) and feature f's sign is ``monotone[f]`` (int8 (F,)); otherwise both are None and
    the gains are the plain closed-form ones (Numba prunes the constrained arithmetic from
    that specialisation: it is not compiled until a model is constrained).
    Unless ``is_cat`` is None, features with ``is_cat[f]`` (uint8 (F,)) are searched as
    categorical (:func:`_categorical_best`, docs/design.md §11.2) and node i's right-going
    category set is written to ``out_cat_bits[i]`` (uint32 (n, words); zeros unless its best
    split is categorical). With ``is_cat`` and ``out_cat_bits`` None (no categorical
    feature), Numba prunes the ``is not None`` branches before typing: the numeric
    specialisation never compiles the categorical search (seconds of a cold start).
    """
    n_nodes = hist.shape[0]
    n_features = cut_ptrs.shape[0] - 1
    constrained = bounds is not None  # a constant of each specialisation
    widest = 0
    for f in range(n_features):
        widest = max(widest, cut_ptrs[f + 1] - cut_ptrs[f])
    # each node's left sums and gains of a feature, by bin (:func:`_numeric_best`)
    work_left = np.empty((n_nodes, 2, widest), np.int64)
    work_gain = np.empty((n_nodes, 2, widest), np.float64)
    for i in prange(n_nodes):
        tg = totals[i, 0]
        th = totals[i, 1]
        lo = -np.inf
        hi = np.inf
        if constrained:
            lo = bounds[i, 0]
            hi = bounds[i, 1]
        parent = _node_gain(tg * inv_scale_g, th * inv_scale_h, lo, hi, constrained, lam, alpha, mcw, mds)
        best = KERNEL_EPS
        best_f = -1
        best_b = -1
        best_dl = False
        best_lg = 0
        best_lh = 0
        best_cat = False
        if is_cat is not None:
            out_cat_bits[i, :] = 0
        for f in range(n_features):
            if not feature_mask[i, f]:
                continue
            sign = monotone[f] if constrained else 0
            lo_b = cut_ptrs[f]
            hi_b = cut_ptrs[f + 1]
            # a plain condition on the argument itself, else Numba cannot prune it
            if is_cat is not None and is_cat[f] != 0:
                found, gain, b, dl, lg, lh = _categorical_best(
                    hist,
                    np.int64(i),  # a prange index may be unsigned: one specialisation, not two
                    lo_b,
                    hi_b,
                    tg,
                    th,
                    inv_scale_g,
                    inv_scale_h,
                    lam,
                    alpha,
                    mcw,
                    mds,
                    lo,
                    hi,
                    sign,
                    constrained,
                    parent,
                    max_onehot,
                    max_threshold,
                    best,
                    out_cat_bits,
                )
                if found:
                    best, best_f, best_b, best_dl, best_lg, best_lh, best_cat = gain, f, b, dl, lg, lh, True
                continue
            found, gain, b, dl, lg, lh = _numeric_best(
                hist, np.int64(i), lo_b, hi_b, tg, th, inv_scale_g, inv_scale_h, lam, alpha, mcw, mds, lo, hi, sign,
                bounds, parent, best, work_left[i], work_gain[i],
            )  # fmt: skip
            if found:
                best, best_f, best_b, best_dl, best_lg, best_lh, best_cat = gain, f, b, dl, lg, lh, False
        if best_f >= 0 and best < gamma:
            best_f = -1
        if is_cat is not None and (best_f < 0 or not best_cat):
            out_cat_bits[i, :] = 0
        out_feature[i] = best_f
        out_bin[i] = best_b
        out_default_left[i] = best_dl
        out_gain[i] = best if best_f >= 0 else 0.0
        out_left[i, 0] = best_lg
        out_left[i, 1] = best_lh


@njit(**_KW)
def _split_bounds(lg, lh, tg, th, lo, hi, sign, inv_scale_g, inv_scale_h, lam, alpha, mcw, mds, out, left, right):
    """Bounds of a split node's children into ``out[left]`` and ``out[right]``: the node's
    own, narrowed on a constrained feature to meet at the mean of the clipped child weights
    (the same weights, bit for bit, that the split evaluation compared)."""
    out[left, 0] = lo
    out[left, 1] = hi
    out[right, 0] = lo
    out[right, 1] = hi
    if sign == 0:
        return
    wl = _bounded_weight(lg * inv_scale_g, lh * inv_scale_h, lo, hi, lam, alpha, mcw, mds)
    wr = _bounded_weight((tg - lg) * inv_scale_g, (th - lh) * inv_scale_h, lo, hi, lam, alpha, mcw, mds)
    mid = (wl + wr) / 2.0
    if sign < 0:
        out[left, 0] = mid
        out[right, 1] = mid
    else:
        out[left, 1] = mid
        out[right, 0] = mid


@njit(**_KW)
def child_bounds(feature, left_sums, totals, bounds, monotone, inv_scale_g, inv_scale_h, lam, alpha, mcw, mds, out):
    """out[2j], out[2j + 1] (float64 (2k, 2)): the bounds of parent j's left and right child.

    A parent that is not split (feature < 0) passes its bounds on (its children are no nodes).
    """
    for j in range(feature.shape[0]):
        f = feature[j]
        sign = monotone[f] if f >= 0 else 0
        _split_bounds(
            left_sums[j, 0],
            left_sums[j, 1],
            totals[j, 0],
            totals[j, 1],
            bounds[j, 0],
            bounds[j, 1],
            sign,
            inv_scale_g,
            inv_scale_h,
            lam,
            alpha,
            mcw,
            mds,
            out,
            2 * j,
            2 * j + 1,
        )


@njit(**_KW)
def tree_bounds(left, right, feature, sums, monotone, inv_scale_g, inv_scale_h, lam, alpha, mcw, mds, out):
    """out[i] (float64 (n, 2)): node i's bounds in a grown tree whose parents precede their
    children (node 0 the root), replaying :func:`child_bounds` split by split."""
    out[0, 0] = -np.inf
    out[0, 1] = np.inf
    for i in range(feature.shape[0]):
        f = feature[i]
        if f < 0:
            continue
        l = left[i]
        _split_bounds(
            sums[l, 0],
            sums[l, 1],
            sums[i, 0],
            sums[i, 1],
            out[i, 0],
            out[i, 1],
            monotone[f],
            inv_scale_g,
            inv_scale_h,
            lam,
            alpha,
            mcw,
            mds,
            out,
            l,
            right[i],
        )


@njit(**_KW)
def leaf_weights(sums, inv_scale_g, inv_scale_h, lam, alpha, mcw, mds, out):
    for i in range(sums.shape[0]):
        out[i] = _leaf_weight(sums[i, 0] * inv_scale_g, sums[i, 1] * inv_scale_h, lam, alpha, mcw, mds)


@njit(**_KW)
def bounded_leaf_weights(sums, bounds, inv_scale_g, inv_scale_h, lam, alpha, mcw, mds, out):
    """Leaf weights clipped into each node's bounds (monotone constraints)."""
    for i in range(sums.shape[0]):
        out[i] = _bounded_weight(
            sums[i, 0] * inv_scale_g, sums[i, 1] * inv_scale_h, bounds[i, 0], bounds[i, 1], lam, alpha, mcw, mds
        )


@njit(**_KW)
def _partition_rows(column, rows, lo, hi, split_bin, default_left, missing_bin, left, left_at, right, right_at, sparse):
    """Rows ``rows[lo:hi]`` going left (``column[r] <= split_bin``, missing ones by
    ``default_left``) to ``left[left_at:]``, the others to ``right[right_at:]``, order kept;
    the number gone left. ``left`` may be ``rows`` with ``left_at <= lo`` (the writes never
    pass the reads). Branch-free: each row is written to both sides and one counter
    advances, because the outcome is unpredictable. With ``sparse`` (a node's rows far
    apart in the column) the column entries of rows a few places ahead are prefetched;
    rows close together are read in order, and the prefetches would only cost."""
    nl = 0
    nr = 0
    if sparse:
        ahead = hi - _PREFETCH_ROWS
        for p in range(lo, hi):
            if p < ahead:
                _prefetch(column, rows[p + _PREFETCH_ROWS])
            r = rows[p]
            b = column[r]
            go = (b <= split_bin) if b != missing_bin else default_left
            left[left_at + nl] = r
            right[right_at + nr] = r
            nl += go
            nr += 1 - go
        return nl
    for p in range(lo, hi):  # the same loop without the prefetches, which cost here
        r = rows[p]
        b = column[r]
        go = (b <= split_bin) if b != missing_bin else default_left
        left[left_at + nl] = r
        right[right_at + nr] = r
        nl += go
        nr += 1 - go
    return nl


@njit(parallel=True, **_KW)
def partition(
    bins_by_feature, rows, begins, ends, feature, split_bin, default_left, missing_bin, n_slices, scratch, left_counts
):
    """Stable partition of each node's segment of ``rows``: left rows first, order kept.

    ``bins_by_feature`` is the (F, n) column-major copy of the bins: a node reads one
    feature of its rows, so a column keeps those reads close together. The rows of all
    nodes are laid end to end and cut into ``n_slices`` equal slices, one per thread (a
    level's nodes differ widely in size: whole nodes per thread left most threads idle). A
    node within one slice is partitioned in place, its right rows through an array of its
    own (:func:`_partition_rows`; a fresh array, which the compiler knows aliases nothing,
    made the loop 20% faster than a shared buffer). A node cut by a slice boundary is
    partitioned piece by piece into ``scratch`` (same dtype as ``rows``, at least twice the
    nodes' rows, kept by the caller: writing fresh pages costs a fault each), left rows in
    the first half and right rows in the second, then copied into place at each piece's
    offsets within the node's left and right parts.
    """
    n_nodes = begins.shape[0]
    cum = np.zeros(n_nodes + 1, np.int64)
    for i in range(n_nodes):
        cum[i + 1] = cum[i] + (ends[i] - begins[i])
        left_counts[i] = 0  # nodes without rows are in no slice
    total = cum[n_nodes]
    # a slice's first and last nodes may be cut: two piece slots per slice
    piece_node = np.full(2 * n_slices, -1, np.int64)
    piece_lo = np.zeros(2 * n_slices, np.int64)  # the piece's place in the concatenation
    piece_hi = np.zeros(2 * n_slices, np.int64)
    piece_left = np.zeros(2 * n_slices, np.int64)
    for t in prange(n_slices):
        lo = total * t // n_slices
        hi = total * (t + 1) // n_slices
        node = _last_at_most(cum, lo)
        pos = lo
        while pos < hi:
            while cum[node + 1] <= pos:
                node += 1
            stop = min(hi, cum[node + 1])
            a = begins[node] + (pos - cum[node])
            b = a + (stop - pos)
            column = bins_by_feature[feature[node]]
            sb = split_bin[node]
            dl = default_left[node]
            # a node of under 1/32 of the rows: its next row is a cache line or more away on average
            sparse = (ends[node] - begins[node]) * 32 < column.shape[0]
            if cum[node] >= lo and cum[node + 1] <= hi:  # the whole node is this slice's
                right = np.empty(b - a, rows.dtype)
                nl = _partition_rows(column, rows, a, b, sb, dl, missing_bin, rows, a, right, 0, sparse)
                for q in range(b - a - nl):
                    rows[a + nl + q] = right[q]
                left_counts[node] = nl
            else:  # cut: this slice's piece into scratch
                slot = 2 * t if pos == lo else 2 * t + 1
                at = total + pos
                nl = _partition_rows(column, rows, a, b, sb, dl, missing_bin, scratch, pos, scratch, at, sparse)
                piece_node[slot] = node
                piece_lo[slot] = pos
                piece_hi[slot] = stop
                piece_left[slot] = nl
            pos = stop
    for s in range(2 * n_slices):
        if piece_node[s] >= 0:
            left_counts[piece_node[s]] += piece_left[s]
    for s in prange(2 * n_slices):
        i = piece_node[s]
        if i >= 0:
            before_left = 0  # left rows of the node's earlier pieces
            for u in range(2 * n_slices):
                if piece_node[u] == i and piece_lo[u] < piece_lo[s]:
                    before_left += piece_left[u]
            pos = piece_lo[s]
            count = piece_hi[s] - pos
            nl = piece_left[s]
            dst = begins[i] + before_left
            for q in range(nl):
                rows[dst + q] = scratch[pos + q]
            dst = begins[i] + left_counts[i] + (pos - cum[i]) - before_left
            for q in range(count - nl):
                rows[dst + q] = scratch[total + pos + q]


@njit(parallel=True, **_KW)
def partition_categorical(
    bins_by_feature, rows, begins, ends, feature, default_left, missing_bin, is_cat, split_bin, cat_bits, left_counts
):
    """:func:`partition` where some nodes split on categorical features: on node i of a
    categorical feature a bin goes right iff its bit is set in ``cat_bits[i]`` (uint32
    (k, words)); a missing bin follows ``default_left``; numeric nodes as :func:`partition`."""
    for i in prange(begins.shape[0]):
        b0 = begins[i]
        e0 = ends[i]
        f = feature[i]
        sb = split_bin[i]
        dl = default_left[i]
        cat = is_cat[f] != 0
        words = cat_bits.shape[1]
        right = np.empty(e0 - b0, dtype=rows.dtype)
        nl = 0
        nr = 0
        for p in range(b0, e0):
            r = rows[p]
            b = bins_by_feature[f, r]
            if b == missing_bin:
                go = dl
            elif cat:
                w = np.int64(b) >> 5
                go = w >= words or ((cat_bits[i, w] >> np.uint32(b & 31)) & np.uint32(1)) == 0
            else:
                go = b <= sb
            rows[b0 + nl] = r
            right[nr] = r
            nl += go
            nr += 1 - go
        for q in range(nr):
            rows[b0 + nl + q] = right[q]
        left_counts[i] = nl


@njit(**_KW)
def _add_value(margin, rows, lo, hi, v, group):
    """margin[rows[lo:hi], group] += v."""
    for p in range(lo, hi):
        margin[rows[p], group] += v


@njit(inline="always", **_KW)
def _first_at_least(rows, a, b, x):
    """The first position p in ``[a, b)`` with ``rows[p] >= x`` (``b`` if none), by binary
    search: exact where ``rows[a:b]`` ascends, and never decreasing in ``x`` whatever the
    order (a larger x turns right wherever a smaller one does)."""
    while a < b:
        mid = (a + b) >> 1
        if rows[mid] < x:
            a = mid + 1
        else:
            b = mid
    return a


@njit(parallel=True, **_KW)
def add_leaf_values(margin, rows, begins, ends, values, group, n_slices):
    """margin[rows[begins[i]:ends[i]], group] += values[i] for each leaf i (their rows
    distinct: one addition per row, in any order).

    Slice t of ``n_slices`` adds the rows in ``[n * t / n_slices, n * (t + 1) / n_slices)``
    of every leaf: a leaf's rows ascend (the stable partition keeps the root's order), so
    those are a run of its segment, found by binary search, and each thread writes margins
    of its own. Cutting the leaves' rows laid end to end instead had every thread write
    rows of all the matrix: neighbouring rows of other leaves, in the same cache lines, on
    other threads (twice the time on two threads, no gain from more). Rows not ascending
    are added all the same: the runs' ends are the same searches, never decreasing, from
    the segment's begin to its end, so they cut each segment into runs that cover it.
    """
    n = margin.shape[0]
    for t in prange(n_slices):
        tt = np.int64(t)  # a prange index may be unsigned: int64 throughout
        for leaf in range(begins.shape[0]):
            b0 = begins[leaf]
            e0 = ends[leaf]
            lo = b0 if tt == 0 else _first_at_least(rows, b0, e0, n * tt // n_slices)
            hi = e0 if tt == n_slices - 1 else _first_at_least(rows, b0, e0, n * (tt + 1) // n_slices)
            _add_value(margin, rows, lo, hi, values[leaf], group)


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
def predict_margin(left, right, feature, split_value, default_left, value, offsets, groups, values, t0, t1, out):
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


@njit(**_KW)
def _goes_left_categorical(x, begin, words, cat_bits):
    """XGBoost's ``common::Decision`` for a non-missing ``x`` at a categorical node whose set
    is ``cat_bits[begin:begin + words]``: left unless x is a valid category in the set."""
    if x < 0.0 or x >= 16777216.0:  # XGBoost's InvalidCat (inf included)
        return True
    c = np.int64(x)  # truncation, as XGBoost's cast
    w = c >> 5
    if w >= words:
        return True
    return ((cat_bits[begin + w] >> np.uint32(c & 31)) & np.uint32(1)) == 0


@njit(**_KW)
def _find_leaf_cat(
    left, right, feature, split_value, default_left, split_type, cat_begin, cat_words, cat_bits, base, x_row
):
    """:func:`_find_leaf` with categorical nodes (``split_type`` 1) decided by their sets."""
    node = 0
    while left[base + node] >= 0:
        k = base + node
        x = x_row[feature[k]]
        if np.isnan(x):
            node = left[k] if default_left[k] else right[k]
        elif split_type[k] == 1:
            node = left[k] if _goes_left_categorical(x, cat_begin[k], cat_words[k], cat_bits) else right[k]
        elif x < split_value[k]:
            node = left[k]
        else:
            node = right[k]
    return node


@njit(parallel=True, **_KW)
def predict_margin_cat(
    left,
    right,
    feature,
    split_value,
    default_left,
    value,
    split_type,
    cat_begin,
    cat_words,
    cat_bits,
    offsets,
    groups,
    values,
    t0,
    t1,
    out,
):
    """:func:`predict_margin` of an ensemble with categorical splits."""
    for r in prange(values.shape[0]):
        x_row = values[r]
        for t in range(t0, t1):
            base = offsets[t]
            node = _find_leaf_cat(
                left, right, feature, split_value, default_left, split_type, cat_begin, cat_words, cat_bits, base, x_row
            )
            out[r, groups[t]] += value[base + node]


@njit(parallel=True, **_KW)
def predict_leaf_cat(
    left,
    right,
    feature,
    split_value,
    default_left,
    split_type,
    cat_begin,
    cat_words,
    cat_bits,
    offsets,
    values,
    t0,
    t1,
    out,
):
    """:func:`predict_leaf` of an ensemble with categorical splits."""
    for r in prange(values.shape[0]):
        x_row = values[r]
        for t in range(t0, t1):
            out[r, t - t0] = _find_leaf_cat(
                left,
                right,
                feature,
                split_value,
                default_left,
                split_type,
                cat_begin,
                cat_words,
                cat_bits,
                offsets[t],
                x_row,
            )


def n_threads() -> int:
    return numba.get_num_threads()


_HESS_EPS = 1e-16  # XGBoost's floor for hessians (dgboost.objective's _EPS)


@njit(parallel=True, **_KW)
def logistic_gradient(margin, label, weight, scale_pos_weight, out_g, out_h):
    """Logistic-loss gradient and hessian per row, computed in float64, stored as float32
    (``weight`` empty: unit weights)."""
    for i in prange(margin.shape[0]):
        p = 0.5 * (1.0 + math.tanh(0.5 * np.float64(margin[i])))
        y = np.float64(label[i])
        w = 1.0 if weight.shape[0] == 0 else np.float64(weight[i])
        if y == 1.0:
            w *= scale_pos_weight
        out_g[i] = (p - y) * w
        out_h[i] = max(p * (1.0 - p), _HESS_EPS) * w


_ABS_BITS = np.uint32(0x7FFFFFFF)


@njit(**_KW)
def abs_max_bits(grad_bits, hess_bits, out):
    """out (uint32 (2,)) = the float32 bits of max |grad| and max |hess| (0 for none), from
    the arrays' bits (uint32 (n,) views of float32): a value's bits without the sign bit
    order as its magnitude, NaN above inf, so the maxima are integer maxima, which the
    compiler vectorises (a float maximum must keep NaN, which it does not vectorise), in one
    pass with no temporaries. On one thread: a parallel loop costs more to compile than the
    sub-millisecond pass it would save."""
    g = np.uint32(0)
    for i in range(grad_bits.shape[0]):
        g = max(g, grad_bits[i] & _ABS_BITS)
    h = np.uint32(0)
    for i in range(hess_bits.shape[0]):
        h = max(h, hess_bits[i] & _ABS_BITS)
    out[0] = g
    out[1] = h


@njit(parallel=True, **_KW)
def quantise(grad, hess, scale_g, scale_h, keep, out):
    """out[i] (int32 (n, 2)) = rint(grad[i] * scale_g), rint(hess[i] * scale_h) in float64;
    (0, 0) where ``keep[i]`` is False (``keep`` bool (n,), or empty: every row kept)."""
    use_keep = keep.shape[0] != 0
    for i in prange(grad.shape[0]):
        if use_keep and not keep[i]:
            out[i, 0] = 0
            out[i, 1] = 0
        else:
            out[i, 0] = np.int32(np.rint(np.float64(grad[i]) * scale_g))
            out[i, 1] = np.int32(np.rint(np.float64(hess[i]) * scale_h))


@njit(parallel=True, **_KW)
def gpair_totals(gpair, out):
    """out (int64 (2,)) = the column sums of ``gpair`` (int32 (n, 2)), in int64 (exact in
    any order)."""
    g = np.int64(0)
    h = np.int64(0)
    for i in prange(gpair.shape[0]):
        g += gpair[i, 0]
        h += gpair[i, 1]
    out[0] = g
    out[1] = h
