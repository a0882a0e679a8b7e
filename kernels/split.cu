// Split evaluation: the best (feature, bin, missing direction) of every node.
//
// Thread mapping, stage 1 (``best_per_feature``): one block per (node, feature). The block
// sums the feature's bins (the missing sums are the node total minus them), then walks the
// bins in chunks of blockDim with an int64 inclusive scan (warp shuffles + one shared-memory
// pass): thread b holds the left sums of "bins <= b", tries missing-right then missing-left,
// and keeps its best. A block arg-max (ties: lowest bin, then missing-right) writes one
// candidate per (node, feature). Stage 2 (``best_per_node``): one thread per node scans its
// features in order and keeps the first strictly larger gain, starting from kRtEps, and
// writes the decision into the node's record (the node totals are read from the records too).
// Together that is the CPU kernel's order: first maximum over (feature, bin, direction).
//
// The float64 arithmetic repeats the CPU engine's expressions operation by operation and the
// module is compiled with --fmad=false, so both devices compute bit-identical gains.
// Memory traffic: each histogram cell (16 B) is read twice (total, then scan).
#include "common.cuh"

using namespace dgboost;

#define KERNEL_EPS 1e-6

struct SplitParamsDev {
  double inv_scale_g, inv_scale_h, lam, alpha, mcw, mds;
};

__device__ __forceinline__ double threshold_l1(double G, double alpha) {
  if (G > alpha) return G - alpha;
  if (G < -alpha) return G + alpha;
  return 0.0;
}

__device__ __forceinline__ double leaf_weight(double G, double H, const SplitParamsDev& p) {
  if (H < p.mcw || H <= 0.0) return 0.0;
  double w = -threshold_l1(G, p.alpha) / (H + p.lam);
  if (p.mds != 0.0 && fabs(w) > p.mds) w = w > 0 ? p.mds : -p.mds;
  return w;
}

__device__ __forceinline__ double split_gain(double G, double H, const SplitParamsDev& p) {
  if (H < p.mcw || H <= 0.0) return 0.0;
  if (p.mds == 0.0) {
    const double t = threshold_l1(G, p.alpha);
    return t * t / (H + p.lam);
  }
  const double w = leaf_weight(G, H, p);
  return -(2.0 * G * w + (H + p.lam) * w * w) - 2.0 * p.alpha * fabs(w);
}

// A candidate beats another when its gain is larger, or equal with a lower key
// (key = 2 * bin + direction). Invalid candidates carry key -1 and lose to everything.
__device__ __forceinline__ bool better(double gain, int key, double other_gain, int other_key) {
  if (key < 0) return false;
  if (other_key < 0) return true;
  if (gain != other_gain) return gain > other_gain;
  return key < other_key;
}

__device__ __forceinline__ long long warp_inclusive_scan(long long v) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const long long u = __shfl_up_sync(0xffffffffu, v, d);
    if (lane >= d) v += u;
  }
  return v;
}

// Block-wide inclusive scan of two int64 values (blockDim a multiple of 32, at most 1024).
__device__ void block_scan2(long long& g, long long& h, long long* warp_g, long long* warp_h) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  g = warp_inclusive_scan(g);
  h = warp_inclusive_scan(h);
  if (lane == 31) { warp_g[warp] = g; warp_h[warp] = h; }
  __syncthreads();
  if (warp == 0) {
    long long sg = lane < n_warps ? warp_g[lane] : 0;
    long long sh = lane < n_warps ? warp_h[lane] : 0;
    sg = warp_inclusive_scan(sg);
    sh = warp_inclusive_scan(sh);
    if (lane < n_warps) { warp_g[lane] = sg; warp_h[lane] = sh; }
  }
  __syncthreads();
  if (warp > 0) { g += warp_g[warp - 1]; h += warp_h[warp - 1]; }
  __syncthreads();  // warp_g/warp_h are reused by the next call
}

struct Candidate {
  double gain;
  long long left_g, left_h;
  int key;  // 2 * local bin + (1 if missing goes left); -1 when no valid split
  int pad;
};

extern "C" __global__ void best_per_feature(
    const long long* __restrict__ hist, long long total_bins, const long long* __restrict__ records,
    const int* __restrict__ cut_ptrs, int n_features, const bool* __restrict__ feature_mask, int mask_rows,
    double inv_scale_g, double inv_scale_h, double lam, double alpha, double mcw, double mds,
    Candidate* __restrict__ out) {
  const SplitParamsDev p{inv_scale_g, inv_scale_h, lam, alpha, mcw, mds};
  __shared__ long long warp_g[32], warp_h[32];
  __shared__ double best_gain[32];
  __shared__ int best_key[32];
  __shared__ long long best_lg[32], best_lh[32];
  const int node = blockIdx.x / n_features;
  const int f = blockIdx.x % n_features;
  Candidate* slot = out + blockIdx.x;
  // mask_rows: 0 = every feature, 1 = one mask row for every node, else one row per node
  const long long mask_row = mask_rows == 1 ? 0 : node;
  const bool no_node = records[static_cast<long long>(node) * kNodeFields + kFeature] == kNoNode;
  if (no_node || (mask_rows != 0 && !feature_mask[mask_row * n_features + f])) {
    if (threadIdx.x == 0) { slot->gain = 0.0; slot->key = -1; slot->left_g = 0; slot->left_h = 0; }
    return;
  }
  const long long* h = hist + static_cast<long long>(node) * total_bins * 2;
  const int lo = cut_ptrs[f], hi = cut_ptrs[f + 1];
  const long long tg = records[static_cast<long long>(node) * kNodeFields + kSumG];
  const long long th = records[static_cast<long long>(node) * kNodeFields + kSumH];
  // feature sums -> missing sums
  long long fg = 0, fh = 0;
  for (int b = lo + threadIdx.x; b < hi; b += blockDim.x) { fg += h[2 * b]; fh += h[2 * b + 1]; }
  block_scan2(fg, fh, warp_g, warp_h);  // the last thread now holds the block total
  __shared__ long long feat_tot[2];
  if (threadIdx.x == blockDim.x - 1) { feat_tot[0] = fg; feat_tot[1] = fh; }
  __syncthreads();
  const long long mg = tg - feat_tot[0], mh = th - feat_tot[1];
  const bool has_missing = mg != 0 || mh != 0;
  const double parent = split_gain(tg * p.inv_scale_g, th * p.inv_scale_h, p);

  double my_gain = 0.0;
  int my_key = -1;
  long long my_lg = 0, my_lh = 0;
  long long carry_g = 0, carry_h = 0;
  for (int chunk = lo; chunk < hi; chunk += blockDim.x) {
    const int b = chunk + threadIdx.x;
    long long cg = b < hi ? h[2 * b] : 0, ch = b < hi ? h[2 * b + 1] : 0;
    block_scan2(cg, ch, warp_g, warp_h);
    cg += carry_g;
    ch += carry_h;
    if (b < hi) {
      for (int d = 0; d < 2; ++d) {
        long long lg, lh;
        if (d == 0) { lg = cg; lh = ch; }
        else { if (!has_missing) break; lg = cg + mg; lh = ch + mh; }
        const long long rg = tg - lg, rh = th - lh;
        if (lh <= 0 || rh <= 0) continue;
        const double GL = lg * p.inv_scale_g, HL = lh * p.inv_scale_h;
        const double GR = rg * p.inv_scale_g, HR = rh * p.inv_scale_h;
        if (HL < p.mcw || HR < p.mcw) continue;
        const double gain = split_gain(GL, HL, p) + split_gain(GR, HR, p) - parent;
        if (!(gain > KERNEL_EPS)) continue;  // NaN never wins
        const int key = 2 * (b - lo) + d;
        if (better(gain, key, my_gain, my_key)) { my_gain = gain; my_key = key; my_lg = lg; my_lh = lh; }
      }
    }
    // the chunk's total becomes the next chunk's carry: the last thread holds it
    __shared__ long long chunk_tot[2];
    if (threadIdx.x == blockDim.x - 1) { chunk_tot[0] = cg; chunk_tot[1] = ch; }
    __syncthreads();
    carry_g = chunk_tot[0];
    carry_h = chunk_tot[1];
    __syncthreads();
  }
  // block arg-max: warps, then the first warp
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  for (int d = 16; d > 0; d >>= 1) {
    const double og = __shfl_down_sync(0xffffffffu, my_gain, d);
    const int ok = __shfl_down_sync(0xffffffffu, my_key, d);
    const long long olg = __shfl_down_sync(0xffffffffu, my_lg, d);
    const long long olh = __shfl_down_sync(0xffffffffu, my_lh, d);
    if (lane + d < 32 && better(og, ok, my_gain, my_key)) { my_gain = og; my_key = ok; my_lg = olg; my_lh = olh; }
  }
  if (lane == 0) { best_gain[warp] = my_gain; best_key[warp] = my_key; best_lg[warp] = my_lg; best_lh[warp] = my_lh; }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < n_warps; ++w) {
      if (better(best_gain[w], best_key[w], my_gain, my_key)) {
        my_gain = best_gain[w]; my_key = best_key[w]; my_lg = best_lg[w]; my_lh = best_lh[w];
      }
    }
    slot->gain = my_gain;
    slot->key = my_key;
    slot->left_g = my_lg;
    slot->left_h = my_lh;
  }
}

// Stage 2: one thread per node writes its decision into its record: feature, bin,
// default_left, gain (float64 bits), left G, left H.
extern "C" __global__ void best_per_node(const Candidate* __restrict__ cand, int n_nodes, int n_features,
                                         double gamma, long long* __restrict__ records) {
  const int node = blockIdx.x * blockDim.x + threadIdx.x;
  if (node >= n_nodes) return;
  if (records[static_cast<long long>(node) * kNodeFields + kFeature] == kNoNode) return;  // stays no node
  double best = KERNEL_EPS;
  int best_f = -1, best_key = 0;
  long long lg = 0, lh = 0;
  for (int f = 0; f < n_features; ++f) {
    const Candidate c = cand[static_cast<long long>(node) * n_features + f];
    if (c.key >= 0 && c.gain > best) { best = c.gain; best_f = f; best_key = c.key; lg = c.left_g; lh = c.left_h; }
  }
  if (best_f >= 0 && best < gamma) best_f = -1;
  long long* o = records + static_cast<long long>(node) * kNodeFields;
  o[kFeature] = best_f;
  o[kSplitBin] = best_f >= 0 ? best_key >> 1 : -1;
  o[kDefaultLeft] = best_f >= 0 ? (best_key & 1) : 0;
  o[kGain] = __double_as_longlong(best_f >= 0 ? best : 0.0);
  o[kLeftG] = best_f >= 0 ? lg : 0;
  o[kLeftH] = best_f >= 0 ? lh : 0;
}
