// Path-dependent TreeSHAP, GPUTreeShap's warp kernel: SHAP values for all rows and paths.
//
// Thread mapping: one warp per (bin of packed paths, tile of rows); a bin holds whole paths
// in consecutive lanes (explain/binpack.py), one lane per path element, the bias element
// first. For each row of its tile the warp
//   1. evaluates every lane's on-flag (lower <= x < upper, or x missing on the missing
//      branch) from one feature load per lane;
//   2. EXTENDs the path weights: lane i of a path holds pw[i]; element j of the path is
//      added at depth d = j with pw[i] <- pw[i] z (d - i) / (d + 1) + pw[i-1] o i / (d + 1),
//      pw[i-1] coming from the neighbouring lane by a shuffle, z and o from lane j;
//   3. UNWOUND-SUMs each lane's own element out of the full weights (each lane reads the
//      path's pw[j] by shuffles, one per step), the same recurrence as the CPU engine;
//   4. adds v (o - z) w to the row's contribution of its feature: shap_path_tiled gathers a
//      block's bins in a shared-memory tile of rows x outputs (shared atomics) and adds the tile
//      to ``out`` once (global atomics divided by the bins per block); shap_path_warp, for
//      outputs too wide for shared memory, adds to ``out`` directly.
// The arithmetic is the CPU engine's (dgboost/explain/treeshap.py), operation for operation
// in float64, so values agree to rounding (the atomics' order varies between runs).
// Memory traffic per (row, bin): one 4-byte feature load per lane (rows are cached); the
// bin's element data lives in registers for the whole tile of rows.
#include "common.cuh"

#define FULL_MASK 0xffffffffu

// One lane's element of one bin, loaded once per bin.
struct Lane {
  int feature, group, first, length, local, max_len;
  float lower, upper;
  bool on_missing, active, is_bias;
  double z, zinv, v;
};

__device__ __forceinline__ Lane load_lane(long long bin, int lane, const int* __restrict__ lane_feature,
                                          const float* __restrict__ lane_lower, const float* __restrict__ lane_upper,
                                          const unsigned char* __restrict__ lane_missing,
                                          const double* __restrict__ lane_zero_fraction,
                                          const double* __restrict__ lane_v, const int* __restrict__ lane_group,
                                          const int* __restrict__ lane_first, const int* __restrict__ lane_length) {
  Lane L;
  const long long e = bin * 32 + lane;
  L.feature = lane_feature[e];
  L.lower = lane_lower[e];
  L.upper = lane_upper[e];
  L.on_missing = lane_missing[e] != 0;
  L.z = lane_zero_fraction[e];
  L.v = lane_v[e];
  L.group = lane_group[e];
  L.first = lane_first[e];
  L.length = lane_length[e];
  L.local = lane - L.first;
  L.active = L.length > 0;
  L.is_bias = L.active && L.local == 0;
  L.zinv = L.z != 0.0 ? 1.0 / L.z : 0.0;
  // the deepest path of the bin bounds the uniform loops (shuffles need the whole warp)
  int m = L.length;
  for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(FULL_MASK, m, o));
  L.max_len = m;
  return L;
}

// The contribution of this lane's element for row x (0 for the bias and empty lanes).
__device__ __forceinline__ double lane_contribution(const Lane& L, const float* __restrict__ x) {
  const float fmax = 3.4028234663852886e38f;
  // 1. on-flags
  double o = 1.0;
  if (L.active && !L.is_bias) {
    float xv = x[L.feature];
    xv = xv > fmax ? fmax : xv;
    const bool on = (xv >= L.lower && xv < L.upper) || (xv != xv && L.on_missing);
    o = on ? 1.0 : 0.0;
  }
  // 2. EXTEND elements 1..length-1 of every path at once (depth d = element index)
  double pw = L.is_bias ? 1.0 : 0.0;
  for (int d = 1; d < L.max_len; ++d) {
    const int src = (L.first + d) & 31;  // lane of element d of my path
    const double zd = __shfl_sync(FULL_MASK, L.z, src);
    const double od = __shfl_sync(FULL_MASK, o, src);
    const double below = __shfl_up_sync(FULL_MASK, pw, 1);
    if (L.active && d < L.length && L.local <= d) {
      const double inv = 1.0 / (d + 1);
      const double kept = L.local < d ? pw * (zd * (d - L.local) * inv) : 0.0;
      const double added = L.local >= 1 ? od * below * (L.local * inv) : 0.0;
      pw = kept + added;
    }
  }
  // 3. UNWOUND-SUM of my element at depth dmax = length - 1
  const int dmax = L.length - 1;
  double next = __shfl_sync(FULL_MASK, pw, (L.first + max(dmax, 0)) & 31);
  double t1 = 0.0, t0 = 0.0;
  for (int j = L.max_len - 2; j >= 0; --j) {
    const double pj = __shfl_sync(FULL_MASK, pw, (L.first + j) & 31);
    if (L.active && j < dmax) {
      const double c1 = (dmax + 1.0) / (j + 1);
      const double c2 = L.z * (dmax - j) / (dmax + 1.0);
      const double c0 = L.zinv * (dmax + 1.0) / (dmax - j);
      const double tmp = next * c1;
      t1 += tmp;
      next = pj - tmp * c2;
      t0 += pj * c0;
    }
  }
  if (!L.active || L.is_bias) return 0.0;
  const double w = o != 0.0 ? t1 : t0;
  return L.v * (o - L.z) * w;
}

#define LANE_ARGS                                                                                   \
  const int* __restrict__ lane_feature, const float* __restrict__ lane_lower,                      \
      const float* __restrict__ lane_upper, const unsigned char* __restrict__ lane_missing,        \
      const double* __restrict__ lane_zero_fraction, const double* __restrict__ lane_v,            \
      const int* __restrict__ lane_group, const int* __restrict__ lane_first,                      \
      const int* __restrict__ lane_length
#define LANE_PASS lane_feature, lane_lower, lane_upper, lane_missing, lane_zero_fraction, lane_v, \
                  lane_group, lane_first, lane_length

// Per-lane arrays have n_bins * 32 entries: feature (-1: bias or empty lane), lower/upper,
// missing branch, zero fraction, the path's leaf value and output group, the lane of the path's
// bias element, and the path's length (bias included; 0 for an empty lane).
extern "C" __global__ void shap_path_tiled(const float* __restrict__ X, long long n_rows, int n_cols,
                                           LANE_ARGS, int n_bins, int bins_per_block, int rows_per_tile,
                                           int n_groups, double* __restrict__ out) {
  extern __shared__ double tile[];  // rows_per_tile x n_groups x (n_cols + 1)
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int warps = blockDim.x >> 5;
  const int width = n_groups * (n_cols + 1);
  const long long r0 = static_cast<long long>(blockIdx.y) * rows_per_tile;
  const int rows = static_cast<int>(min(n_rows - r0, static_cast<long long>(rows_per_tile)));
  for (int i = threadIdx.x; i < rows * width; i += blockDim.x) tile[i] = 0.0;
  __syncthreads();
  const long long b0 = static_cast<long long>(blockIdx.x) * bins_per_block;
  const long long b1 = min(static_cast<long long>(n_bins), b0 + bins_per_block);
  for (long long bin = b0 + warp; bin < b1; bin += warps) {  // uniform within a warp
    const Lane L = load_lane(bin, lane, LANE_PASS);
    for (int r = 0; r < rows; ++r) {
      const double phi = lane_contribution(L, X + (r0 + r) * n_cols);
      if (phi != 0.0) atomicAdd(tile + r * width + L.group * (n_cols + 1) + L.feature, phi);
    }
  }
  __syncthreads();
  double* dst = out + r0 * width;
  for (int i = threadIdx.x; i < rows * width; i += blockDim.x) {
    const double v = tile[i];
    if (v != 0.0) atomicAdd(dst + i, v);
  }
}

extern "C" __global__ void shap_path_warp(const float* __restrict__ X, long long n_rows, int n_cols,
                                          LANE_ARGS, int n_bins, int rows_per_tile, int n_groups,
                                          double* __restrict__ out) {
  const int lane = threadIdx.x & 31;
  const long long bin = static_cast<long long>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (bin >= n_bins) return;  // whole warps leave together
  const Lane L = load_lane(bin, lane, LANE_PASS);
  const int F1 = n_cols + 1;
  const long long r0 = static_cast<long long>(blockIdx.y) * rows_per_tile;
  const long long r1 = min(n_rows, r0 + rows_per_tile);
  for (long long r = r0; r < r1; ++r) {
    const double phi = lane_contribution(L, X + r * n_cols);
    if (phi != 0.0) atomicAdd(out + (r * n_groups + L.group) * F1 + L.feature, phi);
  }
}
