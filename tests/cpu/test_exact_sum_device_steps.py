"""The device path of ``exact_sum`` (its steps on CuPy columns) gives the host path's bits.

The device path reduces each column whole, takes max |x| as max(|max x|, |min x|) and makes
its fixed-point terms a chunk at a time. Its logic is run here with NumPy standing in for
CuPy (the same array API): chunks that do not divide the rows, several columns, float32 and
float64, weights of mixed signs, zeros and an empty column must all give the host's sums bit
for bit. tests/gpu/test_cuda_objectives.py and tests/gpu/test_device_labels.py run it on CuPy.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from dgboost import exact
from dgboost.comm import LocalComm
from dgboost.errors import DGBoostValueError


@pytest.fixture
def numpy_as_cupy(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", np)
    monkeypatch.setattr(exact, "_DEVICE_CHUNK", 1000)  # several chunks and a partial one


def _columns(kind: str) -> np.ndarray:
    rng = np.random.default_rng(7)
    if kind == "labels":
        return (rng.random(4321) < 0.3).astype(np.float32)
    if kind == "signed float64 columns":
        return np.stack([rng.normal(size=3456) * 1e3, -rng.random(3456), np.zeros(3456)], axis=1)
    if kind == "tiny and huge":
        return np.array([1e-300, -3e-200, 5e250, 0.0, -0.0] * 401, np.float64)
    return np.zeros((0, 2), np.float32)  # an empty block


@pytest.mark.parametrize("kind", ["labels", "signed float64 columns", "tiny and huge", "empty"])
def test_the_device_steps_give_the_hosts_sums_bit_for_bit(numpy_as_cupy, kind):
    v = _columns(kind)
    host = exact.exact_sum(v, LocalComm())
    device = exact._device_exact_sum(v, LocalComm())
    assert device.dtype == np.float64 and device.tobytes() == host.tobytes()


def test_the_device_steps_refuse_non_finite_values_as_the_host_does(numpy_as_cupy):
    v = np.array([1.0, np.nan, 2.0] * 700)
    with pytest.raises(DGBoostValueError, match="non-finite") as host:
        exact.exact_sum(v, LocalComm())
    with pytest.raises(DGBoostValueError, match="non-finite") as device:
        exact._device_exact_sum(v, LocalComm())
    assert str(device.value) == str(host.value)
