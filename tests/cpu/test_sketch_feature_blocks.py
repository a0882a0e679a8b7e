"""How the device sketch groups features into sort blocks (pure host logic)."""

import numpy as np

from dgboost.backend._cuda_sketch import feature_blocks


def test_feature_blocks_cover_every_feature_once_in_order_within_the_budget():
    rng = np.random.default_rng(4)
    for _ in range(200):
        n = int(rng.integers(1, 40))
        start = int(rng.integers(0, 5))
        counts = rng.integers(0, 50, n)
        counts[rng.random(n) < 0.2] = 0
        budget = int(rng.integers(1, 120))
        blocks = feature_blocks(counts, range(start, start + n), budget)
        assert [f for b in blocks for f in b] == list(range(start, start + n))
        for b in blocks:
            held = counts[b.start - start : b.stop - start]
            # over the budget only when one feature alone is over it (empty ones may join it)
            assert held.sum() <= budget or np.count_nonzero(held) == 1


def test_a_feature_with_more_values_than_the_budget_is_a_block_of_its_own():
    assert feature_blocks(np.array([5, 100, 5]), range(3), 10) == [range(0, 1), range(1, 2), range(2, 3)]


def test_empty_features_join_the_block_before_them():
    assert feature_blocks(np.array([10, 0, 0, 10]), range(4), 10) == [range(0, 3), range(3, 4)]


def test_no_features_make_no_blocks():
    assert feature_blocks(np.array([], np.int64), range(0), 10) == []
