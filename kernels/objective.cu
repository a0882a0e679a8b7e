// Logistic-loss gradients in one pass: the objective's hottest path on the device without
// float64 temporaries (the CuPy expression chain kept five n-row float64 arrays alive).
//
// Thread mapping: one thread per row, grid-stride. Memory traffic per row: 4 B margin, 4 B
// label, 4 B weight (when given) read; 8 B written. The arithmetic is the CPU engine's
// (objective.py _logistic_gradient) operation by operation, in float64, compiled with
// --fmad=false; tanh is the device's, as in the CuPy expressions it replaces.
#include "common.cuh"

using namespace dgboost;

extern "C" __global__ void logistic_gradient(const float* __restrict__ margin, const float* __restrict__ label,
                                             const float* __restrict__ weight, int has_weight,
                                             double scale_pos_weight, long long n, float* __restrict__ grad,
                                             float* __restrict__ hess) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const double p = 0.5 * (1.0 + tanh(0.5 * static_cast<double>(margin[i])));
    const double y = static_cast<double>(label[i]);
    double w = has_weight ? static_cast<double>(weight[i]) : 1.0;
    if (y == 1.0) w *= scale_pos_weight;
    const double h = p * (1.0 - p);
    grad[i] = static_cast<float>((p - y) * w);
    hess[i] = static_cast<float>((h > 1e-16 ? h : 1e-16) * w);
  }
}
