// SPDX-License-Identifier: Apache-2.0
// `canopy bench` in a build without the benchmarks (CANOPY_BUILD_BENCH=OFF, e.g. the asan preset):
// the command exists, so `canopy --help` lists it, and says how to get it.
#include <memory>
#include <stdexcept>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "common.hpp"

namespace canopy::tool {

command add_bench_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "The benchmark by depth (not in this build: CANOPY_BUILD_BENCH=OFF)");
  cmd->allow_extras();
  return {cmd, []() -> int {
            throw usage_error("bench", "this canopy was built without the benchmarks (configure with "
                                       "-DCANOPY_BUILD_BENCH=ON, as the release and gpu presets do)");
          }};
}

}  // namespace canopy::tool
