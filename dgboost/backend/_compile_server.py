"""The background process that compiles the CPU engine's parallel kernels into Numba's cache.

Started by :mod:`._kernel_switch` when a training finds the on-disk cache cold. It reads
requests from its standard input, one a line: ``<id> <base64 pickle of (kernel name, Numba
signature)>``; compiles the named kernel of :mod:`._cpu_kernels` for that signature (Numba
writes it to the cache the training process reads, the environment being the same) and
answers ``<id> ok`` or ``<id> error <type>`` on its standard output. It runs at a lower
priority (``nice`` 10) than the training, which goes on meanwhile. It ends when its input
closes, after compiling what it was asked: a training that ends first still leaves the
cache warm for the next process.
"""

from __future__ import annotations

import base64
import os
import pickle
import sys

__all__ = ["main"]


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
    from . import _cpu_kernels as kernels

    out = sys.stdout.buffer
    expected = sys.argv[1] if len(sys.argv) > 1 else None
    if expected is not None and os.path.abspath(kernels.__file__) != os.path.abspath(expected):
        # another dgboost than the training's: its cache entries would be of no use to it
        out.write(f"mismatch {os.path.abspath(kernels.__file__)}\n".encode())
        out.flush()
        return 1
    for line in sys.stdin.buffer:
        words = line.split()
        if len(words) != 2:
            continue
        request_id = words[0].decode("ascii")
        try:
            name, sig = pickle.loads(base64.b64decode(words[1]))
            getattr(kernels, name).compile(sig)
            answer = f"{request_id} ok\n"
        except Exception as exc:  # noqa: BLE001 - told to the training process, which compiles it itself
            answer = f"{request_id} error {type(exc).__name__}\n"
        try:
            out.write(answer.encode("ascii"))
            out.flush()
        except OSError:  # the training process has ended: the cache is for the next one
            out = _Discard()
    return 0


class _Discard:
    """Where answers go once nobody reads them."""

    def write(self, data: bytes) -> None:
        pass

    def flush(self) -> None:
        pass


if __name__ == "__main__":
    sys.exit(main())
