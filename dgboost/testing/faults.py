"""Faults on purpose, for the distributed tests: a training callback that kills its worker,
one that records the rounds each rank runs (to see where a resumed job started), and a block
function that kills the worker computing one row block (once).

Defined in the package (not in a test module) so that Dask worker processes can unpickle it.
"""

from __future__ import annotations

import os
import signal

from ..training import TrainingCallback

__all__ = ["KillProcessAtRound", "RecordRounds", "kill_once_in_block"]


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


def kill_once_in_block(block, flag_path: str, row_block: int, block_info=None):
    """``block`` itself, except that the first computation of row block ``row_block`` kills
    its process (SIGKILL) instead: for ``dask.array.map_blocks`` upstream of the computation
    under test, so that a worker is lost in the middle of it (Dask computes the block again
    elsewhere; ``flag_path`` is created then, so the second computation returns the block).

    Parameters
    ----------
    block : array (rows, ...)
    flag_path : str
        A file on a file system every worker can write; it must not exist beforehand.
    row_block : int
        The index of the row block whose computation kills its worker.
    """
    if block_info is not None and block_info[None]["chunk-location"][0] == row_block:
        try:
            fd = os.open(flag_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return block
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        os.kill(os.getpid(), signal.SIGKILL)
    return block
