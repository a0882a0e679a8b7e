// Node records on the device: the bookkeeping of a batch of nodes between the partition and
// the split evaluation, so that the host reads a level once (dgboost/backend/_records.py is
// the NumPy twin and the tests' oracle).
//
// Thread mapping and traffic:
// - ``root_node``: one thread writes one record (80 B).
// - ``split_nodes``: one block; a thread per split parent (looping over them) reads its record
//   and counts and writes two child records, the segment to build and its side (~250 B per
//   parent); then the block scans the built segments' sizes and the children's partition
//   tiles (16 B per parent and per child), so that the histogram and the next partition
//   launch no scan of their own.
// - ``segment_offsets``: one block scans the m segment sizes (in units of ``tile`` rows,
//   rounded up) into m + 1 exclusive offsets; each thread owns a contiguous run of segments.
// - ``children_histograms``: one thread per (parent, bin) cell pair (16 B): reads the parent's
//   and the built child's cell and writes both children's (64 B per bin), grid-stride.
// - ``gather_rows``: one thread per 4-byte word of a gathered row (4 B read, 4 B written),
//   grid-stride; blockIdx.y picks the output.
#include "split_nodes.cuh"

using namespace dgboost;

extern "C" __global__ void root_node(const long long* __restrict__ sums, long long n_rows,
                                     long long* __restrict__ out) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  for (int c = 0; c < kNodeFields; ++c) out[c] = 0;
  out[kFeature] = -1;
  out[kSplitBin] = -1;
  out[kSumG] = sums[0];
  out[kSumH] = sums[1];
  out[kEnd] = n_rows;
}

// One block: split_and_scan (split_nodes.cuh).
extern "C" __global__ void split_nodes(const long long* __restrict__ parents, int k,
                                       const long long* __restrict__ counts,
                                       const long long* __restrict__ global_counts, int by_hessian,
                                       long long* __restrict__ children, long long* __restrict__ build_segments,
                                       long long* __restrict__ build_left, long long tile,
                                       long long* __restrict__ build_offsets, long long* __restrict__ child_tiles) {
  __shared__ long long partial[1024];
  split_and_scan(parents, k, counts, global_counts, by_hessian, children, build_segments, build_left, tile,
                 build_offsets, child_tiles, partial);
}

// out[i] = sum over j < i of ceil(size_j / tile), size_j = segments[j * stride + 1] -
// segments[j * stride] (segments point at the begin column); out[m] is the total. One block.
extern "C" __global__ void segment_offsets(const long long* __restrict__ segments, int stride, int m,
                                           long long tile, long long* __restrict__ out) {
  __shared__ long long partial[1024];
  block_exclusive_scan(
      m,
      [&](int i) {
        const long long size = segments[static_cast<long long>(i) * stride + 1] - segments[static_cast<long long>(i) * stride];
        return (size + tile - 1) / tile;
      },
      out, partial);
}

// Children 2j and 2j + 1 of parent j: the built one is built[j], its sibling
// parent_hist[parent_index[j]] - built[j] (parent j itself when ``use_index`` is 0).
// ``bins`` cells of (g, h) per histogram.
extern "C" __global__ void children_histograms(const longlong2* __restrict__ parent_hist,
                                               const long long* __restrict__ parent_index, int use_index,
                                               const longlong2* __restrict__ built,
                                               const long long* __restrict__ build_left, int k, long long bins,
                                               longlong2* __restrict__ out) {
  const long long total = static_cast<long long>(k) * bins;
  for (long long q = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; q < total;
       q += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long j = q / bins, b = q - j * bins;
    const longlong2 child = built[q];
    const long long parent_row = use_index ? parent_index[j] : j;
    const longlong2 parent = parent_hist[parent_row * bins + b];
    const longlong2 sibling = make_longlong2(parent.x - child.x, parent.y - child.y);
    const bool is_left = build_left[j] != 0;
    out[(2 * j) * bins + b] = is_left ? child : sibling;
    out[(2 * j + 1) * bins + b] = is_left ? sibling : child;
  }
}

// ``gather_rows``: rows picked by address, copied into contiguous outputs (lossguide's parents
// of a batch, from the batches they were evaluated in). ``table`` holds ``n_outputs`` entries
// of k + 2 int64 (blockIdx.y picks one): the output's address, its row length in 4-byte
// words, then the k source rows' addresses. Grid-stride over the output's k * words words,
// 4 B read and 4 B written each.
extern "C" __global__ void gather_rows(const long long* __restrict__ table, int k) {
  const long long* entry = table + static_cast<long long>(blockIdx.y) * (k + 2);
  unsigned int* out = reinterpret_cast<unsigned int*>(entry[0]);
  const long long words = entry[1];
  const long long total = static_cast<long long>(k) * words;
  for (long long q = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; q < total;
       q += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long r = q / words;
    out[q] = reinterpret_cast<const unsigned int*>(entry[2 + r])[q - r * words];
  }
}
