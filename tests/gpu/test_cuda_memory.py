"""GPU memory: the bin matrix is bit-packed, and training that cannot fit fails before it starts."""

import numpy as np
import pytest

import dgboost
from dgboost.backend.cuda import DeviceMemoryError
from dgboost.datasets import make_synthetic

pytestmark = pytest.mark.gpu


def test_training_that_cannot_fit_fails_before_it_starts_with_the_estimate(monkeypatch):
    import cupy

    X, y, _ = make_synthetic(5000, 10, task="binary", seed=0)
    pool = cupy.get_default_memory_pool()
    pool.free_all_blocks()

    class PoolWithNoFreeBlocks:  # CuPy's pool attributes are read-only
        def free_bytes(self) -> int:
            return 0

        def __getattr__(self, name):
            return getattr(pool, name)

    # a device with 1 KiB free: the check also counts the pool's free blocks, which the cuts
    # computed before it return to the pool
    monkeypatch.setattr(cupy.cuda.runtime, "memGetInfo", lambda: (1 << 10, 80 << 30))
    monkeypatch.setattr(cupy, "get_default_memory_pool", PoolWithNoFreeBlocks)
    with pytest.raises(DeviceMemoryError, match=r"needs about .* GiB .* 5000 rows x 10 features"):
        dgboost.train({"objective": "binary:logistic", "device": "cuda"}, dgboost.DMatrix(X, y), 2, verbose_eval=False)


def test_a_device_allocation_that_fails_names_its_size_and_the_free_memory(monkeypatch):
    import cupy

    from dgboost.backend import get_backend

    backend = get_backend("cuda")

    def refuse(*args, **kwargs):
        raise cupy.cuda.memory.OutOfMemoryError(1 << 40, 0, 0)

    monkeypatch.setattr(backend.xp, "empty", refuse)
    with pytest.raises(DeviceMemoryError, match=r"out of GPU memory allocating .* MiB"):
        backend.empty((1 << 20, 2), np.int64)


def test_host_rows_that_do_not_fit_on_the_device_fail_their_upload_naming_its_size(monkeypatch):
    import cupy

    from dgboost.backend import get_backend

    backend = get_backend("cuda")

    def refuse(*args, **kwargs):
        raise cupy.cuda.memory.OutOfMemoryError(1 << 40, 0, 0)

    monkeypatch.setattr(backend.xp, "empty", refuse)
    rows = np.ones((1 << 17, 16), np.float32)  # 8 MiB: staged into an array of the backend's
    with pytest.raises(DeviceMemoryError, match=r"out of GPU memory allocating 8\.0 MiB float32 \(131072, 16\)"):
        backend.resident(rows)


def test_blocks_cached_by_cupys_pool_go_back_to_the_device_when_released():
    import cupy

    from dgboost.backend import get_backend

    pool = cupy.get_default_memory_pool()
    pool.free_all_blocks()
    # what stays free after that is in blocks split from arrays still alive (earlier tests')
    before = pool.free_bytes()
    block = cupy.empty(64 << 20, dtype=cupy.uint8)  # a whole block of its own
    del block
    assert pool.free_bytes() >= before + (64 << 20)
    get_backend("cuda").release_cached_memory()
    assert pool.free_bytes() <= before


def test_another_allocators_cache_is_left_alone_when_released():
    import cupy

    from dgboost.backend import get_backend

    pool = cupy.get_default_memory_pool()
    pool.free_all_blocks()
    before = pool.free_bytes()
    block = cupy.empty(64 << 20, dtype=cupy.uint8)
    del block
    cupy.cuda.set_allocator(lambda size: pool.malloc(size))  # a user's allocator, however made
    try:
        get_backend("cuda").release_cached_memory()
        assert pool.free_bytes() >= before + (64 << 20)
    finally:
        cupy.cuda.set_allocator(pool.malloc)
        pool.free_all_blocks()
