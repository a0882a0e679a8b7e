"""The notice that Numba is compiling the CPU kernels (else ~15 s of silence on a first run).

Said when Numba really compiles one of the CPU backend's kernels: a Numba compilation event
(``"numba:compile"``, which Numba raises only after its on-disk cache had nothing for the
kernel), not a guess from the cache's files, so a run served by ``NUMBA_CACHE_DIR`` or the
default cache says nothing. At most once per process, on stderr, and only at ``verbosity`` 1
or more (of :mod:`dgboost.config`, as the compiling thread sees it). A caller can send the
notice elsewhere for its thread (:func:`notice_to`): a Dask rank sends it to the client,
which says it once per job rather than every worker once.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator

from ..config import get_config

__all__ = ["NOTICE", "watch_compilation", "notice_to"]

NOTICE = (
    "dgboost: compiling the CPU kernels with Numba (first run only; later runs use the on-disk cache; "
    "`dgboost warmup` compiles them ahead, e.g. in a Dockerfile)..."
)
_KERNELS_MODULE = "dgboost.backend._cpu_kernels"

_lock = threading.Lock()
_state = {"watching": False, "said": False}
_local = threading.local()  # .sink: where the calling thread's notice goes instead of stderr


def _say() -> None:
    """The notice, once per process: to the calling thread's sink, else on stderr."""
    with _lock:
        if _state["said"]:
            return
        _state["said"] = True
    sink = getattr(_local, "sink", None)
    if sink is not None:
        sink()
        return
    try:
        quiet = get_config()["verbosity"] < 1
    except Exception:  # noqa: BLE001 - an unreadable configuration must not stop a compilation
        quiet = False
    if not quiet:
        print(NOTICE, file=sys.stderr, flush=True)


def _listener_class():
    from numba.core import event

    class _KernelCompiles(event.Listener):
        """Says the notice when a compilation of a CPU backend kernel starts (in its thread)."""

        def on_start(self, ev) -> None:
            dispatcher = (ev.data or {}).get("dispatcher")
            module = getattr(getattr(dispatcher, "py_func", None), "__module__", "")
            if module == _KERNELS_MODULE:
                _say()

        def on_end(self, ev) -> None:
            pass

    return _KernelCompiles


def watch_compilation() -> None:
    """Listen for compilations of the CPU kernels (once per process; cheap afterwards)."""
    with _lock:
        if _state["watching"]:
            return
        _state["watching"] = True
    from numba.core import event

    event.register("numba:compile", _listener_class()())


@contextlib.contextmanager
def notice_to(sink: Callable[[], None]) -> Iterator[None]:
    """Inside the block, the calling thread's notice calls ``sink()`` instead of printing.

    Parameters
    ----------
    sink : callable
        Called with no arguments at most once per process, in the compiling thread, before
        the compilation; it should return at once.
    """
    before = getattr(_local, "sink", None)
    _local.sink = sink
    try:
        yield
    finally:
        _local.sink = before
