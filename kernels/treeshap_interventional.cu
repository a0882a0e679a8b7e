// Interventional (marginal) TreeSHAP over a background data set with one thread per row: the
// CPU engine's kernels (dgboost/explain/interventional.py: _interventional_kernel,
// _interventional_logistic_kernel, _margins_from_bits) ported operation for operation, so
// every value gets its additions in the CPU's order and is bitwise the CPU's, identical over
// reruns and whatever the batching of the rows.
//
// Thread mapping: blockIdx.y is an output group; each thread owns one row of X (the CPU's
// prange over rows) and walks the group's paths in path order (group_paths: the paths of each
// group in path order, group_ptr: where each group starts). interventional_rows loops, per
// path, over the background rows in order; interventional_logistic_rows loops over the
// background rows, then the paths, as the CPU does. Every lane of a warp is on the same path
// and background row, so path data and background words are broadcast loads and the control
// flow only diverges where rows reach different leaves. The CPU adds path p's values to
// out[r, path_group[p]] while walking all paths, so per (row, group, feature) the order of the
// additions is the group's path order either way.
//
// On-bits: bit j of word w of a path is element s + 63 w + j (s: the path's first non-bias
// element), on for row x when element_is_on (the CPU's rule and +inf clamp); int64 words of
// 63 elements, ``word_offsets[p]`` to ``word_offsets[p + 1]``, so any path length works. The
// background's words come from the host (rbitsT, (n_words, n_ref): background row fastest, the
// CPU's array), ``full`` has every element's bit set. A row's words are computed on the fly,
// per path (path_word: the CPU's _on_bits for one word), instead of being stored for every
// path, so no (n, n_words) buffer bounds how many rows a launch holds: in the plain kernel a
// path of at most 63 elements keeps its word in a register for all background rows (the
// logistic kernel, background rows outermost, computes it once per background row and path);
// longer paths (more than 63 distinct features) recompute a word where it is read.
//
// A pair (row, background row q) reaches path p's leaf iff (x | r) == full word by word; then
// with X = x & ~r and R = r & ~x the leaf value v adds v w(|X|+|R|, |X|-1) to each feature of X
// and subtracts v w(|X|+|R|, |X|) from each feature of R (wtab from the host, the CPU's
// shapley_weights), bits walked from the lowest (low = m & -m, index popcount(low - 1)).
//
// Memory traffic per row, path and background row: one background word and one ``full`` word
// per 63 elements (broadcast, L1/L2 hits); per reached leaf |X| + |R| feature loads and
// accumulator updates. Accumulators: per thread in shared memory (acc[f * blockDim + tid]: a
// warp's lanes hit consecutive words, no bank conflicts) when F fits, else the output row
// itself (and, for the logistic variant's per-background-row values, a scratch row of F in
// global memory). Nothing is shared between threads: no atomics.
//
// Outputs: out (n, n_groups, F + 1) float64, C order; the kernels write columns 0..F-1 of
// their (row, group) and leave the bias column F to the host.
#include "common.cuh"
#include "path_element.cuh"

#define IV_WORD_BITS 63


// The element bits of path word w (elements s + 63 w ... of the path's k) for row x.
__device__ __forceinline__ long long path_word(const float* __restrict__ x, long long s, int k, int w,
                                               const int* __restrict__ feature, const float* __restrict__ lower,
                                               const float* __restrict__ upper,
                                               const unsigned char* __restrict__ missing,
                                               const long long* __restrict__ cat_offset,
                                               const unsigned* __restrict__ cat_pool) {
  const int j0 = w * IV_WORD_BITS;
  const int j1 = min(k, j0 + IV_WORD_BITS);
  long long word = 0;
  for (int j = j0; j < j1; ++j) {
    const long long e = s + j;
    if (element_is_on(x[feature[e]], e, lower, upper, missing, cat_offset, cat_pool)) word |= 1LL << (j - j0);
  }
  return word;
}

// A row's words of one path of at most 63 elements: computed once, held in a register.
struct OneWord {
  long long word;
  __device__ __forceinline__ long long operator()(int) const { return word; }
};

// A row's words of a longer path: each computed where it is read (the same bits every time).
struct PathWords {
  const float* x;
  long long s;
  int k;
  const int* feature;
  const float* lower;
  const float* upper;
  const unsigned char* missing;
  const long long* cat_offset;
  const unsigned* cat_pool;
  __device__ __forceinline__ long long operator()(int w) const {
    return path_word(x, s, k, w, feature, lower, upper, missing, cat_offset, cat_pool);
  }
};

// Path p's share of the pair (row, background row q): interventional.py _add_pair, adding to
// acc[f * stride]. Words w0 .. w0 + nw - 1; elements from s; v the leaf value (already divided
// by n_ref in the plain kernel); wtab row stride W.
template <class Words>
__device__ __forceinline__ void add_pair(const Words& xword, const long long* __restrict__ rbitsT, long long n_ref,
                                         long long q, const long long* __restrict__ full, long long s, long long w0,
                                         int nw, const int* __restrict__ feature, double v,
                                         const double* __restrict__ wtab, int W, double* acc, int stride) {
  int nx = 0, nr = 0;
  for (int w = 0; w < nw; ++w) {
    const unsigned long long xw = (unsigned long long)xword(w);
    const unsigned long long rw = (unsigned long long)rbitsT[(w0 + w) * n_ref + q];
    if ((xw | rw) != (unsigned long long)full[w0 + w]) return;  // the hybrid misses the leaf
    nx += __popcll(xw & ~rw);
    nr += __popcll(rw & ~xw);
  }
  if (nx + nr == 0) return;
  const int nt = nx + nr;
  const double wx = nx > 0 ? v * wtab[nt * W + nx - 1] : 0.0;
  const double wr = nr > 0 ? v * wtab[nt * W + nx] : 0.0;
  for (int w = 0; w < nw; ++w) {
    const unsigned long long xw = (unsigned long long)xword(w);
    const unsigned long long rw = (unsigned long long)rbitsT[(w0 + w) * n_ref + q];
    unsigned long long mx = xw & ~rw;
    unsigned long long mr = rw & ~xw;
    const long long base = s + (long long)w * IV_WORD_BITS;
    while (mx != 0) {
      const unsigned long long low = mx & (0ULL - mx);
      acc[(long long)feature[base + __popcll(low - 1)] * stride] += wx;
      mx ^= low;
    }
    while (mr != 0) {
      const unsigned long long low = mr & (0ULL - mr);
      acc[(long long)feature[base + __popcll(low - 1)] * stride] -= wr;
      mr ^= low;
    }
  }
}

// Path p's share for the background rows q0 .. q1 - 1 in order (all of them: the plain
// kernel's inner loop; one: the logistic kernel's), the row's word computed once for paths of
// one word.
__device__ __forceinline__ void add_path(const float* __restrict__ x, long long s, int k, long long w0, int nw,
                                         const int* __restrict__ feature, const float* __restrict__ lower,
                                         const float* __restrict__ upper, const unsigned char* __restrict__ missing,
                                         const long long* __restrict__ cat_offset,
                                         const unsigned* __restrict__ cat_pool,
                                         const long long* __restrict__ rbitsT, long long q0, long long q1,
                                         long long n_ref, const long long* __restrict__ full, double v,
                                         const double* __restrict__ wtab, int W, double* acc, int stride) {
  if (nw == 1) {
    const OneWord xw{path_word(x, s, k, 0, feature, lower, upper, missing, cat_offset, cat_pool)};
    for (long long q = q0; q < q1; ++q)
      add_pair(xw, rbitsT, n_ref, q, full, s, w0, 1, feature, v, wtab, W, acc, stride);
  } else {
    const PathWords xw{x, s, k, feature, lower, upper, missing, cat_offset, cat_pool};
    for (long long q = q0; q < q1; ++q)
      add_pair(xw, rbitsT, n_ref, q, full, s, w0, nw, feature, v, wtab, W, acc, stride);
  }
}

// Interventional SHAP values of the margin (interventional.py _interventional_kernel).
extern "C" __global__ void __launch_bounds__(128) interventional_rows(
    const float* __restrict__ X, long long n, int F,
    const long long* __restrict__ path_offsets, const long long* __restrict__ word_offsets,
    const int* __restrict__ group_paths, const long long* __restrict__ group_ptr,
    const int* __restrict__ feature, const float* __restrict__ lower, const float* __restrict__ upper,
    const unsigned char* __restrict__ missing, const long long* __restrict__ cat_offset,
    const unsigned* __restrict__ cat_pool, const double* __restrict__ path_v,
    const long long* __restrict__ rbitsT, long long n_ref, const long long* __restrict__ full,
    const double* __restrict__ wtab, int W, int n_groups, int acc_shared,
    double* __restrict__ out) {  // (n, n_groups, F + 1); the bias column is left alone
  extern __shared__ double iv_smem[];
  const long long row = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (row >= n) return;  // no barriers below: a thread past the end just leaves
  const int g = blockIdx.y;
  const float* x = X + row * (long long)F;
  double* orow = out + (row * n_groups + g) * (long long)(F + 1);
  double* acc = acc_shared ? iv_smem + threadIdx.x : orow;
  const int stride = acc_shared ? (int)blockDim.x : 1;
  for (int f = 0; f < F; ++f) acc[(long long)f * stride] = 0.0;  // the CPU's np.zeros output
  const double inv_ref = 1.0 / (double)n_ref;
  for (long long i = group_ptr[g]; i < group_ptr[g + 1]; ++i) {
    const int p = group_paths[i];
    const long long s = path_offsets[p] + 1;
    const int k = (int)(path_offsets[p + 1] - s);
    if (k == 0) continue;  // a one-leaf tree: only the bias
    const long long w0 = word_offsets[p];
    const int nw = (int)(word_offsets[p + 1] - w0);
    const double v = path_v[p] * inv_ref;
    add_path(x, s, k, w0, nw, feature, lower, upper, missing, cat_offset, cat_pool, rbitsT, 0, n_ref, n_ref, full, v,
             wtab, W, acc, stride);
  }
  if (acc_shared)
    for (int f = 0; f < F; ++f) orow[f] = acc[(long long)f * stride];
}

// The rows' margins (interventional.py _margins_from_bits): out[r, g] = base_margin[g] plus,
// in path order, the value of every path of group g whose elements are all on.
extern "C" __global__ void __launch_bounds__(128) interventional_margins(
    const float* __restrict__ X, long long n, int F,
    const long long* __restrict__ path_offsets, const long long* __restrict__ word_offsets,
    const int* __restrict__ group_paths, const long long* __restrict__ group_ptr,
    const int* __restrict__ feature, const float* __restrict__ lower, const float* __restrict__ upper,
    const unsigned char* __restrict__ missing, const long long* __restrict__ cat_offset,
    const unsigned* __restrict__ cat_pool, const double* __restrict__ path_v,
    const long long* __restrict__ full, const double* __restrict__ base_margin, int n_groups,
    double* __restrict__ out) {  // (n, n_groups)
  const long long row = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (row >= n) return;
  const int g = blockIdx.y;
  const float* x = X + row * (long long)F;
  double m = base_margin[g];
  for (long long i = group_ptr[g]; i < group_ptr[g + 1]; ++i) {
    const int p = group_paths[i];
    const long long s = path_offsets[p] + 1;
    const int k = (int)(path_offsets[p + 1] - s);
    const long long w0 = word_offsets[p];
    const int nw = (int)(word_offsets[p + 1] - w0);
    bool ok = true;  // a path without elements (a one-leaf tree) is always reached
    for (int w = 0; w < nw && ok; ++w)
      ok = path_word(x, s, k, w, feature, lower, upper, missing, cat_offset, cat_pool) == full[w0 + w];
    if (ok) m += path_v[p];
  }
  out[row * n_groups + g] = m;
}

// Interventional SHAP values of sigmoid(margin) (interventional.py
// _interventional_logistic_kernel): per background row q, the group's margin values (tmp,
// zeroed for each q) scaled by (sigmoid(a) - sigmoid(b)) / (a - b), a = mx[row, g],
// b = mr[q, g] (1 where a == b), added to acc; acc / n_ref at the end. The sigmoids sx, sr
// come from the host (interventional.sigmoid_values: the CPU's exp, which CUDA's may not
// match bit for bit); the margins mx from interventional_margins, mr from the host.
// Accumulators: acc and tmp in shared memory (acc at f * blockDim + tid, tmp F * blockDim
// further), or acc in the output row and tmp in ``scratch`` (n, n_groups, F).
extern "C" __global__ void __launch_bounds__(128) interventional_logistic_rows(
    const float* __restrict__ X, long long n, int F,
    const long long* __restrict__ path_offsets, const long long* __restrict__ word_offsets,
    const int* __restrict__ group_paths, const long long* __restrict__ group_ptr,
    const int* __restrict__ feature, const float* __restrict__ lower, const float* __restrict__ upper,
    const unsigned char* __restrict__ missing, const long long* __restrict__ cat_offset,
    const unsigned* __restrict__ cat_pool, const double* __restrict__ path_v,
    const long long* __restrict__ rbitsT, long long n_ref, const long long* __restrict__ full,
    const double* __restrict__ wtab, int W, const double* __restrict__ mx, const double* __restrict__ sx,
    const double* __restrict__ mr, const double* __restrict__ sr, int n_groups, int acc_shared,
    double* __restrict__ scratch, double* __restrict__ out) {
  extern __shared__ double iv_smem[];
  const long long row = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (row >= n) return;
  const int g = blockIdx.y;
  const float* x = X + row * (long long)F;
  double* orow = out + (row * n_groups + g) * (long long)(F + 1);
  double* acc = acc_shared ? iv_smem + threadIdx.x : orow;
  double* tmp = acc_shared ? iv_smem + (long long)F * blockDim.x + threadIdx.x
                           : scratch + (row * n_groups + g) * (long long)F;
  const int stride = acc_shared ? (int)blockDim.x : 1;
  for (int f = 0; f < F; ++f) acc[(long long)f * stride] = 0.0;
  const double a = mx[row * n_groups + g];
  const double sa = sx[row * n_groups + g];
  for (long long q = 0; q < n_ref; ++q) {
    for (int f = 0; f < F; ++f) tmp[(long long)f * stride] = 0.0;
    for (long long i = group_ptr[g]; i < group_ptr[g + 1]; ++i) {
      const int p = group_paths[i];
      const long long s = path_offsets[p] + 1;
      const int k = (int)(path_offsets[p + 1] - s);
      if (k == 0) continue;
      const long long w0 = word_offsets[p];
      const int nw = (int)(word_offsets[p + 1] - w0);
      add_path(x, s, k, w0, nw, feature, lower, upper, missing, cat_offset, cat_pool, rbitsT, q, q + 1, n_ref, full,
               path_v[p], wtab, W, tmp, stride);
    }
    const double b = mr[q * n_groups + g];
    const double scale = a == b ? 1.0 : (sa - sr[q * n_groups + g]) / (a - b);
    for (int f = 0; f < F; ++f) acc[(long long)f * stride] += tmp[(long long)f * stride] * scale;
  }
  for (int f = 0; f < F; ++f) orow[f] = acc[(long long)f * stride] / (double)n_ref;
}
