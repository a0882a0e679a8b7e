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

extern "C" __global__ void sketch_count_present(const float* __restrict__ values, const long long* __restrict__ rows,
                                                long long n_rows, long long row_stride, long long col_stride,
                                                int f0, int n_features, long long rows_per_chunk,
                                                unsigned long long* __restrict__ counts) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= n_features) return;
  const long long begin = (long long)blockIdx.y * rows_per_chunk;
  const long long end = begin + rows_per_chunk < n_rows ? begin + rows_per_chunk : n_rows;
  const long long column = (long long)(f0 + j) * col_stride;
  unsigned long long present = 0;
  for (long long i = begin; i < end; ++i) {
    present += isnan(values[sample_row(rows, i) * row_stride + column]) ? 0ull : 1ull;
  }
  if (present) atomicAdd(counts + j, present);
}

constexpr int kKeysPerThread = 8;  // _cuda_sketch.py's _KEYS_PER_THREAD

extern "C" __global__ void sketch_keys(const float* __restrict__ values, const long long* __restrict__ rows,
                                       long long n_rows, long long row_stride, long long col_stride, int f0,
                                       int n_block, unsigned long long* __restrict__ keys,
                                       unsigned long long* __restrict__ cursor) {
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
    unsigned int kept = 0u;  // bit k: entry k of this thread is present
#pragma unroll
    for (int k = 0; k < kKeysPerThread; ++k) {
      const long long e = base + (long long)k * blockDim.x + threadIdx.x;
      key[k] = 0ull;
      if (e < total) {
        const long long i = e / n_block;
        const int j = (int)(e - i * n_block);
        const float v = values[sample_row(rows, i) * row_stride + (long long)(f0 + j) * col_stride];
        if (!isnan(v)) {
          key[k] = ((unsigned long long)j << 32) | (unsigned long long)order_bits(v);
          kept |= 1u << k;
        }
      }
    }
    // the tile's slots: an inclusive scan of the counts within each warp, the warps' totals
    // scanned by thread 0, which takes the tile's run from the counter
    const unsigned int mine = (unsigned int)__popc(kept);
    unsigned int upto = mine;
    for (unsigned int d = 1; d < 32u; d <<= 1) {
      const unsigned int other = __shfl_up_sync(0xffffffffu, upto, d);
      if (lane >= d) upto += other;
    }
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
      if (kept & (1u << k)) keys[slot++] = key[k];
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
