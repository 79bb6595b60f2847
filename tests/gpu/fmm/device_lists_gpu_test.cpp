// SPDX-License-Identifier: Apache-2.0
// The FMM prepared on the GPU from the GPU-built octree (canopy/fmm/device_lists.hpp) against the
// host functions on the same tree: the geometry bit for bit, the interaction lists equal to the
// host's sorted lists (so equal as sets, row by row), the task DAG equal to the host's (ranges,
// maps, level lists, the predecessors of every task), and the evaluator built from the device tree
// equal, field for field, to the one built from host arrays. Plummer, uniform, clustered and
// lattice points, several theta, and the degenerate trees. Label gpu; skipped without a device.
#include <canopy/cuda/device_buffer.hpp>
#include <canopy/cuda/error.hpp>
#include <canopy/fmm/device_lists.hpp>
#include <canopy/fmm/gpu_evaluate.hpp>
#include <canopy/fmm/interaction_lists.hpp>
#include <canopy/fmm/task_dag.hpp>
#include <canopy/mode.hpp>
#include <canopy/passes/device_octree_builder.cuh>
#include <canopy/trees/generators.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu_test.hpp"

namespace {

namespace cf = canopy::fmm;
namespace ct = canopy::trees;

class fmm_device_lists : public canopy::test::gpu_test {};

// The GPU-built tree of `points`, and its host copy (what the host functions are given).
struct built {
  ct::built_device_octree device;
  ct::octree host;
};

built build(const std::vector<ct::point>& points, int max_leaf) {
  // One element at least: the builder refuses a null pointer, even for no points.
  canopy::device_buffer<ct::point> d(std::max<std::size_t>(points.size(), 1));
  if (!points.empty()) d.upload(points);
  ct::device_octree_builder builder;
  built b{builder.build(d.data(), points.size(), {max_leaf, 21}), {}};
  b.host = b.device.download();
  // The device tree is build_octree's, so the host functions here see the tree a host user would.
  EXPECT_EQ(ct::structure_difference(b.host, ct::build_octree(points, {max_leaf, 21})), "");
  return b;
}

struct point_set {
  std::string name;
  std::vector<ct::point> points;
  int max_leaf;
};

std::vector<point_set> point_sets() {
  std::vector<ct::point> cluster(60, ct::point{0.3f, 0.3f, 0.3f, 0.01f});  // coincident: a deep leaf
  const auto more = ct::generate_uniform(500, 6);
  cluster.insert(cluster.end(), more.begin(), more.end());
  return {{"plummer", ct::generate_plummer(20000, 7), 32},
          {"uniform", ct::generate_uniform(8000, 8), 8},
          {"clusters", ct::generate_clusters(10000, 9), 16},
          {"lattice", ct::generate_lattice(3, 4, 5), 4},
          {"coincident", cluster, 8},
          {"one leaf", ct::generate_uniform(20, 3), 32},
          {"one point", {ct::point{1.f, 2.f, 3.f, 4.f}}, 32},
          {"empty", {}, 32}};
}

bool same_bytes(const void* a, const void* b, std::size_t bytes) { return bytes == 0 || std::memcmp(a, b, bytes) == 0; }

// Predecessors of every task, each row sorted (the order of a task's predecessors is not part of
// the graph).
std::vector<std::vector<canopy::task_id>> predecessor_sets(const canopy::task_graph& g) {
  std::vector<std::vector<canopy::task_id>> out(static_cast<std::size_t>(g.task_count()));
  for (std::size_t t = 0; t < out.size(); ++t) {
    out[t].assign(g.predecessors().begin() + g.pred_offsets()[t], g.predecessors().begin() + g.pred_offsets()[t + 1]);
    std::sort(out[t].begin(), out[t].end());
  }
  return out;
}

TEST_F(fmm_device_lists, GeometryEqualsTheHostsBitForBit) {
  for (const point_set& s : point_sets()) {
    SCOPED_TRACE(s.name);
    const built b = build(s.points, s.max_leaf);
    const std::vector<cf::cell_geometry> host = cf::compute_cell_geometry(b.host);
    const std::vector<cf::cell_geometry> device = cf::compute_cell_geometry(b.device).download();
    ASSERT_EQ(device.size(), host.size());
    for (std::size_t n = 0; n < host.size(); ++n)
      ASSERT_TRUE(same_bytes(&device[n], &host[n], sizeof(cf::cell_geometry)))
          << "node " << n << ": centre " << device[n].center[0] << " " << host[n].center[0] << ", radius " << device[n].radius
          << " " << host[n].radius;
  }
}

TEST_F(fmm_device_lists, ListsEqualTheHostsAsSetsPerTarget) {
  for (const point_set& s : point_sets()) {
    const built b = build(s.points, s.max_leaf);
    const std::vector<cf::cell_geometry> host_geometry = cf::compute_cell_geometry(b.host);
    const canopy::device_buffer<cf::cell_geometry> geometry = cf::compute_cell_geometry(b.device);
    for (const double theta : {0.3, 0.5, 0.7, 1.0}) {
      SCOPED_TRACE(s.name + ", theta " + std::to_string(theta));
      cf::interaction_lists host = cf::build_interaction_lists(b.host, host_geometry, theta);
      cf::sort_sources(host);  // the device's order: each row by source id
      const cf::device_interaction_lists d = cf::build_interaction_lists(b.device, geometry, theta);
      EXPECT_EQ(d.node_count, b.host.node_count());
      EXPECT_EQ(d.m2l_count, static_cast<std::int32_t>(host.m2l_source.size()));
      EXPECT_EQ(d.p2p_count, static_cast<std::int32_t>(host.p2p_source.size()));
      const cf::interaction_lists got = d.download();
      EXPECT_EQ(got.m2l_offset, host.m2l_offset);
      EXPECT_EQ(got.m2l_source, host.m2l_source);
      EXPECT_EQ(got.p2p_offset, host.p2p_offset);
      EXPECT_EQ(got.p2p_source, host.p2p_source);
    }
  }
}

TEST_F(fmm_device_lists, ListsRejectWhatTheHostRejects) {
  const built b = build(ct::generate_uniform(100, 10), 8);
  const canopy::device_buffer<cf::cell_geometry> geometry = cf::compute_cell_geometry(b.device);
  for (const double theta : {0.0, -0.5, 1.01, std::nan("")})
    EXPECT_THROW(cf::build_interaction_lists(b.device, geometry, theta), std::invalid_argument) << theta;
  const canopy::device_buffer<cf::cell_geometry> fewer(geometry.size() - 1);
  EXPECT_THROW(cf::build_interaction_lists(b.device, fewer, 0.5), std::invalid_argument);
  // A tree with no nodes at all (a default result): empty lists of one offset each.
  const ct::built_device_octree none;
  const cf::device_interaction_lists l = cf::build_interaction_lists(none, canopy::device_buffer<cf::cell_geometry>(), 0.5);
  EXPECT_EQ(l.download().m2l_offset, std::vector<std::int32_t>{0});
  EXPECT_EQ(l.download().p2p_offset, std::vector<std::int32_t>{0});
  const cf::device_task_dag dag = cf::build_task_dag(none, l);
  EXPECT_EQ(dag.task_count(), 0);
}

TEST_F(fmm_device_lists, DagEqualsTheHostsTaskForTask) {
  // Every shape (dag_shape::m2l_wait_levels): the sources themselves, and ancestors 1, 2 and 30
  // levels up (merged waits: the device's unique pass against the host's).
  // With P2P parts of the default size, and of 64 interactions (most leaves cut, parts of fewer
  // points than a warp's lanes).
  for (const point_set& s : point_sets())
  for (const int wait_levels : {0, 1, 2, 30})
  for (const std::int64_t part : {cf::dag_shape{}.p2p_part_interactions, std::int64_t{64}}) {
    SCOPED_TRACE(s.name + ", m2l_wait_levels " + std::to_string(wait_levels) + ", p2p_part_interactions " + std::to_string(part));
    const cf::dag_shape shape{wait_levels, part};
    const built b = build(s.points, s.max_leaf);
    cf::interaction_lists host_lists = cf::build_interaction_lists(b.host, cf::compute_cell_geometry(b.host), 0.5);
    cf::sort_sources(host_lists);
    const cf::task_dag host = cf::build_task_dag(b.host, host_lists, shape);
    const canopy::device_buffer<cf::cell_geometry> geometry = cf::compute_cell_geometry(b.device);
    const cf::device_task_dag d = cf::build_task_dag(b.device, cf::build_interaction_lists(b.device, geometry, 0.5), nullptr, shape);
    const cf::task_dag got = d.download();
    EXPECT_EQ(got.ranges.m2l_begin, host.ranges.m2l_begin);
    EXPECT_EQ(got.ranges.down_begin, host.ranges.down_begin);
    EXPECT_EQ(got.ranges.l2p_begin, host.ranges.l2p_begin);
    EXPECT_EQ(got.ranges.p2p_begin, host.ranges.p2p_begin);
    EXPECT_EQ(got.ranges.end, host.ranges.end);
    EXPECT_EQ(got.m2l_target, host.m2l_target);
    EXPECT_EQ(got.down_node, host.down_node);
    EXPECT_EQ(got.l2p_leaf, host.l2p_leaf);
    EXPECT_EQ(got.p2p_leaf, host.p2p_leaf);
    EXPECT_EQ(got.p2p_point, host.p2p_point);
    EXPECT_EQ(got.has_local, host.has_local);
    EXPECT_EQ(got.internal_node, host.internal_node);
    EXPECT_EQ(got.internal_level_offset, host.internal_level_offset);
    EXPECT_EQ(got.down_level_offset, host.down_level_offset);
    // The graph: the same predecessors for every task, so the same counts, sources and sinks.
    EXPECT_EQ(predecessor_sets(got.graph), predecessor_sets(host.graph));
    EXPECT_EQ(got.graph.dependency_count(), host.graph.dependency_count());
    EXPECT_EQ(got.graph.sources(), host.graph.sources());
    EXPECT_EQ(got.graph.sink_count(), host.graph.sink_count());
    // What the scheduler is handed: the device's own counts and sources (not re-derived).
    EXPECT_EQ(d.edge_count, static_cast<std::int32_t>(host.graph.successors().size()));
    EXPECT_EQ(d.source_count, static_cast<std::int32_t>(host.graph.sources().size()));
    EXPECT_EQ(d.sink_count, host.graph.sink_count());
    if (d.task_count() > 0) {
      std::vector<std::int32_t> deps = d.dependency_count.download();
      EXPECT_EQ(deps, host.graph.dependency_count());
      std::vector<std::int32_t> sources = d.sources.download();
      sources.resize(static_cast<std::size_t>(d.source_count));
      EXPECT_EQ(sources, host.graph.sources());
    }
    // The maps alone (dag_parts::maps_only): the same maps and level lists, no graph.
    const cf::device_task_dag m = cf::build_task_dag(b.device, cf::build_interaction_lists(b.device, geometry, 0.5), nullptr, shape,
                                                     cf::dag_parts::maps_only);
    EXPECT_TRUE(d.has_graph);
    EXPECT_FALSE(m.has_graph);
    EXPECT_THROW((void)m.download_graph(), std::logic_error);
    const cf::task_dag maps = m.download();
    EXPECT_EQ(maps.ranges.p2p_begin, host.ranges.p2p_begin);
    EXPECT_EQ(maps.ranges.end, host.ranges.end);
    EXPECT_EQ(maps.m2l_target, host.m2l_target);
    EXPECT_EQ(maps.down_node, host.down_node);
    EXPECT_EQ(maps.l2p_leaf, host.l2p_leaf);
    EXPECT_EQ(maps.p2p_leaf, host.p2p_leaf);
    EXPECT_EQ(maps.p2p_point, host.p2p_point);
    EXPECT_EQ(maps.has_local, host.has_local);
    EXPECT_EQ(maps.internal_node, host.internal_node);
    EXPECT_EQ(maps.internal_level_offset, host.internal_level_offset);
    EXPECT_EQ(maps.down_level_offset, host.down_level_offset);
    EXPECT_EQ(m.edge_count, 0);
    EXPECT_EQ(maps.graph.task_count(), 0);
  }
}

// A memory pool that keeps what is freed (make_kept_pool, as the N-body example gives the set-up),
// and a stream of its own; both released at the end of the scope.
struct kept_pool {
  cf::memory_pool kept = cf::make_kept_pool();
  cudaMemPool_t pool = kept.get();
  cudaStream_t stream = nullptr;
  kept_pool() { CANOPY_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)); }
  ~kept_pool() {
    (void)cudaStreamSynchronize(stream);
    (void)cudaStreamDestroy(stream);
  }
  kept_pool(const kept_pool&) = delete;
  kept_pool& operator=(const kept_pool&) = delete;
};

// The set-up's scratch from a caller's pool, on another stream, built twice (the second build
// reuses the memory the first gave back to the pool): the same geometry, lists and DAG as with
// cudaMalloc, and evaluators whose level graphs and DAG compute the same bits.
TEST_F(fmm_device_lists, ScratchFromAKeptPoolGivesTheSameResults) {
  const kept_pool kp;
  ASSERT_NE(kp.pool, nullptr) << "the device has no memory pools";
  for (const point_set& s : point_sets()) {
    SCOPED_TRACE(s.name);
    const built b = build(s.points, s.max_leaf);
    const canopy::device_buffer<cf::cell_geometry> g_plain = cf::compute_cell_geometry(b.device);
    const std::vector<cf::cell_geometry> g0 = g_plain.download();
    const cf::device_interaction_lists l_plain = cf::build_interaction_lists(b.device, g_plain, 0.5);
    const cf::interaction_lists l0 = l_plain.download();
    const cf::task_dag d0 = cf::build_task_dag(b.device, l_plain).download();
    for (int rep = 0; rep < 2; ++rep) {
      SCOPED_TRACE("build " + std::to_string(rep));
      const canopy::device_buffer<cf::cell_geometry> g = cf::compute_cell_geometry(b.device, kp.stream, kp.pool);
      const std::vector<cf::cell_geometry> gh = g.download();
      ASSERT_EQ(gh.size(), g0.size());
      EXPECT_TRUE(same_bytes(gh.data(), g0.data(), gh.size() * sizeof(cf::cell_geometry)));
      const cf::device_interaction_lists l = cf::build_interaction_lists(b.device, g, 0.5, kp.stream, kp.pool);
      const cf::interaction_lists lh = l.download();
      EXPECT_EQ(lh.m2l_offset, l0.m2l_offset);
      EXPECT_EQ(lh.m2l_source, l0.m2l_source);
      EXPECT_EQ(lh.p2p_offset, l0.p2p_offset);
      EXPECT_EQ(lh.p2p_source, l0.p2p_source);
      const cf::task_dag d = cf::build_task_dag(b.device, l, kp.stream, {}, cf::dag_parts::maps_and_graph, kp.pool).download();
      EXPECT_EQ(d.m2l_target, d0.m2l_target);
      EXPECT_EQ(d.down_node, d0.down_node);
      EXPECT_EQ(d.p2p_leaf, d0.p2p_leaf);
      EXPECT_EQ(d.p2p_point, d0.p2p_point);
      EXPECT_EQ(d.internal_node, d0.internal_node);
      EXPECT_EQ(predecessor_sets(d.graph), predecessor_sets(d0.graph));
      const cf::task_dag maps =
          cf::build_task_dag(b.device, l, kp.stream, {}, cf::dag_parts::maps_only, kp.pool).download();
      EXPECT_EQ(maps.p2p_leaf, d0.p2p_leaf);
      EXPECT_EQ(maps.internal_level_offset, d0.internal_level_offset);
    }
  }
  const built b = build(ct::generate_plummer(20000, 7), 32);
  cf::gpu_evaluator plain(5, b.device, 0.5, 1e-4);
  plain.enqueue_level_graph(nullptr, true);
  plain.enqueue_dag();  // after the level graph on the same stream: the DAG's fields are the last
  CANOPY_TEST_CUDA(cudaDeviceSynchronize());
  ASSERT_TRUE(plain.last_dag_result().ok());
  const std::vector<cf::field<float>> dag_fields = plain.fields();
  plain.enqueue_level_graph(nullptr, true);
  CANOPY_TEST_CUDA(cudaDeviceSynchronize());
  const std::vector<cf::field<float>> graph_fields = plain.fields();
  for (const cf::schedules runs : {cf::schedules::level_graph, cf::schedules::dag_and_level_graph}) {
    SCOPED_TRACE(runs == cf::schedules::level_graph ? "level graph alone" : "both schedules");
    cf::gpu_evaluator pooled(5, b.device, 0.5, 1e-4, cf::default_scheduler_options(), kp.stream, {}, runs, kp.pool);
    pooled.poison();
    pooled.enqueue_level_graph(nullptr, true);
    CANOPY_TEST_CUDA(cudaDeviceSynchronize());
    std::vector<cf::field<float>> got = pooled.fields();
    ASSERT_EQ(got.size(), graph_fields.size());
    EXPECT_TRUE(same_bytes(got.data(), graph_fields.data(), got.size() * sizeof(got[0])));
    if (runs == cf::schedules::dag_and_level_graph) {
      pooled.poison();
      pooled.enqueue_dag();
      CANOPY_TEST_CUDA(cudaDeviceSynchronize());
      ASSERT_TRUE(pooled.last_dag_result().ok());
      got = pooled.fields();
      EXPECT_TRUE(same_bytes(got.data(), dag_fields.data(), got.size() * sizeof(got[0])));
    }
  }
}

// The evaluator from the device tree against the one from host arrays with the same (sorted)
// lists: every input equal, every task body summing in a fixed order, so the fields are the same
// bits, for the DAG and both level graphs.
void expect_same_evaluation(const built& b, int order, double theta, double eps2, const canopy::scheduler_options& options = {}) {
  SCOPED_TRACE("order " + std::to_string(order) + ", theta " + std::to_string(theta));
  const std::vector<cf::cell_geometry> geometry = cf::compute_cell_geometry(b.host);
  cf::interaction_lists lists = cf::build_interaction_lists(b.host, geometry, theta);
  cf::sort_sources(lists);
  cf::gpu_evaluator from_host(order, b.host, geometry, lists, eps2, options);
  from_host.enqueue_dag();
  CANOPY_TEST_CUDA(cudaDeviceSynchronize());
  ASSERT_TRUE(from_host.last_dag_result().ok());
  const std::vector<cf::field<float>> expect = from_host.fields();

  cf::gpu_evaluator from_device(order, b.device, theta, eps2, options);
  EXPECT_EQ(from_device.ranges().end, from_host.ranges().end);
  EXPECT_EQ(from_device.level_graph_kernels(false), from_host.level_graph_kernels(false));
  for (int run = 0; run < 2; ++run) {
    from_device.poison();
    from_device.enqueue_dag();
    CANOPY_TEST_CUDA(cudaDeviceSynchronize());
    const canopy::run_result r = from_device.last_dag_result();
    ASSERT_TRUE(r.ok()) << canopy::to_string(r.code) << ": " << r.message;
    const std::vector<cf::field<float>> got = from_device.fields();
    ASSERT_EQ(got.size(), expect.size());
    EXPECT_TRUE(same_bytes(got.data(), expect.data(), got.size() * sizeof(got[0]))) << "DAG run " << run;
  }
  // A DAG whose m2l tasks wait for ancestors two levels up (fewer edges, tasks with thousands of
  // successors, which the runtime resolves over a warp): the same bodies in the same order of
  // sums, so the same bits.
  cf::gpu_evaluator coarse(order, b.device, theta, eps2, options, nullptr, cf::dag_shape{2});
  coarse.poison();
  coarse.enqueue_dag();
  CANOPY_TEST_CUDA(cudaDeviceSynchronize());
  {
    const canopy::run_result r = coarse.last_dag_result();
    ASSERT_TRUE(r.ok()) << canopy::to_string(r.code) << ": " << r.message;
    const std::vector<cf::field<float>> got = coarse.fields();
    ASSERT_EQ(got.size(), expect.size());
    EXPECT_TRUE(same_bytes(got.data(), expect.data(), got.size() * sizeof(got[0]))) << "DAG, m2l_wait_levels 2";
  }
  // The level graphs against the host path's level graphs: they run every task body with a warp,
  // while some scheduler modes run the DAG's tasks with fewer lanes, which sums in another order.
  const auto expect_same_level_graphs = [&](cf::gpu_evaluator& evaluator, const std::string& what) {
    for (const bool branch : {false, true}) {
      from_host.poison();
      from_host.enqueue_level_graph(nullptr, branch);
      CANOPY_TEST_CUDA(cudaDeviceSynchronize());
      const std::vector<cf::field<float>> expect_level = from_host.fields();
      evaluator.poison();
      evaluator.enqueue_level_graph(nullptr, branch);
      CANOPY_TEST_CUDA(cudaDeviceSynchronize());
      const std::vector<cf::field<float>> got = evaluator.fields();
      ASSERT_EQ(got.size(), expect_level.size());
      EXPECT_TRUE(same_bytes(got.data(), expect_level.data(), got.size() * sizeof(got[0]))) << what << ", branch " << branch;
    }
  };
  expect_same_level_graphs(from_device, "level graph");
  EXPECT_EQ(from_device.dag().task_count(), from_host.dag().task_count());
  EXPECT_TRUE(from_device.runs_dag());
  // Built for the level graph alone (no DAG edges, no scheduler): the same level graphs, bit for
  // bit; the DAG refused.
  cf::gpu_evaluator graph_only(order, b.device, theta, eps2, options, nullptr, {}, cf::schedules::level_graph);
  EXPECT_FALSE(graph_only.runs_dag());
  EXPECT_EQ(graph_only.ranges().end, from_host.ranges().end);
  EXPECT_THROW(graph_only.enqueue_dag(), std::logic_error);
  EXPECT_THROW((void)graph_only.dag(), std::logic_error);
  EXPECT_TRUE(graph_only.last_dag_result().ok());
  EXPECT_EQ(graph_only.dag_blocks(), 0);
  expect_same_level_graphs(graph_only, "level graph alone");
}

TEST_F(fmm_device_lists, EvaluatorFromTheDeviceTreeEqualsTheHostPath) {
  const built plummer = build(ct::generate_plummer(20000, 7), 32);
  for (const int order : cf::gpu_orders) expect_same_evaluation(plummer, order, 0.5, 1e-4);
  expect_same_evaluation(build(ct::generate_uniform(6000, 8), 8), 6, 0.7, 0.0);
  expect_same_evaluation(build(ct::generate_clusters(8000, 9), 16), 4, 0.3, 1e-4);
  for (const point_set& s : point_sets()) {
    SCOPED_TRACE(s.name);
    expect_same_evaluation(build(s.points, s.max_leaf), 4, 0.5, 1e-4);
  }
}

// The DAG handed to the scheduler as a device graph (device_task_graph::from_trusted_dag) runs in
// every mode, equal to the host-built DAG in the same mode.
TEST_F(fmm_device_lists, EveryModeRunsTheDeviceBuiltDag) {
  const built b = build(ct::generate_plummer(3000, 9), 16);
  for (const canopy::mode m : canopy::all_modes) {
    SCOPED_TRACE(std::string(canopy::to_string(m)));
    canopy::scheduler_options o;
    o.mode = m;
    expect_same_evaluation(b, 4, 0.5, 1e-4, o);
  }
}

}  // namespace
