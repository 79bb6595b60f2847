// SPDX-License-Identifier: Apache-2.0
// The subcommands of `canopy`. Each add_*_command registers its options on `app` and returns the
// function that runs it once the command line has been parsed; that function returns the exit code
// (see exit_code in common.hpp) and throws on bad input or a failed run (main turns both into one line).
#pragma once

#include <functional>
#include <utility>

namespace CLI {
class App;
}

namespace canopy::tool {

using command = std::pair<CLI::App*, std::function<int()>>;

command add_gen_command(CLI::App& app);
command add_build_command(CLI::App& app);
command add_accumulate_command(CLI::App& app);
command add_validate_command(CLI::App& app);
command add_dot_command(CLI::App& app);
command add_convert_command(CLI::App& app);  // cmd_convert.cpp: any readable points format to binary or CSV
command add_run_dag_command(CLI::App& app);
command add_bench_command(CLI::App& app);
command add_modes_command(CLI::App& app);  // cmd_modes.cpp: the library's mode and push-policy tables
/// `canopy bench atomics` (cmd_bench_atomics.cpp), registered by add_bench_command on its command.
command add_bench_atomics_command(CLI::App& bench);
/// `canopy bench build` (cmd_bench_build.cpp): the host and GPU octree builds side by side.
command add_bench_build_command(CLI::App& bench);

}  // namespace canopy::tool
