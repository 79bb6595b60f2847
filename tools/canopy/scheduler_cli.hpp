// SPDX-License-Identifier: Apache-2.0
// The scheduler options of every `canopy` command that runs the scheduler (accumulate, validate,
// run-dag, bench), declared once and parsed straight into canopy::scheduler_options. The mode and
// push-policy names, in --help and in errors, come from the library (canopy::all_modes,
// canopy::all_push_policies), so a new mode needs no change here.
#pragma once

#include <string>

#include "canopy/scheduler_options.hpp"

namespace CLI {
class App;
class Validator;
}

namespace canopy::tool {

/// The options a command takes (bench has no --mode: its --modes lists variants; no deadline: its
/// --budget-ms sets it).
enum scheduler_option : unsigned {
  option_mode = 1u << 0,
  option_push_policy = 1u << 1,
  option_blocks = 1u << 2,
  option_threads = 1u << 3,
  option_queue_capacity = 1u << 4,
  option_deadline = 1u << 5,
  all_scheduler_options = (1u << 6) - 1,
};

/// Declares --mode, --push-policy, --blocks, --threads, --queue-capacity and --deadline-ms (those in
/// `which`) on `cmd`; the defaults shown are `options`' values. `blocks_help` replaces the help of
/// --blocks where a command reads it differently.
void add_scheduler_options(CLI::App& cmd, canopy::scheduler_options& options, unsigned which = all_scheduler_options,
                           const char* blocks_help = nullptr);

/// The largest number of milliseconds a deadline or budget option takes (about 31 years): the
/// value becomes a 64-bit count of milliseconds, and 1e19 used to overflow into a negative one.
inline constexpr double max_milliseconds = 1e12;

/// Checks a number of milliseconds given on the command line: a number, at least `at_least` (or,
/// for 0, positive), at most max_milliseconds; the message names `what` ("the deadline").
CLI::Validator milliseconds_check(const std::string& what, double at_least);

}  // namespace canopy::tool
