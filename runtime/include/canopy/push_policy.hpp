// SPDX-License-Identifier: Apache-2.0
// The load-balancing push policies: how a block picks the shared queue that receives a task it
// made ready (modes with mode_traits::balanced_push). One table, as for the modes.
//
// Adding a policy: an enumerator and a row of push_policy_table (this file), and its case in
// detail::pick_shared_queue (detail/pick_queue.hpp).
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

#include "canopy/detail/enum_table.hpp"

namespace canopy {

enum class push_policy : int {
  round_robin,
  least_loaded,
  locality,
};

struct push_policy_info {
  canopy::push_policy policy;
  std::string_view name;
  std::string_view summary;
};

inline constexpr push_policy_info push_policy_table[] = {
    {push_policy::round_robin, "round-robin", "cycle through every block's shared queue"},
    {push_policy::least_loaded, "least-loaded", "sample a few queues' occupancy, take the emptiest"},
    {push_policy::locality, "locality", "keep the task on the block that finished its last child (same subtree, warm cache)"},
};

inline constexpr std::size_t push_policy_count = std::size(push_policy_table);

inline constexpr std::array<push_policy, push_policy_count> all_push_policies =
    detail::enum_column<&push_policy_info::policy>(push_policy_table);
static_assert(detail::enum_indexed<&push_policy_info::policy>(push_policy_table),
              "push_policy_table lists every policy once, in enumerator order");

constexpr bool is_valid(push_policy p) { return static_cast<std::size_t>(p) < push_policy_count; }
constexpr const push_policy_info& info(push_policy p) { return push_policy_table[static_cast<std::size_t>(p)]; }
/// The policy's name; "unknown" for a value outside the table.
constexpr std::string_view to_string(push_policy p) { return is_valid(p) ? info(p).name : std::string_view("unknown"); }

constexpr std::optional<push_policy> parse_push_policy(std::string_view name) {
  return detail::enum_named<&push_policy_info::policy>(push_policy_table, name);
}

}  // namespace canopy
