// The indices of a boolean mask's true entries, in order (``numpy.flatnonzero``), in two
// passes of dgboost's own kernels: CuPy's ``flatnonzero`` compiles a scan kernel specialised
// for large arrays at its first large call, which put a CUDA compile into the first big
// training job of a process (its sketch sample), after a small job had warmed everything else.
//
// A block takes kSelectThreads * kSelectPerThread consecutive entries, a thread
// kSelectPerThread of them: pass 1 writes each block's count; the host sums them into each
// block's first output position; pass 2 scans the threads' counts in the block and writes
// the indices, each thread its own in order.
#include "common.cuh"

constexpr int kSelectThreads = 256;
constexpr int kSelectPerThread = 8;

__device__ __forceinline__ int select_count(const bool* __restrict__ mask, long long n, long long first) {
  int c = 0;
#pragma unroll
  for (int j = 0; j < kSelectPerThread; ++j) c += first + j < n && mask[first + j];
  return c;
}

// block_count[b]: the true entries of block b's entries
extern "C" __global__ void __launch_bounds__(kSelectThreads)
    true_counts(const bool* __restrict__ mask, long long n, int* __restrict__ block_count) {
  __shared__ int counts[kSelectThreads];
  const long long first = (blockIdx.x * static_cast<long long>(kSelectThreads) + threadIdx.x) * kSelectPerThread;
  counts[threadIdx.x] = select_count(mask, n, first);
  __syncthreads();
  for (int s = kSelectThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) counts[threadIdx.x] += counts[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) block_count[blockIdx.x] = counts[0];
}

// out[block_start[b] + k]: the k-th true entry's index among block b's entries
extern "C" __global__ void __launch_bounds__(kSelectThreads)
    true_indices(const bool* __restrict__ mask, long long n, const long long* __restrict__ block_start,
                 long long* __restrict__ out) {
  __shared__ int counts[kSelectThreads];
  const long long first = (blockIdx.x * static_cast<long long>(kSelectThreads) + threadIdx.x) * kSelectPerThread;
  const int c = select_count(mask, n, first);
  counts[threadIdx.x] = c;
  __syncthreads();
  for (int s = 1; s < kSelectThreads; s <<= 1) {  // inclusive scan of the threads' counts
    const int v = threadIdx.x >= s ? counts[threadIdx.x - s] : 0;
    __syncthreads();
    counts[threadIdx.x] += v;
    __syncthreads();
  }
  long long pos = block_start[blockIdx.x] + counts[threadIdx.x] - c;
#pragma unroll
  for (int j = 0; j < kSelectPerThread; ++j)
    if (first + j < n && mask[first + j]) out[pos++] = first + j;
}
