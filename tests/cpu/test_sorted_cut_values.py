"""Cut values of presorted samples, many features at once (the device sketch's algorithm, run
here on NumPy), against the host sketch of each feature."""
from __future__ import annotations

import numpy as np
import pytest

from dgboost.quantile import sorted_features_cut_values, weighted_cut_values

SAMPLES = {
    "continuous": lambda rng, n: rng.normal(size=n),
    "few distinct values": lambda rng, n: rng.integers(-5, 5, size=n),
    "constant": lambda rng, n: np.full(n, 2.5),
    "ties and both zeros": lambda rng, n: np.where(rng.random(n) < 0.2, -0.0, np.round(rng.normal(size=n), 1)),
    "infinities and zeros": lambda rng, n: rng.choice([-np.inf, -0.0, 0.0, 1.0, np.inf], size=n),
}


def _unit_weight_cuts(columns, max_bin):
    return [weighted_cut_values(c, np.ones(c.size), max_bin) for c in columns]


@pytest.mark.parametrize("kind", list(SAMPLES))
@pytest.mark.parametrize("max_bin", [2, 16, 256])
def test_one_sorted_feature_gives_the_cuts_of_the_unit_weight_sketch_bit_for_bit(kind, max_bin):
    rng = np.random.default_rng(max_bin)
    for n in (0, 1, 7, 300, 5000):
        column = np.sort(SAMPLES[kind](rng, n).astype(np.float32))
        values, sizes = sorted_features_cut_values(column, np.array([n]), max_bin)
        (want,) = _unit_weight_cuts([column], max_bin)
        assert sizes.tolist() == [want.size]
        assert values.tobytes() == want.tobytes()


def test_a_negative_zero_never_becomes_a_cut_value():
    column = np.array([-1.0, -0.0, -0.0, 2.0], np.float32)
    together, _ = sorted_features_cut_values(column, np.array([4]), 256)
    for cuts in (weighted_cut_values(column, np.ones(4), 256), together):
        zero = cuts[cuts == 0]
        assert zero.size == 1 and not np.signbit(zero[0])


def test_many_features_cut_together_give_each_features_own_cuts_bit_for_bit():
    rng = np.random.default_rng(5)
    kinds = list(SAMPLES.values())
    for trial in range(60):
        max_bin = int(rng.choice([2, 3, 16, 256]))
        columns = [np.sort(kinds[int(rng.integers(len(kinds)))](rng, int(rng.choice([0, 1, 5, 300, 3000]))))
                   .astype(np.float32) for _ in range(int(rng.integers(1, 12)))]
        counts = np.array([c.size for c in columns], np.int64)
        values, sizes = sorted_features_cut_values(np.concatenate(columns), counts, max_bin)
        want = _unit_weight_cuts(columns, max_bin)
        assert sizes.tolist() == [w.size for w in want]
        assert values.tobytes() == np.concatenate(want).tobytes()
