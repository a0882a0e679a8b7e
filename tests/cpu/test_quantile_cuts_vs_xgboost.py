"""dgboost's quantile cuts against XGBoost 3.4.1's (``get_quantile_cut()`` of a ``QuantileDMatrix``).

What dgboost claims (``dgboost/quantile.py``, docs/design.md §5.1): its sketch is exact on every
row of sets up to 2**20 rows, and it keeps ``max_bin`` cuts from that exact weighted summary
with XGBoost's ``WQSummary::SetPrune`` rule (evenly spaced rank targets, each taking the nearer
of the two entries around it), so that its bins stay close to XGBoost's ``hist``. The same
format: a value ``x`` is in bin ``b`` when ``c[b-1] <= x < c[b]``; the last cut is
``max + (|max| + 1e-5)``. XGBoost's list per feature starts with one more entry, its minimum
(``-inf`` in 3.4.1), which dgboost does not store; it is dropped before comparing.

Where they differ by design: XGBoost's CPU sketch is not an exact summary. Each thread sketches
its rows into a summary of at most about ``8 * max_bin`` entries (``eps = 1 / (8 * max_bin)``)
and the summaries are merged with float32 ranks, so where a rank target falls near the
midpoint between two neighbouring distinct values the two libraries may take different
neighbours, and with many distinct values XGBoost's cut is only within its ``eps`` of the exact
quantile. So:

- up to ``max_bin`` distinct values the cuts are equal (every distinct value its own bin);
- with ties (more distinct values than ``max_bin``, fewer than XGBoost's summary holds) at
  least 85% of the cuts are the same values (about 95% seen) and every other one is at most two
  distinct values away (in the sparse tails) -- dropping the nearer-entry rule (always the
  entry below, or above, the target) leaves about half of them equal, and fails here;
- with every value distinct, each cut's weighted rank is within a quarter of a bin
  (``1 / (4 * max_bin)`` of the weight) of XGBoost's: XGBoost's own error bound is ``1/8`` of a
  bin.

In all cases both give the same number of cuts and the same last cut, on weighted data with
missing values.
"""

from __future__ import annotations

import numpy as np
import pytest
import xgboost as xgb

from dgboost.quantile import compute_cuts

N = 4000
MISSING = 0.1


def _weights(kind: str, rng) -> np.ndarray | None:
    return {
        "unweighted": None,
        "real weights": (rng.random(N) * 3 + 0.1).astype(np.float32),
        "integer weights": rng.integers(1, 20, N).astype(np.float32),
    }[kind]


def _with_missing(x: np.ndarray, rng) -> np.ndarray:
    x = x.astype(np.float32)
    x[rng.random(x.shape) < MISSING] = np.nan
    return x


def _both(x: np.ndarray, w: np.ndarray | None, max_bin: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per feature: (XGBoost's cuts without its leading minimum entry, dgboost's cuts)."""
    ptr, values = xgb.QuantileDMatrix(x, weight=w, max_bin=max_bin).get_quantile_cut()
    ours = compute_cuts(x, w, max_bin)
    return [(values[ptr[f] + 1 : ptr[f + 1]], ours.feature_cuts(f)) for f in range(x.shape[1])]


def _assert_same_shape(theirs: np.ndarray, ours: np.ndarray) -> None:
    assert ours.dtype == np.float32
    assert ours.size == theirs.size
    assert ours[-1] == theirs[-1]  # max + (|max| + 1e-5)


WEIGHTS = ["unweighted", "real weights", "integer weights"]


def test_xgboost_is_the_pinned_3_4_1():
    assert xgb.__version__ == "3.4.1"


@pytest.mark.parametrize("kind", WEIGHTS)
@pytest.mark.parametrize("max_bin", [16, 64])
def test_up_to_max_bin_distinct_values_the_cuts_equal_xgboosts(kind, max_bin):
    rng = np.random.default_rng(max_bin)
    x = np.stack([rng.integers(0, max_bin, N), rng.integers(-3, 4, N) * 0.25, rng.normal(size=N).round()], 1)
    x = _with_missing(x, rng)
    for theirs, ours in _both(x, _weights(kind, rng), max_bin):
        np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("kind", WEIGHTS)
@pytest.mark.parametrize("max_bin", [8, 16, 32, 64])
def test_on_tied_values_beyond_max_bin_the_cuts_are_xgboosts_or_a_neighbouring_value(kind, max_bin):
    rng = np.random.default_rng(100 + max_bin)
    # several times max_bin distinct values, heavily tied in the middle (a rounded normal)
    x = _with_missing(np.round(rng.normal(size=(N, 4)) * max_bin), rng)
    w = _weights(kind, rng)
    same = total = 0
    for f, (theirs, ours) in enumerate(_both(x, w, max_bin)):
        distinct = np.unique(x[:, f][~np.isnan(x[:, f])])
        assert max_bin < distinct.size < 8 * max_bin
        _assert_same_shape(theirs, ours)
        at_theirs, at_ours = np.searchsorted(distinct, theirs[:-1]), np.searchsorted(distinct, ours[:-1])
        assert np.array_equal(distinct[at_ours], ours[:-1])  # every cut is a value of the data
        assert np.abs(at_theirs - at_ours).max() <= 2  # at most two distinct values apart
        same += int((at_theirs == at_ours).sum())
        total += at_ours.size
    assert same >= 0.85 * total, f"only {same} of {total} cuts are XGBoost's"


@pytest.mark.parametrize("kind", WEIGHTS)
@pytest.mark.parametrize("max_bin", [8, 32, 256])
def test_on_distinct_values_each_cut_is_within_a_quarter_bin_of_xgboosts_by_weight(kind, max_bin):
    rng = np.random.default_rng(200 + max_bin)
    n = 5 * N
    x = rng.exponential(size=(n, 1)).astype(np.float32)
    x[rng.random(x.shape) < MISSING] = np.nan
    w = {"unweighted": None, "real weights": (rng.random(n) * 3 + 0.1), "integer weights": rng.integers(1, 20, n)}[kind]
    w = None if w is None else w.astype(np.float32)
    ((theirs, ours),) = _both(x, w, max_bin)
    _assert_same_shape(theirs, ours)
    present = ~np.isnan(x[:, 0])
    values = x[present, 0]
    weight = np.ones(values.size) if w is None else w[present].astype(np.float64)
    order = np.argsort(values, kind="stable")
    below = np.concatenate([[0.0], np.cumsum(weight[order])])  # weight of the values below each position

    def rank(cuts):
        return below[np.searchsorted(values[order], cuts, side="left")] / below[-1]

    assert np.abs(rank(ours[:-1]) - rank(theirs[:-1])).max() <= 0.25 / max_bin
