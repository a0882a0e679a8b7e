"""Find, assemble, compile and cache the CUDA kernels in ``kernels/`` (docs/design.md §1.5 "Kernels are files").

A kernel file is compiled as one translation unit: its local ``#include "x.cuh"`` lines are
inlined (each header once, as ``#pragma once`` would), so the text that is hashed is the
text that is compiled and the cache key covers every header. Modules are compiled by NVRTC
to a cubin for the current device, cached in memory per (source hash, options, architecture)
and on disk (the ``kernel_cache_dir`` option of :mod:`dgboost.config`, whose default is
``$DGBOOST_KERNEL_CACHE``, else ``~/.cache/dgboost/kernels``), so a second
process does not compile again, and loaded with ``cupy.RawModule(path=...)``.

Not ``cupy.RawModule(code=...)``: CuPy appends ``-ftz=true`` to every NVRTC compile, and
flushing float32 subnormals to zero changes comparisons (a row value of -1.4e-45 against a
threshold of 0 is "on" when flushed, "off" on the CPU): the devices must compare the same.

:func:`compile_ptx` compiles without a GPU (NVRTC from the ``nvidia-cuda-nvrtc`` wheel
through ``cupy_backends.cuda.libs.nvrtc``): CI uses it to check that every kernel builds.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import tempfile
import threading
from functools import lru_cache
from pathlib import Path

from ..config import get_config
from ..errors import DGBoostError

__all__ = [
    "kernel_dir",
    "kernel_files",
    "assemble",
    "compile_options",
    "get_module",
    "module_from_source",
    "compile_ptx",
    "compile_all",
]

_log = logging.getLogger("dgboost")
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*$', re.MULTILINE)
_PRAGMA_ONCE = re.compile(r"^\s*#\s*pragma\s+once\s*$", re.MULTILINE)
# No FMA contraction: split gains must round exactly as the CPU engine's float64 code does,
# or the two devices could pick different splits on near-ties. No flushing of float32
# subnormals (the module docstring says why).
_BASE_OPTIONS = ("-std=c++17", "--fmad=false", "-ftz=false")
_modules: dict[tuple, object] = {}  # by (source hash, options, architecture)
_by_file: dict[tuple, object] = {}  # by (kernel folder, file, defines, architecture): get_module
_lock = threading.Lock()
_announced = False


@lru_cache(maxsize=None)
def kernel_dir() -> Path:
    """The folder holding the ``.cu``/``.cuh`` files: installed package data or the checkout
    (found once a process: resolving the path took 0.05-0.3 ms, and :func:`get_module` asks
    for it at every call, 15 times a depth-16 SHAP call and once a round's gradients)."""
    package = Path(__file__).resolve().parents[1]
    for candidate in (package / "_kernels", package.parent / "kernels"):
        if (candidate / "common.cuh").is_file():
            return candidate
    raise DGBoostError(
        f"the CUDA kernel sources were not found (looked in {package / '_kernels'} and "
        f"{package.parent / 'kernels'}); reinstall dgboost"
    )


def kernel_files() -> list[str]:
    """Names of every compilable kernel file (``*.cu``)."""
    return sorted(p.name for p in kernel_dir().glob("*.cu"))


def assemble(name: str, text: str | None = None) -> str:
    """The source of ``kernels/<name>`` with its local includes inlined (each header once);
    with ``text``, that text in the file's place (a variant of it, which benchmarks compile
    through :func:`module_from_source`), its includes still from ``kernels/``."""
    folder = kernel_dir()
    seen: set[str] = set()

    def expand(file: str) -> str:
        path = folder / file
        if file == name and text is not None:
            body = text
        elif path.is_file():
            body = path.read_text()
        else:
            raise DGBoostError(f"kernel source {file!r} not found in {folder}")
        source = _PRAGMA_ONCE.sub("", body)

        def include(match: re.Match) -> str:
            header = match.group(1)
            if header in seen:
                return f"// {header} already included"
            seen.add(header)
            return f"// begin {header}\n{expand(header)}\n// end {header}"

        return _INCLUDE.sub(include, source)

    return expand(name)


@lru_cache(maxsize=1)
def _include_dirs() -> tuple[str, ...]:
    """CuPy's bundled CCCL (libcu++ ``<cuda/std/...>``): NVRTC has no C++ standard headers."""
    import cupy

    root = Path(cupy.__file__).resolve().parent / "_core" / "include"
    dirs = [
        root,
        root / "cupy" / "_cccl" / "libcudacxx",
        root / "cupy" / "_cccl" / "cub",
        root / "cupy" / "_cccl" / "thrust",
    ]
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


def _cache_dir() -> Path:
    """The on-disk cubin cache: ``kernel_cache_dir`` of :mod:`dgboost.config` (read at each
    compile), else ``~/.cache/dgboost/kernels``."""
    folder = get_config()["kernel_cache_dir"]
    return Path(folder) if folder is not None else Path.home() / ".cache" / "dgboost" / "kernels"


def _compile(source: str, name: str, options: tuple[str, ...], arch: str, cubin: bool) -> bytes:
    """NVRTC's cubin (``arch`` "sm_XX") or PTX (``arch`` "compute_XX") of ``source``."""
    from cupy_backends.cuda.libs import nvrtc

    program = nvrtc.createProgram(source, name, [], [])
    try:
        try:
            nvrtc.compileProgram(program, list(options) + [f"-arch={arch}"])
        except nvrtc.NVRTCError:
            raise DGBoostError(
                f"kernels/{name} failed to compile for {arch}:\n{nvrtc.getProgramLog(program)}"
            ) from None
        out = nvrtc.getCUBIN(program) if cubin else nvrtc.getPTX(program)
        return out if isinstance(out, bytes) else out.encode()
    finally:
        nvrtc.destroyProgram(program)


def _cubin_file(source: str, name: str, options: tuple[str, ...], arch: str) -> Path:
    """The cached cubin of ``source`` for ``arch``, compiled and written (atomically) on a miss."""
    key = hashlib.sha256("\0".join((source, *options, arch)).encode()).hexdigest()[:32]
    path = _cache_dir() / f"{Path(name).stem}-{arch}-{key}.cubin"
    if not path.is_file():
        global _announced
        if not _announced:
            _log.info("dgboost: compiling CUDA kernels (once; cached on disk afterwards)")
            _announced = True
        data = _compile(source, name, options, arch, cubin=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)  # another process may write the same bytes: either wins
    return path


def get_module(name: str, defines: dict | None = None):
    """The compiled ``cupy.RawModule`` of ``kernels/<name>`` for the current device (cached).

    A process assembles and hashes a kernel file once per (folder, file, defines,
    architecture): launchers ask for their module at every launch, and reading, expanding
    and hashing the sources each time cost 0.4-0.8 ms a launch (a depth-16 SHAP
    call launches 15 times: issue 32). A kernel file edited while a process runs therefore
    takes effect in the next process, as its disk cache entry is keyed by the new text."""
    key = (str(kernel_dir()), name, tuple(sorted((defines or {}).items())), _device_arch())
    module = _by_file.get(key)
    if module is None:
        module = _by_file[key] = module_from_source(assemble(name), name, defines)
    return module


def module_from_source(source: str, name: str, defines: dict | None = None):
    """The compiled ``cupy.RawModule`` of an assembled kernel ``source`` (cached as
    :func:`get_module` caches; ``name`` names the file in errors and in the disk cache).
    Benchmarks compile variants of a kernel file's text through it."""
    import cupy

    options = compile_options(defines)
    arch = f"sm_{_device_arch()}"
    key = (hashlib.sha256(source.encode()).hexdigest(), options, arch)
    module = _modules.get(key)
    if module is not None:
        return module
    with _lock:
        module = _modules.get(key)
        if module is None:
            module = cupy.RawModule(path=str(_cubin_file(source, name, options, arch)))
            _modules[key] = module
    return module


def compile_ptx(name: str, arch: str = "compute_90", defines: dict | None = None) -> str:
    """Compile ``kernels/<name>`` to PTX for ``arch`` without a GPU; raise with NVRTC's log.
    The options are those :func:`get_module` compiles with."""
    return _compile(assemble(name), name, compile_options(defines), arch, cubin=False).decode()


def compile_all(arch: str = "compute_90") -> dict[str, int]:
    """Compile every kernel file for ``arch``; returns {file: PTX length}."""
    return {name: len(compile_ptx(name, arch)) for name in kernel_files()}


if __name__ == "__main__":  # python -m dgboost.backend._nvrtc [arch]: the CI compile check
    import sys

    for file, size in compile_all(*(sys.argv[1:2] or ["compute_90"])).items():
        print(f"{file}: {size} bytes of PTX")
