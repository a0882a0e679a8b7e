"""Communicators: how ranks of a training job exchange histograms and scalars."""

from .base import Communicator, LocalComm
from .threads import ThreadComm, ThreadGroup, run_in_threads

# CollectiveComm (xgboost.collective) and NcclComm (cupy.cuda.nccl) are imported from their
# modules, dgboost.comm.collective and dgboost.comm.nccl: each needs a library a CPU-only
# single-process install does not load
__all__ = ["Communicator", "LocalComm", "ThreadComm", "ThreadGroup", "run_in_threads"]
