// SPDX-License-Identifier: Apache-2.0
// Seeded randomised stress of the CPU backend (tests/common/scheduler_stress.inc; the GPU twin is
// tests/gpu/stress/scheduler_stress_gpu_test.cu). Built under ThreadSanitizer and ASan too, with
// fewer seeds (CMakeLists.txt).
#include "cpu_backend.hpp"

using backend = canopy::test::cpu_backend;
#include "scheduler_stress.inc"

CANOPY_INSTANTIATE_SCHEDULER_STRESS(cpu);
