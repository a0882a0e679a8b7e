// Per-node gradient histograms from the ELLPACK matrix, in int64 (exact, order-free).
//
// Thread mapping: grid (task, feature group). A task is a slice of one node's row segment
// (``rows[begin:end]``); a feature group is a run of consecutive features whose bins fit in
// shared memory. Each block zeroes a private shared-memory histogram of its group (2 x int64
// per bin), walks its rows with every thread owning one feature of the group and one row
// lane (rows advance by blockDim / group width), adds the row's quantised pair with
// shared-memory integer atomics, then flushes the non-zero bins to the node's global
// histogram with global integer atomics (64-bit adds done as one or two 32-bit atomics, see
// common.cuh). Integer sums make the result identical for any
// task split, block order or number of workers. When a single feature has more bins than
// shared memory holds, ``use_shared == 0`` adds straight into global memory (same result).
//
// Memory traffic per (row, feature): one ELLPACK symbol (bits/8 bytes, 8-byte load), plus per
// row the row index (4 B) and the gradient pair (8 B), shared by the group's threads through
// L1. Rows with a zero pair (left out by subsampling) and missing entries add nothing.
#include "common.cuh"

using namespace dgboost;

// HIST_MODE is for measurements only (benchmarks/micro_gpu_stages.py): 0 = the real kernel,
// 1 = the same loads with no atomics (the memory floor), 2 = low-word atomics only.
#ifndef HIST_MODE
#define HIST_MODE 0
#endif


__device__ __forceinline__ void add_pair(long long* cell, int2 gp, long long& sink) {
#if HIST_MODE == 0
  atomic_add_i32_to_i64(cell, gp.x);
  atomic_add_i32_to_i64(cell + 1, gp.y);
#elif HIST_MODE == 1
  sink += gp.x + reinterpret_cast<long long>(cell);
#else
  atomicAdd(reinterpret_cast<unsigned int*>(cell), static_cast<unsigned int>(gp.x));
  atomicAdd(reinterpret_cast<unsigned int*>(cell + 1), static_cast<unsigned int>(gp.y));
#endif
}

extern "C" __global__ void build_histograms(
    const unsigned int* __restrict__ packed, int bits, int n_features, unsigned missing,
    const int* __restrict__ rows, const int2* __restrict__ gpair,
    const long long* __restrict__ task_node, const long long* __restrict__ task_begin,
    const long long* __restrict__ task_end, const int* __restrict__ cut_ptrs,
    const int* __restrict__ group_begin, const int* __restrict__ group_end, long long total_bins,
    int use_shared, long long* __restrict__ hist) {
  extern __shared__ long long shared_hist[];
  const int fb = group_begin[blockIdx.y];
  const int fe = group_end[blockIdx.y];
  const int nf = fe - fb;
  const int bin0 = cut_ptrs[fb];
  const int n_bins = cut_ptrs[fe] - bin0;
  const long long node = task_node[blockIdx.x];
  long long* node_hist = hist + node * total_bins * 2;
  long long* target = use_shared ? shared_hist : node_hist + 2LL * bin0;
  if (use_shared) {
    for (int k = threadIdx.x; k < 2 * n_bins; k += blockDim.x) shared_hist[k] = 0;
    __syncthreads();
  }
  long long sink = 0;
  const long long begin = task_begin[blockIdx.x];
  const long long end = task_end[blockIdx.x];
  if (nf <= static_cast<int>(blockDim.x)) {
    // Rows advance by the number of row lanes; a thread keeps one row in flight (unrolling
    // several rows per thread was measured slower: 1.43 ms vs 0.98 ms for 10M x 28 on an H100)
    const int lanes = blockDim.x / nf;
    const int lane = threadIdx.x / nf;
    if (lane < lanes) {
      const int f = fb + static_cast<int>(threadIdx.x) % nf;
      const int offset = cut_ptrs[f] - bin0;
      for (long long p = begin + lane; p < end; p += lanes) {
        const int r = rows[p];
        const int2 gp = gpair[r];
        if ((gp.x | gp.y) == 0) continue;
        const unsigned s = read_symbol(packed, bits, static_cast<uint64_t>(r) * n_features + f);
        if (s == missing) continue;
        add_pair(target + 2 * (offset + static_cast<int>(s)), gp, sink);
      }
    }
  } else {  // a group wider than the block: entries in a flat loop
    const long long count = (end - begin) * nf;
    for (long long e = threadIdx.x; e < count; e += blockDim.x) {
      const long long p = begin + e / nf;
      const int f = fb + static_cast<int>(e % nf);
      const int r = rows[p];
      const int2 gp = gpair[r];
      if ((gp.x | gp.y) == 0) continue;
      const unsigned s = read_symbol(packed, bits, static_cast<uint64_t>(r) * n_features + f);
      if (s == missing) continue;
      add_pair(target + 2 * (cut_ptrs[f] - bin0 + static_cast<int>(s)), gp, sink);
    }
  }
#if HIST_MODE == 1
  if (sink == 42) hist[0] = sink;  // keeps the loads alive
#endif
  if (use_shared) {
    __syncthreads();
    long long* out = node_hist + 2LL * bin0;
    for (int k = threadIdx.x; k < 2 * n_bins; k += blockDim.x) {
      const long long v = shared_hist[k];
      if (v != 0) atomic_add_i64(out + k, v);
    }
  }
}
