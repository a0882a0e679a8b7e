"""Optional dependencies in one place: CuPy, cuDF and dask_cudf.

Two kinds of question, answered here and nowhere else:

- *what an object is* (:func:`library_of`, :func:`is_cupy_array`, :func:`is_cudf_object`,
  :func:`is_dask_cudf_collection`): answered from the object's type, never by importing the
  package. A CuPy array or a cuDF frame can only exist where its package is imported already,
  so a CPU-only install never imports CuPy or cuDF to find out that an input is not one;
- *whether a package is installed here* (:func:`cupy_module`): Python's import, asked each time
  (a successful import is kept in ``sys.modules``, so only a missing package costs a search).

PyArrow and PyYAML are required dependencies (``pyproject.toml``), so nothing here asks for them.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

__all__ = ["library_of", "is_cupy_array", "is_cudf_object", "is_dask_cudf_collection", "cupy_module"]


def library_of(obj: Any) -> str:
    """The top-level package that defines the type of ``obj``.

    Parameters
    ----------
    obj : object
        Anything.

    Returns
    -------
    str
        E.g. ``"numpy"``, ``"pandas"``, ``"cupy"``, ``"cudf"``, ``"xgboost"``, ``"builtins"``.
    """
    return type(obj).__module__.split(".")[0]


def is_cupy_array(x: Any) -> bool:
    """Whether ``x`` is a CuPy array (or a ``cupyx`` array type), without importing CuPy.

    Parameters
    ----------
    x : object
        Anything.

    Returns
    -------
    bool
    """
    return type(x).__module__.startswith("cupy")


def is_cudf_object(x: Any) -> bool:
    """Whether ``x`` is a cuDF object (DataFrame, Series, Index), without importing cuDF.

    Parameters
    ----------
    x : object
        Anything.

    Returns
    -------
    bool
    """
    return library_of(x) == "cudf"


def is_dask_cudf_collection(x: Any) -> bool:
    """Whether ``x`` is a Dask collection of cuDF partitions (dask_cudf), without importing it.

    Parameters
    ----------
    x : object
        Anything; a Dask DataFrame or Series is told by its ``_meta`` (an empty partition).

    Returns
    -------
    bool
    """
    return is_cudf_object(getattr(x, "_meta", None))


def cupy_module() -> ModuleType | None:
    """The ``cupy`` module when CuPy is installed, else None.

    Returns
    -------
    module or None
        Whether a GPU is usable is another question (:func:`dgboost.device.cuda_device_count`).
    """
    try:
        import cupy
    except ImportError:
        return None
    return cupy
