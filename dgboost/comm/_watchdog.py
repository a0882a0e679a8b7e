"""A thread that aborts a communicator whose queued collectives stop finishing.

A collective queued on a GPU stream returns at once; if a peer is lost it never finishes,
and the rank's next blocking read waits forever. The watchdog keeps the queued collectives
in order (each with a ``done()`` check, e.g. a CUDA event's query) and, when the oldest has
been waiting longer than the timeout, records why and calls ``abort()`` from its own
thread. An aborted NCCL collective returns without an error and leaves partial sums in its
output, so the communicator checks :attr:`CollectiveWatchdog.fired` before every later
collective and when it closes, and raises there.
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Callable

__all__ = ["CollectiveWatchdog"]


class CollectiveWatchdog:
    """Watch queued collectives; abort when the oldest is older than ``timeout`` seconds.

    Parameters
    ----------
    timeout : float
        Seconds a queued collective may take.
    abort : callable
        Called once, from the watchdog's thread, when a collective is late.
    what : str
        Names the communicator in the reason (e.g. "NCCL rank 1 of 4").
    setup : callable, optional
        Run first in the watchdog's thread (e.g. make the rank's GPU current there).
    poll : float
        Seconds between checks.
    """

    def __init__(
        self,
        timeout: float,
        abort: Callable[[], None],
        what: str,
        setup: Callable[[], None] | None = None,
        poll: float = 0.005,
    ):
        self.timeout = float(timeout)
        self._abort = abort
        self._what = what
        self._setup = setup
        self._poll = float(poll)
        self._queue: collections.deque = collections.deque()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.fired: str | None = None

    def start(self) -> "CollectiveWatchdog":
        self._thread = threading.Thread(target=self._run, name="dgboost-collective-watchdog", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def track(self, name: str, done: Callable[[], bool]) -> None:
        """Watch one queued collective until ``done()`` is true."""
        with self._lock:
            self._queue.append((name, done, time.monotonic()))

    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def _late(self) -> str | None:
        """The reason to abort, if the oldest unfinished collective is late; drops finished ones."""
        with self._lock:
            while self._queue:
                name, done, since = self._queue[0]
                if done():
                    self._queue.popleft()
                    continue
                waited = time.monotonic() - since
                if waited > self.timeout:
                    return (
                        f"{name} on {self._what} did not finish within {self.timeout:g} s "
                        "(a peer was lost); the communicator was aborted"
                    )
                return None
        return None

    def _run(self) -> None:
        if self._setup is not None:
            self._setup()
        while not self._stop.wait(self._poll):
            reason = self._late()
            if reason is not None:
                self.fired = reason
                self._abort()
                return
