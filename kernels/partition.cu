// Stable partition of node row segments: left rows first, order kept within each side.
//
// Thread mapping: the split nodes' segments are laid end to end ("compact positions" q,
// with seg_offsets[i] the first q of node i); one thread per compact position, grid-stride.
// ``go_left`` reads the split feature's ELLPACK symbol of the row (one 8-byte load per row:
// scattered, since rows are permuted) and writes a 0/1 flag. An inclusive scan of the flags
// (CuPy's cumsum, in int32: rows are int32 indices, so positions fit) gives each row's rank among the left rows of its node;
// ``scatter`` writes the row to its new place in a compact buffer and ``gather_back`` copies
// the buffer over the segments. Memory traffic per row: ~4 B rows + 8 B symbol + 4 B flag
// (read and written) + the scan + 2 x 4 B moves.
#include "common.cuh"

using namespace dgboost;

__device__ __forceinline__ int node_of(const long long* __restrict__ seg_offsets, int n_nodes, long long q) {
  int a = 0, b = n_nodes;  // last i with seg_offsets[i] <= q
  while (b - a > 1) {
    const int mid = (a + b) >> 1;
    if (seg_offsets[mid] <= q) a = mid; else b = mid;
  }
  return a;
}

extern "C" __global__ void go_left(const unsigned int* __restrict__ packed, int bits, int n_features,
                                   unsigned missing, const int* __restrict__ rows,
                                   const long long* __restrict__ seg_offsets, const long long* __restrict__ begins,
                                   int n_nodes, const long long* __restrict__ feature,
                                   const long long* __restrict__ split_bin, const long long* __restrict__ default_left,
                                   long long total,
                                   int* __restrict__ flags) {
  for (long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x; q < total;
       q += (long long)gridDim.x * blockDim.x) {
    const int i = node_of(seg_offsets, n_nodes, q);
    const int r = rows[begins[i] + (q - seg_offsets[i])];
    const unsigned s = read_symbol(packed, bits, static_cast<uint64_t>(r) * n_features + feature[i]);
    flags[q] = s == missing ? (default_left[i] != 0 ? 1 : 0) : (static_cast<long long>(s) <= split_bin[i] ? 1 : 0);
  }
}

// ``scan`` is the inclusive prefix sum of ``flags``; left_counts[i] = left rows of node i.
extern "C" __global__ void left_counts(const int* __restrict__ scan, const long long* __restrict__ seg_offsets,
                                       int n_nodes, long long* __restrict__ out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n_nodes) return;
  const long long a = seg_offsets[i], b = seg_offsets[i + 1];
  out[i] = b > a ? static_cast<long long>(scan[b - 1]) - (a > 0 ? scan[a - 1] : 0) : 0;
}

extern "C" __global__ void scatter(const int* __restrict__ rows, const int* __restrict__ flags,
                                   const int* __restrict__ scan, const long long* __restrict__ seg_offsets,
                                   const long long* __restrict__ begins, const long long* __restrict__ lefts,
                                   int n_nodes, long long total, int* __restrict__ buffer) {
  for (long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x; q < total;
       q += (long long)gridDim.x * blockDim.x) {
    const int i = node_of(seg_offsets, n_nodes, q);
    const long long start = seg_offsets[i];
    const long long before = start > 0 ? scan[start - 1] : 0;
    const long long local = q - start;
    const long long left_rank = scan[q] - before - flags[q];  // left rows before q in node i
    const long long dest = flags[q] ? left_rank : lefts[i] + (local - left_rank);
    buffer[start + dest] = rows[begins[i] + local];
  }
}

extern "C" __global__ void gather_back(const int* __restrict__ buffer, const long long* __restrict__ seg_offsets,
                                       const long long* __restrict__ begins, int n_nodes, long long total,
                                       int* __restrict__ rows) {
  for (long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x; q < total;
       q += (long long)gridDim.x * blockDim.x) {
    const int i = node_of(seg_offsets, n_nodes, q);
    rows[begins[i] + (q - seg_offsets[i])] = buffer[q];
  }
}
