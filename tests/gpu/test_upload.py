"""Uploads through pinned staging buffers (``backend/_upload.py``) land every byte where
``cupy.asarray`` puts it, and a path table uploaded by a second thread lands on the caller's
device."""

from __future__ import annotations

import numpy as np
import pytest

from dgboost.backend import _upload

pytestmark = pytest.mark.gpu


def test_staged_uploads_hold_what_a_direct_copy_holds(monkeypatch):
    import cupy

    monkeypatch.setattr(_upload, "_STAGE_BYTES", 1 << 16)  # many chunks, some arrays between them
    monkeypatch.setattr(_upload, "_DIRECT_BELOW", 1 << 10)
    rng = np.random.default_rng(0)
    arrays = {
        "empty": np.empty(0, np.float64),
        "small": rng.standard_normal(10),
        "one chunk exactly": rng.integers(0, 255, 1 << 16, dtype=np.uint8),
        "chunk and a byte": rng.integers(0, 255, (1 << 16) + 1, dtype=np.uint8),
        "many chunks": rng.standard_normal(100_003),
        "two-d": rng.standard_normal((513, 77)).astype(np.float32),
        "strided": rng.integers(-5, 5, (300, 400)).astype(np.int32)[:, ::3],
    }
    got = _upload.to_device(arrays)
    assert list(got) == list(arrays)
    for name, host in arrays.items():
        want = cupy.asarray(host)
        assert got[name].dtype == want.dtype and got[name].shape == want.shape, name
        assert cupy.asnumpy(got[name]).tobytes() == np.ascontiguousarray(host).tobytes(), name


def test_a_path_table_built_under_another_device_is_uploaded_to_that_device():
    import cupy

    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs two GPUs")
    import dgboost as dg
    from dgboost.backend import _cuda_treeshap as gpu
    from dgboost.testing.shap_checks import small_model

    booster, X = small_model("binary:logistic", 6)
    table = dg.TreeExplainer(booster).table
    gpu._clear_cache()
    with cupy.cuda.Device(1):
        dev = gpu.device_path_table(table, 1 << 20)
        assert {a.device.id for a in dev.arrays.values()} == {1}
        explainer = dg.TreeExplainer(booster, device="cuda", max_table_bytes=256 << 20)
        on_1 = cupy.asnumpy(explainer.contributions(cupy.asarray(X)))
    cpu = dg.TreeExplainer(booster, max_table_bytes=256 << 20).contributions(X)
    np.testing.assert_array_equal(on_1, cpu)
