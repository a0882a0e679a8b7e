"""The host side of GPU interventional SHAP, checked without a GPU: the sigmoids handed to the
kernel, the uploaded path arrays, and every launch's arguments against the kernel's parameters
in ``kernels/treeshap_interventional.cu`` (CuPy and the compiled module replaced by NumPy and a
recorder). The values themselves are compared with the CPU's in ``tests/gpu``."""

from __future__ import annotations

import math
import re
import sys
import types

import numpy as np
import pytest

import dgboost as dg
from dgboost.backend import _cuda_interventional as gi
from dgboost.backend import _nvrtc, get_backend
from dgboost.backend._cuda_shap import CudaEngine
from dgboost.datasets import make_synthetic
from dgboost.explain import interventional as iv

_C_TYPES = {
    "const float*": np.float32,
    "const double*": np.float64,
    "double*": np.float64,
    "const long long*": np.int64,
    "const int*": np.int32,
    "const unsigned char*": np.uint8,
    "const unsigned*": np.uint32,
    "long long": np.int64,
    "int": np.int32,
}


def _model(objective="binary:logistic", F=8):
    task = {"binary:logistic": "binary", "reg:squarederror": "regression"}.get(objective, "multiclass")
    X, y, _ = make_synthetic(500, F, task=task, missing_rate=0.1, seed=4)
    params = {"objective": objective, "max_depth": 4, "max_bin": 32}
    if objective.startswith("multi"):
        params["num_class"] = int(y.max()) + 1
    return dg.train(params, dg.DMatrix(X, y), 3, verbose_eval=False), X


def _libm_sigmoid(v: float) -> float:
    """1 / (1 + exp(-v)) with C's exp (CPython's math.exp), which the CPU kernel calls."""
    try:
        return 1.0 / (1.0 + math.exp(-v))
    except OverflowError:  # exp(-v) = inf in C
        return 0.0


def test_host_sigmoids_are_libm_exp_values_bit_for_bit():
    rng = np.random.default_rng(0)
    m = np.concatenate(
        [rng.normal(scale=s, size=2000) for s in (0.1, 3.0, 40.0, 800.0)]
        + [np.array([0.0, -0.0, 1e-300, -745.2, 709.8, -709.5, np.inf, -np.inf])]
    ).reshape(-1, 2)
    want = np.array([[_libm_sigmoid(v) for v in row] for row in m])
    got = iv.sigmoid_values(m)
    assert got.dtype == np.float64 and got.shape == m.shape
    assert got.tobytes() == want.tobytes()


def test_uploaded_paths_are_grouped_in_path_order_with_the_cpus_words():
    booster, X = _model("multi:softprob")
    table = dg.TreeExplainer(booster).table
    a = gi.path_arrays(table)
    for g in range(table.n_groups):
        paths = a["group_paths"][a["group_ptr"][g] : a["group_ptr"][g + 1]]
        np.testing.assert_array_equal(paths, np.flatnonzero(table.path_group == g))
    assert a["group_ptr"][-1] == table.n_paths
    _, word_offsets = iv.path_on_bits(table, X[:2].astype(np.float32))
    np.testing.assert_array_equal(a["word_offsets"], word_offsets)
    np.testing.assert_array_equal(a["wtab"], iv.shapley_weights(max(table.max_length - 1, 1)))


def _kernel_params(name: str) -> list[tuple[str, type]]:
    source = (_nvrtc.kernel_dir() / "treeshap_interventional.cu").read_text()
    found = re.search(
        r'extern "C" __global__ void\s+(?:__launch_bounds__\([^)]*\)\s*)?' + name + r"\((.*?)\)\s*\{", source, re.S
    )
    params = []
    for part in re.sub(r"//[^\n]*", "", found.group(1)).split(","):
        text = " ".join(part.replace("__restrict__", "").split())
        ctype, pname = text.rsplit(" ", 1)
        if pname.startswith("*"):
            ctype, pname = ctype + "*", pname[1:]
        params.append((pname, _C_TYPES[ctype.replace(" *", "*")]))
    return params


class _Recorder:
    """A stand-in for the compiled module: checks each launch's arguments against the
    kernel's parameters and fills its output with zeros."""

    def __init__(self):
        self.launches = []

    def get_function(self, name):
        params = _kernel_params(name)

        def launch(grid, block, args, shared_mem=0):
            assert len(args) == len(params), name
            for (pname, dtype), arg in zip(params, args):
                got = arg.dtype if isinstance(arg, np.ndarray) else type(arg)
                assert got == dtype, f"{name}({pname}): {got} passed for {np.dtype(dtype)}"
            named = {p: a for (p, _), a in zip(params, args)}
            n, G = int(named["n"]), int(named["n_groups"])
            assert block == (gi._THREADS,) and grid == (-(-n // gi._THREADS), G)
            if int(named.get("acc_shared", 0)):
                per_thread = 2 if "scratch" in named else 1
                assert shared_mem >= per_thread * gi._THREADS * int(named["F"]) * 8
            named["out"][...] = 0.0
            self.launches.append((name, shared_mem))

        return launch


@pytest.fixture
def fake_gpu(monkeypatch):
    fake = types.ModuleType("cupy")
    fake.asarray = lambda a, dtype=None: np.array(a, dtype=dtype)
    fake.empty, fake.ascontiguousarray = np.empty, np.ascontiguousarray
    fake.asnumpy = np.array
    fake.float32, fake.float64 = np.float32, np.float64
    fake.cuda = types.SimpleNamespace(Device=lambda: types.SimpleNamespace(id=0))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    recorder = _Recorder()
    monkeypatch.setattr(_nvrtc, "get_module", lambda name, defines=None: recorder)
    gi._clear_cache()
    yield recorder
    gi._clear_cache()


@pytest.mark.parametrize("objective,F", [("reg:squarederror", 8), ("multi:softprob", 8), ("binary:logistic", 60)])
@pytest.mark.parametrize("transform", [None, "logistic"])
def test_every_launch_passes_the_kernels_parameters_with_their_types(fake_gpu, objective, F, transform):
    booster, X = _model(objective, F)
    table = dg.TreeExplainer(booster).table
    out = gi.shap_values_interventional_device(table, X[:130], X[300:305], transform)
    assert out.shape == (130, table.n_groups, X.shape[1] + 1)
    want_bias = iv.shap_values_interventional(table, X[:1], X[300:305], transform=transform)[0, :, -1]
    np.testing.assert_array_equal(out[:, :, -1], np.broadcast_to(want_bias, out[:, :, -1].shape))
    names = [name for name, _ in fake_gpu.launches]
    assert names == (
        ["interventional_rows"] if transform is None else ["interventional_margins", "interventional_logistic_rows"]
    )
    shared = fake_gpu.launches[-1][1] > 0
    assert shared == ((2 if transform else 1) * gi._THREADS * X.shape[1] * 8 <= gi._ACC_SMEM_BYTES)


def test_bad_inputs_are_refused_before_any_launch(fake_gpu):
    booster, X = _model("reg:squarederror")
    table = dg.TreeExplainer(booster).table
    with pytest.raises(dg.DGBoostValueError, match="background"):
        gi.shap_values_interventional_device(table, X[:5], X[:0])
    with pytest.raises(dg.DGBoostValueError, match="transform"):
        gi.shap_values_interventional_device(table, X[:5], X[:3], "probit")
    with pytest.raises(dg.DGBoostValueError, match="columns"):
        gi.shap_values_interventional_device(table, X[:5], X[:3, :-1])
    assert fake_gpu.launches == []


def test_the_engines_share_one_interventional_call_and_the_gpu_sizes_its_chunks():
    booster, X = _model("multi:softprob")
    table = dg.TreeExplainer(booster).table
    want = iv.shap_values_interventional(table, X[:20], X[100:104])
    cpu = get_backend("cpu").shap_engine()
    np.testing.assert_array_equal(cpu.interventional(table, X[:20], X[100:104], None), want)
    assert cpu.chunk_rows(table, 3, False, 4) is None
    rows = CudaEngine(None).chunk_rows(table, table.n_groups, False, 4)  # sizing needs no GPU
    assert 256 <= rows <= 1 << 22
    assert rows * 8 * table.n_groups * (2 * table.n_features + 3) <= 256 << 20
