"""Start, or connect to, a Dask cluster described by a small YAML file (docs/design.md §5.4 "Clusters").

A cluster config names a ``kind`` and the arguments of what that kind builds:

- ``local``: ``distributed.LocalCluster``, CPU worker processes (distributed);
- ``local-cuda``: ``dask_cuda.LocalCUDACluster``, one worker per GPU (dask-cuda);
- ``slurm``: ``dask_jobqueue.SLURMCluster``, one batch job per worker (dask-jobqueue);
- ``kubernetes``: ``dask_kubernetes.operator.KubeCluster``, worker pods (dask-kubernetes);
- ``existing``: nothing is started; :func:`connect` joins a running scheduler (distributed).

Keys besides ``kind``: ``args`` (keyword arguments of the constructor; for ``kubernetes``
those of ``make_cluster_spec`` and ``KubeCluster``, for ``existing`` those of ``Client``),
``env`` (environment variables of every worker), ``scale`` (``slurm`` only: the arguments of
``cluster.scale``, e.g. ``{jobs: 4}``), ``tls`` (``ca_file``, ``cert`` and ``key``: PEM paths;
scheduler, workers and client then talk TLS only) and, for ``existing``, one of ``address`` and
``scheduler_file``. Unknown kinds and keys are refused with the closest valid name.

Local clusters bind the scheduler, the workers and the dashboard to 127.0.0.1 unless ``args``
say otherwise. Values that would reach a SLURM job script or a Kubernetes resource unquoted
are refused when they hold a line break or a shell character (:mod:`._cluster_checks`);
docs/security.md says what is bound where.

The configs shipped in ``cluster_configs/`` are found by name::

    from dgboost.cluster import connect, load_config, render

    with connect() as client:              # local-cuda where GPUs are present, else local
        ...
    config = load_config("slurm-cuda")
    config["scale"]["jobs"] = 8
    print(render(config))                  # the sbatch script; nothing is submitted
    client = connect(config)               # submits 8 jobs
    client.close()                         # ... and cancels them

The libraries of the cluster kinds are optional: they are imported only when a cluster of
that kind is made, and a missing one is a :class:`~dgboost.errors.DGBoostError` that says
what to install.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import importlib
import inspect
import os
import shlex
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from ._cluster_checks import check_script_values, check_tls, security_for, with_tls
from .errors import DGBoostError, DGBoostTypeError, DGBoostValueError

__all__ = ["load_config", "shipped_configs", "default_config", "make_cluster", "connect", "render"]

# the keys each kind understands besides "kind"
_KEYS = {
    "local": ("args", "env", "tls"),
    "local-cuda": ("args", "env", "tls"),
    "slurm": ("args", "env", "scale", "tls"),
    "kubernetes": ("args", "env", "tls"),
    "existing": ("address", "scheduler_file", "args", "tls"),
}
# the module each kind needs, and the command that installs it
_LIBRARIES = {
    "local": ("distributed", 'pip install "dgboost[dask]"'),
    "local-cuda": ("dask_cuda", 'pip install "dgboost[dask-cuda]"'),
    "slurm": ("dask_jobqueue", "pip install dask-jobqueue"),
    "kubernetes": ("dask_kubernetes.operator", "pip install dask-kubernetes"),
    "existing": ("distributed", 'pip install "dgboost[dask]"'),
}
# constructor parameters a config cannot set: dgboost passes them itself, or they belong to
# another key ("env" is top-level, so that one spelling works for every kind)
_NOT_ARGS = frozenset(
    {
        "self",
        "loop",
        "asynchronous",
        "job_cls",
        "scheduler",
        "custom_cluster_spec",
        "address",
        "scheduler_file",
        "env",
        "security",  # the top-level "tls" key makes it: a Security object has no YAML spelling
    }
)
_SCALE_KEYS = ("n", "jobs", "memory", "cores")
# the address dask-jobqueue itself writes into a job script before the scheduler exists
_PLACEHOLDER_ADDRESS = "tcp://<insert-scheduler-address-here>:8786"
_MAX_DEFAULT_CPU_WORKERS = 4
# local clusters listen on loopback only unless a config says otherwise: anyone who can reach
# a scheduler without TLS can run code on its workers (docs/security.md)
_LOOPBACK = "127.0.0.1"


# ----------------------------------------------------------------------------- loading
def shipped_configs() -> list[str]:
    """Names of the configs shipped with dgboost, for :func:`load_config`.

    Returns
    -------
    list of str
        Sorted names without the ``.yaml`` suffix, e.g. ``["existing-scheduler", "local-cpu", ...]``.
    """
    return sorted(path.stem for path in _shipped_dir().glob("*.yaml"))


def load_config(path_or_name: str | os.PathLike) -> dict:
    """Read and check a cluster config.

    Parameters
    ----------
    path_or_name : str or os.PathLike
        A YAML file, or the name of a shipped config (``"local-cpu"`` or ``"local-cpu.yaml"``;
        see :func:`shipped_configs`). A file that exists at the given path wins over a shipped
        name.

    Returns
    -------
    dict
        The config as written in the file; edit it freely before :func:`connect`, which checks
        it again.

    Raises
    ------
    DGBoostValueError
        For a missing file, YAML that does not parse, or a missing or unknown ``kind`` or key;
        the message names the file and the key and suggests the closest valid one.
    """
    path = _resolve(path_or_name)
    try:
        config = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise DGBoostValueError(f"{path}: not valid YAML: {exc}") from None
    _validate(config, str(path))
    return config


def default_config() -> dict:
    """The config used when none is given: ``local-cuda`` where GPUs are present, else ``local-cpu``.

    Returns
    -------
    dict
        The shipped config, as :func:`load_config` gives it.
    """
    # looked up on the module at call time, so that one answer (cached per process) serves
    # the whole package
    from . import backend

    has_gpu, _why_not = backend.cuda_status()
    return load_config("local-cuda" if has_gpu else "local-cpu")


def _shipped_dir() -> Path:
    """The folder of the shipped configs: installed package data, or the checkout's folder."""
    package = Path(__file__).resolve().parent
    for candidate in (package / "_cluster_configs", package.parent / "cluster_configs"):
        if candidate.is_dir():
            return candidate
    raise DGBoostError(
        f"the shipped cluster configs were not found (looked in {package / '_cluster_configs'} "
        f"and {package.parent / 'cluster_configs'}); reinstall dgboost"
    )


def _resolve(path_or_name: str | os.PathLike) -> Path:
    """The file a :func:`load_config` argument means."""
    path = Path(path_or_name).expanduser()
    if path.is_file():
        return path
    # a bare name (no folder in it) may be a shipped config, given with or without ".yaml"
    if path.parent == Path("."):
        file_name = path.name if path.suffix in (".yaml", ".yml") else f"{path.name}.yaml"
        if (_shipped_dir() / file_name).is_file():
            return _shipped_dir() / file_name
    names = shipped_configs()
    close = difflib.get_close_matches(path.stem, names, n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else f"; shipped configs: {', '.join(names)}"
    raise DGBoostValueError(
        f"no cluster config {str(path_or_name)!r}: no such file, and no shipped config of that name{hint}"
    )


# ----------------------------------------------------------------------------- checking
def _validate(config: Any, source: str) -> None:
    """Raise :class:`DGBoostValueError` naming ``source`` for anything a config cannot hold."""
    if not isinstance(config, Mapping):
        raise DGBoostValueError(
            f"{source}: a cluster config is a mapping of keys to values, got {type(config).__name__}"
        )
    kind = config.get("kind")
    if kind is None:
        raise DGBoostValueError(f"{source}: no 'kind' key; give one of {', '.join(_KEYS)}")
    if not isinstance(kind, str) or kind not in _KEYS:
        raise DGBoostValueError(f"{source}: {_unknown('kind', kind, _KEYS)}")
    for key in config:
        if key != "kind" and key not in _KEYS[kind]:
            message = _unknown("key", key, ("kind", *_KEYS[kind]), f" for kind {kind!r}")
            raise DGBoostValueError(f"{source}: {message}")
    for key in ("args", "env", "scale"):
        if config.get(key) is not None and not isinstance(config[key], Mapping):
            raise DGBoostValueError(f"{source}: {key!r} must be a mapping, got {config[key]!r}")
    _check_args(kind, config.get("args") or {}, source)
    _check_env(config.get("env") or {}, source)
    check_tls(kind, config.get("tls"), source)
    check_script_values(kind, config, source)
    for key in config.get("scale") or {}:
        if key not in _SCALE_KEYS:
            raise DGBoostValueError(f"{source}: {_unknown('key', key, _SCALE_KEYS, ' in scale')}")
    if kind == "existing" and bool(config.get("address")) == bool(config.get("scheduler_file")):
        raise DGBoostValueError(
            f"{source}: an 'existing' config needs exactly one of 'address' (tcp://host:8786) and 'scheduler_file'"
        )


def _check_args(kind: str, args: Mapping, source: str) -> None:
    known = _known_args(kind)
    if known is None:
        return
    for key in args:
        if key == "env":
            raise DGBoostValueError(
                f"{source}: 'env' in args: give worker environment variables in the top-level 'env' mapping"
            )
        if key not in known:
            raise DGBoostValueError(f"{source}: {_unknown('key', key, known, f' in args of kind {kind!r}')}")


def _check_env(env: Mapping, source: str) -> None:
    for name, value in env.items():
        if not isinstance(name, str) or not isinstance(value, (str, int, float)):
            raise DGBoostValueError(
                f"{source}: env entries are NAME: value with a string or number value, got {name!r}: {value!r}"
            )


def _unknown(what: str, given: Any, choices, where: str = "") -> str:
    """The message for an unknown name: with the closest valid one, else with the few valid ones."""
    close = difflib.get_close_matches(str(given), [str(c) for c in choices], n=1, cutoff=0.5)
    if close:
        hint = f"; did you mean {close[0]!r}?"
    else:
        # a constructor's hundred parameters would bury the message; its docs list them
        hint = f"; expected one of {', '.join(sorted(choices))}" if len(choices) <= 12 else ""
    return f"unknown {what} {given!r}{where}{hint}"


@functools.lru_cache(maxsize=None)
def _known_args(kind: str) -> frozenset[str] | None:
    """The names ``args`` may hold for ``kind``; None where its library cannot be imported."""
    try:
        sources = _argument_sources(kind)
    except Exception:  # noqa: BLE001 - a missing or broken library: make_cluster reports it with the fix
        return None
    return frozenset(_parameters(*sources) - _NOT_ARGS)


def _argument_sources(kind: str) -> list:
    """The callables whose keyword parameters are the valid ``args`` of ``kind``."""
    if kind in ("local", "local-cuda"):
        from distributed import LocalCluster, Nanny, Worker

        # LocalCluster passes the arguments it does not know to each Nanny, which passes them on
        # to its Worker
        sources = [LocalCluster, Nanny, Worker]
        if kind == "local-cuda":
            from dask_cuda import LocalCUDACluster

            sources.insert(0, LocalCUDACluster)
        return sources
    if kind == "slurm":
        from dask_jobqueue.core import Job, JobQueueCluster
        from dask_jobqueue.slurm import SLURMJob

        # SLURMCluster passes the arguments it does not know to SLURMJob, which passes them to Job
        return [JobQueueCluster, SLURMJob, Job]
    if kind == "kubernetes":
        from dask_kubernetes.operator import KubeCluster, make_cluster_spec

        return [make_cluster_spec, KubeCluster]
    from distributed import Client

    return [Client]


def _parameters(*callables) -> set[str]:
    """Names of the explicit parameters of ``callables`` (``*args`` and ``**kwargs`` left out)."""
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    return {name for fn in callables for name, p in inspect.signature(fn).parameters.items() if p.kind not in variadic}


def _as_config(config: Any) -> Mapping:
    """A checked config from a config mapping, a path or a shipped name."""
    if isinstance(config, (str, os.PathLike)):
        return load_config(config)
    if isinstance(config, Mapping):
        _validate(config, "cluster config")
        return config
    raise DGBoostTypeError(f"a cluster config is a mapping, a path or a shipped name, got {type(config).__name__}")


def _require(kind: str):
    """Import the library of ``kind``, or say how to install it."""
    module, install = _LIBRARIES[kind]
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise DGBoostError(
            f"a {kind!r} cluster needs {module}, which could not be imported "
            f"({type(exc).__name__}: {exc}); install it with: {install}"
        ) from exc


# ----------------------------------------------------------------------------- arguments
def local_worker_args(config: Mapping) -> dict:
    """LocalCluster's arguments, with ``n_workers: null`` made concrete and the scheduler,
    workers and dashboard on loopback unless ``args`` name a host, interface or address."""
    args = _on_loopback(config.get("args") or {})
    if args.get("n_workers") is None:
        # the design's default: a rank per core, at most 4 (LocalCluster's own default would
        # start a rank on every core of a large host)
        from dask.system import CPU_COUNT  # the cores this process may use (affinity, cgroup quota)

        threads = int(args.get("threads_per_worker") or 1)
        args["n_workers"] = max(1, min(_MAX_DEFAULT_CPU_WORKERS, CPU_COUNT // threads))
    return args


def _on_loopback(args: Mapping) -> dict:
    """``args`` of a local cluster with ``host`` and ``dashboard_address`` on 127.0.0.1 where
    they are not given (Dask's dashboard otherwise listens on every interface)."""
    args = dict(args)
    if args.get("host") is None and args.get("interface") is None:
        args["host"] = _LOOPBACK
    if "dashboard_address" not in args:
        args["dashboard_address"] = f"{_LOOPBACK}:0"
    return args


def _local_cuda_args(config: Mapping) -> dict:
    """LocalCUDACluster's arguments: on loopback (as :func:`local_worker_args`), and over TLS
    when the config has ``tls``."""
    args = _on_loopback(config.get("args") or {})
    if config.get("tls"):
        if str(args.get("protocol") or "tcp").replace("://", "") not in ("tcp", "tls"):
            raise DGBoostValueError(f"tls needs protocol tls (or tcp, made tls), got {args['protocol']!r}")
        args["protocol"] = "tls"
    return args


@contextlib.contextmanager
def _worker_env(env: Mapping | None):
    """Give the worker processes started inside this block the variables of ``env``.

    Through Dask's ``distributed.nanny.environ`` rather than the Nanny's ``env`` argument:
    LocalCUDACluster replaces that argument with each worker's CUDA_VISIBLE_DEVICES. As in
    Dask, a variable already set in this process's environment keeps its value.
    """
    if not env:
        yield
        return
    import dask

    environ = {**dask.config.get("distributed.nanny.environ", {}), **{k: str(v) for k, v in env.items()}}
    with dask.config.set({"distributed.nanny.environ": environ}):
        yield


def _slurm_args(config: Mapping) -> dict:
    """SLURMCluster's arguments, with ``env`` exported at the top of the job script."""
    args = dict(config.get("args") or {})
    exports = [f"export {name}={shlex.quote(str(value))}" for name, value in (config.get("env") or {}).items()]
    if exports:
        args["job_script_prologue"] = exports + list(args.get("job_script_prologue") or [])
    return args


def _kubernetes_args(config: Mapping) -> tuple[dict, dict]:
    """(make_cluster_spec's arguments, KubeCluster's other arguments)."""
    from dask_kubernetes.operator import make_cluster_spec

    spec_names = _parameters(make_cluster_spec)
    args = dict(config.get("args") or {})
    spec_args = {key: value for key, value in args.items() if key in spec_names}
    cluster_args = {key: value for key, value in args.items() if key not in spec_names}
    if config.get("env"):
        spec_args["env"] = {name: str(value) for name, value in config["env"].items()}
    return spec_args, cluster_args


# ----------------------------------------------------------------------------- clusters
def make_cluster(config: Mapping | str | os.PathLike):
    """Start the cluster a config describes (without a Client).

    Parameters
    ----------
    config : dict, str or os.PathLike
        A config from :func:`load_config`, or a path or shipped name to load.

    Returns
    -------
    distributed.deploy.Cluster
        A ``LocalCluster``, ``LocalCUDACluster``, ``SLURMCluster`` (its jobs submitted when the
        config has ``scale``) or ``KubeCluster``. Close it with ``cluster.close()``.

    Raises
    ------
    DGBoostError
        When the library of the kind is not installed (the message gives the pip command), or
        a ``slurm`` config asks for jobs where ``sbatch`` is not on PATH.
    DGBoostValueError
        For an invalid config, or kind ``existing``, which names a cluster that already runs.
    """
    config = _as_config(config)
    kind = config["kind"]
    if kind == "existing":
        raise DGBoostValueError(
            "an 'existing' config names a scheduler that already runs: there is no cluster to make; use connect(config)"
        )
    _require(kind)
    return _MAKERS[kind](config)


def _make_local(config: Mapping):
    from distributed import LocalCluster

    args = local_worker_args(config)
    if config.get("tls"):
        args["security"] = security_for(config["tls"])  # LocalCluster then uses tls://
    with _worker_env(config.get("env")):
        return LocalCluster(**args)


def _make_local_cuda(config: Mapping):
    from dask_cuda import LocalCUDACluster

    args = _local_cuda_args(config)
    if config.get("tls"):
        args["security"] = security_for(config["tls"])
    with _worker_env(config.get("env")):
        return LocalCUDACluster(**args)


def _make_slurm(config: Mapping):
    from dask_jobqueue import SLURMCluster

    # SLURMCluster itself starts without SLURM; only submitting jobs needs sbatch, and its
    # failure would otherwise show only in the logs while the cluster waits for workers
    if config.get("scale") and shutil.which(SLURMCluster.job_cls.submit_command) is None:
        raise DGBoostError(
            f"{SLURMCluster.job_cls.submit_command} is not on PATH: start SLURM clusters from "
            "a login node (render(config) shows the job script without submitting it)"
        )
    args = _slurm_args(config)
    if config.get("tls"):
        # the certificate paths must be readable on the compute nodes (a shared file system):
        # dask-jobqueue passes them to each worker's command line
        args["security"] = security_for(config["tls"])
    cluster = SLURMCluster(**args)
    if config.get("scale"):
        cluster.scale(**config["scale"])
    return cluster


def _make_kubernetes(config: Mapping):
    from dask_kubernetes.operator import KubeCluster

    if config.get("tls"):
        # KubeCluster talks to its scheduler without a Security of its own (dask-kubernetes
        # 2026.3): it could not reach a scheduler that requires TLS
        raise DGBoostValueError(
            "a kubernetes config with tls is started with kubectl: `kubectl apply -f` the resource "
            "render(config) prints, then connect with an 'existing' config (address tls://..., "
            "tls: the client's certificate paths); see docs/security.md"
        )
    # the resource submitted is exactly the one render() shows
    _spec_args, cluster_args = _kubernetes_args(config)
    return KubeCluster(custom_cluster_spec=_kubernetes_spec(config), **cluster_args)


def _kubernetes_spec(config: Mapping) -> dict:
    """The ``DaskCluster`` resource of a kubernetes config (with TLS when it has ``tls``)."""
    from dask_kubernetes.operator import make_cluster_spec

    spec_args, _cluster_args = _kubernetes_args(config)
    spec = make_cluster_spec(**spec_args)
    if config.get("tls"):
        spec = with_tls(spec, config["tls"]["secret"], spec_args["name"])
    return spec


_MAKERS = {"local": _make_local, "local-cuda": _make_local_cuda, "slurm": _make_slurm, "kubernetes": _make_kubernetes}


# ----------------------------------------------------------------------------- clients
def connect(config: Mapping | str | os.PathLike | None = None):
    """A ``distributed.Client`` on the cluster a config describes.

    Parameters
    ----------
    config : dict, str, os.PathLike or None
        A config from :func:`load_config`, a path or shipped name to load, or None for
        :func:`default_config`.

    Returns
    -------
    distributed.Client
        For kind ``existing``, a plain Client to that scheduler: closing it leaves the cluster
        running. For the other kinds the Client owns the cluster it was started with, as
        ``Client()`` owns the LocalCluster it starts: ``client.close()``, or leaving
        ``with connect(...) as client:``, also closes the cluster (stops the local workers,
        cancels the SLURM jobs, deletes the DaskCluster resource). ``client.cluster`` is that
        cluster (``scale``, ``dashboard_link``...). Synchronous use only.

    Raises
    ------
    DGBoostError
        As :func:`make_cluster` does.
    DGBoostValueError
        For an invalid config, or a scheduler file that does not exist.
    """
    config = default_config() if config is None else _as_config(config)
    if config["kind"] == "existing":
        return _connect_existing(config)
    cluster = make_cluster(config)
    try:
        return _owning_client_class()(cluster)
    except BaseException:
        cluster.close()
        raise


def _connect_existing(config: Mapping):
    Client = _require("existing").Client
    args = dict(config.get("args") or {})
    if config.get("tls"):
        args["security"] = security_for(config["tls"])
    if config.get("address"):
        return Client(config["address"], **args)
    scheduler_file = Path(config["scheduler_file"]).expanduser()
    # Client waits for a missing scheduler file without a time limit: refuse at once instead
    if not scheduler_file.is_file():
        raise DGBoostValueError(
            f"scheduler file {scheduler_file} does not exist; start the scheduler with "
            f"`dask scheduler --scheduler-file {scheduler_file}` first"
        )
    return Client(scheduler_file=str(scheduler_file), **args)


@functools.lru_cache(maxsize=1)
def _owning_client_class():
    """Client that closes its cluster when it closes (defined late: distributed is optional)."""
    from distributed import Client

    class ClusterClient(Client):
        """A ``distributed.Client`` whose ``close()`` also closes ``self.cluster``."""

        def close(self, *args, **kwargs):
            cluster = self.cluster
            result = super().close(*args, **kwargs)
            if cluster is not None:
                cluster.close()
            return result

    return ClusterClient


# ----------------------------------------------------------------------------- rendering
def render(config: Mapping | str | os.PathLike) -> str:
    """What a config would start, without starting or submitting anything.

    Parameters
    ----------
    config : dict, str or os.PathLike
        A config from :func:`load_config`, or a path or shipped name to load.

    Returns
    -------
    str
        ``slurm``: the job script each job runs (as ``SLURMCluster.job_script()`` gives it,
        with dask-jobqueue's placeholder for the scheduler address; ``security`` is left out).
        ``kubernetes``: the YAML of the ``DaskCluster`` resource. Other kinds: one line naming
        the call that would be made.
    """
    config = _as_config(config)
    return _RENDERERS[config["kind"]](config)


def _render_local(config: Mapping) -> str:
    return f"distributed.LocalCluster({_call_args(local_worker_args(config))}){_env_note(config)}"


def _render_local_cuda(config: Mapping) -> str:
    return f"dask_cuda.LocalCUDACluster({_call_args(_local_cuda_args(config))}){_env_note(config)}"


def _render_existing(config: Mapping) -> str:
    args = dict(config.get("args") or {})
    target = repr(config["address"]) if config.get("address") else f"scheduler_file={str(config['scheduler_file'])!r}"
    return f"distributed.Client({', '.join(filter(None, (target, _call_args(args))))})"


def _render_slurm(config: Mapping) -> str:
    _require("slurm")
    from dask_jobqueue.core import Job
    from dask_jobqueue.slurm import SLURMJob

    # the job SLURMCluster would build for its job_script(), without the scheduler that building
    # a SLURMCluster starts; "name" and "security" are the cluster's own (the Job's name is the
    # worker's, and the cluster turns security into worker certificates)
    job_names = _parameters(SLURMJob, Job) - {"scheduler", "name", "security"}
    job_args = {key: value for key, value in _slurm_args(config).items() if key in job_names}
    return SLURMJob(_PLACEHOLDER_ADDRESS, name="dummy-name", **job_args).job_script()


def _render_kubernetes(config: Mapping) -> str:
    _require("kubernetes")
    return yaml.dump(_kubernetes_spec(config), Dumper=_PlainDumper, sort_keys=False)


class _PlainDumper(yaml.SafeDumper):
    """Writes a mapping used twice (the scheduler's and the workers' resources) out twice:
    the YAML is for people and kubectl, to whom an ``&id001`` anchor says nothing."""

    def ignore_aliases(self, data):
        return True


def _call_args(args: Mapping) -> str:
    return ", ".join(f"{key}={value!r}" for key, value in args.items())


def _env_note(config: Mapping) -> str:
    env = config.get("env") or {}
    return f"; worker env {' '.join(f'{k}={v}' for k, v in env.items())}" if env else ""


_RENDERERS = {
    "local": _render_local,
    "local-cuda": _render_local_cuda,
    "slurm": _render_slurm,
    "kubernetes": _render_kubernetes,
    "existing": _render_existing,
}
