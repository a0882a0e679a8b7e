// Records shared between Python (dgboost/_layout.py, dgboost/tree.py) and the CUDA kernels.
// A GPU test checks sizes and offsets against the NumPy dtypes.
#pragma once
#include <cstddef>
#include <cstdint>

namespace dgboost {

// Quantised gradient pair: fixed point with a scale agreed by every worker, so that
// histogram sums are exact and independent of summation order.
struct GradPairInt {
  int64_t g;
  int64_t h;
};

// One node of a flattened ensemble (struct-of-arrays on the host; this record is the
// array-of-structs form used by prediction kernels).
struct Node {
  int32_t left;          // local index of the left child, -1 for a leaf
  int32_t right;         // local index of the right child, -1 for a leaf
  int32_t feature;       // split feature, -1 for a leaf
  float split_value;     // x < split_value goes left
  uint8_t default_left;  // missing values go left when 1
  uint8_t pad[3];
  float value;           // leaf output
};

// One element of a TreeSHAP path (GPUTreeShap's PathElement).
struct PathElement {
  int32_t path_idx;
  int32_t feature;       // -1 for the bias element
  int32_t group;
  uint8_t is_missing_branch;
  uint8_t pad[3];
  float lower;           // element is "on" for lower <= x < upper
  float upper;
  double zero_fraction;  // child cover / parent cover
  double v;              // leaf value of the path
};

}  // namespace dgboost

// The Python side (dgboost/_layout.py) uses the same sizes and offsets.
static_assert(sizeof(dgboost::GradPairInt) == 16, "GradPairInt layout");
static_assert(sizeof(dgboost::Node) == 24, "Node layout");
static_assert(sizeof(dgboost::PathElement) == 40, "PathElement layout");
static_assert(offsetof(dgboost::PathElement, zero_fraction) == 24, "PathElement layout");
static_assert(offsetof(dgboost::PathElement, v) == 32, "PathElement layout");
