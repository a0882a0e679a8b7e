"""The collective watchdog: aborts once when the oldest queued collective is late, never before."""

from __future__ import annotations

import threading
import time

from dgboost.comm._watchdog import CollectiveWatchdog


def _flag():
    done = threading.Event()
    return done, done.is_set


def test_collectives_that_finish_in_time_are_dropped_and_nothing_is_aborted():
    aborted = []
    dog = CollectiveWatchdog(0.5, lambda: aborted.append(1), "rank 0 of 2", poll=0.001).start()
    try:
        for i in range(50):
            done, check = _flag()
            dog.track(f"allreduce {i}", check)
            done.set()
        deadline = time.monotonic() + 5
        while dog.pending() and time.monotonic() < deadline:
            time.sleep(0.005)
        assert dog.pending() == 0
        time.sleep(0.6)  # longer than the timeout: still nothing to abort
        assert aborted == [] and dog.fired is None
    finally:
        dog.stop()


def test_a_collective_that_never_finishes_aborts_once_after_the_timeout_and_says_which():
    aborted, setups = [], []
    dog = CollectiveWatchdog(
        0.2,
        lambda: aborted.append(time.monotonic()),
        "NCCL rank 1 of 4",
        setup=lambda: setups.append(threading.current_thread().name),
        poll=0.001,
    )
    first, check_first = _flag()
    start = time.monotonic()
    dog.track("allreduce_sum", check_first)
    first.set()  # this one finishes
    dog.track("allreduce_max", lambda: False)  # this one never does
    dog.start()
    try:
        deadline = time.monotonic() + 5
        while not aborted and time.monotonic() < deadline:
            time.sleep(0.005)
        assert len(aborted) == 1 and aborted[0] - start >= 0.2
        assert dog.fired.startswith("allreduce_max on NCCL rank 1 of 4 did not finish within 0.2 s")
        time.sleep(0.05)
        assert len(aborted) == 1  # once
        assert setups == ["dgboost-collective-watchdog"]
    finally:
        dog.stop()


def test_stopping_the_watchdog_ends_its_thread():
    dog = CollectiveWatchdog(10, lambda: None, "rank 0 of 1", poll=0.001).start()
    thread = dog._thread
    dog.stop()
    assert not thread.is_alive()
