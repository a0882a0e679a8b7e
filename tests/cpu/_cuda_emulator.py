"""Run ``kernels/*.cu`` on the host: a CUDA execution model on threads, for machines without a GPU.

A kernel file (its headers inlined, as NVRTC gets it) is compiled by the host C++ compiler
with ``cuda_emulator/emulator.h`` in front: a block is ``blockDim.x`` host threads sharing
``__shared__`` variables, ``__syncthreads`` a barrier, warp shuffles and ballots exchanges
between the 32 threads of a warp, blocks run one after another. Floating point is IEEE
without contraction (``-ffp-contract=off``), as NVRTC's ``--fmad=false``; so a kernel's
float64 results are the GPU's. :class:`EmulatedCUDABackend` is the CUDA backend with NumPy
arrays and its launches sent here, so the backend's own host code (arguments, their order
and C types, launch shapes, scratch sizes) runs too: each argument is checked against the
kernel's parameter (size, and integer / floating point / pointer), which a real launch does
not do.

Slow (a host thread per CUDA thread): for small inputs in tests. It does not model memory
races between blocks, warp divergence or timing; the GPU tests remain the proof.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import types
from pathlib import Path

import numpy as np

from dgboost.backend._nvrtc import assemble
from dgboost.backend.cuda import CUDABackend

__all__ = ["available", "EmulatedCUDABackend", "emulated_module", "route_cuda_training"]

_HERE = Path(__file__).resolve().parent / "cuda_emulator"
_KERNEL = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s+)?(\w+)\s*\(')
_DYNAMIC_SHARED = re.compile(r"extern\s+__shared__\s+([\w ]+?)\s+(\w+)\s*\[\s*\]\s*;")
_modules: dict[str, "_Module"] = {}


def available() -> bool:
    """Whether a host C++20 compiler is there."""
    return shutil.which(os.environ.get("CXX", "g++")) is not None


def _source(file: str) -> tuple[str, list[str]]:
    src = assemble(file)
    names = _KERNEL.findall(src)
    src = _DYNAMIC_SHARED.sub(lambda m: f"{m[1]}* {m[2]} = reinterpret_cast<{m[1]}*>(dg_dynamic_shared_bytes);", src)
    src = re.sub(r"\b__shared__\b", "static", src)
    table = ", ".join(f'dg_kernel("{n}", &{n})' for n in names)
    text = f'#include "emulator.h"\n{src}\n#define DG_KERNELS {table}\n#include "launcher.h"\n'
    return text, names


class _Module:
    def __init__(self, file: str):
        text, names = _source(file)
        digest = hashlib.sha256(
            (text + (_HERE / "emulator.h").read_text() + (_HERE / "launcher.h").read_text()).encode()
        )
        folder = Path(tempfile.gettempdir()) / "dgboost-cuda-emulator"
        folder.mkdir(exist_ok=True)
        lib = folder / f"{file}.{digest.hexdigest()[:16]}.so"
        if not lib.exists():
            cpp = folder / f"{file}.{os.getpid()}.cpp"
            cpp.write_text(text)
            cmd = [os.environ.get("CXX", "g++"), "-std=c++20", "-O1", "-ffp-contract=off", "-fno-fast-math"]
            cmd += ["-shared", "-fPIC", "-pthread", "-w", f"-I{_HERE}", str(cpp), "-o", f"{lib}.{os.getpid()}"]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode:
                raise RuntimeError(f"the host compiler failed on {file} ({cpp}):\n{done.stderr[-4000:]}")
            os.replace(f"{lib}.{os.getpid()}", lib)
            cpp.unlink()
        self.lib = ctypes.CDLL(str(lib))
        self.lib.dg_kernel_name.restype = ctypes.c_char_p
        self.lib.dg_launch.argtypes = [ctypes.c_int] + [ctypes.c_uint] * 4 + [ctypes.c_void_p]
        self.kernels = {}
        for i in range(self.lib.dg_n_kernels()):
            sizes, kinds = (ctypes.c_int * 64)(), (ctypes.c_int * 64)()
            n = self.lib.dg_kernel_params(i, sizes, kinds)
            self.kernels[self.lib.dg_kernel_name(i).decode()] = (i, list(zip(sizes[:n], kinds[:n])))
        assert sorted(self.kernels) == sorted(names)

    def launch(self, name: str, grid, block: int, args, shared: int = 0) -> None:
        """Run kernel ``name`` over ``grid`` (an int, or (x, y) or (x, y, z)) blocks of ``block`` threads."""
        index, params = self.kernels[name]
        if len(args) != len(params):
            raise TypeError(f"{name}: {len(args)} arguments for {len(params)} parameters")
        if shared > 1 << 18:
            raise ValueError(f"{name}: {shared} bytes of dynamic shared memory (the emulator holds 256 KiB)")
        holders, pointers = [], (ctypes.c_void_p * max(1, len(args)))()
        for k, (arg, (size, kind)) in enumerate(zip(args, params)):
            holder = _argument(name, k, arg, size, kind)
            holders.append(holder)
            pointers[k] = ctypes.cast(ctypes.pointer(holder), ctypes.c_void_p)
        dims = tuple(grid) if isinstance(grid, tuple) else (grid,)
        if not 1 <= len(dims) <= 3:
            raise ValueError(f"{name}: a grid of {len(dims)} dimensions")
        gx, gy, gz = (tuple(int(d) for d in dims) + (1, 1))[:3]
        self.lib.dg_launch(index, gx, gy, gz, int(block), pointers)


def _argument(kernel: str, k: int, arg, size: int, kind: int):
    """A ctypes value holding ``arg`` as the kernel's parameter k (size bytes, kind 0 integer,
    1 floating point, 2 pointer), or TypeError where a real launch would pass other bytes."""
    where = f"{kernel} parameter {k}"
    if isinstance(arg, np.ndarray):
        if kind != 2:
            raise TypeError(f"{where}: an array passed for a {size}-byte {'float' if kind else 'integer'}")
        return ctypes.c_void_p(arg.ctypes.data)  # a view's first element, as CuPy passes it
    if arg is None and kind == 2:
        return ctypes.c_void_p(0)  # CuPy passes None as a null pointer
    if kind == 2:
        raise TypeError(f"{where}: {type(arg).__name__} passed for a pointer")
    if not isinstance(arg, np.generic):
        raise TypeError(f"{where}: a Python {type(arg).__name__} (CuPy would pick its C type)")
    dtype = arg.dtype
    if dtype.itemsize != size or (dtype.kind == "f") != (kind == 1):
        raise TypeError(f"{where}: {dtype} passed for a {size}-byte {'float' if kind == 1 else 'integer'}")
    return (ctypes.c_char * size).from_buffer_copy(arg.tobytes())


def emulated_module(file: str) -> _Module:
    if file not in _modules:
        _modules[file] = _Module(file)
    return _modules[file]


class EmulatedCUDABackend(CUDABackend):
    """The CUDA backend with NumPy arrays for device arrays and the emulator for launches.

    Parameters
    ----------
    shared_bytes : int
        The opt-in shared memory per block it reports (an H100/H200's by default); smaller
        values make the backend take its paths for big inputs on small ones.
    sm_count : int
    """

    def __init__(self, shared_bytes: int = 232_448, sm_count: int = 4):  # noqa: D107 - no super(): no device
        self.xp = np
        self._functions = {}
        self._ptr_cache = {}
        self.device_id = 0
        self.sm_count = sm_count
        self.shared_bytes = shared_bytes
        self.group_bytes = max(16 * 256, min(shared_bytes, 233_472 // 4 - 1024))
        self._no_mask = np.ones(1, np.bool_)
        self._no_bounds = np.zeros(2, np.float64)
        self._no_signs = np.zeros(1, np.int8)
        self._no_cat_nodes = (
            np.zeros(1, np.uint8),
            np.zeros(1, np.int64),
            np.zeros(1, np.int32),
            np.zeros(1, np.uint32),
            np.int32(0),
        )
        self._scratch_arrays = {}
        self._work_arrays = {}
        self._split_levels = 0
        self._layout_cache = None
        self._staging = []
        self._staging_next = 0
        self._scanned = {}
        self._partition_done = np.zeros(1, np.uint32)
        self._no_split = (np.int32(0), np.int32(0)) + (np.zeros(2, np.int64),) * 6 + (np.int64(0),)
        self._node_done = np.zeros(256, np.uint32)
        self.launches: list[tuple[str, int, int, int]] = []  # (kernel, grid, block, shared bytes)
        self.kernel_attributes: dict[str, types.SimpleNamespace] = {}

    def _launch(self, file, name, n, args, threads=256, shared=0, grid=None):
        from dgboost.backend.cuda import _grid

        if grid is None:
            grid = _grid(n, self.sm_count, threads)
        grid = tuple(int(g) for g in grid) if isinstance(grid, tuple) else int(grid)
        if shared > self.shared_bytes:
            raise ValueError(f"{name}: {shared} bytes of shared memory, more than the {self.shared_bytes} of a block")
        # past 48 KiB of shared memory (dynamic plus up to 1 KiB static) a launch needs the
        # kernel's opt-in: set by the caller, or by CUDABackend._launch when the dynamic part
        # alone is past 48 KiB
        opted = getattr(self.kernel_attributes.get(name), "max_dynamic_shared_size_bytes", 0)
        if shared > 48 * 1024:
            opted = max(opted, shared)
        if shared + 1024 > 48 * 1024 and opted < shared:
            raise ValueError(f"{name}: {shared} bytes of dynamic shared memory without the opt-in past 48 KiB")
        self.launches.append((name, grid, threads, shared))
        emulated_module(file).launch(name, grid, threads, args, shared)

    def _kernel(self, file: str, name: str):
        """A stand-in for a loaded kernel: its attributes (the shared memory opt-in) are
        recorded in ``kernel_attributes[name]``."""
        return self.kernel_attributes.setdefault(name, types.SimpleNamespace())

    @staticmethod
    def _address(array) -> int:
        return array.ctypes.data

    def _allow_shared(self, file: str, name: str, shared: int) -> None:
        self._kernel(file, name).max_dynamic_shared_size_bytes = shared

    def asarray(self, array):
        return np.asarray(array)

    def resident(self, array):
        return array  # NumPy arrays are this backend's device arrays

    def empty(self, shape, dtype):
        out = np.empty(shape, dtype)
        out.view(np.uint8).fill(0xFF)  # poisoned, as PoisonedCUDABackend's
        return out

    def zeros(self, shape, dtype):
        return np.zeros(shape, dtype)  # (the backend's memset is CuPy's)

    def _scratch(self, name, size, dtype):
        # reused as on a device (a call that reads one while another writes it fails the
        # tests), and poisoned at every hand-out (so is one read before it is written)
        held = super()._scratch(name, size, dtype)
        held.view(np.uint8).fill(0xFF)
        return held

    def _work(self, name, shape, dtype, reserve=0):
        held = super()._work(name, shape, dtype, reserve)
        held.view(np.uint8).fill(0xFF)  # poisoned at every hand-out, as above
        return held

    def to_host(self, array):
        return np.asarray(array)

    def synchronize(self):
        pass

    def release_cached_memory(self):
        pass  # NumPy arrays: no pool

    # -- what training needs besides kernels: host stand-ins for CuPy's streams and copies ----
    def check_training_memory(self, *args, **kwargs) -> int:
        return 0

    def read_later(self, arrays):
        copies = [np.array(a, copy=True) for a in arrays]
        return type("_Read", (), {"result": lambda self: copies})()

    def concatenate(self, arrays):
        return np.concatenate([np.asarray(a) for a in arrays])

    def logistic_gradient(self, margin, label, weight, scale_pos_weight: float):
        from dgboost.backend.cpu import CPUBackend

        return CPUBackend().logistic_gradient(margin, label, weight, scale_pos_weight)

    def sketch_cuts(self, values, rows, features, max_bin, block_values, weights=None):
        return None  # the host sketch (the device sketch gives its cuts bit for bit)


def route_cuda_training(monkeypatch) -> EmulatedCUDABackend:
    """Make ``device="cuda"`` training (``monkeypatch``'s test only) run on a new emulated
    CUDA backend, which is returned; other devices keep their backends."""
    import dgboost._training_job as job

    backend = EmulatedCUDABackend()
    cpu_backend = job.get_backend
    monkeypatch.setattr(
        job,
        "get_backend",
        lambda device, nthread=0: backend if str(device).startswith("cuda") else cpu_backend(device, nthread),
    )
    return backend
