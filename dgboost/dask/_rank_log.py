"""One log line, not a traceback, on a worker whose rank stops because a peer was lost.

When one worker of a job is lost, every other rank's collective fails with a
:class:`~dgboost.errors.CommunicationError`, and distributed logs each failed task as
"Compute Failed" with its whole traceback: one long traceback per surviving rank, in every
worker's log (and, on a ``LocalCluster``, in the client's terminal), for an event the client
already reports in one line (the retry's warning, or the error that ends ``train``). A filter
on the worker's ``distributed.worker`` logger shortens those records, and only those: a rank
task's (its key starts with the rank prefix) that failed with a CommunicationError. Any other
failure keeps distributed's full record.
"""

from __future__ import annotations

import logging
import threading

__all__ = ["shorten_rank_failures"]

_installed: set[str] = set()
_lock = threading.Lock()


class _ShortRankFailure(logging.Filter):
    def __init__(self, key_prefix: str):
        super().__init__()
        self.key_prefix = key_prefix

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if (
            isinstance(record.msg, str)
            and record.msg.startswith("Compute Failed")
            and isinstance(args, tuple)
            and len(args) >= 4
            and str(args[0]).startswith(self.key_prefix)
            and str(args[3]).startswith("CommunicationError(")
        ):
            record.msg = "dgboost: %s stopped (the client reports the job's failure): %s"
            record.args = (args[0], args[3])
        return True


def shorten_rank_failures(key_prefix: str) -> None:
    """Install the filter on this worker process's ``distributed.worker`` logger (once).

    Parameters
    ----------
    key_prefix : str
        The prefix of the rank tasks' Dask keys.
    """
    with _lock:
        if key_prefix in _installed:
            return
        logging.getLogger("distributed.worker").addFilter(_ShortRankFailure(key_prefix))
        _installed.add(key_prefix)
