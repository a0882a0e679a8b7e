"""``dgboost._array``: picking NumPy or CuPy from the arrays themselves, without a GPU.

A CuPy array is recognised by the module its type lives in, so a stand-in class whose
``__module__`` starts with ``cupy`` plays one here, and a stand-in module plays ``cupy``.
"""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from dgboost._array import array_module, is_device_array, to_host


class FakeDeviceArray:
    """Looks like a CuPy array to ``_array`` (type module ``cupy._core.core``, a ``get()``)."""

    def __init__(self, values):
        self.values = np.asarray(values)

    def get(self):
        return self.values.copy()


FakeDeviceArray.__module__ = "cupy._core.core"


@pytest.fixture
def fake_cupy(monkeypatch):
    module = types.ModuleType("cupy")
    monkeypatch.setitem(sys.modules, "cupy", module)
    return module


@pytest.fixture
def cupy_missing(monkeypatch):
    # None in sys.modules makes any `import cupy` raise ImportError, as if it were not installed
    monkeypatch.setitem(sys.modules, "cupy", None)


def test_numpy_arrays_select_numpy():
    assert array_module(np.zeros(3)) is np
    assert array_module(np.zeros(3, np.float32), np.ones((2, 2))) is np


def test_no_arguments_scalars_lists_and_none_select_numpy():
    assert array_module() is np
    assert array_module(1.5, np.float64(2.0), [1, 2], None) is np


def test_numpy_arrays_never_import_cupy_even_when_it_is_missing(cupy_missing):
    assert array_module(np.zeros(3), None, 2.0) is np
    assert to_host(np.zeros(3)).shape == (3,)


def test_a_single_device_array_among_host_arrays_selects_cupy(fake_cupy):
    assert array_module(np.zeros(3), None, FakeDeviceArray([1.0])) is fake_cupy
    assert array_module(FakeDeviceArray([1.0])) is fake_cupy


def test_device_arrays_are_recognised_by_their_type_module_only():
    assert is_device_array(FakeDeviceArray([1.0]))
    assert not is_device_array(np.zeros(2))
    assert not is_device_array(None)

    class CupyLookalikeName:  # a name that mentions cupy is not enough: the module decides
        pass

    assert not is_device_array(CupyLookalikeName())


def test_to_host_returns_a_numpy_array_as_it_is():
    a = np.arange(4, dtype=np.float32)
    assert to_host(a) is a


def test_to_host_makes_lists_into_numpy_arrays():
    out = to_host([[1.0, 2.0], [3.0, 4.0]])
    assert isinstance(out, np.ndarray) and out.shape == (2, 2)


def test_to_host_passes_none_through():
    assert to_host(None) is None


def test_to_host_copies_a_device_array_to_numpy(cupy_missing):
    dev = FakeDeviceArray(np.arange(6, dtype=np.float32).reshape(2, 3))
    out = to_host(dev)
    assert isinstance(out, np.ndarray) and out.dtype == np.float32 and out.shape == (2, 3)
    np.testing.assert_array_equal(out, dev.values)
