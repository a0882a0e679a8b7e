"""Progress of the ``--cluster`` commands, printed by the client, never on the workers.

A print on a worker reaches the worker's log, not this terminal: the workers send each
reported round's evaluation results as a Dask event (:class:`RoundReporter`), and the client
prints them (:class:`RoundPrinter`) on stdout, as :func:`dgboost.train` prints them. Other
progress lines go to stderr.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any

from ..callback import TrainingCallback, format_evaluation
from ._format import seconds

if TYPE_CHECKING:  # annotations only: distributed is imported where a cluster is used
    from distributed import Client

__all__ = ["RoundReporter", "RoundPrinter", "say", "out"]


def say(quiet: bool, message: str = "") -> None:
    """A progress line on stderr (nothing when ``quiet``)."""
    if not quiet:
        print(message, file=sys.stderr, flush=True)


def out(quiet: bool, message: str) -> None:
    """An evaluation line on stdout, where :func:`dgboost.train` prints them."""
    if not quiet:
        print(message, file=sys.stdout, flush=True)


# ----------------------------------------------------------------------------- progress of rounds
class RoundReporter(TrainingCallback):
    """Sends rounds' evaluation results from the workers to the client.

    Runs on every rank (the evaluation results are the same on all): ``after_iteration``
    logs an event on the Dask topic ``topic`` for round 0 and every ``period`` rounds: rounds
    period, 2 period... as XGBoost's evaluation monitor prints them, or, with
    ``count_from_one`` (progress without an evaluation set), rounds period-1, 2 period-1...
    (the period-th, 2 period-th... round). The client prints them (:class:`RoundPrinter`); nothing is
    printed on the workers. Never stops training and never fails it.
    """

    def __init__(self, topic: str, period: int, count_from_one: bool = False) -> None:
        self.topic = topic
        self.period = max(1, int(period))
        self.offset = 1 if count_from_one else 0

    def after_iteration(self, model: Any, epoch: int, evals_log: dict) -> bool:
        if epoch == 0 or (epoch + self.offset) % self.period == 0:
            try:
                from distributed import get_worker

                last = {data: {m: float(v[-1]) for m, v in metrics.items()} for data, metrics in evals_log.items()}
                get_worker().log_event(self.topic, {"epoch": int(epoch), "last": last})
            except Exception:  # noqa: BLE001 - progress must never fail training (e.g. not on a worker)
                pass
        return False


class RoundPrinter:
    """On the client: prints the rounds the workers report, each once, in order.

    ``first_round_at`` is when round 0's report arrived (``time.perf_counter()``), also when
    ``quiet`` (nothing is printed then).
    """

    def __init__(self, client: Client, total: int, period: int, quiet: bool, has_evals: bool = True) -> None:
        self.client, self.total, self.quiet, self.has_evals = client, total, quiet, has_evals
        self.period = max(1, period)
        self.topic = f"dgboost-rounds-{uuid.uuid4().hex}"
        self.printed = -1
        self.lock = threading.Lock()
        self.started = time.perf_counter()
        self.first_round_at = None

    def __enter__(self):
        self.started = time.perf_counter()
        self.client.subscribe_topic(self.topic, self._handle)
        return self

    def __exit__(self, *exc):
        with contextlib.suppress(Exception):
            self.client.unsubscribe_topic(self.topic)

    def callback(self) -> RoundReporter:
        return RoundReporter(self.topic, self.period, count_from_one=not self.has_evals)

    def _handle(self, event) -> None:
        _, msg = event
        with self.lock:
            epoch = int(msg["epoch"])
            if epoch == 0 and self.first_round_at is None:
                self.first_round_at = time.perf_counter()
            if epoch <= self.printed:
                return  # another rank's copy
            if not self.has_evals and (epoch + 1) % self.period:
                return  # round 0, reported for its time only
            self.printed = epoch
            self._print(epoch, {d: {m: [v] for m, v in ms.items()} for d, ms in msg["last"].items()})

    def _print(self, epoch: int, history: dict) -> None:
        if self.quiet:
            return
        if history:
            out(self.quiet, format_evaluation(epoch, history))
        else:
            now = time.perf_counter()
            eta = ""
            if self.first_round_at is not None and 0 < epoch < self.total - 1:
                # from the rounds after round 0, which also pays for the job's start
                eta = f", about {seconds((now - self.first_round_at) / epoch * (self.total - epoch - 1))} left"
            say(self.quiet, f"round {epoch + 1}/{self.total} ({seconds(now - self.started)}{eta})")

    def finish(self, rounds: int, history: dict) -> None:
        """The last round, when it was not on the period (as train()'s own monitor does)."""
        if rounds < 1:
            return
        with self.lock:
            last = rounds - 1
            if last > self.printed:
                self.printed = last
                self._print(last, history)
