"""Local Dask clusters of CPU worker processes, shared by the tests of this folder.

Starting a cluster costs seconds on a 2-core CI machine, so one cluster per worker count is
started on first use and closed when the session ends.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def dask_client():
    """``dask_client(n)``: a Client on a LocalCluster of ``n`` single-threaded worker processes."""
    from distributed import Client, LocalCluster
    from distributed.client import _set_global_client

    clusters: dict = {}

    def get(n_workers: int):
        if n_workers not in clusters:
            cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=":0")
            clusters[n_workers] = (cluster, Client(cluster))
        cluster, client = clusters[n_workers]
        client.wait_for_workers(n_workers, timeout=60)
        # several clients live at once: ``.compute()`` goes to the one asked for last. (Not
        # dask.config.set(scheduler=client): the config travels to new worker processes, and a
        # Client in it stalls the next cluster's start.)
        _set_global_client(client)
        return client

    yield get
    for cluster, client in clusters.values():
        client.close()
        cluster.close()
