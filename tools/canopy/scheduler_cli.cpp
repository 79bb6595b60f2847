// add_scheduler_options: the scheduler's command-line options, once for every command.
#include "scheduler_cli.hpp"

#include <chrono>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "canopy/mode.hpp"
#include "canopy/push_policy.hpp"

namespace canopy::tool {

namespace {

template <class Enum, std::size_t N>
std::vector<std::string> names_of(const std::array<Enum, N>& all) {
  std::vector<std::string> names;
  for (const Enum e : all) names.emplace_back(canopy::to_string(e));
  return names;
}

}  // namespace

void add_scheduler_options(CLI::App& cmd, canopy::scheduler_options& o, unsigned which, const char* blocks_help) {
  // A checked name is parsed in the option's callback, after CLI11's IsMember check has passed, so
  // a bad name fails with CLI11's message listing the library's names.
  if (which & option_mode)
    cmd.add_option_function<std::string>(
           "--mode", [&o](const std::string& name) { o.mode = *canopy::parse_mode(name); },
           "scheduler mode (the seed's optimisation ladder, cumulative)")
        ->check(CLI::IsMember(names_of(canopy::all_modes)))
        ->default_str(std::string(canopy::to_string(o.mode)));
  if (which & option_blocks)
    cmd.add_option("--blocks", o.blocks,
                   blocks_help != nullptr ? blocks_help
                                          : "gpu: blocks of the persistent kernel (0 = all co-resident); "
                                            "cpu: worker threads (0 = all cores)")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
  if (which & option_threads)
    cmd.add_option("--threads", o.threads_per_block, "gpu: threads per block (a multiple of 32, <= 1024)")
        ->check(CLI::Range(32, 1024))
        ->capture_default_str();
  if (which & option_queue_capacity)
    cmd.add_option("--queue-capacity", o.global_queue_capacity, "global queue capacity (0 = the task count)")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
  if (which & option_push_policy)
    cmd.add_option_function<std::string>(
           "--push-policy", [&o](const std::string& name) { o.policy = *canopy::parse_push_policy(name); },
           "which block's shared queue receives a ready task")
        ->check(CLI::IsMember(names_of(canopy::all_push_policies)))
        ->default_str(std::string(canopy::to_string(o.policy)));
  if (which & option_deadline)
    cmd.add_option_function<double>(
           "--deadline-ms",
           [&o](double ms) { o.deadline = std::chrono::milliseconds(static_cast<long long>(ms)); },
           "a run still going after this stops with a timeout")
        ->check(CLI::PositiveNumber)
        ->default_str(std::to_string(o.deadline.count()));
}

}  // namespace canopy::tool
