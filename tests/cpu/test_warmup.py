"""The warm-up (``dgboost warmup``, ``python -m dgboost.warmup``): the CPU kernels compiled into
Numba's on-disk cache ahead of the first training."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from dgboost.backend import _warmup
from dgboost.backend.cpu import CPUBackend, _DenseBins
from dgboost.binned import BinnedMatrix
from dgboost.cli import main
from dgboost.data import DMatrix
from dgboost.quantile import compute_cuts

# a fresh process that trains what the demo trains (missing values, an evaluation set, auc),
# on other sizes and another depth, predicts, sums blocks as large trainings do, and prints how
# many Numba compilations it ran
_TRAIN_AND_COUNT = """
import numpy as np
from numba.core import event
import dgboost as dg

class Count(event.Listener):
    n = 0
    def on_start(self, ev):
        Count.n += 1
    def on_end(self, ev):
        pass

event.register("numba:compile", Count())
rng = np.random.default_rng(7)
x = rng.standard_normal((3000, 9)).astype(np.float32)
y = (x[:, 0] - x[:, 3] > 0).astype(np.float32)
x[rng.random(x.shape) < 0.2] = np.nan
dtrain, dtest = dg.DMatrix(x[:2500], y[:2500]), dg.DMatrix(x[2500:], y[2500:])
params = {"objective": "binary:logistic", "eval_metric": ["logloss", "auc"], "max_depth": 4}
booster = dg.train(params, dtrain, 3, evals=[(dtest, "test")], verbose_eval=False)
booster.predict(dtest)
# the exact sums of a training of more than 2**20 labels, plain and weighted
from dgboost.comm.base import LocalComm
from dgboost.exact import exact_sum
exact_sum(np.ones((2**20 + 5, 1), np.float32), LocalComm())
exact_sum(np.ones((2**20 + 5, 2)), LocalComm())
print("COMPILED", Count.n)
"""


def test_a_warm_up_fills_the_cache_so_that_a_fresh_process_training_that_kind_of_data_compiles_nothing(tmp_path):
    """The one test that compiles in a fresh process (~10-20 s): the warm-up's first case
    (binary, missing values, an evaluation set) into an empty cache of the test's own, then
    another process trains and predicts data of that kind from that cache."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba-cache")}
    warm = "from dgboost.backend._warmup import WARMUP_CASES, warm_up\nprint(warm_up(WARMUP_CASES[:1]).compiled)\n"
    warmed = subprocess.run([sys.executable, "-c", warm], env=env, capture_output=True, text=True, check=True)
    assert int(warmed.stdout.split()[-1]) > 0  # the cache was empty: the warm-up compiled
    assert warmed.stderr == ""  # ... without the notice meant for trainings that compile unannounced
    trained = subprocess.run(
        [sys.executable, "-c", _TRAIN_AND_COUNT], env=env, capture_output=True, text=True, check=True
    )
    assert "COMPILED 0" in trained.stdout
    assert trained.stderr == ""


@pytest.mark.parametrize("missing", [False, True])
def test_a_warm_up_case_bins_its_data_as_training_on_data_of_its_kind_does(missing):
    """Dense cases take the one-byte bins, cases with missing values the two-byte ones: the
    layouts whose kernels are compiled apart."""
    case = next(c for c in _warmup.WARMUP_CASES if c.missing == missing and not c.categorical)
    x, y, _ = _warmup._case_data(case, np.random.default_rng(0))
    assert np.isnan(x).any() == missing
    cuts = compute_cuts(DMatrix(x, y).data, None, 256)
    bins = BinnedMatrix.from_values(x, cuts, CPUBackend()).bins
    assert isinstance(bins, _DenseBins) != missing
    assert bins.dtype == (np.uint16 if missing else np.uint8)


def test_the_warmup_command_prints_what_it_compiled_and_where_the_cache_is(monkeypatch):
    report = _warmup.WarmupReport(seconds=1.25, compiled=3, cases=[], cache_dirs=["/cache/here"])
    calls = []

    def fake_warm_up(progress=None):
        calls.append(progress)
        return report

    monkeypatch.setattr(_warmup, "warm_up", fake_warm_up)
    result = CliRunner().invoke(main, ["warmup", "--quiet"])
    assert result.exit_code == 0, result.output
    assert calls == [None]  # --quiet: no line per case
    assert result.output.strip() == "dgboost warmup: 3 compilations in 1.2 s; cache: /cache/here"
