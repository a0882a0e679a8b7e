"""A whole level's histograms are built in chunks of parents (``grower._BUILD_CHUNK_BYTES``),
and the last evaluated level is evaluated a chunk at a time: only memory changes, never the
model."""

from __future__ import annotations

import numpy as np
import pytest

import dgboost as dg
import dgboost.grower as grower
from dgboost.comm import run_in_threads

_cuda_emulator = pytest.importorskip("_cuda_emulator")


def _data(n: int = 1500, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = np.column_stack([rng.normal(size=(n, 5)), rng.integers(0, 12, n)]).astype(np.float32)
    x[rng.random(x.shape) < 0.05] = np.nan
    y = (np.nan_to_num(x[:, 0]) + np.sin(np.nan_to_num(x[:, 5])) + 0.3 * rng.normal(size=n) > 0).astype(np.float32)
    return x, y


def _chunks_seen(monkeypatch) -> list[int]:
    """Record the nodes of every ``evaluate_splits`` call on the CPU backend."""
    from dgboost.backend.cpu import CPUBackend

    seen: list[int] = []
    original = CPUBackend.evaluate_splits

    def counted(self, hist, *args, **kwargs):
        seen.append(int(hist.shape[0]))
        return original(self, hist, *args, **kwargs)

    monkeypatch.setattr(CPUBackend, "evaluate_splits", counted)
    return seen


PARAMS = [
    {"objective": "binary:logistic", "max_depth": 4},
    {"objective": "binary:logistic", "max_depth": 4, "monotone_constraints": "(1,0,-1,0,0,0)"},
    {"objective": "multi:softprob", "num_class": 3, "max_depth": 3, "colsample_bylevel": 0.7, "seed": 5},
]


@pytest.mark.parametrize("params", PARAMS, ids=["binary", "monotone", "multiclass-colsample"])
def test_a_last_level_taken_one_parent_at_a_time_gives_the_same_model_file(monkeypatch, params):
    x, y = _data()
    if params["objective"].startswith("multi"):
        y = (np.nan_to_num(x[:, 5]) % 3).astype(np.float32)
    p = {**params, "max_bin": 32, "eta": 0.3}
    whole = dg.train(p, dg.DMatrix(x, y), 4, verbose_eval=False).save_raw("json")
    seen = _chunks_seen(monkeypatch)
    monkeypatch.setattr(grower, "_BUILD_CHUNK_BYTES", 1)
    chunked = dg.train(p, dg.DMatrix(x, y), 4, verbose_eval=False).save_raw("json")
    # the last level evaluated went one parent (two children) at a time
    assert seen.count(2) >= 4 * (1 << (p["max_depth"] - 2))
    assert chunked == whole


def test_a_categorical_last_level_in_chunks_gives_the_same_model_file(monkeypatch):
    x, y = _data()
    p = {"objective": "binary:logistic", "max_depth": 4, "max_bin": 32, "max_cat_to_onehot": 4}
    types = ["q"] * 5 + ["c"]
    whole = dg.train(p, dg.DMatrix(x, y, feature_types=types), 3, verbose_eval=False).save_raw("json")
    monkeypatch.setattr(grower, "_BUILD_CHUNK_BYTES", 1)
    chunked = dg.train(p, dg.DMatrix(x, y, feature_types=types), 3, verbose_eval=False).save_raw("json")
    assert chunked == whole


def test_ranks_that_take_the_last_level_in_chunks_train_the_single_process_model(monkeypatch):
    x, y = _data(n=2000)
    p = {"objective": "binary:logistic", "max_depth": 4, "max_bin": 32}
    single = dg.train(p, dg.DMatrix(x, y), 3, verbose_eval=False).save_raw("json")
    monkeypatch.setattr(grower, "_BUILD_CHUNK_BYTES", 1)
    edges = [0, 700, 2000]

    def rank_fn(comm, rank):
        part = slice(edges[rank], edges[rank + 1])
        return dg.train(p, dg.DMatrix(x[part], y[part]), 3, verbose_eval=False, comm=comm).save_raw("json")

    assert run_in_threads(2, rank_fn) == [single, single]


@pytest.mark.skipif(not _cuda_emulator.available(), reason="no host C++ compiler for the CUDA emulator")
@pytest.mark.parametrize("types", [None, ["q"] * 5 + ["c"]], ids=["numeric", "categorical"])
def test_emulated_cuda_training_with_a_chunked_last_level_saves_the_cpu_model(monkeypatch, types):
    from dgboost.testing.checks import normalised_model_json

    backend = _cuda_emulator.route_cuda_training(monkeypatch)
    x, y = _data(n=400)
    p = {"objective": "binary:logistic", "max_depth": 3, "max_bin": 8}
    cpu = dg.train({**p, "device": "cpu"}, dg.DMatrix(x, y, feature_types=types), 2, verbose_eval=False)
    monkeypatch.setattr(grower, "_BUILD_CHUNK_BYTES", 1)
    cuda = dg.train({**p, "device": "cuda"}, dg.DMatrix(x, y, feature_types=types), 2, verbose_eval=False)
    # a tree's levels 1 and 2 have 1 and 2 parents, each a chunk of its own: with the root's,
    # four split searches a tree (three unchunked), each deriving its chunk's histograms
    launched = [name for name, *_ in backend.launches]
    assert launched.count("best_per_feature") >= 2 * (1 + 1 + 2)
    assert "children_histograms" not in launched
    assert cuda.ensemble.has_categorical == (types is not None)
    assert normalised_model_json(cuda, keys=()) == normalised_model_json(cpu, keys=())
