"""The parallel LambdaMART kernel gives bit for bit the gradients of the serial kernel it
replaced (kept as the oracle in ``_lambdarank_serial.py``), for every parameter and any
thread count, compiled and as plain Python."""

from __future__ import annotations

import importlib.util
import sys

import _lambdarank_serial  # tests/cpu is on sys.path (pytest's rootdir-relative imports)
import numba
import numpy as np
import pytest
from _lambdarank_serial import serial_lambdarank_gradient as _oracle

import dgboost._lambdarank as compiled
from dgboost._lambdarank import lambdarank_gradient

# ---------------------------------------------------------------------------- the cases
_SIZES = (0, 1, 2, 3, 5, 16, 17, 33, 64, 150, 1000, 1500)


def _case(seed):
    """Random groups (sizes 0, 1, 2 and 1,000+ among them), ties in labels and predictions,
    signed zeros in both, and a few NaN / infinite predictions."""
    rng = np.random.default_rng(seed)
    sizes = rng.choice(_SIZES, size=int(rng.integers(1, 12)))
    if seed % 3 == 0:
        sizes = np.r_[sizes, 1200]  # always a big group now and then
    gptr = np.r_[0, np.cumsum(sizes)].astype(np.int64)
    n = int(gptr[-1])
    label = rng.integers(0, int(rng.choice([2, 5, 32])), n).astype(np.float32)
    scale = [0.5, 4.0, 1000.0][seed % 3]
    pred = np.round(rng.normal(size=n) * scale, int(rng.integers(0, 3))).astype(np.float32)
    if n:
        pred[rng.random(n) < 0.1] = 0.0
        pred[rng.random(n) < 0.1] = -0.0
        if seed % 4 == 1:
            pred[rng.random(n) < 0.02] = np.nan
            pred[rng.random(n) < 0.02] = np.inf
            pred[rng.random(n) < 0.02] = -np.inf
    gw = rng.random(len(sizes)) + 0.5
    gw[rng.random(len(sizes)) < 0.2] = 0.0
    return pred, label, gptr, gw


_PARAMS = [
    dict(topk=topk, num_pair=num_pair, ndcg=ndcg, exp_gain=exp_gain, score_normalization=sn, normalization=nm)
    for topk, num_pair in [(True, 32), (True, 1), (True, 5), (False, 1), (False, 4)]
    for ndcg, exp_gain in [(True, True), (True, False), (False, True)]
    for sn in (True, False)
    for nm in (True, False)
]


def _assert_same(pred, label, gptr, gw, **kw):
    g, h = lambdarank_gradient(pred, label, gptr, gw, **kw)
    rg, rh = _oracle(pred, label, gptr, gw, **kw)
    assert g.dtype == rg.dtype == np.float32 and h.dtype == rh.dtype == np.float32
    assert np.array_equal(g.view(np.uint32), rg.view(np.uint32))
    assert np.array_equal(h.view(np.uint32), rh.view(np.uint32))


@pytest.mark.parametrize("params", _PARAMS, ids=lambda p: "-".join(f"{k}={v}" for k, v in p.items()))
def test_the_parallel_kernel_gives_the_serial_kernels_bits_for_every_parameter(params):
    for seed in range(6):
        pred, label, gptr, gw = _case(seed)
        _assert_same(pred, label, gptr, gw, seed=seed * 7919, iteration=seed, group_offset=seed * 3, **params)


def test_many_random_groupings_give_the_serial_kernels_bits():
    for seed in range(6, 60):
        pred, label, gptr, gw = _case(seed)
        params = _PARAMS[seed % len(_PARAMS)]
        _assert_same(pred, label, gptr, gw, seed=seed, iteration=seed // 2, group_offset=seed, **params)


def test_no_rows_and_only_tiny_groups_give_the_serial_kernels_bits():
    for sizes in ([], [0], [1], [2], [0, 0, 1, 2, 0], [2] * 50):
        gptr = np.r_[0, np.cumsum(sizes)].astype(np.int64)
        n = int(gptr[-1])
        pred = np.arange(n, dtype=np.float32)[::-1] % 3
        label = np.arange(n, dtype=np.float32) % 2
        for params in _PARAMS[::7]:
            _assert_same(pred, label, gptr, np.ones(len(sizes)), **params)


def test_signed_zeros_and_nan_predictions_keep_numpys_tie_order():
    # one group where every prediction is 0.0, -0.0 or NaN: only the tie order decides ranks
    pred = np.array([0.0, -0.0, np.nan, 0.0, -np.nan, -0.0, 1.0, np.nan, -1.0], np.float32)
    label = np.array([3, 0, 1, 2, 0, 3, 1, 2, 0], np.float32)
    gptr = np.array([0, 9], np.int64)
    for params in _PARAMS:
        _assert_same(pred, label, gptr, np.ones(1), **params)


def test_the_thread_count_does_not_change_the_gradients():
    pred, label, gptr, gw = _case(3)
    kw = dict(topk=False, num_pair=3, ndcg=True, seed=4, iteration=2)
    one = lambdarank_gradient(pred, label, gptr, gw, nthread=1, **kw)
    every = lambdarank_gradient(pred, label, gptr, gw, nthread=numba.config.NUMBA_NUM_THREADS, **kw)
    assert np.array_equal(one[0], every[0]) and np.array_equal(one[1], every[1])


def test_without_numba_the_plain_python_loops_give_the_same_bits(monkeypatch):
    plain, plain_oracle = (
        _without_numba(monkeypatch, path) for path in (compiled.__file__, _lambdarank_serial.__file__)
    )
    assert plain.numba is None and plain_oracle.numba is None
    rng = np.random.default_rng(5)
    sizes = [0, 1, 2, 7, 40, 13, 3, 20]
    gptr = np.r_[0, np.cumsum(sizes)].astype(np.int64)
    n = int(gptr[-1])
    label = rng.integers(0, 4, n).astype(np.float32)
    pred = np.round(rng.normal(size=n), 1).astype(np.float32)
    pred[[3, 9, 30]] = [-0.0, np.nan, 0.0]
    gw = rng.random(len(sizes)) + 0.5
    for params in _PARAMS[::5]:
        kw = dict(params, seed=3, iteration=2, group_offset=1)
        g, h = plain.lambdarank_gradient(pred, label, gptr, gw, **kw)
        # the plain-Python loops round float32 scalars as NumPy does, not as the compiled
        # code: they are compared with the oracle run the same way
        rg, rh = plain_oracle.serial_lambdarank_gradient(pred, label, gptr, gw, **kw)
        assert np.array_equal(g.view(np.uint32), rg.view(np.uint32))
        assert np.array_equal(h.view(np.uint32), rh.view(np.uint32))


def _without_numba(monkeypatch, path):
    """The module at ``path`` loaded as if numba were not installed."""
    with monkeypatch.context() as patch:  # only while loading: the other kernels need Numba
        patch.setitem(sys.modules, "numba", None)  # `import numba` raises ImportError
        spec = importlib.util.spec_from_file_location(f"_plain_{abs(hash(path))}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return module
