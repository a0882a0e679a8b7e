"""The CUDA backend's categorical kernels, run on the host by the emulator, give the CPU's results.

``_cuda_emulator`` compiles kernels/split.cu, partition.cu, predict.cu (and what they need)
with a host C++ compiler and runs each CUDA thread as a host thread, while the CUDA
backend's own host code makes the launches (with NumPy arrays, every argument checked
against the kernel's parameter type). So without a GPU the categorical split search, the
categorical partition and the categorical prediction kernels are held to the CPU engine bit
for bit: records, category sets, row orders, margins and leaf indices. Inputs are kept small
(the emulator runs a host thread per CUDA thread); ``tests/gpu/test_categorical_gpu.py``
checks the same on a GPU at full size.
"""

from __future__ import annotations

import numpy as np
import pytest

from dgboost._categorical import CategoricalLayout, n_words
from dgboost._layout import FEATURE, NO_NODE, SPLIT_BIN, SUM_G
from dgboost.backend.cpu import CPUBackend
from dgboost.testing.kernel_inputs import node_records

_cuda_emulator = pytest.importorskip("_cuda_emulator")
pytestmark = pytest.mark.skipif(not _cuda_emulator.available(), reason="needs a host C++20 compiler")

CPU = CPUBackend()
SCALES = np.array([2.0**20, 2.0**20])


class _Params:
    def __init__(self, **kw):
        self.reg_lambda, self.alpha, self.gamma = 1.0, 0.0, 0.0
        self.min_child_weight, self.max_delta_step = 1.0, 0.0
        self.max_cat_to_onehot, self.max_cat_threshold = 4, 64
        self.__dict__.update(kw)


def _layout(n_bins, is_cat) -> CategoricalLayout:
    n_cats = np.where(is_cat, n_bins, 0).astype(np.int32)
    return CategoricalLayout(np.asarray(is_cat, np.uint8), n_cats, n_words(int(n_cats.max())))


def _tied_histograms(rng, n_nodes, n_bins):
    """Histograms of few distinct (g, h) values (tied weights, -0.0 and +0.0 among them) and
    node totals with missing rows on some nodes."""
    total = int(sum(n_bins))
    g = rng.choice(np.array([-6, -3, -2, 0, 0, 1, 2, 3, 5, 8]) * 2**20, size=(n_nodes, total))
    h = rng.choice(np.array([0, 1, 2, 2, 3, 4, 6]) * 2**20, size=(n_nodes, total))
    g[(h == 0) & (rng.random((n_nodes, total)) < 0.7)] = 0
    hist = np.stack([g, h], axis=2).astype(np.int64)
    totals = hist.sum(axis=1)
    totals[:, 0] += rng.choice([0, 3 * 2**20, -5 * 2**20], size=n_nodes)
    totals[:, 1] += rng.choice([0, 0, 2 * 2**20, 7 * 2**20], size=n_nodes)
    return hist, totals


def _evaluate_both(backend, hist, totals, n_bins, is_cat, p, mask=None, bounds=None, monotone=None):
    cut_ptrs = np.concatenate([[0], np.cumsum(n_bins)]).astype(np.int64)
    layout = _layout(np.asarray(n_bins), np.asarray(is_cat, bool)) if any(is_cat) else None
    records = node_records(np.zeros(len(totals)), np.zeros(len(totals)), sums=totals)
    records[:, SPLIT_BIN] = -1
    records[1, FEATURE] = NO_NODE
    kw = dict(bounds=bounds, monotone=monotone)
    words = layout.words if layout is not None else 1
    want, got = records.copy(), records.copy()
    want_bits = np.full((len(totals), words), 0xDEADBEEF, np.uint32)
    got_bits = backend.empty((len(totals), words), np.uint32)
    cat = {} if layout is None else dict(categorical=layout)
    CPU.evaluate_splits(hist, want, cut_ptrs, mask, SCALES, p, **kw, **cat, **({"cat_bits": want_bits} if cat else {}))
    backend.evaluate_splits(
        hist, got, cut_ptrs, mask, SCALES, p, **kw, **cat, **({"cat_bits": got_bits} if cat else {})
    )
    # a record's decision columns where it splits (with a best split below gamma the CPU leaves
    # that candidate's bin and sums in a record of feature -1); all of a slot with no node
    np.testing.assert_array_equal(got[:, FEATURE], want[:, FEATURE])
    split = want[:, FEATURE] >= 0
    np.testing.assert_array_equal(got[split], want[split])
    np.testing.assert_array_equal(got[want[:, FEATURE] == NO_NODE], want[want[:, FEATURE] == NO_NODE])
    np.testing.assert_array_equal(got[:, SUM_G:], want[:, SUM_G:])
    if layout is not None:
        np.testing.assert_array_equal(got_bits, want_bits)
    return want


CASES = {
    "partition among numeric features": (_Params(), [40, 7, 150, 3], [1, 0, 1, 1]),
    "one-hot, thresholds, regularisers": (
        _Params(max_cat_to_onehot=8, max_cat_threshold=5, alpha=0.5, max_delta_step=0.8, min_child_weight=2.0),
        [5, 9, 70],
        [1, 1, 1],
    ),
    "every category scanned": (_Params(max_cat_threshold=1000, gamma=1.0), [300, 6], [1, 0]),
    "4,000 categories (48 KiB of keys)": (_Params(), [4000], [1]),
}


# (case, a block's shared memory): an H200's, or 2 KiB, so that features past 64 categories sort
# in the global scratch
RUNS = [(case, 232_448) for case in CASES] + [(case, 2048) for case in CASES if "4,000" not in case]


@pytest.mark.parametrize("case,shared_bytes", RUNS, ids=[f"{c}-{'shared' if b > 4096 else 'global'}" for c, b in RUNS])
def test_emulated_cuda_split_search_writes_the_cpu_records_and_sets(case, shared_bytes):
    p, n_bins, is_cat = CASES[case]
    rng = np.random.default_rng(sum(map(ord, case)))
    hist, totals = _tied_histograms(rng, 5, n_bins)
    backend = _cuda_emulator.EmulatedCUDABackend(shared_bytes=shared_bytes)
    mask = rng.random((5, len(n_bins))) < 0.8
    want = _evaluate_both(backend, hist, totals, n_bins, is_cat, p, mask=mask)
    assert (want[:, FEATURE] >= 0).sum() >= 2
    shared = [s for name, _, _, s in backend.launches if name == "best_per_category_feature"]
    assert shared, "the categorical kernel did not run"
    if shared_bytes < 4096:  # a block's shared memory holds 64 keys: wider features sort in the scratch
        assert shared == [12 * 64]


def test_emulated_cuda_monotone_categorical_splits_are_the_cpus():
    rng = np.random.default_rng(3)
    n_bins = [30, 6, 50]
    hist, totals = _tied_histograms(rng, 6, n_bins)
    bounds = np.tile([-np.inf, np.inf], (6, 1))
    bounds[::2] = [-0.5, 0.4]
    backend = _cuda_emulator.EmulatedCUDABackend()
    _evaluate_both(
        backend, hist, totals, n_bins, [1, 0, 1], _Params(), bounds=bounds, monotone=np.array([1, 0, -1], np.int8)
    )


def test_emulated_cuda_numeric_split_search_is_unchanged():
    rng = np.random.default_rng(4)
    hist, totals = _tied_histograms(rng, 4, [16, 9, 33])
    _evaluate_both(_cuda_emulator.EmulatedCUDABackend(), hist, totals, [16, 9, 33], [0, 0, 0], _Params(gamma=0.5))


@pytest.mark.parametrize("constrained", [False, True], ids=["plain", "monotone"])
def test_emulated_cuda_numeric_split_search_over_many_chunks_and_at_chunk_edges_is_the_cpus(constrained):
    # best_per_feature scans a feature's bins 32 at a time, carrying each chunk's sums: wide
    # features, a one-bin one and widths at a chunk's edge
    n_bins = [256, 257, 300, 1, 32, 33, 255]
    rng = np.random.default_rng(11)
    hist, totals = _tied_histograms(rng, 5, n_bins)
    kw = {}
    if constrained:
        bounds = np.tile([-np.inf, np.inf], (5, 1)).astype(np.float64)
        bounds[2] = [-0.5, 0.25]
        kw = dict(bounds=bounds, monotone=np.array([1, -1, 0, 1, 0, -1, 1], np.int8))
    want = _evaluate_both(
        _cuda_emulator.EmulatedCUDABackend(), hist, totals, n_bins, [0] * len(n_bins), _Params(), **kw
    )
    # the case is what it says: some node splits on a feature of at most 256 bins, some on a wider one
    winners = set(want[:, FEATURE].tolist())
    assert winners & {0, 3, 4, 5, 6} and winners & {1, 2}


def test_emulated_cuda_categorical_partition_moves_the_cpu_rows():
    rng = np.random.default_rng(8)
    n, n_cats = 3000, [3, 70, 200]
    x = np.column_stack([rng.integers(0, k, n) for k in n_cats] + [rng.normal(size=n)]).astype(np.float32)
    x[rng.random(x.shape) < 0.1] = np.nan
    cut_values = np.concatenate([np.arange(1, k + 1) for k in n_cats] + [np.array([-0.5, 0.0, 0.7, np.inf])])
    cut_ptrs = np.concatenate([[0], np.cumsum(n_cats + [4])]).astype(np.int64)
    cut_values = cut_values.astype(np.float32)
    backend = _cuda_emulator.EmulatedCUDABackend()
    ell = backend.bin_values(x, cut_values, cut_ptrs)
    bins = CPU.bin_values(x, cut_values, cut_ptrs, np.dtype(np.uint8))
    layout = _layout(np.asarray(n_cats + [4]), np.array([1, 1, 1, 0], bool))
    segments = np.array([[0, 900], [900, 900], [1000, 2500], [2500, 2990], [2990, 3000]])
    feature = np.array([0, 1, 2, 3, NO_NODE])  # one-hot, partitions, numeric, no node
    records = node_records(segments[:, 0], segments[:, 1], feature=feature, split_bin=[1, -1, -1, 1, -1])
    records[:, 2] = [1, 0, 1, 0, 1]  # default_left
    cat_bits = rng.integers(0, 2**32, size=(5, layout.words), dtype=np.uint32)
    cat_bits[3:] = 0
    rows = rng.permutation(n).astype(np.int32)
    want_rows, got_rows = rows.copy(), rows.copy()
    want = CPU.partition(CPU.column_layout(bins), want_rows, records, categorical=layout, cat_bits=cat_bits)
    got = backend.partition(ell, got_rows, records, categorical=layout, cat_bits=cat_bits)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got_rows, want_rows)


def test_emulated_cuda_prediction_takes_xgboosts_categorical_decision():
    import dgboost as dg

    rng = np.random.default_rng(2)
    n = 3000
    X = np.column_stack([rng.integers(0, 3, n), rng.integers(0, 70, n), rng.normal(size=n)]).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    y = (np.sin(np.nan_to_num(X[:, 1])) + (X[:, 0] == 1) + 0.3 * np.nan_to_num(X[:, 2]) > 0.5).astype(np.float32)
    model = dg.train(
        {"objective": "binary:logistic", "max_depth": 4, "device": "cpu"},
        dg.DMatrix(X, y, feature_types=["c", "c", "q"]),
        4,
    )
    ens = model.ensemble
    assert ens.has_categorical
    odd = np.array([-1.0, -0.5, -0.0, 0.5, 2.7, 31.0, 32.0, 63.9, 69.0, 5000.0, 16777215.0, 16777216.0, np.inf, np.nan])
    Xt = X[:200].copy()
    Xt[::2, 1] = rng.choice(odd, 100).astype(np.float32)
    Xt[1::4, 0] = rng.choice(odd, 50).astype(np.float32)
    backend = _cuda_emulator.EmulatedCUDABackend()
    for t0, t1 in ((0, ens.n_trees), (1, 3)):
        want = np.zeros((Xt.shape[0], 1), np.float32)
        got = np.zeros((Xt.shape[0], 1), np.float32)
        CPU.predict_margin(ens, Xt, t0, t1, want)
        backend.predict_margin(ens, Xt, t0, t1, got)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(backend.predict_leaf(ens, Xt, t0, t1), CPU.predict_leaf(ens, Xt, t0, t1))


def test_emulated_cuda_weights_of_minus_zero_and_zero_tie_and_keep_code_order():
    # empty categories weigh +0.0, g = 0 with some h -0.0: the CPU's stable sort keeps them in
    # code order, so must the kernel's keys (keying -0.0 below +0.0 would change the set)
    hist = np.array([[[5, 0], [0, 0], [0, 0], [0, 4], [0, 3], [-3, 4]]], np.int64) * 2**20
    totals = hist.sum(axis=1)
    hist, totals = np.repeat(hist, 2, axis=0), np.repeat(totals, 2, axis=0)  # row 1 becomes the empty slot
    p = _Params(min_child_weight=2.0, max_cat_threshold=3)
    want = _evaluate_both(_cuda_emulator.EmulatedCUDABackend(), hist, totals, [6], [1], p)
    assert want[0, FEATURE] == 0


@pytest.fixture
def emulated_cuda_training(monkeypatch):
    """``device="cuda"`` training runs on an emulated CUDA backend (this test's only)."""
    return _cuda_emulator.route_cuda_training(monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize(
    "params",
    [{"max_depth": 3}, {"grow_policy": "lossguide", "max_leaves": 6, "max_depth": 0}],
    ids=["whole-levels", "lossguide"],
)
def test_emulated_cuda_training_saves_the_cpu_categorical_model_byte_for_byte(emulated_cuda_training, params):
    import dgboost as dg
    from dgboost.testing import assert_same_trees
    from dgboost.testing.checks import normalised_model_json

    rng = np.random.default_rng(0)
    n = 800
    X = np.column_stack([rng.integers(0, 3, n), rng.integers(0, 40, n), rng.normal(size=n)]).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    y = (np.sin(np.nan_to_num(X[:, 1])) + (X[:, 0] == 1) + 0.3 * np.nan_to_num(X[:, 2]) > 0.5).astype(np.float32)
    p = {"objective": "binary:logistic", "max_bin": 16, **params}
    models = {
        device: dg.train(
            {**p, "device": device}, dg.DMatrix(X, y, feature_types=["c", "c", "q"]), 2, verbose_eval=False
        )
        for device in ("cuda", "cpu")
    }
    assert any(name == "best_per_category_feature" for name, *_ in emulated_cuda_training.launches)
    assert models["cuda"].ensemble.has_categorical
    assert_same_trees(models["cuda"], models["cpu"], names=("emulated cuda", "cpu"))
    assert normalised_model_json(models["cuda"], keys=()) == normalised_model_json(models["cpu"], keys=())
