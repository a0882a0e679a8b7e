"""Bounded waits of the client on the cluster: every call that waits for a worker or the
scheduler to answer ends within a bound, with a :class:`~dgboost.errors.CommunicationError`
that names what did not answer (docs/failure-and-recovery.md, "Bounded waits").

``Client.run``, ``Client.run_on_scheduler``, ``Client.who_has`` and ``Client.scheduler_info``
wait forever by default for a worker whose event loop is stuck or a scheduler that does not
answer; ``Future.result()`` and a collection's ``.compute()`` wait forever for a task that
does not end. These helpers pass distributed's own bound (``callback_timeout`` of
``Client.sync``, ``timeout`` of ``Future.result``) and turn its ``TimeoutError`` into one line.
The cluster's workers are read with :func:`cluster_workers`, never from
``Client.scheduler_info()`` (whose answer a periodic refresh can empty).
"""

from __future__ import annotations

from typing import Any, Callable

from ..errors import CommunicationError

__all__ = ["DEFAULT_WAIT", "bounded_call", "bounded_compute", "bounded_result", "cluster_workers"]

# seconds a client call waits for an answer unless its caller has a bound of its own (as
# dgboost.dask.train's ``timeout``): what dask_cuda / distributed give a worker to start
DEFAULT_WAIT = 300.0


def _no_answer(what: str, timeout: float) -> CommunicationError:
    return CommunicationError(
        f"{what}: no answer within {timeout:g} s (a worker or the scheduler that is stuck, "
        "busy with a task that does not end, or gone)"
    )


def bounded_call(method: Callable, *args: Any, what: str, timeout: float | None = None, **kwargs: Any) -> Any:
    """``method(*args, **kwargs)`` for a ``distributed.Client`` method that goes through
    ``Client.sync`` (``run``, ``run_on_scheduler``, ``who_has``, ``scheduler_info``), waiting at
    most ``timeout`` seconds for its answer.

    Parameters
    ----------
    method : callable
        A bound method of a synchronous Client.
    what : str
        What is waited for, for the error ("the workers' GPUs (client.run on w1, w2)").
    timeout : float, optional
        Seconds (default :data:`DEFAULT_WAIT`, read when called).

    Raises
    ------
    CommunicationError
        Naming ``what`` when no answer came within ``timeout`` seconds.
    """
    timeout = DEFAULT_WAIT if timeout is None else timeout
    try:
        return method(*args, callback_timeout=timeout, **kwargs)
    except TimeoutError:
        raise _no_answer(what, timeout) from None


def bounded_result(future: Any, what: str, timeout: float | None = None) -> Any:
    """``future.result()`` waiting at most ``timeout`` seconds (default :data:`DEFAULT_WAIT`;
    a CommunicationError naming ``what`` after that; the task's own error is raised as it is)."""
    timeout = DEFAULT_WAIT if timeout is None else timeout
    try:
        return future.result(timeout=timeout)
    except TimeoutError:
        raise _no_answer(what, timeout) from None


def bounded_compute(client: Any, collection: Any, what: str, timeout: float | None = None) -> Any:
    """A dask collection computed on ``client`` and fetched within ``timeout`` seconds (what
    ``collection.compute()`` does without a bound); the computation is cancelled on timeout."""
    future = client.compute(collection)
    try:
        return bounded_result(future, what, timeout)
    except CommunicationError:
        client.cancel([future], force=True)
        raise


def cluster_workers(client: Any, timeout: float | None = None) -> dict[str, dict]:
    """The cluster's workers now, ``{address: identity}``, asked of the scheduler within
    ``timeout`` seconds (default :data:`DEFAULT_WAIT`).

    Not ``client.scheduler_info()``: that fetches the identity into the client's cache and
    returns the cache, which the client's periodic refresh (every
    ``distributed.client.scheduler-info-interval``) overwrites from its event-loop thread with
    an identity that lists no workers. Read between the two, the cluster looked empty (a job
    placed on no ranks, every worker taken for lost).

    Raises
    ------
    CommunicationError
        When the scheduler did not answer within ``timeout`` seconds.
    """
    identity = bounded_call(
        client.sync, client.scheduler.identity, n_workers=-1, what="the scheduler's list of workers", timeout=timeout
    )
    return dict(identity["workers"])
