"""The fuzz tests' one rule for a hostile input: a :class:`~dgboost.DGBoostError` with a
message, or a result, within a time bound (``tests/cpu/test_fuzz_models.py``,
``test_fuzz_data.py``)."""

from __future__ import annotations

import time
from typing import Callable, TypeVar

from dgboost.errors import DGBoostError

__all__ = ["error_or_result"]

T = TypeVar("T")


def error_or_result(run: Callable[[], T], outcomes: dict, accepted: str, seconds: float) -> T | None:
    """``run()``, which must end within ``seconds``: its result (counted in
    ``outcomes[accepted]``), or None when it raised a DGBoostError, which must carry a
    message (counted in ``outcomes["rejected"]``). Any other exception propagates."""
    start = time.perf_counter()
    try:
        out = run()
    except DGBoostError as e:
        assert str(e).strip(), f"{type(e).__name__} without a message"
        outcomes["rejected"] += 1
        return None
    finally:
        assert time.perf_counter() - start < seconds
    outcomes[accepted] += 1
    return out
