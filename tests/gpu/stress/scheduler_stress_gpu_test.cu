// SPDX-License-Identifier: Apache-2.0
// Seeded randomised stress of the GPU backend (tests/common/scheduler_stress.inc; the CPU twin is
// tests/cpu/stress/scheduler_stress_test.cpp): the same seeds, shapes, grids of 2-8 blocks, tiny
// queues and push policies, in the persistent kernel. Label gpu; skips without a device.
#include "gpu_backend.cuh"

using backend = canopy::test::gpu_backend;
#include "scheduler_stress.inc"

CANOPY_INSTANTIATE_SCHEDULER_STRESS(gpu);
