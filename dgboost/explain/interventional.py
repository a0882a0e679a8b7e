"""Interventional (marginal) TreeSHAP over a background data set, on the path table.

For a row ``x`` and a background row ``r`` the game is ``g(S) = f(x_S, r_{not S})``. A leaf
is reached by the hybrid row iff every element of its path is on for the hybrid value of its
feature. With per-path on-bits ``bx`` (for x) and ``br`` (for r), element by element:

* on for both: no constraint; off for both: the leaf is never reached (skip the path);
* on for x only: the feature must come from x (set X); on for r only: from r (set R).

(Each feature appears once per path, so elements are features.) The leaf's value ``v`` then
contributes ``+v * (|X|-1)! |R|! / n!`` to each feature of X and ``-v * |X|! (|R|-1)! / n!``
to each feature of R, n = |X| + |R| (Lundberg et al. 2020, interventional Tree SHAP). Values
are averaged over the background rows; the bias column is the base margin plus the mean
model output over the background, so each row sums to its margin.

On-bits are kept in int64 words of 63 elements (``word_offsets`` per path), so any path
length works; one word covers every path of up to 63 distinct features.

``kernels/treeshap_interventional.cu`` (:mod:`dgboost.backend._cuda_interventional`) runs these
kernels with one thread per row on a GPU; it takes the background's terms
(:func:`background_terms`) and the logistic transform's sigmoids (:func:`sigmoid_values`) from
here, so both devices give the same bits.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from numba import njit, prange

from .._kernel_switch import KernelTable
from ..errors import DGBoostValueError
from .paths import PathTable, as_path_table, element_is_on_cat
from .rows import prepare_rows

__all__ = [
    "shap_values_interventional",
    "path_on_bits",
    "path_word_offsets",
    "background_terms",
    "sigmoid_values",
    "shapley_weights",
    "table_weights",
    "check_transform",
    "check_background",
    "TRANSFORMS",
]

#: output transforms explained per background row, as shap's ``model_output="probability"``
TRANSFORMS = ("logistic",)

_WORD_BITS = 63
_CHUNK_BYTES = 64 << 20  # on-bit words of the rows of X held at once


@njit(cache=True, nogil=True, inline="always")
def _popcount(x):
    x = x - ((x >> 1) & 0x5555555555555555)
    x = (x & 0x3333333333333333) + ((x >> 2) & 0x3333333333333333)
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0F
    x = x + (x >> 8)
    x = x + (x >> 16)
    x = x + (x >> 32)
    return x & 0x7F


@njit(cache=True, nogil=True, parallel=True)
def _on_bits(Xf, path_offsets, feature, lower, upper, miss, cat_off, pool, word_offsets, out):
    """out[r, w]: on-bits (63 per int64 word) of every non-bias element for row r
    (``cat_off`` empty: no categorical splits, see ``PathTable.category_arrays``)."""
    has_cat = cat_off.shape[0] > 0
    n = Xf.shape[0]
    n_paths = path_offsets.shape[0] - 1
    fmax = np.float32(3.4028234663852886e38)
    for r in prange(n):
        for p in range(n_paths):
            s = path_offsets[p] + 1
            k = path_offsets[p + 1] - s
            w0 = word_offsets[p]
            for w in range(word_offsets[p + 1] - w0):
                out[r, w0 + w] = 0
            for j in range(k):
                x = Xf[r, feature[s + j]]
                if x > fmax:
                    x = fmax
                co = cat_off[s + j] if has_cat else -1
                if element_is_on_cat(x, lower[s + j], upper[s + j], miss[s + j] != 0, co, pool):
                    out[r, w0 + j // 63] |= np.int64(1) << (j % 63)


@njit(cache=True, nogil=True)
def _full_words(path_offsets, word_offsets):
    n_paths = path_offsets.shape[0] - 1
    full = np.zeros(word_offsets[-1], dtype=np.int64)
    for p in range(n_paths):
        k = path_offsets[p + 1] - path_offsets[p] - 1
        for j in range(k):
            full[word_offsets[p] + j // 63] |= np.int64(1) << (j % 63)
    return full


@njit(cache=True, nogil=True, inline="always")
def _add_pair(xbits, r, rbitsT, q, full, s, w0, nw, feature, v, wtab, row):
    """Add to ``row`` (F,) the contributions of one path (elements from s, on-bit words w0 ..
    w0 + nw, leaf value ``v``) for the row r of ``xbits`` and the background row q of
    ``rbitsT``: nothing unless the hybrid reaches the leaf (module docstring)."""
    nx = 0
    nr = 0
    for w in range(nw):
        xw = xbits[r, w0 + w]
        rw = rbitsT[w0 + w, q]
        if (xw | rw) != full[w0 + w]:
            return
        nx += _popcount(xw & ~rw)
        nr += _popcount(rw & ~xw)
    if nx + nr == 0:
        return
    nt = nx + nr
    wx = v * wtab[nt, nx - 1] if nx > 0 else 0.0
    wr = v * wtab[nt, nx] if nr > 0 else 0.0
    for w in range(nw):
        xw = xbits[r, w0 + w]
        rw = rbitsT[w0 + w, q]
        mx = xw & ~rw
        mr = rw & ~xw
        base = s + w * 63
        while mx != 0:
            low = mx & (-mx)
            row[feature[base + _popcount(low - 1)]] += wx
            mx ^= low
        while mr != 0:
            low = mr & (-mr)
            row[feature[base + _popcount(low - 1)]] -= wr
            mr ^= low


@njit(cache=True, nogil=True, parallel=True)
def _interventional_kernel(xbits, rbitsT, full, path_offsets, word_offsets, feature, path_v, path_group, wtab, out):
    n = xbits.shape[0]
    n_ref = rbitsT.shape[1]
    n_paths = path_offsets.shape[0] - 1
    inv_ref = 1.0 / n_ref
    for r in prange(n):
        for p in range(n_paths):
            s = path_offsets[p] + 1
            if path_offsets[p + 1] == s:
                continue
            w0 = word_offsets[p]
            row = out[r, path_group[p]]
            v = path_v[p] * inv_ref
            for q in range(n_ref):
                _add_pair(xbits, r, rbitsT, q, full, s, w0, word_offsets[p + 1] - w0, feature, v, wtab, row)


@njit(cache=True, nogil=True)
def _background_mean(rbitsT, full, path_offsets, word_offsets, path_v, path_group, n_groups):
    n_ref = rbitsT.shape[1]
    n_paths = path_offsets.shape[0] - 1
    out = np.zeros(n_groups, dtype=np.float64)
    for q in range(n_ref):
        for p in range(n_paths):
            w0 = word_offsets[p]
            ok = True
            for w in range(word_offsets[p + 1] - w0):
                if rbitsT[w0 + w, q] != full[w0 + w]:
                    ok = False
                    break
            if ok:
                out[path_group[p]] += path_v[p]
    return out / n_ref


@njit(cache=True, nogil=True, parallel=True)
def _margins_from_bits(bits, full, path_offsets, word_offsets, path_v, path_group, base_margin, out):
    """out[r, g] = base_margin[g] + the values of the leaves row r reaches (all path bits on)."""
    n_paths = path_offsets.shape[0] - 1
    for r in prange(bits.shape[0]):
        for g in range(out.shape[1]):
            out[r, g] = base_margin[g]
        for p in range(n_paths):
            w0 = word_offsets[p]
            ok = True
            for w in range(word_offsets[p + 1] - w0):
                if bits[r, w0 + w] != full[w0 + w]:
                    ok = False
                    break
            if ok:
                out[r, path_group[p]] += path_v[p]


@njit(cache=True, nogil=True, inline="always")
def _sigmoid(m):
    return 1.0 / (1.0 + np.exp(-m))


@njit(cache=True, nogil=True)
def _sigmoid_into(m, out):
    # one scalar libm exp per value, as the logistic kernel's inlined _sigmoid: the loop's second
    # exit (never taken: the sigmoid of a number is a number) keeps LLVM from vectorizing it,
    # which with a vector math library (SVML) would call another exp
    for i in range(m.shape[0]):
        out[i] = _sigmoid(m[i])
        if out[i] != out[i] and m[i] == m[i]:
            break


def sigmoid_values(m: np.ndarray) -> np.ndarray:
    """``sigmoid(m)`` elementwise with the exact expression and ``exp`` of the CPU's logistic kernel.

    Parameters
    ----------
    m : ndarray of float64, shape (n, n_groups)
        Margins.

    Returns
    -------
    ndarray of float64, shape (n, n_groups)
        ``1 / (1 + exp(-m))``, bitwise the values :func:`_interventional_logistic_kernel` uses
        (the GPU kernel takes them from the host: CUDA's ``exp`` may round differently).
    """
    m = np.ascontiguousarray(m, dtype=np.float64)
    out = np.empty_like(m)
    if m.size:
        _sigmoid_into(m.reshape(-1), out.reshape(-1))
    return out


@njit(cache=True, nogil=True, parallel=True)
def _interventional_logistic_kernel(
    xbits, rbitsT, full, path_offsets, word_offsets, feature, path_v, path_group, wtab, mx, mr, out
):
    """Interventional SHAP values of sigmoid(margin), shap's rule: per background row q the
    margin values phi_q (which sum to mx - mr_q) are scaled by
    (sigmoid(mx) - sigmoid(mr_q)) / (mx - mr_q) (1 where the margins are equal), then averaged."""
    n = xbits.shape[0]
    n_ref = rbitsT.shape[1]
    n_paths = path_offsets.shape[0] - 1
    G, F = out.shape[1], out.shape[2] - 1
    for r in prange(n):
        tmp = np.zeros((G, F), dtype=np.float64)
        for q in range(n_ref):
            tmp[:, :] = 0.0
            for p in range(n_paths):
                s = path_offsets[p] + 1
                if path_offsets[p + 1] == s:
                    continue
                w0 = word_offsets[p]
                _add_pair(
                    xbits,
                    r,
                    rbitsT,
                    q,
                    full,
                    s,
                    w0,
                    word_offsets[p + 1] - w0,
                    feature,
                    path_v[p],
                    wtab,
                    tmp[path_group[p]],
                )
            for g in range(G):
                a, b = mx[r, g], mr[q, g]
                scale = 1.0 if a == b else (_sigmoid(a) - _sigmoid(b)) / (a - b)
                for f in range(F):
                    out[r, g, f] += tmp[g, f] * scale
        for g in range(G):
            for f in range(F):
                out[r, g, f] /= n_ref


def shapley_weights(max_n: int) -> np.ndarray:
    """wtab[n, s] = s! (n - s - 1)! / n!  for 1 <= n <= max_n, 0 <= s < n; float64 (max_n + 1, max_n + 1)."""
    w = np.zeros((max_n + 1, max_n + 1), dtype=np.float64)
    for n in range(1, max_n + 1):
        w[n, 0] = 1.0 / n
        for s in range(n - 1):
            w[n, s + 1] = w[n, s] * (s + 1) / (n - s - 1)
    return w


def table_weights(table: PathTable) -> np.ndarray:
    """The Shapley weights of every path length of ``table`` (:func:`shapley_weights`)."""
    return shapley_weights(max(table.max_length - 1, 1))


def path_word_offsets(table: PathTable) -> np.ndarray:
    """int64 (n_paths + 1,): path p's on-bits are words ``word_offsets[p]:word_offsets[p + 1]``
    (ceil(k / 63) words for its k non-bias elements)."""
    k = table.path_lengths - 1
    words = (k + _WORD_BITS - 1) // _WORD_BITS
    word_offsets = np.zeros(table.n_paths + 1, dtype=np.int64)
    np.cumsum(words, out=word_offsets[1:])
    return word_offsets


def path_on_bits(table: PathTable, Xf: np.ndarray):
    """``(bits, word_offsets)``: per-row on-bits of every path (int64 words of 63 elements)."""
    word_offsets = path_word_offsets(table)
    bits = np.empty((Xf.shape[0], int(word_offsets[-1])), dtype=np.int64)
    _K._on_bits(
        Xf,
        table.path_offsets,
        table.feature,
        table.lower,
        table.upper,
        table.is_missing_branch,
        *table.category_arrays(),
        word_offsets,
        bits,
    )
    return bits, word_offsets


def check_transform(transform: str | None) -> None:
    """Raise unless ``transform`` is None or one of :data:`TRANSFORMS`."""
    if transform is not None and transform not in TRANSFORMS:
        raise DGBoostValueError(f"transform must be one of {TRANSFORMS} or None, got {transform!r}")


def check_background(Bf: np.ndarray, n_columns: int) -> None:
    """Raise unless the prepared background has rows and ``n_columns`` columns (X's)."""
    if Bf.shape[0] == 0:
        raise DGBoostValueError("background must have at least one row")
    if Bf.shape[1] != n_columns:
        raise DGBoostValueError(f"background has {Bf.shape[1]} columns, X has {n_columns}")


def background_terms(table: PathTable, Bf: np.ndarray, transform: str | None = None) -> dict:
    """What the kernels need of the background, computed once per call (CPU) or upload (GPU).

    Parameters
    ----------
    table : PathTable
    Bf : ndarray of float32, shape (n_background, F)
        The prepared background rows (:func:`~dgboost.explain.treeshap.prepare_rows`).
    transform : {None, "logistic"}

    Returns
    -------
    dict
        ``rbits`` int64 (n_background, n_words) and ``rbitsT`` its C-contiguous transpose
        (n_words, n_background); ``word_offsets`` int64 (n_paths + 1,); ``full`` int64
        (n_words,): every element's bit set; ``mr`` float64 (n_background, n_groups): the
        background's margins (None without a transform); ``bias`` float64 (n_groups,): the
        bias column (base margin + the mean model output over the background, or the mean
        probability for ``"logistic"``).
    """
    rbits, word_offsets = path_on_bits(table, Bf)
    rbitsT = np.ascontiguousarray(rbits.T)
    full = _full_words(table.path_offsets, word_offsets)
    bias = table.base_margin + _background_mean(
        rbitsT, full, table.path_offsets, word_offsets, table.path_v, table.path_group, table.n_groups
    )
    mr = None
    if transform is not None:
        mr = np.empty((Bf.shape[0], table.n_groups), dtype=np.float64)
        _K._margins_from_bits(
            rbits, full, table.path_offsets, word_offsets, table.path_v, table.path_group, table.base_margin, mr
        )
        bias = (1.0 / (1.0 + np.exp(-mr))).mean(axis=0)
    return {"rbits": rbits, "rbitsT": rbitsT, "word_offsets": word_offsets, "full": full, "mr": mr, "bias": bias}


def shap_values_interventional(model: Any, X: Any, background: Any, transform: str | None = None) -> np.ndarray:
    """Interventional SHAP values over ``background``; float64 ``(n, n_groups, F + 1)``.

    ``model``: an Ensemble, :class:`PathTable` or PackedTable. ``X`` and ``background``:
    (rows, F) numeric with the same columns, NaN = missing (each follows the default
    directions). The bias column is ``base_margin + mean over background of the trees'
    output``. Cost O(n * n_background * n_paths) word tests plus O(k) per reached leaf;
    memory: the background's on-bits (n_background * n_paths int64 words), rows in chunks.

    ``transform="logistic"`` explains ``sigmoid(margin)`` as shap's
    ``model_output="probability"`` does (per background row, the margin values rescaled by the
    secant of the sigmoid); the bias column is then the mean of the background's probabilities.
    """
    check_transform(transform)

    table = as_path_table(model)
    Xf = prepare_rows(X, table.n_features)
    Bf = prepare_rows(background, table.n_features)
    check_background(Bf, Xf.shape[1])
    n, F = Xf.shape
    out = np.zeros((n, table.n_groups, F + 1), dtype=np.float64)
    terms = background_terms(table, Bf, transform)
    rbitsT, word_offsets, full, mr = terms["rbitsT"], terms["word_offsets"], terms["full"], terms["mr"]
    if n:
        wtab = table_weights(table)
        # rows in chunks so their on-bit words stay around _CHUNK_BYTES
        chunk = max(1, min(n, _CHUNK_BYTES // (8 * max(int(word_offsets[-1]), 1))))
        for r0 in range(0, n, chunk):
            xbits, _ = path_on_bits(table, Xf[r0 : r0 + chunk])
            if transform is None:
                _K._interventional_kernel(
                    xbits,
                    rbitsT,
                    full,
                    table.path_offsets,
                    word_offsets,
                    table.feature,
                    table.path_v,
                    table.path_group,
                    wtab,
                    out[r0 : r0 + chunk],
                )
                continue
            mx = np.empty((xbits.shape[0], table.n_groups), dtype=np.float64)
            _K._margins_from_bits(
                xbits, full, table.path_offsets, word_offsets, table.path_v, table.path_group, table.base_margin, mx
            )
            _K._interventional_logistic_kernel(
                xbits,
                rbitsT,
                full,
                table.path_offsets,
                word_offsets,
                table.feature,
                table.path_v,
                table.path_group,
                wtab,
                mx,
                mr,
                out[r0 : r0 + chunk],
            )
    out[:, :, F] = terms["bias"]
    return out


# the parallel kernels above, run as serial twins while a cold Numba cache fills in the background
# (dgboost/_kernel_switch.py)
_K = KernelTable(sys.modules[__name__])
