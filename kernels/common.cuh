// Records and helpers shared by every kernel, and with Python (dgboost/_layout.py,
// dgboost/tree.py). NVRTC has no C++ standard library: fixed-width integers come from
// CuPy's bundled libcu++ (<cuda/std/cstdint>). Offsets are checked by the layout tests
// (offsetof is not a constant expression under NVRTC).
#pragma once
#include <cuda/std/cstdint>

namespace dgboost {

using int32_t = cuda::std::int32_t;
using int64_t = cuda::std::int64_t;
using uint8_t = cuda::std::uint8_t;
using uint32_t = cuda::std::uint32_t;
using uint64_t = cuda::std::uint64_t;

// Quantised gradient pair: fixed point with a scale agreed by every worker, so that
// histogram sums are exact and independent of summation order.
struct GradPairInt {
  int64_t g;
  int64_t h;
};

// One node of a flattened ensemble (struct-of-arrays on the host; this record is the
// array-of-structs form used by prediction kernels).
struct Node {
  int32_t left;          // local index of the left child, -1 for a leaf
  int32_t right;         // local index of the right child, -1 for a leaf
  int32_t feature;       // split feature, -1 for a leaf
  float split_value;     // x < split_value goes left
  uint8_t default_left;  // missing values go left when 1
  uint8_t pad[3];
  float value;           // leaf output
};

// One element of a TreeSHAP path (GPUTreeShap's PathElement).
struct PathElement {
  int32_t path_idx;
  int32_t feature;       // -1 for the bias element
  int32_t group;
  uint8_t is_missing_branch;
  uint8_t pad[3];
  float lower;           // element is "on" for lower <= x < upper
  float upper;
  double zero_fraction;  // child cover / parent cover
  double v;              // leaf value of the path
};

// Columns of an int64 node record (dgboost/_layout.py NODE_RECORD_FIELDS, same order): the
// split decision, the node's global quantised sums and this rank's row segment.
enum NodeField : int {
  kFeature = 0,
  kSplitBin = 1,
  kDefaultLeft = 2,
  kGain = 3,
  kLeftG = 4,
  kLeftH = 5,
  kSumG = 6,
  kSumH = 7,
  kBegin = 8,
  kEnd = 9,
  kNodeFields = 10
};
// ``feature`` of a slot that holds no node (a child of a leaf in a level grown whole).
constexpr long long kNoNode = -2;

// The ``bits``-bit ELLPACK symbol starting at bit ``bit`` of the stream, low bits first
// (dgboost/backend/_ellpack.py: entry (r, f) starts at bit r * row_bits + offset_f). Widths
// are at most 17 bits, so with the shift (< 32) the symbol lies in one 64-bit pair of words;
// the buffer carries one padding word, so reading the word after the last is safe.
__device__ __forceinline__ uint32_t read_symbol(const uint32_t* __restrict__ packed, uint64_t bit, int bits) {
  const uint64_t word = bit >> 5;
  const uint32_t shift = static_cast<uint32_t>(bit & 31u);
  const uint64_t pair = static_cast<uint64_t>(__ldg(packed + word)) |
                        (static_cast<uint64_t>(__ldg(packed + word + 1)) << 32);
  return static_cast<uint32_t>(pair >> shift) & ((1u << bits) - 1u);
}

// The sum of ``v`` over this lane and the lanes below it in the warp (every lane takes part).
template <typename T>
__device__ __forceinline__ T warp_inclusive_scan(T v) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const T u = __shfl_up_sync(0xffffffffu, v, d);
    if (lane >= d) v += u;
  }
  return v;
}

// One block writes out[i] = value(0) + ... + value(i - 1) for i in [0, n], out[n] the total
// (n may exceed the block: each thread owns a contiguous run of values, the run totals are
// scanned in ``partial``, blockDim.x int64 of shared memory). Values are read twice.
template <typename Value>
__device__ void block_exclusive_scan(int n, Value value, long long* __restrict__ out, long long* partial) {
  const int per = (n + blockDim.x - 1) / blockDim.x;
  const int lo = min(n, static_cast<int>(threadIdx.x) * per);
  const int hi = min(n, lo + per);
  long long own = 0;
  for (int i = lo; i < hi; ++i) own += value(i);
  partial[threadIdx.x] = own;
  __syncthreads();
  for (int d = 1; d < static_cast<int>(blockDim.x); d <<= 1) {
    const long long v = threadIdx.x >= static_cast<unsigned>(d) ? partial[threadIdx.x - d] : 0;
    __syncthreads();
    partial[threadIdx.x] += v;
    __syncthreads();
  }
  long long run = partial[threadIdx.x] - own;
  for (int i = lo; i < hi; ++i) {
    out[i] = run;
    run += value(i);
  }
  if (threadIdx.x == blockDim.x - 1) out[n] = partial[blockDim.x - 1];
}

// Integer atomics on signed 64-bit sums: two's complement addition of the unsigned bit
// pattern is the signed sum, exact and independent of the order of arrival.
__device__ __forceinline__ void atomic_add_i64(int64_t* address, int64_t value) {
  atomicAdd(reinterpret_cast<unsigned long long*>(address), static_cast<unsigned long long>(value));
}

// Add a 32-bit signed value to a 64-bit sum with 32-bit atomics (XGBoost's AtomicAdd64As32
// idea): the low word takes the value, the high word its sign extension plus the carry out
// of the low word, and only when that is non-zero. Each call adds exactly the value, so the
// final sum is exact in any order; most calls cost one native 32-bit atomic instead of a
// 64-bit one.
__device__ __forceinline__ void atomic_add_i32_to_i64(int64_t* address, int32_t value) {
  unsigned int* words = reinterpret_cast<unsigned int*>(address);
  const unsigned int low = static_cast<unsigned int>(value);
  const unsigned int old = atomicAdd(words, low);
  const unsigned int carry = (old + low < old) ? 1u : 0u;
  const unsigned int high = (value < 0 ? 0xffffffffu : 0u) + carry;
  if (high != 0u) atomicAdd(words + 1, high);
}

}  // namespace dgboost

// The Python side (dgboost/_layout.py) uses the same sizes.
static_assert(sizeof(dgboost::GradPairInt) == 16, "GradPairInt layout");
static_assert(sizeof(dgboost::Node) == 24, "Node layout");
static_assert(sizeof(dgboost::PathElement) == 40, "PathElement layout");
