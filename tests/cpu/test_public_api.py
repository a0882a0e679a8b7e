"""The public API is fully annotated: every parameter and every return of the functions and
methods a user calls (``train``, ``cv``, ``DMatrix``, ``Booster``, ``TreeExplainer``, the
callbacks, ``dgboost.dask`` and the estimators), so that type checkers and IDEs see the same
contract as the docstrings; and the package ships ``py.typed``."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

import dgboost
import dgboost.callback
import dgboost.dask
import dgboost.sklearn

_PUBLIC_FUNCTIONS = [
    "dgboost.train",
    "dgboost.cv",
    "dgboost.dask.train",
    "dgboost.dask.predict",
    "dgboost.dask.inplace_predict",
    "dgboost.dask.shap_values",
]
_PUBLIC_CLASSES = [
    "dgboost.DMatrix",
    "dgboost.QuantileDMatrix",
    "dgboost.Booster",
    "dgboost.TreeExplainer",
    "dgboost.callback.TrainingCallback",
    "dgboost.callback.EvaluationMonitor",
    "dgboost.callback.EarlyStopping",
    "dgboost.callback.LearningRateScheduler",
    "dgboost.callback.TrainingCheckPoint",
    "dgboost.sklearn.DGBRegressor",
    "dgboost.sklearn.DGBClassifier",
    "dgboost.sklearn.DGBRanker",
    "dgboost.dask.DaskDMatrix",
    "dgboost.dask.DaskDGBRegressor",
    "dgboost.dask.DaskDGBClassifier",
    "dgboost.dask.DaskDGBRanker",
]


def _resolve(dotted: str):
    module, _, name = dotted.rpartition(".")
    obj = dgboost
    for part in module.split(".")[1:]:
        obj = getattr(obj, part)
    return getattr(obj, name)


def _missing_annotations(func) -> list[str]:
    """Names of ``func``'s parameters (and ``return``) that carry no annotation."""
    func = inspect.unwrap(func)
    signature = inspect.signature(func)
    missing = [
        name
        for name, p in signature.parameters.items()
        if name not in ("self", "cls") and p.annotation is inspect.Parameter.empty
    ]
    if signature.return_annotation is inspect.Signature.empty:
        missing.append("return")
    return missing


def _own_public_methods(cls) -> dict:
    """The class's public methods (and ``__init__``) defined in dgboost, not inherited from elsewhere."""
    out = {}
    for klass in cls.__mro__:
        if not klass.__module__.startswith("dgboost"):
            continue
        for name, value in vars(klass).items():
            if name in out or (name.startswith("_") and name != "__init__"):
                continue
            if isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            if isinstance(value, property):
                value = value.fget
            if inspect.isfunction(value):
                out[name] = value
    return out


@pytest.mark.parametrize("dotted", _PUBLIC_FUNCTIONS)
def test_a_public_function_annotates_every_parameter_and_its_return(dotted):
    assert _missing_annotations(_resolve(dotted)) == [], dotted


@pytest.mark.parametrize("dotted", _PUBLIC_CLASSES)
def test_every_public_method_of_a_public_class_is_fully_annotated(dotted):
    cls = _resolve(dotted)
    gaps = {name: m for name, f in _own_public_methods(cls).items() if (m := _missing_annotations(f))}
    assert gaps == {}, f"{dotted}: methods with unannotated parameters or returns: {gaps}"


def test_the_package_ships_a_py_typed_marker():
    assert (Path(dgboost.__file__).parent / "py.typed").is_file()
