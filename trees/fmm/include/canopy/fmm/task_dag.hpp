// SPDX-License-Identifier: Apache-2.0
// The whole FMM as one task DAG (issue 40, item 4), built on the host from the octree and its
// interaction lists, in the scheduler's form (canopy::task_graph, successors in CSR).
//
// The scheduler knows one kind of task, an id; the FMM has five. The kind is the id's range
// (task_ranges), so nothing in the runtime changes:
//
//   up    [0, nodes)          one per node, id = node: P2M at a leaf, M2M of its children at an
//                             internal node. Waits for its children's up tasks.
//   m2l   one per target with a non-empty M2L list: the target's local from its sources'
//                             multipoles. Waits for the up task of every source, or, with
//                             dag_shape::m2l_wait_levels = k > 0, of each source's ancestor k
//                             levels up (the root for a shallower source), each such ancestor
//                             once (below).
//   down  one per node whose local expansion is not zero (the node or an ancestor has an M2L
//                             list): its own M2L result plus its parent's local shifted (L2L).
//                             Waits for its m2l task (if any) and its parent's down task (if any).
//   l2p   one per leaf with a down task: adds the far field to each of its points.
//                             Waits for the leaf's down task and its p2p tasks.
//   p2p   one or more per leaf, each over a contiguous part of its points: writes their near
//                             field. No predecessors, so these fill the GPU from the first moment
//                             while the multipoles climb.
//
// l2p waits for p2p because both write the same points: p2p stores, l2p adds, and no two tasks
// ever write one point at the same time.
//
// Why a leaf's P2P may be several tasks: its cost is its points times its sources' points, and a
// few leaves (a large leaf beside a dense region: on a Plummer sphere of 64k points, one leaf
// with 17 times the mean) make single tasks that hold one warp for the length of a whole phase.
// dag_shape::p2p_part_interactions splits a leaf whose cost exceeds it into parts of its points
// (p2p_parts below), each with the whole source list, so every point sums the same sources in
// the same order: task_ops' serial bodies give the same bits as unsplit; the GPU's spread a
// part's points over the warp's lanes by the part's size, so there the sums change by rounding.
//
// The sources are the leaves' up tasks, then the p2p tasks, in id order (task_graph's sources are
// sorted). The up tasks start the critical path (up, m2l, down, l2p); the p2p tasks only fill, and
// a late long one ends the run after everything else (the 64k run's last task was a 230 us p2p
// that started 890 us in, bench/RESULTS.md). So the p2p tasks are numbered longest first, by
// classes of cost within a factor of two and in Morton order within a class (p2p_cost_class), and
// gpu_evaluator deals only the up tasks out at the start
// (scheduler_options::dealt_sources): the p2p tasks are claimed, longest first, by warps that find
// their block's queue, the global queue and one steal empty.
//
// Nodes whose local expansion would be zero get no down task and their leaves no l2p: the far
// field of a point is then exactly zero and p2p's store is its whole field.
//
// Why an m2l task may wait for coarser events than its sources: one edge per M2L pair is 41.6M
// edges for 1M Plummer points (about 320 sources a target), each a device-scope atomic when its
// source finishes. An ancestor's up task finishes after its whole subtree's, so waiting for it
// is safe (it reads nothing the ancestor writes; up tasks never wait for m2l, so no cycle), and
// a target's sources are clustered (the children of a few cells near its parent): k = 1 folds up
// to 8 sources into one edge, k = 2 up to 64. The price is delay: the m2l task starts when the
// ancestor's subtree is done (at most k M2M hops after its last source, if every leaf below has
// finished), which costs nothing once the upward pass is done, and the upward pass runs first (its
// leaves are the first sources claimed).
#pragma once

#include <canopy/config.hpp>
#include <canopy/fmm/interaction_lists.hpp>
#include <canopy/status.hpp>
#include <canopy/task_graph.hpp>
#include <canopy/trees/octree.hpp>

#include <cuda/std/bit>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace canopy::fmm {

enum class task_kind : std::int32_t { up, m2l, down, l2p, p2p };

/// The kinds whose GPU bodies can stage the expansions they read in shared memory, a bit
/// (1 << kind) each: up (M2M's children), m2l (a batch of 32 sources), down (L2L's parent and the
/// node's own local). Staging copies them all in one round trip to L2, where a body that streams
/// them waits for each 16-byte chunk in turn (gpu_evaluator::set_staged_kinds, detail/gpu_tasks.cuh).
inline constexpr unsigned all_staged_kinds = 1u << static_cast<int>(task_kind::up) | 1u << static_cast<int>(task_kind::m2l) |
                                             1u << static_cast<int>(task_kind::down);

// The id ranges of the five kinds: kind k holds [begin of k, begin of k+1).
struct task_ranges {
  std::int32_t m2l_begin = 0;   // = node count: up tasks are [0, m2l_begin)
  std::int32_t down_begin = 0;
  std::int32_t l2p_begin = 0;
  std::int32_t p2p_begin = 0;
  std::int32_t end = 0;         // the task count

  CANOPY_HD task_kind kind_of(std::int32_t t) const {
    return t < m2l_begin ? task_kind::up
           : t < down_begin ? task_kind::m2l
           : t < l2p_begin  ? task_kind::down
           : t < p2p_begin  ? task_kind::l2p
                            : task_kind::p2p;
  }
};

// The DAG and the per-kind node lists its tasks run on, plus the same work grouped by level for
// the phase-by-phase baseline (the CUDA graph of gpu_evaluate.hpp).
struct task_dag {
  task_ranges ranges;
  std::vector<std::int32_t> m2l_target;  // m2l task m2l_begin + i runs on node m2l_target[i]
  std::vector<std::int32_t> down_node;   // down task down_begin + i on node down_node[i] (increasing ids)
  std::vector<std::int32_t> l2p_leaf;    // l2p task l2p_begin + i on leaf l2p_leaf[i] (Morton order)
  std::vector<std::int32_t> p2p_leaf;    // p2p task p2p_begin + i on leaf p2p_leaf[i], a leaf once per part,
                                         // its parts adjacent, longest class first (p2p_cost_class)
  std::vector<std::int32_t> p2p_point;   // its first point: the part is [p2p_point[i], the next part's first
                                         // point if that is of the same leaf, else the leaf's end)
  std::vector<std::uint8_t> has_local;   // per node: its local expansion is not zero (it has a down task)
  canopy::task_graph graph;

  // For the level-synchronous baseline: internal nodes by level (M2M bottom-up), down nodes by
  // level (L2L top-down). internal_level_offset[L] .. [L+1] indexes internal_node; down_level_offset
  // likewise indexes down_node (which is in node order, so already grouped by level).
  std::vector<std::int32_t> internal_node;
  std::vector<std::int32_t> internal_level_offset;  // depth + 2 entries
  std::vector<std::int32_t> down_level_offset;      // depth + 2 entries

  std::int32_t task_count() const { return ranges.end; }
};

// How the DAG's m2l tasks wait for their sources' multipoles, and how finely the P2P work is cut
// (the header comment says why).
struct dag_shape {
  // 0: each m2l task waits for the up task of every source (one edge per M2L pair). k > 0: for
  // the up task of each source's ancestor k levels up (the root for sources above level k), each
  // such ancestor once.
  int m2l_wait_levels = 0;
  // A leaf of n points whose sources hold s points in all gets ceil(n s / this) p2p tasks (at
  // most n); 0: one a leaf. 16384 is about 1.5 times the mean leaf's n s on Plummer spheres at
  // leaves of 32 and theta 0.5 (a warp's 512 steps of 32 pairs).
  std::int64_t p2p_part_interactions = 16384;
};

// How many p2p tasks a leaf of `points` points gets when its sources hold `source_points` (the
// target leaf's own included), and where part q of k starts, relative to the leaf's first point.
CANOPY_HD inline std::int32_t p2p_parts(std::int32_t points, std::int64_t source_points, std::int64_t part_interactions) {
  if (part_interactions <= 0 || points <= 1) return 1;
  const std::int64_t cost = std::int64_t{points} * source_points;  // < 2^62: both below 2^31
  const std::int64_t k = cost <= 0 ? 1 : (cost - 1) / part_interactions + 1;  // ceil, for any part_interactions
  return static_cast<std::int32_t>(k < 1 ? 1 : k > points ? points : k);
}
CANOPY_HD inline std::int32_t p2p_part_begin(std::int32_t points, std::int32_t parts, std::int32_t q) {
  return static_cast<std::int32_t>(std::int64_t{points} * q / parts);
}
// The cost whose class (p2p_cost_class) orders the DAG's p2p tasks (header comment): the leaf's largest
// part's points (p2p_part_begin's parts differ by one point at most) times its sources' points.
// The same for every part of a leaf, so a leaf's parts stay adjacent.
CANOPY_HD inline std::int64_t p2p_part_cost(std::int32_t points, std::int64_t source_points, std::int32_t parts) {
  return (std::int64_t{points} + parts - 1) / parts * source_points;
}
// The class the DAG orders its p2p tasks by: the bit width of p2p_part_cost (costs within a factor
// of two share a class). Longest class first, the leaves in tree.leaves' (Morton) order within a
// class: neighbours share most of their sources, which then meet in L2 (ordered by the cost alone,
// the 16M-body N-body step's evaluation took 166 against 153 ms).
CANOPY_HD inline int p2p_cost_class(std::int64_t cost) { return cuda::std::bit_width(static_cast<std::uint64_t>(cost)); }

// The node an m2l task waits for in place of source `s` (parent: the tree's parent array).
CANOPY_HD inline std::int32_t m2l_wait_node(const std::int32_t* parent, std::int32_t s, int levels) {
  for (int i = 0; i < levels && parent[s] >= 0; ++i) s = parent[s];
  return s;
}

// Builds the DAG of the header comment for `tree` and `lists` (build_interaction_lists of that
// tree). Throws std::invalid_argument when the lists are not of this tree or the shape's
// m2l_wait_levels is negative.
inline task_dag build_task_dag(const trees::octree& tree, const interaction_lists& lists, const dag_shape& shape = {}) {
  const std::int32_t nodes = tree.node_count();
  const auto n_size = static_cast<std::size_t>(nodes);
  if (lists.m2l_offset.size() != n_size + 1 || lists.p2p_offset.size() != n_size + 1)
    throw std::invalid_argument("fmm::build_task_dag: lists are not of this tree (" + std::to_string(nodes) + " nodes)");
  if (shape.m2l_wait_levels < 0)
    throw std::invalid_argument("fmm::build_task_dag: m2l_wait_levels must be >= 0, not " + std::to_string(shape.m2l_wait_levels));
  if (shape.p2p_part_interactions < 0)
    throw std::invalid_argument("fmm::build_task_dag: p2p_part_interactions must be >= 0, not " +
                                std::to_string(shape.p2p_part_interactions));
  const auto has_m2l = [&](std::int32_t n) {
    return lists.m2l_offset[static_cast<std::size_t>(n) + 1] > lists.m2l_offset[static_cast<std::size_t>(n)];
  };

  task_dag d;
  d.has_local.assign(n_size, 0);
  // Level order puts every parent before its children, so one pass settles has_local.
  for (std::int32_t n = 0; n < nodes; ++n) {
    const std::int32_t p = tree.parent[static_cast<std::size_t>(n)];
    d.has_local[static_cast<std::size_t>(n)] = has_m2l(n) || (p >= 0 && d.has_local[static_cast<std::size_t>(p)]);
  }
  std::vector<std::int32_t> m2l_task(n_size, -1), down_task(n_size, -1), p2p_task(n_size, -1), p2p_part_count(n_size, 0);
  for (std::int32_t n = 0; n < nodes; ++n)
    if (has_m2l(n)) d.m2l_target.push_back(n);
  for (std::int32_t n = 0; n < nodes; ++n)
    if (d.has_local[static_cast<std::size_t>(n)]) d.down_node.push_back(n);
  for (const std::int32_t leaf : tree.leaves)
    if (d.has_local[static_cast<std::size_t>(leaf)]) d.l2p_leaf.push_back(leaf);
  // The p2p tasks, longest class first (p2p_cost_class), each class in tree.leaves' order.
  std::vector<int> p2p_class(tree.leaves.size());
  for (std::size_t i = 0; i < tree.leaves.size(); ++i) {
    const auto l = static_cast<std::size_t>(tree.leaves[i]);
    std::int64_t source_points = 0;
    for (std::int32_t k = lists.p2p_offset[l]; k < lists.p2p_offset[l + 1]; ++k)
      source_points += tree.point_count[static_cast<std::size_t>(lists.p2p_source[static_cast<std::size_t>(k)])];
    const std::int32_t parts = p2p_parts(tree.point_count[l], source_points, shape.p2p_part_interactions);
    p2p_part_count[l] = parts;
    p2p_class[i] = p2p_cost_class(p2p_part_cost(tree.point_count[l], source_points, parts));
  }
  std::vector<std::size_t> p2p_order(tree.leaves.size());
  std::iota(p2p_order.begin(), p2p_order.end(), std::size_t{0});
  std::stable_sort(p2p_order.begin(), p2p_order.end(), [&](std::size_t a, std::size_t b) { return p2p_class[a] > p2p_class[b]; });
  for (const std::size_t i : p2p_order) {
    const std::int32_t leaf = tree.leaves[i];
    const auto l = static_cast<std::size_t>(leaf);
    const std::int32_t points = tree.point_count[l], parts = p2p_part_count[l];
    for (std::int32_t q = 0; q < parts; ++q) {
      d.p2p_leaf.push_back(leaf);
      d.p2p_point.push_back(tree.point_begin[l] + p2p_part_begin(points, parts, q));
    }
  }

  // Task ids are int32 (canopy::task_id): refuse a DAG with more tasks than that, rather than
  // wrap the ranges below.
  const std::int64_t task_count = static_cast<std::int64_t>(nodes) + static_cast<std::int64_t>(d.m2l_target.size()) +
                                  static_cast<std::int64_t>(d.down_node.size()) + static_cast<std::int64_t>(d.l2p_leaf.size()) +
                                  static_cast<std::int64_t>(d.p2p_leaf.size());
  if (task_count > std::numeric_limits<std::int32_t>::max())
    throw std::length_error("fmm::build_task_dag: " + std::to_string(task_count) + " tasks, more than task ids hold (2^31 - 1)");
  task_ranges& r = d.ranges;
  r.m2l_begin = nodes;
  r.down_begin = r.m2l_begin + static_cast<std::int32_t>(d.m2l_target.size());
  r.l2p_begin = r.down_begin + static_cast<std::int32_t>(d.down_node.size());
  r.p2p_begin = r.l2p_begin + static_cast<std::int32_t>(d.l2p_leaf.size());
  r.end = r.p2p_begin + static_cast<std::int32_t>(d.p2p_leaf.size());
  for (std::size_t i = 0; i < d.m2l_target.size(); ++i)
    m2l_task[static_cast<std::size_t>(d.m2l_target[i])] = r.m2l_begin + static_cast<std::int32_t>(i);
  for (std::size_t i = 0; i < d.down_node.size(); ++i)
    down_task[static_cast<std::size_t>(d.down_node[i])] = r.down_begin + static_cast<std::int32_t>(i);
  for (std::size_t i = d.p2p_leaf.size(); i-- > 0;)  // each leaf's first part
    p2p_task[static_cast<std::size_t>(d.p2p_leaf[i])] = r.p2p_begin + static_cast<std::int32_t>(i);

  std::vector<std::pair<task_id, task_id>> edges;  // (a, b): b waits for a
  edges.reserve(n_size + lists.m2l_source.size() + 2 * d.down_node.size() + d.l2p_leaf.size() + d.p2p_leaf.size());
  for (std::int32_t n = 1; n < nodes; ++n) edges.emplace_back(n, tree.parent[static_cast<std::size_t>(n)]);
  std::vector<std::int32_t> waits;  // one target's waited-for nodes, each once
  for (std::size_t i = 0; i < d.m2l_target.size(); ++i) {
    const auto t = static_cast<std::size_t>(d.m2l_target[i]);
    waits.clear();
    for (std::int32_t k = lists.m2l_offset[t]; k < lists.m2l_offset[t + 1]; ++k)
      waits.push_back(m2l_wait_node(tree.parent.data(), lists.m2l_source[static_cast<std::size_t>(k)], shape.m2l_wait_levels));
    std::sort(waits.begin(), waits.end());
    waits.erase(std::unique(waits.begin(), waits.end()), waits.end());
    for (const std::int32_t w : waits) edges.emplace_back(w, r.m2l_begin + static_cast<std::int32_t>(i));
  }
  for (const std::int32_t n : d.down_node) {
    const auto i = static_cast<std::size_t>(n);
    if (m2l_task[i] >= 0) edges.emplace_back(m2l_task[i], down_task[i]);
    const std::int32_t p = tree.parent[i];
    if (p >= 0 && down_task[static_cast<std::size_t>(p)] >= 0) edges.emplace_back(down_task[static_cast<std::size_t>(p)], down_task[i]);
  }
  for (std::size_t i = 0; i < d.l2p_leaf.size(); ++i) {
    const auto leaf = static_cast<std::size_t>(d.l2p_leaf[i]);
    const task_id l2p = r.l2p_begin + static_cast<std::int32_t>(i);
    edges.emplace_back(down_task[leaf], l2p);
    for (std::int32_t q = 0; q < p2p_part_count[leaf]; ++q) edges.emplace_back(p2p_task[leaf] + q, l2p);
  }
  d.graph = canopy::task_graph::from_edges(r.end, edges);

  // The baseline's level lists.
  const int levels = tree.depth + 1;
  d.internal_level_offset.assign(static_cast<std::size_t>(levels) + 1, 0);
  d.down_level_offset.assign(static_cast<std::size_t>(levels) + 1, 0);
  for (int level = 0; level < levels; ++level) {
    for (std::int32_t n = tree.level_offset[static_cast<std::size_t>(level)]; n < tree.level_offset[static_cast<std::size_t>(level) + 1]; ++n)
      if (!tree.is_leaf(n)) d.internal_node.push_back(n);
    d.internal_level_offset[static_cast<std::size_t>(level) + 1] = static_cast<std::int32_t>(d.internal_node.size());
  }
  std::size_t k = 0;
  for (int level = 0; level < levels; ++level) {
    while (k < d.down_node.size() && d.down_node[k] < tree.level_offset[static_cast<std::size_t>(level) + 1]) ++k;
    d.down_level_offset[static_cast<std::size_t>(level) + 1] = static_cast<std::int32_t>(k);
  }
  return d;
}

}  // namespace canopy::fmm
