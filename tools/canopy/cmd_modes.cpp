// SPDX-License-Identifier: Apache-2.0
// `canopy modes`: the scheduler modes and push policies, as the library's tables list them (so
// that scripts such as tools/gpu-check, and people, never keep a list of their own).
#include <cstdio>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "canopy/mode.hpp"
#include "canopy/push_policy.hpp"
#include "canopy/scheduler_options.hpp"
#include "commands.hpp"
#include "common.hpp"

namespace canopy::tool {

namespace {

std::string traits_text(const canopy::mode_traits& t) {
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (on) s += s.empty() ? name : std::string(", ") + name;
  };
  add(t.linked_list_queue, "linked-list queue");
  add(t.private_queues, "private queues");
  add(t.block_fetch, "block fetch");
  add(t.atomic_tree, "atomic tree");
  add(t.shared_queues, "shared queues");
  add(t.lockfree_global, "lock-free global queue");
  add(t.balanced_push, "balanced push");
  add(t.continuation, "continuation");
  add(t.warp_rounds, "warp rounds");
  return s.empty() ? "locked fixed ring, warp masters" : s;
}

}  // namespace

command add_modes_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("modes",
                                 "List the scheduler modes (one name per line, in the ladder's order); --describe adds "
                                 "what each adds and compiles in, and the push policies");
  auto describe = std::make_shared<bool>(false);
  cmd->add_flag("--describe", *describe, "one line per mode with its summary and traits, then the push policies");
  return {cmd, [describe] {
            const canopy::mode fallback = canopy::scheduler_options{}.mode;
            if (!*describe) {
              for (const auto& m : canopy::mode_table) std::fputs(fmt::format("{}\n", m.name).c_str(), stdout);
              return static_cast<int>(exit_ok);
            }
            std::fputs("modes (--mode; each row adds to the ones above unless its traits say otherwise):\n", stdout);
            for (const auto& m : canopy::mode_table)
              std::fputs(fmt::format("  {:<15}{} {}\n                 [{}]\n", m.name, m.mode == fallback ? "*" : " ",
                                     m.summary, traits_text(m.traits))
                             .c_str(),
                         stdout);
            std::fputs("  (* = default)\npush policies (--push-policy; modes with balanced push):\n", stdout);
            for (const auto& p : canopy::push_policy_table)
              std::fputs(fmt::format("  {:<15} {}\n", p.name, p.summary).c_str(), stdout);
            return static_cast<int>(exit_ok);
          }};
}

}  // namespace canopy::tool
