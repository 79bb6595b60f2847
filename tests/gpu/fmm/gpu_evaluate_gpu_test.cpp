// SPDX-License-Identifier: Apache-2.0
// The FMM on the GPU (canopy/fmm/gpu_evaluate.hpp): the task DAG in one persistent kernel and the
// phase-by-phase CUDA graph, each against the CPU evaluate<float, P> with the same lists (float
// rounding only) and against direct summation (the accuracy the CPU version has), orders 4, 6 and
// 8, Plummer and uniform points, every scheduler mode, repeated runs, and the degenerate trees.
// Label gpu; skipped without a device.
#include <canopy/fmm/evaluate.hpp>
#include <canopy/fmm/gpu_evaluate.hpp>
#include <canopy/mode.hpp>
#include <canopy/trees/generators.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "fmm_test_support.hpp"
#include "gpu_test.hpp"

namespace {

namespace cf = canopy::fmm;
namespace ct = canopy::trees;
using fmm_test::percentile;

// The GPU sums in other orders than the CPU (the lanes of a warp split an M2L list, P2M's points,
// and the shuffles add the partial sums pairwise) and contracts to FMA, so the two differ by
// float rounding. The CPU task DAG run differs from evaluate by at most 4e-6 in the same measure
// (tests/cpu/fmm/task_dag_test.cpp); 1e-4 leaves room for the GPU's other orders. Relative to
// |a| (or |phi|) plus 1e-3 of the median, so a point whose pulls nearly cancel does not decide.
constexpr double rounding_bound = 1e-4;

struct problem {
  ct::octree tree;
  std::vector<cf::cell_geometry> geometry;
  cf::interaction_lists lists;
};

problem make_problem(const std::vector<ct::point>& points, int max_leaf, double theta) {
  problem p;
  p.tree = ct::build_octree(points, {max_leaf, 21});
  p.geometry = cf::compute_cell_geometry(p.tree);
  p.lists = cf::build_interaction_lists(p.tree, p.geometry, theta);
  return p;
}

double largest_difference(const std::vector<cf::field<float>>& a, const std::vector<cf::field<float>>& b) {
  if (a.size() != b.size()) return INFINITY;
  std::vector<double> mags_a, mags_phi;
  for (const auto& f : b) {
    mags_a.push_back(std::sqrt(double(f.ax) * f.ax + double(f.ay) * f.ay + double(f.az) * f.az));
    mags_phi.push_back(std::abs(double(f.phi)));
  }
  const double floor_a = 1e-3 * percentile(mags_a, 50), floor_phi = 1e-3 * percentile(mags_phi, 50);
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(double(a[i].ax) + a[i].ay + a[i].az + a[i].phi)) return INFINITY;
    const double ex = double(a[i].ax) - b[i].ax, ey = double(a[i].ay) - b[i].ay, ez = double(a[i].az) - b[i].az;
    worst = std::max(worst, std::sqrt(ex * ex + ey * ey + ez * ez) / (mags_a[i] + floor_a));
    worst = std::max(worst, std::abs(double(a[i].phi) - b[i].phi) / (mags_phi[i] + floor_phi));
  }
  return worst;
}

bool same_bits(const std::vector<cf::field<float>>& a, const std::vector<cf::field<float>>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])) == 0);
}

struct accuracy {
  double acc50, acc99;
};
accuracy accuracy_against(const std::vector<cf::field<float>>& got, const std::vector<cf::field<double>>& exact) {
  std::vector<double> acc;
  for (std::size_t i = 0; i < got.size(); ++i) acc.push_back(fmm_test::acceleration_error(got[i], exact[i]));
  return {percentile(acc, 50), percentile(acc, 99)};
}

class fmm_gpu : public canopy::test::gpu_test {};

// One order: the DAG (twice: the second run overwrites the first in place) and both level graphs,
// each from poisoned memory, each against the CPU; all of them bit-identical to one another, since
// every task body sums in a fixed order whatever the schedule.
void check_order(const problem& p, int order, double eps2, const std::vector<cf::field<double>>& exact) {
  SCOPED_TRACE("order " + std::to_string(order));
  const std::vector<cf::field<float>> reference = [&] {
    switch (order) {
      case 4: return cf::evaluate<float, 4>(p.tree, p.geometry, p.lists, eps2);
      case 5: return cf::evaluate<float, 5>(p.tree, p.geometry, p.lists, eps2);
      case 6: return cf::evaluate<float, 6>(p.tree, p.geometry, p.lists, eps2);
      default: return cf::evaluate<float, 8>(p.tree, p.geometry, p.lists, eps2);
    }
  }();
  cf::gpu_evaluator fmm(order, p.tree, p.geometry, p.lists, eps2);
  fmm.poison();
  fmm.enqueue_dag();
  CANOPY_TEST_CUDA(cudaDeviceSynchronize());
  const canopy::run_result r = fmm.last_dag_result();
  ASSERT_TRUE(r.ok()) << canopy::to_string(r.code) << ": " << r.message;
  const std::vector<cf::field<float>> dag = fmm.fields();
  const double d_dag = largest_difference(dag, reference);
  EXPECT_LE(d_dag, rounding_bound) << "task DAG against evaluate<float, " << order << ">";

  fmm.enqueue_dag();
  CANOPY_TEST_CUDA(cudaDeviceSynchronize());
  ASSERT_TRUE(fmm.last_dag_result().ok());
  EXPECT_TRUE(same_bits(fmm.fields(), dag)) << "second DAG run";

  // The urgent tasks (set_urgent_height) change the order tasks start in, never the fields: every
  // m2l and down task urgent (0), those of internal nodes (1), of nodes two levels up (2), and none
  // (-1), the default, again.
  EXPECT_EQ(fmm.urgent_height(), cf::default_urgent_height);
  for (const int h : {0, 1, 2, -1}) {
    fmm.set_urgent_height(h);
    EXPECT_EQ(fmm.urgent_height(), h);
    fmm.poison();
    fmm.enqueue_dag();
    CANOPY_TEST_CUDA(cudaDeviceSynchronize());
    ASSERT_TRUE(fmm.last_dag_result().ok()) << "urgent height " << h;
    EXPECT_TRUE(same_bits(fmm.fields(), dag)) << "urgent height " << h;
  }

  for (const bool branch : {false, true}) {
    fmm.poison();
    fmm.enqueue_level_graph(nullptr, branch);
    CANOPY_TEST_CUDA(cudaDeviceSynchronize());
    const std::vector<cf::field<float>> graph = fmm.fields();
    EXPECT_LE(largest_difference(graph, reference), rounding_bound) << "level graph (branch " << branch << ")";
    EXPECT_TRUE(same_bits(graph, dag)) << "level graph (branch " << branch << ") against the DAG";
  }

  if (!exact.empty()) {
    const accuracy g = accuracy_against(dag, exact), c = accuracy_against(reference, exact);
    std::printf("p %d: %zu points, %d tasks, %d blocks; GPU - CPU %.2e; acc p50 %.2e p99 %.2e (CPU %.2e %.2e)\n", order,
                p.tree.points.size(), fmm.dag().task_count(), fmm.dag_blocks(), d_dag, g.acc50, g.acc99, c.acc50,
                c.acc99);
    // The CPU's accuracy, up to float rounding (which only matters near 1e-6).
    EXPECT_LE(g.acc50, 1.1 * c.acc50 + 1e-6);
    EXPECT_LE(g.acc99, 1.1 * c.acc99 + 1e-6);
  }
}

TEST_F(fmm_gpu, PlummerEqualsTheCpuEvaluationAtEveryOrder) {
  const double eps2 = 1e-4;
  const problem p = make_problem(ct::generate_plummer(20000, 7), 32, 0.5);
  const auto exact = fmm_test::direct_all(p.tree, eps2);
  for (const int order : cf::gpu_orders) check_order(p, order, eps2, exact);
}

TEST_F(fmm_gpu, UniformWithoutSofteningAndSmallLeaves) {
  const problem p = make_problem(ct::generate_uniform(6000, 8), 8, 0.7);
  check_order(p, 6, 0.0, fmm_test::direct_all(p.tree, 0.0));
}

// Every scheduler mode runs the same DAG (the modes where only warp masters work call the bodies
// with one lane, so they sum in other orders: rounding again, not bits).
TEST_F(fmm_gpu, EveryModeRunsTheDag) {
  const problem p = make_problem(ct::generate_plummer(3000, 9), 16, 0.5);
  const auto reference = cf::evaluate<float, 4>(p.tree, p.geometry, p.lists, 1e-4);
  for (const canopy::mode m : canopy::all_modes) {
    SCOPED_TRACE(std::string(canopy::to_string(m)));
    canopy::scheduler_options o;
    o.mode = m;
    cf::gpu_evaluator fmm(4, p.tree, p.geometry, p.lists, 1e-4, o);
    for (int run = 0; run < 2; ++run) {
      fmm.poison();
      fmm.enqueue_dag();
      CANOPY_TEST_CUDA(cudaDeviceSynchronize());
      const canopy::run_result r = fmm.last_dag_result();
      ASSERT_TRUE(r.ok()) << canopy::to_string(r.code) << ": " << r.message;
      EXPECT_LE(largest_difference(fmm.fields(), reference), rounding_bound) << "run " << run;
    }
  }
}

// The bodies stage the expansions they read in shared memory, a slab for each of a block's first
// four warps (gpu_tasks.cuh, stage_rows); the warps of larger blocks, and every warp of the kinds
// left out of set_staged_kinds, read global memory instead. Both ways compute the same bits: blocks
// of 256 and 384 threads (half or two thirds of the warps without a slab), every kind staged and
// none give the fields of the defaults, bit for bit, at every order that stages, in the DAG and
// the level graph alike. (512 threads of the bodies' 128 to 168 registers do not fit an SM.)
// Large private queues beside the slabs still launch.
TEST_F(fmm_gpu, StagedAndStreamedBodiesGiveTheSameBits) {
  const problem p = make_problem(ct::generate_plummer(6000, 12), 16, 0.5);
  const auto same_bits = [](const std::vector<cf::field<float>>& got, const std::vector<cf::field<float>>& expected) {
    return got.size() == expected.size() && std::memcmp(got.data(), expected.data(), got.size() * sizeof got[0]) == 0;
  };
  for (const int order : {4, 5, 6}) {
    SCOPED_TRACE("order " + std::to_string(order));
    cf::gpu_evaluator reference(order, p.tree, p.geometry, p.lists, 1e-4);
    EXPECT_EQ(reference.dag_staged_kinds(), cf::default_dag_staged_kinds);
    EXPECT_EQ(reference.level_graph_staged_kinds(), cf::default_level_graph_staged_kinds);
    reference.enqueue_dag();
    CANOPY_TEST_CUDA(cudaDeviceSynchronize());
    ASSERT_TRUE(reference.last_dag_result().ok());
    const std::vector<cf::field<float>> expected = reference.fields();
    ASSERT_FALSE(expected.empty());
    // The DAG and the level graph (captured again after each change) with the defaults, with every
    // kind staged, with none.
    const unsigned all = cf::all_staged_kinds, dag_default = cf::default_dag_staged_kinds;
    for (const auto& [dag_kinds, graph_kinds] : {std::pair{dag_default, all}, std::pair{all, 0u}, std::pair{0u, dag_default}}) {
      reference.set_staged_kinds(dag_kinds, graph_kinds);
      EXPECT_EQ(reference.dag_staged_kinds(), dag_kinds);
      EXPECT_EQ(reference.level_graph_staged_kinds(), graph_kinds);
      for (const bool dag : {true, false}) {
        reference.poison();
        if (dag) reference.enqueue_dag();
        else reference.enqueue_level_graph();
        CANOPY_TEST_CUDA(cudaDeviceSynchronize());
        if (dag) {
          ASSERT_TRUE(reference.last_dag_result().ok());
        }
        EXPECT_TRUE(same_bits(reference.fields(), expected))
            << (dag ? "task DAG" : "level graph") << ", staged kinds " << (dag ? dag_kinds : graph_kinds);
      }
    }
    EXPECT_THROW(reference.set_staged_kinds(1u << 3, all), std::invalid_argument);
    EXPECT_THROW(reference.set_staged_kinds(all, 1u << 4), std::invalid_argument);
    EXPECT_EQ(reference.dag_staged_kinds(), 0u);  // unchanged by a refused call
    // Blocks of 256 and 384 threads; and 128 threads with private queues of 2,048 tasks: 9 KB of
    // dynamic shared memory beside the slabs' static 18 to 42 KB, past the 48 KB that need no
    // opt-in at order 6 (the scheduler counts the kernel's static bytes).
    for (const auto& [threads, private_capacity] : {std::pair{256, 0}, std::pair{384, 0}, std::pair{128, 2048}}) {
      canopy::scheduler_options o = cf::default_scheduler_options();
      o.threads_per_block = threads;
      o.private_queue_capacity = private_capacity;
      cf::gpu_evaluator fmm(order, p.tree, p.geometry, p.lists, 1e-4, o);
      fmm.poison();
      fmm.enqueue_dag();
      CANOPY_TEST_CUDA(cudaDeviceSynchronize());
      const canopy::run_result r = fmm.last_dag_result();
      ASSERT_TRUE(r.ok()) << canopy::to_string(r.code) << ": " << r.message;
      EXPECT_TRUE(same_bits(fmm.fields(), expected)) << threads << " threads a block, private queues " << private_capacity;
    }
  }
}

// Heavy leaves' P2P cut into parts of a few points (p2p_part_interactions 64: every leaf with
// sources is cut, most parts hold fewer points than a warp has lanes): the DAG and both level
// graphs still equal the CPU's evaluation up to rounding, from poisoned memory, so every point is
// written by exactly the parts that cover it (none lost: a poisoned field is not finite).
TEST_F(fmm_gpu, SmallP2PPartsEqualTheCpuEvaluation) {
  const double eps2 = 1e-4;
  const problem p = make_problem(ct::generate_plummer(20000, 7), 32, 0.5);
  const auto reference = cf::evaluate<float, 5>(p.tree, p.geometry, p.lists, eps2);
  const cf::gpu_evaluator whole(5, p.tree, p.geometry, p.lists, eps2, cf::default_scheduler_options(), cf::dag_shape{0, 0});
  cf::gpu_evaluator parts(5, p.tree, p.geometry, p.lists, eps2, cf::default_scheduler_options(), cf::dag_shape{0, 64});
  ASSERT_GT(parts.dag().task_count(), whole.dag().task_count() + 10000) << "parts of 64 interactions must cut most leaves";
  for (int run = 0; run < 2; ++run) {
    parts.poison();
    parts.enqueue_dag();
    CANOPY_TEST_CUDA(cudaDeviceSynchronize());
    const canopy::run_result r = parts.last_dag_result();
    ASSERT_TRUE(r.ok()) << canopy::to_string(r.code) << ": " << r.message;
    EXPECT_LE(largest_difference(parts.fields(), reference), rounding_bound) << "task DAG, run " << run;
  }
  for (const bool branch : {false, true}) {
    parts.poison();
    parts.enqueue_level_graph(nullptr, branch);
    CANOPY_TEST_CUDA(cudaDeviceSynchronize());
    EXPECT_LE(largest_difference(parts.fields(), reference), rounding_bound) << "level graph (branch " << branch << ")";
  }
}

TEST_F(fmm_gpu, DegenerateTrees) {
  // Empty: one empty leaf, two tasks, no field.
  {
    const problem p = make_problem({}, 32, 0.5);
    cf::gpu_evaluator fmm(4, p.tree, p.geometry, p.lists, 0.0);
    EXPECT_EQ(fmm.dag().task_count(), 2);
    fmm.enqueue_dag();
    CANOPY_TEST_CUDA(cudaDeviceSynchronize());
    EXPECT_TRUE(fmm.last_dag_result().ok());
    EXPECT_TRUE(fmm.fields().empty());
    fmm.enqueue_level_graph();
    CANOPY_TEST_CUDA(cudaDeviceSynchronize());
  }
  // One point: no field at all.
  {
    const problem p = make_problem({ct::point{1.f, 2.f, 3.f, 4.f}}, 32, 0.5);
    cf::gpu_evaluator fmm(6, p.tree, p.geometry, p.lists, 0.0);
    fmm.poison();
    fmm.enqueue_dag();
    CANOPY_TEST_CUDA(cudaDeviceSynchronize());
    ASSERT_TRUE(fmm.last_dag_result().ok());
    const auto f = fmm.fields();
    ASSERT_EQ(f.size(), 1u);
    EXPECT_EQ(f[0].ax, 0.f);
    EXPECT_EQ(f[0].phi, 0.f);
  }
  // One leaf (P2P only), a clustered tree with a deep leaf of coincident points, a lattice.
  {
    const problem one = make_problem(ct::generate_uniform(20, 3), 32, 0.5);
    check_order(one, 4, 1e-4, {});
    std::vector<ct::point> pts(50, ct::point{0.3f, 0.3f, 0.3f, 0.01f});
    const auto more = ct::generate_uniform(500, 6);
    pts.insert(pts.end(), more.begin(), more.end());
    check_order(make_problem(pts, 8, 0.5), 8, 1e-4, {});
    problem lattice;
    lattice.tree = ct::build_complete_octree(3, 4, 5);
    lattice.geometry = cf::compute_cell_geometry(lattice.tree);
    lattice.lists = cf::build_interaction_lists(lattice.tree, lattice.geometry, 0.5);
    check_order(lattice, 4, 0.0, {});
  }
}

TEST_F(fmm_gpu, RejectsOrdersNotCompiled) {
  const problem p = make_problem(ct::generate_uniform(100, 1), 8, 0.5);
  EXPECT_THROW(cf::gpu_evaluator(7, p.tree, p.geometry, p.lists, 0.0), std::invalid_argument);
}

}  // namespace
