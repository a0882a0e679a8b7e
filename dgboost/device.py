"""One device value: what a ``device`` argument means, and what happens when its GPU is missing.

Every entry point (``train``, ``Booster.predict`` / ``inplace_predict`` / ``set_param``,
``TreeExplainer``, ``dgboost.dask``, the command line) reads a device through
:func:`parse_device` and decides where to run through :func:`resolve_device`, so that one
spelling gives one answer everywhere (see ``docs/devices.md``).

Accepted spellings are XGBoost's: ``"cpu"``, ``"cuda"``, ``"cuda:N"``, ``"gpu"``, ``"gpu:N"``
(N a GPU ordinal), case and surrounding blanks ignored.

The missing-GPU rule is XGBoost's (``src/context.cc``): a GPU asked for where none is usable
gives one ``UserWarning`` and the work runs on the CPU; an ordinal beyond the visible GPUs
is wrapped onto them (``ordinal % count``), also with a warning. Training is exact on both
devices, so the CPU gives the model the GPU would have given.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass
from typing import Literal

from ._compat import cupy_module
from .errors import ParameterError

__all__ = ["Device", "parse_device", "resolve_device", "cuda_device_count", "CPU"]

_EXPECTED = "expected 'cpu', 'cuda', 'cuda:N', 'gpu' or 'gpu:N' (N a GPU ordinal such as 0)"


@dataclass(frozen=True)
class Device:
    """Where work runs.

    Attributes
    ----------
    kind : {"cpu", "cuda"}
    ordinal : int or None
        The GPU's ordinal for ``kind="cuda"`` (None: the current one, ordinal 0 unless a
        worker was given another); always None for the CPU.
    """

    kind: Literal["cpu", "cuda"]
    ordinal: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("cpu", "cuda"):
            raise ParameterError(f"unknown device kind {self.kind!r}: {_EXPECTED}")
        if self.kind == "cpu" and self.ordinal is not None:
            raise ParameterError(f"the CPU has no ordinal, got {self.ordinal!r}")
        if self.ordinal is not None and (
            isinstance(self.ordinal, bool) or not isinstance(self.ordinal, int) or self.ordinal < 0
        ):
            raise ParameterError(f"a GPU ordinal is a non-negative int, got {self.ordinal!r}")

    def __str__(self) -> str:
        """``"cpu"``, ``"cuda"`` or ``"cuda:N"``: the canonical spelling."""
        return self.kind if self.ordinal is None else f"{self.kind}:{self.ordinal}"

    @property
    def is_cuda(self) -> bool:
        """Whether this is a GPU."""
        return self.kind == "cuda"

    @property
    def index(self) -> int:
        """The GPU ordinal to use (0 for ``"cuda"`` without one); 0 for the CPU."""
        return self.ordinal or 0


#: the CPU
CPU = Device("cpu")


def parse_device(value: str | Device) -> Device:
    """The :class:`Device` a device argument names; the only parser of device strings.

    Parameters
    ----------
    value : str or Device
        ``"cpu"``, ``"cuda"``, ``"cuda:N"``, or XGBoost's aliases ``"gpu"`` / ``"gpu:N"``
        (N a non-negative integer ordinal); case and surrounding blanks are ignored. A
        :class:`Device` is returned as it is.

    Returns
    -------
    Device

    Raises
    ------
    ParameterError
        For anything else (``"cudax"``, ``"cuda:-1"``, ``"tpu"``, ``"cpu:0"``, a non-string).
    """
    if isinstance(value, Device):
        return value
    if not isinstance(value, str):
        raise ParameterError(f"device must be a string, got {value!r}: {_EXPECTED}")
    kind, sep, ordinal = value.strip().lower().partition(":")
    if kind == "cpu" and not sep:
        return CPU
    if kind in ("cuda", "gpu"):
        if not sep:
            return Device("cuda")
        if ordinal.isascii() and ordinal.isdigit():
            return Device("cuda", int(ordinal))
        raise ParameterError(f"device {value!r} has an invalid GPU ordinal {ordinal!r}: {_EXPECTED}")
    raise ParameterError(f"unknown device {value!r}: {_EXPECTED}")


@functools.lru_cache(maxsize=1)
def cuda_device_count() -> tuple[int, str]:
    """(CUDA GPUs usable from this process, why none when 0). Asked once per process.

    A GPU is usable when CuPy imports, a driver answers, and it reports at least one device.
    """
    cupy = cupy_module()
    if cupy is None:
        return 0, "CuPy is not installed"
    try:
        count = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as exc:  # noqa: BLE001 - no driver, or a driver too old: no GPU for us
        return 0, f"{type(exc).__name__}: {exc}"
    return (count, "") if count > 0 else (0, "no CUDA device found")


def resolve_device(value: str | Device, available: tuple[int, str] | None = None) -> Device:
    """Where work asked for on ``value`` runs here: the one missing-GPU rule.

    Parameters
    ----------
    value : str or Device
        A device argument (see :func:`parse_device`).
    available : (int, str), optional
        (usable GPUs, why none) where the work will run; default :func:`cuda_device_count`
        of this process (a Dask client passes what its workers report).

    Returns
    -------
    Device
        ``value`` parsed; the CPU, with a ``UserWarning``, when it names a GPU and none is
        usable; ``cuda:(N % count)``, with a ``UserWarning``, when its ordinal N is beyond
        the ``count`` visible GPUs (XGBoost's rule for both).

    Raises
    ------
    ParameterError
        When ``value`` is not a device (:func:`parse_device`).
    """
    device = parse_device(value)
    if not device.is_cuda:
        return device
    count, reason = available if available is not None else cuda_device_count()
    if count < 1:
        warnings.warn(
            f"device='{device}' was asked for but no CUDA GPU is usable ({reason}): running on the CPU instead",
            UserWarning,
            stacklevel=2,
        )
        return CPU
    if device.ordinal is not None and device.ordinal >= count:
        wrapped = Device("cuda", device.ordinal % count)
        warnings.warn(
            f"device='{device}' was asked for but only {count} GPU(s) are visible: running on '{wrapped}' instead",
            UserWarning,
            stacklevel=2,
        )
        return wrapped
    return device
