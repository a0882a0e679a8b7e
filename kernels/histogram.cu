// Per-node gradient histograms from the ELLPACK matrix, in int64 (exact, order-free).
//
// Thread mapping: grid (block, feature group). The m segments (``rows[begin:end]`` of each
// node) are laid end to end (``offsets``, m + 1 exclusive sums from ``segment_offsets`` in
// nodes.cu, on the device: the host never learns the sizes) and every block takes an equal
// slice of that line, at least ``min_rows`` long; a slice that crosses segments is done piece
// by piece. A feature group is a run of consecutive features whose bins fit in shared memory.
// For each piece the block zeroes a private shared-memory histogram of its group (2 x int64
// per bin), walks the rows with every thread owning one feature of the group and one row
// lane (rows advance by blockDim / group width), adds the row's quantised pair with
// shared-memory integer atomics, then flushes the non-zero bins to the node's global
// histogram with global integer atomics (64-bit adds done as one or two 32-bit atomics, see
// common.cuh). Integer sums make the result identical for any slicing, block order or
// number of workers. When a single feature has more bins than shared memory holds,
// ``use_shared == 0`` adds straight into global memory (same result).
//
// ELLPACK entries (dgboost/backend/_ellpack.py): entry (r, f) is ``layout[f].y`` bits at bit
// r * row_bits + layout[f].x, and the feature's missing symbol is its number of bins. A
// thread of a group narrower than the block keeps one feature, so it looks these up once.
// Memory traffic per (row, feature): one ELLPACK symbol (width/8 bytes, 8-byte load), plus
// per row the row index (4 B) and the gradient pair (8 B), shared by the group's threads
// through L1. Rows with a zero pair (left out by subsampling) and missing entries add nothing.
#include "common.cuh"

using namespace dgboost;

// One row's quantised pair into its bin (benchmarks/micro_gpu_stages.py measures variants of
// this function's body: keep its signature and braces as they are).
__device__ __forceinline__ void add_pair(long long* cell, int2 gp) {
  atomic_add_i32_to_i64(cell, gp.x);
  atomic_add_i32_to_i64(cell + 1, gp.y);
}

// Adds rows[begin:end] of one node into ``target`` (the shared or the global histogram of
// the block's feature group). Positions are int32 like the row indices themselves: 64-bit
// counters cost the registers that keep four blocks on an SM.
__device__ __forceinline__ void accumulate(const unsigned int* __restrict__ packed, int row_bits,
                                           const int2* __restrict__ layout, const int* __restrict__ rows,
                                           const int2* __restrict__ gpair, const int* __restrict__ cut_ptrs,
                                           int fb, int nf, int bin0, int begin, int end,
                                           long long* target) {
  if (nf <= static_cast<int>(blockDim.x)) {
    // Rows advance by the number of row lanes; a thread keeps one row in flight (unrolling
    // several rows per thread was measured slower: docs/performance-notes.md)
    const int lanes = blockDim.x / nf;
    const int lane = threadIdx.x / nf;
    if (lane < lanes) {
      const int f = fb + static_cast<int>(threadIdx.x) % nf;
      const int offset = cut_ptrs[f] - bin0;
      const unsigned missing = static_cast<unsigned>(cut_ptrs[f + 1] - cut_ptrs[f]);
      const int2 lay = layout[f];
      for (int p = begin + lane; p < end; p += lanes) {
        const int r = rows[p];
        const int2 gp = gpair[r];
        if ((gp.x | gp.y) == 0) continue;
        const unsigned s = read_symbol(packed, static_cast<uint64_t>(r) * row_bits + lay.x, lay.y);
        if (s == missing) continue;
        add_pair(target + 2 * (offset + static_cast<int>(s)), gp);
      }
    }
  } else {  // a group wider than the block: entries in a flat loop
    const long long count = static_cast<long long>(end - begin) * nf;
    for (long long e = threadIdx.x; e < count; e += blockDim.x) {
      const long long p = begin + e / nf;
      const int f = fb + static_cast<int>(e % nf);
      const int r = rows[p];
      const int2 gp = gpair[r];
      if ((gp.x | gp.y) == 0) continue;
      const int2 lay = layout[f];
      const unsigned s = read_symbol(packed, static_cast<uint64_t>(r) * row_bits + lay.x, lay.y);
      const int lo = cut_ptrs[f];
      if (s == static_cast<unsigned>(cut_ptrs[f + 1] - lo)) continue;
      add_pair(target + 2 * (lo - bin0 + static_cast<int>(s)), gp);
    }
  }
}

// 512 threads, 4 blocks per SM (dgboost/backend/cuda.py sizes the grid for that): at most 32
// registers, else only 3 blocks fit and the grid runs in 1.33 waves (measured slower).
extern "C" __global__ void __launch_bounds__(512, 4) build_histograms(
    const unsigned int* __restrict__ packed, int row_bits, const int2* __restrict__ layout,
    const int* __restrict__ rows, const int2* __restrict__ gpair,
    const long long* __restrict__ segments, const long long* __restrict__ offsets, int m, long long min_rows,
    const int* __restrict__ cut_ptrs, const int* __restrict__ group_begin, const int* __restrict__ group_end,
    long long total_bins, int use_shared, long long* __restrict__ hist) {
  extern __shared__ long long shared_hist[];
  const long long total = offsets[m];
  long long slice = (total + gridDim.x - 1) / gridDim.x;
  slice = slice < min_rows ? min_rows : slice;
  const long long lo = blockIdx.x * slice;
  const long long hi = min(total, lo + slice);
  if (lo >= hi) return;
  const int fb = group_begin[blockIdx.y];
  const int fe = group_end[blockIdx.y];
  const int nf = fe - fb;
  const int bin0 = cut_ptrs[fb];
  const int n_bins = cut_ptrs[fe] - bin0;
  // the last segment starting at or before lo (empty segments share their offset)
  int a = 0, b = m;
  while (b - a > 1) {
    const int mid = (a + b) >> 1;
    if (offsets[mid] <= lo) a = mid; else b = mid;
  }
  int i = a;
  for (long long pos = lo; pos < hi;) {
    while (offsets[i + 1] <= pos) ++i;
    const long long piece_end = min(hi, offsets[i + 1]);
    const long long begin = segments[2 * i] + (pos - offsets[i]);
    const long long end = begin + (piece_end - pos);
    long long* node_hist = hist + static_cast<long long>(i) * total_bins * 2 + 2LL * bin0;
    if (use_shared) {
      for (int c = threadIdx.x; c < 2 * n_bins; c += blockDim.x) shared_hist[c] = 0;
      __syncthreads();
    }
    accumulate(packed, row_bits, layout, rows, gpair, cut_ptrs, fb, nf, bin0, static_cast<int>(begin),
               static_cast<int>(end),
               use_shared ? shared_hist : node_hist);
    if (use_shared) {
      __syncthreads();
      for (int c = threadIdx.x; c < 2 * n_bins; c += blockDim.x) {
        const long long v = shared_hist[c];
        if (v != 0) atomic_add_i64(node_hist + c, v);
      }
      __syncthreads();
    }
    pos = piece_end;
  }
}
