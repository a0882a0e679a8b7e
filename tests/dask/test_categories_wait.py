"""The wait for the partitions' categories (a Dask column of unknown categories) is bounded and,
past its bound, ends with a CommunicationError that names what was waited for (issue 33), as the
other waits of the client do -- not a bare TimeoutError, with the tasks left queued."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _blocking import raised_within, worker_that_never_answers

import dgboost as dg
import dgboost.dask as dxgb
from dgboost.dask import _matrix

pytestmark = pytest.mark.dask


def test_categories_of_partitions_on_a_worker_that_never_answers_fail_naming_the_wait(dask_client, monkeypatch):
    import dask.dataframe as dd

    client = dask_client(1)
    frame = pd.DataFrame({"k": list("abcab") * 20, "x": np.arange(100.0)})
    data = dd.from_pandas(frame, npartitions=2).astype({"k": "category"})  # unknown categories
    assert not data["k"].cat.known
    label = dd.from_pandas(pd.Series(np.arange(100.0)), npartitions=2)
    monkeypatch.setattr(_matrix, "_CATEGORIES_TIMEOUT", 1.5)
    with worker_that_never_answers(client):
        exc = raised_within(1.5 + 10.0, lambda: dxgb.DaskDMatrix(client, data, label))
    assert isinstance(exc, dg.CommunicationError), repr(exc)
    assert "categories of column(s) 'k'" in str(exc)
    assert "1.5 s" in str(exc)
