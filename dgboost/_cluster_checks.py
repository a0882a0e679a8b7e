"""What a cluster config may hold where it reaches a shell or another host (docs/security.md).

Two jobs for :mod:`dgboost.cluster`:

- values that reach a SLURM job script or a Kubernetes resource are checked before anything is
  rendered or submitted: dask-jobqueue writes most values into the script unquoted (``#SBATCH``
  lines, the worker's command line), so a value such as ``x; rm -rf ~`` or one holding a line
  break would become shell. Such values are refused, naming the key; worker environment
  variables are quoted by :mod:`dgboost.cluster` instead (their values are data);
- the ``tls`` key: certificate paths, turned into a ``distributed.Security`` that requires
  encryption.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .errors import DGBoostValueError

__all__ = ["TLS_KEYS", "TLS_MOUNT", "check_tls", "check_script_values", "security_for", "tls_files", "with_tls"]

# ca_file: the certificate authority every side trusts; cert / key: the PEM certificate (and its
# key, when not in the same file) that the scheduler, the workers and the client present
TLS_KEYS = ("ca_file", "cert", "key")
# Kubernetes: the pods read the certificate from a Secret of the config's ``tls: {secret: NAME}``,
# mounted here, with these file names
TLS_MOUNT = "/etc/dgboost-tls"
_SECRET_FILES = {"ca_file": "ca.pem", "cert": "cert.pem", "key": "key.pem"}
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# characters a shell gives a meaning to, and line breaks: never part of a job-script value
_SHELL = re.compile(r"[\n\r\x00;&|`$<>(){}\\\"'*?!#]")
_LINE_BREAK = re.compile(r"[\n\r\x00]")
_K8S_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")
# SLURM args that are shell commands by design (each entry one line of the job script)
_SHELL_BY_DESIGN = frozenset({"job_script_prologue", "job_script_epilogue"})


def check_tls(kind: str, tls: Any, source: str) -> None:
    """Refuse a ``tls`` value that is not a mapping of the known keys to paths (for
    ``kubernetes``: ``{secret: NAME}``, the Secret holding ca.pem, cert.pem and key.pem).

    Parameters
    ----------
    kind : str
        The config's kind.
    tls : object
        The config's ``tls`` value (None: no TLS).
    source : str
        The file or "cluster config", named in errors.
    """
    if tls is None:
        return
    if kind == "kubernetes":
        if not isinstance(tls, Mapping) or set(tls) != {"secret"} or not _K8S_NAME.match(str(tls["secret"])):
            raise DGBoostValueError(
                f"{source}: a kubernetes tls is {{secret: NAME}}, the Kubernetes Secret holding "
                f"{', '.join(_SECRET_FILES.values())}; got {tls!r}"
            )
        return
    if not isinstance(tls, Mapping):
        raise DGBoostValueError(f"{source}: 'tls' must be a mapping of {', '.join(TLS_KEYS)} to file paths")
    for key, value in tls.items():
        if key not in TLS_KEYS:
            raise DGBoostValueError(f"{source}: unknown key {key!r} in tls; expected {', '.join(TLS_KEYS)}")
        if value is not None and not isinstance(value, (str, os.PathLike)):
            raise DGBoostValueError(f"{source}: tls {key} must be a file path, got {value!r}")
    if tls.get("ca_file") is None or tls.get("cert") is None:
        raise DGBoostValueError(f"{source}: tls needs ca_file and cert (and key, unless cert holds it)")


def tls_files(tls: Mapping) -> dict[str, str]:
    """The ``tls`` paths made absolute and checked to exist (``key`` defaults to ``cert``).

    Returns
    -------
    dict
        ``ca_file``, ``cert`` and ``key``, absolute paths of existing files.
    """
    files = {}
    for key in TLS_KEYS:
        value = tls.get(key) if tls.get(key) is not None else tls.get("cert")
        path = Path(value).expanduser().resolve()
        if not path.is_file():
            raise DGBoostValueError(f"tls {key}: no such file {str(path)!r}")
        files[key] = str(path)
    return files


def security_for(tls: Mapping | None):
    """A ``distributed.Security`` requiring TLS with the config's certificate, or None.

    The one certificate serves the scheduler, the workers and the client (each checks the
    others against ``ca_file``): give each its own by running the scheduler and workers
    yourself and connecting with an ``existing`` config.
    """
    if not tls:
        return None
    from distributed import Security

    files = tls_files(tls)
    roles = {
        f"tls_{role}_{part}": files[part] for role in ("client", "scheduler", "worker") for part in ("cert", "key")
    }
    return Security(tls_ca_file=files["ca_file"], require_encryption=True, **roles)


def check_script_values(kind: str, config: Mapping, source: str) -> None:
    """Refuse values of a ``slurm`` or ``kubernetes`` config that would become shell.

    Every string in ``args`` (nested lists and mappings included) is checked: no line break
    anywhere, and, except in the SLURM args that are shell lines by design
    (``job_script_prologue``), none of the characters a shell interprets. ``env`` names must be
    identifiers; their values are quoted where they are written, and only line breaks are
    refused (Kubernetes). A Kubernetes ``name`` must be a DNS label.
    """
    if kind not in ("slurm", "kubernetes"):
        return
    for key, value in (config.get("args") or {}).items():
        allowed = _LINE_BREAK if kind == "slurm" and key in _SHELL_BY_DESIGN else _SHELL
        for text in _strings(value):
            if allowed.search(text):
                what = "a line break" if _LINE_BREAK.search(text) else "a shell character"
                raise DGBoostValueError(
                    f"{source}: args {key!r} holds {what} ({text!r}); it would be written into the "
                    f"{'job script' if kind == 'slurm' else 'cluster resource'} as it is: refused"
                )
    for name, value in (config.get("env") or {}).items():
        if not isinstance(name, str) or not _ENV_NAME.match(name):
            raise DGBoostValueError(f"{source}: env name {name!r} is not a valid environment variable name")
        if _LINE_BREAK.search(str(value)):
            raise DGBoostValueError(f"{source}: env {name} holds a line break ({str(value)!r}): refused")
    name = (config.get("args") or {}).get("name")
    if kind == "kubernetes" and name is not None and not (isinstance(name, str) and _K8S_NAME.match(name)):
        raise DGBoostValueError(
            f"{source}: args 'name' {name!r} is not a Kubernetes name (lower-case letters, digits and '-')"
        )


def _strings(value: Any):
    """Every string (and number, as text) inside ``value``."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)
    elif value is not None:
        yield str(value)


def with_tls(spec: dict, secret: str, name: str, port: int = 8786) -> dict:
    """A ``DaskCluster`` resource (``make_cluster_spec``'s dict) whose scheduler and workers
    talk TLS only, with the certificate of the Kubernetes Secret ``secret`` mounted at
    :data:`TLS_MOUNT` (Dask's TLS settings as environment variables). The workers are given the
    scheduler's ``tls://`` address (the operator's own variable names ``tcp://``)."""
    files = {key: f"{TLS_MOUNT}/{file}" for key, file in _SECRET_FILES.items()}
    env = [
        {"name": "DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION", "value": "True"},
        {"name": "DASK_DISTRIBUTED__COMM__TLS__CA_FILE", "value": files["ca_file"]},
    ] + [
        {"name": f"DASK_DISTRIBUTED__COMM__TLS__{role}__{part.upper()}", "value": files[part]}
        for role in ("SCHEDULER", "WORKER", "CLIENT")
        for part in ("cert", "key")
    ]
    volume = {"name": "dgboost-tls", "secret": {"secretName": secret}}
    mount = {"name": "dgboost-tls", "mountPath": TLS_MOUNT, "readOnly": True}
    for part in ("scheduler", "worker"):
        pod = spec["spec"][part]["spec"]
        pod["volumes"] = [*pod.get("volumes", []), volume]
        for container in pod["containers"]:
            container["env"] = [*container.get("env", []), *env]
            container["volumeMounts"] = [*container.get("volumeMounts", []), mount]
    scheduler = spec["spec"]["scheduler"]["spec"]["containers"][0]
    scheduler["args"] = [*scheduler["args"], "--protocol", "tls"]
    worker = spec["spec"]["worker"]["spec"]["containers"][0]
    worker["args"] = [worker["args"][0], f"tls://{name}-scheduler:{port}", *worker["args"][1:]]
    return spec
