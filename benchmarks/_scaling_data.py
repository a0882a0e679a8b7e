"""Synthetic data sets of the scaling benchmarks, made block by block on the workers.

Every block is drawn from its own seed (the data set's seed plus the block's index), on the
worker that computes it and in the worker's array module (CuPy on CUDA workers, NumPy on CPU
workers), so the rows are the same whatever the number of workers, and nothing large crosses
the network. Features are float32, labels float32 in {0, 1}.

* ``higgs``: 28 standard-normal features, the label a fixed nonlinear function of them plus
  a deterministic "noise" feature (the Higgs-like shape of the issue's 40M x 28 run).
* ``airline``: 13 features shaped like the airline on-time data of the multi-GPU XGBoost
  paper (115M x 13): integer-coded month, day, weekday, carrier, origin and destination
  (airports drawn with a long tail), departure and arrival hours, distance, scheduled
  time, taxi-out minutes, year and a congestion index; the label ("delayed more than 15
  minutes", about 20% positive) is drawn from a logistic model with interactions of them.
"""

from __future__ import annotations

import operator

import numpy as np

__all__ = ["DATASETS", "make_block", "make_data"]

DATASETS = {"higgs": 28, "airline": 13}  # name -> features


def _xp(device: str):
    if device == "cuda":
        import cupy

        return cupy
    return np


def _higgs(xp, rng, n: int):
    f32 = xp.float32
    x = rng.standard_normal((n, 28), dtype=f32)
    s = x[:, 0] + xp.sin(2 * x[:, 1]) + x[:, 2] * x[:, 3] - f32(0.5) * x[:, 4] ** 2 + f32(0.3) * x[:, 5:10].sum(axis=1)
    noise = xp.sin(x[:, 10] * f32(1000.0))
    return x, (s + f32(0.5) * noise > 0).astype(f32)


def _airline(xp, rng, n: int):
    f32 = xp.float32

    def uniform():
        return rng.random(n, dtype=f32)

    def codes(k: int):
        return xp.floor(uniform() * f32(k))

    month, day, weekday = codes(12) + 1, codes(31) + 1, codes(7) + 1
    dep_hour = xp.floor((f32(5) + f32(19) * uniform() ** f32(0.8)) * f32(60)) / f32(60)  # minutes
    carrier = codes(20)
    # a long tail of airports: a few hubs carry most flights
    origin = xp.floor(f32(300) * uniform() ** f32(3))
    dest = xp.floor(f32(300) * uniform() ** f32(3))
    distance = xp.exp(f32(6.2) + f32(0.7) * rng.standard_normal(n, dtype=f32))
    scheduled = distance / f32(8) + f32(30) + f32(10) * uniform()
    arr_hour = xp.mod(dep_hour + scheduled / f32(60), f32(24))
    taxi_out = f32(8) - f32(10) * xp.log(uniform() + f32(1e-6)) * (f32(1) + (origin < 10).astype(f32))
    year = codes(22)
    congestion = xp.sin(f32(0.9) * origin + f32(0.13) * day) + f32(0.5) * rng.standard_normal(n, dtype=f32)
    logit = (
        f32(-2.2)
        + f32(0.09) * (dep_hour - f32(12))
        + f32(0.35) * ((month == 6) | (month == 7) | (month == 12)).astype(f32)
        + f32(0.2) * ((weekday == 5) | (weekday == 7)).astype(f32)
        + f32(0.5) * xp.sin(f32(1.7) * carrier)
        + f32(0.4) * (origin < 10).astype(f32)
        + f32(0.3) * (dest < 10).astype(f32) * (dep_hour > 16).astype(f32)
        + f32(0.03) * (taxi_out - f32(15))
        + f32(0.6) * congestion * (dep_hour > 14).astype(f32)
        - f32(0.02) * (year - f32(11))
        + f32(0.15) * xp.log(distance / f32(500))
    )
    y = (uniform() < f32(1) / (f32(1) + xp.exp(-logit))).astype(f32)
    X = xp.stack(
        [
            month,
            day,
            weekday,
            dep_hour,
            arr_hour,
            carrier,
            origin,
            dest,
            distance,
            scheduled,
            taxi_out,
            year,
            congestion,
        ],
        axis=1,
    ).astype(f32)
    return X, y


_MAKERS = {"higgs": _higgs, "airline": _airline}


def make_block(dataset: str, seed: int, block: int, rows: int, device: str):
    """Block ``block`` of ``dataset`` (``rows`` rows), in the array module of ``device``."""
    xp = _xp(device)
    rng = xp.random.default_rng(seed * 1_000_003 + block)
    return _MAKERS[dataset](xp, rng, rows)


def make_data(client, dataset: str, rows: int, device: str, *, seed: int = 42, block_rows: int = 2_500_000):
    """Persisted (X, y) dask arrays of ``rows`` rows of ``dataset`` in blocks of ``block_rows``."""
    import dask
    import dask.array as da
    from distributed import wait

    from dgboost.dask._waits import cluster_workers

    features = DATASETS[dataset]
    sizes = [min(block_rows, rows - start) for start in range(0, rows, block_rows)]
    meta = _xp(device).empty((0,), dtype=np.float32)
    # Blocks go to the workers in even, contiguous runs: left to the scheduler, 16 blocks landed
    # 2, 2, 6, 6 on 4 GPUs, and both libraries train where the rows lie, so the busiest worker
    # would set the pace of the run rather than the library.
    # (Futures pinned to a worker: dask.annotate(workers=...) is not kept by dask arrays' graphs.)
    workers = sorted(cluster_workers(client))
    Xs, ys = [], []
    for i, n in enumerate(sizes):
        where = {"workers": [workers[i * len(workers) // len(sizes)]], "allow_other_workers": False}
        block = client.submit(make_block, dataset, seed, i, n, device, **where)
        x_part = client.submit(operator.getitem, block, 0, **where)
        y_part = client.submit(operator.getitem, block, 1, **where)
        Xs.append(da.from_delayed(dask.delayed(x_part), (n, features), dtype=np.float32, meta=meta.reshape(0, 1)))
        ys.append(da.from_delayed(dask.delayed(y_part), (n,), dtype=np.float32, meta=meta))
    X, y = client.persist([da.concatenate(Xs), da.concatenate(ys)])
    wait([X, y])
    return X, y
