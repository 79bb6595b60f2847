// SPDX-License-Identifier: Apache-2.0
// The octree upward pass with twig tasks: a *twig* is an internal node whose children are all
// leaves; its task computes the leaves' moments from their points (P2M) and merges them into the
// twig's (M2M) in registers, and writes all of them. An internal node with both leaf and internal
// children gets two tasks: a *leaf group* that computes its leaf children (a source, like a twig),
// and the node's own task, which merges all its children once the group and the internal children
// are done. Leaves are no tasks of their own (except a tree that is a single leaf).
//
// Why: with one task per node the bottom of a tree costs a task, a dependency arrival (a
// device-scope acq_rel atomic) and a re-read of each leaf's payload by its parent, for 128 bytes
// of points per leaf (8 points). A twig task moves 8 leaves' points in one go, skips 8 arrivals,
// and never reads the leaf payloads back. On a complete octree the graph has 8x fewer tasks and
// one dependent level less. On an adaptive tree many leaves have internal siblings: until
// 2026-11-25 each of those was a task of its own (23% of the tasks of a 16M-point Plummer tree,
// 16 lanes for about 10 points); a leaf group does all of a node's leaves in one task, as a
// source, so their points are still read at the start of the run. The results are the same
// moments up to rounding (a twig combines its leaves at once with group_combine, node tasks
// their children with group_merge), checked against the double reference like any other run.
//
//   const twig_graph tg = make_twig_graph(tree);                      // host, O(nodes)
//   canopy::device_buffer<twig_task> tasks(tg.tasks);                  // upload
//   twig_upward_ops<float, 2> ops{tasks.data(), {points, first_child, child_count, point_begin,
//                                                point_count, payload}};
//   scheduler.run(ops);                                                 // a scheduler over tg.graph
// (upward_runner.hpp does all of this for a tree, on either backend.)
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "canopy/config.hpp"
#include "canopy/task_graph.hpp"
#include "canopy/trees/multipole.hpp"
#include "canopy/trees/octree.hpp"
#include "canopy/trees/payload_policy.hpp"
#include "canopy/passes/upward_pass.hpp"

#if defined(__CUDACC__)
#include "canopy/lane_group.cuh"
#include "canopy/prefetch.cuh"
#include "canopy/passes/group_multipole.cuh"
#include "canopy/passes/group_payload.cuh"
#endif

namespace canopy::trees {

/// One task of the twig decomposition: its node (`entry`: the bitwise complement of the node,
/// ~node < 0, for a task that reads points: a twig, or a node's leaf group; the node itself for a
/// node's own merge, or a tree's single leaf), that node's children, and which of them the task
/// computes from their points, so that a task starts with one 16-byte load instead of a load of
/// its node followed by loads of the node's structure: one dependent L2 round trip less per level,
/// which is what a small tree's pass is made of (bench/RESULTS.md).
struct alignas(16) twig_task {
  std::int32_t entry;
  std::int32_t first_child;  // -1 for a leaf
  std::int32_t child_count;  // 0 for a leaf
  std::int32_t leaf_mask;    // bit c: this task computes leaf first_child + c (0 unless entry < 0)
  CANOPY_HD std::int32_t node() const { return entry < 0 ? ~entry : entry; }
  /// The task reads points: a twig or a leaf group.
  CANOPY_HD bool computes_leaves() const { return entry < 0; }
  /// All children are leaves: the task computes them and the node. A source.
  CANOPY_HD bool is_twig() const { return entry < 0 && leaf_mask == (1 << child_count) - 1; }
  /// Some children are leaves, some internal: the task computes the leaves only (the node's own
  /// task, its parent in the graph, merges them). A source.
  CANOPY_HD bool is_leaf_group() const { return entry < 0 && leaf_mask != (1 << child_count) - 1; }
};
static_assert(sizeof(twig_task) == 16 && std::is_trivially_copyable_v<twig_task>);

/// The task graph of the twig decomposition and, per task, what it computes.
struct twig_graph {
  task_graph graph;
  std::vector<twig_task> tasks;
  std::int32_t twig_count = 0;
};

/// Builds the twig decomposition of `tree`: a task for every internal node (in node order; a twig
/// computes its leaves too), followed by its leaf group's when it has both leaf and internal
/// children; the twigs and the leaf groups are the sources, in Morton order. A tree that is a
/// single leaf is one leaf task.
twig_graph make_twig_graph(const octree& tree);

/// Payloads of a twig task and its leaves on one thread (the CPU backend, the warp-master modes).
/// `Payload`: a payload policy, or float / double for the multipole payload (upward_pass.hpp).
template <class Payload>
CANOPY_HD void twig_task_serial(const point* points, const std::int32_t* first_child, const std::int32_t* child_count,
                                const std::int32_t* point_begin, const std::int32_t* point_count,
                                payload_value_t<Payload>* payload, std::int32_t entry,
                                const as_payload_policy_t<Payload>& policy = {}) {
  if (entry >= 0) {  // no leaf children (or the single leaf): exactly upward_ops' task
    upward_ops<Payload>{{points, first_child, child_count, point_begin, point_count, payload}, policy}(entry);
    return;
  }
  // A twig (its node written too) or a leaf group (the leaves only): the leaves it computes are
  // the children that are leaves.
  const std::int32_t node = ~entry, first = first_child[node], children = child_count[node];
  payload_value_t<Payload> acc = policy.identity();
  bool twig = true;
  for (std::int32_t c = first; c < first + children; ++c) {
    if (child_count[c] != 0) {
      twig = false;
      continue;
    }
    const payload_value_t<Payload> leaf = policy.leaf(c, points + point_begin[c], point_count[c]);
    payload[c] = leaf;
    policy.combine(acc, leaf, c, node);
  }
  if (twig) payload[node] = acc;
}

/// Ops for a scheduler over twig_graph::graph. `LeafLanes` lanes compute each leaf of a twig (about
/// four points per lane suits: trees::upward_lanes), so a task runs on 8 * LeafLanes lanes (at most
/// a warp: LeafLanes <= 4).
template <class Payload = float, int LeafLanes = 2>
struct twig_upward_ops {
  using policy_type = as_payload_policy_t<Payload>;
  using value_type = typename policy_type::value_type;
  static_assert(detail::checked_payload_policy<policy_type>());
  static_assert(LeafLanes == 1 || LeafLanes == 2 || LeafLanes == 4, "LeafLanes: 1, 2 or 4");
  static constexpr int group_size = 8 * LeafLanes;
  /// Twig graphs are trees: the kernel needs no DAG paths (canopy/detail/dependency.hpp).
  static constexpr bool tree_only = true;
  /// A twig moves 8 leaves' points, so a group takes more of them per batch than the scheduler's
  /// default of 4: fewer fetches per byte moved, and with the prefetch hints below the next
  /// tasks' points are on their way while these run (bench/RESULTS.md). It is an upper bound:
  /// capped at the group size (8 when LeafLanes is 1), and lowered by the run for trees with few
  /// twigs per block (run_batch_max).
  static constexpr int tasks_per_group = 16;

  const twig_task* tasks;
  upward_arrays<Payload> arrays;
  policy_type policy{};

  CANOPY_HD void operator()(task_id t) const {
    const upward_arrays<Payload>& a = arrays;
    twig_task_serial<Payload>(a.points, a.first_child, a.child_count, a.point_begin, a.point_count, a.payload,
                              tasks[t].entry, policy);
  }

#if defined(__CUDACC__)
  template <int G>
  __device__ void operator()(task_id t, const lane_group<G>& g) const {
    if constexpr (G < 8) {
      // One thread per task (the warp-master modes call with G = 1).
      if (g.rank == 0) (*this)(t);
    } else {
      using group_ops = group_payload<policy_type>;
      constexpr int L = G / 8;  // lanes per leaf of a twig
      const int4 task = __ldg(reinterpret_cast<const int4*>(tasks + t));  // entry, first child, child count, leaf mask
      const std::int32_t entry = task.x, first = task.y, children = task.z, leaf_mask = task.w;
      const float4* points = reinterpret_cast<const float4*>(arrays.points);  // 16-byte points, one load each
      value_type r;
      if (entry >= 0) {
        if (children == 0) {
          r = group_ops::leaf(policy, g, entry, points + __ldg(arrays.point_begin + entry), __ldg(arrays.point_count + entry),
                              load_points_ldg{});
        } else {
          // Children were written during this run by other SMs: read them through L2.
          r = group_ops::template children<G, 1>(policy, g, entry, arrays.payload, first, children);
        }
      } else {
        const std::int32_t node = ~entry;
        const int c = g.rank / L;  // the leaf this lane helps with
        r = group_ops::empty(policy);
        if (c < children && ((leaf_mask >> c) & 1)) {
          const lane_group<L> sub = lane_group<L>::here();
          r = group_ops::leaf(policy, sub, first + c, points + __ldg(arrays.point_begin + first + c),
                              __ldg(arrays.point_count + first + c), load_points_ldg{});
          group_ops::store(sub, arrays.payload + first + c, r);
        }
        if (leaf_mask != (1 << children) - 1) return;  // a leaf group: the node's task merges them
        // The twig's value from its leaves' at once (every lane ends with the same).
        group_ops::store(g, arrays.payload + node,
                         group_ops::template gather<L>(policy, g, node, arrays.payload, first, children, r));
        return;
      }
      group_ops::store(g, arrays.payload + entry, r);
    }
  }

  /// The scheduler's hints (canopy/prefetch.cuh); like operator(), for the tasks make_twig_graph
  /// makes. `structure`: the task's entry (one load) and, from it, the lines of a twig's or leaf's
  /// point ranges, into this SM's L1 (another internal node's entry already names its children:
  /// nothing more). `data`: the points of a twig or leaf (contiguous: a twig's leaves are
  /// consecutive nodes whose point ranges tile the twig's, by the octree's invariants) or the
  /// children's payloads, into L2. A leaf group gets no hints (its leaves' points are not one
  /// range).
  __device__ void prefetch(task_id t, prefetch_stage stage) const {
    const int4 task = __ldg(reinterpret_cast<const int4*>(tasks + t));
    const std::int32_t entry = task.x, first = task.y, children = task.z, leaf_mask = task.w;
    if (entry < 0 && leaf_mask != (1 << children) - 1) return;  // a leaf group: its points are not one range
    const bool points_task = children == 0 || entry < 0;
    const std::int32_t a = children == 0 ? entry : first, z = children == 0 ? entry : first + children - 1;
    if (stage == prefetch_stage::structure) {
      if (points_task) {
        prefetch_l1(arrays.point_begin + a, static_cast<std::uint32_t>(z - a + 1) * sizeof(std::int32_t));
        prefetch_l1(arrays.point_count + z, sizeof(std::int32_t));
      }
      return;
    }
    if (points_task) {
      const std::int32_t begin = __ldg(arrays.point_begin + a);
      const std::int32_t end = __ldg(arrays.point_begin + z) + __ldg(arrays.point_count + z);
      if (end > begin) prefetch_l2(arrays.points + begin, static_cast<std::uint32_t>(end - begin) * sizeof(point));
    } else {
      prefetch_l2(arrays.payload + first, static_cast<std::uint32_t>(children) * sizeof(value_type));
    }
  }
#endif
};
static_assert(std::is_trivially_copyable_v<twig_upward_ops<float>>);
static_assert(std::is_trivially_copyable_v<twig_upward_ops<double>>);

/// Host views over a host octree and a twig graph's tasks (the CPU backend), as host_upward_ops
/// is for node tasks.
template <class T>
twig_upward_ops<T> host_twig_upward_ops(const octree& tree, const std::vector<twig_task>& tasks, multipole<T>* payload) {
  return twig_upward_ops<T>{tasks.data(),           tree.points.data(),      tree.first_child.data(),
                            tree.child_count.data(), tree.point_begin.data(), tree.point_count.data(),
                            payload};
}
/// The same for any payload policy and its state.
template <payload_policy Policy>
twig_upward_ops<Policy> host_twig_upward_ops(const octree& tree, const std::vector<twig_task>& tasks,
                                             typename Policy::value_type* payload, const Policy& policy) {
  return twig_upward_ops<Policy>{tasks.data(),
                                 {tree.points.data(), tree.first_child.data(), tree.child_count.data(),
                                  tree.point_begin.data(), tree.point_count.data(), payload},
                                 policy};
}

/// Calls f(std::integral_constant<int, L>{}) with the lanes per leaf of a twig for a tree whose
/// upward_lanes() is `lanes` (1, 2, 4; 8 is capped to 4 so that a twig fits a warp).
template <class F>
decltype(auto) with_twig_lanes(int lanes, F&& f) {
  switch (lanes) {
    case 1: return f(std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, 2>{});
    default: return f(std::integral_constant<int, 4>{});
  }
}

}  // namespace canopy::trees
