// Record layouts as the device compiler lays them out: sizes and field offsets written by
// one thread, compared with dgboost/_layout.py by tests/gpu/test_cuda_kernels.py.
#include "common.cuh"

using namespace dgboost;

template <typename T, typename F>
__device__ long long offset_of(const T& record, const F& field) {
  return reinterpret_cast<const char*>(&field) - reinterpret_cast<const char*>(&record);
}

extern "C" __global__ void record_layout(long long* out) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  GradPairInt g{};
  Node n{};
  PathElement e{};
  long long* o = out;
  *o++ = sizeof(GradPairInt); *o++ = offset_of(g, g.g); *o++ = offset_of(g, g.h);
  *o++ = sizeof(Node); *o++ = offset_of(n, n.left); *o++ = offset_of(n, n.right); *o++ = offset_of(n, n.feature);
  *o++ = offset_of(n, n.split_value); *o++ = offset_of(n, n.default_left); *o++ = offset_of(n, n.value);
  *o++ = sizeof(PathElement); *o++ = offset_of(e, e.path_idx); *o++ = offset_of(e, e.feature);
  *o++ = offset_of(e, e.group); *o++ = offset_of(e, e.is_missing_branch); *o++ = offset_of(e, e.lower);
  *o++ = offset_of(e, e.upper); *o++ = offset_of(e, e.zero_fraction); *o++ = offset_of(e, e.v);
}
