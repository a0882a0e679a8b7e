"""Each CUDA kernel against the CPU engine's kernel on the same inputs, outputs poisoned first."""

from types import SimpleNamespace

import numpy as np
import pytest

from dgboost._layout import (
    BEGIN,
    END,
    FEATURE,
    GAIN,
    GRAD_PAIR_INT,
    LEFT_G,
    LEFT_H,
    NO_NODE,
    NODE,
    NODE_FIELDS,
    PATH_ELEMENT,
    SPLIT_BIN,
    SUM_G,
    SUM_H,
)
from dgboost.backend._ellpack import entry_layout, packed_words, symbol_bits
from dgboost.backend.cpu import CPUBackend
from dgboost.quantile import compute_cuts
from dgboost.testing.kernel_inputs import (
    binning_data,
    mixed_width_data,
    node_records,
    random_ensemble,
    random_segments,
)
from dgboost.training import fixed_point_scale

pytestmark = pytest.mark.gpu

CPU = CPUBackend()


@pytest.fixture(scope="module")
def gpu():
    from dgboost.testing.cuda_probes import PoisonedCUDABackend

    return PoisonedCUDABackend(0)


def _cpu_bins(x, cuts):
    dtype = np.uint8 if cuts.n_bins().max() <= 255 else np.uint16
    return CPU.bin_values(x, cuts.values, cuts.ptrs, np.dtype(dtype))


def test_record_layouts_on_the_device_match_the_numpy_dtypes(gpu):
    import cupy

    from dgboost.backend._nvrtc import get_module

    out = cupy.full(19, -1, dtype=cupy.int64)
    get_module("layout.cu").get_function("record_layout")((1,), (1,), (out,))
    got = out.get().tolist()
    want = [GRAD_PAIR_INT.itemsize, GRAD_PAIR_INT.fields["g"][1], GRAD_PAIR_INT.fields["h"][1], NODE.itemsize]
    want += [NODE.fields[k][1] for k in ("left", "right", "feature", "split_value", "default_left", "value")]
    want += [PATH_ELEMENT.itemsize]
    want += [
        PATH_ELEMENT.fields[k][1]
        for k in ("path_idx", "feature", "group", "is_missing_branch", "lower", "upper", "zero_fraction", "v")
    ]
    assert got == want


@pytest.mark.parametrize("max_bin", [2, 3, 16, 256, 1000])
def test_binned_matrix_unpacks_to_the_cpu_bins(gpu, max_bin):
    _, x, cuts = binning_data(max_bin, n=2000, max_bin=max_bin)
    ell = gpu.bin_values(x, cuts.values, cuts.ptrs)
    cpu = _cpu_bins(x, cuts).astype(np.int64)
    cpu[cpu == np.iinfo(_cpu_bins(x, cuts).dtype).max] = ell.missing
    np.testing.assert_array_equal(gpu.unpack(ell).astype(np.int64), cpu)


def test_bin_matrix_with_256_bins_uses_at_most_9_bits_per_entry(gpu):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(100_000, 28)).astype(np.float32)
    cuts = compute_cuts(x, None, 256)
    ell = gpu.bin_values(x, cuts.values, cuts.ptrs)
    assert max(symbol_bits(k) for k in cuts.n_bins()) == 9
    assert ell.row_bits == sum(symbol_bits(k) for k in cuts.n_bins()) <= 9 * 28
    assert ell.bits_per_entry <= 9.001


# 256-bin features around a 4,000-bin one (a categorical column's width, 12 bits) and a few
# narrow ones: 9 x 9 + 12 + 2 + 1 + 5 + 2 = 103 bits a row, where one width for all takes 14 x 12
_MIXED = [256] * 5 + [4000] + [256] * 4 + [3, 1, 17, 2]


def test_a_wide_feature_widens_only_its_own_entries_and_unpacks_to_the_cpu_bins(gpu):
    _, x, cuts = mixed_width_data(0, _MIXED, n=50_000)
    ell = gpu.bin_values(x, cuts.values, cuts.ptrs)
    layout, row_bits = entry_layout(cuts.ptrs)
    assert ell.row_bits == row_bits == 103 < 12 * len(_MIXED)
    np.testing.assert_array_equal(ell.layout.get(), layout)
    assert ell.nbytes == 4 * packed_words(50_000, 103)
    assert ell.missing == 4000
    cpu = _cpu_bins(x, cuts).astype(np.int64)
    cpu[cpu == np.iinfo(np.uint16).max] = ell.missing
    np.testing.assert_array_equal(gpu.unpack(ell).astype(np.int64), cpu)


def test_quantised_pairs_equal_the_cpu_ones_with_and_without_a_sample_mask(gpu):
    import cupy

    rng = np.random.default_rng(1)
    g = (rng.normal(size=(5000, 3)) * 7).astype(np.float32)
    h = rng.uniform(0, 2, size=(5000, 3)).astype(np.float32)
    keep = rng.random(5000) < 0.7
    # the training loop's scales: every quantised value within 2**30
    scale_g = fixed_point_scale(float(np.abs(g).max()), 5000)
    scale_h = fixed_point_scale(float(np.abs(h).max()), 5000)
    for k in range(3):
        for mask in (None, keep):
            got = gpu.quantise(
                cupy.asarray(g)[:, k],
                cupy.asarray(h)[:, k],
                np.array([scale_g, scale_h]),
                None if mask is None else cupy.asarray(mask),
            )
            want = CPU.quantise(g[:, k], h[:, k], np.array([scale_g, scale_h]), mask)
            np.testing.assert_array_equal(got.get(), want)


@pytest.mark.parametrize("seed,f,max_bin", [(0, 6, 16), (1, 28, 256), (2, 1500, 256), (3, 3, 40000)])
def test_histograms_equal_the_cpu_ones_for_narrow_wide_and_huge_bin_counts(gpu, seed, f, max_bin):
    import cupy

    n = 40_000 if max_bin == 40000 else 3000
    rng, x, cuts = binning_data(seed, n=n, f=f, max_bin=max_bin)
    if max_bin == 40000:
        x[:, 1] = rng.permutation(n).astype(np.float32)  # many distinct values: > shared memory
        cuts = compute_cuts(x, None, max_bin, sample_rows=n)
    ell = gpu.bin_values(x, cuts.values, cuts.ptrs)
    if f == 1500:
        assert ell.n_groups > 1
    if max_bin == 40000:
        assert not ell.use_shared
    gpair = rng.integers(-(2**30), 2**30, size=(x.shape[0], 2)).astype(np.int32)
    gpair[rng.random(x.shape[0]) < 0.1] = 0
    rows = rng.permutation(x.shape[0]).astype(np.int32)
    edges = np.sort(rng.integers(0, x.shape[0], size=8)).reshape(4, 2)
    got = gpu.build_histograms(ell, cuts.ptrs, cupy.asarray(gpair), cupy.asarray(rows), cupy.asarray(edges))
    want = CPU.build_histograms(_cpu_bins(x, cuts), cuts.ptrs, gpair, rows, edges)
    np.testing.assert_array_equal(got.get(), want)


@pytest.mark.parametrize("n,m", [(300_000, 1), (300_000, 7), (200_000, 130), (5_000, 300)])
def test_histograms_of_many_segments_some_empty_equal_the_cpu_ones(gpu, n, m):
    import cupy

    rng, x, cuts = binning_data(n + m, n=n, f=9, max_bin=64)
    ell = gpu.bin_values(x, cuts.values, cuts.ptrs)
    gpair = rng.integers(-(2**30), 2**30, size=(n, 2)).astype(np.int32)
    rows = rng.permutation(n).astype(np.int32)
    segments = random_segments(rng, n, m) if m > 1 else np.array([[0, n]])
    records = node_records(segments[:, 0], segments[:, 1])
    want = CPU.build_histograms(_cpu_bins(x, cuts), cuts.ptrs, gpair, rows, segments)
    tight = int((segments[:, 1] - segments[:, 0]).sum())
    dev_records = cupy.asarray(records)
    for given, max_rows in (
        (cupy.asarray(segments), None),
        (dev_records[:, BEGIN : END + 1], None),
        (cupy.asarray(segments), tight),
    ):
        # segments, or the begin/end columns of node records (a strided view, as the grower passes)
        got = gpu.build_histograms(ell, cuts.ptrs, cupy.asarray(gpair), cupy.asarray(rows), given, max_rows=max_rows)
        np.testing.assert_array_equal(got.get(), want)


@pytest.mark.parametrize(
    "n_bins,n",
    [
        (_MIXED, 200_000),  # the 4,000-bin feature is past shared memory: global adds
        ([256] * 5 + [2000] + [256] * 4 + [3, 1, 17, 2], 200_000),  # shared memory where it fits
        ([1, 2, 3, 5, 9] * 150, 30_000),  # one group of 750 narrow features, wider than the block
    ],
)
def test_histograms_of_a_mixed_width_matrix_with_missing_values_equal_the_cpu_ones(gpu, n_bins, n):
    import cupy

    rng, x, cuts = mixed_width_data(7, n_bins, n=n)
    ell = gpu.bin_values(x, cuts.values, cuts.ptrs)
    if max(n_bins) == 4000:
        assert not ell.use_shared
    if len(n_bins) == 750:
        assert ell.n_groups == 1
    gpair = rng.integers(-(2**30), 2**30, size=(n, 2)).astype(np.int32)
    gpair[rng.random(n) < 0.1] = 0
    rows = rng.permutation(n).astype(np.int32)
    segments = random_segments(rng, n, 9)
    want = CPU.build_histograms(_cpu_bins(x, cuts), cuts.ptrs, gpair, rows, segments)
    got = gpu.build_histograms(ell, cuts.ptrs, cupy.asarray(gpair), cupy.asarray(rows), cupy.asarray(segments))
    np.testing.assert_array_equal(got.get(), want)


def test_partition_of_a_mixed_width_matrix_with_missing_values_equals_the_cpu_partition(gpu):
    import cupy

    n, m = 300_000, 60
    rng, x, cuts = mixed_width_data(8, _MIXED, n=n)
    ell = gpu.bin_values(x, cuts.values, cuts.ptrs)
    rows = rng.permutation(n).astype(np.int32)
    segments = random_segments(rng, n, m)
    # every feature split somewhere (the wide one often), some parents not split
    feature = rng.choice(np.concatenate([np.arange(len(_MIXED)), [5, 5, 5, -1, NO_NODE]]), m)
    feature[: len(_MIXED)] = np.arange(len(_MIXED))
    n_bins = np.diff(cuts.ptrs)
    split_bin = np.where(feature >= 0, (rng.random(m) * n_bins[np.maximum(feature, 0)]).astype(np.int64), -1)
    records = node_records(
        segments[:, 0], segments[:, 1], feature=feature, split_bin=split_bin, default_left=rng.integers(0, 2, m)
    )
    want_rows = rows.copy()
    want = CPU.partition(CPU.column_layout(_cpu_bins(x, cuts)), want_rows, records)
    dev_rows = cupy.asarray(rows)
    got = gpu.partition(ell, dev_rows, cupy.asarray(records))
    np.testing.assert_array_equal(got.get(), want)
    np.testing.assert_array_equal(dev_rows.get(), want_rows)
    # into a second array: the same rows in every segment, nothing written outside them
    out = cupy.full(n, -7, np.int32)
    got = gpu.partition(ell, cupy.asarray(rows), cupy.asarray(records), out=out)
    np.testing.assert_array_equal(got.get(), want)
    out, inside = out.get(), np.zeros(n, bool)
    for begin, end in segments:
        np.testing.assert_array_equal(out[begin:end], want_rows[begin:end])
        inside[begin:end] = True
    assert (out[~inside] == -7).all()


def _decisions(records):
    return (
        records[:, FEATURE],
        records[:, SPLIT_BIN],
        records[:, 2],
        records[:, GAIN : GAIN + 1].view(np.float64)[:, 0],
        records[:, LEFT_G : LEFT_H + 1],
    )


_SCALE = 2.0**26


def _split_inputs(seed: int, segments: np.ndarray):
    """(rng, x, cuts, hist, totals): quantised random gradients of 2000 rows x 8 features,
    the CPU histograms and gradient totals of ``segments``."""
    rng, x, cuts = binning_data(seed, n=2000, f=8, max_bin=64)
    gpair = CPU.quantise(
        rng.normal(size=x.shape[0]), rng.uniform(0.1, 1.0, size=x.shape[0]), np.array([_SCALE, _SCALE])
    )
    hist = CPU.build_histograms(_cpu_bins(x, cuts), cuts.ptrs, gpair, np.arange(x.shape[0], dtype=np.int32), segments)
    totals = np.stack([gpair[b:e].sum(0) for b, e in segments]).astype(np.int64)
    return rng, x, cuts, hist, totals


def _assert_same_decisions(got, want):
    """The GPU's split decisions (feature, bin, direction, gain, left sums) are the CPU's, bit for bit."""
    (gf, gb, gd, gg, gl), (wf, wb, wd, wg, wl) = _decisions(got), _decisions(want)
    np.testing.assert_array_equal(gf, wf)
    ok = wf >= 0
    np.testing.assert_array_equal(gb[ok], wb[ok])
    np.testing.assert_array_equal(gd[ok], wd[ok])
    np.testing.assert_array_equal(gg[ok], wg[ok])  # identical float64 arithmetic
    np.testing.assert_array_equal(gl[ok], wl[ok])


@pytest.mark.parametrize(
    "lam,alpha,mcw,mds,gamma",
    [(1.0, 0.0, 1.0, 0.0, 0.0), (0.0, 0.5, 0.0, 0.7, 2.0), (5.0, 0.0, 20.0, 0.0, 0.0), (1.0, 0.5, 1.0, 0.7, 0.0)],
)
def test_split_decisions_equal_the_cpu_ones_bit_for_bit(gpu, lam, alpha, mcw, mds, gamma):
    import cupy

    scale = _SCALE
    for seed in range(5):
        segments = np.array([[0, 700], [0, 2000], [500, 510]])
        rng, x, cuts, hist, totals = _split_inputs(seed, segments)
        p = SimpleNamespace(reg_lambda=lam, alpha=alpha, gamma=gamma, min_child_weight=mcw, max_delta_step=mds)
        for mask in (rng.random((3, x.shape[1])) < 0.8, None, rng.random((1, x.shape[1])) < 0.6):
            want = node_records(segments[:, 0], segments[:, 1], sums=totals)
            want[seed % 3, FEATURE] = NO_NODE  # a slot with no node is left alone
            got = cupy.asarray(want)
            CPU.evaluate_splits(hist, want, cuts.ptrs, mask, np.array([scale, scale]), p)
            gpu.evaluate_splits(
                cupy.asarray(hist),
                got,
                cuts.ptrs,
                None if mask is None else cupy.asarray(mask),
                np.array([scale, scale]),
                p,
            )
            got = got.get()
            _assert_same_decisions(got, want)
            np.testing.assert_array_equal(got[:, 6:], want[:, 6:])  # sums and segments untouched
            np.testing.assert_array_equal(got[seed % 3], want[seed % 3])  # the empty slot, whole


@pytest.mark.parametrize(
    "lam,alpha,mcw,mds,gamma", [(1.0, 0.0, 1.0, 0.0, 0.0), (0.0, 0.5, 0.0, 0.7, 2.0), (1.0, 0.5, 1.0, 0.7, 0.0)]
)
def test_monotone_split_decisions_and_child_bounds_equal_the_cpu_ones_bit_for_bit(gpu, lam, alpha, mcw, mds, gamma):
    import cupy

    scale = _SCALE
    for seed in range(4):
        segments = np.array([[0, 700], [0, 2000], [500, 510], [100, 1900]])
        rng, x, cuts, hist, totals = _split_inputs(seed, segments)
        p = SimpleNamespace(reg_lambda=lam, alpha=alpha, gamma=gamma, min_child_weight=mcw, max_delta_step=mds)
        monotone = rng.choice([-1, 0, 1], size=x.shape[1]).astype(np.int8)
        bounds = np.array([[-np.inf, np.inf], [-0.05, 0.02], [0.01, 0.3], [-np.inf, 0.0]])
        for mask in (None, rng.random((4, x.shape[1])) < 0.8):
            want = node_records(segments[:, 0], segments[:, 1], sums=totals)
            want[seed % 4, FEATURE] = NO_NODE  # a slot with no node is left alone
            got = cupy.asarray(want)
            CPU.evaluate_splits(
                hist, want, cuts.ptrs, mask, np.array([scale, scale]), p, bounds=bounds, monotone=monotone
            )
            gpu.evaluate_splits(
                cupy.asarray(hist),
                got,
                cuts.ptrs,
                None if mask is None else cupy.asarray(mask),
                np.array([scale, scale]),
                p,
                bounds=cupy.asarray(bounds),
                monotone=cupy.asarray(monotone),
            )
            got = got.get()
            _assert_same_decisions(got, want)
            np.testing.assert_array_equal(got[seed % 4], want[seed % 4])
            want_bounds = CPU.child_bounds(want, bounds, monotone, np.array([scale, scale]), p)
            got_bounds = gpu.child_bounds(
                cupy.asarray(want), cupy.asarray(bounds), cupy.asarray(monotone), np.array([scale, scale]), p
            ).get()
            np.testing.assert_array_equal(got_bounds, want_bounds)


def test_tied_gains_pick_the_lowest_feature_then_the_lowest_bin(gpu):
    import cupy

    x = np.tile(np.arange(8, dtype=np.float32)[:, None], (50, 3))  # three identical features
    cuts = compute_cuts(x, None, 16)
    bins = _cpu_bins(x, cuts)
    gpair = CPU.quantise(np.where(x[:, 0] < 4, -1.0, 1.0), np.ones(x.shape[0]), np.array([2.0**20, 2.0**20]))
    hist = CPU.build_histograms(
        bins, cuts.ptrs, gpair, np.arange(x.shape[0], dtype=np.int32), np.array([[0, x.shape[0]]])
    )
    records = cupy.asarray(node_records([0], [x.shape[0]], sums=gpair.sum(0, dtype=np.int64)[None]))
    p = SimpleNamespace(reg_lambda=1.0, alpha=0.0, gamma=0.0, min_child_weight=0.0, max_delta_step=0.0)
    gpu.evaluate_splits(cupy.asarray(hist), records, cuts.ptrs, None, np.array([2.0**20, 2.0**20]), p)
    got = records.get()
    assert got[0, FEATURE] == 0
    assert got[0, SPLIT_BIN] == 3


@pytest.mark.parametrize("n,m", [(5000, 3), (400_000, 5), (100_000, 200)])
def test_partition_is_stable_and_equals_the_cpu_partition(gpu, n, m):
    import cupy

    rng, x, cuts = binning_data(5 + m, n=n, f=5)
    bins = _cpu_bins(x, cuts)
    ell = gpu.bin_values(x, cuts.values, cuts.ptrs)
    rows = rng.permutation(x.shape[0]).astype(np.int32)
    # segments over many tiles, of one row, empty, and with gaps (rows of nodes not split)
    segments = random_segments(rng, n, m) if m > 3 else np.array([[0, 1000], [1200, 3900], [4000, 4001]])
    # some parents not split (leaves and empty slots of a whole level): their rows stay
    feature = np.where(rng.random(m) < 0.25, rng.choice([-1, NO_NODE], m), rng.integers(0, 5, m))
    records = node_records(
        segments[:, 0],
        segments[:, 1],
        feature=feature,
        split_bin=rng.integers(0, 8, m),
        default_left=rng.integers(0, 2, m),
    )
    want_rows = rows.copy()
    want = CPU.partition(CPU.column_layout(bins), want_rows, records)
    tight = int((segments[:, 1] - segments[:, 0]).sum())  # the launch sized by the exact row count
    for max_rows in (None, tight):
        dev_rows = cupy.asarray(rows)
        got = gpu.partition(ell, dev_rows, cupy.asarray(records), max_rows=max_rows)
        np.testing.assert_array_equal(got.get(), want)
        np.testing.assert_array_equal(dev_rows.get(), want_rows)


def test_children_records_and_histograms_equal_the_cpu_ones(gpu):
    import cupy

    rng = np.random.default_rng(9)
    segments = random_segments(rng, 50_000, 40)
    parents = node_records(segments[:, 0], segments[:, 1], sums=rng.integers(-(10**9), 10**9, size=(40, 2)))
    parents[:, LEFT_G : LEFT_H + 1] = rng.integers(-(10**9), 10**9, size=(40, 2))
    parents[:, FEATURE] = np.where(rng.random(40) < 0.3, rng.choice([-1, NO_NODE], 40), rng.integers(0, 9, 40))
    sizes = segments[:, 1] - segments[:, 0]
    lefts = (sizes * rng.random(40)).astype(np.int64)
    counts = np.stack([lefts, sizes - lefts], axis=1)
    global_counts = counts + rng.integers(0, 30, size=(40, 2))
    for sizes in (global_counts, None):  # None: the child of smaller hessian sum is built
        want = CPU.split_nodes(parents, counts, sizes)
        got = gpu.split_nodes(
            cupy.asarray(parents), cupy.asarray(counts), None if sizes is None else cupy.asarray(sizes)
        )
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.get(), w)
        # the scans split_nodes makes in its launch are the ones the next stages would make
        children, build_segments = got[0], got[1]
        np.testing.assert_array_equal(
            gpu._scanned_offsets(build_segments).get(), gpu._segment_offsets(build_segments, 2, 40, 1).get()
        )
        np.testing.assert_array_equal(
            gpu._scanned_offsets(children).get(), gpu._segment_offsets(children[:, BEGIN:], NODE_FIELDS, 80, 2048).get()
        )
        assert gpu._scanned_offsets(cupy.asarray(parents)) is None
    # children written into a given array: the same records there
    out = cupy.full((100, NODE_FIELDS), -7, np.int64)
    gpu.split_nodes(cupy.asarray(parents), cupy.asarray(counts), None, out=out[10:90])
    np.testing.assert_array_equal(out[10:90].get(), want[0])
    assert int(out[:10].min()) == int(out[90:].max()) == -7
    parent_hist = rng.integers(-(10**12), 10**12, size=(60, 77, 2))
    index = rng.choice(60, size=40, replace=False).astype(np.int64)
    built = rng.integers(-(10**12), 10**12, size=(40, 77, 2))
    want_hist = CPU.children_histograms(parent_hist, index, built, want[2])
    got_hist = gpu.children_histograms(
        cupy.asarray(parent_hist), cupy.asarray(index), cupy.asarray(built), cupy.asarray(want[2])
    )
    np.testing.assert_array_equal(got_hist.get(), want_hist)
    unindexed = gpu.children_histograms(
        cupy.asarray(parent_hist[index]), None, cupy.asarray(built), cupy.asarray(want[2])
    )
    np.testing.assert_array_equal(unindexed.get(), want_hist)
    root = gpu.root_node(cupy.asarray(np.array([5, 7], np.int64)), 123).get()
    np.testing.assert_array_equal(root, CPU.root_node(np.array([5, 7]), 123))
    assert root.shape == (1, NODE_FIELDS)


def test_leaf_values_are_added_to_the_margins_of_their_rows(gpu):
    import cupy

    rng = np.random.default_rng(7)
    rows = rng.permutation(1000).astype(np.int32)
    begins, ends = np.array([0, 300, 301]), np.array([300, 301, 1000])
    values = rng.normal(size=3).astype(np.float32)
    margin = rng.normal(size=(1000, 2)).astype(np.float32)
    dev = cupy.asarray(margin)
    gpu.add_leaf_values(dev, cupy.asarray(rows), begins, ends, values, 1)
    CPU.add_leaf_values(margin, rows, begins, ends, values, 1)
    np.testing.assert_array_equal(dev.get(), margin)


def test_prediction_kernels_equal_the_cpu_ones(gpu):
    import cupy

    rng = np.random.default_rng(3)
    ens = random_ensemble(rng, 12, 5, 3)
    x = rng.normal(size=(4000, 5)).astype(np.float32)
    x[rng.random(x.shape) < 0.2] = np.nan
    for t0, t1 in ((0, 12), (3, 9)):
        want = np.zeros((4000, 3), np.float32)
        CPU.predict_margin(ens, x, t0, t1, want)
        got = cupy.zeros((4000, 3), np.float32)
        gpu.predict_margin(ens, cupy.asarray(x), t0, t1, got)
        np.testing.assert_array_equal(got.get(), want)
        np.testing.assert_array_equal(gpu.predict_leaf(ens, x, t0, t1).get(), CPU.predict_leaf(ens, x, t0, t1))


def _maxima_bits() -> np.ndarray:
    """uint32 float32 bit patterns of maxima of every kind: zero, subnormals, powers of two
    and their neighbours, random values, the largest float, infinity and NaNs."""
    rng = np.random.default_rng(7)
    powers = np.ldexp(1.0, np.arange(-149, 128)).astype(np.float32)
    values = np.concatenate(
        [
            [0.0, np.float32(1.4e-45), np.float32(1e-40), np.finfo(np.float32).max, np.inf],
            powers,
            np.nextafter(powers, np.float32(np.inf)),
            np.nextafter(powers, np.float32(0)),
            rng.uniform(0, 10, 200),
            np.exp(rng.uniform(-80, 80, 200)),
        ]
    ).astype(np.float32)
    bits = values.view(np.uint32)
    return np.concatenate([bits, [0x7FC00000, 0x7F800001, 0xFFFFFFFF]]).astype(np.uint32)


def test_device_fixed_point_scales_are_the_hosts_for_every_kind_of_maximum(gpu):
    import cupy

    from dgboost._fixed_point import scales_from_bits

    bits = _maxima_bits()
    pairs = bits[: bits.size // 2 * 2].reshape(-1, 2)
    got = np.stack([gpu.fixed_point_scales(cupy.asarray(pair), 10**6).get() for pair in pairs])
    want = np.stack([scales_from_bits(pair, 10**6) for pair in pairs])
    np.testing.assert_array_equal(got, want)
    # every scale keeps its maximum within 2**30, and twice the scale would not
    finite = np.isfinite(pairs.view(np.float32)) & (pairs.view(np.float32) > 0)
    scaled = pairs.view(np.float32).astype(np.float64) * got
    assert np.all(scaled[finite] <= 2.0**30) and np.all(2 * scaled[finite] > 2.0**30)
    assert np.all(got[~finite] == 1.0)


def test_leaves_added_from_records_give_the_margins_of_the_hosts_leaf_values(gpu):
    import cupy

    rng = np.random.default_rng(3)
    n, m = 5000, 63
    p = SimpleNamespace(reg_lambda=1.0, alpha=0.3, gamma=0.0, min_child_weight=0.5, max_delta_step=0.7, eta=0.3)
    records = np.zeros((m, NODE_FIELDS), np.int64)
    kinds = rng.choice([-1, 3, NO_NODE], size=m, p=[0.5, 0.3, 0.2])
    leaves = np.flatnonzero(kinds == -1)
    cuts = np.sort(rng.choice(np.arange(1, n), size=leaves.size - 1, replace=False))
    bounds = np.concatenate([[0], cuts, [n]])
    records[:, FEATURE] = kinds
    records[:, BEGIN], records[:, END] = rng.integers(0, n, m), rng.integers(0, n, m)  # ignored off the leaves
    records[leaves, BEGIN], records[leaves, END] = bounds[:-1], bounds[1:]
    records[:, SUM_G] = rng.integers(-(2**40), 2**40, m)
    records[:, SUM_H] = rng.integers(0, 2**40, m)
    scales = np.array([2.0**12, 2.0**14])
    rows = rng.permutation(n).astype(np.int32)
    margin = rng.normal(size=(n, 2)).astype(np.float32)
    want = margin.copy()
    CPU.add_record_leaf_values(want, rows, records, scales, p, 1)
    got = cupy.asarray(margin)
    gpu.add_record_leaf_values(got, cupy.asarray(rows), cupy.asarray(records), cupy.asarray(scales), p, 1)
    np.testing.assert_array_equal(got.get(), want)
    assert not np.array_equal(want[:, 1], margin[:, 1]) and np.array_equal(want[:, 0], margin[:, 0])


def test_reads_queued_on_the_stream_give_the_arrays_as_they_were_when_queued(gpu):
    import cupy

    a = cupy.arange(12, dtype=cupy.int64).reshape(3, 4)
    b = cupy.asarray(np.array([0.5, 2.0]))
    read = gpu.read_later([a, b[::-1]])
    a += 100  # queued after the copies: not in what was read
    got_a, got_b = read.result()
    np.testing.assert_array_equal(got_a, np.arange(12).reshape(3, 4))
    np.testing.assert_array_equal(got_b, [2.0, 0.5])
    assert read.result()[0] is got_a  # read once
