// Per-node gradient histograms from the ELLPACK matrix, in int64 (exact, order-free).
//
// Thread mapping: grid (block, feature group). The m segments (``rows[begin:end]`` of each
// node) are laid end to end (``offsets``, m + 1 exclusive sums from ``segment_offsets`` in
// nodes.cu, on the device: the host never learns the sizes) and every block takes an equal
// slice of that line, at least ``min_rows`` long; a slice that crosses segments is done piece
// by piece. A feature group is a run of consecutive features whose bins fit in shared memory.
// For each piece the block zeroes a private shared-memory histogram of its group (2 x int64
// per bin), walks the rows with every thread owning one run of up to k consecutive features
// of the group (their entries within 32 bits of the row) and one row lane (rows advance by
// blockDim / runs), adds the row's quantised pair to each entry's bin with shared-memory
// integer atomics, then flushes the non-zero bins to the node's global histogram with global
// integer atomics (64-bit adds done as one or two 32-bit atomics, see common.cuh). Integer
// sums make the result identical for any slicing, block order or number of workers. When a
// single feature has more bins than shared memory holds, ``use_shared == 0`` adds straight
// into global memory (same result).
//
// ELLPACK entries (dgboost/backend/_ellpack.py): entry (r, f) is ``layout[f].y`` bits at bit
// r * row_bits + layout[f].x, and the feature's missing symbol is its number of bins; the
// entries of consecutive features are consecutive bits, so the two 32-bit words a run's
// entries lie in hold them all (a funnel shift aligns them).
// Memory traffic per (row, run): two 4-byte loads of the run's entries, plus per row the row
// index (4 B) and the gradient pair (8 B), shared by the row's threads through L1. Rows with
// a zero pair (left out by subsampling) and missing entries add nothing. Positions and row
// indices are int32 (no 64-bit division: it is a call with a stack frame, and the frame
// costs the registers that keep four blocks on an SM).
#include "common.cuh"

using namespace dgboost;

// One row's quantised pair into its bin (benchmarks/micro_gpu_stages.py measures variants of
// this function's body: keep its signature and braces as they are).
__device__ __forceinline__ void add_pair(long long* cell, int2 gp) {
  atomic_add_i32_to_i64(cell, gp.x);
  atomic_add_i32_to_i64(cell + 1, gp.y);
}

// The 32 bits of row r's entries from bit x0 of the row on (a run's entries lie within them):
// the two words they lie in, aligned by a funnel shift.
__device__ __forceinline__ unsigned run_span(const unsigned int* __restrict__ packed, int row_bits, int x0, int r) {
  const uint64_t bit = static_cast<uint64_t>(r) * row_bits + x0;
  const uint64_t word = bit >> 5;
  return __funnelshift_r(__ldg(packed + word), __ldg(packed + word + 1), static_cast<unsigned>(bit) & 31u);
}

// Adds rows[begin:end] of one node into ``target``, the block's shared histogram of its
// feature group (kShared) or the node's global one. The two are separate instantiations so
// that the shared one's atomics are shared-memory atomics (through a pointer that may be
// either, they were generic ones). Positions are int32 like the row indices themselves:
// 64-bit counters cost the registers that keep four blocks on an SM.
template <bool kShared>
__device__ __forceinline__ void accumulate(const unsigned int* __restrict__ packed, int row_bits,
                                           const int2* __restrict__ layout, const int* __restrict__ rows,
                                           const int2* __restrict__ gpair, const int* __restrict__ cut_ptrs,
                                           int fb, int nf, int bin0, int begin, int end,
                                           long long* target) {
  // A thread takes one row lane and a run of up to k consecutive features of the group,
  // whose entries lie in one 32-bit span of the row (k = 32 / the group's widest entry):
  // two 4-byte loads and a funnel shift give that span. The loop is bound by the latency of
  // its loads (one row in flight a thread: unrolling rows was measured slower), so a run per
  // thread, not one feature, puts about k times more rows in flight; the next row's index is
  // loaded an iteration ahead (docs/performance-notes.md, "Runs of features a thread").
  int widest = 1;
  for (int f = fb; f < fb + nf; ++f) widest = max(widest, layout[f].y);
  const int k = max(1, 32 / widest);
  const int runs = (nf + k - 1) / k;
  if (runs <= static_cast<int>(blockDim.x)) {
    const int lanes = blockDim.x / runs;
    const int lane = threadIdx.x / runs;
    if (lane < lanes) {
      const int f0 = fb + (static_cast<int>(threadIdx.x) % runs) * k;
      const int f1 = min(fb + nf, f0 + k);
      const int x0 = layout[f0].x;
      const int lo0 = cut_ptrs[f0] - bin0;
      int p = begin + lane;
      int next = p < end ? rows[p] : 0;
      if (kShared && k <= 4) {
        // runs of at most four features (a group whose widest entry has 7 bits or more: 64
        // bins make 7, 256 make 9): each one's first bin in the group and its number of bins
        // (both under 2**16 in a shared histogram) held in a register, read once, and the
        // feature loop unrolled, instead of a load of cut_ptrs and the loop's bounds every
        // row: about half the instructions a row (docs/performance-notes.md, "A run's bins
        // in registers")
        unsigned run[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int f = f0 + j;
          run[j] = f < f1 ? static_cast<unsigned>(cut_ptrs[f] - bin0) |
                                (static_cast<unsigned>(cut_ptrs[f + 1] - cut_ptrs[f]) << 16)
                          : 0u;
        }
        for (; p < end; p += lanes) {
          const int r = next;
          if (p + lanes < end) next = rows[p + lanes];
          const int2 gp = gpair[r];
          unsigned rest = run_span(packed, row_bits, x0, r);
          if ((gp.x | gp.y) == 0) continue;
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const unsigned n_bins = run[j] >> 16;
            if (n_bins == 0u) break;
            const int width = 32 - __clz(n_bins);  // symbol_bits(n_bins)
            const unsigned s = rest & ((1u << width) - 1u);
            if (s != n_bins) add_pair(target + 2 * static_cast<int>((run[j] & 0xffffu) + s), gp);
            rest >>= width;
          }
        }
        return;
      }
      for (; p < end; p += lanes) {
        const int r = next;
        if (p + lanes < end) next = rows[p + lanes];
        const int2 gp = gpair[r];
        unsigned rest = run_span(packed, row_bits, x0, r);
        if ((gp.x | gp.y) == 0) continue;
        // entry j starts where entry j - 1 ends; its feature's bins where the previous end
        int lo = lo0;
        for (int f = f0; f < f1; ++f) {
          const int n_bins = cut_ptrs[f + 1] - bin0 - lo;
          const int width = max(1, 32 - __clz(n_bins));  // symbol_bits(n_bins)
          const unsigned s = rest & ((1u << width) - 1u);
          if (s != static_cast<unsigned>(n_bins)) add_pair(target + 2 * (lo + static_cast<int>(s)), gp);
          rest >>= width;
          lo += n_bins;
        }
      }
    }
  } else {  // a group of more runs than the block has threads: entries in a flat loop
    // int32 entry counters (a 64-bit division costs a call and a stack frame), over pieces of
    // rows short enough for them
    const int span = 0x7fffffff / nf - 1;
    for (int first = begin, taken = 0; first < end; first += taken) {
      taken = min(end - first, span);
      const int count = taken * nf;
      for (int e = threadIdx.x; e < count; e += blockDim.x) {
        const int p = first + e / nf;
        const int f = fb + e % nf;
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
  const int total = static_cast<int>(offsets[m]);  // positions fit in int32, as row indices do
  int slice = static_cast<int>((total + gridDim.x - 1) / gridDim.x);
  slice = slice < min_rows ? static_cast<int>(min_rows) : slice;
  const long long lo = static_cast<long long>(blockIdx.x) * slice;
  const long long hi = min(static_cast<long long>(total), lo + slice);
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
  // positions fit in int32, as the row indices do (offsets are int64 only to be scanned safely)
  const int hi32 = static_cast<int>(hi);
  for (int pos = static_cast<int>(lo); pos < hi32;) {
    while (offsets[i + 1] <= pos) ++i;
    const int piece_end = static_cast<int>(min(static_cast<long long>(hi32), offsets[i + 1]));
    const int begin = static_cast<int>(segments[2 * i] + (pos - offsets[i]));
    const int end = begin + (piece_end - pos);
    long long* node_hist = hist + static_cast<long long>(i) * total_bins * 2 + 2LL * bin0;
    if (use_shared) {
      for (int c = threadIdx.x; c < 2 * n_bins; c += blockDim.x) shared_hist[c] = 0;
      __syncthreads();
    }
    if (use_shared)
      accumulate<true>(packed, row_bits, layout, rows, gpair, cut_ptrs, fb, nf, bin0, begin, end, shared_hist);
    else
      accumulate<false>(packed, row_bits, layout, rows, gpair, cut_ptrs, fb, nf, bin0, begin, end, node_hist);
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
