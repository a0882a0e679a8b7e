"""The GPU bin matrix's layout: each feature's entries at the width of its own bins.

The helpers are pure Python (no GPU); the kernels that read this layout are checked by
tests/cpu/test_ellpack_emulated.py (host emulator) and tests/gpu/test_cuda_kernels.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from dgboost.backend._ellpack import entry_layout, packed_words, symbol_bits
from dgboost.params import MAX_BIN


@pytest.mark.parametrize("n_bins", [0, 1, 2, 3, 4, 7, 8, 255, 256, 4000, 65534, MAX_BIN])
def test_a_symbol_has_the_fewest_bits_that_hold_every_bin_and_the_missing_symbol(n_bins):
    bits = symbol_bits(n_bins)
    assert n_bins < 2**bits  # 0 .. n_bins - 1 and the missing symbol n_bins
    assert bits == 1 or n_bins >= 2 ** (bits - 1)


def test_the_widest_feature_fits_the_kernels_two_word_read():
    # a symbol starts at a shift of at most 31 bits in its first word
    assert 31 + symbol_bits(MAX_BIN) <= 64
    assert symbol_bits(MAX_BIN) == 16


def test_each_feature_takes_the_width_of_its_own_bins_at_consecutive_offsets():
    n_bins = [1, 2, 3, 255, 256, 4000, 65534]
    layout, row_bits = entry_layout(np.concatenate([[0], np.cumsum(n_bins)]))
    assert layout.dtype == np.int32 and layout.shape == (7, 2) and layout.flags.c_contiguous
    assert layout[:, 1].tolist() == [1, 2, 2, 8, 9, 12, 16]
    assert layout[:, 0].tolist() == [0, 1, 3, 5, 13, 22, 34]
    assert row_bits == 50


def test_a_wide_categorical_feature_does_not_widen_the_others():
    n_bins = [256] * 10 + [4000] + [256] * 5
    _, row_bits = entry_layout(np.concatenate([[0], np.cumsum(n_bins)]))
    assert row_bits == 15 * 9 + 12
    assert row_bits < 12 * len(n_bins)  # a uniform width would be the wide feature's for all


def test_numeric_features_of_256_bins_take_9_bits_an_entry():
    _, row_bits = entry_layout(np.arange(29) * 256)
    assert row_bits == 28 * 9


def test_a_matrix_without_features_has_an_empty_layout():
    layout, row_bits = entry_layout(np.zeros(1, np.int64))
    assert layout.shape == (0, 2) and layout.dtype == np.int32
    assert row_bits == 0
    assert packed_words(100, row_bits) == 1


@pytest.mark.parametrize("n_rows,row_bits,words", [(0, 9, 1), (1, 32, 2), (1, 33, 3), (3, 32, 4), (7, 9, 3)])
def test_the_bit_stream_rounds_up_to_whole_words_plus_one_padding_word(n_rows, row_bits, words):
    assert packed_words(n_rows, row_bits) == words
