"""Content keys (dgboost/explain/_digest.py) in 4 MiB against 1 MiB chunks, on this host's threads.

Times ``content_digest`` of 10.9 MB of bytes (the size of SHAP case c's UBJSON model) and of
six float64 arrays of 29 MB in all (about c's path table), each chunk size seven times
alternating; prints the median and range. The keys differ between chunk sizes (the chunking
is part of the key); only the time is compared.

    python benchmarks/digest_chunks.py
"""

import statistics
import time

import numpy as np

from dgboost.explain import _digest


def main() -> None:
    raw = np.random.default_rng(0).integers(0, 255, 10_865_114, dtype=np.uint8).tobytes()
    table = [(f"a{i}", np.random.default_rng(i).standard_normal(1_222_691 // 2)) for i in range(6)]
    res: dict = {}
    for _ in range(7):
        for name, chunk, par in (("4MiB", 1 << 22, 1 << 23), ("1MiB", 1 << 20, 1 << 21)):
            _digest._CHUNK, _digest._PARALLEL_BYTES = chunk, par
            for what, items in (("model 10.9 MB", [("model", raw)]), ("table 29 MB", table)):
                t = time.perf_counter()
                _digest.content_digest(items)
                res.setdefault((what, name), []).append(time.perf_counter() - t)
    for (what, name), v in sorted(res.items()):
        print(
            f"{what:14s} {name}: median {1e3 * statistics.median(v):.2f} ms "
            f"({1e3 * min(v):.2f}-{1e3 * max(v):.2f}), {_digest._workers()} threads"
        )


if __name__ == "__main__":
    main()
