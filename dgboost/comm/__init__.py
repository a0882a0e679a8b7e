"""Communicators: how ranks of a training job exchange histograms and scalars."""
from .base import Communicator, LocalComm
from .threads import ThreadComm, ThreadGroup, run_in_threads

__all__ = ["Communicator", "LocalComm", "ThreadComm", "ThreadGroup", "run_in_threads"]
