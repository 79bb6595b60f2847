// SPDX-License-Identifier: Apache-2.0
// Portable-core configuration: the same headers compile with nvcc (host and device) and with g++.
#pragma once

#if defined(__CUDACC__)
#define CANOPY_HD __host__ __device__
#define CANOPY_DEVICE __device__
#define CANOPY_FORCEINLINE __forceinline__
#else
#define CANOPY_HD
#define CANOPY_DEVICE
#define CANOPY_FORCEINLINE inline __attribute__((always_inline))
#endif

// True while compiling device code (the nvcc device pass), false for host passes and g++.
#if defined(__CUDA_ARCH__)
#define CANOPY_DEVICE_CODE 1
#else
#define CANOPY_DEVICE_CODE 0
#endif

#include <cstdint>

namespace canopy {
using task_id = std::int32_t;
inline constexpr task_id no_task = -1;
}  // namespace canopy
