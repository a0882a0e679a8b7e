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
//  2. ``sketch_keys``: thread = entry of the block, row-major (entry e is row e / n_block,
//     feature e % n_block); NaN is dropped; the kept entries of a warp take consecutive slots
//     from one counter (ballot + one atomic a warp). The slots' order depends on scheduling, the
//     sorted keys do not (equal keys are equal bits). 4 B read, 8 B written a kept entry.
// The cut values are then chosen on the sorted keys themselves (a feature's keys differ only in
// their low bits), the same numbers as the host's ``_cuts_from_unique`` of unit weights: a
// value's ranks in the feature are the positions where its run of equal keys starts and ends,
// found by binary search, so no per-run arrays are made (about 16 bytes a sampled value in
// all: the keys and the radix sort's second buffer).
//  3. ``sketch_distinct``: grid (feature, chunk of its keys), thread = key; run starts counted,
//     one 8-byte atomic a block. 8 B read a key.
//  4. ``sketch_cut_picks``: for features of more than max_bin distinct values, thread = one
//     of XGBoost's evenly spaced rank targets (``WQSummary::SetPrune`` on the exact summary,
//     as ``_prune_summary``): the last run whose rank sum is at most the target, by a binary
//     search over positions (two inner searches a probe: O(log^2 m) loads), and the nearer of
//     it and the next run. Writes the picked run's start position (-1: past the last run).
//  5. ``sketch_cut_values``: thread = feature; a feature of at most max_bin distinct values
//     walks its runs (one binary search a run) and keeps every value but the first; a larger one
//     keeps its distinct picks in order, then the last run, at most max_bin - 1 values; both
//     end with the value above the top, ``top + (|top| + 1e-5)`` in float32.
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

extern "C" __global__ void sketch_keys(const float* __restrict__ values, const long long* __restrict__ rows,
                                       long long n_rows, long long row_stride, long long col_stride, int f0,
                                       int n_block, unsigned long long* __restrict__ keys,
                                       unsigned long long* __restrict__ cursor) {
  const long long total = n_rows * (long long)n_block;
  const long long stride = (long long)gridDim.x * blockDim.x;
  const unsigned int lane = threadIdx.x & 31u;
  // every lane runs the same number of trips (the bound is the block's first entry), so the
  // whole warp takes part in each ballot
  for (long long base = (long long)blockIdx.x * blockDim.x; base < total; base += stride) {
    const long long e = base + threadIdx.x;
    float v = __int_as_float(0x7fc00000);  // NaN: past the end counts as missing
    int j = 0;
    if (e < total) {
      const long long i = e / n_block;
      j = (int)(e - i * n_block);
      v = values[sample_row(rows, i) * row_stride + (long long)(f0 + j) * col_stride];
    }
    const bool keep = !isnan(v);
    const unsigned int kept = __ballot_sync(0xffffffffu, keep);
    if (kept == 0u) continue;
    const int leader = __ffs(kept) - 1;
    unsigned long long slot = 0;
    if ((int)lane == leader) slot = atomicAdd(cursor, (unsigned long long)__popc(kept));
    slot = __shfl_sync(0xffffffffu, slot, leader);
    if (keep) {
      keys[slot + __popc(kept & ((1u << lane) - 1u))] =
          ((unsigned long long)j << 32) | (unsigned long long)order_bits(v);
    }
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
  const long long s = offsets[f], e = offsets[f + 1], m = e - s;
  // runs at positions p_0 = 0 < p_1 < ... < p_D = m: a run's rmin is its start, rmax its end
  const long long p1 = upper_pos(keys, s, e, keys[s]) - s;         // rmax of the first run
  const long long p_last = lower_pos(keys, s, e, keys[e - 1]) - s;  // rmin of the last run
  const double begin = (double)p1;
  const double span = (double)(p_last - p1);
  const double dx2 = 2.0 * ((double)k * span / (double)max_bin + begin);
  // the rank sums (rmin + rmax) are integers: sum <= dx2 is sum <= floor(dx2), and
  // dx2 < 2 * p is floor(dx2) < 2 * p
  const long long t = (long long)floor(dx2);
  // the last position whose run's rank sum is at most t (-1: none); the sums grow with the run
  long long lo = -1, hi = m;
  long long a = 0, b = p1;  // run 0 when no later run qualifies
  while (hi - lo > 1) {
    const long long mid = lo + ((hi - lo) >> 1);
    const unsigned long long key = keys[s + mid];
    const long long run_start = lower_pos(keys, s, s + mid + 1, key) - s;
    const long long run_end = upper_pos(keys, s + mid, e, key) - s;
    if (run_start + run_end <= t) {
      lo = mid;
      a = run_start;
      b = run_end;
    } else {
      hi = mid;
    }
  }
  if (lo < 0) {
    a = 0;
    b = p1;
  }
  // the run found must not be the last (the host drops such targets), then the nearer
  // neighbour: this run when dx2 < rmax(this) + rmin(next) = 2 * its end
  picks[(long long)f * max_bin + k] = b >= m ? -1 : (t < 2 * b ? a : b);
}

extern "C" __global__ void sketch_cut_values(const unsigned long long* __restrict__ keys,
                                             const long long* __restrict__ offsets, int n_features,
                                             const unsigned long long* __restrict__ distinct, int max_bin,
                                             const long long* __restrict__ picks, float* __restrict__ out,
                                             int* __restrict__ sizes) {
  const int f = blockIdx.x * blockDim.x + threadIdx.x;
  if (f >= n_features) return;
  const long long s = offsets[f], e = offsets[f + 1];
  float* o = out + (long long)f * max_bin;
  if (e == s) {  // no value: one cut, as the host's empty sample
    o[0] = 1e-5f;
    sizes[f] = 1;
    return;
  }
  int c = 0;
  if (distinct[f] <= (unsigned long long)max_bin) {
    long long q = upper_pos(keys, s, e, keys[s]);  // every distinct value but the first
    while (q < e) {
      o[c++] = key_value(keys[q]);
      q = upper_pos(keys, q, e, keys[q]);
    }
  } else {
    const long long* p = picks + (long long)f * max_bin;
    long long kept = 0;  // run 0 is the summary's first entry, never a cut
    for (int k = 1; k < max_bin && p[k] >= 0; ++k) {
      if (p[k] != kept) {
        if (c < max_bin - 1) o[c++] = key_value(keys[s + p[k]]);
        kept = p[k];
      }
    }
    const long long p_last = lower_pos(keys, s, e, keys[e - 1]) - s;  // the summary's last entry
    if (p_last != kept && c < max_bin - 1) o[c++] = key_value(keys[s + p_last]);
  }
  const float top = key_value(keys[e - 1]);
  o[c++] = top + (fabsf(top) + 1e-5f);
  sizes[f] = c;
}
