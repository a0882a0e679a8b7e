"""Faults on purpose, for the distributed tests: a training callback that kills its worker,
and one that records the rounds each rank runs (to see where a resumed job started).

Defined in the package (not in a test module) so that Dask worker processes can unpickle it.
"""

from __future__ import annotations

import os
import signal

from ..training import TrainingCallback

__all__ = ["KillProcessAtRound", "RecordRounds"]


class KillProcessAtRound(TrainingCallback):
    """Kill the process of one rank (SIGKILL: no cleanup, as a crashed or preempted worker)
    when it starts round ``round_index``.

    Parameters
    ----------
    round_index : int
    rank_pid_file : str
        A file the rank writes its process id to first, so that only one rank (the first
        to start the round) dies; the others keep training until their collectives fail.
    """

    def __init__(self, round_index: int, rank_pid_file: str):
        self.round_index = int(round_index)
        self.rank_pid_file = rank_pid_file

    def before_iteration(self, model, epoch: int, evals_log: dict) -> bool:
        if epoch == self.round_index:
            try:
                fd = os.open(self.rank_pid_file, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return False  # another rank was chosen
            os.write(fd, str(os.getpid()).encode())
            os.close(fd)
            os.kill(os.getpid(), signal.SIGKILL)
        return False


class RecordRounds(TrainingCallback):
    """Append every round a rank starts to ``path`` (one line each; all ranks append).

    Parameters
    ----------
    path : str
        A file on a file system every rank can write.
    """

    def __init__(self, path: str):
        self.path = path

    def before_iteration(self, model, epoch: int, evals_log: dict) -> bool:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(f"{epoch}\n")
        return False
