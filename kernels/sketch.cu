// The quantile sketch on the device: the sample sorted per feature, then cut (dgboost/backend/_cuda_sketch.py).
//
// A feature block's non-missing sampled values become 64-bit keys, (feature in the block) << 32
// | the value's bits flipped so that unsigned order is float order, and one radix sort of the
// keys (CuPy's 1-D sort of uint64) sorts every feature of the block at once. A segmented
// comparison sort of a (features, rows) matrix, which this replaces, was a merge sort over
// (segment, value) tuples, several times slower (docs/performance-notes.md).
//  1. ``sketch_count_present``: thread = feature (consecutive threads read consecutive floats
//     of a row), blockIdx.y = a chunk of sampled rows; one 8-byte atomic per thread and chunk.
//     Reads the sample once (4 B an entry, through the row indices when the sample is not
//     every row).
//  2. ``sketch_keys``: a block walks tiles of kKeysPerThread * blockDim.x entries of the block,
//     row-major (entry e is row e / n_block, feature e % n_block; consecutive threads read
//     consecutive entries); NaN is dropped; the kept entries of a tile take consecutive slots
//     from one counter (a block scan + one atomic a tile: an atomic a warp on the one counter
//     had made the kernel 26 ms of a 1M x 968 sample's 58). The slots' order depends on
//     scheduling, the sorted keys do not (equal keys are equal bits). 4 B read, 8 B written a
//     kept entry.
// The cut values are then chosen on the sorted keys themselves (a feature's keys differ only in
// their low bits), the same numbers as the host's ``_cuts_from_unique`` of unit weights: a
// value's ranks in the feature are the positions where its run of equal keys starts and ends,
// found by binary search, so no per-run arrays are made (about 16 bytes a sampled value in
// all: the keys and the radix sort's second buffer).
//  3. ``sketch_distinct``: grid (feature, chunk of its keys), thread = key; run starts counted,
//     one 8-byte atomic a block. 8 B read a key.
//  4. ``sketch_cut_picks``: for features of more than max_bin distinct values, thread = one
//     of XGBoost's evenly spaced rank targets (``WQSummary::SetPrune`` on the exact summary,
//     as ``_prune_summary``): the last run whose rank sum is at most the target t, and the
//     nearer of it and the next run, which is always the run holding position t / 2 (shown
//     in the kernel): one binary search for its start (O(log m) loads; a search over
//     positions with two inner searches a probe, O(log^2 m), took 1.3 ms of a 10M x 28
//     sample's 6.2). Writes the picked run's start position.
//  5. ``sketch_cut_values``: warp = feature; a feature of at most max_bin distinct values
//     walks its runs on one lane (one binary search a run) and keeps every value but the
//     first; a larger one keeps its distinct picks in order (32 picks a step, compacted by
//     ballots), then the last run, at most max_bin - 1 values; both end with the value above
//     the top, ``top + (|top| + 1e-5)`` in float32.
// -0.0 is stored as +0.0: the bins are the same, and the host path does the same. Float64
// arithmetic is the host's, operation for operation (compiled with --fmad=false).
#include "common.cuh"

using namespace dgboost;

__device__ __forceinline__ unsigned int order_bits(float v) {
  unsigned int u = __float_as_uint(v);
  if (u == 0x80000000u) u = 0u;  // -0.0 -> +0.0
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ float from_order_bits(unsigned int k) {
  return __uint_as_float((k & 0x80000000u) ? (k ^ 0x80000000u) : ~k);
}

// Row ``i`` of the sample: ``rows[i]`` of the matrix, or ``i`` when rows is null.
__device__ __forceinline__ long long sample_row(const long long* __restrict__ rows, long long i) {
  return rows == nullptr ? i : rows[i];
}

// Whether a sampled entry takes part: its value is present and, with weights, its row's weight is
// above 0 (the host drops a zero weight: it must not place a cut; NaN fails the test too).
__device__ __forceinline__ bool counted(float v, const float* __restrict__ weights, long long row) {
  return !isnan(v) && (weights == nullptr || weights[row] > 0.0f);
}

extern "C" __global__ void sketch_count_present(const float* __restrict__ values, const long long* __restrict__ rows,
                                                const float* __restrict__ weights, long long n_rows,
                                                long long row_stride, long long col_stride, int f0, int n_features,
                                                long long rows_per_chunk, unsigned long long* __restrict__ counts) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= n_features) return;
  const long long begin = (long long)blockIdx.y * rows_per_chunk;
  const long long end = begin + rows_per_chunk < n_rows ? begin + rows_per_chunk : n_rows;
  const long long column = (long long)(f0 + j) * col_stride;
  unsigned long long present = 0;
  for (long long i = begin; i < end; ++i) {
    const long long row = sample_row(rows, i);
    present += counted(values[row * row_stride + column], weights, row) ? 1ull : 0ull;
  }
  if (present) atomicAdd(counts + j, present);
}

constexpr int kKeysPerThread = 8;  // _cuda_sketch.py's _KEYS_PER_THREAD

// With weights (not null), an entry's weight bits go to ``weight_bits`` in its key's slot.
extern "C" __global__ void sketch_keys(const float* __restrict__ values, const long long* __restrict__ rows,
                                       const float* __restrict__ weights, long long n_rows, long long row_stride,
                                       long long col_stride, int f0, int n_block, unsigned long long* __restrict__ keys,
                                       unsigned int* __restrict__ weight_bits, unsigned long long* __restrict__ cursor) {
  __shared__ unsigned int warp_first[32];  // a warp's first slot in the tile's run
  __shared__ unsigned long long tile_first;
  const long long total = n_rows * (long long)n_block;
  const long long tile = (long long)blockDim.x * kKeysPerThread;
  const unsigned int lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  const unsigned int n_warps = (blockDim.x + 31u) >> 5;
  // every thread of the block runs the same trips (the bound is the tile's first entry), so
  // that all of them reach each barrier
  for (long long base = (long long)blockIdx.x * tile; base < total; base += (long long)gridDim.x * tile) {
    unsigned long long key[kKeysPerThread];
    unsigned int bits[kKeysPerThread];
    unsigned int kept = 0u;  // bit k: entry k of this thread is present
#pragma unroll
    for (int k = 0; k < kKeysPerThread; ++k) {
      const long long e = base + (long long)k * blockDim.x + threadIdx.x;
      key[k] = 0ull;
      bits[k] = 0u;
      if (e < total) {
        const long long i = e / n_block;
        const int j = (int)(e - i * n_block);
        const long long row = sample_row(rows, i);
        const float v = values[row * row_stride + (long long)(f0 + j) * col_stride];
        if (counted(v, weights, row)) {
          key[k] = ((unsigned long long)j << 32) | (unsigned long long)order_bits(v);
          if (weights != nullptr) bits[k] = __float_as_uint(weights[row]);
          kept |= 1u << k;
        }
      }
    }
    // the tile's slots: an inclusive scan of the counts within each warp, the warps' totals
    // scanned by thread 0, which takes the tile's run from the counter
    const unsigned int mine = (unsigned int)__popc(kept);
    const unsigned int upto = warp_inclusive_scan(mine);
    if (lane == 31u) warp_first[warp] = upto;
    __syncthreads();
    if (threadIdx.x == 0) {
      unsigned int sum = 0u;
      for (unsigned int w = 0; w < n_warps; ++w) {
        const unsigned int c = warp_first[w];
        warp_first[w] = sum;
        sum += c;
      }
      tile_first = sum ? atomicAdd(cursor, (unsigned long long)sum) : 0ull;
    }
    __syncthreads();
    unsigned long long slot = tile_first + warp_first[warp] + (upto - mine);
#pragma unroll
    for (int k = 0; k < kKeysPerThread; ++k) {
      if (kept & (1u << k)) {
        if (weight_bits != nullptr) weight_bits[slot] = bits[k];
        keys[slot++] = key[k];
      }
    }
    __syncthreads();  // warp_first and tile_first are the next tile's
  }
}

__device__ __forceinline__ float key_value(unsigned long long key) {
  return from_order_bits((unsigned int)(key & 0xffffffffull));
}

// First position in [lo, hi) whose key is above ``key`` (hi when none).
__device__ __forceinline__ long long upper_pos(const unsigned long long* __restrict__ keys, long long lo,
                                               long long hi, unsigned long long key) {
  while (lo < hi) {
    const long long mid = lo + ((hi - lo) >> 1);
    if (keys[mid] > key) hi = mid; else lo = mid + 1;
  }
  return lo;
}

// First position in [lo, hi) whose key is at least ``key`` (hi when none).
__device__ __forceinline__ long long lower_pos(const unsigned long long* __restrict__ keys, long long lo,
                                               long long hi, unsigned long long key) {
  while (lo < hi) {
    const long long mid = lo + ((hi - lo) >> 1);
    if (keys[mid] >= key) hi = mid; else lo = mid + 1;
  }
  return lo;
}

extern "C" __global__ void sketch_distinct(const unsigned long long* __restrict__ keys,
                                           const long long* __restrict__ offsets, int n_features,
                                           long long keys_per_chunk, unsigned long long* __restrict__ distinct) {
  __shared__ unsigned long long block_runs;
  const int f = blockIdx.x;
  if (threadIdx.x == 0) block_runs = 0;
  __syncthreads();
  const long long s = offsets[f], e = offsets[f + 1];
  const long long begin = s + (long long)blockIdx.y * keys_per_chunk;
  const long long end = begin + keys_per_chunk < e ? begin + keys_per_chunk : e;
  unsigned long long runs = 0;
  for (long long i = begin + threadIdx.x; i < end; i += blockDim.x) {
    runs += (i == s || keys[i] != keys[i - 1]) ? 1ull : 0ull;
  }
  if (runs) atomicAdd(&block_runs, runs);
  __syncthreads();
  if (threadIdx.x == 0 && block_runs) atomicAdd(distinct + f, block_runs);
}

extern "C" __global__ void sketch_cut_picks(const unsigned long long* __restrict__ keys,
                                            const long long* __restrict__ offsets, int n_features,
                                            const unsigned long long* __restrict__ distinct, int max_bin,
                                            long long* __restrict__ picks) {
  const int f = blockIdx.x;
  const int k = blockIdx.y * blockDim.x + threadIdx.x + 1;  // rank targets 1 .. max_bin - 1
  if (k >= max_bin || distinct[f] <= (unsigned long long)max_bin) return;
  const long long s = offsets[f], e = offsets[f + 1];
  // runs at positions p_0 = 0 < p_1 < ... < p_D = m: a run's rmin is its start, rmax its end
  const long long p1 = upper_pos(keys, s, e, keys[s]) - s;         // rmax of the first run
  const long long p_last = lower_pos(keys, s, e, keys[e - 1]) - s;  // rmin of the last run
  const double begin = (double)p1;
  const double span = (double)(p_last - p1);
  const double dx2 = 2.0 * ((double)k * span / (double)max_bin + begin);
  // the rank sums (rmin + rmax) are integers: sum <= dx2 is sum <= floor(dx2), and
  // dx2 < 2 * p is floor(dx2) < 2 * p
  const long long t = (long long)floor(dx2);
  // XGBoost takes the last run whose rank sum is at most t (run 0 when none is), then the
  // nearer of it and the next run: this run when t < 2 * its end, the next one otherwise
  // (never past the last run). That is the start of the run holding position q = t / 2.
  // The run R holding q has a start a <= q and an end b >= q + 1, so 2b > t: if R's sum is
  // at most t, R is taken (a later run starts past q and ends past that: its sum is at least
  // 2q + 3 > t) and a is picked. If not, the run before R is taken (both its ends are at
  // most a <= q, one below: its sum is below 2q <= t), and as 2a <= t, the next run's start,
  // a, is picked; R = run 0 when no run qualifies, whose start 0 is picked as well.
  // Since dx2 < 2 * p_last (k < max_bin), q lies before the last run.
  const long long q = t / 2;
  picks[(long long)f * max_bin + k] = lower_pos(keys, s, s + q + 1, keys[s + q]) - s;
}

extern "C" __global__ void sketch_cut_values(const unsigned long long* __restrict__ keys,
                                             const long long* __restrict__ offsets, int n_features,
                                             const unsigned long long* __restrict__ distinct, int max_bin,
                                             const long long* __restrict__ picks, float* __restrict__ out,
                                             int* __restrict__ sizes) {
  // a warp a feature: the warp's lanes leave together
  const int f = (int)(((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5);
  const unsigned int lane = threadIdx.x & 31u;
  if (f >= n_features) return;
  const long long s = offsets[f], e = offsets[f + 1];
  float* o = out + (long long)f * max_bin;
  if (e == s) {  // no value: one cut, as the host's empty sample
    if (lane == 0u) {
      o[0] = 1e-5f;
      sizes[f] = 1;
    }
    return;
  }
  int c = 0;
  if (distinct[f] <= (unsigned long long)max_bin) {
    if (lane != 0u) return;
    long long q = upper_pos(keys, s, e, keys[s]);  // every distinct value but the first
    while (q < e) {
      o[c++] = key_value(keys[q]);
      q = upper_pos(keys, q, e, keys[q]);
    }
  } else {
    // the host keeps pick k (1 .. max_bin - 1) when it differs from the last one kept, which
    // is always pick k - 1 (run 0 before pick 1): a pick equal to its predecessor was not
    // kept only because that one was
    const long long* p = picks + (long long)f * max_bin;
    for (int k0 = 1; k0 < max_bin; k0 += 32) {
      const int k = k0 + (int)lane;
      const long long pk = k < max_bin ? p[k] : 0;
      const long long before = k == 1 || k >= max_bin ? 0 : p[k - 1];
      const unsigned int keep = __ballot_sync(0xffffffffu, k < max_bin && pk != before);
      if ((keep >> lane) & 1u) o[c + __popc(keep & ((1u << lane) - 1u))] = key_value(keys[s + pk]);
      c += __popc(keep);
    }
    if (lane != 0u) return;
    // the summary's last entry, the last run's start: every pick lies before it
    const long long p_last = lower_pos(keys, s, e, keys[e - 1]) - s;
    if (c < max_bin - 1) o[c++] = key_value(keys[s + p_last]);
  }
  const float top = key_value(keys[e - 1]);
  o[c++] = top + (fabsf(top) + 1e-5f);
  sizes[f] = c;
}

// ---------------------------------------------------------------------------------------------
// Weighted samples (``_cuda_sketch._weighted_block``): the host's ``weighted_cut_values`` bit for
// bit. The host sums each distinct value's float32 weights in float64, in ascending weight order,
// with ``np.add.reduceat`` (the first weight, plus NumPy's pairwise sum of the rest), or, when a
// feature's weights are all equal, multiplies the count by the weight; ``np.cumsum`` (a
// sequential scan) then gives each value's rank bounds, and ``_prune_summary`` picks the values.
// The device orders a block's entries by (feature, value, weight): the keys are argsorted and
// gathered with their weights (``sketch_gather_sorted``), the runs of equal keys found
// (``sketch_run_flags``, then the backend's ``true_indices``), and each entry re-keyed as
// (its run, its weight's bits), which a second radix sort orders (``sketch_run_keys``): a
// float32 weight above 0 orders as its bits. Float64 arithmetic is the host's, operation for
// operation (--fmad=false; the emulator checks the bits on the host).

constexpr long long kPairwiseBlock = 128;  // NumPy's PW_BLOCKSIZE
constexpr long long kBigRun = 4096;        // runs summed by a block, not a thread
constexpr int kBigRunLevels = 8;           // a big run's pairwise tree split over 2**8 threads

__device__ __forceinline__ double run_weight(const unsigned long long* __restrict__ run_keys, long long i) {
  return (double)__uint_as_float((unsigned int)(run_keys[i] & 0xffffffffull));
}

// NumPy's ``pairwise_sum`` of at most kPairwiseBlock values (below 8: one by one from -0.0; else
// eight running sums, combined as a tree, then the rest one by one).
__device__ double pairwise_leaf(const unsigned long long* __restrict__ run_keys, long long n) {
  if (n < 8) {
    double res = -0.0;
    for (long long i = 0; i < n; ++i) res += run_weight(run_keys, i);
    return res;
  }
  double r[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) r[k] = run_weight(run_keys, k);
  long long i = 8;
  for (; i < n - (n % 8); i += 8) {
#pragma unroll
    for (int k = 0; k < 8; ++k) r[k] += run_weight(run_keys, i + k);
  }
  double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
  for (; i < n; ++i) res += run_weight(run_keys, i);
  return res;
}

// NumPy's split of a pairwise sum of n > kPairwiseBlock values: the first half, rounded down to
// a multiple of 8, then the rest.
__device__ __forceinline__ long long pairwise_half(long long n) {
  const long long h = n / 2;
  return h - h % 8;
}

constexpr int kPairwiseDepth = 40;  // splits of at most 2**63 values down to 128: fewer than 57

// NumPy's ``pairwise_sum`` of n values, its recursion as a loop over a stack of the nodes on the
// path to the current one (the left sum of each node whose right part is being summed): a node
// of at most kPairwiseBlock values, or one ``max_depth`` splits down, is a leaf, whose sum is
// ``leaf(offset, length, depth, path)`` (path: the left (0) / right (1) choices from the top,
// the first one highest).
template <typename Leaf>
__device__ double pairwise_tree(long long n, int max_depth, Leaf leaf) {
  long long off[kPairwiseDepth], len[kPairwiseDepth];
  unsigned long long path[kPairwiseDepth];
  double left[kPairwiseDepth];
  int d = 0;
  off[0] = 0;
  len[0] = n;
  path[0] = 0ull;
  for (;;) {
    while (d < max_depth && len[d] > kPairwiseBlock) {  // down the left side
      off[d + 1] = off[d];
      len[d + 1] = pairwise_half(len[d]);
      path[d + 1] = path[d] << 1;
      ++d;
    }
    double v = leaf(off[d], len[d], d, path[d]);
    while (d > 0 && (path[d] & 1ull)) {  // a right part completes its parent: left + right
      --d;
      v = left[d] + v;
    }
    if (d == 0) return v;
    // a left part: kept by its parent, whose right part comes next
    left[d - 1] = v;
    off[d] = off[d - 1] + len[d];
    len[d] = len[d - 1] - len[d];
    path[d] |= 1ull;
  }
}

__device__ double pairwise_sum(const unsigned long long* __restrict__ run_keys, long long n) {
  return pairwise_tree(n, kPairwiseDepth - 1, [=](long long o, long long m, int, unsigned long long) {
    return pairwise_leaf(run_keys + o, m);
  });
}

// Per feature of the block: the first run of its values (run_ptr[f], and run_ptr[n] = runs),
// a binary search of its first position in the runs' starts.
extern "C" __global__ void sketch_run_ptr(const long long* __restrict__ starts, long long n_runs,
                                          const long long* __restrict__ offsets, int n_features,
                                          long long* __restrict__ run_ptr) {
  const int f = blockIdx.x * blockDim.x + threadIdx.x;
  if (f > n_features) return;
  const long long p = offsets[f];
  long long lo = 0, hi = n_runs;
  while (lo < hi) {
    const long long mid = lo + ((hi - lo) >> 1);
    if (starts[mid] >= p) hi = mid; else lo = mid + 1;
  }
  run_ptr[f] = lo;
}

// The sorted keys and their weights: entry i of the output is entry order[i] of the input.
extern "C" __global__ void sketch_gather_sorted(const unsigned long long* __restrict__ keys,
                                                const unsigned int* __restrict__ weight_bits,
                                                const long long* __restrict__ order, long long n,
                                                unsigned long long* __restrict__ sorted_keys,
                                                unsigned int* __restrict__ sorted_bits) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const long long o = order[i];
    sorted_keys[i] = keys[o];
    sorted_bits[i] = weight_bits[o];
  }
}

// flags[i]: position i starts a run of equal keys (a feature's first key differs from the last
// key of the feature before: the feature is in the key).
extern "C" __global__ void sketch_run_flags(const unsigned long long* __restrict__ keys, long long n,
                                            bool* __restrict__ flags) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    flags[i] = i == 0 || keys[i] != keys[i - 1];
  }
}

// The exponent of a float32 weight's lowest set bit (w = k * 2**e, k odd); w > 0.
__device__ __forceinline__ int lowest_bit_exponent(unsigned int b) {
  const unsigned int e = b >> 23, m = b & 0x7fffffu;
  return e == 0u ? -149 + (__ffs((int)m) - 1) : (int)e - 150 + (__ffs((int)(m | 0x800000u)) - 1);
}

// Per feature of the block: its smallest and largest weight bits (its weights are all equal when
// they match), and the smallest exponent of its weights' lowest set bits (``sketch_rank_prefix``'s
// test of exact sums), a block a (feature, chunk of its entries): one atomic per output and
// block. The minima are kept flipped (~), so that all are maxima from zeroed arrays.
extern "C" __global__ void sketch_weight_range(const unsigned int* __restrict__ weight_bits,
                                               const long long* __restrict__ offsets, long long per_chunk,
                                               unsigned int* __restrict__ low_flipped,
                                               unsigned int* __restrict__ high,
                                               unsigned int* __restrict__ low_bit_flipped) {
  __shared__ unsigned int block_low_flipped, block_high, block_low_bit_flipped;
  const int f = blockIdx.x;
  if (threadIdx.x == 0) {
    block_low_flipped = 0u;
    block_high = 0u;
    block_low_bit_flipped = 0u;
  }
  __syncthreads();
  const long long s = offsets[f], e = offsets[f + 1];
  const long long begin = s + (long long)blockIdx.y * per_chunk;
  const long long end = begin + per_chunk < e ? begin + per_chunk : e;
  unsigned int lo = 0u, hi = 0u, low_bit = 0u;
  for (long long i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const unsigned int b = weight_bits[i];
    const unsigned int bit = ~(unsigned int)(lowest_bit_exponent(b) + 256);
    lo = ~b > lo ? ~b : lo;
    hi = b > hi ? b : hi;
    low_bit = bit > low_bit ? bit : low_bit;
  }
  if (begin + threadIdx.x < end) {
    atomicMax(&block_low_flipped, lo);
    atomicMax(&block_high, hi);
    atomicMax(&block_low_bit_flipped, low_bit);
  }
  __syncthreads();
  if (threadIdx.x == 0 && begin < end) {
    atomicMax(low_flipped + f, block_low_flipped);
    atomicMax(high + f, block_high);
    atomicMax(low_bit_flipped + f, block_low_bit_flipped);
  }
}

// Entry i re-keyed as (its run) << 32 | its weight's bits: sorted, each run's weights ascend in
// place (runs keep their positions). The run is found by a binary search of the runs' starts.
extern "C" __global__ void sketch_run_keys(const long long* __restrict__ starts, long long n_runs,
                                           const unsigned int* __restrict__ weight_bits, long long n,
                                           unsigned long long* __restrict__ run_keys) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    long long lo = 0, hi = n_runs;  // the last run starting at or before i
    while (hi - lo > 1) {
      const long long mid = lo + ((hi - lo) >> 1);
      if (starts[mid] <= i) lo = mid; else hi = mid;
    }
    run_keys[i] = ((unsigned long long)lo << 32) | (unsigned long long)weight_bits[i];
  }
}

// The feature (of the block) of run r: the key's high half.
__device__ __forceinline__ int run_feature(const unsigned long long* __restrict__ keys,
                                           const long long* __restrict__ starts, long long r) {
  return (int)(keys[starts[r]] >> 32);
}

// Each run's summed weight, for features of more than max_bin distinct values (the others need
// none): the count times the weight when the feature's weights are all equal, else the first
// weight plus the pairwise sum of the rest, a thread a run; runs of more than kBigRun entries
// are listed for ``sketch_big_run_sums``.
extern "C" __global__ void sketch_run_sums(const unsigned long long* __restrict__ keys,
                                           const unsigned long long* __restrict__ run_keys,
                                           const long long* __restrict__ starts, long long n_runs, long long n,
                                           const long long* __restrict__ run_ptr, int max_bin,
                                           const unsigned int* __restrict__ low_flipped,
                                           const unsigned int* __restrict__ high, double* __restrict__ sums,
                                           long long* __restrict__ big_runs, unsigned long long* __restrict__ n_big) {
  for (long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x; r < n_runs;
       r += (long long)gridDim.x * blockDim.x) {
    const int f = run_feature(keys, starts, r);
    if (run_ptr[f + 1] - run_ptr[f] <= (long long)max_bin) continue;
    const long long s = starts[r], e = r + 1 < n_runs ? starts[r + 1] : n;
    if (~low_flipped[f] == high[f]) {
      sums[r] = (double)(e - s) * (double)__uint_as_float(high[f]);
    } else if (e - s > kBigRun) {
      big_runs[atomicAdd(n_big, 1ull)] = r;
    } else {
      sums[r] = run_weight(run_keys, s) + pairwise_sum(run_keys + s + 1, e - s - 1);
    }
  }
}

// A listed big run's sum, a block of 2**kBigRunLevels threads: the pairwise tree's nodes
// kBigRunLevels levels down (or the leaves above them) summed by one thread each, then
// combined by thread 0 in the tree's shape.
extern "C" __global__ void __launch_bounds__(256)
    sketch_big_run_sums(const unsigned long long* __restrict__ run_keys, const long long* __restrict__ starts,
                        long long n_runs, long long n, const long long* __restrict__ big_runs,
                        const unsigned long long* __restrict__ n_big, double* __restrict__ sums) {
  __shared__ double part[1 << kBigRunLevels];
  if ((unsigned long long)blockIdx.x >= *n_big) return;
  const long long r = big_runs[blockIdx.x];
  const long long s = starts[r], e = r + 1 < n_runs ? starts[r + 1] : n;
  const unsigned long long* rest = run_keys + s + 1;
  // thread t's node: the bits of t, first to last, choose the left (0) or right (1) part at
  // each level; a leaf above the last level is summed by the thread whose remaining bits are 0
  long long off = 0, len = e - s - 1;
  bool mine = true;
  for (int level = 0; level < kBigRunLevels; ++level) {
    const bool bit = (threadIdx.x >> (kBigRunLevels - 1 - level)) & 1u;
    if (len <= kPairwiseBlock) {
      mine = mine && !bit;
      continue;
    }
    const long long h = pairwise_half(len);
    if (bit) {
      off += h;
      len -= h;
    } else {
      len = h;
    }
  }
  part[threadIdx.x] = mine ? pairwise_sum(rest + off, len) : 0.0;
  __syncthreads();
  if (threadIdx.x != 0) return;
  // the top kBigRunLevels levels again, as pairwise_sum walks them: a node's sum is the part of
  // the thread whose bits are its path (then zeros)
  const double total = pairwise_tree(e - s - 1, kBigRunLevels, [&](long long, long long, int depth,
                                                                    unsigned long long node) {
    return part[node << (kBigRunLevels - depth)];
  });
  sums[r] = run_weight(run_keys, s) + total;
}

// ``np.cumsum`` of each feature's run sums (a feature of more than max_bin distinct values): each
// run's upper rank bound rmax.
// When every partial sum of the feature's weights is exact in float64, so is every addition, in
// any order, and the sums are scanned in parallel: the weights are multiples of 2**L (L the
// smallest exponent of their lowest set bits), and so is any sum of them; below 2**(L + 53) such
// a sum is a float64 number. The test is count * largest weight <= 2**(L + 52) (a bit to spare
// for the product's rounding). Typical weights pass it: 10**6 weights of 0.2 to 3 need 48 bits.
// Otherwise the additions are sequential, as the host's, one chain a feature.
constexpr int kPrefixThreads = 256;  // _cuda_sketch.py's _PREFIX_THREADS
constexpr int kPrefixPerThread = 8;  // consecutive sums a thread of the parallel scan adds
constexpr long long kPrefixChunk = (long long)kPrefixThreads * kPrefixPerThread;  // _PREFIX_CHUNK
constexpr int kChainStage = 256;     // sums staged a step of the sequential scan

__device__ __forceinline__ bool sums_exact(int f, const long long* __restrict__ offsets,
                                           const unsigned int* __restrict__ high,
                                           const unsigned int* __restrict__ low_bit_flipped) {
  const int low_bit = (int)~low_bit_flipped[f] - 256;
  const double bound = (double)(offsets[f + 1] - offsets[f]) * (double)__uint_as_float(high[f]);
  return bound <= ldexp(1.0, low_bit + 52);
}

// The sum of each thread's value over the block (any order: the values' sums are exact).
__device__ double block_sum(double v, double* __restrict__ warp_part) {
  for (unsigned int d = 16; d > 0u; d >>= 1) v += __shfl_xor_sync(0xffffffffu, v, d);
  if ((threadIdx.x & 31u) == 0u) warp_part[threadIdx.x >> 5] = v;
  __syncthreads();
  double total = 0.0;
  for (int w = 0; w < kPrefixThreads / 32; ++w) total += warp_part[w];
  __syncthreads();  // warp_part is free again
  return total;
}

// The parallel scan's first pass: each chunk's total, a block a (feature, chunk) of a feature
// whose sums are exact.
extern "C" __global__ void __launch_bounds__(kPrefixThreads)
    sketch_chunk_totals(const double* __restrict__ sums, const long long* __restrict__ run_ptr,
                        const long long* __restrict__ offsets, const unsigned int* __restrict__ high,
                        const unsigned int* __restrict__ low_bit_flipped, int max_bin, int max_chunks,
                        double* __restrict__ chunk_totals) {
  __shared__ double warp_part[kPrefixThreads / 32];
  const int f = blockIdx.x;
  const long long a = run_ptr[f], b = run_ptr[f + 1];
  if (b - a <= (long long)max_bin || !sums_exact(f, offsets, high, low_bit_flipped)) return;
  for (long long c = blockIdx.y; a + c * kPrefixChunk < b; c += gridDim.y) {
    const long long c0 = a + c * kPrefixChunk;
    double mine = 0.0;
    for (long long i = c0 + threadIdx.x; i < c0 + kPrefixChunk && i < b; i += kPrefixThreads) mine += sums[i];
    const double total = block_sum(mine, warp_part);
    if (threadIdx.x == 0) chunk_totals[(long long)f * max_chunks + c] = total;
  }
}

// The rank bounds, a block a (feature, chunk): a feature whose sums are exact adds its earlier
// chunks' totals and scans its chunk; otherwise block (f, 0) runs the feature's chain: warp 0
// stages kChainStage sums at a time in shared memory (loading the next ones while lane 0 adds),
// and lane 0 adds them eight at a time from registers (a thread loading each sum inside the chain
// took 0.7 s for 28 features of 10**6 values).
extern "C" __global__ void __launch_bounds__(kPrefixThreads)
    sketch_rank_prefix(const double* __restrict__ sums, const long long* __restrict__ run_ptr,
                       const long long* __restrict__ offsets, const unsigned int* __restrict__ high,
                       const unsigned int* __restrict__ low_bit_flipped, int max_bin, int max_chunks,
                       const double* __restrict__ chunk_totals, double* __restrict__ rmax) {
  __shared__ double stage[kChainStage];
  __shared__ double warp_part[kPrefixThreads / 32];
  const int f = blockIdx.x;
  const unsigned int lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  const long long a = run_ptr[f], b = run_ptr[f + 1];
  if (b - a <= (long long)max_bin) return;  // the block leaves together
  if (sums_exact(f, offsets, high, low_bit_flipped)) {
    for (long long c = blockIdx.y; a + c * kPrefixChunk < b; c += gridDim.y) {
      double earlier = 0.0;
      for (long long e = threadIdx.x; e < c; e += kPrefixThreads) earlier += chunk_totals[(long long)f * max_chunks + e];
      const double carry = block_sum(earlier, warp_part);
      const long long first = a + c * kPrefixChunk + (long long)threadIdx.x * kPrefixPerThread;
      double run[kPrefixPerThread];
      double mine = 0.0;
#pragma unroll
      for (int k = 0; k < kPrefixPerThread; ++k) {
        mine += first + k < b ? sums[first + k] : 0.0;
        run[k] = mine;
      }
      const double upto = warp_inclusive_scan(mine);  // the threads' totals in the warp
      if (lane == 31u) warp_part[warp] = upto;
      __syncthreads();
      double before = carry + (upto - mine);
      for (unsigned int w = 0; w < warp; ++w) before += warp_part[w];
#pragma unroll
      for (int k = 0; k < kPrefixPerThread; ++k) {
        if (first + k < b) rmax[first + k] = before + run[k];
      }
      __syncthreads();  // warp_part is the next chunk's
    }
    return;
  }
  if (blockIdx.y != 0u || warp != 0u) return;
  constexpr int kPerLane = kChainStage / 32;
  double next[kPerLane];
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const long long i = a + k * 32 + lane;
    next[k] = i < b ? sums[i] : 0.0;
  }
  double total = -0.0;  // -0.0 + x is x: the first bound is the first sum, as np.cumsum's
  for (long long c0 = a; c0 < b; c0 += kChainStage) {
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) stage[k * 32 + lane] = next[k];
    __syncwarp();
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {  // the next sums' loads, in flight during the chain
      const long long i = c0 + kChainStage + k * 32 + lane;
      next[k] = i < b ? sums[i] : 0.0;
    }
    if (lane == 0u) {
      const int count = b - c0 < kChainStage ? (int)(b - c0) : kChainStage;
      int i = 0;
      for (; i + 8 <= count; i += 8) {  // eight loads issued before their chain of additions
        double v[8];
#pragma unroll
        for (int k = 0; k < 8; ++k) v[k] = stage[i + k];
#pragma unroll
        for (int k = 0; k < 8; ++k) {
          total = total + v[k];
          v[k] = total;
        }
#pragma unroll
        for (int k = 0; k < 8; ++k) stage[i + k] = v[k];
      }
      for (; i < count; ++i) {
        total = total + stage[i];
        stage[i] = total;
      }
    }
    __syncwarp();
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const long long i = c0 + k * 32 + lane;
      if (i < b) rmax[i] = stage[k * 32 + lane];
    }
    __syncwarp();
  }
}

// ``_prune_summary``'s pick for rank target k (1 .. max_bin - 1) of a feature of more than
// max_bin distinct values: the run (index in the feature) kept, or -1 past the last usable
// target. rmin = rmax - w, as the host computes it.
extern "C" __global__ void sketch_weighted_picks(const double* __restrict__ sums, const double* __restrict__ rmax,
                                                 const long long* __restrict__ run_ptr, int n_features,
                                                 int max_bin, long long* __restrict__ picks) {
  const int f = blockIdx.x;
  const int k = blockIdx.y * blockDim.x + threadIdx.x + 1;
  const long long a = run_ptr[f], m = run_ptr[f + 1] - a;
  if (k >= max_bin || m <= (long long)max_bin) return;
  const double* w = sums + a;
  const double* hi = rmax + a;
  const double begin = hi[0];
  const double span = (hi[m - 1] - w[m - 1]) - hi[0];
  const double dx2 = 2.0 * ((double)k * span / (double)max_bin + begin);
  // the first i (0 .. m - 2) with dx2 < rmax[i + 1] + rmin[i + 1]: the sums ascend
  long long lo = 0, top = m - 1;
  while (lo < top) {
    const long long mid = lo + ((top - lo) >> 1);
    if (hi[mid + 1] + (hi[mid + 1] - w[mid + 1]) <= dx2) lo = mid + 1; else top = mid;
  }
  long long pick = -1;
  if (lo < m - 1) {
    const bool take_left = dx2 < ((hi[lo] - w[lo]) + w[lo]) + (hi[lo + 1] - w[lo + 1]);
    pick = take_left ? lo : lo + 1;
  }
  picks[(long long)f * max_bin + k] = pick;
}

// The value of run r (of the block).
__device__ __forceinline__ float run_value(const unsigned long long* __restrict__ keys,
                                           const long long* __restrict__ starts, long long r) {
  return key_value(keys[starts[r]]);
}

// A feature's cut values, a warp a feature, as ``_cuts_from_unique``: every distinct value but
// the first when there are at most max_bin; else the distinct picks in order (ballots), then the
// last run's value unless it was picked or max_bin - 1 values are there; then the value above
// the top.
extern "C" __global__ void sketch_weighted_cut_values(const unsigned long long* __restrict__ keys,
                                                      const long long* __restrict__ starts,
                                                      const long long* __restrict__ run_ptr, int n_features,
                                                      int max_bin, const long long* __restrict__ picks,
                                                      float* __restrict__ out, int* __restrict__ sizes) {
  const int f = (int)(((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5);
  const unsigned int lane = threadIdx.x & 31u;
  if (f >= n_features) return;
  const long long a = run_ptr[f], m = run_ptr[f + 1] - a;
  float* o = out + (long long)f * max_bin;
  if (m == 0) {
    if (lane == 0u) {
      o[0] = 1e-5f;
      sizes[f] = 1;
    }
    return;
  }
  int c = 0;
  if (m <= (long long)max_bin) {
    for (long long r = 1 + lane; r < m; r += 32) o[r - 1] = run_value(keys, starts, a + r);
    c = (int)(m - 1);
  } else {
    const long long* p = picks + (long long)f * max_bin;
    long long last = 0;  // the last run kept: run 0 before the first pick
    for (int k0 = 1; k0 < max_bin; k0 += 32) {
      const int k = k0 + (int)lane;
      const long long pk = k < max_bin ? p[k] : -1;
      const long long before = k == 1 ? 0 : (k < max_bin ? p[k - 1] : -1);
      const unsigned int keep = __ballot_sync(0xffffffffu, pk >= 0 && pk != before);
      if ((keep >> lane) & 1u) o[c + __popc(keep & ((1u << lane) - 1u))] = run_value(keys, starts, a + pk);
      if (keep) last = __shfl_sync(0xffffffffu, pk, 31 - __clz((int)keep));
      c += __popc(keep);
    }
    if (lane == 0u && c < max_bin - 1 && last != m - 1) o[c] = run_value(keys, starts, a + m - 1);
    if (c < max_bin - 1 && last != m - 1) ++c;
  }
  if (lane != 0u) return;
  const float top = run_value(keys, starts, a + m - 1);
  o[c++] = top + (fabsf(top) + 1e-5f);
  sizes[f] = c;
}
