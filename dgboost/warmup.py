"""``python -m dgboost.warmup`` (or ``dgboost warmup``): compile the CPU kernels into Numba's cache.

Run it once where dgboost is installed -- in a Dockerfile after ``pip install``, in a CI image
-- so that the first ``train`` of every later process loads the kernels from the on-disk
cache instead of compiling them (about a minute of CPU time, once). See
:mod:`dgboost.backend._warmup` for what it compiles.
"""

from __future__ import annotations

import sys

__all__ = ["main"]


def main(quiet: bool = False) -> int:
    """Warm the cache, printing a line per training (unless ``quiet``) and a summary.

    Parameters
    ----------
    quiet : bool
        Print only the summary line.

    Returns
    -------
    int
        The exit status, 0.
    """
    from .backend._warmup import warm_up

    report = warm_up(progress=None if quiet else lambda line: print(f"  {line}", flush=True))
    where = ", ".join(report.cache_dirs) or "Numba's default cache"
    print(f"dgboost warmup: {report.compiled} compilations in {report.seconds:.1f} s; cache: {where}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(quiet="--quiet" in sys.argv[1:]))
