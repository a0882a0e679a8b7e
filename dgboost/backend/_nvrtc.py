"""Find, assemble, compile and cache the CUDA kernels in ``kernels/`` (DESIGN.md §1.5).

A kernel file is compiled as one translation unit: its local ``#include "x.cuh"`` lines are
inlined (each header once, as ``#pragma once`` would), so the text that is hashed is the
text that is compiled and the cache key covers every header. Modules are compiled through
``cupy.RawModule`` (NVRTC) for the current device and cached in memory per (source hash,
options, architecture); CuPy also keeps the compiled binary in its on-disk cache
(``~/.cupy/kernel_cache``), so a second process does not compile again.

:func:`compile_ptx` compiles without a GPU (NVRTC from the ``nvidia-cuda-nvrtc`` wheel
through ``cupy_backends.cuda.libs.nvrtc``): CI uses it to check that every kernel builds.
"""
from __future__ import annotations

import hashlib
import logging
import re
import threading
from functools import lru_cache
from pathlib import Path

from ..errors import DGBoostError

__all__ = ["kernel_dir", "kernel_files", "assemble", "compile_options", "get_module", "compile_ptx",
           "compile_all"]

_log = logging.getLogger("dgboost")
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*$', re.MULTILINE)
_PRAGMA_ONCE = re.compile(r"^\s*#\s*pragma\s+once\s*$", re.MULTILINE)
# No FMA contraction: split gains must round exactly as the CPU engine's float64 code does,
# or the two devices could pick different splits on near-ties.
_BASE_OPTIONS = ("-std=c++17", "--fmad=false")
_modules: dict[tuple, object] = {}
_lock = threading.Lock()
_announced = False


def kernel_dir() -> Path:
    """The folder holding the ``.cu``/``.cuh`` files: installed package data or the checkout."""
    package = Path(__file__).resolve().parents[1]
    for candidate in (package / "_kernels", package.parent / "kernels"):
        if (candidate / "common.cuh").is_file():
            return candidate
    raise DGBoostError(f"the CUDA kernel sources were not found (looked in {package / '_kernels'} and "
                       f"{package.parent / 'kernels'}); reinstall dgboost")


def kernel_files() -> list[str]:
    """Names of every compilable kernel file (``*.cu``)."""
    return sorted(p.name for p in kernel_dir().glob("*.cu"))


def assemble(name: str) -> str:
    """The source of ``kernels/<name>`` with its local includes inlined (each header once)."""
    folder = kernel_dir()
    seen: set[str] = set()

    def expand(file: str) -> str:
        path = folder / file
        if not path.is_file():
            raise DGBoostError(f"kernel source {file!r} not found in {folder}")
        text = _PRAGMA_ONCE.sub("", path.read_text())

        def include(match: re.Match) -> str:
            header = match.group(1)
            if header in seen:
                return f"// {header} already included"
            seen.add(header)
            return f"// begin {header}\n{expand(header)}\n// end {header}"

        return _INCLUDE.sub(include, text)

    return expand(name)


@lru_cache(maxsize=1)
def _include_dirs() -> tuple[str, ...]:
    """CuPy's bundled CCCL (libcu++ ``<cuda/std/...>``): NVRTC has no C++ standard headers."""
    import cupy

    root = Path(cupy.__file__).resolve().parent / "_core" / "include"
    dirs = [root, root / "cupy" / "_cccl" / "libcudacxx", root / "cupy" / "_cccl" / "cub",
            root / "cupy" / "_cccl" / "thrust"]
    return tuple(str(d) for d in dirs if d.is_dir())


def compile_options(defines: dict | None = None) -> tuple[str, ...]:
    """NVRTC options: the base options, CuPy's CCCL include folders and ``-D`` defines."""
    opts = list(_BASE_OPTIONS) + [f"-I{d}" for d in _include_dirs()]
    for key, value in sorted((defines or {}).items()):
        opts.append(f"-D{key}={value}")
    return tuple(opts)


def _device_arch() -> str:
    import cupy

    return cupy.cuda.Device().compute_capability


def get_module(name: str, defines: dict | None = None):
    """The compiled ``cupy.RawModule`` of ``kernels/<name>`` for the current device (cached)."""
    import cupy

    global _announced
    source = assemble(name)
    options = compile_options(defines)
    key = (hashlib.sha256(source.encode()).hexdigest(), options, _device_arch())
    module = _modules.get(key)
    if module is not None:
        return module
    with _lock:
        module = _modules.get(key)
        if module is None:
            if not _announced:
                _log.info("dgboost: compiling CUDA kernels (once; cached on disk afterwards)")
                _announced = True
            try:
                module = cupy.RawModule(code=source, options=options, backend="nvrtc")
                module.compile()
            except cupy.cuda.compiler.CompileException as exc:
                raise DGBoostError(f"kernels/{name} failed to compile:\n{exc}") from None
            _modules[key] = module
    return module


def compile_ptx(name: str, arch: str = "compute_90", defines: dict | None = None) -> str:
    """Compile ``kernels/<name>`` to PTX for ``arch`` without a GPU; raise with NVRTC's log."""
    from cupy_backends.cuda.libs import nvrtc

    source = assemble(name)
    program = nvrtc.createProgram(source, name, [], [])
    try:
        try:
            nvrtc.compileProgram(program, list(compile_options(defines)) + [f"-arch={arch}"])
        except nvrtc.NVRTCError:
            raise DGBoostError(f"kernels/{name} failed to compile for {arch}:\n"
                               f"{nvrtc.getProgramLog(program)}") from None
        ptx = nvrtc.getPTX(program)
        return ptx.decode() if isinstance(ptx, bytes) else ptx
    finally:
        nvrtc.destroyProgram(program)


def compile_all(arch: str = "compute_90") -> dict[str, int]:
    """Compile every kernel file for ``arch``; returns {file: PTX length}."""
    return {name: len(compile_ptx(name, arch)) for name in kernel_files()}


if __name__ == "__main__":  # python -m dgboost.backend._nvrtc [arch]: the CI compile check
    import sys

    for file, size in compile_all(*(sys.argv[1:2] or ["compute_90"])).items():
        print(f"{file}: {size} bytes of PTX")
