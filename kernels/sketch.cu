// The quantile sketch's sample, sorted per feature on the device (dgboost/backend/_cuda_sketch.py).
//
// A feature block's non-missing sampled values become 64-bit keys, (feature in the block) << 32
// | the value's bits flipped so that unsigned order is float order, and one radix sort of the
// keys (CuPy's 1-D sort of uint64) sorts every feature of the block at once. A segmented
// comparison sort of a (features, rows) matrix, which this replaces, was a merge sort over
// (segment, value) tuples: about 16 ms a block of two 2**20-row features.
//  1. ``sketch_count_present``: thread = feature (consecutive threads read consecutive floats
//     of a row), blockIdx.y = a chunk of sampled rows; one 8-byte atomic per thread and chunk.
//     Reads the sample once (4 B an entry, through the row indices when the sample is not
//     every row).
//  2. ``sketch_keys``: thread = entry of the block, row-major (entry e is row e / n_block,
//     feature e % n_block); NaN is dropped; the kept entries of a warp take consecutive slots
//     from one counter (ballot + one atomic a warp). The slots' order depends on scheduling, the
//     sorted keys do not (equal keys are equal bits). 4 B read, 8 B written a kept entry.
//  3. ``sketch_values``: thread = sorted key; its value's bits restored (8 B read, 4 B written).
// -0.0 is stored as +0.0: the bins are the same, and the host path does the same.
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

extern "C" __global__ void sketch_values(const unsigned long long* __restrict__ keys, long long n,
                                         float* __restrict__ out) {
  const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) out[k] = from_order_bits((unsigned int)(keys[k] & 0xffffffffull));
}
