"""The CUDA backend's one kernel cache (``CUDABackend._launchable``), without a GPU: a kernel is
loaded once, its shared-memory opt-in is set once and remembered, and an entry put in its place
(as ``benchmarks/micro_gpu_stages.py`` swaps kernel variants) is the one launched next."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import pytest

from dgboost.backend import cuda


class _RawKernel:
    """What the backend reads of a CuPy RawKernel: the CUfunction handle and the opt-in."""

    def __init__(self, ptr: int):
        self.kernel = SimpleNamespace(ptr=ptr)
        self.max_dynamic_shared_size_bytes = None
        self.calls = []

    def __call__(self, grid, block, args, shared_mem=0):  # CuPy's launch
        self.calls.append((grid, block, args, shared_mem))


class _Launcher:
    def __init__(self):
        self.calls = []

    def launch(self, function_ptr, grid, threads, shared, stream, args):
        self.calls.append((function_ptr, grid, threads, shared, stream))
        return True


@pytest.fixture
def backend(monkeypatch):
    loads = []

    def get_module(file):
        def get_function(name):
            loads.append((file, name))
            return _RawKernel(1000 + len(loads))

        return SimpleNamespace(get_function=get_function)

    monkeypatch.setattr(cuda, "get_module", get_module)
    be = object.__new__(cuda.CUDABackend)  # no device: only what a launch touches
    be._functions = {}
    be._launcher = _Launcher()
    be.xp = SimpleNamespace(cuda=SimpleNamespace(get_current_stream=lambda: SimpleNamespace(ptr=7)))
    be.sm_count = 4
    be.device = contextlib.nullcontext()
    be.loads = loads
    return be


def test_a_kernel_is_loaded_at_its_first_launch_and_never_again(backend):
    for _ in range(3):
        backend._launch("nodes.cu", "gather_rows", 100, ())
    backend._launch("nodes.cu", "split_nodes", 100, ())
    assert backend.loads == [("nodes.cu", "gather_rows"), ("nodes.cu", "split_nodes")]
    assert [c[0] for c in backend._launcher.calls] == [1001, 1001, 1001, 1002]


def test_the_shared_memory_opt_in_is_set_once_and_only_past_what_was_allowed(backend):
    backend._launch("histogram.cu", "hist", 100, (), shared=16 * 1024)
    kernel = backend._functions[("histogram.cu", "hist")][1]
    assert kernel.max_dynamic_shared_size_bytes is None  # within the default 48 KiB
    backend._launch("histogram.cu", "hist", 100, (), shared=100_000)
    assert kernel.max_dynamic_shared_size_bytes == 100_000
    kernel.max_dynamic_shared_size_bytes = "not set again"
    backend._launch("histogram.cu", "hist", 100, (), shared=90_000)
    backend._launch("histogram.cu", "hist", 100, (), shared=100_000)
    assert kernel.max_dynamic_shared_size_bytes == "not set again"
    backend._launch("histogram.cu", "hist", 100, (), shared=150_000)
    assert kernel.max_dynamic_shared_size_bytes == 150_000
    assert [c[3] for c in backend._launcher.calls] == [16 * 1024, 100_000, 90_000, 100_000, 150_000]


def test_an_entry_put_in_the_cache_is_the_kernel_launched_next(backend):
    backend._launch("nodes.cu", "split_nodes", 100, ())
    real = backend._functions[("nodes.cu", "split_nodes")]
    backend._functions[("nodes.cu", "split_nodes")] = backend._loaded(_RawKernel(5555))
    backend._launch("nodes.cu", "split_nodes", 100, (), shared=60_000)
    variant = backend._functions[("nodes.cu", "split_nodes")]
    assert variant[1].max_dynamic_shared_size_bytes == 60_000 and real[1].max_dynamic_shared_size_bytes is None
    backend._functions[("nodes.cu", "split_nodes")] = real
    backend._launch("nodes.cu", "split_nodes", 100, ())
    assert [c[0] for c in backend._launcher.calls] == [real[0], 5555, real[0]]
    assert backend.loads == [("nodes.cu", "split_nodes")]


def test_a_launch_the_packed_launcher_declines_goes_to_the_raw_kernel(backend):
    class _Declines(_Launcher):
        def launch(self, *args):
            super().launch(*args)
            return False

    backend._launcher = _Declines()
    backend._launch("nodes.cu", "gather_rows", 100, ("a",), threads=128, shared=0, grid=(3, 2))
    kernel = backend._functions[("nodes.cu", "gather_rows")][1]
    assert backend._launcher.calls == [(kernel.kernel.ptr, (3, 2), 128, 0, 7)]
    assert kernel.calls == [((3, 2), (128,), ("a",), 0)]
