"""The oracle of tests/cpu/test_lambdarank_parallel.py: dgboost/_lambdarank.py as it was
before groups ran in parallel (three ``np.lexsort`` over all rows in NumPy, then one serial
loop over the groups), copied verbatim but for this docstring and Numba's on-disk cache.
Do not "improve" it: it defines the expected bits, compiled and as plain Python.

LambdaMART gradients (``rank:pairwise``, ``rank:ndcg``): the per-group Numba kernel.

Pairs are all pairs within the top-k (``topk``) or hashed draws (``mean``) that depend only
on (seed, iteration, global group index, document, draw), never on global RNG state.
"""

from __future__ import annotations

import math

import numpy as np

try:  # numba is optional: without it the ranking loops run as plain Python
    import numba
except ImportError:  # pragma: no cover - exercised only where numba is missing
    numba = None

__all__ = ["serial_lambdarank_gradient"]


# ------------------------------------------------------------------------ LambdaMART
def _jit(fn):
    return numba.njit(nogil=True)(fn) if numba is not None else fn


@_jit
def _mix64(x):
    """splitmix64 finaliser (uint64 in, uint64 out): the pair sampler's hash."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@_jit
def _pair_lambda(rh, rl, rank, pred, yr, discount, inv_idcg, ndcg, exp_gain, score_norm, spread, gg, hh):
    """Add one pair's lambda (XGBoost's LambdaGrad) to gg/hh, indexed by rank position;
    return its contribution ``-2 * lambda`` to the group's normaliser."""
    if yr[rh] == yr[rl]:
        return 0.0
    if yr[rh] < yr[rl]:
        rh, rl = rl, rh
    diff = pred[rank[rh]] - pred[rank[rl]]  # float32 arithmetic, as XGBoost
    delta = 1.0
    if ndcg:
        gh = 2.0 ** yr[rh] - 1.0 if exp_gain else float(yr[rh])
        gl = 2.0 ** yr[rl] - 1.0 if exp_gain else float(yr[rl])
        delta = abs((gh - gl) * (discount[rh] - discount[rl]) * inv_idcg)
    if score_norm and spread:
        delta /= abs(float(diff)) + 0.01
    sig = 1.0 / (1.0 + math.exp(-float(diff))) if diff > -700.0 else 0.0
    lam = np.float32((sig - 1.0) * delta)  # XGBoost stores each pair's lambda as float32
    hes = np.float32(max(sig * (1.0 - sig), 1e-16) * delta * 2.0)
    gg[rh] += lam
    hh[rh] += hes
    gg[rl] -= lam
    hh[rl] += hes
    return -2.0 * float(lam)


@_jit
def _lambdarank_kernel(
    pred,
    label,
    gptr,
    order,
    ideal,
    by_label,
    gweight,
    discount,
    gg,
    hh,
    topk,
    num_pair,
    ndcg,
    exp_gain,
    score_norm,
    normalize,
    seed,
    iteration,
    group_offset,
    out_g,
    out_h,
):
    """Per-group pair loops. ``order`` lists each group's rows by descending prediction,
    ``ideal`` each group's labels in descending order and ``by_label`` the positions of
    ``order`` by descending label (all stable, sorted by the caller in NumPy, which also keeps
    the compiled code small); ``gg``/``hh`` are scratch space of the largest group's size."""
    for g in range(len(gptr) - 1):
        b, cnt = gptr[g], gptr[g + 1] - gptr[g]
        if cnt < 2:
            continue
        rank = order[b : b + cnt]
        yr = label[rank]
        inv_idcg = 0.0
        if ndcg:
            idcg = 0.0
            for i in range(min(cnt, num_pair) if topk else cnt):
                idcg += discount[i] * (2.0 ** ideal[b + i] - 1.0 if exp_gain else ideal[b + i])
            inv_idcg = 1.0 / idcg if idcg != 0.0 else 0.0
        spread = pred[rank[0]] != pred[rank[cnt - 1]]
        for i in range(cnt):
            gg[i] = 0.0
            hh[i] = 0.0
        sum_lambda = 0.0
        if topk:
            for i in range(min(cnt, num_pair)):
                for j in range(i + 1, cnt):
                    sum_lambda += _pair_lambda(
                        i, j, rank, pred, yr, discount, inv_idcg, ndcg, exp_gain, score_norm, spread, gg, hh
                    )
        else:
            # XGBoost's "mean" sampler: buckets of equal label; each document draws partners
            # from outside its bucket. The draw is a hash, so it is reproducible anywhere.
            key = _mix64(_mix64(_mix64(np.uint64(seed)) ^ np.uint64(iteration)) ^ np.uint64(group_offset + g))
            i = 0
            while i < cnt:
                j = i + 1
                while j < cnt and yr[by_label[b + i] - b] == yr[by_label[b + j] - b]:
                    j += 1
                n_out = i + cnt - j
                if n_out > 0:
                    for s in range(num_pair):
                        for d in range(i, j):
                            h = _mix64(key ^ (np.uint64(d) * np.uint64(num_pair) + np.uint64(s)))
                            r = np.int64(h % np.uint64(n_out))
                            if r >= i:
                                r = r - i + j
                            sum_lambda += _pair_lambda(
                                by_label[b + d] - b,
                                by_label[b + r] - b,
                                rank,
                                pred,
                                yr,
                                discount,
                                inv_idcg,
                                ndcg,
                                exp_gain,
                                score_norm,
                                spread,
                                gg,
                                hh,
                            )
                i = j
        norm = 1.0
        if normalize:
            if not topk:
                norm = 1.0 / num_pair
            elif sum_lambda > 0.0:
                norm = math.log2(1.0 + sum_lambda) / sum_lambda  # LightGBM-style, as XGBoost topk
        w = gweight[g] * norm
        for r in range(cnt):
            out_g[rank[r]] = gg[r] * w
            out_h[rank[r]] = hh[r] * w


def serial_lambdarank_gradient(
    pred,
    label,
    group_ptr,
    group_weight,
    *,
    topk: bool,
    num_pair: int,
    ndcg: bool,
    exp_gain: bool = True,
    score_normalization: bool = True,
    normalization: bool = True,
    seed: int = 0,
    iteration: int = 0,
    group_offset: int = 0,
):
    """LambdaMART gradients of every query group (XGBoost 3.x ``rank:pairwise``/``rank:ndcg``).

    Parameters
    ----------
    pred, label : ndarray of float32, shape (n,)
    group_ptr : ndarray of int64, shape (n_groups + 1,)
    group_weight : ndarray of float64, shape (n_groups,)
        Final multiplier of each group (user weight times XGBoost's weight normalisation).
    topk, num_pair : pair method ``topk`` with truncation ``num_pair``, or ``mean`` with
        ``num_pair`` sampled partners per document.
    ndcg, exp_gain : delta-NDCG weighting (gain ``2^rel - 1`` or ``rel``); else RankNet.
    score_normalization : divide each delta by ``|s_i - s_j| + 0.01``.
    normalization : scale a group by ``log2(1 + S) / S`` (topk) or ``1 / num_pair`` (mean).
    seed, iteration, group_offset : key of the hash that samples pairs (``mean`` only).

    Returns
    -------
    grad, hess : ndarray of float32, shape (n,)
    """
    pred = np.ascontiguousarray(pred, dtype=np.float32)
    label = np.ascontiguousarray(label, dtype=np.float32)
    gptr = np.ascontiguousarray(group_ptr, dtype=np.int64)
    n = len(pred)
    # stable sorts within groups, done once in NumPy (keeps the compiled loop small)
    gid = np.repeat(np.arange(len(gptr) - 1), np.diff(gptr))
    order = np.lexsort((-pred, gid))
    ideal = label[np.lexsort((-label, gid))]
    by_label = np.lexsort((-label[order], gid))
    max_n = int(np.diff(gptr).max(initial=1))
    discount = 1.0 / np.log2(np.arange(max_n) + 2.0)
    out_g, out_h = np.zeros(n), np.zeros(n)
    with np.errstate(over="ignore"):  # uint64 hashing wraps on purpose (plain-Python fallback)
        _lambdarank_kernel(
            pred,
            label,
            gptr,
            order,
            ideal,
            by_label,
            np.ascontiguousarray(group_weight, dtype=np.float64),
            discount,
            np.zeros(max_n),
            np.zeros(max_n),
            bool(topk),
            int(num_pair),
            bool(ndcg),
            bool(exp_gain),
            bool(score_normalization),
            bool(normalization),
            int(seed) & 0x7FFFFFFFFFFFFFFF,
            int(iteration),
            int(group_offset),
            out_g,
            out_h,
        )
    return out_g.astype(np.float32), out_h.astype(np.float32)
