// Margin updates from a grown tree's leaves.
//
// ``add_leaf_values``: margin[rows[p], group] += value of the leaf whose segment holds position
// p. One thread per compact position finds its leaf by binary search over the segment offsets
// (a few hundred leaves: cached). Every row is in exactly one leaf, so there are no write
// conflicts. Memory traffic per row: 4 B row index, 4 B margin read + write, scattered (the
// rows are in leaf order): a 32-byte sector read and one written for each row's 4 bytes.
//
// ``add_walked_leaf_values`` (a tree grown in whole levels, its records in heap order): one
// thread per row in row order walks the tree from the root with the row's own entries, so
// the margin and the ELLPACK row are read where they lie (coalesced: about 20 B a row on
// the airline-like set against the positions' 70) and no position is read. The walk decides
// as partition.cu's partition_flags does (categorical.cuh's symbol_goes_left, from the same
// symbol, missing symbol, default direction and category sets), so each row reaches the leaf
// whose segment holds it, and gets the same float32 value added once: the same margins.
// ``walk_table`` first packs each inner slot's decision into 16 bytes, the one load a level
// of the walk.
#include "categorical.cuh"

using namespace dgboost;

extern "C" __global__ void add_leaf_values(float* __restrict__ margin, int n_groups, int group,
                                           const int* __restrict__ rows, const long long* __restrict__ seg_offsets,
                                           const long long* __restrict__ begins, int n_leaves,
                                           const float* __restrict__ values, long long total) {
  total = min(total, seg_offsets[n_leaves]);  // a bound from the host, the count from the device
  for (long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x; q < total;
       q += (long long)gridDim.x * blockDim.x) {
    int a = 0, b = n_leaves;
    while (b - a > 1) {
      const int mid = (a + b) >> 1;
      if (seg_offsets[mid] <= q) a = mid; else b = mid;
    }
    const int r = rows[begins[a] + (q - seg_offsets[a])];
    margin[static_cast<long long>(r) * n_groups + group] += values[a];
  }
}

// Bits of a walk-table entry's last word: the entry's width, the default direction, whether
// the feature is categorical, then the missing symbol (the feature's number of bins).
#define kWalkWidthBits 5
#define kWalkLeftBit 5
#define kWalkCatBit 6
#define kWalkMissingShift 7

// table[j] = (feature, split bin, the feature's entry offset in a row, packed) for slot j of
// the levels above the last (heap order: slot j's children are 2j + 1 and 2j + 2); a slot
// that does not split (a leaf, -1, or no node, -2) keeps its feature and nothing else.
extern "C" __global__ void walk_table(const long long* __restrict__ records, int n_slots,
                                      const int2* __restrict__ layout, const int* __restrict__ cut_ptrs,
                                      const unsigned char* __restrict__ is_cat, int has_cat,
                                      int4* __restrict__ table) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= n_slots) return;
  const long long* rec = records + static_cast<long long>(j) * kNodeFields;
  const int feature = static_cast<int>(rec[kFeature]);
  int4 e = make_int4(feature, 0, 0, 0);
  if (feature >= 0) {
    const int2 lay = layout[feature];
    const int missing = cut_ptrs[feature + 1] - cut_ptrs[feature];
    const int cat = has_cat && is_cat[feature] ? 1 : 0;
    e.y = static_cast<int>(rec[kSplitBin]);
    e.z = lay.x;
    e.w = lay.y | (rec[kDefaultLeft] != 0 ? 1 << kWalkLeftBit : 0) | (cat << kWalkCatBit) |
          (missing << kWalkMissingShift);
  }
  table[j] = e;
}

// margin[r, group] += values[the record of the leaf that row r reaches], every row r < n_rows.
// ``values`` has one entry per record of the tree (record_leaf_values in split.cu: the leaf
// value at a leaf record); ``cat_bits`` the category sets of the slots of ``table`` (uint32
// (n_slots, cat_words), the categories that go right), read only where has_cat != 0.
extern "C" __global__ void __launch_bounds__(256) add_walked_leaf_values(
    float* __restrict__ margin, int n_groups, int group, const unsigned int* __restrict__ packed, int row_bits,
    const int4* __restrict__ table, int max_depth, const unsigned int* __restrict__ cat_bits, int cat_words,
    const float* __restrict__ values, int n_rows) {
  for (long long r = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; r < n_rows;
       r += static_cast<long long>(gridDim.x) * blockDim.x) {
    const uint64_t row_bit = static_cast<uint64_t>(r) * row_bits;
    int j = 0;  // the slot, in heap order
    for (int depth = 0; depth < max_depth; ++depth) {
      const int4 e = __ldg(table + j);
      if (e.x < 0) break;  // a leaf: its rows stay where they are from here on
      const int width = e.w & ((1 << kWalkWidthBits) - 1);
      const unsigned sym = read_symbol(packed, row_bit + static_cast<uint32_t>(e.z), width);
      const unsigned int* node_bits =
          (e.w >> kWalkCatBit) & 1 ? cat_bits + static_cast<long long>(j) * cat_words : nullptr;
      const bool left = symbol_goes_left(sym, static_cast<unsigned>(e.w >> kWalkMissingShift),
                                         ((e.w >> kWalkLeftBit) & 1) != 0, node_bits, cat_words, e.y);
      j = 2 * j + (left ? 1 : 2);
    }
    margin[r * n_groups + group] += values[j];
  }
}
