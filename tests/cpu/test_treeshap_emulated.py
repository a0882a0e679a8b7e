"""The CUDA TreeSHAP kernels, run on the host by the emulator, give the CPU engine's bits.

``_cuda_emulator`` compiles kernels/treeshap_rows.cu and treeshap_interventional.cu with a
host C++ compiler (a host thread per CUDA thread); the GPU engines' own host code
(``dgboost.backend._cuda_treeshap`` / ``_cuda_interventional``: uploads, argument lists,
launch shapes) runs with NumPy standing in for CuPy, every launch argument checked against
the kernel's parameter type. So without a GPU the category sets of categorical splits (and
the numeric models' path, unchanged) are held to the CPU engine bit for bit: SHAP values by
table, quadrature and path method, a thread a row or few rows with their slices of paths in
blocks.z (both instances of shap_rows in both modes), interaction values in each kernel layout
and by slice, interventional values. Small inputs; ``tests/gpu/test_categorical_shap_gpu.py`` checks the same on a GPU.
"""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from dgboost.explain import extract_paths, shap_interactions, shap_values_interventional, shap_values_path
from dgboost.explain.treeshap import shap_values_table
from dgboost.testing.shap_checks import assert_bitwise
from dgboost.testing.shap_oracle import (
    random_categorical_ensemble,
    random_categorical_rows,
    random_ensemble,
    random_rows,
)

_cuda_emulator = pytest.importorskip("_cuda_emulator")
pytestmark = pytest.mark.skipif(not _cuda_emulator.available(), reason="needs a host C++20 compiler")

# what the SHAP kernels use beyond the emulator's intrinsics (a width for __shfl_sync: lanes
# of a width-sized segment of the warp, as CUDA's)
_PRELUDE = """
inline int __popcll(unsigned long long v) { return __builtin_popcountll(v); }
template <typename T>
inline T __shfl_sync(unsigned, T v, int src, int width) {
  const int lane = threadIdx.x & 31;
  return dg_exchange(v, (lane & ~(width - 1)) + (src & (width - 1)));
}
"""


_LAUNCHES: list[tuple[str, tuple]] = []  # (kernel, grid) of every emulated launch, for the tests


class _Function:
    def __init__(self, module, name):
        self.module, self.name = module, name
        self.max_dynamic_shared_size_bytes = 0

    def __call__(self, grid, block, args, shared_mem=0):
        grid = tuple(int(g) for g in grid)
        _LAUNCHES.append((self.name, grid))
        self.module.launch(self.name, grid, int(block[0]), args, int(shared_mem))


class _Module:
    def __init__(self, file):
        self.module = _cuda_emulator.emulated_module(file)

    def get_function(self, name):
        return _Function(self.module, name)


def _fake_cupy() -> types.ModuleType:
    """NumPy as CuPy, for the engines' host code."""
    cp = types.ModuleType("cupy")
    for name in ("asarray", "empty", "zeros", "ascontiguousarray", "moveaxis", "ndarray", "float32", "float64"):
        setattr(cp, name, getattr(np, name))
    cp.int32, cp.int64, cp.uint32 = np.int32, np.int64, np.uint32
    cp.asnumpy = np.asarray
    device = _FakeDevice()
    cp.cuda = types.SimpleNamespace(Device=lambda *args: device)
    return cp


class _FakeDevice:
    """The one device of :func:`_fake_cupy` (also a context manager, as ``cupy.cuda.Device``)."""

    id = 0
    attributes = {"MaxSharedMemoryPerBlockOptin": 232_448}

    def synchronize(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass


@pytest.fixture
def emulated(monkeypatch):
    """The GPU SHAP engines with their launches on the emulator, rows in threads (a test that
    restores ``_SLICES_BELOW`` runs the slice mode: blocks by (rows, group, slice of paths))."""
    from dgboost.backend import _cuda_interventional, _cuda_treeshap, _nvrtc

    source = _cuda_emulator._source

    def with_prelude(file):
        text, names = source(file)
        return text.replace('#include "emulator.h"\n', '#include "emulator.h"\n' + _PRELUDE, 1), names

    monkeypatch.setattr(_cuda_emulator, "_source", with_prelude)
    monkeypatch.setattr(_nvrtc, "get_module", _Module)
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy())
    monkeypatch.setattr(_cuda_treeshap, "_SLICES_BELOW", 0)  # rows in threads, never slices in blocks.z
    _cuda_treeshap._clear_cache()
    _cuda_interventional._PATHS.clear()
    _cuda_interventional._BACKGROUNDS.clear()
    _LAUNCHES.clear()
    yield _cuda_treeshap, _cuda_interventional
    _cuda_treeshap._clear_cache()
    _cuda_interventional._PATHS.clear()
    _cuda_interventional._BACKGROUNDS.clear()


def _categorical(seed=0, n_categories=(70, 0, 3, 2), n_trees=3, depth=5, groups=2, n_rows=45):
    rng = np.random.default_rng(seed)
    ens = random_categorical_ensemble(rng, list(n_categories), n_trees=n_trees, max_depth=depth, n_groups=groups)
    X = random_categorical_rows(rng, n_rows, list(n_categories))
    background = random_categorical_rows(rng, 6, list(n_categories))
    return extract_paths(ens), X, background


def _numeric(seed=1, F=5, n_rows=45):
    rng = np.random.default_rng(seed)
    ens = random_ensemble(rng, F, n_trees=3, max_depth=5, n_groups=2)
    return extract_paths(ens), random_rows(rng, n_rows, F).astype(np.float32), random_rows(rng, 6, F)


@pytest.mark.parametrize("make", [_categorical, _numeric])
@pytest.mark.parametrize("budget,quad_max_k", [(1 << 20, None), (0, None), (0, 0)])
def test_emulated_gpu_shap_values_are_the_cpus_bits(emulated, make, budget, quad_max_k):
    gpu, _ = emulated
    table, X, _ = make()
    want = shap_values_path(table, X) if quad_max_k == 0 else shap_values_table(table, X, max_table_bytes=budget)
    assert_bitwise(gpu.shap_values_device(table, X, budget, quad_max_k=quad_max_k), want)


@pytest.mark.parametrize("instance", ["shap_rows", "shap_rows_loads8"])
def test_emulated_gpu_table_method_gives_the_cpus_bits_on_paths_of_one_to_nine_elements(
    emulated, monkeypatch, instance
):
    # each instance of shap_rows reads a tabled path's elements four or eight at a time:
    # lengths below, at and past one and two groups of four, one group of eight (the
    # emulator runs the one-thread-a-row mode, so both instances are run in that mode)
    gpu, _ = emulated
    monkeypatch.setitem(gpu._ROWS_KERNEL, False, instance)
    rng = np.random.default_rng(5)
    ens = random_ensemble(rng, 14, n_trees=4, max_depth=9, n_groups=1)
    table = extract_paths(ens)
    k = table.path_lengths - 1
    assert {1, 3, 4, 5, 8, 9} <= set(k.tolist())
    X = random_rows(rng, 40, 14).astype(np.float32)
    want = shap_values_table(table, X, max_table_bytes=1 << 24)
    assert_bitwise(gpu.shap_values_device(table, X, 1 << 24), want)


@pytest.mark.parametrize("make", [_categorical, _numeric])
@pytest.mark.parametrize("budget,quad_max_k", [(1 << 20, None), (0, None), (0, 0)])
@pytest.mark.parametrize("swapped", [False, True])
def test_emulated_gpu_slices_of_paths_summed_in_parallel_give_the_cpus_bits(
    emulated, monkeypatch, make, budget, quad_max_k, swapped
):
    # few rows: blocks by (rows, group, slice of paths), each slice's sums to its own rows of
    # the scratch, then added in slice order (shap_slices_sum): the mode SHAP cases c,
    # imported and d run in, with shap_rows_loads8 (swapped: with shap_rows)
    gpu, _ = emulated
    from dgboost.explain import treeshap

    monkeypatch.setattr(gpu, "_SLICES_BELOW", 1 << 18)
    monkeypatch.setattr(treeshap, "SLICE_PATHS", 7)  # the CPU sums in the same slices
    if swapped:
        monkeypatch.setattr(gpu, "_ROWS_KERNEL", {mode: gpu._ROWS_KERNEL[not mode] for mode in (True, False)})
    table, X, _ = make()
    want = shap_values_path(table, X) if quad_max_k == 0 else shap_values_table(table, X, max_table_bytes=budget)
    assert_bitwise(gpu.shap_values_device(table, X, budget, quad_max_k=quad_max_k), want)
    rows_launches = [grid for name, grid in _LAUNCHES if name.startswith("shap_rows")]
    assert rows_launches and all(len(grid) == 3 and grid[2] > 1 for grid in rows_launches)  # slices in blocks.z
    assert {name for name, _ in _LAUNCHES} >= {gpu._ROWS_KERNEL[True], "shap_slices_sum"}
    if make is _numeric and budget and not swapped:  # the slice sums of one block of rows at a time
        table, X, _ = _numeric(n_rows=300)
        want = shap_values_table(table, X, max_table_bytes=budget)
        _LAUNCHES.clear()
        monkeypatch.setattr(gpu, "_PARTIAL_BYTES", 1)
        assert_bitwise(gpu.shap_values_device(table, X, budget), want)
        assert sum(name == "shap_slices_sum" for name, _ in _LAUNCHES) == 3  # blocks of 128, 128 and 44 rows


@pytest.mark.parametrize("n_rows", [33, 34, 35, 64])
def test_emulated_gpu_quadrature_gives_the_cpus_bits_whatever_the_rows_of_the_last_warp(emulated, n_rows):
    # shap_rows' quadrature shares g_on across a warp of at least three rows and divides per
    # row in a warp of one or two: the last warp here has 1, 2, 3 or 32 rows
    gpu, _ = emulated
    table, X, _ = _numeric(seed=3, F=6, n_rows=n_rows)
    want = shap_values_table(table, X, max_table_bytes=0)
    assert_bitwise(gpu.shap_values_device(table, X, 0), want)


def _depth8(seed=0, n_rows=10):
    """A tree of depth 8 in each of two groups: 112 paths of up to 8 elements (so the
    interaction kernels' four-node instance, with its second round of pairs)."""
    rng = np.random.default_rng(seed)
    ens = random_ensemble(rng, 12, n_trees=1, max_depth=8, n_groups=2, split_prob=0.8)
    table = extract_paths(ens)
    assert (table.path_lengths - 1).max() == 8
    return table, random_rows(rng, n_rows, 12).astype(np.float32), random_rows(rng, 6, 12)


def _deep(seed=18, n_rows=10):
    """One tree of depth 18 on 17 features: 163 paths of 2 to 16 elements, so the interaction
    kernels' wide instance (paths of 9 to 16 elements) runs beside the short paths."""
    rng = np.random.default_rng(seed)
    ens = random_ensemble(rng, 17, n_trees=1, max_depth=18, n_groups=1, split_prob=0.6)
    table = extract_paths(ens)
    k = table.path_lengths - 1
    assert k.min() <= 8 and k.max() == 16  # paths longer than 16 take the path method: not the CPU's bits
    return table, random_rows(rng, n_rows, 17).astype(np.float32), random_rows(rng, 6, 17)


@pytest.mark.parametrize("make", [_categorical, _numeric, _depth8, _deep])
@pytest.mark.parametrize("layout", [None, ("warp-out", 8, 0), ("rows", 0, 0)])
def test_emulated_gpu_interaction_values_are_the_cpus_bits(emulated, monkeypatch, make, layout):
    gpu, _ = emulated
    if layout is not None:
        monkeypatch.setattr(gpu, "_interaction_layout", lambda F, n, G: layout)
    table, X, _ = make(n_rows=10)
    assert_bitwise(gpu.shap_interactions_device(table, X), shap_interactions(table, X))
    launched = {name for name, _ in _LAUNCHES}
    if layout is None:  # the four-node instance where no path is longer than 8
        wide = (table.path_lengths - 1).max() > 8
        assert ("shap_interactions_warp" if wide else "shap_interactions_warp_nq4") in launched
    elif layout[0] == "warp-out":
        assert "shap_interactions_warp_out" in launched
    else:  # a thread per row: path values in registers where no path is longer than 8
        wide = (table.path_lengths - 1).max() > 8
        assert ("shap_interactions_quadrature" if wide else "shap_interactions_rows8") in launched


@pytest.mark.parametrize("make", [_depth8, _deep])
def test_emulated_gpu_interaction_constants_are_the_numpy_expressions_bits(emulated, make):
    # g_on (1 - z) / ((1 - u) z + u) per node and element, made on the device, against the
    # host's NumPy expression (zero past a path's nodes and for paths the quadrature skips)
    gpu, _ = emulated
    table, _, _ = make()
    dev = gpu.device_path_table(table, 0)
    got = gpu._quadrature_arrays(table, dev)["g_on"]
    nodes = gpu._node_constants()["gl_nodes"]
    lengths = table.path_lengths.astype(np.int64)
    k_of = np.repeat(lengths - 1, lengths)  # per element: its path's k
    nq_of = (k_of + 1) // 2
    z = table.zero_fraction
    want = np.zeros((gpu._QUAD_MAX_NQ, table.n_elements))
    for t in range(gpu._QUAD_MAX_NQ):
        sel = (k_of >= 1) & (k_of <= gpu._QUAD_MAX_K) & (t < nq_of)
        u = nodes[nq_of[sel], t]
        want[t, sel] = (1.0 - z[sel]) / ((1.0 - u) * z[sel] + u)
    assert (want != 0).any(axis=1)[: lengths.max() // 2].all()  # every node of the longest path
    assert_bitwise(got, want)


@pytest.mark.parametrize("make", [_categorical, _numeric, _depth8, _deep])
def test_emulated_gpu_interaction_slices_summed_in_parallel_give_the_cpus_bits(emulated, monkeypatch, make):
    # few rows: half a warp a row, a row's slices of paths in blocks.z, then added in order
    # (interaction_slices_finish)
    gpu, _ = emulated
    from dgboost.explain import treeshap

    monkeypatch.setattr(gpu, "_SLICES_BELOW", 1 << 18)
    monkeypatch.setattr(treeshap, "INTERACTION_SLICE_PATHS", 7)  # the CPU sums in the same slices
    table, X, _ = make(n_rows=10)
    assert_bitwise(gpu.shap_interactions_device(table, X), shap_interactions(table, X))
    warp = [grid for name, grid in _LAUNCHES if name.startswith("shap_interactions_warp")]
    assert warp and all(len(grid) == 3 and grid[2] > 1 for grid in warp)
    assert any(name == "interaction_slices_finish" for name, _ in _LAUNCHES)


@pytest.mark.parametrize("make", [_categorical, _numeric, _depth8])
@pytest.mark.parametrize("in_parallel", [True, False])
def test_emulated_gpu_interaction_slices_of_a_thread_per_row_give_the_cpus_bits(
    emulated, monkeypatch, make, in_parallel
):
    # shap_interactions_rows8 (paths of at most 8 elements): a row's slices in blocks.z, added
    # in order by interaction_rows_slices_finish in row chunks, or in turn by one thread
    gpu, _ = emulated
    from dgboost.explain import treeshap

    monkeypatch.setattr(gpu, "_interaction_layout", lambda F, n, G: ("rows", 0, 0))
    monkeypatch.setattr(gpu, "_SLICES_BELOW", 1 << 18 if in_parallel else 1)
    monkeypatch.setattr(gpu, "_PARTIAL_BYTES", 1)  # chunks of one block's rows
    monkeypatch.setattr(treeshap, "INTERACTION_SLICE_PATHS", 7)  # the CPU sums in the same slices
    table, X, _ = make(n_rows=gpu._THREADS + 10)
    assert_bitwise(gpu.shap_interactions_device(table, X), shap_interactions(table, X))
    rows8 = [grid for name, grid in _LAUNCHES if name == "shap_interactions_rows8"]
    finished = [grid for name, grid in _LAUNCHES if name == "interaction_rows_slices_finish"]
    if in_parallel:
        assert len(rows8) == len(finished) == 2 and all(len(grid) == 3 and grid[2] > 1 for grid in rows8)
    else:
        assert len(rows8) == 1 and len(rows8[0]) == 2 and not finished


def test_emulated_gpu_thread_per_row_runs_slices_in_turn_when_a_chunk_has_fewer_threads_than_rows(
    emulated, monkeypatch
):
    # chunks of 128 rows (the sums' budget) by 2 slices are 256 (row, slice) threads, fewer
    # than 300 rows: one launch of a thread per row is the wider
    gpu, _ = emulated
    from dgboost.explain import treeshap

    monkeypatch.setattr(gpu, "_interaction_layout", lambda F, n, G: ("rows", 0, 0))
    monkeypatch.setattr(gpu, "_SLICES_BELOW", 1 << 18)
    monkeypatch.setattr(gpu, "_PARTIAL_BYTES", 1)
    monkeypatch.setattr(treeshap, "INTERACTION_SLICE_PATHS", 56)  # _depth8's 112 paths: 2 slices
    table, X, _ = _depth8(n_rows=300)
    assert_bitwise(gpu.shap_interactions_device(table, X), shap_interactions(table, X))
    rows8 = [grid for name, grid in _LAUNCHES if name == "shap_interactions_rows8"]
    assert len(rows8) == 1 and len(rows8[0]) == 2
    _LAUNCHES.clear()
    table, X, _ = _depth8(n_rows=250)  # 250 rows: 256 threads a chunk, slices in parallel
    assert_bitwise(gpu.shap_interactions_device(table, X), shap_interactions(table, X))
    rows8 = [grid for name, grid in _LAUNCHES if name == "shap_interactions_rows8"]
    assert len(rows8) == 2 and all(grid[2] == 2 for grid in rows8)


def test_emulated_gpu_short_path_tables_with_many_rows_take_a_thread_per_row(emulated, monkeypatch):
    gpu, _ = emulated
    monkeypatch.setattr(gpu, "_ROWS8_FROM", 20)  # (row, group) pairs: _depth8 has two groups
    short, X_short, _ = _depth8(n_rows=10)
    assert_bitwise(gpu.shap_interactions_device(short, X_short), shap_interactions(short, X_short))
    assert "shap_interactions_rows8" in {name for name, _ in _LAUNCHES}
    _LAUNCHES.clear()
    long_, X, _ = _deep(n_rows=10)  # paths of 9 to 16 elements: half a warp per row
    assert_bitwise(gpu.shap_interactions_device(long_, X), shap_interactions(long_, X))
    launched = {name for name, _ in _LAUNCHES}
    assert "shap_interactions_warp" in launched and "shap_interactions_rows8" not in launched
    _LAUNCHES.clear()
    monkeypatch.setattr(gpu, "_ROWS8_FROM", 21)  # one pair too few: half a warp per row
    gpu.shap_interactions_device(short, X_short)
    assert "shap_interactions_rows8" not in {name for name, _ in _LAUNCHES}


@pytest.mark.parametrize("make", [_categorical, _numeric])
@pytest.mark.parametrize("transform", [None, "logistic"])
def test_emulated_gpu_interventional_values_are_the_cpus_bits(emulated, make, transform):
    _, gpu = emulated
    table, X, background = make(n_rows=20)
    if transform is not None:  # one output: the first group's paths
        table = table.select_paths(np.flatnonzero(table.path_group == 0))
        table.n_groups, table.base_margin = 1, table.base_margin[:1]
    want = shap_values_interventional(table, X, background, transform=transform)
    assert_bitwise(gpu.shap_values_interventional_device(table, X, background, transform), want)
