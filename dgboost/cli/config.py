"""The training config of ``dgboost train --config`` (YAML or JSON), read and checked."""

from __future__ import annotations

import difflib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import DGBoostValueError

__all__ = ["TrainConfig", "load_config", "CONFIG_KEYS"]

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
    )
