// Whether a row's value takes a TreeSHAP path element's branch, shared by the SHAP kernels
// (treeshap_rows.cu, treeshap_interventional.cu): the CPU engine's rule
// (dgboost/explain/paths.py element_is_on), compared in float32 like the CPU's.
#pragma once

__device__ __forceinline__ bool element_is_on(float x, float lower, float upper, bool on_missing) {
  const float fmax = 3.4028234663852886e38f;
  x = x > fmax ? fmax : x;  // +inf behaves as the largest float (the CPU engine's clamp)
  return (x >= lower && x < upper) || (x != x && on_missing);
}

// Whether the non-missing value x lies in the category set at cat_pool[off] (layout
// [n_words, outside, words...], dgboost/explain/paths.py): bit int(x) when
// 0 <= x < 32 n_words (truncated, XGBoost's Decision), else the set's ``outside`` flag (an
// invalid or unseen category goes left). The CPU's _in_category_set.
__device__ __forceinline__ bool in_category_set(float x, const unsigned* __restrict__ cat_pool, long long off) {
  const unsigned nw = cat_pool[off];
  if (x >= 0.0f && x < 32.0f * (float)nw) {
    const unsigned c = (unsigned)x;
    return ((cat_pool[off + 2 + (c >> 5)] >> (c & 31u)) & 1u) != 0u;
  }
  return cat_pool[off + 1] != 0u;
}

// element_is_on for element e of a table that may have category sets. ``cat_pool[0]`` is a
// header (dgboost/explain/paths.py flagged_category_arrays): 0 for a table without categorical
// splits (``cat_offset`` is then never read), 1 when ``cat_offset[e]`` holds element e's set
// offset in ``cat_pool`` (-1: none). An element with a set is on when x is in its interval
// and its set (or missing on the missing branch). The CPU's element_is_on_cat.
__device__ __forceinline__ bool element_is_on(float x, long long e, const float* __restrict__ lower,
                                              const float* __restrict__ upper,
                                              const unsigned char* __restrict__ missing,
                                              const long long* __restrict__ cat_offset,
                                              const unsigned* __restrict__ cat_pool) {
  const long long off = cat_pool[0] != 0u ? cat_offset[e] : -1;
  if (off < 0) return element_is_on(x, lower[e], upper[e], missing[e] != 0);
  if (x != x) return missing[e] != 0;
  const float fmax = 3.4028234663852886e38f;
  x = x > fmax ? fmax : x;
  return x >= lower[e] && x < upper[e] && in_category_set(x, cat_pool, off);
}
