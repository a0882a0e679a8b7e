"""Edge cases of categorical input found in review (issue 29): what dgboost accepts must train
*and* save, and XGBoost 3.4.1 is the oracle for what is refused."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xgboost as xgb

import dgboost as dg
from dgboost.errors import DGBoostValueError


def _bool_category_frame(n=60):
    rng = np.random.default_rng(0)
    flags = rng.random(n) < 0.5
    return pd.DataFrame({"flag": pd.Categorical(flags), "x": rng.normal(size=n)}), flags.astype(np.float64)


def test_a_category_column_of_booleans_is_refused_naming_the_column_as_xgboost_refuses_it():
    df, y = _bool_category_frame()
    with pytest.raises(TypeError, match="boolean"):  # the oracle refuses it when the DMatrix is made
        xgb.DMatrix(df, y, enable_categorical=True)
    # dgboost once trained on it and then could not save the model (XGBoost's format has no
    # boolean categories): the refusal belongs before training, naming the column
    with pytest.raises(DGBoostValueError, match="'flag'.*boolean"):
        dg.DMatrix(df, y)
