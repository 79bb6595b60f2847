// The scheduler modes: the seed's optimisation ladder, each step cumulative, plus steps past it.
#pragma once

#include <array>
#include <optional>
#include <string_view>

namespace canopy {

enum class mode : int {
  mutex,           ///< linked-list global queue (node allocated per push), a queue mutex and a tree mutex, warp masters work
  fixed_queue,     ///< + fixed-capacity global queue, no allocation in the kernel
  private_queues,  ///< + a private queue per block in shared memory, global fallback
  all_threads,     ///< + one thread per block fetches and resolves for all threads of the block
  lockfree_tree,   ///< + atomic dependency counters instead of the tree mutex
  shared_queues,   ///< + a shared queue per block in global memory, popped by its owner without a lock
  lockfree,        ///< + lock-free global queue and the load-balancing push policy
  continuation,    ///< + the last child to finish runs its parent at once (no queue round trip); full batches resolve their arrivals together
};

inline constexpr std::array<mode, 8> all_modes = {
    mode::mutex,         mode::fixed_queue,   mode::private_queues, mode::all_threads,
    mode::lockfree_tree, mode::shared_queues, mode::lockfree,       mode::continuation};

/// Compile-time features of a mode; the kernel and the CPU workers branch on these.
struct mode_traits {
  bool linked_list_queue;  // mutex mode: allocate a list node per push
  bool private_queues;
  bool block_fetch;        // block master fetches a batch for all threads (else warp masters work)
  bool atomic_tree;        // fetch_sub on dependency counters (else a tree mutex)
  bool shared_queues;
  bool lockfree_global;    // lock-free global ring (else a mutex around it)
  bool balanced_push;      // push policy picks another block's shared queue
  bool continuation;
};

constexpr mode_traits traits_of(mode m) {
  const int step = static_cast<int>(m);
  return mode_traits{
      /*linked_list_queue*/ step == 0,
      /*private_queues*/ step >= 2,
      /*block_fetch*/ step >= 3,
      /*atomic_tree*/ step >= 4,
      /*shared_queues*/ step >= 5,
      /*lockfree_global*/ step >= 6,
      /*balanced_push*/ step >= 6,
      /*continuation*/ step >= 7,
  };
}

constexpr std::string_view to_string(mode m) {
  switch (m) {
    case mode::mutex: return "mutex";
    case mode::fixed_queue: return "fixed-queue";
    case mode::private_queues: return "private-queues";
    case mode::all_threads: return "all-threads";
    case mode::lockfree_tree: return "lockfree-tree";
    case mode::shared_queues: return "shared-queues";
    case mode::lockfree: return "lockfree";
    case mode::continuation: return "continuation";
  }
  return "unknown";
}

constexpr std::optional<mode> parse_mode(std::string_view name) {
  for (mode m : all_modes)
    if (to_string(m) == name) return m;
  return std::nullopt;
}

/// How a block picks the shared queue that receives a task it made ready (modes >= lockfree).
enum class push_policy : int {
  round_robin,   ///< cycle through every block's shared queue
  least_loaded,  ///< sample a few queues' occupancy, take the emptiest
  locality,      ///< keep the task on the block that finished its last child (same subtree, warm cache)
};

inline constexpr std::array<push_policy, 3> all_push_policies = {
    push_policy::round_robin, push_policy::least_loaded, push_policy::locality};

constexpr std::string_view to_string(push_policy p) {
  switch (p) {
    case push_policy::round_robin: return "round-robin";
    case push_policy::least_loaded: return "least-loaded";
    case push_policy::locality: return "locality";
  }
  return "unknown";
}

constexpr std::optional<push_policy> parse_push_policy(std::string_view name) {
  for (push_policy p : all_push_policies)
    if (to_string(p) == name) return p;
  return std::nullopt;
}

}  // namespace canopy
