// Categorical splits: the node bitsets and XGBoost's decision rule (common::Decision in
// XGBoost 3.4.1's src/common/categorical.h), shared by prediction, partition and SHAP kernels.
//
// A categorical node's bitset is ``words`` uint32 words; bit c (word c >> 5, bit c & 31, least
// significant bit first) is set iff category c goes RIGHT (docs/design.md, categorical
// features). Everything else goes left: categories not in the set and values that are not a
// valid category (negative, +inf, 2**24 or more, or past the node's words). A non-integer
// value is truncated toward zero, as XGBoost's AsCat does.
#pragma once
#include "common.cuh"

namespace dgboost {

// XGBoost's OutOfRangeCat(): 2**24, the first integer past which float32 is not exact.
constexpr float kMaxCategory = 16777216.0f;

__device__ __forceinline__ bool category_in_set(const uint32_t* __restrict__ bits, int words, uint32_t c) {
  const uint32_t word = c >> 5;
  if (word >= static_cast<uint32_t>(words)) return false;
  return ((bits[word] >> (c & 31u)) & 1u) != 0u;
}

// True when a (non-missing) value ``v`` goes left at a categorical node whose bitset is
// ``bits[0:words]``. NaN is the caller's (default direction) and is sent left here.
__device__ __forceinline__ bool category_goes_left(const uint32_t* __restrict__ bits, int words, float v) {
  if (!(v >= 0.0f) || v >= kMaxCategory) return true;  // negative, NaN, inf, too large
  return !category_in_set(bits, words, static_cast<uint32_t>(v));
}

// Whether a row whose entry at a split node is symbol ``sym`` goes left: the missing symbol (the
// feature's number of bins) by the default direction, at a categorical node (``node_bits``, the
// categories that go right, not null) when its category is not in the set, at a numeric one when
// its bin is at most ``split_bin``. partition.cu's partition_flags and leaf.cu's walk both decide
// by it, so a walked row reaches the leaf whose segment the partition puts it in.
__device__ __forceinline__ bool symbol_goes_left(uint32_t sym, uint32_t missing, bool default_left,
                                                 const uint32_t* __restrict__ node_bits, int words,
                                                 long long split_bin) {
  if (sym == missing) return default_left;
  if (node_bits != nullptr) return !category_in_set(node_bits, words, sym);
  return static_cast<long long>(sym) <= split_bin;
}

}  // namespace dgboost
