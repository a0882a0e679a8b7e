"""Where dgboost's whole-run time goes before the rounds, on one GPU: DMatrix construction and
training's set-up stages (base margins, cuts, binning, margins), for train_gpu.py's cases.

Each case: one small warm-up run (kernel loading, NVRTC), then two runs of DMatrix plus one
round with ``dgboost._stages.recording`` (each stage waits for its device work).

    python benchmarks/setup_stages.py bosch year higgs
"""
import sys, time
sys.path.insert(0, '.'); sys.path.insert(0, 'benchmarks')
import cupy, numpy as np
import dgboost as dg
from dgboost._stages import recording
from train_gpu import make_data, CASES, _params
from types import SimpleNamespace


class D:  # train_gpu's Device, as far as _params reads it
    name = "cuda"
    cuda = True

for name in sys.argv[1:]:
    c = CASES[name]
    X, y = make_data(cupy, c.rows, c.features, c.task, n_classes=c.n_classes, missing_rate=c.missing_rate, seed=0)
    p = _params("dgboost", c, D(), SimpleNamespace(threads=0, dgboost_params={}))
    dg.train(p, dg.DMatrix(X[:20000], y[:20000]), 2, verbose_eval=False)  # warm
    for rep in range(2):
        cupy.cuda.runtime.deviceSynchronize(); t0 = time.perf_counter()
        d = dg.DMatrix(X, y); cupy.cuda.runtime.deviceSynchronize(); t1 = time.perf_counter()
        with recording() as st:
            dg.train(p, d, 1, verbose_eval=False)
        cupy.cuda.runtime.deviceSynchronize(); t2 = time.perf_counter()
        print(f"{name} rep{rep}: DMatrix {1e3*(t1-t0):.1f} ms, train(1 round) {1e3*(t2-t1):.1f} ms, stages " + ", ".join(f"{k} {1e3*v:.1f}" for k, v in st.items()), flush=True)
    del X, y, d
