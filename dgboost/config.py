"""dgboost's global configuration: ``set_config``, ``get_config`` and ``config_context``.

The names follow XGBoost (``xgboost.set_config`` and friends), so code written for one
configures the other. The options are settings of the process, not of a model: none of
them changes what a model learns or predicts.

=========================  ===================================  ==============================
option                     environment variable (default)       meaning
=========================  ===================================  ==============================
``verbosity``              --                                   0 silent, 1 warnings (default),
                                                                2 info, 3 debug: messages of
                                                                the ``"dgboost"`` logger, the
                                                                Numba compile notice (from 1),
                                                                XGBoost's tracker lines of a
                                                                Dask job (from 2)
``nccl_stream_ordered``    ``DGBOOST_NCCL_STREAM_ORDERED`` (1)  NCCL collectives queued on the
                                                                stream, no host wait each
``nccl_keep_communicators``  ``DGBOOST_NCCL_KEEP`` (1)          Dask workers keep their NCCL
                                                                communicator for the next job
``device_cache_bytes``     ``DGBOOST_DEVICE_CACHE_BYTES``       device memory the GPU
                           (4 GiB)                              explainers' uploads may hold
``kernel_cache_dir``       ``DGBOOST_KERNEL_CACHE``             folder of compiled CUDA kernels
                           (``~/.cache/dgboost/kernels``)
``use_rmm``                -- (False)                           CuPy allocates through RAPIDS
                                                                Memory Manager when a CUDA
                                                                backend is made (a warning
                                                                without RMM); no effect on CPU
=========================  ===================================  ==============================

How a value is found, when it is used (never at import): the innermost
:func:`config_context` of the calling thread that sets it, else the value given to
:func:`set_config` outside any context, else the environment variable (read then, so a
deployment can set it before or after ``import dgboost``), else the built-in default. An
environment variable holding a value that cannot be read raises :class:`~dgboost.errors.DGBoostValueError`
naming the variable.

Threads: :func:`set_config` outside a context sets the value for the whole process;
:func:`config_context` (and :func:`set_config` inside one) changes it for the calling thread
only, until the context exits, as XGBoost's thread-local configuration does. The NCCL options
and ``verbosity`` are read on the client when a Dask job is set up and travel to the workers
with the job, so a ``config_context`` around ``dgboost.dask.train`` reaches every worker.
Evaluation lines asked for with ``verbose_eval`` print whatever the ``verbosity``.

Examples
--------
>>> import dgboost as dg
>>> with dg.config_context(device_cache_bytes=1 << 30):
...     dg.get_config()["device_cache_bytes"]
1073741824
"""

from __future__ import annotations

import contextlib
import difflib
import logging
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .errors import DGBoostTypeError, DGBoostValueError

__all__ = ["set_config", "get_config", "config_context"]

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _check_verbosity(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise DGBoostTypeError(f"verbosity must be an int from 0 to 3, got {value!r}")
    if not 0 <= value <= 3:
        raise DGBoostValueError(f"verbosity must be from 0 to 3 (0 silent, 1 warning, 2 info, 3 debug), got {value}")
    return int(value)


def _check_bool(name: str) -> Callable[[Any], bool]:
    def check(value: Any) -> bool:
        if not isinstance(value, bool):
            raise DGBoostTypeError(f"{name} must be True or False, got {value!r}")
        return value

    return check


def _check_bytes(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise DGBoostTypeError(f"device_cache_bytes must be an int (bytes), got {value!r}")
    if value < 0:
        raise DGBoostValueError(f"device_cache_bytes must be at least 0, got {value}")
    return int(value)


def _check_dir(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)) or not str(value):
        raise DGBoostTypeError(f"kernel_cache_dir must be a folder path or None, got {value!r}")
    return str(Path(value).expanduser())


def _parse_bool(text: str) -> bool:
    word = text.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise ValueError(f"expected one of {', '.join(_TRUE + _FALSE)}")


# option -> (check of a value given in Python, environment variable, parser of its text, default)
_OPTIONS: dict[str, tuple[Callable[[Any], Any], str | None, Callable[[str], Any] | None, Any]] = {
    "verbosity": (_check_verbosity, None, None, 1),
    "nccl_stream_ordered": (_check_bool("nccl_stream_ordered"), "DGBOOST_NCCL_STREAM_ORDERED", _parse_bool, True),
    "nccl_keep_communicators": (_check_bool("nccl_keep_communicators"), "DGBOOST_NCCL_KEEP", _parse_bool, True),
    "device_cache_bytes": (_check_bytes, "DGBOOST_DEVICE_CACHE_BYTES", int, 4 << 30),
    "kernel_cache_dir": (_check_dir, "DGBOOST_KERNEL_CACHE", str, None),
    "use_rmm": (_check_bool("use_rmm"), None, None, False),
}

_process: dict[str, Any] = {}  # values given to set_config outside any context
_process_lock = threading.Lock()
_local = threading.local()  # .layers: the calling thread's config_context overrides, innermost last


def _layers() -> list[dict[str, Any]]:
    layers = getattr(_local, "layers", None)
    if layers is None:
        layers = _local.layers = []
    return layers


def _checked(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` validated: an unknown name raises with the closest known one."""
    out = {}
    for name, value in options.items():
        if name not in _OPTIONS:
            close = difflib.get_close_matches(name, _OPTIONS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise DGBoostValueError(
                f"unknown dgboost config option {name!r}{hint} (known: {', '.join(sorted(_OPTIONS))})"
            )
        out[name] = _OPTIONS[name][0](value)
    return out


def _from_environment(name: str) -> Any:
    _, variable, parse, default = _OPTIONS[name]
    text = os.environ.get(variable, "") if variable else ""
    if not text.strip():  # unset or empty: the built-in default
        return default
    try:
        return _OPTIONS[name][0](parse(text))
    except (ValueError, TypeError) as exc:
        raise DGBoostValueError(f"environment variable {variable}={text!r} is not a valid {name}: {exc}") from None


def _value(name: str) -> Any:
    for layer in reversed(_layers()):
        if name in layer:
            return layer[name]
    with _process_lock:
        if name in _process:
            return _process[name]
    return _from_environment(name)


def set_config(**new_config: Any) -> None:
    """Set global configuration options (XGBoost's ``set_config``).

    Parameters
    ----------
    **new_config
        Options and their values: ``verbosity`` (int, 0-3), ``nccl_stream_ordered`` (bool),
        ``nccl_keep_communicators`` (bool), ``device_cache_bytes`` (int >= 0),
        ``kernel_cache_dir`` (str, path or None for the default folder), ``use_rmm`` (bool).
        Outside a
        :func:`config_context` the values hold for the whole process; inside one, for the
        calling thread until the context exits.

    Raises
    ------
    DGBoostValueError
        An unknown option (the message suggests the closest name) or a value out of range;
        nothing is set then.
    DGBoostTypeError
        A value of the wrong type; nothing is set then.
    """
    checked = _checked(new_config)
    layers = _layers()
    if layers:
        layers[-1].update(checked)
        return
    with _process_lock:
        _process.update(checked)


def get_config() -> dict[str, Any]:
    """The current value of every option, as the calling thread sees it (XGBoost's ``get_config``).

    Returns
    -------
    dict
        ``{option: value}`` for every option of :func:`set_config`, environment defaults
        read now. ``kernel_cache_dir`` is None when the default folder
        (``~/.cache/dgboost/kernels``) is used.

    Raises
    ------
    DGBoostValueError
        An environment variable the value comes from cannot be read (the message names it).
    """
    return {name: _value(name) for name in _OPTIONS}


@contextlib.contextmanager
def config_context(**new_config: Any) -> Iterator[None]:
    """Set options for the calling thread inside a ``with`` block (XGBoost's ``config_context``).

    Parameters
    ----------
    **new_config
        As for :func:`set_config`; validated before the block starts.

    Yields
    ------
    None
        On exit (error or not) every option is what it was before the block, including what
        :func:`set_config` changed inside it.

    Raises
    ------
    DGBoostValueError, DGBoostTypeError
        As :func:`set_config`.
    """
    layers = _layers()
    layers.append(_checked(new_config))
    depth = len(layers)
    try:
        yield
    finally:
        del layers[depth - 1 :]


class _VerbosityFilter(logging.Filter):
    """Drops the ``"dgboost"`` logger's records below the level of the current ``verbosity``
    (read per record, so a thread's context applies to its own messages)."""

    _LEVELS = {0: logging.ERROR, 1: logging.WARNING, 2: logging.INFO, 3: logging.DEBUG}

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            verbosity = _value("verbosity")
        except DGBoostValueError:  # never fail a log call over the configuration
            verbosity = 1
        return record.levelno >= self._LEVELS[verbosity]


def _install_filter() -> None:
    logger = logging.getLogger("dgboost")
    if logger.level == logging.NOTSET:
        # every record reaches the filter, which applies ``verbosity`` (a level set on the
        # logger by the application is left alone and applies first)
        logger.setLevel(logging.DEBUG)
    if not any(isinstance(f, _VerbosityFilter) for f in logger.filters):
        logger.addFilter(_VerbosityFilter())


_install_filter()
