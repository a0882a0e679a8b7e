// Split evaluation: the best (feature, bin, missing direction) of every node.
//
// Thread mapping, stage 1 (``best_per_feature``): one warp per (node, feature). The warp
// sums the feature's bins (the missing sums are the node total minus them), then walks the
// bins in chunks of 32 with an int64 inclusive scan by shuffles, carrying each chunk's total:
// lane l holds the left sums of "bins <= chunk + l", tries missing-right then missing-left,
// and keeps its best. A warp arg-max (ties: lowest bin, then missing-right) writes one
// candidate per (node, feature). Stage 2 (``best_per_node``): one thread per node scans its
// features in order and keeps the first strictly larger gain, starting from kRtEps, and
// writes the decision into the node's record (the node totals are read from the records too).
// Together that is the CPU kernel's order: first maximum over (feature, bin, direction).
//
// Monotone constraints (``constrained`` != 0): node n's weights are bounded by
// bounds[2n], bounds[2n + 1] and feature f's sign is monotone[f]. Child weights are clipped
// into the node's bounds, a split whose clipped weights go against the sign is skipped, and
// every gain (the node's own too) is the gain of the clipped weights, as in XGBoost ``hist``
// (dgboost/constraints.py). ``child_bounds`` then gives the children of split nodes their
// bounds: the parent's, meeting at the mean of the two clipped weights on a constrained split.
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

// The weight clipped into a node's bounds [lo, hi] (monotone constraints).
__device__ __forceinline__ double bounded_weight(double G, double H, double lo, double hi,
                                                 const SplitParamsDev& p) {
  const double w = leaf_weight(G, H, p);
  if (w < lo) return lo;
  if (w > hi) return hi;
  return w;
}

// The gain of weight w: -(2 G w + (H + lambda) w^2) - 2 alpha |w| (XGBoost 3.4 with monotone
// constraints), in the CPU engine's order of operations.
__device__ __forceinline__ double gain_given_weight(double G, double H, double w, const SplitParamsDev& p) {
  if (H <= 0.0) return 0.0;
  return -(2.0 * G * w + (H + p.lam) * w * w) - 2.0 * p.alpha * fabs(w);
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

struct Candidate {
  double gain;
  long long left_g, left_h;
  int key;  // 2 * local bin + (1 if missing goes left); -1 when no valid split
  int pad;
};

// One warp per (node, feature): the feature's bins in chunks of 32 (bin lo + 32 c + lane,
// coalesced), int64 prefix sums by shuffles with the chunk totals carried, no shared memory and
// no block barriers. Every candidate's float64 arithmetic is the CPU engine's; the warp's
// arg-max uses ``better``, a total order on (gain, key), so the winner does not depend on the
// order in which lanes meet.
extern "C" __global__ void best_per_feature(
    const long long* __restrict__ hist, long long total_bins, const long long* __restrict__ records,
    const int* __restrict__ cut_ptrs, int n_features, int n_pairs, const bool* __restrict__ feature_mask,
    int mask_rows, const double* __restrict__ scales, double lam, double alpha, double mcw, double mds,
    const double* __restrict__ bounds, const signed char* __restrict__ monotone, int constrained,
    Candidate* __restrict__ out) {
  const SplitParamsDev p{1.0 / scales[0], 1.0 / scales[1], lam, alpha, mcw, mds};
  const int lane = threadIdx.x & 31;
  const long long pair = (blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x) >> 5;
  if (pair >= n_pairs) return;  // whole warps leave together
  const int node = static_cast<int>(pair / n_features);
  const int f = static_cast<int>(pair % n_features);
  Candidate* slot = out + pair;
  // mask_rows: 0 = every feature, 1 = one mask row for every node, else one row per node
  const long long mask_row = mask_rows == 1 ? 0 : node;
  const bool no_node = records[static_cast<long long>(node) * kNodeFields + kFeature] == kNoNode;
  if (no_node || (mask_rows != 0 && !feature_mask[mask_row * n_features + f])) {
    if (lane == 0) { slot->gain = 0.0; slot->key = -1; slot->left_g = 0; slot->left_h = 0; }
    return;
  }
  const long long* h = hist + static_cast<long long>(node) * total_bins * 2;
  const int lo = cut_ptrs[f], hi = cut_ptrs[f + 1];
  const long long tg = records[static_cast<long long>(node) * kNodeFields + kSumG];
  const long long th = records[static_cast<long long>(node) * kNodeFields + kSumH];
  // feature sums -> missing sums
  long long fg = 0, fh = 0;
  for (int b = lo + lane; b < hi; b += 32) { fg += h[2 * b]; fh += h[2 * b + 1]; }
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) {
    fg += __shfl_xor_sync(0xffffffffu, fg, d);
    fh += __shfl_xor_sync(0xffffffffu, fh, d);
  }
  const long long mg = tg - fg, mh = th - fh;
  const bool has_missing = mg != 0 || mh != 0;
  // the node's weight bounds (monotone constraints)
  const double w_lo = constrained ? bounds[2 * node] : 0.0, w_hi = constrained ? bounds[2 * node + 1] : 0.0;
  const int sign = constrained ? monotone[f] : 0;
  const double TG = tg * p.inv_scale_g, TH = th * p.inv_scale_h;
  const double parent = constrained ? gain_given_weight(TG, TH, bounded_weight(TG, TH, w_lo, w_hi, p), p)
                                    : split_gain(TG, TH, p);

  double my_gain = 0.0;
  int my_key = -1;
  long long my_lg = 0, my_lh = 0;
  long long carry_g = 0, carry_h = 0;
  for (int chunk = lo; chunk < hi; chunk += 32) {
    const int b = chunk + lane;
    long long cg = b < hi ? h[2 * b] : 0, ch = b < hi ? h[2 * b + 1] : 0;
    cg = warp_inclusive_scan(cg);
    ch = warp_inclusive_scan(ch);
    const long long chunk_g = __shfl_sync(0xffffffffu, cg, 31), chunk_h = __shfl_sync(0xffffffffu, ch, 31);
    cg += carry_g;
    ch += carry_h;
    carry_g += chunk_g;
    carry_h += chunk_h;
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
        double gain;
        if (constrained) {
          const double wl = bounded_weight(GL, HL, w_lo, w_hi, p), wr = bounded_weight(GR, HR, w_lo, w_hi, p);
          if ((sign > 0 && wl > wr) || (sign < 0 && wl < wr)) continue;  // against the constraint
          gain = gain_given_weight(GL, HL, wl, p) + gain_given_weight(GR, HR, wr, p) - parent;
        } else {
          gain = split_gain(GL, HL, p) + split_gain(GR, HR, p) - parent;
        }
        if (!(gain > KERNEL_EPS)) continue;  // NaN never wins
        const int key = 2 * (b - lo) + d;
        if (better(gain, key, my_gain, my_key)) { my_gain = gain; my_key = key; my_lg = lg; my_lh = lh; }
      }
    }
  }
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) {
    const double og = __shfl_xor_sync(0xffffffffu, my_gain, d);
    const int ok = __shfl_xor_sync(0xffffffffu, my_key, d);
    const long long olg = __shfl_xor_sync(0xffffffffu, my_lg, d);
    const long long olh = __shfl_xor_sync(0xffffffffu, my_lh, d);
    if (better(og, ok, my_gain, my_key)) { my_gain = og; my_key = ok; my_lg = olg; my_lh = olh; }
  }
  if (lane == 0) {
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

// Bounds of the children of k evaluated parents (monotone constraints): one thread per parent
// writes rows 2j (left) and 2j + 1 (right) of ``out`` (float64 (2k, 2)) from its record and
// bounds, with the CPU engine's arithmetic (dgboost/backend/_cpu_kernels.py ``child_bounds``).
// A parent that is not split, or splits on an unconstrained feature, passes its bounds on.
extern "C" __global__ void child_bounds(const long long* __restrict__ records, int k,
                                        const double* __restrict__ bounds, const signed char* __restrict__ monotone,
                                        const double* __restrict__ scales, double lam, double alpha,
                                        double mcw, double mds, double* __restrict__ out) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= k) return;
  const SplitParamsDev p{1.0 / scales[0], 1.0 / scales[1], lam, alpha, mcw, mds};
  const long long* r = records + static_cast<long long>(j) * kNodeFields;
  const double lo = bounds[2 * j], hi = bounds[2 * j + 1];
  double* left = out + 4LL * j;
  double* right = left + 2;
  left[0] = lo; left[1] = hi;
  right[0] = lo; right[1] = hi;
  const long long f = r[kFeature];
  const int sign = f >= 0 ? monotone[f] : 0;
  if (sign == 0) return;
  const long long lg = r[kLeftG], lh = r[kLeftH];
  const double wl = bounded_weight(lg * p.inv_scale_g, lh * p.inv_scale_h, lo, hi, p);
  const double wr = bounded_weight((r[kSumG] - lg) * p.inv_scale_g, (r[kSumH] - lh) * p.inv_scale_h, lo, hi, p);
  const double mid = (wl + wr) / 2.0;
  if (sign < 0) {
    left[0] = mid;
    right[1] = mid;
  } else {
    left[1] = mid;
    right[0] = mid;
  }
}

// The leaves of a tree grown in whole levels, from its records (every level's, concatenated):
// a record of feature -1 is a leaf (its slots below hold no node), and gets its segment and
// value float32(eta * weight), the weight as dgboost/backend/cpu.py's leaf_weights_on_host
// computes it; any other record gets an empty segment and 0. add_leaf_values then adds the
// values to the leaves' rows, so the margins need no read of the tree by the host.
// One thread per record.
extern "C" __global__ void record_leaf_values(const long long* __restrict__ records, int m,
                                              const double* __restrict__ scales, double lam, double alpha,
                                              double mcw, double mds, double eta, long long* __restrict__ segments,
                                              float* __restrict__ values) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= m) return;
  const SplitParamsDev p{1.0 / scales[0], 1.0 / scales[1], lam, alpha, mcw, mds};
  const long long* r = records + static_cast<long long>(j) * kNodeFields;
  if (r[kFeature] != -1) {
    segments[2 * j] = segments[2 * j + 1] = 0;
    values[j] = 0.0f;
    return;
  }
  segments[2 * j] = r[kBegin];
  segments[2 * j + 1] = r[kEnd];
  const double w = leaf_weight(static_cast<double>(r[kSumG]) * p.inv_scale_g,
                               static_cast<double>(r[kSumH]) * p.inv_scale_h, p);
  values[j] = static_cast<float>(w * eta);
}
