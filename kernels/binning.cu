// Binning raw float32 values into an ELLPACK matrix of bit-packed local bin indices, each
// feature at its own width (dgboost/backend/_ellpack.py).
//
// Thread mapping: one thread per matrix entry (row r, feature f), grid-stride over the
// n * F entries of a row-major input, so a warp reads 32 consecutive floats (coalesced).
// Each thread finds the entry's bin by binary search over the feature's cuts (cached in
// L1/L2: a few KB per feature) and ORs the symbol into the zeroed output at bit
// r * row_bits + offset_f, ``layout[f] = (offset_f, width_f)``. Neighbouring threads share
// output words, hence atomicOr (OR commutes: the result does not depend on the order).
// Missing (NaN) is the feature's own symbol, its number of bins.
// Memory traffic: 4 bytes read and width_f/8 bytes written per entry.
#include "common.cuh"

using namespace dgboost;

extern "C" __global__ void bin_and_pack(const float* __restrict__ values, long long n_entries,
                                        int n_features, const float* __restrict__ cut_values,
                                        const int* __restrict__ cut_ptrs, const int2* __restrict__ layout,
                                        int row_bits, unsigned int* __restrict__ packed) {
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n_entries;
       e += (long long)gridDim.x * blockDim.x) {
    const long long r = e / n_features;
    const int f = static_cast<int>(e - r * n_features);
    const float x = values[e];
    const int lo = cut_ptrs[f];
    const int hi = cut_ptrs[f + 1];
    unsigned symbol;
    if (isnan(x)) {
      symbol = static_cast<unsigned>(hi - lo);
    } else {
      // first cut > x (searchsorted side='right'), clipped to the last bin: as the CPU kernel
      int a = lo, b = hi;
      while (a < b) {
        const int mid = (a + b) >> 1;
        if (cut_values[mid] <= x) a = mid + 1; else b = mid;
      }
      int local = a - lo;
      if (local > hi - lo - 1) local = hi - lo - 1;
      symbol = static_cast<unsigned>(local);
    }
    const int2 lay = layout[f];
    const unsigned long long bit = static_cast<unsigned long long>(r) * row_bits + lay.x;
    const unsigned long long word = bit >> 5;
    const unsigned shift = static_cast<unsigned>(bit & 31u);
    atomicOr(packed + word, symbol << shift);
    if (shift + lay.y > 32) atomicOr(packed + word + 1, symbol >> (32 - shift));
  }
}

// Unpack symbols back to a dense (n, F) uint16 matrix, each feature's missing symbol
// reported as ``missing`` (tests and debugging only).
extern "C" __global__ void unpack(const unsigned int* __restrict__ packed, const int* __restrict__ cut_ptrs,
                                  const int2* __restrict__ layout, int row_bits, int n_features,
                                  unsigned missing, long long n_entries, unsigned short* __restrict__ out) {
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n_entries;
       e += (long long)gridDim.x * blockDim.x) {
    const long long r = e / n_features;
    const int f = static_cast<int>(e - r * n_features);
    const int2 lay = layout[f];
    const unsigned s = read_symbol(packed, static_cast<uint64_t>(r) * row_bits + lay.x, lay.y);
    const unsigned own_missing = static_cast<unsigned>(cut_ptrs[f + 1] - cut_ptrs[f]);
    out[e] = static_cast<unsigned short>(s == own_missing ? missing : s);
  }
}
