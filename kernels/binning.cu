// Binning raw float32 values into an ELLPACK matrix of bit-packed local bin indices.
//
// Thread mapping: one thread per matrix entry (row r, feature f), grid-stride over the
// n * F entries of a row-major input, so a warp reads 32 consecutive floats (coalesced).
// Each thread finds the entry's bin by binary search over the feature's cuts (cached in
// L1/L2: a few KB per feature) and ORs the symbol into the zeroed output at bit
// (r * F + f) * bits. Neighbouring threads share output words, hence atomicOr (OR commutes:
// the result does not depend on the order). Missing (NaN) is its own symbol, ``missing``.
// Memory traffic: 4 bytes read and bits/8 bytes written per entry.
#include "common.cuh"

using namespace dgboost;

extern "C" __global__ void bin_and_pack(const float* __restrict__ values, long long n_entries,
                                        int n_features, const float* __restrict__ cut_values,
                                        const int* __restrict__ cut_ptrs, int bits, unsigned missing,
                                        unsigned int* __restrict__ packed) {
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n_entries;
       e += (long long)gridDim.x * blockDim.x) {
    const int f = static_cast<int>(e % n_features);
    const float x = values[e];
    unsigned symbol;
    if (isnan(x)) {
      symbol = missing;
    } else {
      // first cut > x (searchsorted side='right'), clipped to the last bin: as the CPU kernel
      const int lo = cut_ptrs[f];
      const int hi = cut_ptrs[f + 1];
      int a = lo, b = hi;
      while (a < b) {
        const int mid = (a + b) >> 1;
        if (cut_values[mid] <= x) a = mid + 1; else b = mid;
      }
      int local = a - lo;
      if (local > hi - lo - 1) local = hi - lo - 1;
      symbol = static_cast<unsigned>(local);
    }
    const unsigned long long bit = static_cast<unsigned long long>(e) * bits;
    const unsigned long long word = bit >> 5;
    const unsigned shift = static_cast<unsigned>(bit & 31u);
    atomicOr(packed + word, symbol << shift);
    if (shift + bits > 32) atomicOr(packed + word + 1, symbol >> (32 - shift));
  }
}

// Unpack symbols back to a dense (n, F) uint16 matrix (tests and debugging only).
extern "C" __global__ void unpack(const unsigned int* __restrict__ packed, int bits, long long n_entries,
                                  unsigned short* __restrict__ out) {
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n_entries;
       e += (long long)gridDim.x * blockDim.x) {
    out[e] = static_cast<unsigned short>(read_symbol(packed, bits, static_cast<uint64_t>(e)));
  }
}
