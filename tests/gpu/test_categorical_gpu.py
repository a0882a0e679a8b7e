"""Categorical features on the GPU give the CPU's results bit for bit (docs/design.md §11).

Kernel by kernel: the categorical split search (``best_per_category_feature`` and
``categorical_split_bits`` in kernels/split.cu) writes the CPU kernel's records and category
sets for histograms full of ties, one-hot and partition features, masks, monotone bounds,
empty slots, and features whose sort fits a block's shared memory (5,000 categories) or
does not (20,000: the global scratch path); the categorical partition moves the CPU's rows;
the prediction kernels take XGBoost's decision for every kind of value (negative, fractional,
past the set, 2**24, inf, NaN). End to end: training on the GPU saves the CPU's model JSON
byte for byte on random categorical sets (one-hot, partition, missing values, thousands of
categories, whole-level depthwise and lossguide, several objectives, sampling, monotone
constraints, data already on the device), and predicts what the CPU predicts. The
multi-GPU case checks 1, 2 and 4 GPUs through NCCL against single-process CPU training.

Every test takes a few seconds on one GPU; the CPU trains the reference models.
"""

from __future__ import annotations

import os
from functools import lru_cache
from types import SimpleNamespace

import numpy as np
import pytest

import dgboost as dg
from dgboost._categorical import CategoricalLayout, n_words
from dgboost._layout import DEFAULT_LEFT, FEATURE, GAIN, LEFT_G, LEFT_H, NO_NODE, SPLIT_BIN
from dgboost.backend.cpu import CPUBackend
from dgboost.testing import assert_same_trees
from dgboost.testing.checks import normalised_model_json
from dgboost.testing.kernel_inputs import node_records, random_segments

CPU = CPUBackend()
SCALE = 2.0**20


@pytest.fixture(scope="module")
def gpu():
    from dgboost.testing.cuda_probes import PoisonedCUDABackend

    return PoisonedCUDABackend(0)


# -- kernels ------------------------------------------------------------------------------------
def _layout(n_bins, is_cat) -> CategoricalLayout:
    n_cats = np.where(is_cat, n_bins, 0).astype(np.int32)
    return CategoricalLayout(np.asarray(is_cat, np.uint8), n_cats, n_words(int(n_cats.max())))


def _tied_histograms(rng, n_nodes: int, n_bins) -> tuple[np.ndarray, np.ndarray]:
    """int64 (n, total, 2) histograms drawn from a few (g, h) values, so that many
    categories' weights tie (-0.0 and +0.0 among them: g = 0, h below min_child_weight,
    empty categories), and node totals with missing rows on some nodes."""
    total = int(sum(n_bins))
    g = rng.choice(np.array([-6, -3, -2, 0, 0, 1, 2, 3, 5, 8]) * 2**18, size=(n_nodes, total))
    h = rng.choice(np.array([0, 1, 2, 2, 3, 4, 6]) * 2**18, size=(n_nodes, total))
    g[(h == 0) & (rng.random((n_nodes, total)) < 0.7)] = 0
    hist = np.stack([g, h], axis=2).astype(np.int64)
    totals = hist.sum(axis=1)
    totals[:, 0] += rng.choice([0, 3 * 2**18, -5 * 2**18], size=n_nodes)
    totals[:, 1] += rng.choice([0, 0, 2 * 2**18, 7 * 2**18], size=n_nodes)
    return hist, totals


def _params(**kw):
    base = dict(
        reg_lambda=1.0,
        alpha=0.0,
        gamma=0.0,
        min_child_weight=1.0,
        max_delta_step=0.0,
        max_cat_to_onehot=4,
        max_cat_threshold=64,
    )
    return SimpleNamespace(**{**base, **kw})


def _evaluate_both(gpu, hist, records, cut_ptrs, mask, p, layout, bounds=None, monotone=None):
    """(CPU records, CPU cat_bits), (GPU records, GPU cat_bits) of the same evaluation; the
    GPU's output arrays start poisoned."""
    import cupy

    scales = np.array([SCALE, SCALE])
    want = records.copy()
    want_bits = np.full((records.shape[0], layout.words), 0xDEADBEEF, np.uint32)
    CPU.evaluate_splits(
        hist, want, cut_ptrs, mask, scales, p, bounds=bounds, monotone=monotone, categorical=layout, cat_bits=want_bits
    )
    got = cupy.asarray(records)
    got_bits = gpu.empty((records.shape[0], layout.words), np.uint32)
    gpu.evaluate_splits(
        cupy.asarray(hist),
        got,
        cut_ptrs,
        None if mask is None else cupy.asarray(mask),
        scales,
        p,
        bounds=None if bounds is None else cupy.asarray(bounds),
        monotone=None if monotone is None else cupy.asarray(monotone),
        categorical=layout,
        cat_bits=got_bits,
    )
    return (want, want_bits), (got.get(), got_bits.get())


def _assert_same(want, got):
    """Records and sets equal; a record's decision columns where it splits (with a best split
    below gamma the CPU leaves that candidate's bin and sums in a record of feature -1)."""
    (wr, wb), (gr, gb) = want, got
    np.testing.assert_array_equal(gr[:, FEATURE], wr[:, FEATURE])
    split = wr[:, FEATURE] >= 0
    for column in (SPLIT_BIN, DEFAULT_LEFT, GAIN, LEFT_G, LEFT_H):
        np.testing.assert_array_equal(gr[split, column], wr[split, column], err_msg=f"record column {column}")
    np.testing.assert_array_equal(gr[:, LEFT_H + 1 :], wr[:, LEFT_H + 1 :])  # sums and segments untouched
    np.testing.assert_array_equal(gr[wr[:, FEATURE] == NO_NODE], wr[wr[:, FEATURE] == NO_NODE])
    np.testing.assert_array_equal(gb, wb)


SPLIT_CASES = {
    "partition features among numeric ones": (_params(), [40, 7, 300, 12], [1, 0, 1, 0]),
    "one-hot and partition": (_params(max_cat_to_onehot=8), [3, 5, 9, 70], [1, 1, 1, 1]),
    "max_cat_threshold above the categories": (_params(max_cat_threshold=500), [33, 64, 5], [1, 1, 0]),
    "max_cat_threshold 2": (_params(max_cat_threshold=2), [20, 12], [1, 1]),
    "regularised": (
        _params(min_child_weight=3.0, alpha=0.7, max_delta_step=0.9, reg_lambda=0.0, gamma=0.5),
        [50, 8, 17],
        [1, 0, 1],
    ),
    "one-hot with many categories": (_params(max_cat_to_onehot=100), [60, 2], [1, 1]),
    "5,000 categories (sorted in shared memory)": (_params(), [5000, 10], [1, 0]),
    "20,000 categories (sorted in global memory)": (_params(max_cat_threshold=3000), [20_000, 300], [1, 1]),
}


@pytest.mark.gpu
@pytest.mark.parametrize("case", list(SPLIT_CASES))
def test_categorical_split_search_equals_the_cpu_kernel_bit_for_bit(gpu, case):
    p, n_bins, is_cat = SPLIT_CASES[case]
    rng = np.random.default_rng(sum(map(ord, case)))
    n_nodes = 9
    hist, totals = _tied_histograms(rng, n_nodes, n_bins)
    cut_ptrs = np.concatenate([[0], np.cumsum(n_bins)]).astype(np.int64)
    layout = _layout(np.asarray(n_bins), np.asarray(is_cat, bool))
    records = node_records(np.zeros(n_nodes), np.zeros(n_nodes), sums=totals)
    records[:, SPLIT_BIN] = -1
    records[4, FEATURE] = NO_NODE  # a slot below a leaf: left as it is, zero set
    splits = 0
    for mask in (None, rng.random((n_nodes, len(n_bins))) < 0.7, rng.random((1, len(n_bins))) < 0.7):
        want, got = _evaluate_both(gpu, hist, records, cut_ptrs, mask, p, layout)
        _assert_same(want, got)
        splits += int((want[0][:, FEATURE] >= 0).sum())
    assert splits >= 6, "too few splits for the comparison to mean much"


@pytest.mark.gpu
def test_weights_of_minus_zero_and_zero_keep_code_order_on_the_gpu(gpu):
    # +0.0 (empty categories) and -0.0 (g = 0) weights tie in the CPU's stable sort; keyed
    # apart, the set would differ
    hist = np.array([[[5, 0], [0, 0], [0, 0], [0, 4], [0, 3], [-3, 4]]], np.int64) * 2**20
    totals = hist.sum(axis=1)
    records = node_records([0], [0], sums=totals)
    records[:, SPLIT_BIN] = -1
    layout = _layout(np.array([6]), np.array([True]))
    p = _params(min_child_weight=2.0, max_cat_threshold=3)
    want, got = _evaluate_both(gpu, hist, records, np.array([0, 6], np.int64), None, p, layout)
    _assert_same(want, got)
    assert want[1].tolist() == [[15]]


@pytest.mark.gpu
def test_monotone_categorical_splits_equal_the_cpu_ones(gpu):
    rng = np.random.default_rng(5)
    n_bins, n_nodes = [30, 6, 80], 10
    hist, totals = _tied_histograms(rng, n_nodes, n_bins)
    cut_ptrs = np.concatenate([[0], np.cumsum(n_bins)]).astype(np.int64)
    layout = _layout(np.asarray(n_bins), np.array([1, 0, 1], bool))
    bounds = np.tile([-np.inf, np.inf], (n_nodes, 1))
    bounds[::2] = [-0.5, 0.4]
    records = node_records(np.zeros(n_nodes), np.zeros(n_nodes), sums=totals)
    for monotone in (np.array([1, 0, -1], np.int8), np.array([-1, 1, 1], np.int8)):
        want, got = _evaluate_both(gpu, hist, records, cut_ptrs, None, _params(), layout, bounds, monotone)
        _assert_same(want, got)


@pytest.mark.gpu
@pytest.mark.parametrize("n,m", [(5000, 3), (300_000, 40)])
def test_categorical_partition_moves_the_cpu_rows(gpu, n, m):
    import cupy

    rng = np.random.default_rng(m)
    n_cats = [3, 700, 5000]  # one-hot, partition, many categories; a numeric feature last
    x = np.column_stack([rng.integers(0, k, n) for k in n_cats] + [rng.normal(size=n)]).astype(np.float32)
    x[rng.random(x.shape) < 0.1] = np.nan
    cut_values = np.concatenate([np.arange(1, k + 1) for k in n_cats] + [np.array([-0.5, 0.0, 0.7, np.inf])])
    cut_ptrs = np.concatenate([[0], np.cumsum(n_cats + [4])]).astype(np.int64)
    cut_values = cut_values.astype(np.float32)
    bins = CPU.bin_values(x, cut_values, cut_ptrs, np.dtype(np.uint16))
    ell = gpu.bin_values(x, cut_values, cut_ptrs)
    layout = _layout(np.asarray(n_cats + [4]), np.array([1, 1, 1, 0], bool))
    rows = rng.permutation(n).astype(np.int32)
    segments = random_segments(rng, n, m) if m > 3 else np.array([[0, 1000], [1200, 3900], [4000, 4001]])
    feature = np.where(rng.random(m) < 0.2, rng.choice([-1, NO_NODE], m), rng.integers(0, 4, m))
    records = node_records(
        segments[:, 0],
        segments[:, 1],
        feature=feature,
        split_bin=np.where(feature == 0, rng.integers(0, 3, m), np.where(feature == 3, 1, -1)),
        default_left=rng.integers(0, 2, m),
    )
    # random sets, with words past the feature's categories left empty as the search leaves them
    cat_bits = rng.integers(0, 2**32, size=(m, layout.words), dtype=np.uint32)
    for j, f in enumerate(feature):
        if f < 0 or f == 3:
            cat_bits[j] = 0
        else:
            cat_bits[j, n_words(n_cats[f]) :] = 0
    want_rows = rows.copy()
    want = CPU.partition(CPU.column_layout(bins), want_rows, records, categorical=layout, cat_bits=cat_bits)
    dev_rows = cupy.asarray(rows)
    got = gpu.partition(ell, dev_rows, cupy.asarray(records), categorical=layout, cat_bits=cupy.asarray(cat_bits))
    np.testing.assert_array_equal(got.get(), want)
    np.testing.assert_array_equal(dev_rows.get(), want_rows)


# -- training data --------------------------------------------------------------------------------
def _categorical_data(n: int, n_cats, n_numeric: int, seed: int, missing: float = 0.1, task: str = "binary"):
    """(X float32 (n, F), y, feature_types): categorical codes drawn long-tailed (Zipf-like
    frequencies) with a random effect per category, numeric columns with a linear effect,
    ``missing`` of the values NaN. ``task``: binary, regression or multiclass (3 classes)."""
    rng = np.random.default_rng(seed)
    cols, score = [], np.zeros(n)
    for k in n_cats:
        p = 1.0 / np.arange(1, k + 1) ** 1.1
        codes = rng.choice(k, size=n, p=p / p.sum())
        score += rng.normal(size=k)[codes]
        cols.append(codes.astype(np.float32))
    for _ in range(n_numeric):
        v = rng.normal(size=n)
        score += 0.5 * v
        cols.append(v.astype(np.float32))
    X = np.column_stack(cols)
    X[rng.random(X.shape) < missing] = np.nan
    score += rng.normal(scale=0.5, size=n)
    if task == "binary":
        y = (score > np.median(score)).astype(np.float32)
    elif task == "multiclass":
        y = np.digitize(score, np.quantile(score, [1 / 3, 2 / 3])).astype(np.float32)
    else:
        y = score.astype(np.float32)
    return X, y, ["c"] * len(n_cats) + ["q"] * n_numeric


@lru_cache(maxsize=None)
def _data(name: str):
    return {
        "small": lambda: _categorical_data(6000, [3, 4, 40], 2, seed=1),
        "airline": lambda: _categorical_data(20_000, [20, 300, 300], 3, seed=2),
        "tailnum": lambda: _categorical_data(30_000, [16, 4000], 2, seed=3, missing=0.05),
        "regression": lambda: _categorical_data(8000, [10, 120], 3, seed=4, task="regression"),
        "multiclass": lambda: _categorical_data(8000, [6, 90], 2, seed=5, task="multiclass"),
        "huge": lambda: _categorical_data(60_000, [20_000], 1, seed=6, missing=0.0),
    }[name]()


BINARY = {"objective": "binary:logistic", "max_depth": 6, "eta": 0.3, "max_bin": 64}
LOSSGUIDE = {"grow_policy": "lossguide", "max_depth": 0, "max_leaves": 31}
TRAIN_CASES = {
    "one-hot and partition, depthwise": ("small", BINARY, 10),
    "one-hot only": ("small", {**BINARY, "max_cat_to_onehot": 64}, 8),
    "partition only, small threshold": ("small", {**BINARY, "max_cat_to_onehot": 1, "max_cat_threshold": 4}, 8),
    "airline-like, depthwise": ("airline", {**BINARY, "max_depth": 8}, 8),
    "airline-like, lossguide": ("airline", {**BINARY, **LOSSGUIDE}, 8),
    "airline-like, sampling": ("airline", {**BINARY, "subsample": 0.8, "colsample_bynode": 0.7, "seed": 3}, 8),
    "4,000 categories": ("tailnum", {**BINARY, "max_depth": 7}, 6),
    "4,000 categories, lossguide": ("tailnum", {**BINARY, **LOSSGUIDE, "max_leaves": 48}, 5),
    "regression with L1 and min_child_weight": (
        "regression",
        {"objective": "reg:squarederror", "max_depth": 6, "alpha": 0.5, "min_child_weight": 5, "max_bin": 32},
        10,
    ),
    "absolute error": ("regression", {"objective": "reg:absoluteerror", "max_depth": 5}, 8),
    "softprob": ("multiclass", {"objective": "multi:softprob", "num_class": 3, "max_depth": 5}, 6),
    "softprob, lossguide": ("multiclass", {"objective": "multi:softprob", "num_class": 3, **LOSSGUIDE}, 5),
    "monotone constraints": (
        "regression",
        {"objective": "reg:squarederror", "monotone_constraints": "(1,-1,1,0,0)"},
        8,
    ),
    "20,000 categories": ("huge", {**BINARY, "max_depth": 4, "max_cat_threshold": 1000}, 3),
}


def _train(device: str, name: str, params: dict, rounds: int, on_device: bool = False):
    X, y, types = _data(name)
    if on_device:
        import cupy

        X, y = cupy.asarray(X), cupy.asarray(y)
    dtrain = dg.DMatrix(X, y, feature_types=types)
    return dg.train({**params, "device": device}, dtrain, rounds, verbose_eval=False)


@lru_cache(maxsize=None)
def _cpu_model(case: str):
    name, params, rounds = TRAIN_CASES[case]
    return _train("cpu", name, params, rounds)


def _assert_same_model(got, want, names=("cuda", "cpu")):
    assert got.ensemble.has_categorical, "the model has no categorical split: the case tests nothing"
    assert_same_trees(got, want, names=names)
    # the device (and nthread) are run-only parameters; every other byte, leaf values unrounded
    assert normalised_model_json(got, keys=()) == normalised_model_json(want, keys=())


@pytest.mark.gpu
@pytest.mark.parametrize("case", list(TRAIN_CASES))
def test_gpu_training_saves_the_cpu_model_byte_for_byte(case):
    name, params, rounds = TRAIN_CASES[case]
    _assert_same_model(_train("cuda", name, params, rounds), _cpu_model(case))


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["airline-like, depthwise", "softprob"])
def test_categorical_data_already_on_the_gpu_gives_the_cpu_model(case):
    name, params, rounds = TRAIN_CASES[case]
    _assert_same_model(_train("cuda", name, params, rounds, on_device=True), _cpu_model(case))


@pytest.mark.gpu
def test_gpu_training_with_categorical_features_is_deterministic():
    name, params, rounds = TRAIN_CASES["4,000 categories, lossguide"]
    assert _train("cuda", name, params, rounds).to_json() == _train("cuda", name, params, rounds).to_json()


def _odd_values(X: np.ndarray, types, rng) -> np.ndarray:
    """X with categorical values of every kind XGBoost's decision meets: unseen (past the
    training categories and past a node's words), negative, fractional, 2**24 and beyond,
    +-inf, NaN."""
    X = X.copy()
    odd = np.array(
        [-1.0, -0.5, -0.0, 0.5, 2.7, 31.0, 32.0, 63.9, 5000.0, 16777215.0, 16777216.0, 3e9, np.inf, -np.inf, np.nan]
    )
    for f, t in enumerate(types):
        if t == "c":
            pick = rng.random(X.shape[0]) < 0.3
            X[pick, f] = rng.choice(odd, size=int(pick.sum())).astype(np.float32)
    return X


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["one-hot and partition, depthwise", "4,000 categories", "softprob"])
def test_gpu_predictions_of_a_categorical_model_equal_the_cpu_ones(gpu, case):
    import cupy

    model = _cpu_model(case)
    name = TRAIN_CASES[case][0]
    X, _, types = _data(name)
    X = _odd_values(X[:5000], types, np.random.default_rng(11))
    ens = model.ensemble
    for t0, t1 in ((0, ens.n_trees), (1, max(2, ens.n_trees // 2))):
        want = np.zeros((X.shape[0], ens.n_groups), np.float32)
        CPU.predict_margin(ens, X, t0, t1, want)
        got = cupy.zeros((X.shape[0], ens.n_groups), np.float32)
        gpu.predict_margin(ens, cupy.asarray(X), t0, t1, got)
        np.testing.assert_array_equal(got.get(), want)
        np.testing.assert_array_equal(gpu.predict_leaf(ens, X, t0, t1).get(), CPU.predict_leaf(ens, X, t0, t1))


@pytest.mark.gpu
def test_a_gpu_trained_categorical_model_predicts_what_the_cpu_trained_one_does():
    name, params, rounds = TRAIN_CASES["airline-like, lossguide"]
    X, _, types = _data(name)
    model = _train("cuda", name, params, rounds)
    dtest = dg.DMatrix(X[:4000], feature_types=types)
    got = model.predict(dtest, output_margin=True)
    model.set_param({"device": "cpu"})
    np.testing.assert_array_equal(model.predict(dtest, output_margin=True), got)
    np.testing.assert_array_equal(_cpu_model("airline-like, lossguide").predict(dtest, output_margin=True), got)


# -- several GPUs ---------------------------------------------------------------------------------
def _gpu_count() -> int:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount()
    except Exception:  # noqa: BLE001 - no CUDA at all
        return 0


@pytest.mark.dask
@pytest.mark.parametrize(
    "n_gpus",
    [
        pytest.param(1, marks=pytest.mark.gpu),
        pytest.param(2, marks=pytest.mark.mgpu),
        pytest.param(4, marks=pytest.mark.mgpu),
    ],
)
def test_n_gpus_through_nccl_give_the_cpu_categorical_model_byte_for_byte(n_gpus):
    if _gpu_count() < n_gpus:
        pytest.skip(f"needs {n_gpus} GPUs")
    import cupy
    import dask.array as da
    from dask_cuda import LocalCUDACluster
    from distributed import Client

    import dgboost.dask as dxgb

    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    name, params, rounds = TRAIN_CASES["airline-like, depthwise"]
    X, y, types = _data(name)
    # uneven partitions, one empty; the rarest categories of some partitions absent
    chunks = (7000, 0, 3000, 6000, 4000)
    with (
        LocalCUDACluster(n_workers=n_gpus, threads_per_worker=1, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        dX = da.from_array(X, chunks=(chunks, X.shape[1])).map_blocks(cupy.asarray, dtype=np.float32)
        dtrain = dxgb.DaskDMatrix(client, dX, da.from_array(y, chunks=(chunks,)), feature_types=types)
        got = dxgb.train(client, {**params, "device": "cuda"}, dtrain, rounds, communicator="nccl")["booster"]
    _assert_same_model(got, _cpu_model("airline-like, depthwise"), names=(f"{n_gpus} GPUs", "cpu"))
