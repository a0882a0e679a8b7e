"""A worker that never answers, and a call that must end within a bound: the shared pieces of
the bounded-wait tests (tests/dask/test_bounded_waits.py, test_categories_wait.py)."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid


def _wait_for_event(name: str) -> None:
    from distributed import Event

    Event(name).wait()  # stands for a task that does not end, e.g. a cancelled rank in a collective


@contextlib.contextmanager
def worker_that_never_answers(client):
    """The only worker thread taken by a task blocked on a ``distributed.Event`` until the
    block ends (then the event is set and the worker is free for the next test)."""
    from distributed import Event

    name = f"never-{uuid.uuid4().hex}"
    blocker = client.submit(_wait_for_event, name, pure=False)
    while not any(client.processing().values()):
        time.sleep(0.05)
    try:
        yield
    finally:
        Event(name, client=client).set()
        blocker.result(timeout=30)


def raised_within(seconds: float, call) -> BaseException:
    """What ``call()`` raised, run in a thread: a call still waiting after ``seconds`` fails the
    test instead of hanging it, and one that returns fails it too."""
    out: list = []

    def run():
        try:
            call()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            out.append(exc)
        else:
            out.append(None)

    thread = threading.Thread(target=run, daemon=True)
    start = time.monotonic()
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still waiting after {time.monotonic() - start:.1f} s"
    assert out[0] is not None, "returned instead of raising"
    return out[0]
