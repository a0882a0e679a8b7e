// Exact greedy split search on the GPU (tree_method="exact"; dgboost/backend/_cuda_exact.py,
// docs/design.md §12), the two modes of Mitchell and Frank (2017).
//
// Input, presorted once per training: every feature's present values ascending with their
// rows (``col_rows`` int32, ``col_values`` float32, feature f's entries in
// [col_ptr[f], col_ptr[f + 1])) and, per entry, the end of its run of equal values
// (``run_end``, exclusive, relative to the column's first entry: int32 for any entry count).
// A level's nodes are ``first .. first + m - 1``;
// ``node_of_row`` (int32 per row) says where each row is. Rows whose pair is (0, 0) (left out
// by subsampling) take no part.
//
// * Interleaved (shallow levels): entries stay in column order. For one node k at a time,
//   ``exact_node_entries`` writes each entry's (g, h, 1) if its row is in node k (else 0);
//   inclusive scans of those (CuPy) are node k's running sums in every column at once;
//   ``exact_interleaved_candidates`` evaluates node k's candidates from them.
// * Sorted (every level in production): the entries of the level's nodes are kept grouped
//   by (node, feature), each group in column order (the "layout", below). The root's layout
//   is the columns less inactive rows; each next level's comes from the last by a stable
//   partition of every split node's groups into its children's (flags, one scan, counts,
//   scatter): no sort. ``exact_layout_pairs`` gathers the pairs in layout order, their
//   inclusive scans are running sums within each group, and ``exact_layout_candidates``
//   evaluates them. Where a sorted level follows interleaved ones (tests only), the layout is
//   made by a stable sort of the entries by node slot (``exact_sort_keys``, CuPy's argsort,
//   ``exact_layout_gather``).
//
// Both modes evaluate the same candidates with the same int64 sums (exact in any order) and
// the CPU engine's float64 gains (gain.cuh, --fmad=false). A candidate's ordinal is the order
// in which the CPU engine's scans meet it (with j the column position of the last entry below
// the boundary and c the column's length: forward boundary j, forward end c, backward boundary
// 2c - j, backward end 2c + 1). A node's best split is chosen in three passes over the same
// candidates (``phase``): 0, the largest gain above kRtEps (a warp's maximum per node, then
// one atomicMax of the float64 bits, which order as the values for positive gains: see
// node_best_bits); 1, among those, the smallest (feature,
// ordinal) (atomicMin); 2, that candidate writes the decision. The CPU engine's rule exactly:
// first maximum in (feature, ordinal) order. Pass 0 also stores each entry's largest gain
// (``entry_bits``): passes 1 and 2 evaluate again only the entries whose largest gain is their
// node's best, a handful.
#include "common.cuh"
#include "gain.cuh"

using namespace dgboost;
using namespace dgboost_gain;

#define KERNEL_EPS 1e-6

struct ExactOut {
  unsigned long long* best_bits;  // (m,) gain bits, 0 to start
  unsigned long long* best_key;   // (m,) feature << 34 | ordinal, all ones to start
  int* feature;                   // (m,) -1 to start
  double* gain;
  float* value;
  unsigned char* default_left;
  long long* left;  // (m, 2)
};

struct ExactLevel {
  const long long* totals;    // (m, 2)
  const double* parent_gain;  // (m,)
  const double* bounds;       // (m, 2) when constrained
  const signed char* monotone;
  const bool* feature_mask;   // (m, F) when use_mask
  int use_mask;
  int constrained;
  int n_features;
  GainParams p;
};

// Every candidate kernel's level and output arguments (flat: kernel arguments are scalars and
// pointers), made into an ExactLevel and an ExactOut.
#define EXACT_LEVEL_ARGS                                                                             \
  const long long *__restrict__ totals, const double *__restrict__ parent_gain,                     \
      const double *__restrict__ bounds, const signed char *__restrict__ monotone,                   \
      const bool *__restrict__ feature_mask, int use_mask, int constrained, int n_features,           \
      double inv_scale_g, double inv_scale_h, double lam, double alpha, double mcw, double mds,        \
      unsigned long long *__restrict__ best_bits, unsigned long long *__restrict__ best_key,           \
      int *__restrict__ out_feature, double *__restrict__ out_gain, float *__restrict__ out_value,      \
      unsigned char *__restrict__ out_default_left, long long *__restrict__ out_left
#define EXACT_LEVEL_MAKE                                                                             \
  const ExactLevel L{totals,      parent_gain, bounds,     monotone,                                  \
                     feature_mask, use_mask,   constrained, n_features,                               \
                     GainParams{inv_scale_g, inv_scale_h, lam, alpha, mcw, mds}};                     \
  ExactOut out{best_bits, best_key, out_feature, out_gain, out_value, out_default_left, out_left};

// The feature whose entries hold entry ``e``: the last f with col_ptr[f] <= e.
__device__ __forceinline__ int feature_of(const long long* __restrict__ col_ptr, int n_features, long long e) {
  int lo = 0, hi = n_features;  // answer in [lo, hi)
  while (hi - lo > 1) {
    const int mid = (lo + hi) >> 1;
    if (col_ptr[mid] <= e) lo = mid;
    else hi = mid;
  }
  return lo;
}

// float32 split value between present values a < b: their float32 midpoint (a/2 + b/2, as
// (a + b) * 0.5f rounds), or b where it rounds down to a.
__device__ __forceinline__ float value_between(float a, float b) {
  const float mid = a * 0.5f + b * 0.5f;  // --fmad=false: two roundings, as on the CPU
  return mid <= a ? b : mid;
}

// Past every present value: above the largest (forward) or below the smallest (backward).
__device__ __forceinline__ float end_value(float last, bool forward) {
  const float gap = fabsf(last) + 1e-6f;
  return forward ? last + gap : last - gap;
}

// One candidate in pass ``phase``; its gain's bits (0 where it is not a valid split above kRtEps).
__device__ __forceinline__ unsigned long long consider(int phase, int k, int f, long long ordinal, long long lg,
                                                       long long lh, float value, bool default_left,
                                                       const ExactLevel& L, ExactOut& out) {
  const double lo = L.constrained ? L.bounds[2 * k] : 0.0, hi = L.constrained ? L.bounds[2 * k + 1] : 0.0;
  const int sign = L.constrained ? L.monotone[f] : 0;
  double gain;
  if (!candidate_gain(lg, lh, L.totals[2 * k], L.totals[2 * k + 1], L.p, lo, hi, sign, L.constrained,
                      L.parent_gain[k], &gain))
    return 0;
  if (!(gain > KERNEL_EPS)) return 0;  // NaN never wins
  const unsigned long long bits = static_cast<unsigned long long>(__double_as_longlong(gain));
  if (phase == 0) return bits;  // the caller takes the maxima to the node (node_best_bits)
  if (bits != out.best_bits[k]) return bits;
  const unsigned long long key = (static_cast<unsigned long long>(f) << 34) | static_cast<unsigned long long>(ordinal);
  if (phase == 1) {
    if (key < *reinterpret_cast<volatile unsigned long long*>(out.best_key + k)) atomicMin(out.best_key + k, key);
    return bits;
  }
  if (key != out.best_key[k]) return bits;
  out.feature[k] = f;
  out.gain[k] = gain;
  out.value[k] = value;
  out.default_left[k] = default_left ? 1 : 0;
  out.left[2 * k] = lg;
  out.left[2 * k + 1] = lh;
  return bits;
}

__device__ __forceinline__ unsigned long long max_bits(unsigned long long a, unsigned long long b) {
  return a > b ? a : b;
}

// Pass 0: every lane's largest gain bits (0: none) to its node k's best (k < 0: none), with
// every lane of the warp calling. Lanes of one node (adjacent lanes, in either mode) first take
// their maximum by a segmented scan over the warp, and the last lane of each run makes one
// atomicMax, and only when it beats the node's best so far (which only grows): at the root
// every entry of the level shares one address, where a million concurrent atomics serialise.
// Combining only lanes of the same node keeps this right whatever the lanes' order.
__device__ __forceinline__ void node_best_bits(int k, unsigned long long bits, unsigned long long* best_bits) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const unsigned long long other = __shfl_up_sync(0xffffffffu, bits, d);
    const int other_k = __shfl_up_sync(0xffffffffu, k, d);
    if (lane >= d && other_k == k) bits = max_bits(bits, other);
  }
  const int next_k = __shfl_down_sync(0xffffffffu, k, 1);
  if ((lane == 31 || next_k != k) && k >= 0 && bits != 0 &&
      bits > *reinterpret_cast<volatile unsigned long long*>(best_bits + k))
    atomicMax(best_bits + k, bits);
}

// Both directions of one boundary (forward only where the column is scanned forward) and the
// end candidates an entry owns: ``lg, lh`` the present sums up to and including the entry
// (within its node and feature), ``cg, ch`` the node's present sums in the column. Returns the
// largest of their gains' bits: pass 0 stores it per entry (``entry_bits``), and passes 1 and 2
// look again only at entries whose largest gain is their node's best.
__device__ __forceinline__ unsigned long long consider_entry(int phase, int k, int f, long long j, long long c,
                                                             bool forward_ok, bool boundary, float v, float next,
                                                             bool last_in_column, bool first_in_column, long long lg,
                                                             long long lh, long long cg, long long ch,
                                                             const ExactLevel& L, ExactOut& out) {
  const long long tg = L.totals[2 * k], th = L.totals[2 * k + 1];
  unsigned long long bits = 0;
  if (boundary) {
    const float value = value_between(v, next);
    if (forward_ok) bits = max_bits(bits, consider(phase, k, f, j, lg, lh, value, false, L, out));
    bits = max_bits(bits, consider(phase, k, f, 2 * c - j, tg - (cg - lg), th - (ch - lh), value, true, L, out));
  }
  if (last_in_column && forward_ok) {
    bits = max_bits(bits, consider(phase, k, f, c, cg, ch, end_value(v, true), false, L, out));
  }
  if (first_in_column) {
    bits = max_bits(bits, consider(phase, k, f, 2 * c + 1, tg - cg, th - ch, end_value(v, false), true, L, out));
  }
  return bits;
}

// Passes 1 and 2 skip an entry unless its largest gain (pass 0's) is its node's best.
__device__ __forceinline__ bool skip_entry(int phase, const unsigned long long* __restrict__ entry_bits, long long i,
                                           int k, const ExactOut& out) {
  if (phase == 0) return false;
  const unsigned long long mine = entry_bits[i];
  return mine == 0 || mine != out.best_bits[k];
}

__device__ __forceinline__ bool active(const int* __restrict__ gpair, int r) {
  return gpair[2 * r] != 0 || gpair[2 * r + 1] != 0;
}

// -- interleaved ----------------------------------------------------------------------------
// out_g/out_h/out_c[e] = entry e's (g, h, 1) when its row is active in node first + k, else 0.
extern "C" __global__ void exact_node_entries(long long n_entries, const int* __restrict__ col_rows,
                                              const int* __restrict__ node_of_row, int node,
                                              const int* __restrict__ gpair, long long* __restrict__ out_g,
                                              long long* __restrict__ out_h, long long* __restrict__ out_c) {
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < n_entries;
       e += static_cast<long long>(gridDim.x) * blockDim.x) {
    const int r = col_rows[e];
    const bool in = node_of_row[r] == node && active(gpair, r);
    out_g[e] = in ? gpair[2 * r] : 0;
    out_h[e] = in ? gpair[2 * r + 1] : 0;
    out_c[e] = in ? 1 : 0;
  }
}

// Entry e's candidates for node k (interleaved), their largest gain's bits (0: none).
__device__ __forceinline__ unsigned long long interleaved_entry(
    int phase, int k, long long e, const long long* __restrict__ col_ptr, const float* __restrict__ col_values,
    const int* __restrict__ run_end, const unsigned char* __restrict__ forward_ok, const long long* __restrict__ sg,
    const long long* __restrict__ sh, const long long* __restrict__ sc, const ExactLevel& L, ExactOut& out) {
  const long long prev = e > 0 ? sc[e - 1] : 0;
  if (sc[e] == prev) return 0;  // not node k's
  const int f = feature_of(col_ptr, L.n_features, e);
  if (L.use_mask && !L.feature_mask[static_cast<long long>(k) * L.n_features + f]) return 0;
  const long long lo = col_ptr[f], hi = col_ptr[f + 1];
  const long long base_g = lo > 0 ? sg[lo - 1] : 0, base_h = lo > 0 ? sh[lo - 1] : 0, base_c = lo > 0 ? sc[lo - 1] : 0;
  const long long run = lo + run_end[e];
  const long long count = sc[e];
  const bool last_of_run = sc[run - 1] == count;
  const bool more = sc[hi - 1] > sc[run - 1];
  const bool boundary = last_of_run && more;
  float next = 0.0f;
  if (boundary) {  // node k's next value: its first entry after the run (sc reaches count + 1 there)
    long long a = run, b = hi - 1;
    while (a < b) {
      const long long mid = (a + b) >> 1;
      if (sc[mid] > count) b = mid;
      else a = mid + 1;
    }
    next = col_values[a];
  }
  return consider_entry(phase, k, f, e - lo, hi - lo, forward_ok[f] != 0, boundary, col_values[e], next,
                        count == sc[hi - 1], count == base_c + 1, sg[e] - base_g, sh[e] - base_h,
                        sg[hi - 1] - base_g, sh[hi - 1] - base_h, L, out);
}

// Node k's candidates from its inclusive scans S (g, h, count) in column order.
extern "C" __global__ void exact_interleaved_candidates(
    int phase, int k, long long n_entries, const long long* __restrict__ col_ptr, const float* __restrict__ col_values,
    const int* __restrict__ run_end, const unsigned char* __restrict__ forward_ok, const long long* __restrict__ sg,
    const long long* __restrict__ sh, const long long* __restrict__ sc, unsigned long long* __restrict__ entry_bits,
    EXACT_LEVEL_ARGS) {
  EXACT_LEVEL_MAKE
  // the warp's lanes loop together (``warp_first`` is the same for all 32): pass 0 reduces
  // across them (blockDim.x is a multiple of 32)
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long warp_first = blockIdx.x * static_cast<long long>(blockDim.x) + (threadIdx.x & ~31);
       warp_first < n_entries; warp_first += stride) {
    const long long e = warp_first + (threadIdx.x & 31);
    unsigned long long bits = 0;
    if (e < n_entries && !skip_entry(phase, entry_bits, e, k, out))
      bits = interleaved_entry(phase, k, e, col_ptr, col_values, run_end, forward_ok, sg, sh, sc, L, out);
    if (phase == 0) {
      if (e < n_entries) entry_bits[e] = bits;
      node_best_bits(k, bits, out.best_bits);
    }
  }
}

// -- sorted ---------------------------------------------------------------------------------
// slot[e] = the slot of entry e's node (m for entries not in the level), and the entries of
// each (slot, feature) counted into seg_count (m * F).
extern "C" __global__ void exact_sort_keys(long long n_entries, const long long* __restrict__ col_ptr, int n_features,
                                           const int* __restrict__ col_rows, const int* __restrict__ node_of_row,
                                           int first, int m, const int* __restrict__ gpair,
                                           unsigned int* __restrict__ slot, int* __restrict__ seg_count) {
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < n_entries;
       e += static_cast<long long>(gridDim.x) * blockDim.x) {
    const int r = col_rows[e];
    int k = node_of_row[r] - first;
    if (k < 0 || k >= m || !active(gpair, r)) k = m;
    slot[e] = static_cast<unsigned int>(k);
    if (k < m) atomicAdd(seg_count + static_cast<long long>(k) * n_features + feature_of(col_ptr, n_features, e), 1);
  }
}

// -- the node layout (sorted mode) ----------------------------------------------------------
// The entries of a level's nodes grouped by (node slot, feature), each group in column order
// (ascending value): position q holds entry ``order[q]`` (its index in the presorted columns),
// its row ``lrow[q]`` and value ``lval[q]``; group s = slot * F + f occupies
// [seg_begin[s], seg_begin[s + 1]), seg_begin (m * F + 1,) int64, its last element the number
// of live positions (past it, the buffers hold nothing). Made once per tree from the columns
// and then, level after level, by a stable partition of every split node's groups into its
// two children's groups: no sort, and each group stays in column order.

// Live positions of a layout of ``n_segments`` groups.
__device__ __forceinline__ long long layout_live(const long long* __restrict__ seg_begin, long long n_segments) {
  return seg_begin[n_segments];
}

// flag[q] = 1 where the source position q's row goes to a left child (``child_side``) of the
// level first .. first + m - 1 and is active, else 0 (right child, or dropped: a leaf's row,
// or an inactive row at the root).
extern "C" __global__ void exact_partition_flags(long long n_entries, const long long* __restrict__ src_begin,
                                                 long long src_segments, const int* __restrict__ src_row,
                                                 const int* __restrict__ node_of_row, int first, int m,
                                                 const unsigned char* __restrict__ child_side,
                                                 const int* __restrict__ gpair, long long* __restrict__ flag) {
  const long long live = layout_live(src_begin, src_segments);
  for (long long q = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; q < n_entries;
       q += static_cast<long long>(gridDim.x) * blockDim.x) {
    long long left = 0;  // int64: its scan needs no cast
    if (q < live) {
      const int r = src_row[q];
      const int c = node_of_row[r] - first;
      left = (c >= 0 && c < m && child_side[c] != 0 && active(gpair, r)) ? 1 : 0;
    }
    flag[q] = left;
  }
}

// count[c * F + f] = the entries of child slot c's group f: the lefts (``lefts``: exclusive
// scan of the flags, n + 1) of its parent's group f, or the rest of that group for a right child.
extern "C" __global__ void exact_partition_counts(int m, int n_features, const int* __restrict__ parent_slot,
                                                  const unsigned char* __restrict__ child_side,
                                                  const long long* __restrict__ src_begin,
                                                  const long long* __restrict__ lefts, long long* __restrict__ count) {
  const long long n = static_cast<long long>(m) * n_features;
  for (long long s = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; s < n;
       s += static_cast<long long>(gridDim.x) * blockDim.x) {
    const int c = static_cast<int>(s / n_features), f = static_cast<int>(s % n_features);
    const long long ps = static_cast<long long>(parent_slot[c]) * n_features + f;
    const long long b = src_begin[ps], e = src_begin[ps + 1];
    const long long l = lefts[e] - lefts[b];
    count[s] = child_side[c] != 0 ? l : (e - b) - l;
  }
}

// Every kept source position to its child's group, in its rank among the group's entries
// going the same way: a stable partition. ``src_identity``: the source is the presorted
// columns themselves (position = entry index; src_order unused).
extern "C" __global__ void exact_partition_scatter(
    long long n_entries, const long long* __restrict__ src_begin, long long src_segments, int src_identity,
    const long long* __restrict__ src_order, const int* __restrict__ src_row, const float* __restrict__ src_val,
    const int* __restrict__ node_of_row, int first, int m, const int* __restrict__ parent_slot,
    const unsigned char* __restrict__ child_side, const int* __restrict__ gpair, const long long* __restrict__ col_ptr,
    int n_features, const long long* __restrict__ lefts, const long long* __restrict__ dst_begin,
    long long* __restrict__ dst_order, int* __restrict__ dst_row, float* __restrict__ dst_val) {
  const long long live = layout_live(src_begin, src_segments);
  for (long long q = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; q < live;
       q += static_cast<long long>(gridDim.x) * blockDim.x) {
    const int r = src_row[q];
    const int c = node_of_row[r] - first;
    if (c < 0 || c >= m || !active(gpair, r)) continue;
    const long long e = src_identity ? q : src_order[q];
    const int f = feature_of(col_ptr, n_features, e);
    const long long b = src_begin[static_cast<long long>(parent_slot[c]) * n_features + f];
    const long long lefts_before = lefts[q] - lefts[b];
    const long long rank = child_side[c] != 0 ? lefts_before : (q - b) - lefts_before;
    const long long d = dst_begin[static_cast<long long>(c) * n_features + f] + rank;
    dst_order[d] = e;
    dst_row[d] = r;
    dst_val[d] = src_val[q];
  }
}

// A layout from a stable sort by slot (``exact_sort_keys``): the rows and values of the
// entries in ``order``, for a sorted level after interleaved ones.
extern "C" __global__ void exact_layout_gather(long long n_entries, const long long* __restrict__ order,
                                               const int* __restrict__ col_rows, const float* __restrict__ col_values,
                                               int* __restrict__ lrow, float* __restrict__ lval) {
  for (long long q = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; q < n_entries;
       q += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long e = order[q];
    lrow[q] = col_rows[e];
    lval[q] = col_values[e];
  }
}

// out_g/out_h[q] = the pair of the row at live position q (every live row is active).
extern "C" __global__ void exact_layout_pairs(long long n_entries, const long long* __restrict__ seg_begin,
                                              long long n_segments, const int* __restrict__ lrow,
                                              const int* __restrict__ gpair, long long* __restrict__ out_g,
                                              long long* __restrict__ out_h) {
  const long long live = layout_live(seg_begin, n_segments);
  for (long long q = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; q < live;
       q += static_cast<long long>(gridDim.x) * blockDim.x) {
    const int r = lrow[q];
    out_g[q] = gpair[2 * r];
    out_h[q] = gpair[2 * r + 1];
  }
}

// Position q (node slot k)'s candidates, their largest gain's bits (0: none).
__device__ __forceinline__ unsigned long long layout_entry(int phase, long long q, int k,
                                                          const long long* __restrict__ seg_begin,
                                                          const long long* __restrict__ order,
                                                          const float* __restrict__ lval,
                                                          const long long* __restrict__ col_ptr,
                                                          const unsigned char* __restrict__ forward_ok,
                                                          const long long* __restrict__ sg,
                                                          const long long* __restrict__ sh, const ExactLevel& L,
                                                          ExactOut& out) {
  const int n_features = L.n_features;
  const long long e = order[q];
  const int f = feature_of(col_ptr, n_features, e);
  const long long seg = static_cast<long long>(k) * n_features + f;
  unsigned long long bits = 0;
  if (!L.use_mask || L.feature_mask[seg]) {
    const long long begin = seg_begin[seg], end = seg_begin[seg + 1];
    const long long base_g = begin > 0 ? sg[begin - 1] : 0, base_h = begin > 0 ? sh[begin - 1] : 0;
    const float v = lval[q];
    const bool has_next = q + 1 < end;
    const float next = has_next ? lval[q + 1] : 0.0f;
    const long long lo = col_ptr[f], hi = col_ptr[f + 1];
    bits = consider_entry(phase, k, f, e - lo, hi - lo, forward_ok[f] != 0, has_next && next != v, v, next,
                          q == end - 1, q == begin, sg[q] - base_g, sh[q] - base_h, sg[end - 1] - base_g,
                          sh[end - 1] - base_h, L, out);
  }
  return bits;
}

// Candidates of every (node, feature) group of the layout from the inclusive scans sg, sh of
// its pairs (a group's running sums: the scan minus its value before the group's start).
extern "C" __global__ void exact_layout_candidates(
    int phase, long long n_entries, const long long* __restrict__ seg_begin, const long long* __restrict__ order,
    const int* __restrict__ lrow, const float* __restrict__ lval, const int* __restrict__ node_of_row, int first,
    const long long* __restrict__ col_ptr, const unsigned char* __restrict__ forward_ok,
    const long long* __restrict__ sg, const long long* __restrict__ sh, unsigned long long* __restrict__ entry_bits,
    long long n_segments, EXACT_LEVEL_ARGS) {
  EXACT_LEVEL_MAKE
  const long long live = layout_live(seg_begin, n_segments);
  // the warp's lanes loop together: pass 0 reduces across them (nodes are contiguous here)
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long warp_first = blockIdx.x * static_cast<long long>(blockDim.x) + (threadIdx.x & ~31); warp_first < live;
       warp_first += stride) {
    const long long q = warp_first + (threadIdx.x & 31);
    const bool mine = q < live && (phase == 0 || entry_bits[q] != 0);
    const int k = mine ? node_of_row[lrow[q]] - first : -1;
    unsigned long long bits = 0;
    if (mine && !skip_entry(phase, entry_bits, q, k, out)) bits = layout_entry(phase, q, k, seg_begin, order, lval,
                                                                              col_ptr, forward_ok, sg, sh, L, out);
    if (phase == 0) {
      if (q < live) entry_bits[q] = bits;
      node_best_bits(k, bits, out.best_bits);
    }
  }
}

// -- rows -----------------------------------------------------------------------------------
// Rows of the level's split nodes go to their children: x < value left, missing by
// default_left (prediction's rule); left_child[k] < 0 keeps node k's rows (a leaf).
extern "C" __global__ void exact_apply_splits(long long n_rows, int n_features, const float* __restrict__ values,
                                              int* __restrict__ node_of_row, int first, int m,
                                              const int* __restrict__ feature, const float* __restrict__ split_value,
                                              const unsigned char* __restrict__ default_left,
                                              const int* __restrict__ left_child) {
  for (long long r = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; r < n_rows;
       r += static_cast<long long>(gridDim.x) * blockDim.x) {
    const int k = node_of_row[r] - first;
    if (k < 0 || k >= m) continue;
    const int lc = left_child[k];
    if (lc < 0) continue;
    const float x = values[r * n_features + feature[k]];
    const bool go_left = isnan(x) ? default_left[k] != 0 : x < split_value[k];
    node_of_row[r] = go_left ? lc : lc + 1;
  }
}
