// SPDX-License-Identifier: Apache-2.0
// The octree's node task graph built on the device from the device octree (first_child +
// child_count, or parent, with the Morton-ordered leaves as sources) equals the host's
// make_upward_graph, element for element, for adaptive and complete octrees.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "canopy/device_task_graph.cuh"
#include "canopy/passes/device_octree.cuh"
#include "canopy/passes/upward_pass.hpp"
#include "canopy/trees/generators.hpp"
#include "canopy/trees/octree.hpp"
#include "gpu_test.hpp"

namespace {

namespace ct = canopy::trees;
using canopy::device_task_graph;

class DeviceTaskGraphOctree : public canopy::test::gpu_test {};

template <class T>
std::vector<T> to_host(const T* d, std::int64_t n) {
  std::vector<T> h(static_cast<std::size_t>(n));
  if (n > 0) CANOPY_CUDA_TRY(cudaMemcpy(h.data(), d, h.size() * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

void expect_matches(const device_task_graph& d, const canopy::task_graph& h) {
  ASSERT_EQ(d.task_count(), h.task_count());
  EXPECT_EQ(d.sink_count(), h.sink_count());
  ASSERT_EQ(d.source_count(), static_cast<std::int32_t>(h.sources().size()));
  EXPECT_TRUE(to_host(d.parent(), d.task_count()) == h.parent());
  EXPECT_TRUE(to_host(d.dependency_count(), d.task_count()) == h.dependency_count());
  EXPECT_TRUE(to_host(d.sources(), d.source_count()) == h.sources());
}

TEST_F(DeviceTaskGraphOctree, NodeGraphFromTheDeviceOctreeMatchesMakeUpwardGraph) {
  std::vector<ct::octree> trees;
  trees.push_back(ct::build_octree(ct::generate_plummer(200000, 1)));
  trees.push_back(ct::build_octree(ct::generate_clusters(50000, 2), {8, 21}));
  trees.push_back(ct::build_complete_octree(4, 2, 3));
  trees.push_back(ct::build_octree({}));  // one node: an empty leaf root
  canopy::device_graph_workspace ws;
  for (const auto& tree : trees) {
    SCOPED_TRACE(std::to_string(tree.node_count()) + " nodes");
    const ct::device_octree d(tree);
    const ct::octree_ref r = d.ref();
    const canopy::task_graph h = ct::make_upward_graph(tree);
    // The level order proves the tree acyclic: the automatic check costs no extra pass.
    expect_matches(device_task_graph::from_children(r.first_child, r.child_count, r.node_count, nullptr, r.leaves, r.leaf_count,
                                                    {canopy::cycle_check::automatic, &ws}),
                   h);
    expect_matches(device_task_graph::from_parents(r.parent, r.node_count, nullptr, r.leaves, r.leaf_count), h);
  }
}

}  // namespace
