// A CUDA execution model on host threads, for checking kernels/*.cu where no GPU is present
// (tests/cpu/_cuda_emulator.py compiles a kernel file with this header in front).
//
// A launch runs its blocks one after another; a block runs blockDim.x host threads.
// __syncthreads is a barrier of the block's live threads; a warp's 32 threads exchange
// values through a per-warp buffer between two barriers of the warp (so shuffles need every
// live lane of the warp, as on a GPU with converged warps). ``__shared__`` variables become
// function statics (one block at a time shares them), ``extern __shared__`` the buffer
// ``dg_dynamic_shared``. Float arithmetic is the host's IEEE double/float without
// contraction (compiled with -ffp-contract=off), as the kernels' --fmad=false.
#pragma once
#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

struct alignas(16) longlong2 {
  long long x, y;
};
struct alignas(8) int2 {
  int x, y;
};
struct alignas(16) int4 {
  int x, y, z, w;
};
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
inline longlong2 make_longlong2(long long x, long long y) { return {x, y}; }
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};
inline thread_local dim3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;

struct DgWarp {
  std::barrier<> bar{32};
  unsigned long long buf[32];
};
struct DgBlock {
  std::barrier<>* bar;
  DgWarp* warps;
};
inline DgBlock dg_block;
alignas(16) inline unsigned char dg_dynamic_shared_bytes[1 << 18];

inline void __syncthreads() { dg_block.bar->arrive_and_wait(); }
// a barrier of the warp's 32 threads, which orders their memory accesses as on the GPU
inline void __syncwarp(unsigned = 0xffffffffu) { dg_block.warps[threadIdx.x >> 5].bar.arrive_and_wait(); }
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }

template <typename T>
inline T dg_exchange(T v, int src) {
  static_assert(sizeof(T) <= 8, "shuffle of at most 8 bytes");
  DgWarp& w = dg_block.warps[threadIdx.x >> 5];
  const int lane = threadIdx.x & 31;
  unsigned long long raw = 0;
  std::memcpy(&raw, &v, sizeof(T));
  w.buf[lane] = raw;
  w.bar.arrive_and_wait();
  T out;
  raw = w.buf[src];
  std::memcpy(&out, &raw, sizeof(T));
  w.bar.arrive_and_wait();
  return out;
}
template <typename T>
inline T __shfl_xor_sync(unsigned, T v, int d) { return dg_exchange(v, (threadIdx.x & 31) ^ d); }
template <typename T>
inline T __shfl_up_sync(unsigned, T v, unsigned d) {
  const int lane = threadIdx.x & 31;
  return dg_exchange(v, lane >= static_cast<int>(d) ? lane - static_cast<int>(d) : lane);
}
template <typename T>
inline T __shfl_down_sync(unsigned, T v, unsigned d) {
  const int lane = threadIdx.x & 31;
  return dg_exchange(v, lane + static_cast<int>(d) < 32 ? lane + static_cast<int>(d) : lane);
}
template <typename T>
inline T __shfl_sync(unsigned, T v, int src) { return dg_exchange(v, src & 31); }
inline unsigned __ballot_sync(unsigned, int pred) {
  unsigned out = 0;
  for (int l = 0; l < 32; ++l) out |= (dg_exchange<int>(pred ? 1 : 0, l) ? 1u : 0u) << l;
  return out;
}
inline int __popc(unsigned v) { return __builtin_popcount(v); }
inline int __ffs(int v) { return __builtin_ffs(v); }
inline int __clz(int v) { return v == 0 ? 32 : __builtin_clz(static_cast<unsigned>(v)); }
// the low 32 bits of (hi:lo) >> (shift & 31), as the hardware's funnel shift
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned shift) {
  return static_cast<unsigned>(((static_cast<unsigned long long>(hi) << 32) | lo) >> (shift & 31u));
}
inline long long __double_as_longlong(double d) {
  long long out;
  std::memcpy(&out, &d, 8);
  return out;
}
template <typename T>
inline T __ldg(const T* p) { return *p; }
template <typename T>
inline T __ldcg(const T* p) {
  T v;
  __atomic_load(p, &v, __ATOMIC_SEQ_CST);  // the generic form: float64 too
  return v;
}
inline unsigned atomicAdd(unsigned* p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
  return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
inline unsigned atomicOr(unsigned* p, unsigned v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }
inline unsigned atomicMax(unsigned* p, unsigned v) {
  unsigned old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
  while (old < v && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
  }
  return old;
}
inline unsigned __float_as_uint(float f) {
  unsigned out;
  std::memcpy(&out, &f, 4);
  return out;
}
inline float __uint_as_float(unsigned u) {
  float out;
  std::memcpy(&out, &u, 4);
  return out;
}
using std::isinf;
inline int atomicAdd(int* p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
using std::fabs;
using std::isnan;
template <typename A, typename B>
inline std::common_type_t<A, B> min(A a, B b) { return a < b ? a : b; }
template <typename A, typename B>
inline std::common_type_t<A, B> max(A a, B b) { return a < b ? b : a; }

// 64-bit unsigned max/min (kernels/exact_split.cu's choice of a node's best split)
inline unsigned long long atomicMax(unsigned long long* p, unsigned long long v) {
  unsigned long long old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
  while (old < v && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
  }
  return old;
}
inline unsigned long long atomicMin(unsigned long long* p, unsigned long long v) {
  unsigned long long old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
  while (old > v && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
  }
  return old;
}
inline float fabsf(float x) { return std::fabs(x); }

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)

// -- launching ------------------------------------------------------------------------------
struct DgParam {
  int size;   // bytes
  int kind;   // 0 integer, 1 floating point, 2 pointer, 3 other
};
template <typename T>
constexpr DgParam dg_param() {
  return {static_cast<int>(sizeof(T)), std::is_pointer_v<T> ? 2 : std::is_floating_point_v<T> ? 1
                                                             : std::is_integral_v<T>        ? 0
                                                                                            : 3};
}

template <typename... A, std::size_t... I>
void dg_call(void (*k)(A...), void** args, std::index_sequence<I...>) {
  k(*static_cast<std::remove_cv_t<A>*>(args[I])...);
}

struct DgKernel {
  const char* name;
  void (*run)(void*, void**);
  void* fn;
  int n_params;
  const DgParam* params;
};

template <typename... A>
struct DgSig {
  static constexpr DgParam params[sizeof...(A) + 1] = {dg_param<A>()..., {0, 0}};
  static void run(void* fn, void** args) {
    dg_call(reinterpret_cast<void (*)(A...)>(fn), args, std::index_sequence_for<A...>{});
  }
};
template <typename... A>
DgKernel dg_kernel(const char* name, void (*k)(A...)) {
  return {name, &DgSig<A...>::run, reinterpret_cast<void*>(k), static_cast<int>(sizeof...(A)), DgSig<A...>::params};
}

// the kernels' 64-bit integer names are the device's (long long), apart from the host's
// global ones (long) that the standard headers above declared
#define int64_t dg_int64_t
#define uint64_t dg_uint64_t
