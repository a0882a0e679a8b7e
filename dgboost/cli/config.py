"""The configs of the command line, checked: ``dgboost train --config`` (YAML or JSON) and the
types of the values of a ``--cluster`` config (:func:`check_cluster_config`; its keys and kinds
are checked by :func:`dgboost.cluster.load_config`). docs/cli.md lists every key."""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import DGBoostValueError

__all__ = ["TrainConfig", "load_config", "CONFIG_KEYS", "CLUSTER_VALUE_TYPES", "check_cluster_config"]

CONFIG_KEYS = (
    "data",
    "label",
    "weight",
    "validation",
    "params",
    "num_boost_round",
    "early_stopping_rounds",
    "output",
    "verbose_eval",
    "enable_categorical",
)


@dataclass
class TrainConfig:
    """A validated training config (see the module docstring for the file format)."""

    data: Path
    output: Path
    label: str = "label"
    weight: str | None = None
    validation: Path | None = None
    params: dict = field(default_factory=dict)
    num_boost_round: int = 100
    early_stopping_rounds: int | None = None
    verbose_eval: int = 1
    enable_categorical: bool = False


def _read_config_file(path: Path) -> Any:
    """The parsed config file: JSON for ``.json``, else YAML (PyYAML is a dependency)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise DGBoostValueError(f"config {path} is not valid JSON: {exc}") from None
    try:
        return yaml.safe_load(text)  # YAML is a superset of JSON
    except yaml.YAMLError as exc:
        raise DGBoostValueError(f"config {path} is not valid YAML/JSON: {exc}") from None


def _int_key(cfg: dict, key: str, default, minimum: int) -> Any:
    value = cfg.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise DGBoostValueError(f"config key {key!r} must be an integer >= {minimum}, got {value!r}")
    return value


def load_config(path: str | os.PathLike) -> TrainConfig:
    """Read and check a YAML/JSON training config; relative paths are resolved against its folder.

    Raises
    ------
    DGBoostValueError
        For a file that does not parse, unknown keys (with the closest valid one), a missing
        ``data``/``output``, or values of the wrong type.
    """
    path = Path(path)
    cfg = _read_config_file(path)
    if not isinstance(cfg, dict):
        raise DGBoostValueError(f"config {path} must be a mapping of keys to values, got {type(cfg).__name__}")
    for key in cfg:
        if key not in CONFIG_KEYS:
            close = difflib.get_close_matches(str(key), CONFIG_KEYS, n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else f"; expected keys: {', '.join(CONFIG_KEYS)}"
            raise DGBoostValueError(f"unknown config key {key!r}{hint}")
    for key, what in (("data", "the training data path"), ("output", "the model path to write")):
        if not cfg.get(key):
            raise DGBoostValueError(f"config {path} needs a {key!r} entry ({what})")
    for key in ("data", "output", "validation", "label", "weight"):
        if cfg.get(key) is not None and not isinstance(cfg[key], str):
            raise DGBoostValueError(f"config key {key!r} must be a string, got {cfg[key]!r}")
    if not isinstance(cfg.get("enable_categorical", False), bool):
        value = cfg["enable_categorical"]
        raise DGBoostValueError(f"config key 'enable_categorical' must be true or false, got {value!r}")
    params = cfg.get("params") or {}
    if not isinstance(params, dict):
        raise DGBoostValueError(f"config key 'params' must be a mapping of parameter names to values, got {params!r}")
    base = path.parent

    def resolve(p):
        return None if p is None else (Path(p) if Path(p).is_absolute() else base / p)

    return TrainConfig(
        data=resolve(cfg["data"]),
        output=resolve(cfg["output"]),
        label=cfg.get("label") or "label",
        weight=cfg.get("weight"),
        validation=resolve(cfg.get("validation")),
        params=dict(params),
        num_boost_round=_int_key(cfg, "num_boost_round", 100, 0),
        early_stopping_rounds=_int_key(cfg, "early_stopping_rounds", None, 1),
        verbose_eval=_int_key(cfg, "verbose_eval", 1, 0),
        enable_categorical=cfg.get("enable_categorical", False),
    )


# ----------------------------------------------------------------------------- cluster configs
_INT = ("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool))
_POSITIVE = ("an integer >= 1", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1)
_BOOL = ("true or false", lambda v: isinstance(v, bool))
_STR = ("a string", lambda v: isinstance(v, str))
_SIZE = ("a size (e.g. 4GiB, a number of bytes, 0.8 or auto)", lambda v: isinstance(v, (str, int, float)))
_DURATION = (
    "a duration (e.g. 30s, or seconds)",
    lambda v: isinstance(v, (str, int, float)) and not isinstance(v, bool),
)
_STR_LIST = ("a list of strings", lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v))
_DEVICES = ("a string of GPU numbers (0,1) or a list of them", lambda v: isinstance(v, (str, int, list)))
_MAPPING = ("a mapping", lambda v: isinstance(v, Mapping))
_COMMAND = ("a string or a list of strings", lambda v: isinstance(v, str) or _STR_LIST[1](v))

_LOCAL_ARGS = {
    "n_workers": _POSITIVE,
    "threads_per_worker": _POSITIVE,
    "processes": _BOOL,
    "memory_limit": _SIZE,
    "dashboard_address": _STR,
    "host": _STR,
    "scheduler_port": _INT,
    "protocol": _STR,
}
# (kind, section) -> {key: (expected type in words, check)}; None (YAML null) is accepted for
# every key: it means the default of the library the config's kind uses
CLUSTER_VALUE_TYPES = {
    ("local", "args"): _LOCAL_ARGS,
    ("local-cuda", "args"): {**_LOCAL_ARGS, "CUDA_VISIBLE_DEVICES": _DEVICES, "rmm_pool_size": _SIZE},
    ("slurm", "args"): {
        "queue": _STR,
        "account": _STR,
        "cores": _POSITIVE,
        "job_cpu": _POSITIVE,
        "memory": _SIZE,
        "processes": _POSITIVE,
        "walltime": _STR,
        "job_extra_directives": _STR_LIST,
        "worker_extra_args": _STR_LIST,
        "job_script_prologue": _STR_LIST,
    },
    ("slurm", "scale"): {"n": _POSITIVE, "jobs": _POSITIVE, "memory": _SIZE, "cores": _POSITIVE},
    ("kubernetes", "args"): {
        "name": _STR,
        "image": _STR,
        "n_workers": _POSITIVE,
        "worker_command": _COMMAND,
        "resources": _MAPPING,
        "namespace": _STR,
    },
    ("existing", "args"): {"timeout": _DURATION},
    ("existing", None): {"address": _STR, "scheduler_file": _STR},
}


def check_cluster_config(config: Mapping, source: str) -> None:
    """Refuse a ``--cluster`` config value of the wrong type, in one line naming the key.

    The kinds and key names are checked by :func:`dgboost.cluster.load_config`; this checks
    the types of the values of the keys listed in :data:`CLUSTER_VALUE_TYPES` (those of the
    shipped configs and the usual ones: ``args.n_workers: two`` is refused here rather than by
    the cluster's constructor, in a traceback). Other keys go to the library as given.

    Parameters
    ----------
    config : mapping
        A cluster config (as :func:`dgboost.cluster.load_config` returns it).
    source : str
        Where it comes from (a file name), for the message.

    Raises
    ------
    DGBoostValueError
        ``<source>: args.n_workers must be an integer >= 1 (or null), got 'two'``.
    """
    kind = config.get("kind")
    for (for_kind, section), types in CLUSTER_VALUE_TYPES.items():
        if for_kind != kind:
            continue
        values = config if section is None else (config.get(section) or {})
        if not isinstance(values, Mapping):
            continue  # load_config refuses it, naming the section
        for key, (words, ok) in types.items():
            value = values.get(key)
            if value is not None and not ok(value):
                where = key if section is None else f"{section}.{key}"
                raise DGBoostValueError(f"{source}: {where} must be {words} (or null), got {value!r}")
