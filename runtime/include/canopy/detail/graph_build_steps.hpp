// SPDX-License-Identifier: Apache-2.0
// The per-element steps of building a tree's task graph on the device (canopy/device_task_graph.cuh),
// as plain CANOPY_HD functions: the kernels there call them one element per thread, and a host loop
// can call them one element per iteration (tests/cpu/runtime/graph_build_steps_test.cpp does), so
// the logic is tested without a GPU. Also the host side of a failed build: the fault keys, and the
// one-line message for each. Portable: compiles with g++ and nvcc.
//
// A fault is found by many threads at once; each proposes a 64-bit key and the smallest wins
// (atomicMin), so the report names the same task on every run: the smallest id among the worst
// class (a bad graph beats a bad sources order).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "canopy/config.hpp"

namespace canopy::detail::graph_build {

enum class fault : std::uint8_t {
  none = 0,
  own_parent = 1,             // where: the task
  parent_out_of_range = 2,    // where: the task; a = its parent
  negative_child_count = 3,   // where: the task; a = its child_count
  children_out_of_range = 4,  // where: the task; a = first_child, b = child_count
  own_child = 5,              // where: the task; a = first_child, b = child_count
  two_parents = 6,            // where: the child; a = its smallest parent, b = its largest
  cycle = 7,                  // where: the smallest task that reaches no root
  order_out_of_range = 8,     // where: the index into sources_order; a = the entry
  order_not_leaf = 9,         // where: the index; a = the entry, b = the entry's child count
  order_duplicate = 10,       // where: the index; a = the entry, b = the index it first appeared at
};

/// No fault: larger than every key, so atomicMin keeps any real one.
inline constexpr unsigned long long no_fault = ~0ull;

/// Graph faults (0) before the cycle check's (1) before sources-order faults (2).
CANOPY_HD constexpr unsigned fault_class(fault f) {
  return f == fault::cycle ? 1u : static_cast<unsigned>(f) >= static_cast<unsigned>(fault::order_out_of_range) ? 2u : 0u;
}
/// Key: class in bits 56.., `where` (a task id or an index, below 2^31) in bits 8..39, kind in 0..7.
CANOPY_HD constexpr unsigned long long make_key(fault f, std::int64_t where) {
  return (static_cast<unsigned long long>(fault_class(f)) << 56) | (static_cast<unsigned long long>(where) << 8) |
         static_cast<unsigned long long>(f);
}
CANOPY_HD constexpr fault key_fault(unsigned long long key) {
  return key == no_fault ? fault::none : static_cast<fault>(key & 0xffu);
}
CANOPY_HD constexpr std::int32_t key_where(unsigned long long key) {
  return static_cast<std::int32_t>((key >> 8) & 0xffffffffull);
}

// --- parent arrays ------------------------------------------------------------------------------

/// Task t with parent p among n tasks: p is no_task (a root) or another task.
CANOPY_HD inline unsigned long long check_parent(task_id t, task_id p, std::int32_t n) {
  if (p == t) return make_key(fault::own_parent, t);
  if (p != no_task && (p < 0 || p >= n)) return make_key(fault::parent_out_of_range, t);
  return no_fault;
}

/// How ids run along the edges, OR-ed over all tasks. If every parent id is below its child's (or
/// every one above), following parents moves ids one way only, so there is no cycle: the octree
/// (level order) and most generated trees prove themselves acyclic for free.
inline constexpr unsigned parent_below = 1u, parent_above = 2u;
CANOPY_HD inline unsigned id_order_bits(task_id t, task_id p) {
  return p == no_task ? 0u : p < t ? parent_below : parent_above;
}
CANOPY_HD inline bool ids_prove_acyclic(unsigned bits) { return bits != (parent_below | parent_above); }

// --- child ranges (children contiguous: first_child .. + child_count) ----------------------------

/// Task p's children [first, first + count) among n tasks.
CANOPY_HD inline unsigned long long check_children(task_id p, std::int32_t first, std::int32_t count, std::int32_t n) {
  if (count < 0) return make_key(fault::negative_child_count, p);
  if (count == 0) return no_fault;  // a leaf: first_child is not read (the octree stores -1)
  if (first < 0 || static_cast<std::int64_t>(first) + count > n) return make_key(fault::children_out_of_range, p);
  if (p >= first && p < first + count) return make_key(fault::own_child, p);
  return no_fault;
}
/// The children of p that the slot pass scatters: none when p's range is bad (its fault is
/// reported instead), so no later step reads outside the arrays.
CANOPY_HD inline std::int64_t usable_children(task_id p, std::int32_t first, std::int32_t count, std::int32_t n) {
  return check_children(p, first, count, n) == no_fault ? count : 0;
}
/// Child slot e (0 <= e < offsets[n]) belongs to the last p in [0, n) with offsets[p] <= e, where
/// offsets is the exclusive sum of usable_children (n + 1 entries). A binary search: O(log n) per
/// slot whatever the fan-out, so a star costs no more than an octree.
CANOPY_HD inline task_id slot_parent(const std::int64_t* offsets, std::int32_t n, std::int64_t e) {
  std::int32_t lo = 0, hi = n;  // offsets[lo] <= e; the answer is in [lo, hi)
  while (hi - lo > 1) {
    const std::int32_t mid = lo + (hi - lo) / 2;
    if (offsets[mid] <= e) lo = mid;
    else hi = mid;
  }
  return lo;
}
/// How many slots the scatter visits: a valid forest has at most n child slots (n - roots), so
/// with more some task sits in two ranges, and by pigeonhole two of the first n + 1 slots already
/// name it; a bad input with overlapping ranges cannot make the pass run n^2 slots.
CANOPY_HD inline std::int64_t slots_to_visit(std::int64_t total, std::int32_t n) {
  return total < static_cast<std::int64_t>(n) + 1 ? total : static_cast<std::int64_t>(n) + 1;
}
/// Every slot proposes its parent p to child c with min and max; initial values:
inline constexpr std::int32_t no_parent_yet = INT32_MAX;  // the min
inline constexpr std::int32_t no_parent_max = -1;         // the max
/// After the scatter: child c got parents in [lo, hi]; no_parent_yet means a root. Min and max
/// do not depend on the order of the atomics, so the result and any fault are deterministic.
CANOPY_HD inline unsigned long long settle_parent(task_id c, std::int32_t lo, std::int32_t hi, task_id& parent) {
  if (lo == no_parent_yet) {
    parent = no_task;
    return no_fault;
  }
  parent = lo;
  return lo != hi ? make_key(fault::two_parents, c) : no_fault;
}

// --- the cycle check: pointer jumping ------------------------------------------------------------

/// next[t] starts at t's parent, or t itself for a root, so roots are fixed points.
CANOPY_HD inline task_id jump_start(task_id t, task_id p) { return p == no_task ? t : p; }
/// After r rounds of next[t] = next[next[t]], next[t] is t's ancestor 2^r up (or its root). A path
/// in a forest of n tasks has at most n - 1 edges, so r = bit_width(n - 1) rounds (2^r > n - 1)
/// reach every root: 24 rounds at n = 10 M.
inline int jump_rounds(std::int32_t n) {
  int r = 0;
  for (auto v = static_cast<std::uint32_t>(n > 1 ? n - 1 : 0); v != 0; v >>= 1) ++r;
  return r;
}
/// t reached `reached` after the rounds; anything but a root means t is on a cycle or leads into one.
CANOPY_HD inline unsigned long long check_reaches_root(task_id t, task_id parent_of_reached) {
  return parent_of_reached == no_task ? no_fault : make_key(fault::cycle, t);
}

// --- a caller's sources order ---------------------------------------------------------------------

/// Entry i of the order names task s; dependency_count[s] is read only when s is a task.
CANOPY_HD inline unsigned long long check_source(std::int32_t i, task_id s, std::int32_t n, const std::int32_t* dependency_count) {
  if (s < 0 || s >= n) return make_key(fault::order_out_of_range, i);
  if (dependency_count[s] != 0) return make_key(fault::order_not_leaf, i);
  return no_fault;
}
/// first_index[s] is the smallest i naming s (atomicMin); every other i repeats it. With the count
/// equal to the number of leaves, no repeats and only leaves make the order a permutation of them.
CANOPY_HD inline unsigned long long check_source_repeat(std::int32_t i, std::int32_t first_index_of_s) {
  return first_index_of_s != i ? make_key(fault::order_duplicate, i) : no_fault;
}

// --- host side of a failure -------------------------------------------------------------------------

/// What the message needs beside the key, read from the device only after a build has failed.
struct fault_details {
  std::int64_t a = 0, b = 0;
};

/// The cycle that `from` runs into, in dependency order (child -> parent), starting and ending at
/// its smallest task. `parent` is a whole, range-checked parent array; empty if `from` reaches a root.
inline std::vector<task_id> find_cycle(std::span<const task_id> parent, task_id from) {
  std::vector<std::int32_t> seen_at(parent.size(), -1);
  std::vector<task_id> path;
  task_id t = from;
  while (t != no_task && seen_at[static_cast<std::size_t>(t)] < 0) {
    seen_at[static_cast<std::size_t>(t)] = static_cast<std::int32_t>(path.size());
    path.push_back(t);
    t = parent[static_cast<std::size_t>(t)];
  }
  if (t == no_task) return {};
  std::vector<task_id> cycle(path.begin() + seen_at[static_cast<std::size_t>(t)], path.end());
  std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());
  cycle.push_back(cycle.front());
  return cycle;
}

/// The one-line message of a failed build ("device task graph: ..."), from the winning key, its
/// details, the task count, and for a cycle the cycle itself (find_cycle).
inline std::string fault_message(unsigned long long key, const fault_details& d, std::int32_t n,
                                 std::span<const task_id> cycle = {}) {
  const std::string w = std::to_string(key_where(key));
  const std::string a = std::to_string(d.a), b = std::to_string(d.b);
  const std::string tasks = std::to_string(n) + (n == 1 ? " task" : " tasks");
  std::string m;
  switch (key_fault(key)) {
    case fault::none: m = "no fault"; break;
    case fault::own_parent: m = "task " + w + " is its own parent"; break;
    case fault::parent_out_of_range: m = "task " + w + " has parent " + a + ", out of range (" + tasks + ")"; break;
    case fault::negative_child_count: m = "task " + w + " has child_count " + a; break;
    case fault::children_out_of_range:
      m = "task " + w + " has children " + a + ".." + std::to_string(d.a + d.b - 1) + " (first_child " + a +
          ", child_count " + b + "), out of range (" + tasks + ")";
      break;
    case fault::own_child:
      m = "task " + w + " is its own child (children " + a + ".." + std::to_string(d.a + d.b - 1) + ")";
      break;
    case fault::two_parents: m = "task " + w + " is a child of both task " + a + " and task " + b; break;
    case fault::cycle: {
      m = "cycle ";
      for (std::size_t i = 0; i < cycle.size() && i < 16; ++i) m += (i ? " -> " : "") + std::to_string(cycle[i]);
      if (cycle.size() > 16) m += " -> ...";
      if (cycle.empty() || std::find(cycle.begin(), cycle.end(), key_where(key)) == cycle.end())
        m += " (task " + w + " leads into it and never reaches a root)";
      break;
    }
    case fault::order_out_of_range: m = "sources_order[" + w + "] = " + a + " is not a task (" + tasks + ")"; break;
    case fault::order_not_leaf:
      m = "sources_order[" + w + "] = task " + a + ", which has " + b + (d.b == 1 ? " child" : " children") +
          " (the sources are the tasks without children)";
      break;
    case fault::order_duplicate: m = "sources_order[" + w + "] = task " + a + " repeats sources_order[" + b + "]"; break;
  }
  return "device task graph: " + m;
}

/// The count check, on the host once the leaves are counted.
inline std::string source_count_message(std::int32_t given, std::int32_t leaves) {
  return "device task graph: sources_order has " + std::to_string(given) + (given == 1 ? " entry" : " entries") +
         ", but " + std::to_string(leaves) + (leaves == 1 ? " task has" : " tasks have") + " no children";
}

}  // namespace canopy::detail::graph_build
