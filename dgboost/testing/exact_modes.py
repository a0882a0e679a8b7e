"""Force the GPU exact engine's scan mode, for the tests: every level interleaved or every
level sorted (``dgboost.backend._cuda_exact.SORTED_FROM_DEPTH``), so that both modes are
checked at every depth. Not for production code: production scans every level sorted
(``SORTED_FROM_DEPTH = 0``, docs/design.md §12); the interleaved mode stays as the paper's
shallow-level mode and as a second implementation the tests hold against the first.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

__all__ = ["exact_scan_mode"]


@contextlib.contextmanager
def exact_scan_mode(mode: str) -> Iterator[None]:
    """Within the block, the GPU exact engine scans every level ``"interleaved"`` or ``"sorted"``."""
    from dgboost.backend import _cuda_exact

    if mode not in ("interleaved", "sorted"):
        raise ValueError(f"mode must be 'interleaved' or 'sorted', got {mode!r}")
    saved = _cuda_exact.SORTED_FROM_DEPTH
    _cuda_exact.SORTED_FROM_DEPTH = 1 << 30 if mode == "interleaved" else 0
    try:
        yield
    finally:
        _cuda_exact.SORTED_FROM_DEPTH = saved
