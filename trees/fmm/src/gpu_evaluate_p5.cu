// SPDX-License-Identifier: Apache-2.0
// gpu_evaluator of order 5 (canopy/fmm/gpu_evaluate.hpp): one translation unit per order, so that
// an order compiles, and is cached, on its own.
#include "gpu_evaluate_impl.cuh"

CANOPY_FMM_INSTANTIATE_GPU_EVALUATOR(5)
