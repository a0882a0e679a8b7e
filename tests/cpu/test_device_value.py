"""One device value: every entry point parses a device the same way and follows one missing-GPU rule.

The GPU-less cases make the process look GPU-less (``dgboost.device.cuda_device_count``), so
they check the rule on any machine.
"""

import ast
import pathlib
import warnings

import numpy as np
import pytest

import dgboost as dg
import dgboost.device as device_module
from dgboost.cli.device import DEVICE
from dgboost.cli.device import resolve_device as cli_resolve_device
from dgboost.device import CPU, Device, parse_device, resolve_device
from dgboost.errors import ParameterError

RNG = np.random.default_rng(3)
X = RNG.normal(size=(200, 4)).astype(np.float32)
Y = (X[:, 0] - X[:, 2] > 0).astype(np.float32)
PARAMS = {"objective": "binary:logistic", "max_depth": 3, "eta": 0.5}
GPU_SPELLINGS = ["cuda", "CUDA", " gpu ", "gpu:0", "cuda:0", "GPU:1"]
BAD_SPELLINGS = ["cudax", "cuda:-1", "tpu", "cpu:0", "gpu0", "cuda:1.0", ""]
RULE = "running on the CPU instead"


@pytest.fixture(scope="module")
def cpu_model():
    return dg.train(PARAMS, dg.DMatrix(X, label=Y), 4)


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(device_module, "cuda_device_count", lambda: (0, "no CUDA device (test)"))


def _rule_warnings(caught) -> list:
    return [w for w in caught if RULE in str(w.message)]


# -- the parser --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "given, expected",
    [
        ("cpu", CPU),
        (" CPU ", CPU),
        ("cuda", Device("cuda")),
        ("gpu", Device("cuda")),
        ("cuda:0", Device("cuda", 0)),
        ("GPU:3", Device("cuda", 3)),
        (Device("cuda", 2), Device("cuda", 2)),
    ],
)
def test_xgboosts_spellings_parse_to_one_device_value(given, expected):
    assert parse_device(given) == expected
    assert parse_device(str(expected)) == expected


def test_a_device_prints_its_canonical_spelling_and_is_frozen():
    assert [str(Device("cpu")), str(Device("cuda")), str(Device("cuda", 1))] == ["cpu", "cuda", "cuda:1"]
    with pytest.raises(AttributeError):
        Device("cuda").ordinal = 1  # type: ignore[misc]
    with pytest.raises(ParameterError):
        Device("cpu", 0)
    with pytest.raises(ParameterError):
        Device("tpu")  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", BAD_SPELLINGS + [0, None])
def test_anything_else_is_a_parameter_error_at_every_entry_point(bad, cpu_model):
    with pytest.raises(ParameterError) as parsed:
        parse_device(bad)
    message = str(parsed.value)
    assert "expected 'cpu', 'cuda', 'cuda:N', 'gpu' or 'gpu:N'" in message
    with pytest.raises(ParameterError, match="expected 'cpu'"):
        dg.train({**PARAMS, "device": bad}, dg.DMatrix(X, label=Y), 1)
    with pytest.raises(ParameterError, match="expected 'cpu'"):
        cpu_model.copy().set_param("device", bad) if bad is not None else parse_device(bad)
    with pytest.raises(ParameterError, match="expected 'cpu'"):
        dg.TreeExplainer(cpu_model, device=bad)
    with pytest.raises(ParameterError, match="expected 'cpu'"):
        cli_resolve_device(bad)
    if isinstance(bad, str):
        import click

        with pytest.raises(click.BadParameter, match="expected 'cpu'"):
            DEVICE.convert(bad, None, None)


def test_dask_shap_values_checks_the_device_on_the_client_before_any_work(cpu_model):
    import dask.array as da  # distributed is a dependency of dgboost itself

    import dgboost.dask as dxgb

    with pytest.raises(ParameterError, match="unknown device 'cudax'"):
        dxgb.shap_values(None, cpu_model, da.from_array(X, chunks=100), device="cudax")


# -- the missing-GPU rule ---------------------------------------------------------------------
def test_without_a_gpu_a_gpu_resolves_to_the_cpu_with_one_warning(no_gpu):
    for spelling in GPU_SPELLINGS:
        with pytest.warns(UserWarning, match=RULE) as caught:
            assert resolve_device(spelling) == CPU
        assert len(_rule_warnings(caught)) == 1
        assert f"device='{parse_device(spelling)}'" in str(caught[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resolve_device("cpu") == CPU


def test_an_ordinal_beyond_the_visible_gpus_wraps_onto_them_with_a_warning(monkeypatch):
    monkeypatch.setattr(device_module, "cuda_device_count", lambda: (2, ""))
    with pytest.warns(UserWarning, match="only 2 GPU"):
        assert resolve_device("gpu:3") == Device("cuda", 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resolve_device("cuda:1") == Device("cuda", 1)
        assert resolve_device("cuda") == Device("cuda")
    with pytest.warns(UserWarning, match="a worker has no GPU"):  # what a Dask client passes
        assert resolve_device("cuda:5", available=(0, "a worker has no GPU")) == CPU


@pytest.mark.parametrize("spelling", GPU_SPELLINGS)
def test_without_a_gpu_every_entry_point_warns_and_gives_the_cpus_answer(spelling, cpu_model, no_gpu):
    dtrain = dg.DMatrix(X, label=Y)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trained = dg.train({**PARAMS, "device": spelling}, dtrain, 4)
    assert len(_rule_warnings(caught)) == 1
    assert trained.ensemble.n_trees == cpu_model.ensemble.n_trees
    np.testing.assert_array_equal(trained.predict(dg.DMatrix(X)), cpu_model.predict(dg.DMatrix(X)))

    booster = cpu_model.copy()
    booster.set_param({"device": spelling})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = booster.predict(dg.DMatrix(X))
        inplace = booster.inplace_predict(X)
    assert len(_rule_warnings(caught)) == 1  # once per booster and device
    np.testing.assert_array_equal(value, cpu_model.predict(dg.DMatrix(X)))
    np.testing.assert_array_equal(inplace, value)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        explainer = dg.TreeExplainer(cpu_model, device=spelling)
        phi = explainer.shap_values(X[:20])
    assert len(_rule_warnings(caught)) == 1
    assert explainer.device == CPU
    np.testing.assert_array_equal(phi, dg.TreeExplainer(cpu_model).shap_values(X[:20]))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert cli_resolve_device(spelling) == "cpu"
    assert len(_rule_warnings(caught)) == 1


def test_without_a_gpu_the_cli_auto_device_is_the_cpu_without_a_warning(no_gpu):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cli_resolve_device("auto") == "cpu"
    assert DEVICE.convert(" Auto ", None, None) == "auto"
    assert DEVICE.convert("GPU:2", None, None) == "cuda:2"


def test_a_gpu_explainer_unpickled_where_no_gpu_is_usable_explains_on_the_cpu(cpu_model, no_gpu, monkeypatch):
    import pickle

    explainer = dg.TreeExplainer(cpu_model)
    state = explainer.__getstate__()
    assert "_kernels" not in state  # the engine is made where the explainer lands
    state["device"] = Device("cuda")
    clone = dg.TreeExplainer.__new__(dg.TreeExplainer)
    with pytest.warns(UserWarning, match=RULE):
        clone.__setstate__(state)
    assert clone.device == CPU
    np.testing.assert_array_equal(clone.shap_values(X[:5]), explainer.shap_values(X[:5]))
    again = pickle.loads(pickle.dumps(explainer))
    np.testing.assert_array_equal(again.shap_values(X[:5]), explainer.shap_values(X[:5]))


# -- no driver module imports a CUDA module -----------------------------------------------------
PACKAGE = pathlib.Path(dg.__file__).parent
CUDA_MODULES = (
    "dgboost.backend.cuda",
    "dgboost.backend._nvrtc",
    "dgboost.backend._cuda_treeshap",
    "dgboost.backend._cuda_interventional",
)


def _module_name(path: pathlib.Path) -> str:
    parts = ("dgboost",) + path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_cuda_module(name: str) -> bool:
    return (
        name in CUDA_MODULES
        or name.startswith("dgboost.backend._cuda_")
        or any(name.startswith(m + ".") for m in CUDA_MODULES)
    )


def _is_driver(path: pathlib.Path) -> bool:
    rel = path.relative_to(PACKAGE).as_posix()
    return not rel.startswith(("backend/", "testing/"))


def _imported_names(path: pathlib.Path) -> set[str]:
    """Every module ``path`` imports, at the top or inside functions, relative imports resolved
    (``from . import x`` counts as ``package.x``)."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(max(node.level - 1, 0)):
                base = base.rpartition(".")[0]
            target = (f"{base}.{node.module}" if node.module else base) if node.level else node.module
            names.add(target)
            names.update(f"{target}.{alias.name}" for alias in node.names)
    return names


def test_the_import_scan_sees_imports_inside_functions_and_relative_ones():
    engines = _imported_names(PACKAGE / "backend" / "cuda.py")
    assert "dgboost.backend._cuda_sketch" in engines and "dgboost.backend._nvrtc" in engines
    assert _is_cuda_module("dgboost.backend._cuda_shap") and not _is_cuda_module("dgboost.backend.cpu")
    assert _is_driver(PACKAGE / "quantile.py") and not _is_driver(PACKAGE / "backend" / "_cuda_treeshap.py")


def test_no_driver_module_imports_a_cuda_module():
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if _is_driver(path):
            found = sorted(n for n in _imported_names(path) if _is_cuda_module(n))
            if found:
                offenders[path.relative_to(PACKAGE).as_posix()] = found
    assert offenders == {}
