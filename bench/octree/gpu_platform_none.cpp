// SPDX-License-Identifier: Apache-2.0
// A build without CUDA support (CANOPY_GPU=OFF) has no GPU platform: the benchmark runs the
// reference and the cpu backend only.
#include "octree_bench.hpp"

namespace canopy::bench {

bool gpu_device_present() { return false; }
std::unique_ptr<platform> make_gpu_platform() { return nullptr; }

}  // namespace canopy::bench
