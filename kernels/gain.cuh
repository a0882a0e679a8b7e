// Split gains and leaf weights in float64, operation by operation the CPU engine's
// expressions (dgboost/backend/_cpu_kernels.py: _threshold_l1, _leaf_weight, _bounded_weight,
// _gain_given_weight, _gain). Modules are compiled with --fmad=false, so both devices round
// every gain the same way. Used by split.cu (hist) and exact_split.cu (exact).
#pragma once

namespace dgboost_gain {

struct GainParams {
  double inv_scale_g, inv_scale_h, lam, alpha, mcw, mds;
};

__device__ __forceinline__ double threshold_l1(double G, double alpha) {
  if (G > alpha) return G - alpha;
  if (G < -alpha) return G + alpha;
  return 0.0;
}

__device__ __forceinline__ double leaf_weight(double G, double H, const GainParams& p) {
  if (H < p.mcw || H <= 0.0) return 0.0;
  double w = -threshold_l1(G, p.alpha) / (H + p.lam);
  if (p.mds != 0.0 && fabs(w) > p.mds) w = w > 0 ? p.mds : -p.mds;
  return w;
}

// The weight clipped into a node's bounds [lo, hi] (monotone constraints).
__device__ __forceinline__ double bounded_weight(double G, double H, double lo, double hi, const GainParams& p) {
  const double w = leaf_weight(G, H, p);
  if (w < lo) return lo;
  if (w > hi) return hi;
  return w;
}

// -(2 G w + (H + lambda) w^2) - 2 alpha |w|; 0 without hessian.
__device__ __forceinline__ double gain_given_weight(double G, double H, double w, const GainParams& p) {
  if (H <= 0.0) return 0.0;
  return -(2.0 * G * w + (H + p.lam) * w * w) - 2.0 * p.alpha * fabs(w);
}

__device__ __forceinline__ double split_gain(double G, double H, const GainParams& p) {
  if (H < p.mcw || H <= 0.0) return 0.0;
  if (p.mds == 0.0) {
    const double t = threshold_l1(G, p.alpha);
    return t * t / (H + p.lam);
  }
  const double w = leaf_weight(G, H, p);
  return -(2.0 * G * w + (H + p.lam) * w * w) - 2.0 * p.alpha * fabs(w);
}

// The gain of the split with left sums (lg, lh) of a node of totals (tg, th), or false
// where it is not valid (a side without hessian or under min_child_weight, or clipped
// weights against a monotone constraint): dgboost/backend/_cpu_exact.py candidate_gain.
__device__ __forceinline__ bool candidate_gain(long long lg, long long lh, long long tg, long long th,
                                               const GainParams& p, double lo, double hi, int sign,
                                               int constrained, double parent, double* gain) {
  const long long rg = tg - lg, rh = th - lh;
  if (lh <= 0 || rh <= 0) return false;
  const double GL = lg * p.inv_scale_g, HL = lh * p.inv_scale_h;
  const double GR = rg * p.inv_scale_g, HR = rh * p.inv_scale_h;
  if (HL < p.mcw || HR < p.mcw) return false;
  if (constrained) {
    const double wl = bounded_weight(GL, HL, lo, hi, p), wr = bounded_weight(GR, HR, lo, hi, p);
    if ((sign > 0 && wl > wr) || (sign < 0 && wl < wr)) return false;
    *gain = gain_given_weight(GL, HL, wl, p) + gain_given_weight(GR, HR, wr, p) - parent;
    return true;
  }
  *gain = split_gain(GL, HL, p) + split_gain(GR, HR, p) - parent;
  return true;
}

}  // namespace dgboost_gain
