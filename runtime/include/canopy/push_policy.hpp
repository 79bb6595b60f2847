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

inline constexpr std::array<push_policy, push_policy_count> all_push_policies = [] {
  std::array<push_policy, push_policy_count> a{};
  for (std::size_t i = 0; i < push_policy_count; ++i) a[i] = push_policy_table[i].policy;
  return a;
}();

namespace detail {
constexpr bool push_policy_table_is_indexed() {
  for (std::size_t i = 0; i < push_policy_count; ++i)
    if (static_cast<std::size_t>(push_policy_table[i].policy) != i) return false;
  return true;
}
}  // namespace detail
static_assert(detail::push_policy_table_is_indexed(), "push_policy_table lists every policy once, in enumerator order");

constexpr bool is_valid(push_policy p) { return static_cast<std::size_t>(p) < push_policy_count; }
constexpr const push_policy_info& info(push_policy p) { return push_policy_table[static_cast<std::size_t>(p)]; }
constexpr std::string_view to_string(push_policy p) { return info(p).name; }

constexpr std::optional<push_policy> parse_push_policy(std::string_view name) {
  for (const push_policy_info& i : push_policy_table)
    if (i.name == name) return i.policy;
  return std::nullopt;
}

}  // namespace canopy
