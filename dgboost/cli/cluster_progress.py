"""Progress of the ``--cluster`` commands, printed by the client, never on the workers.

A print on a worker reaches the worker's log, not this terminal: the workers send each
reported round's evaluation results as a Dask event (:class:`RoundReporter`), and the client
prints them (:class:`RoundPrinter`) on stdout, as :func:`dgboost.train` prints them. Other
progress lines go to stderr, at most one every ``interval`` seconds: ``round k/N`` with the
seconds per round and the time left while training, rows done, rows/s and the time left while
the workers predict or explain (:class:`RowProgress`).
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any

from ..callback import TrainingCallback, format_evaluation
from ._format import rate, seconds

if TYPE_CHECKING:  # annotations only: distributed is imported where a cluster is used
    from distributed import Client

__all__ = ["RoundReporter", "RoundPrinter", "RowProgress", "say", "out"]

DEFAULT_INTERVAL = 5.0


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
    (the period-th, 2 period-th... round); and for any round at least ``interval`` seconds after
    the previous event, for the progress lines. The client prints them (:class:`RoundPrinter`);
    nothing is printed on the workers. Never stops training and never fails it.
    """

    def __init__(self, topic: str, period: int, count_from_one: bool = False, interval: float = DEFAULT_INTERVAL):
        self.topic = topic
        self.period = max(0, int(period))  # 0: no rounds on a period, only those due by time
        self.offset = 1 if count_from_one else 0
        self.interval = float(interval)
        self.sent = None

    def after_iteration(self, model: Any, epoch: int, evals_log: dict) -> bool:
        now = time.perf_counter()
        due = self.sent is not None and now - self.sent >= self.interval
        on_period = self.period > 0 and (epoch + self.offset) % self.period == 0
        if epoch == 0 or on_period or due:
            self.sent = now
            try:
                from distributed import get_worker

                last = {data: {m: float(v[-1]) for m, v in metrics.items()} for data, metrics in evals_log.items()}
                get_worker().log_event(self.topic, {"epoch": int(epoch), "last": last})
            except Exception:  # noqa: BLE001 - progress must never fail training (e.g. not on a worker)
                pass
        return False


class RoundPrinter:
    """On the client: prints the rounds the workers report, each once, in order.

    Evaluation lines (stdout) every ``period`` rounds (0: none), as :func:`dgboost.train` prints them;
    ``round k/N`` lines (stderr: seconds per round, time left) every ``period`` rounds without an
    evaluation set, and at most every ``interval`` seconds in between. ``first_round_at`` is
    when round 0's report arrived (``time.perf_counter()``), also when ``quiet`` (nothing is
    printed then).
    """

    def __init__(
        self,
        client: Client,
        total: int,
        period: int,
        quiet: bool,
        has_evals: bool = True,
        interval: float = DEFAULT_INTERVAL,
    ) -> None:
        self.client, self.total, self.quiet, self.has_evals = client, total, quiet, has_evals
        self.period = max(0, int(period))  # 0: no evaluation or round lines on a period
        self.interval = float(interval)
        self.topic = f"dgboost-rounds-{uuid.uuid4().hex}"
        self.printed = -1
        self.lock = threading.Lock()
        self.started = time.perf_counter()
        self.first_round_at = None
        self.line_at = self.started

    def __enter__(self):
        self.started = self.line_at = time.perf_counter()
        self.client.subscribe_topic(self.topic, self._handle)
        return self

    def __exit__(self, *exc):
        with contextlib.suppress(Exception):
            self.client.unsubscribe_topic(self.topic)

    def callback(self) -> RoundReporter:
        return RoundReporter(self.topic, self.period, count_from_one=not self.has_evals, interval=self.interval)

    def _on_period(self, epoch: int) -> bool:
        if self.period == 0:
            return False
        return (epoch % self.period == 0) if self.has_evals else ((epoch + 1) % self.period == 0)

    def _handle(self, event) -> None:
        _, msg = event
        with self.lock:
            epoch = int(msg["epoch"])
            if epoch == 0 and self.first_round_at is None:
                self.first_round_at = time.perf_counter()
            if epoch <= self.printed:
                return  # another rank's copy
            history = {d: {m: [v] for m, v in ms.items()} for d, ms in msg["last"].items()}
            if self.has_evals and self._on_period(epoch):
                self.printed = epoch
                self._print(epoch, history)
            elif (not self.has_evals and self._on_period(epoch)) or time.perf_counter() - self.line_at >= self.interval:
                self.printed = epoch
                self._round_line(epoch)

    def _print(self, epoch: int, history: dict) -> None:
        if self.quiet:
            return
        if history:
            out(self.quiet, format_evaluation(epoch, history))
        else:
            self._round_line(epoch)

    def _round_line(self, epoch: int) -> None:
        """``round k/N, s/round, elapsed, time left`` on stderr."""
        now = self.line_at = time.perf_counter()
        if self.quiet:
            return
        pace = eta = ""
        if self.first_round_at is not None and epoch > 0:
            # from the rounds after round 0, which also pays for the job's start
            per_round = (now - self.first_round_at) / epoch
            pace = f", {seconds(per_round)}/round"
            if epoch < self.total - 1:
                eta = f", about {seconds(per_round * (self.total - epoch - 1))} left"
        say(self.quiet, f"round {epoch + 1}/{self.total} ({seconds(now - self.started)}{pace}{eta})")

    def finish(self, rounds: int, history: dict) -> None:
        """The last round, when it was not on the period (as train()'s own monitor does)."""
        if rounds < 1:
            return
        with self.lock:
            last = rounds - 1
            if last > self.printed:
                self.printed = last
                if self.period == 0:
                    self._round_line(last)  # no evaluation lines asked for: the progress line only
                else:
                    self._print(last, history)


class RowProgress:
    """Progress of partitions worked on by the workers: a line on stderr every ``interval`` seconds.

    ``rows done/total (percent), partitions done k/N, rows/s, time left``, printed by a thread
    while the block runs (so that a slow partition does not leave the terminal silent), and a
    last line when it ends without an error. Nothing when ``quiet``.

    Parameters
    ----------
    what : str
        The verb of the line: ``"predicted"``, ``"explained"``.
    total_rows : int or None
        Rows of all partitions (None: unknown; no percent or time left).
    total_parts : int
    quiet : bool
    interval : float
        Seconds between lines.
    """

    def __init__(
        self, what: str, total_rows: int | None, total_parts: int, quiet: bool, interval: float = DEFAULT_INTERVAL
    ) -> None:
        self.what, self.total_rows, self.total_parts = what, total_rows, total_parts
        self.quiet, self.interval = quiet, float(interval)
        self.rows = self.parts = 0
        self.started = time.perf_counter()
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = None

    def add(self, rows: int) -> None:
        """One more partition done, of ``rows`` rows."""
        with self.lock:
            self.rows += int(rows)
            self.parts += 1

    def line(self) -> str:
        """The progress line now."""
        with self.lock:
            rows, parts = self.rows, self.parts
        elapsed = time.perf_counter() - self.started
        done = f"{rows:,}"
        tail = ""
        if self.total_rows:
            done += f"/{self.total_rows:,} rows ({100 * rows / self.total_rows:.0f}%)"
            if 0 < rows < self.total_rows:
                tail = f", about {seconds(elapsed / rows * (self.total_rows - rows))} left"
        else:
            done += " rows"
        return (
            f"{self.what} {done}, partitions done {parts}/{self.total_parts}, "
            f"{rate(rows, elapsed)} rows/s, {seconds(elapsed)}{tail}"
        )

    def _run(self) -> None:
        while not self.stop.wait(self.interval):
            say(self.quiet, self.line())

    def __enter__(self) -> RowProgress:
        self.started = time.perf_counter()
        if not self.quiet:
            self.thread = threading.Thread(target=self._run, name="dgboost-progress", daemon=True)
            self.thread.start()
        return self

    def __exit__(self, exc_type: type | None, *exc: Any) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join()
        if exc_type is None:
            say(self.quiet, self.line())
