"""Labels and weights given as CuPy arrays stay on the device, with the host's values and errors.

A DMatrix keeps a CuPy label or weight where it is (``DMatrix._vector``) and checks it there;
``DMatrix.label`` is still NumPy (copied once, at first read). Training, the objectives'
checks and intercepts read the device copy: every answer must be the host path's, bit for bit
(models, intercepts) and word for word (errors).
"""

from __future__ import annotations

import numpy as np
import pytest

import dgboost as dg
from dgboost.comm import LocalComm
from dgboost.datasets import make_synthetic
from dgboost.errors import DGBoostValueError
from dgboost.objective import get_objective
from dgboost.params import parse_params

pytestmark = pytest.mark.gpu

N = 3000


@pytest.fixture(scope="module")
def cp():
    import cupy  # a declared test dependency: a broken install fails

    return cupy


def _features():
    X, _, _ = make_synthetic(N, 8, task="regression", missing_rate=0.05, seed=11)
    return X.astype(np.float32)


def _error(make):
    with pytest.raises(DGBoostValueError) as info:
        make()
    return str(info.value)


def test_a_cupy_label_and_weight_are_kept_on_the_device_and_read_as_the_hosts_float32(cp):
    X = _features()
    rng = np.random.default_rng(3)
    y = rng.normal(size=N)  # float64: rounded to float32 on the device as NumPy rounds it
    w = rng.integers(0, 5, N)  # integers: through float64, as on the host
    dm = dg.DMatrix(cp.asarray(X), cp.asarray(y), weight=cp.asarray(w))
    host = dg.DMatrix(X, y, weight=w)
    for name in ("label", "weight"):
        kept = dm._vector(name)
        assert isinstance(kept, cp.ndarray) and kept.dtype == np.float32 and kept.shape == (N,)
        assert isinstance(getattr(dm, name), np.ndarray)
        np.testing.assert_array_equal(getattr(dm, name), getattr(host, name))
        np.testing.assert_array_equal(kept.get(), getattr(host, name))
    np.testing.assert_array_equal(dm.get_label(), host.get_label())


def test_a_label_set_later_replaces_the_kept_one_and_its_host_copy(cp):
    X = _features()
    dm = dg.DMatrix(cp.asarray(X), cp.zeros(N, cp.float32))
    assert not dm.label.any()  # the host copy is made
    dm.set_label(cp.ones(N, cp.float32))
    assert dm.label.all() and bool(dm._vector("label").all())
    dm.set_label(np.full(N, 2.0, np.float32))
    assert isinstance(dm._vector("label"), np.ndarray) and (dm.label == 2.0).all()


@pytest.mark.parametrize(
    "field, values, allow",
    [
        ("label", lambda: np.where(np.arange(N) == 17, np.nan, 1.0), "label"),
        ("label", lambda: np.where(np.arange(N) == 5, np.inf, 1.0), "label"),
        ("label", lambda: np.ones(N - 1), "label"),
        ("label", lambda: np.ones((N, 2)), "label"),
        ("weight", lambda: np.where(np.arange(N) == 9, -1.0, 1.0), "weight"),
        ("weight", lambda: np.where(np.arange(N) == 9, np.nan, 1.0), "weight"),
    ],
    ids=["nan label", "inf label", "short label", "two columns", "negative weight", "nan weight"],
)
def test_a_bad_device_vector_is_refused_with_the_hosts_message(cp, field, values, allow):
    X = _features()
    v = values()
    kwargs = {"label": np.ones(N, np.float32)} if field == "weight" else {}
    host = _error(lambda: dg.DMatrix(X, **{**kwargs, field: v}))
    device = _error(lambda: dg.DMatrix(cp.asarray(X), **{**kwargs, field: cp.asarray(v)}))
    assert device == host


@pytest.mark.parametrize(
    "params, labels",
    [
        ({"objective": "binary:logistic"}, lambda y: np.where(np.arange(N) % 97 == 3, 2.0, y > 0)),
        ({"objective": "count:poisson"}, lambda y: np.where(np.arange(N) % 101 == 1, -1.0, np.abs(y))),
        ({"objective": "reg:gamma"}, lambda y: np.abs(y) * (np.arange(N) % 50 != 7)),
        ({"objective": "multi:softprob", "num_class": 3}, lambda y: np.where(np.arange(N) == 8, 1.5, np.arange(N) % 3)),
        ({"objective": "survival:cox"}, lambda y: np.where(np.arange(N) == 30, 0.0, y)),
    ],
    ids=["logistic out of [0, 1]", "poisson negative", "gamma zero", "multiclass fraction", "cox zero"],
)
def test_training_refuses_bad_device_labels_with_the_objectives_host_message(cp, params, labels):
    X = _features()
    y = labels(np.random.default_rng(5).normal(size=N)).astype(np.float32)
    p = {**params, "device": "cuda"}
    host = _error(lambda: dg.train(p, dg.DMatrix(cp.asarray(X), y), 1))
    device = _error(lambda: dg.train(p, dg.DMatrix(cp.asarray(X), cp.asarray(y)), 1))
    assert device == host and "bad label" in host


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize(
    "params",
    [
        {"objective": "reg:squarederror"},
        {"objective": "binary:logistic"},
        {"objective": "binary:logistic", "scale_pos_weight": 2.5},
        {"objective": "reg:absoluteerror"},
        {"objective": "reg:quantileerror", "quantile_alpha": [0.2, 0.7]},
        {"objective": "reg:pseudohubererror"},
        {"objective": "count:poisson"},
        {"objective": "reg:gamma"},
        {"objective": "multi:softprob", "num_class": 3},
        {"objective": "survival:cox"},
    ],
    ids=lambda p: "-".join(str(v) for v in p.values()),
)
def test_intercepts_from_device_labels_are_the_hosts_bits(cp, params, weighted):
    rng = np.random.default_rng(8)
    y = rng.normal(size=N).astype(np.float32)
    if params["objective"] == "binary:logistic":
        y = (y > 0.3).astype(np.float32)
    elif params["objective"].startswith("multi"):
        y = rng.integers(0, 3, N).astype(np.float32)
    elif params["objective"] in ("count:poisson", "reg:gamma"):
        y = np.abs(y) + 0.01
    w = (rng.random(N) * 3).astype(np.float32) if weighted else None
    obj = get_objective(parse_params(params))
    obj.validate_labels(cp.asarray(y), None if w is None else cp.asarray(w), None)
    host = obj.base_margins(y, w, LocalComm())
    device = obj.base_margins(cp.asarray(y), None if w is None else cp.asarray(w), LocalComm())
    assert isinstance(device, np.ndarray)
    np.testing.assert_array_equal(device.view(np.uint64), np.asarray(host, np.float64).view(np.uint64))


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_a_model_trained_from_device_labels_is_the_model_from_host_labels(cp, weighted):
    X, y, _ = make_synthetic(N, 8, task="binary", missing_rate=0.1, seed=21)
    X, y = X.astype(np.float32), y.astype(np.float32)
    w = np.random.default_rng(2).random(N).astype(np.float32) if weighted else None
    params = {"objective": "binary:logistic", "device": "cuda", "max_depth": 5, "eval_metric": ["logloss", "auc"]}
    dX = cp.asarray(X)
    host = dg.DMatrix(dX, y, weight=w)
    device = dg.DMatrix(dX, cp.asarray(y), weight=None if w is None else cp.asarray(w))
    logs: dict = {"host": {}, "device": {}}
    a = dg.train(params, host, 8, evals=[(host, "train")], evals_result=logs["host"], verbose_eval=False)
    b = dg.train(params, device, 8, evals=[(device, "train")], evals_result=logs["device"], verbose_eval=False)
    assert bytes(a.save_raw("json")) == bytes(b.save_raw("json"))
    assert logs["host"] == logs["device"]
    assert "_label_host" not in device.__dict__ or device.__dict__["_label_host"] is None  # never copied
