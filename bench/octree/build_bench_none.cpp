// SPDX-License-Identifier: Apache-2.0
// `canopy bench build` in a build without CUDA support: the GPU side is missing.
#include <stdexcept>

#include "build_bench.hpp"

namespace canopy::bench {
build_report run_build_bench(const std::vector<build_case>&, const build_bench_options&) {
  throw std::runtime_error("bench build: Canopy was built without CUDA support (CANOPY_GPU=OFF)");
}
}  // namespace canopy::bench
