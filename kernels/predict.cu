// Prediction from raw float32 features (in-place predict: no binning, no DMatrix).
//
// Thread mapping: one thread per row; it walks trees [t0, t1) in order and adds each leaf
// value to its row's margin (same order and float32 additions as the CPU kernel, so both
// devices give identical margins). Nodes are read through the read-only cache; a warp's rows
// diverge down different paths, so node reads are gathers. Memory traffic per row: the
// features it touches (at most depth x trees loads of 4 B, mostly cached) and one margin
// write per output group.
//
// Categorical nodes (``has_cat`` != 0; split_type 1): the row goes right iff its value is a
// category in the node's bitset, ``cat_bits[cat_begin[k] : cat_begin[k] + cat_words[k]]``
// (categorical.cuh, XGBoost's decision rule); missing values take the default direction as
// at numeric nodes. Without categorical nodes the arrays are placeholders and never read.
#include "categorical.cuh"

using namespace dgboost;

struct CatNodes {
  const unsigned char* __restrict__ split_type;  // 1: categorical node
  const long long* __restrict__ begin;            // first word of the node's bitset in ``bits``
  const int* __restrict__ words;                  // words of the node's bitset
  const unsigned int* __restrict__ bits;
  int any;                                        // 0: no categorical node at all
};

__device__ __forceinline__ int find_leaf(const int* __restrict__ left, const int* __restrict__ right,
                                         const int* __restrict__ feature, const float* __restrict__ split_value,
                                         const unsigned char* __restrict__ default_left, const CatNodes& cat,
                                         long long base, const float* __restrict__ x) {
  int node = 0;
  while (left[base + node] >= 0) {
    const long long k = base + node;
    const float v = x[feature[k]];
    bool go_left;
    if (isnan(v)) go_left = default_left[k] != 0;
    else if (cat.any && cat.split_type[k]) go_left = category_goes_left(cat.bits + cat.begin[k], cat.words[k], v);
    else go_left = v < split_value[k];
    node = go_left ? left[k] : right[k];
  }
  return node;
}

extern "C" __global__ void predict_margin(const int* __restrict__ left, const int* __restrict__ right,
                                          const int* __restrict__ feature, const float* __restrict__ split_value,
                                          const unsigned char* __restrict__ default_left,
                                          const float* __restrict__ value, const long long* __restrict__ offsets,
                                          const int* __restrict__ groups, const unsigned char* __restrict__ split_type,
                                          const long long* __restrict__ cat_begin, const int* __restrict__ cat_words,
                                          const unsigned int* __restrict__ cat_bits, int has_cat,
                                          const float* __restrict__ values, long long n_rows, int n_features, int t0,
                                          int t1, int n_groups, float* __restrict__ out) {
  const CatNodes cat{split_type, cat_begin, cat_words, cat_bits, has_cat};
  for (long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x; r < n_rows;
       r += (long long)gridDim.x * blockDim.x) {
    const float* x = values + r * n_features;
    float* o = out + r * n_groups;
    for (int t = t0; t < t1; ++t) {
      const long long base = offsets[t];
      const int node = find_leaf(left, right, feature, split_value, default_left, cat, base, x);
      o[groups[t]] += value[base + node];
    }
  }
}

extern "C" __global__ void predict_leaf(const int* __restrict__ left, const int* __restrict__ right,
                                        const int* __restrict__ feature, const float* __restrict__ split_value,
                                        const unsigned char* __restrict__ default_left,
                                        const long long* __restrict__ offsets,
                                        const unsigned char* __restrict__ split_type,
                                        const long long* __restrict__ cat_begin, const int* __restrict__ cat_words,
                                        const unsigned int* __restrict__ cat_bits, int has_cat,
                                        const float* __restrict__ values, long long n_rows, int n_features, int t0,
                                        int t1, int* __restrict__ out) {
  const CatNodes cat{split_type, cat_begin, cat_words, cat_bits, has_cat};
  for (long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x; r < n_rows;
       r += (long long)gridDim.x * blockDim.x) {
    const float* x = values + r * n_features;
    for (int t = t0; t < t1; ++t) {
      out[r * (t1 - t0) + (t - t0)] =
          find_leaf(left, right, feature, split_value, default_left, cat, offsets[t], x);
    }
  }
}
