"""Starting, joining and describing the Dask cluster of ``--cluster``."""

from __future__ import annotations

import os
import time
import warnings
from typing import TYPE_CHECKING

import click

from ..cluster import connect, default_config, load_config, local_worker_args
from ..dask._waits import cluster_workers
from ._format import seconds
from .cluster_progress import say
from .config import check_cluster_config
from .device import resolve_device

if TYPE_CHECKING:  # annotations only: distributed is imported where a cluster is used
    from distributed import Client

__all__ = ["open_cluster", "describe_cluster", "cluster_device", "workers_device"]


def open_cluster(config: str | os.PathLike | dict | None, quiet: bool = False) -> tuple[Client, dict]:
    """``dgboost.cluster.connect(config)`` with a progress line saying what runs where.

    Parameters
    ----------
    config : str, os.PathLike, dict or None
        A shipped config name, a YAML path, a config dict, or None for
        :func:`dgboost.cluster.default_config`.

    Returns
    -------
    (distributed.Client, dict)
        The client (closing it closes a cluster it started) and the config used. Warnings
        the cluster's start raises (a dashboard port in use...) become progress lines.
    """
    source = "cluster config"
    if config is None:
        config = default_config()
    elif not isinstance(config, dict):
        source = str(config)
        config = load_config(config)
    check_cluster_config(config, source)  # a value of the wrong type: one line, before anything starts
    say(
        quiet,
        f"starting the cluster ({_kind_words(config)})..."
        if config["kind"] != "existing"
        else f"connecting to the {_kind_words(config)}...",
    )
    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        client = connect(config)
    for w in caught:
        # any warning raised meanwhile is caught here, also one with an empty message (e.g. a
        # garbage-collected object's): such a note says nothing and is left out
        text = str(w.message).strip()
        if text:
            say(quiet, f"  note: {text.splitlines()[0]}")
    try:
        expected = _expected_workers(config)
        if len(cluster_workers(client)) < expected:
            # batch jobs and pods may wait in a queue: say so, and wait (up to 30 min)
            say(quiet, f"waiting for {expected} worker{'s' if expected > 1 else ''} to join...")
            client.wait_for_workers(expected, timeout=1800 if config["kind"] in ("slurm", "kubernetes") else 120)
    except BaseException:
        client.close()
        raise
    say(quiet, f"cluster ready in {seconds(time.perf_counter() - started)}: {describe_cluster(client, config)}")
    return client, config


def _expected_workers(config: dict) -> int:
    """Workers to wait for before the work starts: all those the config asks for (at least one)."""
    kind, args, scale = config.get("kind"), config.get("args") or {}, config.get("scale") or {}
    if kind == "local":
        return int(local_worker_args(config)["n_workers"])
    if kind == "slurm" and scale:
        return int(scale.get("n") or int(scale.get("jobs") or 1) * int(args.get("processes") or 1))
    if kind == "kubernetes":
        return int(args.get("n_workers") or 1)
    return 1  # local-cuda starts its workers before connect() returns; existing: what is there


def _kind_words(config: dict) -> str:
    return {
        "local": "local CPU worker processes",
        "local-cuda": "local dask-cuda workers, one per GPU",
        "slurm": "SLURM jobs",
        "kubernetes": "Kubernetes pods",
        "existing": f"scheduler {config.get('address') or config.get('scheduler_file')}",
    }.get(config.get("kind"), str(config.get("kind")))


def describe_cluster(client: Client, config: dict | None = None, dashboard: bool = True) -> str:
    """``2 workers (local CPU worker processes), 1 thread each, dashboard http://...``."""
    workers = cluster_workers(client)
    threads = sorted({int(w.get("nthreads", 0)) for w in workers.values()})
    thread_words = "/".join(str(t) for t in threads) or "?"
    kind = f" ({_kind_words(config)})" if config else ""
    link = getattr(client, "dashboard_link", None) if dashboard else None
    return (
        f"{len(workers)} worker{'s' if len(workers) != 1 else ''}{kind}, {thread_words} "
        f"thread{'s' if threads != [1] else ''} each" + (f", dashboard {link}" if link else "")
    )


def cluster_device(client: Client) -> str:
    """``cuda`` when every worker has a usable GPU, else ``cpu`` (what ``device=auto`` means here)."""
    # "auto" on a worker: cuda where CuPy and the CUDA backend work there
    from ..dask._waits import bounded_call

    devices = set(bounded_call(client.run, resolve_device, "auto", what="the workers' devices (client.run)").values())
    return "cuda" if devices == {"cuda"} else "cpu"


def workers_device(client: Client, device: str) -> str:
    """Where the workers run a command given ``--device device``, by the rule of every entry
    point (:mod:`dgboost.device`).

    Parameters
    ----------
    client : distributed.Client
    device : str
        ``"auto"`` or a canonical device string (``"cpu"``, ``"cuda"``, ``"cuda:N"``).

    Returns
    -------
    str
        ``"auto"``: :func:`cluster_device`'s answer. A GPU asked for where not every worker has
        a usable one: ``"cpu"``, with one warning line on stderr here (not one per worker, in
        the workers' logs). Anything else: ``device``.
    """
    if device == "auto":
        return cluster_device(client)
    if device.startswith("cuda") and cluster_device(client) == "cpu":
        # the command line's warnings are lines on stderr (shown with --quiet too)
        click.echo(
            f"warning: device={device!r} was asked for but not every worker has a usable CUDA GPU: "
            "running on the workers' CPUs instead",
            err=True,
        )
        return "cpu"
    return device
