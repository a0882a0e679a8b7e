// Row hashing on the device (dgboost/quantile.py ``hashed_below``): one thread a row, nothing
// but the output written. The NumPy form (``hashed_uniform(...) < threshold``) makes a uint64
// or float64 temporary per operation, about 380 MiB alive at once on 10M rows, the peak of a
// GPU job's set-up; this makes none.
//
// Bits: splitmix64 wraps modulo 2**64 as NumPy's and CuPy's uint64 arithmetic does; the top 53
// bits of the hash convert to float64 exactly and the scaling by 2**-53 is exact, so the
// comparison is the host's, value for value.
#include "common.cuh"

__device__ __forceinline__ unsigned long long splitmix64(unsigned long long z) {
  z += 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// out[i] = uniform(global_index[i]) < threshold, the global index being ``offset + i`` unless
// ``use_index``; ``key`` is the (seed, stream) key of ``quantile._hash_key``.
extern "C" __global__ void hashed_below(const long long* __restrict__ global_index, int use_index, long long offset,
                                        long long n, unsigned long long key, double threshold,
                                        bool* __restrict__ out) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long g = use_index ? global_index[i] : offset + i;
    const unsigned long long h = splitmix64(static_cast<unsigned long long>(g) ^ key);
    const double u = static_cast<double>(h >> 11) * (1.0 / 9007199254740992.0);
    out[i] = u < threshold;
  }
}
