"""The GPU exact engine, its kernels run on the host by the CUDA emulator, gives the CPU's trees.

``_cuda_emulator`` compiles kernels/exact_split.cu with a host C++ compiler and runs each CUDA
thread as a host thread, while ``dgboost.backend._cuda_exact``'s own host code makes the
launches (NumPy arrays for device arrays, every argument checked against the kernel's
parameter types). Trained with that engine in place of the CPU engine, models must be the
CPU engine's byte for byte, in either scan mode at every depth. Inputs are tiny (a host thread
per CUDA thread); ``tests/gpu/test_exact_greedy_gpu.py`` checks the same on a GPU at size.
"""

from __future__ import annotations

import numpy as np
import pytest

import dgboost as dg
from dgboost import exact_greedy
from dgboost.backend import _cuda_exact
from dgboost.testing.exact_modes import exact_scan_mode

_cuda_emulator = pytest.importorskip("_cuda_emulator")
pytestmark = pytest.mark.skipif(not _cuda_emulator.available(), reason="needs a host C++20 compiler")


def _random_set(seed, n=60):
    """Integer-valued columns (ties), a continuous one, a constant and an empty one; missing values."""
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 5, size=(n, 5)).astype(np.float32)
    X[:, 1] = rng.normal(size=n).astype(np.float32)
    X[rng.random(X.shape) < 0.2] = np.nan
    X[:, 2] = rng.integers(0, 4, size=n)  # dense: scanned backward only (missing values left)
    X[:, 3] = 2.0
    X[:, 4] = np.nan
    y = (np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) + rng.normal(size=n)).astype(np.float32)
    w = rng.uniform(0.5, 2, size=n).astype(np.float32)
    return X, y, w


def _use_emulated_gpu_engine(monkeypatch):
    """From here on, exact training uses the GPU engine on the emulator; its backend (launches logged)."""
    monkeypatch.setattr(_cuda_exact, "device_available_bytes", lambda xp: (1 << 40, 1 << 40))
    backend = _cuda_emulator.EmulatedCUDABackend()
    monkeypatch.setattr(
        exact_greedy, "exact_engine", lambda _backend, values: _cuda_exact.CUDAExactEngine(backend, values)
    )
    return backend


@pytest.mark.parametrize("mode", ["interleaved", "sorted"])
@pytest.mark.parametrize("seed, depth", [(0, 1), (1, 2), (2, 4), (3, 8)])
def test_the_emulated_gpu_kernels_give_the_cpu_engines_trees(monkeypatch, mode, seed, depth):
    X, y, w = _random_set(seed)
    params = {"tree_method": "exact", "max_depth": depth, "subsample": 0.9, "min_child_weight": 0.5, "seed": seed}
    expected = dg.train(params, dg.DMatrix(X, label=y, weight=w), 2).save_raw("json")
    backend = _use_emulated_gpu_engine(monkeypatch)
    with exact_scan_mode(mode):
        got = dg.train(params, dg.DMatrix(X, label=y, weight=w), 2).save_raw("json")
    assert got == expected
    assert {name for name, *_ in backend.launches} >= (
        {"exact_node_entries", "exact_interleaved_candidates"}
        if mode == "interleaved"
        else {"exact_partition_scatter", "exact_layout_pairs", "exact_layout_candidates"}
    )


@pytest.mark.parametrize("mode", ["interleaved", "sorted"])
def test_the_emulated_gpu_kernels_keep_monotone_and_interaction_constraints(monkeypatch, mode):
    X, y, _ = _random_set(5)
    params = {
        "tree_method": "exact",
        "max_depth": 3,
        "monotone_constraints": "(1,0,0,0,0)",
        "interaction_constraints": [[0, 1], [1, 2]],
        "colsample_bynode": 0.8,
    }
    expected = dg.train(params, dg.DMatrix(X, label=y), 2).save_raw("json")
    _use_emulated_gpu_engine(monkeypatch)
    with exact_scan_mode(mode):
        assert dg.train(params, dg.DMatrix(X, label=y), 2).save_raw("json") == expected


def test_the_gpu_engine_refuses_data_that_does_not_fit_with_the_estimate(monkeypatch):
    from dgboost.errors import DeviceMemoryError

    monkeypatch.setattr(_cuda_exact, "device_available_bytes", lambda xp: (1000, 1 << 34))
    X, _, _ = _random_set(0)
    with pytest.raises(DeviceMemoryError, match=r"tree_method='exact' needs about .* GiB of GPU memory .* 60 rows"):
        _cuda_exact.CUDAExactEngine(_cuda_emulator.EmulatedCUDABackend(), X)


@pytest.mark.parametrize("switch", [1, 2])
def test_a_sorted_level_after_interleaved_ones_gives_the_cpu_engines_trees(monkeypatch, switch):
    # the layout is then made by a sort of the entries by node, not partitioned from the last level's
    X, y, w = _random_set(7)
    params = {"tree_method": "exact", "max_depth": 4, "subsample": 0.8, "colsample_bynode": 0.8, "seed": 7}
    expected = dg.train(params, dg.DMatrix(X, label=y, weight=w), 2).save_raw("json")
    backend = _use_emulated_gpu_engine(monkeypatch)
    monkeypatch.setattr(_cuda_exact, "SORTED_FROM_DEPTH", switch)
    assert dg.train(params, dg.DMatrix(X, label=y, weight=w), 2).save_raw("json") == expected
    assert {"exact_node_entries", "exact_sort_keys", "exact_layout_gather", "exact_partition_scatter"} <= {
        name for name, *_ in backend.launches
    }
