"""The background process that compiles the CPU engine's parallel kernels into Numba's cache.

Started by :mod:`._kernel_switch` when a training finds the on-disk cache cold. It reads
requests from its standard input, one a line: ``<id> <JSON of the kernel's name and its
argument types>`` (:func:`encode_request`: arrays by dtype, dimensions, layout and flags,
scalars by name; no pickles); compiles the named kernel of one of :data:`MODULES` for those
types (Numba writes it to the cache the training process reads, the environment being the
same) and answers ``<id> ok`` or ``<id> error <type>`` on its standard output. It runs at a
lower priority (``nice`` 10) than the training, which goes on meanwhile. It ends when its
input closes, after compiling what it was asked: a training that ends first still leaves the
cache warm for the next process.
"""

from __future__ import annotations

import importlib
import json
import os
import sys

__all__ = ["main", "encode_request", "MODULES"]


#: the modules whose parallel kernels this process compiles (nothing else is imported)
MODULES = (
    "dgboost.backend._cpu_kernels",
    "dgboost.explain.tables",
    "dgboost.explain.treeshap",
    "dgboost.explain.interventional",
)


def encode_request(module: str, name: str, sig: tuple) -> str | None:
    """The JSON line that asks for kernel ``name`` of ``module`` compiled for the Numba
    argument types ``sig``.

    Parameters
    ----------
    module : str
        One of :data:`MODULES`.
    name : str
        A parallel kernel of that module.
    sig : tuple of numba.types.Type
        Its argument types, as the serial twin's dispatcher recorded them.

    Returns
    -------
    str or None
        None when an argument type is not one this protocol carries (a NumPy array, a number,
        a boolean or None): the training then compiles that kernel itself.
    """
    from numba.core import types

    args = []
    for t in sig:
        if isinstance(t, types.Array) and isinstance(t.dtype, (types.Number, types.Boolean)):
            args.append(["array", str(t.dtype), t.ndim, t.layout, bool(t.mutable), bool(t.aligned)])
        elif isinstance(t, (types.Number, types.Boolean)):
            args.append(["scalar", str(t)])
        elif isinstance(t, types.NoneType):
            args.append(["none"])
        else:
            return None
    return json.dumps({"module": module, "kernel": name, "args": args}, separators=(",", ":"))


def _decode_request(text: str) -> tuple[str, str, tuple]:
    """(module, kernel name, Numba argument types) of a line made by :func:`encode_request`."""
    import numpy as np
    from numba import from_dtype
    from numba.core import types

    request = json.loads(text)

    def arg_type(arg):
        if arg[0] == "array":
            _, dtype, ndim, layout, mutable, aligned = arg
            return types.Array(from_dtype(np.dtype(dtype)), int(ndim), layout, readonly=not mutable, aligned=aligned)
        if arg[0] == "scalar":
            return from_dtype(np.dtype(arg[1]))
        if arg[0] == "none":
            return types.none
        raise ValueError(f"unknown argument kind {arg[0]!r}")

    return str(request["module"]), str(request["kernel"]), tuple(arg_type(arg) for arg in request["args"])


def main() -> int:
    """Serve compile requests until standard input closes.

    The first command-line argument, if given, is the path of the ``_cpu_kernels.py`` that the
    training process imported: a process that imports another one answers ``mismatch`` and ends
    (the training then compiles its kernels itself).

    Returns
    -------
    int
        The exit status: 0, or 1 after a mismatch.
    """
    # below the training that waits for it: the training runs on, on serial twins, meanwhile
    if hasattr(os, "nice"):
        os.nice(10)
    kernels = importlib.import_module(MODULES[0])  # the training's package: see the check below

    out = sys.stdout.buffer
    expected = sys.argv[1] if len(sys.argv) > 1 else None
    if expected is not None and os.path.abspath(kernels.__file__) != os.path.abspath(expected):
        # another dgboost than the training's: its cache entries would be of no use to it
        out.write(f"mismatch {os.path.abspath(kernels.__file__)}\n".encode())
        out.flush()
        return 1
    for line in sys.stdin.buffer:
        words = line.split(maxsplit=1)
        if len(words) != 2:
            continue
        request_id = words[0].decode("ascii")
        try:
            module, name, sig = _decode_request(words[1].decode("utf-8"))
            if module not in MODULES:
                raise ValueError(f"not a kernel module: {module}")
            getattr(importlib.import_module(module), name).compile(sig)
            answer = f"{request_id} ok\n"
        except Exception as exc:  # noqa: BLE001 - told to the training process, which compiles it itself
            answer = f"{request_id} error {type(exc).__name__}\n"
        try:
            out.write(answer.encode("ascii"))
            out.flush()
        except OSError:  # the training process has ended: the cache is for the next one
            out = open(os.devnull, "wb")  # noqa: SIM115 - kept open until the process ends
    return 0


if __name__ == "__main__":
    sys.exit(main())
