// Whether a row's value takes a TreeSHAP path element's branch, shared by the SHAP kernels
// (treeshap_rows.cu, treeshap_interventional.cu): the CPU engine's rule
// (dgboost/explain/paths.py element_is_on), compared in float32 like the CPU's.
#pragma once

__device__ __forceinline__ bool element_is_on(float x, float lower, float upper, bool on_missing) {
  const float fmax = 3.4028234663852886e38f;
  x = x > fmax ? fmax : x;  // +inf behaves as the largest float (the CPU engine's clamp)
  return (x >= lower && x < upper) || (x != x && on_missing);
}
