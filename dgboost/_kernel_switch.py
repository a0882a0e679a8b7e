"""The CPU engine's parallel kernels, run as serial twins while a cold cache is filled in the background.

Numba compiles a kernel with ``prange`` loops (``parallel=True``) about three times slower
than the same function without them: its parfor passes and a gufunc per loop. With an empty
on-disk cache the first CPU training of a process spent nearly all of its 13-14 s to the
first round compiling on two cores (``benchmarks/results/cold_start_cpu.json``). So when the cache holds no
parallel version of a kernel for this machine, :class:`KernelTable` calls its *serial twin*
instead -- the same Python function compiled without ``parallel=True`` (``prange`` runs as
``range`` on the calling thread) -- and hands the kernel and its argument types to a
background process (:mod:`._compile_server`) that compiles the parallel version into the
same cache. Once that process reports the kernel compiled, calls go to the parallel version,
which Numba then loads from the cache. The first rounds run on one thread; the time to the
first round falls to what compiling the serial twins costs (about 5 s of the 7 s measured).

The twins compute what the parallel kernels compute: every kernel's results are independent
of its thread count (integer histogram sums, row-wise arithmetic, a stable partition), the
property that makes a model the same on any number of threads, so a training that switches
mid-way grows the same trees.

A warm cache (the parallel kernels compiled for this CPU, by an earlier process or by ``dgboost
warmup``) changes nothing: the parallel kernels are called from the first call. Should the
background process fail to start or die, calls go to the parallel kernels, which then compile
in this process as before.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import types
from collections.abc import Iterator

from ._compile_server import encode_request

__all__ = ["KernelTable", "compile_in_process"]

_SERIAL_SUFFIX = "__serial"


def _is_parallel_kernel(value) -> bool:
    """Whether ``value`` is a Numba CPU dispatcher compiled with ``parallel=True``."""
    options = getattr(value, "targetoptions", None)
    return isinstance(options, dict) and bool(options.get("parallel")) and hasattr(value, "py_func")


def _serial_twin(kernel):
    """The kernel's Python function compiled without ``parallel=True``, cached under a name of its
    own (Numba's cache files are named by the function's qualified name: the twin's must not be
    mistaken for the parallel kernel's, whose index keys do not say how it was compiled)."""
    import numba

    fn = kernel.py_func
    name = fn.__name__ + _SERIAL_SUFFIX
    twin = types.FunctionType(fn.__code__, fn.__globals__, name, fn.__defaults__, fn.__closure__)
    twin.__qualname__ = fn.__qualname__ + _SERIAL_SUFFIX
    twin.__module__ = fn.__module__
    twin.__doc__ = fn.__doc__
    options = {k: v for k, v in kernel.targetoptions.items() if k not in ("parallel", "nopython")}
    return numba.njit(cache=True, **options)(twin)


def _cached_for_this_machine(kernel) -> bool:
    """Whether Numba's on-disk cache holds a compilation of ``kernel`` for this CPU (any
    signature: a signature it lacks is compiled in this process on its first call, as for any
    Numba function). Read through Numba's cache objects; where they are not as expected, the
    kernel counts as cached, which is how dgboost behaved before the twins."""
    try:
        index = kernel._cache._cache_file._load_index()
        magic = kernel.targetctx.codegen().magic_tuple()
    except Exception:  # noqa: BLE001 - another Numba's internals: fall back to plain Numba behaviour
        return True
    return any(key[1] == magic for key in index)


class _Background:
    """The background compile process of this process (at most one), and what it was asked."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.process: subprocess.Popen | None = None
        self.failed = False
        self.next_id = 0
        self.waiting: dict[int, _Switch] = {}  # request id -> the switch waiting for it

    def _start(self) -> bool:
        """Start the process and its reader thread (under ``self.lock``); False if it cannot run."""
        if self.process is not None:
            return True
        if self.failed or not sys.executable:
            return False
        # the process must compile the kernels' files that this process imported (the cache is
        # keyed on them), wherever this dgboost came from: a source tree on sys.path, an install
        package = os.path.dirname(os.path.abspath(__file__))
        kernels_file = os.path.join(package, "backend", "_cpu_kernels.py")
        package_root = os.path.dirname(package)
        env = os.environ.copy()
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "dgboost._compile_server", kernels_file],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=env,
            )
        except OSError:
            self.failed = True
            return False
        threading.Thread(target=self._read, args=(self.process,), name="dgboost-compile-reader", daemon=True).start()
        return True

    def request(self, switch: _Switch, sig) -> bool:
        """Ask for ``switch``'s parallel kernel compiled for ``sig``; False if no process can."""
        with self.lock:
            if not self._start():
                return False
            payload = encode_request(switch.module, switch.name, sig)
            if payload is None:
                return False
            request_id = self.next_id
            self.next_id += 1
            try:
                self.process.stdin.write(f"{request_id} {payload}\n".encode("utf-8"))
                self.process.stdin.flush()
            except (OSError, ValueError):
                self.failed = True
                return False
            self.waiting[request_id] = switch
            switch.pending += 1
            return True

    def _read(self, process: subprocess.Popen) -> None:
        """Mark each switch ready when every compilation it waits for is reported; on the
        process's end, release every waiting switch to its parallel kernel."""
        for line in process.stdout:
            words = line.decode("ascii", "replace").split()
            if not words or not words[0].isdigit():
                continue
            with self.lock:
                switch = self.waiting.pop(int(words[0]), None)
                if switch is not None:
                    switch.pending -= 1
                    if switch.pending == 0:
                        switch.ready = True
        with self.lock:
            self.failed = True
            for switch in self.waiting.values():
                switch.ready = True
            self.waiting.clear()


_background = _Background()
_state = {"twins": True}  # False: parallel kernels from the first call, compiled in this process
_switches: list[_Switch] = []  # every stand-in made, for a forked child to release


def _after_fork_in_child() -> None:
    """A forked child shares its parent's pipes to the background process, whose answers go to
    the parent: the child starts afresh, its waiting kernels compiling in it when called."""
    global _background
    _background = _Background()
    for switch in _switches:
        if switch.pending:
            switch.pending = 0
            switch.ready = True
        switch.lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class _Switch:
    """A parallel kernel's stand-in: its serial twin until the kernel is compiled, then the kernel."""

    __slots__ = ("module", "name", "parallel", "serial", "ready", "decided", "pending", "asked", "lock")

    def __init__(self, name: str, kernel) -> None:
        self.module = kernel.py_func.__module__
        self.name = name
        self.parallel = kernel
        self.serial = None
        self.ready = False  # calls go to the parallel kernel
        self.decided = False  # the cache has been looked at
        self.pending = 0  # background compilations not yet reported
        self.asked = 0  # signatures of the twin already handed to the background process
        self.lock = threading.Lock()
        _switches.append(self)

    def __call__(self, *args):
        if self.ready:
            return self.parallel(*args)
        return self._cold_call(args)

    def _cold_call(self, args):
        if not _state["twins"]:
            return self.parallel(*args)
        with self.lock:
            if not self.decided:
                self.decided = True
                if _cached_for_this_machine(self.parallel):
                    self.ready = True
                else:
                    self.serial = _serial_twin(self.parallel)
            if self.ready:
                serial = None
            else:
                serial = self.serial
        if serial is None:
            return self.parallel(*args)
        result = serial(*args)
        self._ask_for_new_signatures()
        return result

    def _ask_for_new_signatures(self) -> None:
        """Hand the twin's new signatures to the background process (or, if none can run, give
        the calls to the parallel kernel, which compiles here)."""
        with self.lock:
            signatures = list(self.serial.signatures)
            new, self.asked = signatures[self.asked :], len(signatures)
        for sig in new:
            if not _background.request(self, sig):
                self.ready = True
                return


class KernelTable(types.SimpleNamespace):
    """A kernel module's contents, its parallel kernels behind :class:`_Switch` stand-ins.

    Parameters
    ----------
    module : module
        A module of Numba kernels that the background process may compile
        (``_compile_server.MODULES``: the CPU backend's, and the CPU SHAP engine's).
    """

    def __init__(self, module) -> None:
        names = {k: v for k, v in vars(module).items() if not k.startswith("__")}
        super().__init__(**{k: _Switch(k, v) if _is_parallel_kernel(v) else v for k, v in names.items()})


@contextlib.contextmanager
def compile_in_process() -> Iterator[None]:
    """Within the block, every kernel not yet switched calls its parallel version, compiled in
    this process where the cache lacks it (no twins, no background process): what ``dgboost
    warmup`` wants, whose job is to fill the cache before it returns."""
    saved = _state["twins"]
    _state["twins"] = False
    try:
        yield
    finally:
        _state["twins"] = saved
