// Path-dependent TreeSHAP with one thread per row: the CPU engine's kernel
// (dgboost/explain/treeshap.py, _shap_kernel) ported operation for operation, so a row's
// values are bitwise those of the CPU engine and of any other batching of the rows.
//
// Thread mapping: blockIdx.y is an output group; each thread owns one row and walks the
// group's paths in path order (every lane of a warp on the same path, so the path's data
// are broadcast loads and the control flow is uniform). Per path, either
//   * the table method (Fast TreeSHAP v2): the row's on-bit word B over the path's k
//     elements, then for element i the weight W_i(P) looked up at P = B without bit i, and
//     v (o_i - z_i) W_i(P) added; O(k) per row and path; or
//   * quadrature, for paths without a table of at most ``quad_max_k`` (<= SHAP_QUAD_MAX_K)
//     elements: W_i = int_0^1 prod_{l != i} f_l(u) du with f_l = (1 - u) z_l + u o_l is a
//     polynomial of degree k - 1, so nq = ceil(k / 2) Gauss-Legendre nodes give it exactly:
//     A_t = a_t prod_l f_l(u_t) (nq products in registers, one pass over the elements), then
//     per element v sum_t A_t g_l(u_t), g_l = (o_l - z_l) / f_l: (1 - z) / ((1 - u) z + u)
//     when on, -1 / (1 - u) when off (so a zero z divides nothing). O(k nq) = O(k^2 / 2)
//     with no per-row memory; g_on does not depend on the row, so a warp's lanes compute
//     the path's k nq values between them into shared memory, not a division per row; the
//     path method's O(k^2) EXTEND keeps its weights in local memory (L1 traffic per row)
//     and its UNWOUND-SUMs cost k^2 more;
//   * the path method (GPUTreeShap's EXTEND / UNWOUND-SUM, O(k^2)) for the other paths
//     without a table (all of them when ``quad_max_k`` is 0: algorithm="path"), with the
//     path weights in this thread's local memory; the reciprocals 1/n and 1/z come from
//     tables (the CPU multiplies by the same reciprocals), so no division runs per row.
// Contributions accumulate per thread in shared memory (acc[f * blockDim + tid]: a warp's
// lanes hit consecutive words, no bank conflicts), or straight in ``out`` when F is too wide
// for that; nothing is shared between threads, so there are no atomics and the order of
// additions is the path order.
// Memory traffic per row and path: k feature loads (the row's 4 F bytes stay in L1) and k
// table reads (8 bytes each, gathered from the path's k 2**(k-1) table); path data are read
// once per warp.
//
// weight_tables fills the tables on the device: one thread per entry (path, i, P), the CPU
// builder's polynomial recurrence (dgboost/explain/tables.py, _fill_tables) recomputed from
// the first level, so every entry has the CPU's bits.
#include "common.cuh"
#include "path_element.cuh"

#ifndef SHAP_MAX_LEN
#define SHAP_MAX_LEN 64  // elements of a path (bias included) the path method holds
#endif
#ifndef SHAP_MAX_K
#define SHAP_MAX_K 30    // non-bias elements of a tabled path (tables.py _HARD_MAX_K)
#endif
#ifndef SHAP_QUAD_MAX_K
#define SHAP_QUAD_MAX_K 16  // longest path (non-bias elements) the quadrature kernels hold
#endif
#define SHAP_QUAD_MAX_NQ ((SHAP_QUAD_MAX_K + 1) / 2)
#define SHAP_QUAD_K_NQ (SHAP_QUAD_MAX_K * SHAP_QUAD_MAX_NQ)  // shap_rows' shared g_on per warp

using dgboost::int64_t;


// The row's on-bits of the path's k elements (bit j: element s + j is on; an element on a
// categorical split also needs x in its category set, path_element.cuh).
__device__ __forceinline__ long long path_on_bits(const float* __restrict__ x, long long s, int k,
                                                  const int* __restrict__ feature, const float* __restrict__ lower,
                                                  const float* __restrict__ upper,
                                                  const unsigned char* __restrict__ missing,
                                                  const long long* __restrict__ cat_offset,
                                                  const unsigned* __restrict__ cat_pool) {
  long long on = 0;
#pragma unroll 4
  for (int j = 0; j < k; ++j) {
    const bool o = element_is_on(x[feature[s + j]], s + j, lower, upper, missing, cat_offset, cat_pool);
    on |= (long long)o << j;
  }
  return on;
}

// EXTEND the bias element then elements s..s+k-1 except local index ``skip`` (-1: none):
// pw[0..d] are the path weights; returns d (treeshap.py _block_extend, one row).
__device__ __forceinline__ int path_extend(double* pw, long long on, long long s, int k, int skip,
                                           const double* __restrict__ zero_fraction,
                                           const double* __restrict__ recip) {
  pw[0] = 1.0;
  int d = 0;
  for (int j = 0; j < k; ++j) {
    if (j == skip) continue;
    d += 1;
    const double z = zero_fraction[s + j];
    const double inv = recip[d + 1];  // 1.0 / (d + 1), as the CPU computes it
    const double oj = ((on >> j) & 1) ? 1.0 : 0.0;
    pw[d] = 0.0;
    for (int i = d - 1; i >= 0; --i) {
      const double c1 = (i + 1) * inv;
      const double c2 = z * (d - i) * inv;
      const double a = pw[i];
      pw[i + 1] += oj * a * c1;
      pw[i] = a * c2;
    }
  }
  return d;
}

// UNWOUND-SUM at depth d of the element (z, 1 / z, on-flag oi) (treeshap.py _block_unwound).
__device__ __forceinline__ double path_unwound(const double* pw, int d, double z, double zinv, double oi,
                                               const double* __restrict__ recip) {
  double nxt = pw[d], t1 = 0.0, t0 = 0.0;
  for (int j = d - 1; j >= 0; --j) {
    const double c1 = (d + 1.0) * recip[j + 1];
    const double c2 = z * (d - j) * recip[d + 1];
    const double c0 = zinv * (d + 1.0) * recip[d - j];
    const double pj = pw[j];
    const double tmp = nxt * c1;
    t1 += tmp;
    nxt = pj - tmp * c2;
    t0 += pj * c0;
  }
  return oi != 0.0 ? t1 : t0;
}

extern "C" __global__ void weight_tables(const long long* __restrict__ path_offsets,
                                         const double* __restrict__ zero_fraction,
                                         const long long* __restrict__ sel,
                                         const long long* __restrict__ sel_offsets,  // (n_sel + 1,)
                                         long long n_sel, double* __restrict__ values) {
  const long long total = sel_offsets[n_sel];
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
       e += (long long)gridDim.x * blockDim.x) {
    long long lo = 0, hi = n_sel - 1;  // the last q with sel_offsets[q] <= e
    while (lo < hi) {
      const long long mid = (lo + hi + 1) >> 1;
      if (sel_offsets[mid] <= e) lo = mid; else hi = mid - 1;
    }
    const long long p = sel[lo];
    const long long s = path_offsets[p] + 1;
    const int k = (int)(path_offsets[p + 1] - s);
    const int m = k - 1;
    const long long local = e - sel_offsets[lo];
    const int i = (int)(local >> m);
    const long long P = local & ((1LL << m) - 1);
    // poly[t]: coefficients of the product over the levels so far of (z + on * t)
    double poly[SHAP_MAX_K + 1];
    poly[0] = 1.0;
    for (int lvl = 0; lvl < m; ++lvl) {
      const int b = m - 1 - lvl;
      const int el = b < i ? b : b + 1;
      const double z = zero_fraction[s + el];
      if ((P >> b) & 1) {
        poly[lvl + 1] = poly[lvl];
        for (int t = lvl; t >= 1; --t) poly[t] = z * poly[t] + poly[t - 1];
        poly[0] = z * poly[0];
      } else {
        poly[lvl + 1] = 0.0;
        for (int t = lvl; t >= 0; --t) poly[t] = z * poly[t];
      }
    }
    // Shapley weights w(t) = t! (k-1-t)! / k!, summed against the coefficients
    double wk = 1.0 / k;
    double w = 0.0;
    w += wk * poly[0];
    for (int t = 1; t <= m; ++t) {
      wk = wk * t / (k - t);
      w += wk * poly[t];
    }
    values[e] = w;
  }
}

// The end (exclusive path index) of the slice holding path ``p`` (treeshap.py SLICE_PATHS).
__device__ __forceinline__ long long slice_end_of(long long p, long long slice_paths) {
  return (p / slice_paths + 1) * slice_paths;
}

// The entries [q0, q1) of ``group_paths`` a block walks: group g's paths, or in slice mode
// (blockIdx.z a slice; ``slice_ptr`` (n_groups, n_slices + 1)) that slice's paths of group g.
__device__ __forceinline__ void block_paths(const long long* __restrict__ group_ptr,
                                            const long long* __restrict__ slice_ptr, int g, int n_slices,
                                            int slice_mode, long long& q0, long long& q1) {
  q0 = group_ptr[g];
  q1 = group_ptr[g + 1];
  if (slice_mode) {
    q0 = slice_ptr[g * (long long)(n_slices + 1) + blockIdx.z];
    q1 = slice_ptr[g * (long long)(n_slices + 1) + blockIdx.z + 1];
  }
}

// Slices (treeshap.py SLICE_PATHS): a row's contributions are summed per slice of
// ``slice_paths`` paths (by path index) from zero, and the slice sums added in slice order,
// as the CPU does. Two launch modes give those bits:
//   * rows (gridDim.z == 1, ``partial`` null or a (n, n_groups, F) scratch): each thread
//     walks all its group's paths and adds its accumulator to ``out`` when the slice changes;
//   * slices (few rows): blockIdx.z is a slice (``slice_ptr``: the group's paths of each
//     slice in ``group_paths``); each thread writes its slice sums to
//     partial[(z, row, g, :)], and shap_slices_sum adds them in slice order. Many more
//     threads than rows: a few thousand rows alone would leave most of the GPU idle.
// The accumulator: shared memory when it fits (acc_shared), else the thread's row of
// ``partial`` (so ``out`` only ever receives whole slice sums).
// shap_rows' parameters, shared by its body and its two instances (gl_nodes: (nq, t) at
// nq * SHAP_QUAD_MAX_NQ + t; gl_off: -1 / (1 - u); out: (n, n_groups, F + 1), the bias column
// is left alone)
#define SHAP_ROWS_PARAMS \
    const float* __restrict__ X, long long n, int F, \
    const long long* __restrict__ path_offsets, const int* __restrict__ group_paths, \
    const long long* __restrict__ group_ptr, const int* __restrict__ feature, \
    const float* __restrict__ lower, const float* __restrict__ upper, \
    const unsigned char* __restrict__ missing, const long long* __restrict__ cat_offset, \
    const unsigned* __restrict__ cat_pool, const double* __restrict__ zero_fraction, \
    const double* __restrict__ path_v, const long long* __restrict__ table_offsets, \
    const double* __restrict__ table_values, const double* __restrict__ zero_fraction_inv, \
    const double* __restrict__ recip, int n_groups, int acc_shared, long long slice_paths, \
    const long long* __restrict__ slice_ptr, int n_slices, int slice_mode, \
    int quad_max_k, const double* __restrict__ gl_nodes, \
    const double* __restrict__ gl_weights, const double* __restrict__ gl_off, \
    double* __restrict__ partial, \
    double* __restrict__ out
#define SHAP_ROWS_ARGS                                                                        \
  X, n, F, path_offsets, group_paths, group_ptr, feature, lower, upper, missing, cat_offset,    \
      cat_pool, zero_fraction, path_v, table_offsets, table_values, zero_fraction_inv, recip, \
      n_groups, acc_shared, slice_paths, slice_ptr, n_slices, slice_mode, quad_max_k, gl_nodes, \
      gl_weights, gl_off, partial, out

template <int kTableLoads>
__device__ __forceinline__ void shap_rows_body(SHAP_ROWS_PARAMS) {
  extern __shared__ double acc_smem[];
  const long long row = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (row >= n) return;  // no block barriers below: a thread past the end just leaves
  // this warp's live lanes (rows < n; lanes 0..live-1), which share the quadrature's g_on
  const int lane = threadIdx.x & 31;
  const long long warp_row0 = row - lane;
  const int live = n - warp_row0 >= 32 ? 32 : (int)(n - warp_row0);
  const unsigned live_mask = live == 32 ? 0xffffffffu : (1u << live) - 1u;
  const int g = blockIdx.y;
  const float* x = X + row * (long long)F;
  double* orow = out + (row * n_groups + g) * (long long)(F + 1);
  long long q0, q1;
  block_paths(group_ptr, slice_ptr, g, n_slices, slice_mode, q0, q1);
  double* prow = nullptr;  // this thread's (slice,) row, group slot of ``partial``
  if (slice_mode) {
    const long long z = blockIdx.z;
    prow = partial + ((z * n + row) * n_groups + g) * (long long)F;
  } else if (!acc_shared) {
    prow = partial + (row * n_groups + g) * (long long)F;
  }
  // acc(f): this row's running sum for feature f in the current slice
  const int T = blockDim.x;
  double* acc = acc_shared ? acc_smem + threadIdx.x : prow;
  const int stride = acc_shared ? T : 1;
  // the warp's g_on of the current quadrature path, (k, SHAP_QUAD_MAX_NQ), after the accumulators
  double* gq = acc_smem + (acc_shared ? (long long)T * F : 0) + (threadIdx.x >> 5) * (SHAP_QUAD_K_NQ);
  for (int f = 0; f < F; ++f) acc[f * stride] = 0.0;
  if (!slice_mode)
    for (int f = 0; f < F; ++f) orow[f] = 0.0;
  // the end of the current slice (group_paths ascends, so one division per slice, not per path)
  long long slice_end = q0 < q1 ? slice_end_of(group_paths[q0], slice_paths) : 0;
  double pw[SHAP_MAX_LEN + 1];

  // the next path's header is loaded while this one is computed (its loads are a chain:
  // group_paths, then path_offsets / path_v / table_offsets)
  int p_next = q0 < q1 ? group_paths[q0] : 0;
  long long s_next = 0, e_next = 0, toff_next = 0;
  double v_next = 0.0;
  if (q0 < q1) {
    s_next = path_offsets[p_next] + 1;
    e_next = path_offsets[p_next + 1];
    v_next = path_v[p_next];
    toff_next = table_offsets[p_next];
  }
  int p_after = q0 + 1 < q1 ? group_paths[q0 + 1] : 0;
  for (long long q = q0; q < q1; ++q) {
    const int p = p_next;
    const long long s = s_next;
    const int k = (int)(e_next - s);
    const double v = v_next;
    const long long toff = toff_next;
    if (q + 1 < q1) {
      p_next = p_after;
      s_next = path_offsets[p_next] + 1;
      e_next = path_offsets[p_next + 1];
      v_next = path_v[p_next];
      toff_next = table_offsets[p_next];
      if (q + 2 < q1) p_after = group_paths[q + 2];
    }
    if (!slice_mode && p >= slice_end) {  // a new slice: the last one's sums to out
      slice_end = slice_end_of(p, slice_paths);
      for (int f = 0; f < F; ++f) {
        orow[f] += acc[f * stride];
        acc[f * stride] = 0.0;
      }
    }
    if (k == 0) continue;
    if (toff >= 0) {  // table method
      const long long B = path_on_bits(x, s, k, feature, lower, upper, missing, cat_offset, cat_pool);
      const long long half = 1LL << (k - 1);
      // kTableLoads elements' loads issued together, then their additions in element order
      // (the same bits): one element at a time waited on each table read (an L2 hit) in turn
      for (int i0 = 0; i0 < k; i0 += kTableLoads) {
        double w[kTableLoads], z[kTableLoads];
        int f[kTableLoads];
#pragma unroll
        for (int j = 0; j < kTableLoads; ++j) {
          const int i = i0 + j;
          if (i < k) {
            const long long P = (B & ((1LL << i) - 1)) | ((B >> (i + 1)) << i);
            w[j] = table_values[toff + i * half + P];
            z[j] = zero_fraction[s + i];
            f[j] = feature[s + i];
          }
        }
#pragma unroll
        for (int j = 0; j < kTableLoads; ++j) {
          const int i = i0 + j;
          if (i < k) {
            const double von = v * (1.0 - z[j]);
            const double voff = -v * z[j];
            const double c = ((B >> i) & 1) ? von : voff;
            acc[f[j] * stride] += c * w[j];
          }
        }
      }
    } else if (k <= quad_max_k) {  // quadrature (treeshap.py _block_quadrature)
      const long long on = path_on_bits(x, s, k, feature, lower, upper, missing, cat_offset, cat_pool);
      const int nq = (k + 1) / 2;
      const long long base = nq * (long long)SHAP_QUAD_MAX_NQ;
      // g_on(l, t) = (1 - z_l) / ((1 - u_t) z_l + u_t) does not depend on the row: the warp's
      // lanes divide once per (element, node) between them, not once per row; a warp of at
      // most two rows divides as it goes (only for elements that are on)
      const bool shared_g = live > 2;
      __syncwarp(live_mask);  // every lane has read the last path's values
      for (int e = lane; shared_g && e < k * nq; e += live) {
        const int l = e / nq, t = e - l * nq;
        const double z = zero_fraction[s + l];
        const double u = gl_nodes[base + t];
        gq[l * SHAP_QUAD_MAX_NQ + t] = (1.0 - z) / ((1.0 - u) * z + u);
      }
      __syncwarp(live_mask);
      double U[SHAP_QUAD_MAX_NQ], A[SHAP_QUAD_MAX_NQ], Goff[SHAP_QUAD_MAX_NQ];
#pragma unroll
      for (int t = 0; t < SHAP_QUAD_MAX_NQ; ++t) {
        U[t] = t < nq ? gl_nodes[base + t] : 0.0;
        A[t] = t < nq ? gl_weights[base + t] : 0.0;
        Goff[t] = t < nq ? gl_off[base + t] : 0.0;
      }
      for (int l = 0; l < k; ++l) {
        const double z = zero_fraction[s + l];
        const bool ol = (on >> l) & 1;
        // (1 - u) z + u o: u o is u or +0 exactly, so a select gives the CPU's bits
#pragma unroll
        for (int t = 0; t < SHAP_QUAD_MAX_NQ; ++t)
          if (t < nq) A[t] *= (1.0 - U[t]) * z + (ol ? U[t] : 0.0);
      }
      // two loops, not a select in one: a select would divide in the shared case too
      if (shared_g) {
        // two elements at a time (two independent sums in flight), added in element order
        for (int l = 0; l < k; l += 2) {
          const bool two = l + 1 < k;
          const int lb = two ? l + 1 : l;
          const bool oa = (on >> l) & 1, ob = (on >> lb) & 1;
          const double* ga = gq + l * SHAP_QUAD_MAX_NQ;
          const double* gb = gq + lb * SHAP_QUAD_MAX_NQ;
          double wa = 0.0, wb = 0.0;
#pragma unroll
          for (int t = 0; t < SHAP_QUAD_MAX_NQ; ++t)
            if (t < nq) {
              wa += A[t] * (oa ? ga[t] : Goff[t]);
              wb += A[t] * (ob ? gb[t] : Goff[t]);
            }
          acc[feature[s + l] * stride] += v * wa;
          if (two) acc[feature[s + lb] * stride] += v * wb;
        }
      } else {
        for (int l = 0; l < k; ++l) {
          const bool ol = (on >> l) & 1;
          const double z = zero_fraction[s + l];
          double w = 0.0;
#pragma unroll
          for (int t = 0; t < SHAP_QUAD_MAX_NQ; ++t)
            if (t < nq) w += A[t] * (ol ? (1.0 - z) / ((1.0 - U[t]) * z + U[t]) : Goff[t]);
          acc[feature[s + l] * stride] += v * w;
        }
      }
    } else {  // path method: EXTEND every element, UNWOUND-SUM each one
      const long long on = path_on_bits(x, s, k, feature, lower, upper, missing, cat_offset, cat_pool);
      const int d = path_extend(pw, on, s, k, -1, zero_fraction, recip);
      for (int i = 0; i < k; ++i) {
        const double z = zero_fraction[s + i];
        const double oi = ((on >> i) & 1) ? 1.0 : 0.0;
        const double w = path_unwound(pw, d, z, zero_fraction_inv[s + i], oi, recip);
        acc[feature[s + i] * stride] += v * (oi - z) * w;
      }
    }
  }
  if (slice_mode) {
    if (acc_shared)
      for (int f = 0; f < F; ++f) prow[f] = acc[f * stride];
  } else {
    for (int f = 0; f < F; ++f) orow[f] += acc[f * stride];
  }
}

// The two instances: kTableLoads elements of a tabled path loaded together. Eight keep more
// table reads in flight (slice mode's few rows: SHAP case c 1.25x, the imported model 1.08x
// against one at a time) but take 167 registers a thread, not 126, which cost the
// one-thread-a-row mode of many rows more than they gave (case a 0.88x against four): the
// host picks one by the launch mode (_cuda_treeshap._ROWS_KERNEL).
extern "C" __global__ void __launch_bounds__(128) shap_rows(SHAP_ROWS_PARAMS) {
  shap_rows_body<4>(SHAP_ROWS_ARGS);
}

extern "C" __global__ void __launch_bounds__(128) shap_rows_loads8(SHAP_ROWS_PARAMS) {
  shap_rows_body<8>(SHAP_ROWS_ARGS);
}

// The slice sums of shap_rows' slice mode added in slice order, from zero, into ``out``:
// one thread per (row, group, feature); partial is (n_slices, n, n_groups, F), read with the
// feature fastest (coalesced).
extern "C" __global__ void shap_slices_sum(const double* __restrict__ partial, long long n, int n_groups,
                                           int F, int n_slices, double* __restrict__ out) {
  const long long total = n * n_groups * (long long)F;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
       e += (long long)gridDim.x * blockDim.x) {
    const long long rg = e / F;  // row * n_groups + g
    const int f = (int)(e - rg * F);
    double sum = 0.0;
    for (int z = 0; z < n_slices; ++z) sum += partial[z * total + e];
    out[rg * (F + 1) + f] = sum;
  }
}

// SHAP interaction values, the CPU's path method (treeshap.py _interaction_kernel) per row:
// main effects on the diagonal, then for every element j the path without j re-EXTENDed and
// each other element i given v/2 (o_j - z_j) (o_i - z_i) W_i at [f_j, f_i], subtracted from
// [f_j, f_j]; O(k^3) per row and path, for the paths of at least ``min_k`` elements (the
// others take shap_interactions_quadrature). Thread mapping as shap_rows. The accumulator ``acc``
// is (n_groups, F, F, n) with the row fastest, so a warp's read-modify-writes are coalesced.
extern "C" __global__ void __launch_bounds__(128) shap_interactions_rows(
    const float* __restrict__ X, long long n, int F,
    const long long* __restrict__ path_offsets, const int* __restrict__ group_paths,
    const long long* __restrict__ group_ptr, const int* __restrict__ feature,
    const float* __restrict__ lower, const float* __restrict__ upper,
    const unsigned char* __restrict__ missing, const long long* __restrict__ cat_offset,
    const unsigned* __restrict__ cat_pool, const double* __restrict__ zero_fraction,
    const double* __restrict__ zero_fraction_inv, const double* __restrict__ path_v,
    const double* __restrict__ recip, int min_k, double* __restrict__ acc) {  // zeroed by the caller
  const long long row = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (row >= n) return;
  const int g = blockIdx.y;
  const float* x = X + row * (long long)F;
  double* a = acc + (long long)g * F * F * n + row;
#define ACC(f1, f2) a[((long long)(f1) * F + (f2)) * n]
  double pw[SHAP_MAX_LEN + 1];
  for (long long q = group_ptr[g]; q < group_ptr[g + 1]; ++q) {
    const int p = group_paths[q];
    const long long s = path_offsets[p] + 1;
    const int k = (int)(path_offsets[p + 1] - s);
    if (k == 0 || k < min_k) continue;  // shorter paths: shap_interactions_quadrature
    const double v = path_v[p];
    const long long on = path_on_bits(x, s, k, feature, lower, upper, missing, cat_offset, cat_pool);
    int d = path_extend(pw, on, s, k, -1, zero_fraction, recip);
    for (int i = 0; i < k; ++i) {
      const double z = zero_fraction[s + i];
      const double oi = ((on >> i) & 1) ? 1.0 : 0.0;
      const double w = path_unwound(pw, d, z, zero_fraction_inv[s + i], oi, recip);
      const int fi = feature[s + i];
      ACC(fi, fi) += v * (oi - z) * w;
    }
    if (k < 2) continue;
    for (int j = 0; j < k; ++j) {
      d = path_extend(pw, on, s, k, j, zero_fraction, recip);
      const int fj = feature[s + j];
      const double zj = zero_fraction[s + j];
      const double oj = ((on >> j) & 1) ? 1.0 : 0.0;
      const double cj = 0.5 * v * (oj - zj);
      for (int i = 0; i < k; ++i) {
        if (i == j) continue;
        const double z = zero_fraction[s + i];
        const double oi = ((on >> i) & 1) ? 1.0 : 0.0;
        const double w = path_unwound(pw, d, z, zero_fraction_inv[s + i], oi, recip);
        const double val = cj * (oi - z) * w;
        ACC(fj, feature[s + i]) += val;
        ACC(fj, fj) -= val;
      }
    }
  }
#undef ACC
}

// The end of a slice of paths (treeshap.py INTERACTION_SLICE_PATHS) for a thread-per-row
// accumulator ``a`` ((F + 1) x F entries of stride n): the slice's sums, on the diagonal and
// upper triangle, are added to the totals (the lower triangle for (a, b), a < b, at [b, a];
// row F for the diagonal) and cleared.
__device__ __forceinline__ void flush_rows_slice(double* a, int F, long long n) {
  for (int f1 = 0; f1 < F; ++f1) {
    double* d = a + ((long long)f1 * F + f1) * n;
    a[((long long)F * F + f1) * n] += *d;
    *d = 0.0;
    for (int f2 = f1 + 1; f2 < F; ++f2) {
      double* u = a + ((long long)f1 * F + f2) * n;
      a[((long long)f2 * F + f1) * n] += *u;
      *u = 0.0;
    }
  }
}

// The parameters of every interaction kernel up to ``g_off``: the rows, the path table and
// the quadrature's constants (shap_interactions_quadrature below says what each holds).
#define SHAP_INTERACTION_TABLE_PARAMS                                                                    \
  const float *__restrict__ X, long long n, int F, const long long *__restrict__ path_offsets,          \
      const int *__restrict__ group_paths, const long long *__restrict__ group_ptr,                        \
      const int *__restrict__ feature, const float *__restrict__ lower, const float *__restrict__ upper,  \
      const unsigned char *__restrict__ missing, const long long *__restrict__ cat_offset,                \
      const unsigned *__restrict__ cat_pool, const double *__restrict__ zero_fraction,                    \
      const double *__restrict__ path_v, const double *__restrict__ gl_nodes,                             \
      const double *__restrict__ gl_weights, const double *__restrict__ g_on, long long g_on_stride,     \
      const double *__restrict__ g_off

// A thread-per-row interaction kernel's walk: path(p, s, k) for each path p of group g in
// order (s its first element, k its length), the row's slice sums added to its totals
// (flush_rows_slice) at each slice's end and after the last.
template <class PathFn>
__device__ __forceinline__ void rows_walk_paths(const long long* __restrict__ path_offsets,
                                                const int* __restrict__ group_paths,
                                                const long long* __restrict__ group_ptr, int g, long long slice_paths,
                                                double* a, int F, long long n, PathFn&& path) {
  const long long q0 = group_ptr[g], q1 = group_ptr[g + 1];
  long long slice_end = q0 < q1 ? slice_end_of(group_paths[q0], slice_paths) : 0;
  for (long long q = q0; q < q1; ++q) {
    const int p = group_paths[q];
    if (p >= slice_end) {  // a new slice: the last one's sums to the totals
      slice_end = slice_end_of(p, slice_paths);
      flush_rows_slice(a, F, n);
    }
    const long long s = path_offsets[p] + 1;
    path(p, s, (int)(path_offsets[p + 1] - s));
  }
  flush_rows_slice(a, F, n);
}

// SHAP interaction values by Gauss-Legendre quadrature, the CPU's default method
// (treeshap.py _interaction_block without tables) per row, for paths of at most
// SHAP_QUAD_MAX_K elements: per node u (weight a) A = v/2 a prod_l ((1 - u) z_l + u o_l),
// G_l = g_on or g_off, H_l = A G_l; the diagonal gets 2 sum H_l (the SHAP value) and the
// upper triangle [a, b] the pair terms sum_t H_i G_j, summed as the CPU's _add_node_dot.
// O(k^2 nq) per row and path. ``g_on`` ((1 - z) / ((1 - u) z + u) per node and element:
// node t's values at g_on + t * g_on_stride, so the element lanes of the warp kernel read
// them coalesced; made once by interaction_g_on) and ``g_off`` (-1 / (1 - u) per (nq, node),
// from the host), so no division runs per row. ``acc`` (n_groups, F + 1, F, n), zeroed: the slice
// sums on the diagonal and upper triangle, the totals (flush_rows_slice) in the lower
// triangle and row F; interaction_finish makes the matrix.
extern "C" __global__ void __launch_bounds__(128)
    shap_interactions_quadrature(SHAP_INTERACTION_TABLE_PARAMS, long long slice_paths, double* __restrict__ acc) {
  const long long row = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (row >= n) return;
  const int g = blockIdx.y;
  const float* x = X + row * (long long)F;
  double* a = acc + (long long)g * (F + 1) * F * n + row;
  double Hq[SHAP_QUAD_MAX_NQ * SHAP_QUAD_MAX_K], Gq[SHAP_QUAD_MAX_NQ * SHAP_QUAD_MAX_K];
  rows_walk_paths(path_offsets, group_paths, group_ptr, g, slice_paths, a, F, n, [&](int p, long long s, int k) {
    if (k == 0 || k > SHAP_QUAD_MAX_K) return;
    const long long on = path_on_bits(x, s, k, feature, lower, upper, missing, cat_offset, cat_pool);
    const int nq = (k + 1) / 2;
    const double hv = 0.5 * path_v[p];
    for (int t = 0; t < nq; ++t) {
      const double u = gl_nodes[nq * SHAP_QUAD_MAX_NQ + t];
      const double goff = g_off[nq * SHAP_QUAD_MAX_NQ + t];
      double A = gl_weights[nq * SHAP_QUAD_MAX_NQ + t] * hv;
      for (int l = 0; l < k; ++l) {
        const double z = zero_fraction[s + l];
        const double f0 = (1.0 - u) * z;
        const double ol = ((on >> l) & 1) ? 1.0 : 0.0;
        A *= f0 + u * ol;
        Gq[t * SHAP_QUAD_MAX_K + l] = g_on[t * g_on_stride + s + l] * ol + goff * (1.0 - ol);
      }
      for (int l = 0; l < k; ++l) Hq[t * SHAP_QUAD_MAX_K + l] = A * Gq[t * SHAP_QUAD_MAX_K + l];
    }
    for (int l = 0; l < k; ++l) {
      const int fl = feature[s + l];
      double* d = a + ((long long)fl * F + fl) * n;
      for (int t = 0; t < nq; ++t) *d += 2.0 * Hq[t * SHAP_QUAD_MAX_K + l];
    }
    for (int l = 0; l < k - 1; ++l) {
      const int fl = feature[s + l];
      for (int m = l + 1; m < k; ++m) {
        const int fm = feature[s + m];
        double* c = a + (fl < fm ? (long long)fl * F + fm : (long long)fm * F + fl) * n;
        // the CPU's grouping: four nodes at a time, then the remainder
        int t = 0;
        while (t < nq) {
          const double* H = Hq + t * SHAP_QUAD_MAX_K;
          const double* Gm = Gq + t * SHAP_QUAD_MAX_K;
          const int K = SHAP_QUAD_MAX_K;
          const int rem = nq - t;
          if (rem >= 4) {
            *c += (H[l] * Gm[m] + H[K + l] * Gm[K + m]) + (H[2 * K + l] * Gm[2 * K + m] + H[3 * K + l] * Gm[3 * K + m]);
            t += 4;
          } else if (rem == 3) {
            *c += H[l] * Gm[m] + H[K + l] * Gm[K + m] + H[2 * K + l] * Gm[2 * K + m];
            t += 3;
          } else if (rem == 2) {
            *c += H[l] * Gm[m] + H[K + l] * Gm[K + m];
            t += 2;
          } else {
            *c += H[l] * Gm[m];
            t += 1;
          }
        }
      }
    }
  });
}

// ``g_on`` of the interaction kernels, (SHAP_QUAD_MAX_NQ, stride) node-major, zeroed by the
// caller: for each element of a path of 1 <= k <= SHAP_QUAD_MAX_K elements and node t < nq,
// (1 - z) / ((1 - u) z + u), evaluated as the CPU's NumPy expression (the same bits: IEEE
// operations, no contraction). A thread per path; ``gl_nodes`` (nq, t), row stride
// SHAP_QUAD_MAX_NQ.
extern "C" __global__ void interaction_g_on(const long long* __restrict__ path_offsets, long long n_paths,
                                            const double* __restrict__ zero_fraction,
                                            const double* __restrict__ gl_nodes, long long stride,
                                            double* __restrict__ g_on) {
  const long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (p >= n_paths) return;
  const long long s = path_offsets[p] + 1;
  const int k = (int)(path_offsets[p + 1] - s);
  if (k < 1 || k > SHAP_QUAD_MAX_K) return;
  const int nq = (k + 1) / 2;
  for (int t = 0; t < nq; ++t) {
    const double u = gl_nodes[nq * SHAP_QUAD_MAX_NQ + t];
    for (int l = 0; l < k; ++l) {
      const double z = zero_fraction[s + l];
      const double f0 = (1.0 - u) * z;
      g_on[t * stride + s + l] = (1.0 - z) / (f0 + u);
    }
  }
}

// The interaction matrix of each (row, group) from the quadrature's accumulator: the upper
// triangle mirrored, the diagonal the SHAP value minus the row's off-diagonal sum (in the
// CPU's order). ``out`` (n, n_groups, F + 1, F + 1); its diagonal holds the running sums.
extern "C" __global__ void interaction_finish(const double* __restrict__ acc, long long n, int F, int n_groups,
                                              double* __restrict__ out) {
  const long long row = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (row >= n) return;
  const int g = blockIdx.y;
  const double* a = acc + (long long)g * (F + 1) * F * n + row;  // the totals: lower triangle, row F
  double* o = out + (row * n_groups + g) * (long long)(F + 1) * (F + 1);
  const long long W = F + 1;
  for (int f = 0; f < F; ++f) o[f * W + f] = 0.0;
  for (int f1 = 0; f1 < F; ++f1) {
    for (int f2 = f1 + 1; f2 < F; ++f2) {
      const double val = a[((long long)f2 * F + f1) * n];
      o[f1 * W + f2] = val;
      o[f2 * W + f1] = val;
      o[f1 * W + f1] += val;
      o[f2 * W + f2] += val;
    }
  }
  for (int f = 0; f < F; ++f) o[f * W + f] = a[((long long)F * F + f) * n] - o[f * W + f];
}

// SHAP interaction values by the same quadrature with half a warp (16 lanes) per row and
// the row's accumulator in shared memory (the upper triangle and diagonal, F (F + 1) / 2
// doubles; ``kShared``), or, for F too wide for that, in the upper triangle of the row's own
// output matrix (for few rows, where a thread per row leaves the GPU idle). The
// thread-per-row kernel above spends its time on read-modify-writes of a global accumulator
// (k (k + 1) / 2 per path and row), which here stay on the SM. Per path (every lane of the
// warp on the same path, each half on its own row, so the control flow is uniform; paths
// have at most 2 kNQ elements):
//   * lane l < k loads element l and its on-flag (a ballot gives the half the path's
//     on-bits), and stages z_l and f_l for the half;
//   * lane t < nq forms A(t) = w_t v/2 prod_l ((1 - u_t) z_l + u_t o_l) in element order,
//     the CPU's product, and stages it;
//   * lane l forms G_l(t) and H_l(t) = A(t) G_l(t), stages them, and adds 2 H_l(t) to its
//     diagonal entry;
//   * lane p of each round of 16 takes the pair p = (l, m), l < m, and adds
//     sum_t H_l(t) G_m(t), in the CPU's grouping, to entry (f_l, f_m).
// The half's staging area holds what its lanes exchange: shared loads, not shuffles (a
// double crosses lanes in one load where a shuffle takes two instructions per value, and
// the pairs read H_l and G_m kNQ values at a time). A path's features are distinct, so no
// two lanes of a path touch one entry, and a __syncwarp between paths keeps every entry's
// additions in path order: the values are bitwise those of the thread-per-row kernel (and
// the CPU's). Two rows a warp, not one: a half-warp covers the up to 16 elements, and the
// path's loads serve both rows (the kernel waits on latency and on the L1 pipe, which serves
// shared memory: Nsight Compute, docs/performance-notes.md). At the
// end the half writes the row's interaction matrix as interaction_finish does (in place when
// the accumulator is the output: lane f reads the upper triangle and writes row f's lower
// half and diagonal, which no other lane reads). ``out`` (n, n_groups, F + 1, F + 1) is
// zeroed by the caller; the entries [0, F) x [0, F) are written. Dynamic shared memory: the
// staging areas (``interaction_stage_doubles`` per row) then, with ``kShared``, the
// accumulators. Instances: kNQ = 4 for tables whose quadrature paths have at most 8 elements
// (half the registers and unrolled work of kNQ = 8), and the widest for the rest.
// Memory traffic per row and path: the k elements' data (shared by the warp's loads) and
// the k row values (L1); the accumulator stays on the SM, or costs one 32-byte sector per
// entry update in the output.

__device__ __forceinline__ long long tri_index(int a, int b, int F) {  // a <= b
  return (long long)a * F - (long long)a * (a - 1) / 2 + (b - a);
}

// c plus the products p[0..rem) (rem <= 4) summed as the CPU's _add_node_dot groups them
__device__ __forceinline__ double add_group(double c, double p0, double p1, double p2, double p3, int rem) {
  if (rem >= 4) return c + ((p0 + p1) + (p2 + p3));
  if (rem == 3) return c + (p0 + p1 + p2);
  if (rem == 2) return c + (p0 + p1);
  return c + p0;
}

// doubles of a half-warp's staging area: H and G (kNQ x 16 each), z (16), A (kNQ), and 16
// (feature, entry-row offset) int pairs; even, so every area starts 16-byte aligned
template <int kNQ>
struct interaction_stage_doubles {
  static constexpr int value = 2 * 16 * kNQ + 16 + kNQ + 16 + (kNQ & 1);
};

#define SHAP_INTERACTIONS_WARP_PARAMS                                                                             \
  SHAP_INTERACTION_TABLE_PARAMS, int n_groups, long long slice_paths, const long long *__restrict__ slice_ptr,      \
      int n_slices, int slice_mode, double *__restrict__ partial, double *__restrict__ out
#define SHAP_INTERACTIONS_WARP_ARGS                                                                          \
  X, n, F, path_offsets, group_paths, group_ptr, feature, lower, upper, missing, cat_offset, cat_pool,         \
      zero_fraction, path_v, gl_nodes, gl_weights, g_on, g_on_stride, g_off, n_groups, slice_paths, slice_ptr, n_slices, \
      slice_mode, partial, out

template <int kNQ, bool kShared>
__device__ __forceinline__ void shap_interactions_warp_body(SHAP_INTERACTIONS_WARP_PARAMS) {
  extern __shared__ double shared_acc[];
  constexpr int kMaxK = 2 * kNQ < SHAP_QUAD_MAX_K ? 2 * kNQ : SHAP_QUAD_MAX_K;  // longest path it takes (k <= 2 nq)
  constexpr int kMaxPairs = kMaxK * (kMaxK - 1) / 2;
  constexpr int kRounds = (kMaxPairs + 15) / 16;
  constexpr int STAGE = interaction_stage_doubles<kNQ>::value;
  const unsigned FULL = 0xffffffffu;
  const int HALF = 16;
  const int lane = threadIdx.x & (HALF - 1);      // lane in the half-warp
  const int half = (threadIdx.x >> 4) & 1;
  const int slot = threadIdx.x >> 4;              // half-warp (row) in the block
  const int rows_per_block = blockDim.x >> 4;
  const long long first = (long long)blockIdx.x * rows_per_block;
  if (first + (slot & ~1) >= n) return;           // whole warps only (ballots span both halves)
  const long long row = first + slot;
  const bool valid = row < n;                     // the warp's other half may have no row
  const int g = blockIdx.y;
  const long long W = F + 1;
  const long long TRI = (long long)F * (F + 1) / 2;
  double* o = out + ((valid ? row : first) * n_groups + g) * W * W;
  double* stage = shared_acc + slot * STAGE;
  // node-major, so that the element lanes' writes and the pairs' reads hit distinct banks
  double* Hs = stage;              // (kNQ, 16): H_l(t)
  double* Gs = stage + 16 * kNQ;   // (kNQ, 16): G_l(t)
  double* zs = stage + 32 * kNQ;   // (16,): z_l
  double* As = zs + 16;            // (kNQ,): A(t)
  int2* fs = reinterpret_cast<int2*>(As + kNQ + (kNQ & 1));  // (16,): f_l, the offset of row f_l's entries
  double* acc = kShared ? shared_acc + (long long)rows_per_block * STAGE + slot * TRI : o;
  if (kShared)
    for (long long c = lane; c < TRI; c += HALF) acc[c] = 0.0;
  // this lane's pair (l | m << 4) of each round r in byte r: pairs by m then l, the task
  // index 16 r + lane (the same for every path; a path of k elements has its first
  // k (k - 1) / 2)
  unsigned long long pairs = 0;
  for (int r = 0; r < kRounds; ++r) {
    const int task = 16 * r + lane;
    int m = 1;
    while ((m + 1) * m / 2 <= task) ++m;
    if (task < kMaxPairs) pairs |= (unsigned long long)((task - m * (m - 1) / 2) | (m << 4)) << (8 * r);
  }
  __syncwarp();
  // the end of a slice: the slice sums to the totals, the accumulator cleared. Totals: in
  // shared mode the upper triangle and diagonal of ``o``; in output mode (the accumulator is
  // o's upper triangle) the lower triangle, [b, a] for (a, b), and row F for the diagonal.
  auto flush = [&]() {
    if (valid)
      for (int a = 0; a < F; ++a)
        for (int b = a + lane; b < F; b += HALF) {
          double* e = acc + (kShared ? tri_index(a, b, F) : a * W + b);
          double* t = kShared ? o + a * W + b : (a == b ? o + F * W + a : o + b * W + a);
          *t += *e;
          *e = 0.0;
        }
    __syncwarp();
  };
  const float* x = X + (valid ? row : first) * (long long)F;
  const int NQ = SHAP_QUAD_MAX_NQ;  // row stride of the node constants
  long long q0, q1;
  block_paths(group_ptr, slice_ptr, g, n_slices, slice_mode, q0, q1);
  long long slice_end = q0 < q1 ? slice_end_of(group_paths[q0], slice_paths) : 0;
  for (long long q = q0; q < q1; ++q) {
    const int p = group_paths[q];
    if (!slice_mode && p >= slice_end) {
      slice_end = slice_end_of(p, slice_paths);
      flush();
    }
    const long long s = path_offsets[p] + 1;
    const int k = (int)(path_offsets[p + 1] - s);
    if (k == 0 || k > kMaxK) continue;
    const int nq = (k + 1) / 2;
    // element lanes: the element, its on-flag, staged z_l and (f_l, row offset)
    bool ol = false;
    if (lane < k) {
      const int fl = feature[s + lane];
      ol = element_is_on(x[fl], s + lane, lower, upper, missing, cat_offset, cat_pool);
      zs[lane] = zero_fraction[s + lane];
      fs[lane] = int2{fl, kShared ? (int)(tri_index(fl, fl, F) - fl) : (int)(fl * W)};
    }
    const unsigned on = __ballot_sync(FULL, ol) >> (half * HALF);
    __syncwarp();
    // node lanes: A(t), the product in element order; the on-flag selects f0 + u or f0
    // (the CPU's f0 + u * o, the same bits: the terms are finite and non-negative)
    if (lane < nq) {
      const double u = gl_nodes[nq * NQ + lane];
      double A = gl_weights[nq * NQ + lane] * (0.5 * path_v[p]);
      for (int l = 0; l < k; ++l) {
        const double f0 = (1.0 - u) * zs[l];
        A *= ((on >> l) & 1u) ? f0 + u : f0;
      }
      As[lane] = A;
    }
    __syncwarp();
    // G_l(t) (g_on or g_off as the on-flag selects: the CPU's g_on o + g_off (1 - o), the
    // same bits), H_l(t) = A(t) G_l(t) on element lanes, staged (zero past nq); the diagonal
    if (lane < k) {
      double Hl[kNQ];
#pragma unroll
      for (int t = 0; t < kNQ; ++t) {
        double G = 0.0;
        Hl[t] = 0.0;
        if (t < nq) {
          G = ol ? g_on[t * g_on_stride + s + lane] : g_off[nq * NQ + t];
          Hl[t] = As[t] * G;
        }
        Gs[t * 16 + lane] = G;
        Hs[t * 16 + lane] = Hl[t];
      }
      if (valid) {
        const int2 f = fs[lane];
        double* d = acc + f.y + f.x;
        double c = *d;
#pragma unroll
        for (int t = 0; t < kNQ; ++t)
          if (t < nq) c += 2.0 * Hl[t];
        *d = c;
      }
    }
    __syncwarp();
    // pairs (l, m), l < m, a round of 16 at a time
    const int n_pairs = k * (k - 1) / 2;
#pragma unroll
    for (int r = 0; r < kRounds; ++r) {
      if (16 * r >= n_pairs) break;
      if (16 * r + lane < n_pairs && valid) {
        const unsigned lm = (unsigned)(pairs >> (8 * r)) & 0xffu;
        const int l = lm & 15u, m = lm >> 4;
        const int2 fa = fs[l], fb = fs[m];
        double prod[kNQ < 4 ? 4 : kNQ];
#pragma unroll
        for (int t = 0; t < (kNQ < 4 ? 4 : kNQ); ++t) prod[t] = t < kNQ ? Hs[t * 16 + l] * Gs[t * 16 + m] : 0.0;
        double* e = acc + (fa.x < fb.x ? fa.y + fb.x : fb.y + fa.x);
        double c = add_group(*e, prod[0], prod[1], prod[2], prod[3], nq < 4 ? nq : 4);
        if constexpr (kNQ > 4) {
          if (nq > 4) c = add_group(c, prod[4], prod[5], prod[6], prod[7], nq - 4);
        }
        *e = c;
      }
    }
    __syncwarp();
  }
  if (slice_mode) {  // the slice sums out, for interaction_slices_finish
    if (valid) {
      double* prow = partial + (((long long)blockIdx.z * n + row) * n_groups + g) * TRI;
      for (long long c = lane; c < TRI; c += HALF) prow[c] = acc[c];
    }
    return;
  }
  flush();
  if (!valid) return;
  // the row's matrix, as interaction_finish: mirrored pairs, the diagonal the SHAP value
  // minus the row's off-diagonal sum in ascending feature order. In place: each lane writes
  // only row f's entries on the other side of the diagonal from the totals, which no lane reads.
  for (int f = lane; f < F; f += HALF) {
    double sum = 0.0;
    for (int f2 = 0; f2 < F; ++f2) {
      if (f2 == f) continue;
      const int lo = f < f2 ? f : f2, hi = f < f2 ? f2 : f;
      const double val = kShared ? o[lo * W + hi] : o[hi * W + lo];
      if (kShared ? f2 < f : f2 > f) o[f * W + f2] = val;
      sum += val;
    }
    double* diag = kShared ? o + f * W + f : o + F * W + f;
    o[f * W + f] = *diag - sum;
    if (!kShared) *diag = 0.0;  // row F back to zero (the bias row)
  }
}

#define SHAP_INTERACTIONS_NQ_SMALL (SHAP_QUAD_MAX_NQ < 4 ? SHAP_QUAD_MAX_NQ : 4)

// accumulators in shared memory, paths of at most 2 SHAP_QUAD_MAX_NQ elements
extern "C" __global__ void __launch_bounds__(128) shap_interactions_warp(SHAP_INTERACTIONS_WARP_PARAMS) {
  shap_interactions_warp_body<SHAP_QUAD_MAX_NQ, true>(SHAP_INTERACTIONS_WARP_ARGS);
}

// accumulators in shared memory, paths of at most 8 elements
extern "C" __global__ void __launch_bounds__(128) shap_interactions_warp_nq4(SHAP_INTERACTIONS_WARP_PARAMS) {
  shap_interactions_warp_body<SHAP_INTERACTIONS_NQ_SMALL, true>(SHAP_INTERACTIONS_WARP_ARGS);
}

// accumulators in the output matrices (F too wide for shared memory)
extern "C" __global__ void __launch_bounds__(128) shap_interactions_warp_out(SHAP_INTERACTIONS_WARP_PARAMS) {
  shap_interactions_warp_body<SHAP_QUAD_MAX_NQ, false>(SHAP_INTERACTIONS_WARP_ARGS);
}

// rows of a path's pair entries that shap_interactions_rows8 loads before it stores any
#define SHAP_ROWS8_LOAD_ROWS 2

// One path of exactly K <= 8 elements for one row of shap_interactions_rows8: the quadrature
// of shap_interactions_quadrature with every per-element and per-node value in registers (the
// loops are unrolled for K), so nothing but the accumulator's entries goes through memory.
// Entry (fa, fb) (fa <= fb) is at a + (fa F + fb) n, or a + tri_index(fa, fb, F) n (kTri).
template <int K, bool kTri>
__device__ __forceinline__ void interaction_path_in_registers(
    const float* __restrict__ x, long long s, double hv, const int* __restrict__ feature,
    const float* __restrict__ lower, const float* __restrict__ upper, const unsigned char* __restrict__ missing,
    const long long* __restrict__ cat_offset, const unsigned* __restrict__ cat_pool,
    const double* __restrict__ zero_fraction, const double* __restrict__ gl_nodes,
    const double* __restrict__ gl_weights, const double* __restrict__ g_on, long long g_on_stride,
    const double* __restrict__ g_off, double* __restrict__ a, long long n, int F) {
  constexpr int NQ = (K + 1) / 2;
  int f[K];
  bool on[K];
  double z[K];
#pragma unroll
  for (int l = 0; l < K; ++l) {
    f[l] = feature[s + l];
    z[l] = zero_fraction[s + l];
    on[l] = element_is_on(x[f[l]], s + l, lower, upper, missing, cat_offset, cat_pool);
  }
  // A(t) = w_t v/2 prod_l ((1 - u_t) z_l + u_t o_l) in element order (the on-flag selects
  // f0 + u or f0: the CPU's f0 + u * o, the same bits)
  double A[NQ];
#pragma unroll
  for (int t = 0; t < NQ; ++t) {
    const double u = gl_nodes[NQ * SHAP_QUAD_MAX_NQ + t];
    double At = gl_weights[NQ * SHAP_QUAD_MAX_NQ + t] * hv;
#pragma unroll
    for (int l = 0; l < K; ++l) {
      const double f0 = (1.0 - u) * z[l];
      At *= on[l] ? f0 + u : f0;
    }
    A[t] = At;
  }
  double G[K][NQ];
#pragma unroll
  for (int l = 0; l < K; ++l)
#pragma unroll
    for (int t = 0; t < NQ; ++t) G[l][t] = on[l] ? g_on[t * g_on_stride + s + l] : g_off[NQ * SHAP_QUAD_MAX_NQ + t];
#pragma unroll
  for (int l0 = 0; l0 < K; l0 += SHAP_ROWS8_LOAD_ROWS) {
    // the entries (l, m >= l) of SHAP_ROWS8_LOAD_ROWS rows l all loaded before any is stored:
    // a path's features are distinct (repeats are merged), so are its entries, and the loads
    // are in flight together (the compiler may not move a load above a store to an entry it
    // cannot tell apart)
    double* e[SHAP_ROWS8_LOAD_ROWS][K];
    double old[SHAP_ROWS8_LOAD_ROWS][K];
#pragma unroll
    for (int b = 0; b < SHAP_ROWS8_LOAD_ROWS; ++b) {
      const int l = l0 + b;
#pragma unroll
      for (int m = l; m < K; ++m) {
        const int fa = f[l] < f[m] ? f[l] : f[m], fb = f[l] < f[m] ? f[m] : f[l];
        e[b][m] = a + (kTri ? tri_index(fa, fb, F) : (long long)fa * F + fb) * n;
        old[b][m] = *e[b][m];
      }
    }
#pragma unroll
    for (int b = 0; b < SHAP_ROWS8_LOAD_ROWS; ++b) {
      const int l = l0 + b;
      if (l >= K) break;
      double H[NQ];
#pragma unroll
      for (int t = 0; t < NQ; ++t) H[t] = A[t] * G[l][t];
      double c = old[b][l];
#pragma unroll
      for (int t = 0; t < NQ; ++t) c += 2.0 * H[t];
      *e[b][l] = c;
#pragma unroll
      for (int m = l + 1; m < K; ++m) {
        double p[4] = {0.0, 0.0, 0.0, 0.0};
#pragma unroll
        for (int t = 0; t < NQ; ++t) p[t] = H[t] * G[m][t];
        *e[b][m] = add_group(old[b][m], p[0], p[1], p[2], p[3], NQ);
      }
    }
  }
}

// A path of k <= 8 elements (interaction_path_in_registers for its k; longer ones skipped)
template <bool kTri>
__device__ __forceinline__ void interaction_path_rows8(
    int k, const float* __restrict__ x, long long s, double hv, const int* __restrict__ feature,
    const float* __restrict__ lower, const float* __restrict__ upper, const unsigned char* __restrict__ missing,
    const long long* __restrict__ cat_offset, const unsigned* __restrict__ cat_pool,
    const double* __restrict__ zero_fraction, const double* __restrict__ gl_nodes,
    const double* __restrict__ gl_weights, const double* __restrict__ g_on, long long g_on_stride,
    const double* __restrict__ g_off, double* __restrict__ a, long long n, int F) {
#define DG_INTERACTION_PATH(K)                                                                                 \
  case K:                                                                                                      \
    interaction_path_in_registers<K, kTri>(x, s, hv, feature, lower, upper, missing, cat_offset, cat_pool,     \
                                           zero_fraction, gl_nodes, gl_weights, g_on, g_on_stride, g_off, a, n, \
                                           F);                                                                 \
    break;
  switch (k) {
    DG_INTERACTION_PATH(1)
    DG_INTERACTION_PATH(2)
    DG_INTERACTION_PATH(3)
    DG_INTERACTION_PATH(4)
    DG_INTERACTION_PATH(5)
    DG_INTERACTION_PATH(6)
    DG_INTERACTION_PATH(7)
    DG_INTERACTION_PATH(8)
    default:
      break;
  }
#undef DG_INTERACTION_PATH
}

// SHAP interaction values by the quadrature with a thread per row, for tables whose
// quadrature paths have at most 8 elements (the host dispatches here only when there are
// none of 9 to 16; longer paths are skipped): shap_interactions_quadrature's order of
// additions with the path's values in registers instead of local arrays (those cost more
// memory traffic than the accumulator). Two modes:
//   * ``slice_mode`` 0: ``acc`` (n_groups, F + 1, F, n) as shap_interactions_quadrature's
//     (row fastest: a warp's updates of an entry are coalesced; slice sums on and above the
//     diagonal, totals below and in row F), a row's slices in turn; interaction_finish
//     makes the matrix.
//   * ``slice_mode`` 1 (few rows: a thread per row would leave the GPU idle): blocks.z is
//     the slice, its paths of group g those of ``slice_ptr`` (n_groups, n_slices + 1); its
//     sums go to ``acc`` (n_slices, n_groups, F (F + 1) / 2, n), zeroed, row fastest;
//     interaction_rows_slices_finish adds them in slice order and makes the matrix.
extern "C" __global__ void __launch_bounds__(128)
    shap_interactions_rows8(SHAP_INTERACTION_TABLE_PARAMS, long long slice_paths, const long long* __restrict__ slice_ptr,
                            int n_slices, int slice_mode, double* __restrict__ acc) {
  const long long row = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (row >= n) return;
  const int g = blockIdx.y;
  const float* x = X + row * (long long)F;
  if (slice_mode) {
    const int z = blockIdx.z;
    const long long tri = (long long)F * (F + 1) / 2;
    double* a = acc + ((long long)z * gridDim.y + g) * tri * n + row;
    const long long* sp = slice_ptr + (long long)g * (n_slices + 1) + z;
    for (long long q = sp[0]; q < sp[1]; ++q) {
      const int p = group_paths[q];
      const long long s = path_offsets[p] + 1;
      interaction_path_rows8<true>((int)(path_offsets[p + 1] - s), x, s, 0.5 * path_v[p], feature, lower, upper,
                                   missing, cat_offset, cat_pool, zero_fraction, gl_nodes, gl_weights, g_on,
                                   g_on_stride, g_off, a, n, F);
    }
    return;
  }
  double* a = acc + (long long)g * (F + 1) * F * n + row;
  rows_walk_paths(path_offsets, group_paths, group_ptr, g, slice_paths, a, F, n, [&](int p, long long s, int k) {
    interaction_path_rows8<false>(k, x, s, 0.5 * path_v[p], feature, lower, upper, missing, cat_offset, cat_pool,
                                  zero_fraction, gl_nodes, gl_weights, g_on, g_on_stride, g_off, a, n, F);
  });
}

// A row's slice sums (``p``: entry c of slice z at p[z slice_stride + c entry_stride], c
// tri_index) added in slice order, from zero, then its matrix ``o`` as the warp kernel
// finishes it (in place, sequentially).
__device__ __forceinline__ void finish_row_from_slices(const double* __restrict__ p, long long entry_stride,
                                                       long long slice_stride, int F, int n_slices,
                                                       double* __restrict__ o) {
  const long long W = F + 1;
  for (int a = 0; a < F; ++a)
    for (int b = a; b < F; ++b) {
      const long long c = tri_index(a, b, F) * entry_stride;
      double sum = 0.0;
      for (int z = 0; z < n_slices; ++z) sum += p[z * slice_stride + c];
      o[a * W + b] = sum;
    }
  for (int f = 0; f < F; ++f) {
    double sum = 0.0;
    for (int f2 = 0; f2 < F; ++f2) {
      if (f2 == f) continue;
      const double val = f < f2 ? o[f * W + f2] : o[f2 * W + f];
      if (f2 < f) o[f * W + f2] = val;
      sum += val;
    }
    o[f * W + f] = o[f * W + f] - sum;
  }
}

// The matrices from shap_interactions_warp's slice mode: one thread per (row, group);
// ``partial`` (n_slices, n, n_groups, F (F + 1) / 2).
extern "C" __global__ void interaction_slices_finish(const double* __restrict__ partial, long long n, int F,
                                                     int n_groups, int n_slices, double* __restrict__ out) {
  const long long row = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (row >= n) return;
  const int g = blockIdx.y;
  const long long TRI = (long long)F * (F + 1) / 2;
  finish_row_from_slices(partial + (row * n_groups + g) * TRI, 1, n * n_groups * TRI, F, n_slices,
                         out + (row * n_groups + g) * (long long)(F + 1) * (F + 1));
}

// The matrices from shap_interactions_rows8's slice mode: one thread per (row, group);
// ``partial`` (n_slices, n_groups, F (F + 1) / 2, n), row fastest.
extern "C" __global__ void interaction_rows_slices_finish(const double* __restrict__ partial, long long n, int F,
                                                          int n_groups, int n_slices, double* __restrict__ out) {
  const long long row = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (row >= n) return;
  const int g = blockIdx.y;
  const long long TRI = (long long)F * (F + 1) / 2;
  finish_row_from_slices(partial + g * TRI * n + row, n, n_groups * TRI * n, F, n_slices,
                         out + (row * n_groups + g) * (long long)(F + 1) * (F + 1));
}
