"""Models of a fixed set of CPU configurations are byte for byte the ones kept in
``tests/cpu/data/golden`` (written before the training-job redesign): a refactoring that
changes a single bit of a model fails here."""

from __future__ import annotations

import pytest
from golden_models import CONFIGS, golden_path


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_the_model_is_byte_identical_to_its_golden_file(name):
    expected = golden_path(name).read_bytes()
    got = CONFIGS[name]()
    assert got == expected, f"{name}: the model's bytes differ from {golden_path(name).name}"
