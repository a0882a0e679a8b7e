"""Cut values from a presorted sample (the device sketch's host half) against the host sketch."""
from __future__ import annotations

import numpy as np
import pytest

from dgboost.quantile import sorted_cut_values, weighted_cut_values

SAMPLES = {
    "continuous": lambda rng, n: rng.normal(size=n),
    "few distinct values": lambda rng, n: rng.integers(-5, 5, size=n),
    "ties and both zeros": lambda rng, n: np.where(rng.random(n) < 0.2, -0.0, np.round(rng.normal(size=n), 1)),
    "infinities and zeros": lambda rng, n: rng.choice([-np.inf, -0.0, 0.0, 1.0, np.inf], size=n),
}


@pytest.mark.parametrize("kind", list(SAMPLES))
@pytest.mark.parametrize("max_bin", [2, 16, 256])
def test_sorted_values_give_the_cuts_of_the_unit_weight_sketch_bit_for_bit(kind, max_bin):
    rng = np.random.default_rng(max_bin)
    for n in (0, 1, 7, 300, 5000):
        values = SAMPLES[kind](rng, n).astype(np.float32)
        want = weighted_cut_values(values, np.ones(n), max_bin)
        got = sorted_cut_values(np.sort(values), max_bin)
        assert got.tobytes() == want.tobytes()


def test_a_negative_zero_never_becomes_a_cut_value():
    values = np.array([-1.0, -0.0, -0.0, 2.0], np.float32)
    for cuts in (weighted_cut_values(values, np.ones(4), 256), sorted_cut_values(np.sort(values), 256)):
        zero = cuts[cuts == 0]
        assert zero.size == 1 and not np.signbit(zero[0])


def test_many_features_cut_together_give_each_features_own_cuts_bit_for_bit():
    from dgboost.quantile import sorted_features_cut_values

    rng = np.random.default_rng(5)
    kinds = [lambda n: rng.normal(size=n), lambda n: rng.integers(-5, 5, size=n), lambda n: np.full(n, 2.5),
             lambda n: np.where(rng.random(n) < 0.2, -0.0, np.round(rng.normal(size=n), 1)),
             lambda n: rng.choice([-np.inf, -0.0, 0.0, 1.0, np.inf], size=n)]
    for trial in range(60):
        max_bin = int(rng.choice([2, 3, 16, 256]))
        columns = [np.sort(kinds[int(rng.integers(len(kinds)))](int(rng.choice([0, 1, 5, 300, 3000]))))
                   .astype(np.float32) for _ in range(int(rng.integers(1, 12)))]
        counts = np.array([c.size for c in columns], np.int64)
        values, sizes = sorted_features_cut_values(np.concatenate(columns), counts, max_bin)
        want = [sorted_cut_values(c, max_bin) for c in columns]
        assert sizes.tolist() == [w.size for w in want]
        assert values.tobytes() == np.concatenate(want).tobytes()
