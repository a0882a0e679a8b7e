"""What a ``--device`` option accepts, and what it means in this process."""

from __future__ import annotations

import click

from ..errors import ParameterError

__all__ = ["DEVICE", "DeviceParam", "resolve_device"]


class DeviceParam(click.ParamType):
    """``auto`` or a device (:func:`dgboost.device.parse_device`), in its canonical spelling."""

    name = "device"

    def convert(self, value: str, param: click.Parameter | None, ctx: click.Context | None) -> str:
        """``"auto"``, or ``value``'s canonical spelling (``"cpu"``, ``"cuda"``, ``"cuda:N"``)."""
        from ..device import parse_device

        if isinstance(value, str) and value.strip().lower() == "auto":
            return "auto"
        try:
            return str(parse_device(value))
        except ParameterError as exc:
            self.fail(str(exc), param, ctx)


#: the ``--device`` option's type
DEVICE = DeviceParam()


def resolve_device(device: str) -> str:
    """Where the command runs here, as a canonical device string.

    Parameters
    ----------
    device : str
        ``"auto"``, or any spelling :func:`dgboost.device.parse_device` accepts.

    Returns
    -------
    str
        For ``"auto"``: ``"cuda"`` when a GPU, CuPy and dgboost's CUDA backend are all usable,
        else ``"cpu"``. Otherwise :func:`dgboost.device.resolve_device`'s answer, the rule of
        every entry point (a GPU not usable here: ``"cpu"``, with a warning).
    """
    from .. import backend
    from ..device import cuda_device_count
    from ..device import resolve_device as resolve

    if device != "auto":
        return str(resolve(device))
    if cuda_device_count()[0] < 1:
        return "cpu"
    try:
        backend.get_backend("cuda")  # a GPU is seen, so this is the CUDA backend or an error
    except Exception:  # noqa: BLE001 - any failure means "no usable GPU here"
        return "cpu"
    return "cuda"
