// SPDX-License-Identifier: Apache-2.0
// The FMM as one task DAG (canopy/fmm/task_dag.hpp, task_ops.hpp) on the CPU: every task's
// predecessors are exactly the ones the header specifies, the graph is acyclic with the p2p tasks
// and the leaves' up tasks as its only sources; a serial run in a topological order and runs of
// the CPU scheduler (several workers, so in many orders) give bit-identical fields, equal to
// evaluate<T, P> up to the rounding of a different summation order. The GPU runs the same DAG
// (tests/gpu/fmm).
#include <canopy/cpu_scheduler.hpp>
#include <canopy/fmm/evaluate.hpp>
#include <canopy/fmm/task_dag.hpp>
#include <canopy/fmm/task_ops.hpp>
#include <canopy/trees/generators.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <set>
#include <string>
#include <vector>

#include "fmm_test_support.hpp"

namespace {

namespace cf = canopy::fmm;
namespace ct = canopy::trees;

struct problem {
  ct::octree tree;
  std::vector<cf::cell_geometry> geometry;
  cf::interaction_lists lists;
  cf::task_dag dag;
  int wait_levels = 0;  // the dag's dag_shape::m2l_wait_levels
  std::int64_t part_interactions = cf::dag_shape{}.p2p_part_interactions;  // and its p2p_part_interactions
};

problem make_problem(std::vector<ct::point> points, int max_leaf, double theta, int wait_levels = 0,
                     std::int64_t p2p_part_interactions = cf::dag_shape{}.p2p_part_interactions) {
  problem p;
  p.tree = ct::build_octree(points, {max_leaf, 21});
  p.geometry = cf::compute_cell_geometry(p.tree);
  p.lists = cf::build_interaction_lists(p.tree, p.geometry, theta);
  p.wait_levels = wait_levels;
  p.part_interactions = p2p_part_interactions;
  p.dag = cf::build_task_dag(p.tree, p.lists, cf::dag_shape{wait_levels, p2p_part_interactions});
  return p;
}

// The predecessors of every task as the header of task_dag.hpp specifies them, from the tree and
// the lists alone.
std::vector<std::set<canopy::task_id>> expected_predecessors(const problem& p) {
  const cf::task_dag& d = p.dag;
  const ct::octree& t = p.tree;
  std::vector<std::set<canopy::task_id>> pred(static_cast<std::size_t>(d.task_count()));
  const auto task_of = [](const std::vector<std::int32_t>& nodes, std::int32_t begin, std::int32_t n) -> canopy::task_id {
    const auto it = std::find(nodes.begin(), nodes.end(), n);
    return it == nodes.end() ? canopy::no_task : begin + static_cast<std::int32_t>(it - nodes.begin());
  };
  for (std::int32_t n = 0; n < t.node_count(); ++n)
    for (std::int32_t c = t.first_child[static_cast<std::size_t>(n)]; c >= 0 && c < t.first_child[static_cast<std::size_t>(n)] + t.child_count[static_cast<std::size_t>(n)]; ++c)
      pred[static_cast<std::size_t>(n)].insert(c);
  for (std::size_t i = 0; i < d.m2l_target.size(); ++i) {
    const auto n = static_cast<std::size_t>(d.m2l_target[i]);
    for (std::int32_t k = p.lists.m2l_offset[n]; k < p.lists.m2l_offset[n + 1]; ++k) {
      // The source, or its ancestor wait_levels up (the root at most).
      std::int32_t w = p.lists.m2l_source[static_cast<std::size_t>(k)];
      for (int up = 0; up < p.wait_levels && w != 0; ++up) w = t.parent[static_cast<std::size_t>(w)];
      pred[static_cast<std::size_t>(d.ranges.m2l_begin) + i].insert(w);
    }
  }
  for (std::size_t i = 0; i < d.down_node.size(); ++i) {
    const std::int32_t n = d.down_node[i];
    auto& s = pred[static_cast<std::size_t>(d.ranges.down_begin) + i];
    const canopy::task_id m2l = task_of(d.m2l_target, d.ranges.m2l_begin, n);
    if (m2l != canopy::no_task) s.insert(m2l);
    const std::int32_t parent = t.parent[static_cast<std::size_t>(n)];
    const canopy::task_id up = parent < 0 ? canopy::no_task : task_of(d.down_node, d.ranges.down_begin, parent);
    if (up != canopy::no_task) s.insert(up);
    EXPECT_TRUE(m2l != canopy::no_task || up != canopy::no_task) << "down task of node " << n << " has no reason to exist";
  }
  for (std::size_t i = 0; i < d.l2p_leaf.size(); ++i) {
    auto& s = pred[static_cast<std::size_t>(d.ranges.l2p_begin) + i];
    s.insert(task_of(d.down_node, d.ranges.down_begin, d.l2p_leaf[i]));
    for (std::size_t k = 0; k < d.p2p_leaf.size(); ++k)  // every p2p part of the leaf
      if (d.p2p_leaf[k] == d.l2p_leaf[i]) s.insert(d.ranges.p2p_begin + static_cast<std::int32_t>(k));
  }
  return pred;
}

void check_structure(const problem& p) {
  const cf::task_dag& d = p.dag;
  const ct::octree& t = p.tree;
  ASSERT_EQ(d.ranges.m2l_begin, t.node_count());
  ASSERT_EQ(d.graph.task_count(), d.task_count());
  // The p2p tasks: each leaf's parts adjacent, as many as p2p_parts says, cutting its points into
  // consecutive ranges that cover them all; the leaves by class of their parts' cost (the bit
  // width of p2p_part_cost), the longest first, each class in tree.leaves' order.
  ASSERT_EQ(d.p2p_point.size(), d.p2p_leaf.size());
  ASSERT_EQ(d.ranges.end - d.ranges.p2p_begin, static_cast<std::int32_t>(d.p2p_leaf.size()));
  {
    std::vector<std::int64_t> source_points_of(t.leaves.size()), cost(t.leaves.size());
    std::vector<std::int32_t> parts_of(t.leaves.size());
    for (std::size_t i = 0; i < t.leaves.size(); ++i) {
      const auto l = static_cast<std::size_t>(t.leaves[i]);
      for (std::int32_t e = p.lists.p2p_offset[l]; e < p.lists.p2p_offset[l + 1]; ++e)
        source_points_of[i] += t.point_count[static_cast<std::size_t>(p.lists.p2p_source[static_cast<std::size_t>(e)])];
      parts_of[i] = cf::p2p_parts(t.point_count[l], source_points_of[i], p.part_interactions);
      // The largest part's points times the sources' points, from the parts' own bounds.
      std::int32_t largest = 0;
      for (std::int32_t q = 0; q < parts_of[i]; ++q)
        largest = std::max(largest, cf::p2p_part_begin(t.point_count[l], parts_of[i], q + 1) -
                                        cf::p2p_part_begin(t.point_count[l], parts_of[i], q));
      cost[i] = std::int64_t{largest} * source_points_of[i];
      EXPECT_EQ(cost[i], cf::p2p_part_cost(t.point_count[l], source_points_of[i], parts_of[i])) << "leaf " << t.leaves[i];
    }
    std::vector<std::size_t> order(t.leaves.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    const auto width = [](std::int64_t c) { return static_cast<int>(std::bit_width(static_cast<std::uint64_t>(c))); };
    for (const std::int64_t c : {std::int64_t{0}, std::int64_t{1}, std::int64_t{16383}, std::int64_t{16384}})
      EXPECT_EQ(cf::p2p_cost_class(c), width(c)) << c;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return width(cost[a]) > width(cost[b]); });
    std::size_t k = 0;
    for (const std::size_t i : order) {
      const std::int32_t leaf = t.leaves[i];
      const auto l = static_cast<std::size_t>(leaf);
      const std::int32_t parts = parts_of[i];
      std::int32_t next = t.point_begin[l];
      for (std::int32_t q = 0; q < parts; ++q, ++k) {
        ASSERT_LT(k, d.p2p_leaf.size());
        EXPECT_EQ(d.p2p_leaf[k], leaf);
        EXPECT_EQ(d.p2p_point[k], next) << "leaf " << leaf << " part " << q;
        next = t.point_begin[l] + cf::p2p_part_begin(t.point_count[l], parts, q + 1);
        if (t.point_count[l] > 1) {
          EXPECT_LT(d.p2p_point[k], next) << "an empty part of leaf " << leaf;
        }
      }
    }
    EXPECT_EQ(k, d.p2p_leaf.size());
  }
  for (std::int32_t n = 0; n < t.node_count(); ++n) {
    const auto i = static_cast<std::size_t>(n);
    const bool m2l = p.lists.m2l_offset[i + 1] > p.lists.m2l_offset[i];
    EXPECT_EQ(std::count(d.m2l_target.begin(), d.m2l_target.end(), n), m2l ? 1 : 0) << "node " << n;
    const bool local = m2l || (t.parent[i] >= 0 && d.has_local[static_cast<std::size_t>(t.parent[i])]);
    EXPECT_EQ(d.has_local[i] != 0, local) << "node " << n;
    EXPECT_EQ(std::count(d.down_node.begin(), d.down_node.end(), n), local ? 1 : 0) << "node " << n;
  }
  for (const std::int32_t leaf : t.leaves)
    EXPECT_EQ(std::count(d.l2p_leaf.begin(), d.l2p_leaf.end(), leaf), d.has_local[static_cast<std::size_t>(leaf)] ? 1 : 0);

  // Predecessors exactly as specified.
  const auto expected = expected_predecessors(p);
  const auto& off = d.graph.pred_offsets();
  const auto& pred = d.graph.predecessors();
  for (canopy::task_id k = 0; k < d.task_count(); ++k) {
    const std::set<canopy::task_id> got(pred.begin() + off[static_cast<std::size_t>(k)], pred.begin() + off[static_cast<std::size_t>(k) + 1]);
    EXPECT_EQ(got.size(), static_cast<std::size_t>(off[static_cast<std::size_t>(k) + 1] - off[static_cast<std::size_t>(k)])) << "task " << k;
    EXPECT_EQ(got, expected[static_cast<std::size_t>(k)]) << "task " << k << " (kind " << static_cast<int>(d.ranges.kind_of(k)) << ")";
  }
  // Sources: the leaves' up tasks and every p2p task, in id order (the critical path first).
  std::vector<canopy::task_id> sources;
  for (std::int32_t n = 0; n < t.node_count(); ++n)
    if (t.is_leaf(n)) sources.push_back(n);
  for (std::int32_t k = d.ranges.p2p_begin; k < d.ranges.end; ++k) sources.push_back(k);
  EXPECT_EQ(d.graph.sources(), sources);

  // Acyclic: Kahn's algorithm reaches every task (from_edges checks it too; this does not trust it).
  std::vector<std::int32_t> count(d.graph.dependency_count());
  std::deque<canopy::task_id> ready(sources.begin(), sources.end());
  std::int32_t reached = 0;
  while (!ready.empty()) {
    const canopy::task_id k = ready.front();
    ready.pop_front();
    ++reached;
    const auto& so = d.graph.succ_offsets();
    for (std::int32_t e = so[static_cast<std::size_t>(k)]; e < so[static_cast<std::size_t>(k) + 1]; ++e) {
      const canopy::task_id s = d.graph.successors()[static_cast<std::size_t>(e)];
      if (--count[static_cast<std::size_t>(s)] == 0) ready.push_back(s);
    }
  }
  EXPECT_EQ(reached, d.task_count());

  // The level lists of the baseline: every internal node once, by level; down nodes by level.
  ASSERT_EQ(d.internal_level_offset.size(), static_cast<std::size_t>(t.depth) + 2);
  for (int level = 0; level <= t.depth; ++level) {
    for (std::int32_t k = d.internal_level_offset[static_cast<std::size_t>(level)]; k < d.internal_level_offset[static_cast<std::size_t>(level) + 1]; ++k) {
      const std::int32_t n = d.internal_node[static_cast<std::size_t>(k)];
      EXPECT_FALSE(t.is_leaf(n));
      EXPECT_EQ(t.level[static_cast<std::size_t>(n)], level);
    }
    for (std::int32_t k = d.down_level_offset[static_cast<std::size_t>(level)]; k < d.down_level_offset[static_cast<std::size_t>(level) + 1]; ++k)
      EXPECT_EQ(t.level[static_cast<std::size_t>(d.down_node[static_cast<std::size_t>(k)])], level);
  }
  EXPECT_EQ(static_cast<std::size_t>(d.internal_level_offset.back()), static_cast<std::size_t>(t.node_count()) - t.leaves.size());
  EXPECT_EQ(static_cast<std::size_t>(d.down_level_offset.back()), d.down_node.size());
}

// A serial run in Kahn's order over the predecessor lists (independent of the scheduler).
template <class T, int P>
std::vector<cf::field<T>> run_serial(const problem& p) {
  cf::host_task_state<T, P> state(p.tree, p.geometry, p.lists, p.dag, 1e-4);
  const auto ops = state.ops();
  std::vector<std::int32_t> count(p.dag.graph.dependency_count());
  std::deque<canopy::task_id> ready(p.dag.graph.sources().begin(), p.dag.graph.sources().end());
  while (!ready.empty()) {
    const canopy::task_id k = ready.front();
    ready.pop_front();
    ops(k);
    const auto& so = p.dag.graph.succ_offsets();
    for (std::int32_t e = so[static_cast<std::size_t>(k)]; e < so[static_cast<std::size_t>(k) + 1]; ++e) {
      const canopy::task_id s = p.dag.graph.successors()[static_cast<std::size_t>(e)];
      if (--count[static_cast<std::size_t>(s)] == 0) ready.push_back(s);
    }
  }
  return state.fields;
}

template <class T>
bool same_bits(const std::vector<cf::field<T>>& a, const std::vector<cf::field<T>>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(cf::field<T>)) == 0);
}

// Largest |a - b| / (|b| + floor) over the points, for the acceleration and the potential. The
// floor (1e-3 of the median |a| or |phi|) keeps a point whose pulls nearly cancel from dominating.
template <class T>
double largest_difference(const std::vector<cf::field<T>>& a, const std::vector<cf::field<T>>& b) {
  std::vector<double> mags_a, mags_phi;
  for (const auto& f : b) {
    mags_a.push_back(std::sqrt(double(f.ax) * f.ax + double(f.ay) * f.ay + double(f.az) * f.az));
    mags_phi.push_back(std::abs(double(f.phi)));
  }
  const double floor_a = 1e-3 * fmm_test::percentile(mags_a, 50), floor_phi = 1e-3 * fmm_test::percentile(mags_phi, 50);
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double ex = double(a[i].ax) - b[i].ax, ey = double(a[i].ay) - b[i].ay, ez = double(a[i].az) - b[i].az;
    worst = std::max(worst, std::sqrt(ex * ex + ey * ey + ez * ez) / (mags_a[i] + floor_a));
    worst = std::max(worst, std::abs(double(a[i].phi) - b[i].phi) / (mags_phi[i] + floor_phi));
    if (!std::isfinite(double(a[i].ax) + a[i].ay + a[i].az + a[i].phi)) return INFINITY;
  }
  return worst;
}

template <class T, int P>
void check_runs(const problem& p, double tolerance) {
  const std::vector<cf::field<T>> serial = run_serial<T, P>(p);
  const std::vector<cf::field<T>> reference = cf::evaluate<T, P>(p.tree, p.geometry, p.lists, 1e-4);
  ASSERT_EQ(serial.size(), p.tree.points.size());
  const double diff = largest_difference(serial, reference);
  EXPECT_LE(diff, tolerance) << "serial DAG run against evaluate";
  std::printf("%s p %d: %zu points, %d tasks, largest difference to evaluate %.2e\n", sizeof(T) == 4 ? "float " : "double", P,
              p.tree.points.size(), p.dag.task_count(), diff);
  for (const int workers : {1, 4}) {
    canopy::scheduler_options o;
    o.blocks = workers;
    canopy::cpu_scheduler sched(p.dag.graph, o);
    cf::host_task_state<T, P> state(p.tree, p.geometry, p.lists, p.dag, 1e-4);
    for (int run = 0; run < 2; ++run) {  // the second run overwrites the first's results in place
      const canopy::run_result r = sched.run(state.ops());
      ASSERT_TRUE(r.ok()) << canopy::to_string(r.code) << ": " << r.message;
      EXPECT_TRUE(same_bits(state.fields, serial)) << workers << " workers, run " << run;
    }
  }
}

TEST(FmmTaskDag, PlummerPredecessorsAreAsSpecified) {
  for (const double theta : {0.3, 0.5, 0.7}) {
    SCOPED_TRACE(theta);
    check_structure(make_problem(ct::generate_plummer(4000, 11), 32, theta));
  }
  check_structure(make_problem(ct::generate_uniform(3000, 12), 8, 0.5));
}

TEST(FmmTaskDag, SchedulerRunsEqualTheSerialRunAndEvaluate) {
  // Only the order of additions differs from evaluate (l2p's far field is added after the near
  // field), so only rounding remains: measured up to 7e-15 in double and 4e-6 in float (3,000
  // Plummer points, p 4 and 8); the bounds are about 5x that.
  const problem p = make_problem(ct::generate_plummer(2000, 21), 16, 0.5);
  check_runs<double, 4>(p, 5e-14);
  check_runs<float, 4>(p, 2e-5);
  check_runs<float, 8>(p, 2e-5);
  const problem u = make_problem(ct::generate_uniform(2000, 22), 8, 0.7);
  check_runs<double, 6>(u, 5e-14);
  check_runs<float, 6>(u, 2e-5);
}

// m2l tasks that wait for their sources' ancestors (dag_shape): each waited-for node once, fewer
// edges, the same fields bit for bit (the bodies and their order of sums do not change).
TEST(FmmTaskDag, CoarserM2lWaitsGiveFewerEdgesAndTheSameFields) {
  const problem fine = make_problem(ct::generate_plummer(3000, 41), 16, 0.5);
  const auto reference = run_serial<float, 6>(fine);
  std::size_t edges = fine.dag.graph.successors().size();
  for (const int k : {1, 2, 3, 30}) {
    SCOPED_TRACE(k);
    const problem p = make_problem(ct::generate_plummer(3000, 41), 16, 0.5, k);
    check_structure(p);
    if (k == 1) EXPECT_LT(p.dag.graph.successors().size(), edges);
    else EXPECT_LE(p.dag.graph.successors().size(), edges);
    edges = p.dag.graph.successors().size();
    EXPECT_TRUE(same_bits(run_serial<float, 6>(p), reference));
    if (k == 2) check_runs<float, 6>(p, 2e-5);  // the scheduler in many orders (one shape: the test's time)
  }
  const problem p = make_problem(ct::generate_plummer(100, 1), 8, 0.5);
  EXPECT_THROW(cf::build_task_dag(p.tree, p.lists, cf::dag_shape{-1}), std::invalid_argument);
}

// Leaves' P2P cut into parts (dag_shape::p2p_part_interactions): more p2p tasks, each l2p waiting
// for all of its leaf's, the same fields bit for bit (every point's sum runs over the same sources
// in the same order). 1: every leaf of n > 1 points in n parts of one point.
TEST(FmmTaskDag, P2pPartsGiveTheSameFields) {
  const problem whole = make_problem(ct::generate_plummer(3000, 51), 32, 0.5, 0, 0);
  check_structure(whole);
  EXPECT_TRUE(std::is_permutation(whole.dag.p2p_leaf.begin(), whole.dag.p2p_leaf.end(), whole.tree.leaves.begin(),
                                  whole.tree.leaves.end()));
  const auto reference = run_serial<float, 5>(whole);
  for (const std::int64_t part : {std::int64_t{16384}, std::int64_t{2000}, std::int64_t{1}}) {
    SCOPED_TRACE(part);
    const problem p = make_problem(ct::generate_plummer(3000, 51), 32, 0.5, 0, part);
    check_structure(p);
    EXPECT_GT(p.dag.p2p_leaf.size(), whole.dag.p2p_leaf.size());
    if (part == 1) {
      std::size_t expected = 0;  // a part a point, one for an empty leaf
      for (const std::int32_t leaf : p.tree.leaves)
        expected += static_cast<std::size_t>(std::max(p.tree.point_count[static_cast<std::size_t>(leaf)], 1));
      EXPECT_EQ(p.dag.p2p_leaf.size(), expected);
    }
    EXPECT_TRUE(same_bits(run_serial<float, 5>(p), reference));
    if (part == 2000) check_runs<float, 5>(p, 2e-5);  // the scheduler in many orders
  }
  const problem p = make_problem(ct::generate_plummer(100, 1), 8, 0.5);
  EXPECT_THROW(cf::build_task_dag(p.tree, p.lists, cf::dag_shape{0, -1}), std::invalid_argument);
}

TEST(FmmTaskDag, DegenerateTrees) {
  // Empty: one empty leaf root, its up task and its p2p task, no field.
  const problem e = make_problem({}, 32, 0.5);
  check_structure(e);
  EXPECT_EQ(e.dag.task_count(), 2);
  EXPECT_TRUE((run_serial<double, 4>(e).empty()));
  // One leaf: no far field at all, no down or l2p task; the p2p is the exact sum.
  const problem one = make_problem(ct::generate_uniform(20, 3), 32, 0.5);
  check_structure(one);
  EXPECT_EQ(one.dag.task_count(), 2);
  EXPECT_TRUE(one.dag.down_node.empty());
  check_runs<double, 4>(one, 5e-14);
  // Coincident points in one deep leaf beside others, and a complete octree.
  std::vector<ct::point> pts(50, ct::point{0.3f, 0.3f, 0.3f, 0.01f});
  const auto more = ct::generate_uniform(500, 6);
  pts.insert(pts.end(), more.begin(), more.end());
  const problem clustered = make_problem(pts, 8, 0.5);
  check_structure(clustered);
  check_runs<double, 4>(clustered, 5e-14);
  problem lattice;
  lattice.tree = ct::build_complete_octree(3, 4, 5);
  lattice.geometry = cf::compute_cell_geometry(lattice.tree);
  lattice.lists = cf::build_interaction_lists(lattice.tree, lattice.geometry, 0.5);
  lattice.dag = cf::build_task_dag(lattice.tree, lattice.lists);
  check_structure(lattice);
  check_runs<float, 4>(lattice, 2e-5);
}

// evaluate_points (how the GPU benchmark checks 1M points on a sample) is evaluate, bit for bit,
// at the points it is given.
TEST(FmmEvaluatePoints, EqualsEvaluateBitForBitOnASample) {
  const problem p = make_problem(ct::generate_plummer(3000, 31), 16, 0.5);
  const auto all = cf::evaluate<float, 6>(p.tree, p.geometry, p.lists, 1e-4);
  const std::vector<std::int32_t> which{0, 1, 17, 1500, 2998, 2999, 17};
  const auto some = cf::evaluate_points<float, 6>(p.tree, p.geometry, p.lists, 1e-4, which);
  ASSERT_EQ(some.size(), which.size());
  for (std::size_t k = 0; k < which.size(); ++k)
    EXPECT_EQ(std::memcmp(&some[k], &all[static_cast<std::size_t>(which[k])], sizeof(some[k])), 0) << "point " << which[k];
  EXPECT_TRUE((cf::evaluate_points<float, 6>(p.tree, p.geometry, p.lists, 1e-4, {}).empty()));
  const std::vector<std::int32_t> outside{3000};
  EXPECT_THROW((cf::evaluate_points<float, 6>(p.tree, p.geometry, p.lists, 1e-4, outside)), std::invalid_argument);
}

TEST(FmmTaskDag, RejectsForeignLists) {
  const problem p = make_problem(ct::generate_uniform(100, 1), 8, 0.5);
  const ct::octree other = ct::build_octree(ct::generate_uniform(1000, 2), {8, 21});
  EXPECT_THROW(cf::build_task_dag(other, p.lists), std::invalid_argument);
}

}  // namespace
