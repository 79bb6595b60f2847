// SPDX-License-Identifier: Apache-2.0
// The octree's task graphs built on the device (canopy/passes/device_pass_graphs.cuh). The twig
// decomposition follows make_twig_graph (twig_pass.cpp) step for step, one kernel per loop there:
// mark the twigs and count each node's tasks (an internal node one, two with a leaf group; a
// single root leaf one), number them (a CUB scan), write the tasks and their parents, then the
// sources in Morton order (a CUB select keeps their order).
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "canopy/cuda/error.hpp"
#include "canopy/passes/device_pass_graphs.cuh"

namespace canopy::trees {

namespace {

constexpr int block = 256;

int blocks_for(std::int64_t n) { return static_cast<int>((n + block - 1) / block); }

void check_tree(const octree_ref& tree, const char* who) {
  if (tree.node_count < 0 || tree.leaf_count < 0)
    throw std::invalid_argument(std::string(who) + ": negative node or leaf count");
  if (tree.node_count > 0 && (tree.parent == nullptr || tree.first_child == nullptr || tree.child_count == nullptr ||
                              tree.leaves == nullptr))
    throw std::invalid_argument(std::string(who) + ": a tree of " + std::to_string(tree.node_count) +
                                " nodes with a null parent, first_child, child_count or leaves array");
}

/// Which children of n are leaves (bit c: child first_child + c); 0 for a leaf.
__device__ std::int32_t leaf_children(const octree_ref& t, std::int32_t n) {
  const std::int32_t k = t.child_count[n];
  std::int32_t mask = 0;
  for (std::int32_t c = 0; c < k; ++c)
    if (t.child_count[t.first_child[n] + c] == 0) mask |= 1 << c;
  return mask;
}

/// keep[n]: node n's tasks: 1 for an internal node (2 with a leaf group: some children leaves,
/// some not) or the single root leaf, else 0 (a leaf computed by its parent's twig or leaf group);
/// twig[n]: internal with every child a leaf.
__global__ void mark_kernel(octree_ref t, std::int32_t* keep, std::int32_t* twig) {
  const std::int32_t n = static_cast<std::int32_t>(blockIdx.x) * block + static_cast<std::int32_t>(threadIdx.x);
  if (n >= t.node_count) return;
  const std::int32_t k = t.child_count[n];
  const std::int32_t mask = leaf_children(t, n);
  const bool is_twig = k > 0 && mask == (1 << k) - 1;
  twig[n] = is_twig ? 1 : 0;
  keep[n] = k > 0 ? (mask != 0 && !is_twig ? 2 : 1) : (t.parent[n] < 0 ? 1 : 0);
}

/// tasks[task_of[n]] and the task's parent, for every kept node; task_of[node_count] = the count.
__global__ void emit_kernel(octree_ref t, const std::int32_t* keep, const std::int32_t* twig, const std::int32_t* task_of,
                            twig_task* tasks, task_id* task_parent) {
  const std::int32_t n = static_cast<std::int32_t>(blockIdx.x) * block + static_cast<std::int32_t>(threadIdx.x);
  if (n >= t.node_count || keep[n] == 0) return;
  const std::int32_t task = task_of[n];
  const std::int32_t mask = leaf_children(t, n);
  tasks[task] = twig_task{twig[n] ? ~n : n, t.first_child[n], t.child_count[n], twig[n] ? mask : 0};
  const std::int32_t p = t.parent[n];
  task_parent[task] = p < 0 ? no_task : task_of[p];  // a kept node's parent is internal, so kept
  if (keep[n] == 2) {  // the leaf group, waited for by the node's task
    tasks[task + 1] = twig_task{~n, t.first_child[n], t.child_count[n], mask};
    task_parent[task + 1] = task;
  }
}

/// Per leaf in Morton order, the source it stands for, or no_task: a twig's first leaf stands for
/// the twig, a leaf group's first leaf for the group (the task after its node's), the single root
/// leaf for itself.
__global__ void source_kernel(octree_ref t, const std::int32_t* twig, const std::int32_t* task_of, task_id* candidate) {
  const std::int32_t i = static_cast<std::int32_t>(blockIdx.x) * block + static_cast<std::int32_t>(threadIdx.x);
  if (i >= t.leaf_count) return;
  const std::int32_t leaf = t.leaves[i];
  const std::int32_t p = t.parent[leaf];
  task_id s = no_task;
  if (p < 0) {
    s = task_of[leaf];
  } else if (leaf == t.first_child[p] + __ffs(leaf_children(t, p)) - 1) {
    s = twig[p] != 0 ? task_of[p] : task_of[p] + 1;
  }
  candidate[i] = s;
}

struct is_task {
  __host__ __device__ bool operator()(task_id t) const { return t != no_task; }
};

std::size_t round_up(std::size_t b) { return (b + 255) / 256 * 256; }

}  // namespace

canopy::device_task_graph make_device_upward_graph(const octree_ref& tree, cudaStream_t stream,
                                                   canopy::device_graph_workspace* workspace) {
  check_tree(tree, "make_device_upward_graph");
  canopy::device_graph_options o;
  o.workspace = workspace;
  return canopy::device_task_graph::from_children(tree.first_child, tree.child_count, tree.node_count, stream, tree.leaves,
                                                  tree.leaf_count, o);
}

void make_device_upward_graph(const built_device_octree& built, canopy::device_task_graph& graph, cudaStream_t stream) {
  const octree_ref tree = built.tree.ref();
  check_tree(tree, "make_device_upward_graph");
  // The builder's tree: every node's parent in range and below it (level order), child_count its
  // children, leaves every childless node once in Morton order, one root.
  graph.assign_trusted_forest(tree.parent, tree.child_count, tree.node_count, tree.leaves, tree.leaf_count,
                              tree.node_count > 0 ? 1 : 0, stream);
}

canopy::device_task_graph make_device_upward_graph(const built_device_octree& built, cudaStream_t stream) {
  canopy::device_task_graph graph;
  make_device_upward_graph(built, graph, stream);
  return graph;
}

device_twig_graph make_device_twig_graph(const octree_ref& tree, cudaStream_t stream, canopy::device_graph_workspace* workspace) {
  check_tree(tree, "make_device_twig_graph");
  device_twig_graph out;
  const std::int32_t n = tree.node_count;
  if (n == 0) {
    out.graph = canopy::device_task_graph::from_parents(nullptr, 0, stream);
    return out;
  }
  // Scratch (separate from the workspace, which device_task_graph uses at the end): keep and
  // task_of (n + 1 each), twig flags (n), candidate sources (leaf_count), the counts, CUB's storage.
  const std::size_t leaves = static_cast<std::size_t>(tree.leaf_count);
  std::size_t scan_bytes = 0, select_bytes = 0, sum_bytes = 0;
  CANOPY_CUDA_TRY(cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, static_cast<const std::int32_t*>(nullptr),
                                                static_cast<std::int32_t*>(nullptr), n + 1, stream));
  CANOPY_CUDA_TRY(cub::DeviceSelect::If(nullptr, select_bytes, static_cast<const task_id*>(nullptr), static_cast<task_id*>(nullptr),
                                        static_cast<std::int32_t*>(nullptr), tree.leaf_count, is_task{}, stream));
  CANOPY_CUDA_TRY(cub::DeviceReduce::Sum(nullptr, sum_bytes, static_cast<const std::int32_t*>(nullptr),
                                         static_cast<std::int32_t*>(nullptr), n, stream));
  const std::size_t words = static_cast<std::size_t>(n) + 1;
  const std::size_t cub_bytes = round_up(std::max({scan_bytes, select_bytes, sum_bytes}));
  canopy::device_buffer<std::byte> scratch(cub_bytes + round_up(words * 4) * 2 + round_up(static_cast<std::size_t>(n) * 4) +
                                           round_up(leaves * 4) * 2 + 256);
  std::byte* p = scratch.data();
  void* cub_temp = p;
  p += cub_bytes;
  auto* keep = reinterpret_cast<std::int32_t*>(p);
  p += round_up(words * 4);
  auto* task_of = reinterpret_cast<std::int32_t*>(p);
  p += round_up(words * 4);
  auto* twig = reinterpret_cast<std::int32_t*>(p);
  p += round_up(static_cast<std::size_t>(n) * 4);
  auto* candidate = reinterpret_cast<task_id*>(p);
  p += round_up(leaves * 4);
  auto* sources = reinterpret_cast<task_id*>(p);
  p += round_up(leaves * 4);
  auto* counts = reinterpret_cast<std::int32_t*>(p);  // [0] sources, [1] twigs

  mark_kernel<<<blocks_for(n), block, 0, stream>>>(tree, keep, twig);
  CANOPY_CUDA_TRY(cudaGetLastError());
  CANOPY_CUDA_TRY(cudaMemsetAsync(keep + n, 0, sizeof(std::int32_t), stream));
  CANOPY_CUDA_TRY(cub::DeviceScan::ExclusiveSum(cub_temp, scan_bytes, keep, task_of, n + 1, stream));
  CANOPY_CUDA_TRY(cub::DeviceReduce::Sum(cub_temp, sum_bytes, twig, counts + 1, n, stream));  // a twig is always kept
  if (tree.leaf_count > 0) {
    source_kernel<<<blocks_for(tree.leaf_count), block, 0, stream>>>(tree, twig, task_of, candidate);
    CANOPY_CUDA_TRY(cudaGetLastError());
    CANOPY_CUDA_TRY(cub::DeviceSelect::If(cub_temp, select_bytes, candidate, sources, counts, tree.leaf_count, is_task{}, stream));
  } else {
    CANOPY_CUDA_TRY(cudaMemsetAsync(counts, 0, sizeof(std::int32_t), stream));
  }
  // The one read of this step: the host sizes the tasks and the graph by these.
  std::int32_t host[3] = {0, 0, 0};  // tasks, sources, twigs
  CANOPY_CUDA_TRY(cudaMemcpyAsync(&host[0], task_of + n, sizeof(std::int32_t), cudaMemcpyDeviceToHost, stream));
  CANOPY_CUDA_TRY(cudaMemcpyAsync(&host[1], counts, 2 * sizeof(std::int32_t), cudaMemcpyDeviceToHost, stream));
  CANOPY_CUDA_TRY(cudaStreamSynchronize(stream));
  const std::int32_t task_count = host[0];
  out.twig_count = host[2];
  out.tasks = canopy::device_buffer<twig_task>(static_cast<std::size_t>(task_count));
  canopy::device_buffer<task_id> task_parent(static_cast<std::size_t>(task_count));
  emit_kernel<<<blocks_for(n), block, 0, stream>>>(tree, keep, twig, task_of, out.tasks.data(), task_parent.data());
  CANOPY_CUDA_TRY(cudaGetLastError());
  canopy::device_graph_options o;
  o.workspace = workspace;
  out.graph = canopy::device_task_graph::from_parents(task_parent.data(), task_count, stream, sources, host[1], o);
  return out;  // from_parents synchronised the stream: the scratch may go
}

}  // namespace canopy::trees
