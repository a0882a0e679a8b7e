"""dgboost.dask.shap_values of a categorical model on dask DataFrames with category columns:
the values of the single-process explainer, bit for bit, whatever the partitions' category
order (each partition is re-coded to the model's categories where it is explained)."""

from __future__ import annotations

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

import dgboost as dg
import dgboost.dask as dxgb

pytestmark = pytest.mark.dask


@pytest.fixture(scope="module")
def categorical_model():
    rng = np.random.default_rng(3)
    n = 900
    frame = pd.DataFrame(
        {
            "distance": rng.normal(size=n),
            "carrier": pd.Categorical(rng.choice([f"c{i}" for i in range(12)], size=n)),
            "origin": pd.Categorical(rng.choice(["EWR", "JFK", "LGA"], size=n)),
        }
    )
    frame.loc[rng.random(n) < 0.1, "carrier"] = np.nan
    y = (frame["distance"] + (frame["carrier"].cat.codes % 3 == 0) + (frame["origin"] == "JFK") > 1).astype(float)
    params = {"objective": "binary:logistic", "max_depth": 4}
    booster = dg.train(params, dg.DMatrix(frame, label=y, enable_categorical=True), 6)
    assert booster.ensemble.has_categorical
    return booster, frame


def _partitions_with_their_own_category_order(frame: pd.DataFrame, npartitions: int = 3) -> dd.DataFrame:
    """A dask DataFrame whose partitions list the categories in different orders."""
    parts = np.array_split(np.arange(frame.shape[0]), npartitions)
    pieces = []
    for i, idx in enumerate(parts):
        piece = frame.iloc[idx].copy()
        for c in ("carrier", "origin"):
            cats = list(piece[c].cat.categories)
            piece[c] = piece[c].cat.reorder_categories(cats[::-1] if i % 2 else cats)
        pieces.append(dd.from_pandas(piece, npartitions=1))
    return dd.concat(pieces)


def test_shap_frames_of_category_partitions_equal_the_explainers(dask_client, categorical_model):
    booster, frame = categorical_model
    explainer = dg.TreeExplainer(booster)
    out = dxgb.shap_values(dask_client(2), explainer, _partitions_with_their_own_category_order(frame))
    pd.testing.assert_frame_equal(out.compute(), explainer.shap_frame(frame))


def test_interaction_values_of_a_frame_with_category_columns_equal_the_explainers(dask_client, categorical_model):
    booster, frame = categorical_model
    ddf = _partitions_with_their_own_category_order(frame)
    out = dxgb.shap_values(dask_client(2), booster, ddf, interactions=True).compute()
    np.testing.assert_array_equal(out, dg.TreeExplainer(booster).shap_interaction_values(frame))
