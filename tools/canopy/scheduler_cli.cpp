// SPDX-License-Identifier: Apache-2.0
// add_scheduler_options: the scheduler's command-line options, once for every command.
#include "scheduler_cli.hpp"

#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <exception>
#include <limits>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "canopy/mode.hpp"
#include "canopy/push_policy.hpp"
#include "canopy/trees/errors.hpp"

namespace canopy::tool {

namespace {

// An option whose value is one of the library's names (`all`: the enum's list, `parse`: its
// parser). The name is parsed in the option's callback, after CLI11's IsMember check has passed,
// so a bad name fails with CLI11's message listing the library's names.
template <class Enum, std::size_t N, class Parse>
void add_named_option(CLI::App& cmd, const std::string& name, Enum& value, const std::array<Enum, N>& all,
                      Parse parse, const std::string& help) {
  std::vector<std::string> names;
  for (const Enum e : all) names.emplace_back(canopy::to_string(e));
  cmd.add_option_function<std::string>(name, [&value, parse](const std::string& s) { value = *parse(s); }, help)
      ->check(CLI::IsMember(names))
      ->default_str(std::string(canopy::to_string(value)));
}

}  // namespace

CLI::Validator milliseconds_check(const std::string& what, double at_least) {
  return CLI::Validator(
      [what, at_least](std::string& text) -> std::string {
        double ms = 0;
        try {
          std::size_t used = 0;
          ms = std::stod(text, &used);
          if (used != text.size()) return canopy::trees::quoted_bytes(text) + " is not a number of milliseconds";
        } catch (const std::exception&) {
          return canopy::trees::quoted_bytes(text) + " is not a number of milliseconds";
        }
        if (std::isnan(ms)) return canopy::trees::quoted_bytes(text) + " is not a number of milliseconds";
        if (at_least > 0.0 && !(ms >= at_least))
          return what + " has millisecond resolution: at least " + fmt::format("{:g}", at_least) + ", not " + text;
        if (!(ms > 0.0)) return what + " must be positive, not " + text;
        // Converted to whole milliseconds in a 64-bit count: 1e19 used to overflow into a negative
        // deadline ("deadline must be positive").
        if (!(ms <= max_milliseconds)) return what + " is at most 1e12 ms (about 31 years), not " + text;
        return {};
      },
      at_least > 0.0 ? fmt::format("MS >= {:g}", at_least) : std::string("MS > 0"));
}

void add_scheduler_options(CLI::App& cmd, canopy::scheduler_options& o, unsigned which, const char* blocks_help) {
  if (which & option_mode)
    add_named_option(cmd, "--mode", o.mode, canopy::all_modes, canopy::parse_mode,
                     "scheduler mode (canopy modes --describe lists them)");
  if (which & option_blocks)
    cmd.add_option("--blocks", o.blocks,
                   blocks_help != nullptr ? blocks_help
                                          : "gpu: blocks of the persistent kernel (0 = all co-resident); "
                                            "cpu: worker threads (0 = all cores)")
        ->check(CLI::Range(0, std::numeric_limits<int>::max()))
        ->capture_default_str();
  if (which & option_threads)
    cmd.add_option("--threads", o.threads_per_block, "gpu: threads per block (a multiple of 32, <= 1024)")
        ->check(CLI::Range(32, 1024))
        ->capture_default_str();
  if (which & option_queue_capacity)
    cmd.add_option("--queue-capacity", o.global_queue_capacity,
                   "global queue capacity (0 = the task count; a larger value is capped at the task count, which "
                   "is always enough)")
        ->check(CLI::Range(0, std::numeric_limits<std::int32_t>::max()))
        ->capture_default_str();
  if (which & option_push_policy)
    add_named_option(cmd, "--push-policy", o.policy, canopy::all_push_policies, canopy::parse_push_policy,
                     "which block's shared queue receives a ready task");
  if (which & option_deadline)
    cmd.add_option_function<double>(
           "--deadline-ms",
           // The scheduler's deadline has millisecond resolution: a fraction rounds up, never down
           // to a deadline shorter than asked (0.01 used to truncate to 0, "must be positive").
           [&o](double ms) { o.deadline = std::chrono::milliseconds(static_cast<long long>(std::ceil(ms))); },
           "a run still going after this stops with a timeout (whole milliseconds, at least 1; a fraction "
           "rounds up)")
        ->check(milliseconds_check("the deadline", 1.0))
        ->default_str(std::to_string(o.deadline.count()));
}

}  // namespace canopy::tool
