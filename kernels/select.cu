// Selections from large device arrays by dgboost's own kernels: CuPy's versions compile
// kernels specialised for large arrays (a scan for ``flatnonzero``, 64-bit indexing for an
// array of more than 2 GiB) at their first large call, which put CUDA compiles into the first
// big training job of a process, after a small job had warmed everything else.
//
// The indices of a boolean mask's true entries, in order (``numpy.flatnonzero``), in two
// passes. A block takes kSelectThreads * kSelectPerThread consecutive entries, a thread
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

// out (m, n_cols), C order: the rows ``rows`` of the float32 matrix ``values`` (row and
// column strides in elements), a thread an entry, 64-bit offsets. CuPy's ``values[rows]``
// compiles a gather with 64-bit indexing for a matrix of more than 2 GiB at its first such
// call (a rank's 57.5M x 13 airline-like rows: 0.19 s of the first large job).
extern "C" __global__ void take_matrix_rows(const float* __restrict__ values, long long row_stride,
                                            long long col_stride, int n_cols, const long long* __restrict__ rows,
                                            long long m, float* __restrict__ out) {
  const long long total = m * n_cols;
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long i = e / n_cols;
    const int j = static_cast<int>(e - i * n_cols);
    out[e] = values[rows[i] * row_stride + j * col_stride];
  }
}

// first[0]: the lowest index of an infinite entry among the n float32 ``values`` (C order),
// left as it was (n, set by the caller) when there is none. One pass over the matrix and one
// word read back; CuPy's isinf and any on each chunk of rows compiled kernels of 64-bit
// indexing for a matrix of more than 2 GiB.
extern "C" __global__ void first_infinite(const float* __restrict__ values, long long n,
                                          unsigned long long* __restrict__ first) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    if (isinf(values[i])) {
      atomicMin(first, static_cast<unsigned long long>(i));
      return;  // a later entry of this thread is larger
    }
  }
}
