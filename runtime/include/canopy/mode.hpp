// SPDX-License-Identifier: Apache-2.0
// The scheduler modes, as one table: the seed's optimisation ladder (each step adds one technique
// to the one before) and the steps past it. A mode is a name and an explicit set of traits; the
// kernel and the CPU workers compile in what the traits select, so a mode need not be the next
// rung of the ladder.
//
// Adding a mode: an enumerator and a row of mode_table (this file); a trait nobody has yet also
// needs the code that honours it (detail/block_loop.cuh or detail/warp_master_loop.cuh, and
// cpu_scheduler.hpp's worker loop).
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>

#include "canopy/detail/enum_table.hpp"
#include "canopy/status.hpp"

namespace canopy {

enum class mode : int {
  mutex,
  fixed_queue,
  private_queues,
  all_threads,
  lockfree_tree,
  shared_queues,
  lockfree,
  continuation,
  warp_rounds,
};

/// What a mode compiles in.
struct mode_traits {
  bool linked_list_queue = false;  ///< global queue is a linked list, a node allocated per push (else a fixed ring)
  bool private_queues = false;     ///< a private queue per block in shared memory, before the global queue
  bool block_fetch = false;        ///< the block master fetches a batch for every thread (else warp masters work alone)
  bool atomic_tree = false;        ///< fetch_sub on dependency counters (else one tree mutex)
  bool shared_queues = false;      ///< a queue per block in global memory, popped by its owner without a lock
  bool lockfree_global = false;    ///< lock-free global ring (else a mutex around it)
  bool balanced_push = false;      ///< the push policy picks another block's shared queue (else the own one)
  bool continuation = false;       ///< the last child to finish runs its parent at once; full batches resolve together
  /// No block barrier. On trees, with Ops that declare tree_only: every warp claims sources and
  /// runs them and the parents they make ready in rounds, with no queue. Otherwise (a DAG, or Ops
  /// without tree_only): every lane group is a worker of its own that takes one task at a time from
  /// the queues, runs it and resolves it (block_loop.cuh's run_dag_by_groups). The CPU backend runs
  /// it as continuation.
  bool warp_rounds = false;
};

/// What the loops can honour together: the block loop (block_fetch) runs fixed rings and atomic or
/// locked trees; the warp-master loop runs the seed's locked designs only; continuation climbs
/// through atomic counters; a balanced push needs shared queues to push into; warp rounds are a way
/// of continuing (a tree's parents run at once by the warp that made them ready).
constexpr bool consistent(const mode_traits& t) {
  if (t.linked_list_queue && (t.block_fetch || t.private_queues)) return false;
  if (!t.block_fetch && (t.atomic_tree || t.shared_queues || t.lockfree_global || t.balanced_push || t.continuation))
    return false;
  if (t.continuation && !t.atomic_tree) return false;
  if (t.warp_rounds && !t.continuation) return false;
  if (t.balanced_push && !t.shared_queues) return false;
  return true;
}

struct mode_info {
  canopy::mode mode;
  std::string_view name;     ///< as the tool, the benchmark and the README spell it
  mode_traits traits;
  std::string_view summary;  ///< one line for --help and docs
};

// clang-format off
inline constexpr mode_info mode_table[] = {
  {mode::mutex, "mutex",
   {.linked_list_queue = true},
   "the seed's first design: linked-list global queue, a queue mutex and a tree mutex, warp masters work"},
  {mode::fixed_queue, "fixed-queue",
   {},
   "+ fixed-capacity global ring, no allocation in the kernel"},
  {mode::private_queues, "private-queues",
   {.private_queues = true},
   "+ a private queue per block in shared memory, global fallback"},
  {mode::all_threads, "all-threads",
   {.private_queues = true, .block_fetch = true},
   "+ one thread per block fetches and resolves for all threads of the block"},
  {mode::lockfree_tree, "lockfree-tree",
   {.private_queues = true, .block_fetch = true, .atomic_tree = true},
   "+ atomic dependency counters instead of the tree mutex"},
  {mode::shared_queues, "shared-queues",
   {.private_queues = true, .block_fetch = true, .atomic_tree = true, .shared_queues = true},
   "+ a shared queue per block in global memory, popped by its owner without a lock"},
  {mode::lockfree, "lockfree",
   {.private_queues = true, .block_fetch = true, .atomic_tree = true, .shared_queues = true,
    .lockfree_global = true, .balanced_push = true},
   "+ lock-free global queue and the load-balancing push policy"},
  {mode::continuation, "continuation",
   {.private_queues = true, .block_fetch = true, .atomic_tree = true, .shared_queues = true,
    .lockfree_global = true, .balanced_push = true, .continuation = true},
   "+ the last child to finish runs its parent at once (no queue round trip); full batches resolve together"},
  {mode::warp_rounds, "warp-rounds",
   {.private_queues = true, .block_fetch = true, .atomic_tree = true, .shared_queues = true,
    .lockfree_global = true, .balanced_push = true, .continuation = true, .warp_rounds = true},
   "+ no block barrier: on trees (Ops declaring tree_only) each warp runs sources and the parents they make ready in rounds, no queue; on DAGs each lane group fetches, runs and resolves its tasks alone"},
};
// clang-format on

inline constexpr std::size_t mode_count = std::size(mode_table);

/// Every mode, in the table's order (the ladder's).
inline constexpr std::array<mode, mode_count> all_modes = detail::enum_column<&mode_info::mode>(mode_table);
static_assert(detail::enum_indexed<&mode_info::mode>(mode_table), "mode_table lists every mode once, in enumerator order");
static_assert([] {
  for (const mode_info& i : mode_table)
    if (!consistent(i.traits)) return false;
  return true;
}(), "every row of mode_table has traits the loops can honour together (see consistent())");

constexpr bool is_valid(mode m) { return static_cast<std::size_t>(m) < mode_count; }

/// The table's row of `m`. `m` must be one of all_modes (is_valid).
constexpr const mode_info& info(mode m) { return mode_table[static_cast<std::size_t>(m)]; }
constexpr mode_traits traits_of(mode m) { return info(m).traits; }
/// The mode's name; "unknown" for a value outside the table.
constexpr std::string_view to_string(mode m) { return is_valid(m) ? info(m).name : std::string_view("unknown"); }

constexpr std::optional<mode> parse_mode(std::string_view name) { return detail::enum_named<&mode_info::mode>(mode_table, name); }

/// Calls f(std::integral_constant<mode, M>{}) with M = m, so that code templated on the mode (the
/// persistent kernel, the CPU worker loop) is instantiated for every row of the table and picked
/// at run time. f returns the same type (a value, or void) for every mode. Throws
/// canopy::error(status::invalid_argument) for a value outside the table.
template <class F>
auto with_mode(mode m, F&& f) {
  if (!is_valid(m)) throw error(status::invalid_argument, "unknown scheduler mode " + std::to_string(static_cast<int>(m)));
  using result = decltype(f(std::integral_constant<mode, mode_table[0].mode>{}));
  return [&]<std::size_t... I>(std::index_sequence<I...>) -> result {
    static_assert((std::is_same_v<result, decltype(f(std::integral_constant<mode, mode_table[I].mode>{}))> && ...),
                  "with_mode: f must return the same type for every mode");
    static_assert(std::is_void_v<result> || !std::is_reference_v<result>, "with_mode: f returns a value or void");
    if constexpr (std::is_void_v<result>) {
      ((m == mode_table[I].mode ? (f(std::integral_constant<mode, mode_table[I].mode>{}), true) : false) || ...);
    } else {
      std::optional<result> r;
      ((m == mode_table[I].mode ? (r.emplace(f(std::integral_constant<mode, mode_table[I].mode>{})), true) : false) || ...);
      return std::move(*r);
    }
  }(std::make_index_sequence<mode_count>{});
}

}  // namespace canopy
