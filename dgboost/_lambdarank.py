"""LambdaMART gradients (``rank:pairwise``, ``rank:ndcg``): the per-group Numba kernel.

Pairs are all pairs within the top-k (``topk``) or hashed draws (``mean``) that depend only
on (seed, iteration, global group index, document, draw), never on global RNG state.

Query groups run in parallel (a ``prange`` over chunks of groups of about equal work, each
chunk with its own scratch space); every group sorts its own rows and writes only its own
rows, with its sums taken in the same order as a serial loop, so the gradients are the same
bits for any thread count.
"""

from __future__ import annotations

import math

import numpy as np

try:  # numba is optional: without it the ranking loops run as plain Python
    import numba
except ImportError:  # pragma: no cover - exercised only where numba is missing
    numba = None

__all__ = ["lambdarank_gradient"]

_CHUNKS_PER_THREAD = 4  # prange hands each thread a block of chunks: a few each evens out the cost model's misses


# ------------------------------------------------------------------------ LambdaMART
def _jit(fn):
    return numba.njit(cache=True, nogil=True)(fn) if numba is not None else fn


def _pjit(fn):
    return numba.njit(parallel=True, cache=True, nogil=True)(fn) if numba is not None else fn


_prange = numba.prange if numba is not None else range


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
def _argsort_desc(key, out, tmp):
    """Stable descending argsort of ``key`` into ``out[:len(key)]`` (``tmp``: scratch as long).

    The positions ``np.lexsort((-key, ...))`` gives within a group: equal keys (``0.0`` and
    ``-0.0`` are equal) keep their index order and NaNs come last, as NumPy sorts NaN after
    every number. Insertion sort on runs of 16, then bottom-up merges that take the left run
    on ties (both stable, so any stable sort of the same order gives the same positions).
    """
    n = len(key)
    for i in range(n):
        out[i] = i
    run = 16
    for s in range(0, n, run):
        e = min(s + run, n)
        for i in range(s + 1, e):
            v = out[i]
            kv = key[v]
            j = i
            while j > s and _before(kv, key[out[j - 1]]):
                out[j] = out[j - 1]
                j -= 1
            out[j] = v
    src, dst = out, tmp
    in_out = True
    width = run
    while width < n:
        for lo in range(0, n, 2 * width):
            mid, hi = min(lo + width, n), min(lo + 2 * width, n)
            i, j, k = lo, mid, lo
            while i < mid and j < hi:
                if _before(key[src[j]], key[src[i]]):
                    dst[k] = src[j]
                    j += 1
                else:
                    dst[k] = src[i]
                    i += 1
                k += 1
            while i < mid:
                dst[k] = src[i]
                i += 1
                k += 1
            while j < hi:
                dst[k] = src[j]
                j += 1
                k += 1
        src, dst = dst, src
        in_out = not in_out
        width *= 2
    if not in_out:
        for i in range(n):
            out[i] = src[i]


@_jit
def _before(a, b):
    """Whether ``a`` sorts strictly before ``b`` in descending order, NaN last: ``-a < -b``
    in NumPy's sort order (negation keeps NaN a NaN and maps -0.0 == 0.0 to equals)."""
    return a > b or (b != b and a == a)


@_jit
def _group_gradient(
    g, b, cnt, pred, label, gweight, discount, topk, num_pair, ndcg, exp_gain, score_norm, normalize, key,
    rank, yr, by_label, tmp, gg, hh, out_g, out_h,
):  # fmt: skip
    """Gradients of query group ``g`` (rows ``b:b + cnt``, ``cnt >= 2``) into ``out_g``/``out_h``.

    ``rank`` (int64) becomes the group's rows by descending prediction, ``yr`` (float32)
    their labels, ``by_label`` (int64) the positions of ``rank`` by descending label; ``tmp``
    is sort scratch and ``gg``/``hh`` (float64) the per-position sums: all at least ``cnt``
    long, owned by the calling thread. ``key`` (uint64) keys the ``mean`` sampler's hash.
    """
    _argsort_desc(pred[b : b + cnt], rank, tmp)
    for i in range(cnt):
        rank[i] += b
        yr[i] = label[rank[i]]
    inv_idcg = 0.0
    if ndcg:
        _argsort_desc(label[b : b + cnt], by_label, tmp)  # the ideal ordering of the labels
        idcg = 0.0
        for i in range(min(cnt, num_pair) if topk else cnt):
            y = label[b + by_label[i]]
            idcg += discount[i] * (2.0**y - 1.0 if exp_gain else y)
        inv_idcg = 1.0 / idcg if idcg != 0.0 else 0.0
    spread = pred[rank[0]] != pred[rank[cnt - 1]]
    for i in range(cnt):
        gg[i] = 0.0
        hh[i] = 0.0
    sum_lambda = 0.0  # serial within the group, in pair order
    if topk:
        for i in range(min(cnt, num_pair)):
            for j in range(i + 1, cnt):
                sum_lambda += _pair_lambda(
                    i, j, rank, pred, yr, discount, inv_idcg, ndcg, exp_gain, score_norm, spread, gg, hh
                )
    else:
        # XGBoost's "mean" sampler: buckets of equal label; each document draws partners
        # from outside its bucket. The draw is a hash, so it is reproducible anywhere.
        _argsort_desc(yr[:cnt], by_label, tmp)
        i = 0
        while i < cnt:
            j = i + 1
            while j < cnt and yr[by_label[i]] == yr[by_label[j]]:
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
                            by_label[d], by_label[r], rank, pred, yr, discount, inv_idcg, ndcg, exp_gain,
                            score_norm, spread, gg, hh,
                        )  # fmt: skip
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


@_pjit
def _lambdarank_kernel(
    pred, label, gptr, chunk_ptr, gweight, discount, topk, num_pair, ndcg, exp_gain, score_norm, normalize,
    seed, iteration, group_offset, out_g, out_h,
):  # fmt: skip
    """Per-group pair loops, chunks of groups ``chunk_ptr[c]:chunk_ptr[c + 1]`` in parallel.

    Each chunk allocates scratch for its largest group and runs its groups in order; a group
    depends on nothing but its own rows, so the chunking never changes a result.
    """
    # the hash key of group g is mix(mix(mix(seed) ^ iteration) ^ (group_offset + g)); the
    # offset is folded in per group (uint64 wrap-around, as the serial loop)
    key0 = _mix64(_mix64(np.uint64(seed)) ^ np.uint64(iteration))
    for c in _prange(len(chunk_ptr) - 1):
        g0, g1 = chunk_ptr[c], chunk_ptr[c + 1]
        m = 1
        for g in range(g0, g1):
            m = max(m, gptr[g + 1] - gptr[g])
        rank = np.empty(m, np.int64)
        by_label = np.empty(m, np.int64)
        tmp = np.empty(m, np.int64)
        yr = np.empty(m, np.float32)
        gg = np.empty(m, np.float64)
        hh = np.empty(m, np.float64)
        for g in range(g0, g1):
            b, cnt = gptr[g], gptr[g + 1] - gptr[g]
            if cnt >= 2:
                key = _mix64(key0 ^ np.uint64(group_offset + g))
                _group_gradient(
                    g, b, cnt, pred, label, gweight, discount, topk, num_pair, ndcg, exp_gain, score_norm,
                    normalize, key, rank, yr, by_label, tmp, gg, hh, out_g, out_h,
                )  # fmt: skip


def _chunks(sizes, topk: bool, num_pair: int, n_chunks: int) -> np.ndarray:
    """Boundaries (int64, shape (k + 1,)) of at most ``n_chunks`` runs of consecutive groups
    with about equal work: pairs (``cnt * min(cnt, num_pair)`` for topk, ``cnt * num_pair``
    for mean) plus the rows the sorts touch."""
    sizes = sizes.astype(np.float64)
    pairs = sizes * (np.minimum(sizes, num_pair) if topk else num_pair)
    cost = np.cumsum(pairs + sizes * (1.0 + np.log2(np.maximum(sizes, 1.0))))
    total = cost[-1] if len(cost) else 0.0
    if len(sizes) == 0 or n_chunks <= 1 or total == 0.0:
        return np.array([0, len(sizes)], np.int64)
    cuts = np.searchsorted(cost, total * np.arange(1, n_chunks) / n_chunks, side="left") + 1
    return np.unique(np.r_[0, np.minimum(cuts, len(sizes)), len(sizes)]).astype(np.int64)


def lambdarank_gradient(
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
    nthread: int = 0,
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
    nthread : int
        CPU threads, as the training parameter (0: the default of
        :func:`dgboost.backend._threads.resolve_threads`). Never changes the result.

    Returns
    -------
    grad, hess : ndarray of float32, shape (n,)
    """
    pred = np.ascontiguousarray(pred, dtype=np.float32)
    label = np.ascontiguousarray(label, dtype=np.float32)
    gptr = np.ascontiguousarray(group_ptr, dtype=np.int64)
    n = len(pred)
    sizes = np.diff(gptr)
    max_n = int(sizes.max(initial=1))
    discount = 1.0 / np.log2(np.arange(max_n) + 2.0)
    out_g, out_h = np.zeros(n), np.zeros(n)
    args = (
        pred,
        label,
        gptr,
        None,
        np.ascontiguousarray(group_weight, dtype=np.float64),
        discount,
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
    if numba is None:
        with np.errstate(over="ignore"):  # uint64 hashing wraps on purpose (plain Python)
            _lambdarank_kernel(*args[:3], _chunks(sizes, topk, num_pair, 1), *args[4:])
        return out_g.astype(np.float32), out_h.astype(np.float32)
    from .backend._threads import numba_threads, resolve_threads, start_pool

    start_pool()
    threads = resolve_threads(nthread, numba.config.NUMBA_NUM_THREADS)
    chunk_ptr = _chunks(sizes, topk, num_pair, threads * _CHUNKS_PER_THREAD if threads > 1 else 1)
    with numba_threads(threads):  # per calling thread: put back for the caller's other kernels
        _lambdarank_kernel(*args[:3], chunk_ptr, *args[4:])
    return out_g.astype(np.float32), out_h.astype(np.float32)
