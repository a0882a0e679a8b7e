"""The cluster's workers are asked of the scheduler, never read from the client's cache: the
client's periodic refresh empties the cache's worker list, and read at the wrong moment the
cluster looked empty (CI once placed a training job on zero ranks: ``IndexError`` in
``_balanced_runs``)."""

from __future__ import annotations

import ast
from pathlib import Path

import dask
import pytest

import dgboost as dg
from dgboost.dask._waits import cluster_workers

pytestmark = pytest.mark.dask


def test_every_worker_is_listed_while_the_client_refreshes_its_cache_every_millisecond(dask_client):
    from distributed import Client

    address = dask_client(2).scheduler.address
    # the refresh period is read when a client starts; at 1 ms, Client.scheduler_info()
    # returned no workers in 69 of 500 calls on the 2-core development box
    with dask.config.set({"distributed.client.scheduler-info-interval": "1ms"}), Client(address) as client:
        counts = [len(cluster_workers(client)) for _ in range(500)]
    assert counts == [2] * 500


def test_no_module_of_dgboost_reads_the_workers_from_the_clients_cache():
    package = Path(dg.__file__).parent
    readers = [
        f"{path.relative_to(package)}:{node.lineno}"
        for path in package.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "scheduler_info"
    ]
    assert readers == []


def test_a_scheduler_that_does_not_answer_ends_the_call_with_an_error_naming_the_wait():
    class _Scheduler:
        def identity(self, n_workers=-1):
            raise AssertionError("not called: the wait ends first")

    class _Client:
        scheduler = _Scheduler()

        def sync(self, method, *args, callback_timeout=None, **kwargs):
            assert callback_timeout == 2.5
            raise TimeoutError

    with pytest.raises(dg.CommunicationError, match=r"the scheduler's list of workers: no answer within 2.5 s"):
        cluster_workers(_Client(), timeout=2.5)


def test_a_cluster_whose_workers_all_left_before_placement_ends_train_with_a_communication_error(monkeypatch):
    from dgboost.dask import training

    monkeypatch.setattr(training, "cluster_workers", lambda client: {})
    with pytest.raises(dg.CommunicationError, match="the cluster has no workers left to train on"):
        training._place(object(), None, [], [], [])
