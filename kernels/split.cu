// Split evaluation: the best (feature, bin, missing direction) of every node.
//
// Thread mapping, stage 1 (``best_per_feature``): one warp per (node, feature), or on a
// level of few nodes a group of 2, 4 or 8 warps of a block, each taking a contiguous share
// of the feature's chunks of 32 bins. The warps sum their bins (the missing sums are the node
// total minus the feature's; a group adds its warps' sums in shared memory, and each warp
// starts from those of the warps before it), then walk their bins in chunks of 32 with an
// int64 inclusive scan by shuffles, carrying each chunk's total: lane l holds the left sums
// of "bins <= chunk + l", tries missing-right then missing-left, and keeps its best. A warp
// arg-max (ties: lowest bin, then missing-right), then the group's first warp over its
// warps' bests, writes one candidate per (node, feature). Stage 2 (``best_per_node``): one
// warp per node finds the first strictly larger gain in feature order, starting from kRtEps
// (lanes over strided features, then a warp arg-max with ties to the lowest feature), and
// writes the decision into the node's record (the node totals are read from the records too).
// Together that is the CPU kernel's order: first maximum over (feature, bin, direction).
// Without categorical features stage 2 runs inside stage 1 (``node_done`` given): the last
// pair of a node to write its candidate (its group's first warp: a counter per node, then a
// fence) picks the node's split, so an evaluation is one launch, not two (lossguide makes
// about 50 a round, each launch costing the host more than the device's whole stage 2).
//
// Monotone constraints (``constrained`` != 0): node n's weights are bounded by
// bounds[2n], bounds[2n + 1] and feature f's sign is monotone[f]. Child weights are clipped
// into the node's bounds, a split whose clipped weights go against the sign is skipped, and
// every gain (the node's own too) is the gain of the clipped weights, as in XGBoost ``hist``
// (dgboost/constraints.py). ``child_bounds`` then gives the children of split nodes their
// bounds: the parent's, meeting at the mean of the two clipped weights on a constrained split.
//
// The float64 arithmetic repeats the CPU engine's expressions operation by operation and the
// module is compiled with --fmad=false, so both devices compute bit-identical gains.
// Memory traffic: each histogram cell (16 B) is read twice (total, then scan); with ``derive``
// the parent's and the built child's cells are read and the child's written first, or (derive
// 2: the children's histograms are not kept) read in both passes instead of the child's.
#include "common.cuh"
#include "gain.cuh"

using namespace dgboost;

#define KERNEL_EPS 1e-6

// The float64 gain and weight expressions (threshold_l1, leaf_weight, bounded_weight,
// gain_given_weight, split_gain), shared with exact_split.cu.
using SplitParamsDev = dgboost_gain::GainParams;
using namespace dgboost_gain;

// A candidate beats another when its gain is larger, or equal with a lower key
// (key = 2 * bin + direction). Invalid candidates carry key -1 and lose to everything.
__device__ __forceinline__ bool better(double gain, int key, double other_gain, int other_key) {
  if (key < 0) return false;
  if (other_key < 0) return true;
  if (gain != other_gain) return gain > other_gain;
  return key < other_key;
}

// One candidate per (node, feature), 48 bytes (dgboost/backend/cuda.py _CANDIDATE_BYTES).
struct Candidate {
  double gain;
  long long left_g, left_h;
  int key;        // -1 when no valid split; else its lowest bit is 1 when missing goes left
  int split_bin;  // the record's split bin: local bin, the one-hot category, -1 for a partition
  unsigned long long pivot_key;  // partition splits: the right set is {c : (key(c), c) <= pivot}
  int pivot_cat;                 // -1 for numeric and one-hot candidates
  int pad;
};

__device__ __forceinline__ void write_candidate(Candidate* slot, double gain, int key, int split_bin, long long lg,
                                                long long lh, unsigned long long pivot_key, int pivot_cat) {
  slot->gain = gain;
  slot->key = key;
  slot->split_bin = split_bin;
  slot->left_g = lg;
  slot->left_h = lh;
  slot->pivot_key = pivot_key;
  slot->pivot_cat = pivot_cat;
  slot->pad = 0;
}

// The node's decision from its candidates ``row`` (n_features of them), written into its
// record ``o`` by lane 0: the first strictly larger gain above kRtEps in feature order (lanes
// over strided features, then a warp arg-max with ties to the lowest feature), none below
// gamma. Candidates are read through L2 (__ldcg): in the fused search other SMs wrote them
// in this launch.
__device__ __forceinline__ void pick_node_split(const Candidate* row, int n_features, double gamma,
                                                long long* o, int lane) {
  double best = KERNEL_EPS;
  int best_f = -1;
  for (int f = lane; f < n_features; f += 32) {
    const Candidate* c = row + f;
    const double gain = __ldcg(&c->gain);
    if (__ldcg(&c->key) >= 0 && gain > best) {
      best = gain;
      best_f = f;
    }
  }
  for (int offset = 16; offset > 0; offset >>= 1) {
    const double other = __shfl_down_sync(0xffffffffu, best, offset);
    const int other_f = __shfl_down_sync(0xffffffffu, best_f, offset);
    if (other_f >= 0 && (best_f < 0 || other > best || (other == best && other_f < best_f))) {
      best = other;
      best_f = other_f;
    }
  }
  if (lane != 0) return;
  if (best_f >= 0 && best < gamma) best_f = -1;
  const Candidate* c = best_f >= 0 ? row + best_f : nullptr;
  o[kFeature] = best_f;
  o[kSplitBin] = c ? __ldcg(&c->split_bin) : -1;
  o[kDefaultLeft] = c ? (__ldcg(&c->key) & 1) : 0;
  o[kGain] = __double_as_longlong(c ? best : 0.0);
  o[kLeftG] = c ? __ldcg(&c->left_g) : 0;
  o[kLeftH] = c ? __ldcg(&c->left_h) : 0;
}

// A node's histogram cells as the search reads them (index 2 * bin + {0: g, 1: h}): stored in
// its histogram, or derived from its parent's and its built sibling's (or its own built) cells.
struct StoredCells {
  const long long* h;
  __device__ __forceinline__ long long operator()(long long x) const { return h[x]; }
};

struct DerivedCells {
  const long long* __restrict__ built;
  const long long* __restrict__ parent;
  bool is_built;
  __device__ __forceinline__ long long operator()(long long x) const {
    const long long v = built[x];
    return is_built ? v : parent[x] - v;
  }
};

// The warps that search one (node, feature) together: ``size`` of them (1, 2, 4 or 8) in one
// block, warp ``rank`` taking a contiguous share of the feature's chunks of 32 bins (``bins``).
// ``base`` is the block's warp index of rank 0 (shared-memory slots of the exchange).
struct WarpGroup {
  int size, rank, base;
  // this warp's bins [from, to) of the feature's bins [lo, hi): whole chunks of 32 from lo
  __device__ __forceinline__ void bins(int lo, int hi, int& from, int& to) const {
    const int n_chunks = (hi - lo + 31) >> 5;
    const int per = (n_chunks + size - 1) / size;
    from = lo + 32 * min(n_chunks, rank * per);
    to = min(hi, lo + 32 * min(n_chunks, (rank + 1) * per));
  }
};

// What a group's warps exchange in shared memory: each warp's sums of its bins, then its best
// candidate (one slot per warp of the block). Both exchanges are block barriers, which every
// warp of the block reaches (the group size is the launch's, the same for all).
struct GroupShare {
  long long g[8], h[8], lg[8], lh[8];
  double gain[8];
  int key[8];
};

// One (node, feature)'s candidate from the feature's bins [lo, hi), this warp's share [from,
// to): the bins in chunks of 32 (bin lo + 32 c + lane, coalesced), int64 prefix sums by
// shuffles with the chunk totals carried. A group of one warp
// walks every chunk; a group of several (levels of few nodes, where one warp per pair leaves
// the GPU idle behind one warp's chain of dependent shuffles and float64 operations) splits
// the chunks, and each warp starts from the sum of the chunks before its own. Every
// candidate's float64 arithmetic is the CPU engine's; the arg-max uses ``better``, a total
// order on (gain, key), so the winner depends neither on the order in which lanes meet nor on
// how the chunks were split. ``work`` false (no node, a masked feature, a warp past the last
// pair): the warp only takes part in the exchanges, and rank 0 of a live pair writes an
// invalid candidate.
template <bool kGrouped, typename Cells>
__device__ __forceinline__ void feature_candidate(
    Cells h, const long long* records, int lo, int hi, int from, int to, int node, int f, bool work,
    const SplitParamsDev& p, const double* __restrict__ bounds, const signed char* __restrict__ monotone,
    int constrained, int lane, const WarpGroup& group, GroupShare& share, Candidate* slot) {
  if (!kGrouped && !work) {  // no exchange to take part in
    if (lane == 0) write_candidate(slot, 0.0, -1, -1, 0, 0, 0ull, -1);
    return;
  }
  // feature sums -> missing sums
  long long fg = 0, fh = 0;
  if (work)
    for (int b = from + lane; b < to; b += 32) { fg += h(2 * b); fh += h(2 * b + 1); }
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) {
    fg += __shfl_xor_sync(0xffffffffu, fg, d);
    fh += __shfl_xor_sync(0xffffffffu, fh, d);
  }
  long long carry_g = 0, carry_h = 0;
  if (kGrouped) {
    const int me = group.base + group.rank;
    if (lane == 0) { share.g[me] = fg; share.h[me] = fh; }
    __syncthreads();
    fg = fh = 0;
    for (int j = 0; j < group.size; ++j) {
      if (j == group.rank) { carry_g = fg; carry_h = fh; }
      fg += share.g[group.base + j];
      fh += share.h[group.base + j];
    }
  }
  double my_gain = 0.0;
  int my_key = -1;
  long long my_lg = 0, my_lh = 0;
  if (work) {
    const long long tg = records[static_cast<long long>(node) * kNodeFields + kSumG];
    const long long th = records[static_cast<long long>(node) * kNodeFields + kSumH];
    const long long mg = tg - fg, mh = th - fh;
    const bool has_missing = mg != 0 || mh != 0;
    // the node's weight bounds (monotone constraints)
    const double w_lo = constrained ? bounds[2 * node] : 0.0, w_hi = constrained ? bounds[2 * node + 1] : 0.0;
    const int sign = constrained ? monotone[f] : 0;
    const double TG = tg * p.inv_scale_g, TH = th * p.inv_scale_h;
    const double parent = constrained ? gain_given_weight(TG, TH, bounded_weight(TG, TH, w_lo, w_hi, p), p)
                                      : split_gain(TG, TH, p);
    for (int chunk = from; chunk < to; chunk += 32) {
      const int b = chunk + lane;
      long long cg = b < hi ? h(2 * b) : 0, ch = b < hi ? h(2 * b + 1) : 0;
      cg = warp_inclusive_scan(cg);
      ch = warp_inclusive_scan(ch);
      const long long chunk_g = __shfl_sync(0xffffffffu, cg, 31), chunk_h = __shfl_sync(0xffffffffu, ch, 31);
      cg += carry_g;
      ch += carry_h;
      carry_g += chunk_g;
      carry_h += chunk_h;
      if (b < hi) {
        for (int d = 0; d < 2; ++d) {
          long long lg, lh;
          if (d == 0) { lg = cg; lh = ch; }
          else { if (!has_missing) break; lg = cg + mg; lh = ch + mh; }
          const long long rg = tg - lg, rh = th - lh;
          if (lh <= 0 || rh <= 0) continue;
          const double GL = lg * p.inv_scale_g, HL = lh * p.inv_scale_h;
          const double GR = rg * p.inv_scale_g, HR = rh * p.inv_scale_h;
          if (HL < p.mcw || HR < p.mcw) continue;
          double gain;
          if (constrained) {
            const double wl = bounded_weight(GL, HL, w_lo, w_hi, p), wr = bounded_weight(GR, HR, w_lo, w_hi, p);
            if ((sign > 0 && wl > wr) || (sign < 0 && wl < wr)) continue;  // against the constraint
            gain = gain_given_weight(GL, HL, wl, p) + gain_given_weight(GR, HR, wr, p) - parent;
          } else {
            gain = split_gain(GL, HL, p) + split_gain(GR, HR, p) - parent;
          }
          if (!(gain > KERNEL_EPS)) continue;  // NaN never wins
          const int key = 2 * (b - lo) + d;
          if (better(gain, key, my_gain, my_key)) { my_gain = gain; my_key = key; my_lg = lg; my_lh = lh; }
        }
      }
    }
  }
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) {
    const double og = __shfl_xor_sync(0xffffffffu, my_gain, d);
    const int ok = __shfl_xor_sync(0xffffffffu, my_key, d);
    const long long olg = __shfl_xor_sync(0xffffffffu, my_lg, d);
    const long long olh = __shfl_xor_sync(0xffffffffu, my_lh, d);
    if (better(og, ok, my_gain, my_key)) { my_gain = og; my_key = ok; my_lg = olg; my_lh = olh; }
  }
  if (kGrouped) {
    const int me = group.base + group.rank;
    if (lane == 0) { share.gain[me] = my_gain; share.key[me] = my_key; share.lg[me] = my_lg; share.lh[me] = my_lh; }
    __syncthreads();
    if (group.rank != 0) return;
    for (int j = 1; j < group.size; ++j) {
      const int o = group.base + j;
      if (better(share.gain[o], share.key[o], my_gain, my_key)) {
        my_gain = share.gain[o]; my_key = share.key[o]; my_lg = share.lg[o]; my_lh = share.lh[o];
      }
    }
  }
  if (lane == 0 && slot != nullptr)
    write_candidate(slot, my_gain, my_key, my_key >= 0 ? my_key >> 1 : -1, my_lg, my_lh, 0ull, -1);
}

// Whether child ``node`` (2j + side) of parent j is the one whose histogram was built.
__device__ __forceinline__ bool built_side(const long long* __restrict__ build_left, int node) {
  return (build_left[node >> 1] != 0) == ((node & 1) == 0);
}

// With ``derive`` the histograms are written first: node 2j + s is child s of parent j, the
// built child (left where build_left[j] != 0) a copy of built[j], its sibling parent_hist[j] -
// built[j] (nodes.cu ``children_histograms``, one launch less a level and one pass less over
// the children's histograms). Each warp writes its share of its (node, feature)'s cells
// (bins [lo, hi)), whatever the mask or the node, and reads them back after a __syncwarp
// (no other warp reads them in this launch): the next level subtracts from
// every cell, and the categorical kernels read them after this launch. With ``derive`` 2 (a
// level whose histograms nothing reads later, no categorical feature) nothing is written: the
// search reads the same cells from the parent's and the built child's (DerivedCells).
__device__ __forceinline__ void derive_feature_cells(const long long* __restrict__ parent_hist,
                                                     const long long* __restrict__ built,
                                                     const long long* __restrict__ build_left, long long total_bins,
                                                     int node, int lo, int hi, int lane, long long* hist) {
  const long long j = node >> 1;
  const bool is_built = built_side(build_left, node);
  const long long* b = built + j * total_bins * 2;
  const long long* parent = parent_hist + j * total_bins * 2;
  long long* o = hist + static_cast<long long>(node) * total_bins * 2;
  for (int x = 2 * lo + lane; x < 2 * hi; x += 32) {
    const long long v = b[x];
    o[x] = is_built ? v : parent[x] - v;
  }
  __syncwarp();
}

// 256 threads (dgboost/backend/cuda.py launches 8 warps a block), 3 blocks an SM: at most 80
// registers, where the compiler took 96 and 2 blocks fit. A warp's scan is a chain of dependent
// int64 shuffles and float64 operations, so more warps an SM hide more of it: 24 against 16
// made the searches of wide levels (Bosch-like, 968 features) 19% faster; 4 blocks (64
// registers, with spills) gained no more (docs/performance-notes.md, "The split search's warps").
// On a level of few nodes one warp per pair leaves most of the GPU idle while each warp runs
// its whole chain; ``group_size`` warps a pair (the backend's ``_search_group``) cut the chain.
#define BEST_PER_FEATURE_PARAMS                                                                      \
  long long* hist, long long total_bins, long long* records, const int* __restrict__ cut_ptrs,          \
      int n_features, int n_pairs, const bool* __restrict__ feature_mask, int mask_rows,                \
      const double* __restrict__ scales, double lam, double alpha, double mcw, double mds,              \
      const double* __restrict__ bounds, const signed char* __restrict__ monotone, int constrained,     \
      const unsigned char* __restrict__ is_cat, int has_cat, Candidate* out, double gamma,              \
      unsigned int* __restrict__ node_done, int pick, const long long* __restrict__ parent_hist,        \
      const long long* __restrict__ built, const long long* __restrict__ build_left, int derive,        \
      int group_size
#define BEST_PER_FEATURE_ARGS                                                                         \
  hist, total_bins, records, cut_ptrs, n_features, n_pairs, feature_mask, mask_rows, scales, lam, alpha, \
      mcw, mds, bounds, monotone, constrained, is_cat, has_cat, out, gamma, node_done, pick,             \
      parent_hist, built, build_left, derive, group_size

// The search's body: ``kGrouped`` false, one warp a pair (``group_size`` 1); true, groups of
// ``group_size`` warps. Two kernels, so that the one-warp search keeps the registers and the
// code it had before groups. The grouped one runs only on levels whose warps one wave holds
// (the backend's ``_search_group``), so it takes 2 blocks an SM and 102 registers, with no
// spills (at 3 blocks, 80 registers, it spilled 48 bytes a thread).
template <bool kGrouped>
__device__ __forceinline__ void search_pairs(BEST_PER_FEATURE_PARAMS) {
  __shared__ GroupShare share;
  const SplitParamsDev p{1.0 / scales[0], 1.0 / scales[1], lam, alpha, mcw, mds};
  const int lane = threadIdx.x & 31;
  // a power of two up to the block's 8 warps: a group never spans blocks
  const int size = kGrouped ? group_size : 1;
  const long long pair = ((blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x) >> 5) / size;
  const bool live = pair < n_pairs;
  if (!kGrouped && !live) return;  // whole warps leave; a group's take part in its exchanges
  const int block_warp = threadIdx.x >> 5;
  const WarpGroup group{size, block_warp & (size - 1), block_warp & ~(size - 1)};
  const int node = live ? static_cast<int>(pair / n_features) : 0;
  const int f = live ? static_cast<int>(pair % n_features) : 0;
  const int lo = cut_ptrs[f], hi = cut_ptrs[f + 1];
  int from = lo, to = hi;
  if (kGrouped) group.bins(lo, hi, from, to);
  if (live && derive == 1)
    derive_feature_cells(parent_hist, built, build_left, total_bins, node, from, to, lane, hist);
  const bool cat = has_cat && is_cat[f];  // best_per_category_feature writes this slot (never with pick)
  if (cat && !kGrouped) return;
  const long long mask_row = mask_rows == 1 ? 0 : node;
  const bool work = live && !cat && records[static_cast<long long>(node) * kNodeFields + kFeature] != kNoNode &&
                    (mask_rows == 0 || feature_mask[mask_row * n_features + f]);
  Candidate* slot = live && !cat ? out + pair : nullptr;
  const long long cells = static_cast<long long>(node >> 1) * total_bins * 2;
  if (derive == 2)
    feature_candidate<kGrouped>(DerivedCells{built + cells, parent_hist + cells, built_side(build_left, node)},
                                records, lo, hi, from, to, node, f, work, p, bounds, monotone, constrained, lane,
                                group, share, slot);
  else
    feature_candidate<kGrouped>(StoredCells{hist + static_cast<long long>(node) * total_bins * 2}, records, lo, hi,
                                from, to, node, f, work, p, bounds, monotone, constrained, lane, group, share, slot);
  if (!pick || !live || group.rank != 0) return;
  // ``node_done``: zeroed counters, one per node; the node's last pair leaves its counter zero
  unsigned last = 0u;
  if (lane == 0) {
    __threadfence();  // this pair's candidate (and its reads of the record) before the count
    last = atomicAdd(node_done + node, 1u) == static_cast<unsigned>(n_features - 1) ? 1u : 0u;
  }
  if (!__shfl_sync(0xffffffffu, last, 0)) return;
  __threadfence();
  long long* o = records + static_cast<long long>(node) * kNodeFields;
  if (o[kFeature] != kNoNode) pick_node_split(out + static_cast<long long>(node) * n_features, n_features, gamma, o, lane);
  if (lane == 0) node_done[node] = 0u;
}

extern "C" __global__ void __launch_bounds__(256, 3) best_per_feature(BEST_PER_FEATURE_PARAMS) {
  search_pairs<false>(BEST_PER_FEATURE_ARGS);
}

extern "C" __global__ void __launch_bounds__(256, 2) best_per_feature_grouped(BEST_PER_FEATURE_PARAMS) {
  search_pairs<true>(BEST_PER_FEATURE_ARGS);
}

// Stage 2: one warp per node writes its decision into its record: feature, bin,
// default_left, gain (float64 bits), left G, left H. Lane l scans features l, l + 32, ... and
// keeps its first strictly larger gain (above kRtEps); a warp arg-max then keeps the largest
// gain, ties to the lowest feature: the decision of one thread scanning every feature in
// order, keeping the first strictly larger gain. (One thread per node left a wide table's
// level to a few warps each reading hundreds of strided candidates in turn: on Bosch-like
// 968 features, 45% of a round's kernel time.) A grid-stride loop over the nodes: the grid
// is capped (backend/cuda.py ``_grid``).
extern "C" __global__ void best_per_node(const Candidate* cand, int n_nodes, int n_features, double gamma,
                                         long long* __restrict__ records) {
  const int lane = threadIdx.x & 31;
  const int warps = (gridDim.x * blockDim.x) >> 5;
  for (int node = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; node < n_nodes; node += warps) {
    long long* o = records + static_cast<long long>(node) * kNodeFields;
    if (o[kFeature] == kNoNode) continue;  // stays no node (the same for the whole warp)
    pick_node_split(cand + static_cast<long long>(node) * n_features, n_features, gamma, o, lane);
  }
}

// Bounds of the children of k evaluated parents (monotone constraints): one thread per parent
// writes rows 2j (left) and 2j + 1 (right) of ``out`` (float64 (2k, 2)) from its record and
// bounds, with the CPU engine's arithmetic (dgboost/backend/_cpu_kernels.py ``child_bounds``).
// A parent that is not split, or splits on an unconstrained feature, passes its bounds on.
extern "C" __global__ void child_bounds(const long long* __restrict__ records, int k,
                                        const double* __restrict__ bounds, const signed char* __restrict__ monotone,
                                        const double* __restrict__ scales, double lam, double alpha,
                                        double mcw, double mds, double* __restrict__ out) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= k) return;
  const SplitParamsDev p{1.0 / scales[0], 1.0 / scales[1], lam, alpha, mcw, mds};
  const long long* r = records + static_cast<long long>(j) * kNodeFields;
  const double lo = bounds[2 * j], hi = bounds[2 * j + 1];
  double* left = out + 4LL * j;
  double* right = left + 2;
  left[0] = lo; left[1] = hi;
  right[0] = lo; right[1] = hi;
  const long long f = r[kFeature];
  const int sign = f >= 0 ? monotone[f] : 0;
  if (sign == 0) return;
  const long long lg = r[kLeftG], lh = r[kLeftH];
  const double wl = bounded_weight(lg * p.inv_scale_g, lh * p.inv_scale_h, lo, hi, p);
  const double wr = bounded_weight((r[kSumG] - lg) * p.inv_scale_g, (r[kSumH] - lh) * p.inv_scale_h, lo, hi, p);
  const double mid = (wl + wr) / 2.0;
  if (sign < 0) {
    left[0] = mid;
    right[1] = mid;
  } else {
    left[1] = mid;
    right[0] = mid;
  }
}

// The leaves of a tree grown in whole levels, from its records (every level's, concatenated):
// a record of feature -1 is a leaf (its slots below hold no node), and gets its segment and
// value float32(eta * weight), the weight as dgboost/backend/cpu.py's leaf_weights_on_host
// computes it; any other record gets an empty segment and 0. add_leaf_values then adds the
// values to the leaves' rows, so the margins need no read of the tree by the host.
// One thread per record.
extern "C" __global__ void record_leaf_values(const long long* __restrict__ records, int m,
                                              const double* __restrict__ scales, double lam, double alpha,
                                              double mcw, double mds, double eta, long long* __restrict__ segments,
                                              float* __restrict__ values) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= m) return;
  const SplitParamsDev p{1.0 / scales[0], 1.0 / scales[1], lam, alpha, mcw, mds};
  const long long* r = records + static_cast<long long>(j) * kNodeFields;
  if (r[kFeature] != -1) {
    segments[2 * j] = segments[2 * j + 1] = 0;
    values[j] = 0.0f;
    return;
  }
  segments[2 * j] = r[kBegin];
  segments[2 * j + 1] = r[kEnd];
  const double w = leaf_weight(static_cast<double>(r[kSumG]) * p.inv_scale_g,
                               static_cast<double>(r[kSumH]) * p.inv_scale_h, p);
  values[j] = static_cast<float>(w * eta);
}

// ---- categorical features (docs/design.md §11.2) ------------------------------------------
//
// ``best_per_category_feature``: one block of kCatThreads per (node, categorical feature),
// writing the feature's candidate slot (``best_per_feature`` leaves those slots alone), so
// ``best_per_node`` compares numeric and categorical candidates in feature order as before.
//  - One-hot (K < max_cat_to_onehot): thread per category c, candidates 2c (the category
//    right, missing left) and 2c + 1 (the category and the missing rows right).
//  - Partition: every category's key (the float64 weight of its own sums without
//    min_child_weight's floor, then its code) is written to shared memory (or, past what a
//    block's shared memory holds, to the block's slice of a global scratch) and
//    bitonic-sorted; keys are distinct, so the order is the CPU's stable sort. The first
//    n - 1 sorted categories are scanned forward (missing left) and the last n - 1 backward
//    (missing right), n = min(max_cat_threshold, K), with int64 block scans; candidate t
//    of the forward scan has order t, of the backward scan n - 1 + t.
// A block arg-max (larger gain, then lower order: the CPU's first strict maximum) picks the
// feature's candidate. A partition candidate keeps its set as a pivot: the set is every
// category whose key is at most the pivot's (the sorted prefix), so ``categorical_split_bits``
// rebuilds the winning set of each node from the histogram without keeping any order.
// Memory: per (node, feature) K keys of 12 B, in shared memory up to the block's budget;
// nothing per row.
#define kCatThreads 256
#define kCatWarps (kCatThreads / 32)

// The float64 weight as an unsigned key in the weights' order; -0.0 is keyed as +0.0 (the CPU
// sorts with <, for which they are equal, so their order is the codes').
__device__ __forceinline__ unsigned long long weight_key(double w) {
  if (w == 0.0) w = 0.0;
  const unsigned long long bits = static_cast<unsigned long long>(__double_as_longlong(w));
  return (bits >> 63) ? ~bits : (bits | 0x8000000000000000ull);
}

// The sort key of category c: the Newton weight of its own sums without min_child_weight's
// floor (0 only at H <= 0) and without bounds, XGBoost 3.4.1's CalcWeightCat, as the CPU's.
__device__ __forceinline__ unsigned long long category_key(const long long* __restrict__ h, int c,
                                                           const SplitParamsDev& p) {
  const SplitParamsDev unfloored{p.inv_scale_g, p.inv_scale_h, p.lam, p.alpha, 0.0, p.mds};
  const double G = h[2 * c] * p.inv_scale_g, H = h[2 * c + 1] * p.inv_scale_h;
  return weight_key(leaf_weight(G, H, unfloored));
}

// (key a, code ca) sorts after (key b, code cb).
__device__ __forceinline__ bool key_after(unsigned long long a, int ca, unsigned long long b, int cb) {
  return a > b || (a == b && ca > cb);
}

// Ascending bitonic sort of n (a power of two) (key, code) pairs by the block; ends synchronised.
__device__ void bitonic_sort(unsigned long long* keys, int* codes, int n) {
  for (int k = 2; k <= n; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const int x = i ^ j;
        if (x > i) {
          const unsigned long long ka = keys[i], kb = keys[x];
          const int ca = codes[i], cb = codes[x];
          if (key_after(ka, ca, kb, cb) == ((i & k) == 0)) {
            keys[i] = kb;
            keys[x] = ka;
            codes[i] = cb;
            codes[x] = ca;
          }
        }
      }
      __syncthreads();
    }
  }
}

// Block-wide inclusive scan of int64 pairs; (total_g, total_h) gets the block's sums.
// ``sg``/``sh``: kCatWarps int64 of shared memory each.
__device__ __forceinline__ void block_scan_pair(long long& g, long long& h, long long& total_g, long long& total_h,
                                                long long* sg, long long* sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  g = warp_inclusive_scan(g);
  h = warp_inclusive_scan(h);
  if (lane == 31) { sg[warp] = g; sh[warp] = h; }
  __syncthreads();
  long long below_g = 0, below_h = 0;
  total_g = 0;
  total_h = 0;
  for (int w = 0; w < kCatWarps; ++w) {
    if (w < warp) { below_g += sg[w]; below_h += sh[w]; }
    total_g += sg[w];
    total_h += sh[w];
  }
  __syncthreads();  // sg/sh are rewritten by the next scan
  g += below_g;
  h += below_h;
}

// A block's best (gain, order, left sums), as ``better`` orders them; thread 0 gets the result.
__device__ __forceinline__ void block_best(double& gain, int& order, long long& lg, long long& lh, double* s_gain,
                                           int* s_order, long long* s_lg, long long* s_lh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) {
    const double og = __shfl_xor_sync(0xffffffffu, gain, d);
    const int oo = __shfl_xor_sync(0xffffffffu, order, d);
    const long long olg = __shfl_xor_sync(0xffffffffu, lg, d);
    const long long olh = __shfl_xor_sync(0xffffffffu, lh, d);
    if (better(og, oo, gain, order)) { gain = og; order = oo; lg = olg; lh = olh; }
  }
  if (lane == 0) { s_gain[warp] = gain; s_order[warp] = order; s_lg[warp] = lg; s_lh[warp] = lh; }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kCatWarps; ++w) {
      if (better(s_gain[w], s_order[w], gain, order)) { gain = s_gain[w]; order = s_order[w]; lg = s_lg[w]; lh = s_lh[w]; }
    }
  }
  __syncthreads();
}

struct CatNode {
  long long tg, th;        // the node's totals
  double w_lo, w_hi;       // its weight bounds (monotone constraints)
  int sign;                // the feature's monotone sign
  int constrained;
  double parent;           // the node's own gain
};

// The gain of the candidate with left sums (lg, lh), right sums (rg, rh); false when it is not
// valid or gains no more than KERNEL_EPS. The CPU engine's checks and float64 operations, in order.
__device__ __forceinline__ bool category_candidate(long long lg, long long lh, long long rg, long long rh,
                                                   const CatNode& nd, const SplitParamsDev& p, double& gain) {
  if (lh <= 0 || rh <= 0) return false;
  const double GL = lg * p.inv_scale_g, HL = lh * p.inv_scale_h;
  const double GR = rg * p.inv_scale_g, HR = rh * p.inv_scale_h;
  if (HL < p.mcw || HR < p.mcw) return false;
  if (nd.constrained) {
    const double wl = bounded_weight(GL, HL, nd.w_lo, nd.w_hi, p), wr = bounded_weight(GR, HR, nd.w_lo, nd.w_hi, p);
    if ((nd.sign > 0 && wl > wr) || (nd.sign < 0 && wl < wr)) return false;  // against the constraint
    gain = gain_given_weight(GL, HL, wl, p) + gain_given_weight(GR, HR, wr, p) - nd.parent;
  } else {
    gain = split_gain(GL, HL, p) + split_gain(GR, HR, p) - nd.parent;
  }
  return gain > KERNEL_EPS;  // NaN never wins
}

// Scan ``count`` sorted categories from one end: forward (codes[0], codes[1], ...: the right
// side, missing left) or backward (codes[K-1], codes[K-2], ...: the left side, missing right);
// each thread keeps its best candidate, of order ``first_order + t``.
__device__ __forceinline__ void scan_sorted(const long long* __restrict__ h, const int* codes, int K, int count,
                                            bool forward, int first_order, const CatNode& nd,
                                            const SplitParamsDev& p, long long* sg, long long* sh, double& my_gain,
                                            int& my_order, long long& my_lg, long long& my_lh) {
  long long carry_g = 0, carry_h = 0;
  for (int base = 0; base < count; base += blockDim.x) {  // block-uniform trip count
    const int t = base + static_cast<int>(threadIdx.x);
    long long vg = 0, vh = 0;
    if (t < count) {
      const int c = codes[forward ? t : K - 1 - t];
      vg = h[2 * c];
      vh = h[2 * c + 1];
    }
    long long chunk_g, chunk_h;
    block_scan_pair(vg, vh, chunk_g, chunk_h, sg, sh);
    vg += carry_g;
    vh += carry_h;
    carry_g += chunk_g;
    carry_h += chunk_h;
    if (t < count) {
      // forward: the scanned sums go right; backward: they go left
      const long long lg = forward ? nd.tg - vg : vg, lh = forward ? nd.th - vh : vh;
      double gain;
      if (category_candidate(lg, lh, nd.tg - lg, nd.th - lh, nd, p, gain) &&
          better(gain, first_order + t, my_gain, my_order)) {
        my_gain = gain;
        my_order = first_order + t;
        my_lg = lg;
        my_lh = lh;
      }
    }
  }
}

extern "C" __global__ void __launch_bounds__(kCatThreads) best_per_category_feature(
    const long long* __restrict__ hist, long long total_bins, const long long* __restrict__ records,
    const int* __restrict__ cut_ptrs, int n_features, const int* __restrict__ cat_features, int n_cat_features,
    long long n_pairs, const bool* __restrict__ feature_mask, int mask_rows, const double* __restrict__ scales,
    double lam, double alpha, double mcw, double mds, const double* __restrict__ bounds,
    const signed char* __restrict__ monotone, int constrained, int max_cat_to_onehot, int max_cat_threshold,
    int shared_entries, unsigned long long* __restrict__ scratch_keys, int* __restrict__ scratch_codes,
    long long scratch_entries, Candidate* __restrict__ out) {
  extern __shared__ unsigned long long sort_shared[];  // shared_entries keys, then as many int codes
  __shared__ long long sg[kCatWarps], sh[kCatWarps], s_lg[kCatWarps], s_lh[kCatWarps];
  __shared__ double s_gain[kCatWarps];
  __shared__ int s_order[kCatWarps];
  const SplitParamsDev p{1.0 / scales[0], 1.0 / scales[1], lam, alpha, mcw, mds};
  for (long long pair = blockIdx.x; pair < n_pairs; pair += gridDim.x) {  // block-uniform
    const int node = static_cast<int>(pair / n_cat_features);
    const int f = cat_features[pair % n_cat_features];
    Candidate* slot = out + static_cast<long long>(node) * n_features + f;
    const long long mask_row = mask_rows == 1 ? 0 : node;
    const long long* rec = records + static_cast<long long>(node) * kNodeFields;
    if (rec[kFeature] == kNoNode || (mask_rows != 0 && !feature_mask[mask_row * n_features + f])) {
      if (threadIdx.x == 0) write_candidate(slot, 0.0, -1, -1, 0, 0, 0ull, -1);
      continue;
    }
    const int K = cut_ptrs[f + 1] - cut_ptrs[f];
    const long long* h = hist + static_cast<long long>(node) * total_bins * 2 + 2LL * cut_ptrs[f];
    CatNode nd;
    nd.tg = rec[kSumG];
    nd.th = rec[kSumH];
    nd.constrained = constrained;
    nd.w_lo = constrained ? bounds[2 * node] : 0.0;
    nd.w_hi = constrained ? bounds[2 * node + 1] : 0.0;
    nd.sign = constrained ? monotone[f] : 0;
    const double TG = nd.tg * p.inv_scale_g, TH = nd.th * p.inv_scale_h;
    nd.parent = constrained ? gain_given_weight(TG, TH, bounded_weight(TG, TH, nd.w_lo, nd.w_hi, p), p)
                            : split_gain(TG, TH, p);
    double my_gain = 0.0;
    int my_order = -1;
    long long my_lg = 0, my_lh = 0;
    if (K < max_cat_to_onehot) {
      // one-hot: the missing sums are the node's minus the feature's
      long long fg = 0, fh = 0, mg, mh;
      for (int c = threadIdx.x; c < K; c += blockDim.x) { fg += h[2 * c]; fh += h[2 * c + 1]; }
      block_scan_pair(fg, fh, mg, mh, sg, sh);
      mg = nd.tg - mg;
      mh = nd.th - mh;
      for (int c = threadIdx.x; c < K; c += blockDim.x) {
        for (int d = 0; d < 2; ++d) {  // d = 0: missing left; d = 1: missing right
          const long long rg = h[2 * c] + (d ? mg : 0), rh = h[2 * c + 1] + (d ? mh : 0);
          double gain;
          if (category_candidate(nd.tg - rg, nd.th - rh, rg, rh, nd, p, gain) &&
              better(gain, 2 * c + d, my_gain, my_order)) {
            my_gain = gain;
            my_order = 2 * c + d;
            my_lg = nd.tg - rg;
            my_lh = nd.th - rh;
          }
        }
      }
      block_best(my_gain, my_order, my_lg, my_lh, s_gain, s_order, s_lg, s_lh);
      if (threadIdx.x == 0) {
        if (my_order >= 0) {
          const int dl = (my_order & 1) == 0 ? 1 : 0;
          write_candidate(slot, my_gain, 2 * my_order + dl, my_order >> 1, my_lg, my_lh, 0ull, -1);
        } else {
          write_candidate(slot, 0.0, -1, -1, 0, 0, 0ull, -1);
        }
      }
      continue;  // block_best ended synchronised; no shared sort data was used
    }
    // partition: sort the categories by key, then scan both ends
    int n_sort = 1;
    while (n_sort < K) n_sort <<= 1;
    unsigned long long* keys;
    int* codes;
    if (n_sort <= shared_entries) {
      keys = sort_shared;
      codes = reinterpret_cast<int*>(sort_shared + shared_entries);
    } else {
      keys = scratch_keys + blockIdx.x * scratch_entries;
      codes = scratch_codes + blockIdx.x * scratch_entries;
    }
    for (int i = threadIdx.x; i < n_sort; i += blockDim.x) {
      keys[i] = i < K ? category_key(h, i, p) : ~0ull;
      codes[i] = i < K ? i : 0x7fffffff;
    }
    __syncthreads();
    bitonic_sort(keys, codes, n_sort);
    const int count = min(max_cat_threshold, K) - 1;  // candidates per direction
    scan_sorted(h, codes, K, count, true, 0, nd, p, sg, sh, my_gain, my_order, my_lg, my_lh);
    scan_sorted(h, codes, K, count, false, max(count, 0), nd, p, sg, sh, my_gain, my_order, my_lg, my_lh);
    block_best(my_gain, my_order, my_lg, my_lh, s_gain, s_order, s_lg, s_lh);
    if (threadIdx.x == 0) {
      if (my_order >= 0) {
        const bool forward = my_order < count;
        // forward t: the set is codes[0..t]; backward t: codes[0..K-2-t] (all but the scanned)
        const int last = forward ? my_order : K - 2 - (my_order - count);
        write_candidate(slot, my_gain, 2 * my_order + (forward ? 1 : 0), -1, my_lg, my_lh, keys[last], codes[last]);
      } else {
        write_candidate(slot, 0.0, -1, -1, 0, 0, 0ull, -1);
      }
    }
    __syncthreads();  // the sorted keys are read above before the next pair rewrites them
  }
}

// The category bitsets of evaluated nodes (uint32 (m, words), bit c: category c goes right):
// one block per node (grid-stride), a thread per word. A node split on a categorical feature
// gets its one-hot category's bit, or every category whose key is at most its candidate's
// pivot (the keys recomputed from the histogram, bit for bit those that were sorted); any
// other node gets zeros. Run after ``best_per_node`` on the same candidates.
extern "C" __global__ void categorical_split_bits(const long long* __restrict__ hist, long long total_bins,
                                                  const long long* __restrict__ records, int m,
                                                  const int* __restrict__ cut_ptrs, int n_features,
                                                  const unsigned char* __restrict__ is_cat,
                                                  const Candidate* __restrict__ cand,
                                                  const double* __restrict__ scales, double lam, double alpha,
                                                  double mcw, double mds, int words,
                                                  unsigned int* __restrict__ cat_bits) {
  const SplitParamsDev p{1.0 / scales[0], 1.0 / scales[1], lam, alpha, mcw, mds};
  for (int node = blockIdx.x; node < m; node += gridDim.x) {
    const long long* rec = records + static_cast<long long>(node) * kNodeFields;
    const long long f = rec[kFeature];
    unsigned int* out = cat_bits + static_cast<long long>(node) * words;
    if (f < 0 || !is_cat[f]) {
      for (int w = threadIdx.x; w < words; w += blockDim.x) out[w] = 0u;
      continue;
    }
    const Candidate& c = cand[static_cast<long long>(node) * n_features + f];
    const int K = cut_ptrs[f + 1] - cut_ptrs[f];
    const long long* h = hist + static_cast<long long>(node) * total_bins * 2 + 2LL * cut_ptrs[f];
    for (int w = threadIdx.x; w < words; w += blockDim.x) {
      unsigned int bits = 0u;
      if (c.pivot_cat < 0) {  // one-hot: the record's split bin
        const long long b = rec[kSplitBin];
        if ((b >> 5) == w) bits = 1u << (b & 31);
      } else {
        for (int i = 0; i < 32; ++i) {
          const int code = 32 * w + i;
          if (code >= K) break;
          if (!key_after(category_key(h, code, p), code, c.pivot_key, c.pivot_cat)) bits |= 1u << i;
        }
      }
      out[w] = bits;
    }
  }
}
