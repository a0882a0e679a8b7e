// Gradient quantisation: float32 gradient/hessian -> int32 fixed point (round half to even,
// as NumPy's rint), rows left out by subsampling -> (0, 0).
//
// Thread mapping: one thread per row, grid-stride; reads 8 bytes (+1 for keep), writes 8.
// The arithmetic is float64 as on the CPU: (double)g * scale is exact for a power-of-two
// scale, so both devices produce the same integers.
#include "common.cuh"

extern "C" __global__ void quantise(const float* __restrict__ grad, const float* __restrict__ hess,
                                    long long stride, const bool* __restrict__ keep, int has_keep, long long n,
                                    const double* __restrict__ scales, int* __restrict__ out) {
  const double scale_g = scales[0], scale_h = scales[1];
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    int g = 0, h = 0;
    if (!has_keep || keep[i]) {
      g = static_cast<int>(rint(static_cast<double>(grad[i * stride]) * scale_g));
      h = static_cast<int>(rint(static_cast<double>(hess[i * stride]) * scale_h));
    }
    out[2 * i] = g;
    out[2 * i + 1] = h;
  }
}

// Column sums of the quantised pairs (the root node's totals), int64.
// Thread mapping: grid-stride over rows, warp-shuffle then shared-memory block reduction, one
// pair of integer atomics per block (exact in any order). Reads 8 bytes per row.
extern "C" __global__ void gpair_sums(const int2* __restrict__ gpair, long long n, long long* __restrict__ out) {
  long long g = 0, h = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    const int2 p = gpair[i];
    g += p.x;
    h += p.y;
  }
  for (int d = 16; d > 0; d >>= 1) {
    g += __shfl_down_sync(0xffffffffu, g, d);
    h += __shfl_down_sync(0xffffffffu, h, d);
  }
  __shared__ long long sg[32], sh[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) { sg[warp] = g; sh[warp] = h; }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < (int)(blockDim.x >> 5); ++w) { g += sg[w]; h += sh[w]; }
    dgboost::atomic_add_i64(reinterpret_cast<dgboost::int64_t*>(out), g);
    dgboost::atomic_add_i64(reinterpret_cast<dgboost::int64_t*>(out) + 1, h);
  }
}

// max |grad| and max |hess| of a (possibly strided) float32 column, as float bit patterns:
// for non-negative floats the unsigned order of the bits is the numeric order, and NaN's
// bits (0x7fc00000) sort above inf, so a NaN anywhere shows up in the result.
// Thread mapping: grid-stride over rows, warp then block max, one atomicMax pair per block.
extern "C" __global__ void abs_max(const float* __restrict__ grad, const float* __restrict__ hess,
                                   long long stride, long long n, unsigned int* __restrict__ out) {
  unsigned mg = 0, mh = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    mg = max(mg, __float_as_uint(fabsf(grad[i * stride])));
    mh = max(mh, __float_as_uint(fabsf(hess[i * stride])));
  }
  for (int d = 16; d > 0; d >>= 1) {
    mg = max(mg, __shfl_down_sync(0xffffffffu, mg, d));
    mh = max(mh, __shfl_down_sync(0xffffffffu, mh, d));
  }
  __shared__ unsigned smg[32], smh[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) { smg[warp] = mg; smh[warp] = mh; }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < (int)(blockDim.x >> 5); ++w) { mg = max(mg, smg[w]); mh = max(mh, smh[w]); }
    atomicMax(out, mg);
    atomicMax(out + 1, mh);
  }
}

// The fixed-point scale of a maximum given as float32 bits (dgboost/_fixed_point.py): the
// largest power of two s with max * s <= 2**30, or 1.0 when the maximum is not positive and
// finite. With max = frac * 2**e (frac in [0.5, 1)), ceil(log2 max) is e - 1 exactly when
// frac is 0.5 (a power of two) and e otherwise, so no logarithm is rounded.
__device__ double fixed_point_scale(unsigned bits) {
  const float m = __uint_as_float(bits);
  if (!(m > 0.0f) || isinf(m)) return 1.0;  // NaN fails m > 0
  int e = 0;
  const double frac = frexp(static_cast<double>(m), &e);
  const int exponent = 30 - (frac == 0.5 ? e - 1 : e);
  return ldexp(1.0, min(exponent, 1000));
}

// scales[0..1] from the global maxima's bits (abs_max's output after the max allreduce), on
// the device, so that quantising needs no read of the maxima by the host. One thread each.
extern "C" __global__ void fixed_point_scales(const unsigned int* __restrict__ bits, double* __restrict__ scales) {
  if (blockIdx.x == 0 && threadIdx.x < 2) scales[threadIdx.x] = fixed_point_scale(bits[threadIdx.x]);
}
