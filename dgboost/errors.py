"""The one exception family dgboost raises for user-facing problems.

Every error a user can cause (bad input, bad parameter, bad model file) is a
:class:`DGBoostError`. The subclasses also derive from the matching builtin so that
``except ValueError`` in existing XGBoost-using code keeps working.
"""

__all__ = [
    "DGBoostError",
    "DGBoostValueError",
    "DGBoostTypeError",
    "ModelFormatError",
    "DeviceMemoryError",
    "ParameterError",
    "CommunicationError",
]


class DGBoostError(Exception):
    """Base class of every error dgboost raises on purpose."""


class DGBoostValueError(DGBoostError, ValueError):
    """An argument has the right type but a wrong value (NaN labels, shape mismatch...)."""


class DGBoostTypeError(DGBoostError, TypeError):
    """An argument has a type dgboost cannot use (object columns, unknown containers...)."""


class ParameterError(DGBoostValueError):
    """An unknown, misspelled or out-of-range training parameter."""


class ModelFormatError(DGBoostValueError):
    """A model file or model dict that is not valid dgboost / XGBoost JSON."""


class DeviceMemoryError(DGBoostError, MemoryError):
    """The GPU cannot hold the work; the message gives the estimate and the input size."""


class CommunicationError(DGBoostError, RuntimeError):
    """A collective between ranks failed: a peer was lost, timed out or disagreed."""
