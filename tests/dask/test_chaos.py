"""Chaos: jobs on a 3-worker CPU cluster, each with a worker killed at a random round
(``benchmarks/chaos.py``; the last job kills two workers in turn), and the one-line report of a
lost worker on the surviving workers."""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

import pytest

from dgboost.dask._rank_log import shorten_rank_failures

pytestmark = pytest.mark.dask

CHAOS = Path(__file__).resolve().parents[2] / "benchmarks" / "chaos.py"


def _chaos():
    spec = importlib.util.spec_from_file_location("chaos_benchmark", CHAOS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _compute_failed(key: str, exception_text: str) -> logging.LogRecord:
    """The record distributed's worker logs for a failed task (its message and arguments)."""
    return logging.LogRecord(
        "distributed.worker",
        logging.ERROR,
        __file__,
        1,
        "Compute Failed\nKey:       %s\nState:     %s\nTask:  %s\nException: %r\nTraceback: %r\n",
        (key, "executing", "<Task ...>", exception_text, "  File ...\n" * 40),
        None,
    )


def test_a_rank_stopped_by_a_lost_peer_logs_one_line_and_other_failures_keep_their_traceback():
    logger = logging.getLogger("distributed.worker")
    shorten_rank_failures("dgboost-train-rank-")
    shorten_rank_failures("dgboost-train-rank-")  # once per process, however many ranks ran here
    assert sum(type(f).__name__ == "_ShortRankFailure" for f in logger.filters) == 1
    (short,) = [f for f in logger.filters if type(f).__name__ == "_ShortRankFailure"]

    lost_peer = _compute_failed("dgboost-train-rank-1-abc", 'CommunicationError("allreduce failed on rank 1")')
    assert short.filter(lost_peer)
    assert lost_peer.getMessage() == (
        "dgboost: dgboost-train-rank-1-abc stopped (the client reports the job's failure): "
        'CommunicationError("allreduce failed on rank 1")'
    )
    other_error = _compute_failed("dgboost-train-rank-1-abc", "DGBoostValueError('bad label')")
    user_task = _compute_failed("my-task-1", 'CommunicationError("mine")')
    for record in (other_error, user_task):
        assert short.filter(record)
        assert record.getMessage().startswith("Compute Failed") and "Traceback" in record.getMessage()


@pytest.mark.slow
def test_jobs_with_workers_killed_at_random_rounds_end_with_the_uninterrupted_models_bytes():
    """4 jobs (the last with two workers killed in turn), retries and checkpoints: each ends with
    the single-process model's bytes within 120 s, no rank left running, one line per lost worker."""
    chaos = _chaos()
    result = chaos.run(jobs=4, seed=7, device="cpu", n_workers=3, timeout=30.0, job_timeout=120.0, log=lambda _: None)
    for job in result["jobs"]:
        assert job["outcome"] == "pass", job
        assert job["model_bytes_equal"] and all(job["killed"]) and not job["stuck_ranks_after"]
        assert job["one_line_per_lost_worker"], job["retry_warnings"]
        assert all("left the cluster during training" in line for line in job["retry_warnings"]), job
    assert [len(j["kill_rounds"]) for j in result["jobs"]] == [1, 1, 1, 2]
