"""Device strings are validated like XGBoost's, and a GPU model predicts on a CPU-only machine."""

import warnings

import numpy as np
import pytest

import dgboost as dg
import dgboost.device as device_module
from dgboost.errors import ParameterError
from dgboost.params import normalize_device, parse_params

RNG = np.random.default_rng(7)
X = RNG.normal(size=(300, 4)).astype(np.float32)
X[::11, 2] = np.nan
Y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(np.float32)


def _cuda_devices() -> int:
    try:
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # noqa: BLE001 - no cupy, driver or device
        return 0


@pytest.fixture(scope="module")
def cpu_model():
    return dg.train(
        {"objective": "binary:logistic", "max_depth": 3, "eta": 0.5},
        dg.DMatrix(X, label=Y),
        num_boost_round=6,
        verbose_eval=False,
    )


@pytest.fixture
def no_gpu(monkeypatch):
    """Make this process look GPU-less, whatever the machine has."""
    monkeypatch.setattr(device_module, "cuda_device_count", lambda: (0, "no CUDA device (test)"))


def _fallback_warnings(caught):
    return [w for w in caught if "running on the CPU instead" in str(w.message)]


@pytest.mark.parametrize(
    "given, canonical",
    [
        ("cpu", "cpu"),
        ("cuda", "cuda"),
        ("cuda:0", "cuda:0"),
        ("cuda:3", "cuda:3"),
        ("gpu", "cuda"),
        ("gpu:1", "cuda:1"),
        ("CUDA", "cuda"),
    ],
)
def test_valid_device_strings_are_accepted_and_spelled_canonically(given, canonical):
    assert normalize_device(given) == canonical
    assert parse_params({"device": given}).device == canonical


@pytest.mark.parametrize(
    "given, match",
    [
        ("cuda:x", "invalid GPU ordinal 'x'"),
        ("cuda:", "invalid GPU ordinal ''"),
        ("cuda:-1", "invalid GPU ordinal '-1'"),
        ("tpu", "unknown device 'tpu'"),
        ("cpu:0", "unknown device 'cpu:0'"),
        ("", "unknown device ''"),
        (0, "must be a string"),
    ],
)
def test_invalid_device_strings_raise_a_parameter_error_that_names_them(given, match):
    with pytest.raises(ParameterError, match=match):
        normalize_device(given)
    with pytest.raises(ParameterError, match=match):
        parse_params({"device": given})


def test_set_param_and_the_booster_constructor_validate_the_device(cpu_model):
    b = cpu_model.copy()
    b.set_param({"device": "gpu"})
    assert b._predict_params["device"] == "cuda"
    b.set_param("device", "cuda:1")
    assert b._predict_params["device"] == "cuda:1"
    with pytest.raises(ParameterError, match="unknown device 'tpu'"):
        b.set_param("device", "tpu")
    with pytest.raises(ParameterError, match="invalid GPU ordinal"):
        dg.Booster({"device": "cuda:x"})


def test_a_cuda_booster_predicts_numpy_on_the_cpu_and_warns_once_when_no_gpu_is_usable(cpu_model, no_gpu):
    expected = cpu_model.predict(dg.DMatrix(X))
    b = cpu_model.copy()
    b.set_param({"device": "cuda"})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = b.predict(dg.DMatrix(X))
        again = b.inplace_predict(X)
        leaves = b.predict(dg.DMatrix(X), pred_leaf=True)
    assert len(_fallback_warnings(caught)) == 1
    assert "device='cuda'" in str(_fallback_warnings(caught)[0].message)
    for out in (first, again):
        assert isinstance(out, np.ndarray) and out.dtype == np.float32
        np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(leaves, cpu_model.predict(dg.DMatrix(X), pred_leaf=True))


@pytest.mark.skipif(_cuda_devices() > 0, reason="checks the real fallback on a machine without a GPU")
def test_on_this_gpu_less_machine_device_cuda_falls_back_to_the_cpu_with_one_warning(cpu_model):
    b = cpu_model.copy()
    b.set_param({"device": "cuda"})
    with pytest.warns(UserWarning, match="no CUDA GPU is usable") as caught:
        out = b.predict(dg.DMatrix(X))
        b.predict(dg.DMatrix(X), output_margin=True)
    assert len(_fallback_warnings(caught)) == 1
    np.testing.assert_array_equal(out, cpu_model.predict(dg.DMatrix(X)))


def test_a_model_trained_on_a_gpu_loads_and_predicts_on_a_cpu_only_machine(cpu_model, no_gpu, tmp_path):
    gpu_trained = cpu_model.copy()
    gpu_trained.meta["params"]["device"] = "cuda:0"  # what training with device="cuda:0" records
    path = tmp_path / "gpu_model.json"
    gpu_trained.save_model(path)
    loaded = dg.Booster(model_file=path)
    assert loaded.meta["params"]["device"] == "cuda:0"
    with pytest.warns(UserWarning, match="device='cuda:0'"):
        out = loaded.predict(dg.DMatrix(X), output_margin=True)
    np.testing.assert_array_equal(out, cpu_model.predict(dg.DMatrix(X), output_margin=True))


def test_set_param_device_cpu_overrides_the_training_device_without_a_warning(cpu_model, no_gpu):
    b = cpu_model.copy()
    b.meta["params"]["device"] = "cuda"
    b.set_param({"device": "cpu"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = b.predict(dg.DMatrix(X))
    np.testing.assert_array_equal(out, cpu_model.predict(dg.DMatrix(X)))


def test_an_unknown_device_in_a_model_file_predicts_on_the_cpu(cpu_model):
    b = cpu_model.copy()
    b.meta["params"]["device"] = "sycl:0"  # written by some other library: not ours to judge
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = b.predict(dg.DMatrix(X))
    np.testing.assert_array_equal(out, cpu_model.predict(dg.DMatrix(X)))


def test_copies_and_round_slices_keep_the_prediction_device(cpu_model):
    b = cpu_model.copy()
    b.set_param({"device": "cuda:1", "n_jobs": 2})
    assert b.copy()._predict_params == {"device": "cuda:1", "nthread": 2}
    assert b[0:3]._predict_params["device"] == "cuda:1"
