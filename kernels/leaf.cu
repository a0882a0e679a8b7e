// Margin update from leaf positions: margin[rows[p], group] += value of the leaf whose
// segment holds position p.
//
// Thread mapping: like partition.cu, the leaves' segments are laid end to end; one thread per
// compact position finds its leaf by binary search over the segment offsets (a few hundred
// leaves: cached). Every row is in exactly one leaf, so there are no write conflicts.
// Memory traffic per row: 4 B row index, 4 B margin read + write (scattered rows).
#include "common.cuh"

extern "C" __global__ void add_leaf_values(float* __restrict__ margin, int n_groups, int group,
                                           const int* __restrict__ rows, const long long* __restrict__ seg_offsets,
                                           const long long* __restrict__ begins, int n_leaves,
                                           const float* __restrict__ values, long long total) {
  total = min(total, seg_offsets[n_leaves]);  // a bound from the host, the count from the device
  for (long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x; q < total;
       q += (long long)gridDim.x * blockDim.x) {
    int a = 0, b = n_leaves;
    while (b - a > 1) {
      const int mid = (a + b) >> 1;
      if (seg_offsets[mid] <= q) a = mid; else b = mid;
    }
    const int r = rows[begins[a] + (q - seg_offsets[a])];
    margin[static_cast<long long>(r) * n_groups + group] += values[a];
  }
}
