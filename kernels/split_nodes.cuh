// The children of split parents (``split_nodes`` in nodes.cu, and the last block of
// ``partition_flags`` in partition.cu, which has just counted the parents' rows): each split
// parent's two child records, the child to build and its side, then the scans the level's
// histogram and the next partition read (dgboost/backend/_records.py is the NumPy twin).
#pragma once
#include "common.cuh"

namespace dgboost {

// Children of parent j are rows 2j (left) and 2j + 1 (right); the child to build is the one
// with fewer rows over all ranks (ties: the left), or with ``by_hessian`` the one with the
// smaller hessian sum (ties: the left; ``global_counts`` is then not read), as in
// dgboost/backend/_records.py. A parent that is not split (feature < 0: a leaf, or no node)
// has two "no node" children with empty segments, and nothing to build.
__device__ __forceinline__ void split_one(const long long* __restrict__ parents, int j,
                                          const long long* __restrict__ counts,
                                          const long long* __restrict__ global_counts, int by_hessian,
                                          long long* __restrict__ children, long long* __restrict__ build_segments,
                                          long long* __restrict__ build_left) {
  const long long* p = parents + static_cast<long long>(j) * kNodeFields;
  long long* left = children + 2LL * j * kNodeFields;
  long long* right = left + kNodeFields;
  for (int c = 0; c < kNodeFields; ++c) { left[c] = 0; right[c] = 0; }
  left[kSplitBin] = right[kSplitBin] = -1;
  if (p[kFeature] < 0) {
    left[kFeature] = right[kFeature] = kNoNode;
    left[kBegin] = left[kEnd] = right[kBegin] = right[kEnd] = p[kBegin];
    build_left[j] = 1;
    build_segments[2 * j] = build_segments[2 * j + 1] = p[kBegin];
    return;
  }
  left[kFeature] = right[kFeature] = -1;
  left[kSumG] = p[kLeftG];
  left[kSumH] = p[kLeftH];
  right[kSumG] = p[kSumG] - p[kLeftG];
  right[kSumH] = p[kSumH] - p[kLeftH];
  const long long mid = p[kBegin] + counts[2 * j];
  left[kBegin] = p[kBegin];
  left[kEnd] = mid;
  right[kBegin] = mid;
  right[kEnd] = p[kEnd];
  const bool is_left = by_hessian ? left[kSumH] <= right[kSumH] : global_counts[2 * j] <= global_counts[2 * j + 1];
  build_left[j] = is_left ? 1 : 0;
  build_segments[2 * j] = is_left ? left[kBegin] : right[kBegin];
  build_segments[2 * j + 1] = is_left ? left[kEnd] : right[kEnd];
}

// One block (``partial``: blockDim.x long longs of shared memory). After the splits:
// ``build_offsets`` (k + 1) = exclusive sums of the built segments' sizes (segment_offsets of
// build_segments, tile 1) and ``child_tiles`` (2k + 1) = exclusive sums of the children's
// sizes in tiles of ``tile`` rows (segment_offsets of the children's records, the next
// partition's tiles). A block's global writes are visible to its own threads after
// __syncthreads.
__device__ void split_and_scan(const long long* __restrict__ parents, int k, const long long* __restrict__ counts,
                               const long long* __restrict__ global_counts, int by_hessian,
                               long long* __restrict__ children, long long* __restrict__ build_segments,
                               long long* __restrict__ build_left, long long tile,
                               long long* __restrict__ build_offsets, long long* __restrict__ child_tiles,
                               long long* partial) {
  for (int j = threadIdx.x; j < k; j += blockDim.x)
    split_one(parents, j, counts, global_counts, by_hessian, children, build_segments, build_left);
  __syncthreads();
  block_exclusive_scan(
      k, [&](int i) { return build_segments[2 * i + 1] - build_segments[2 * i]; }, build_offsets, partial);
  __syncthreads();
  block_exclusive_scan(
      2 * k,
      [&](int i) {
        const long long* c = children + static_cast<long long>(i) * kNodeFields;
        return (c[kEnd] - c[kBegin] + tile - 1) / tile;
      },
      child_tiles, partial);
}

}  // namespace dgboost
