// SPDX-License-Identifier: Apache-2.0
// The table of task kinds behind upward_runner: per kind, how its task graph is made, which task
// data it uploads, how run-time lanes pick its ops type, and how its ops are made over the tree's
// arrays (host memory for the CPU engine, device memory for the GPU one). Both engines
// (upward_runner.cpp, upward_runner_gpu.cu) are written once over this table.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "canopy/passes/bucket_pass.hpp"
#include "canopy/passes/twig_pass.hpp"
#include "canopy/passes/upward_pass.hpp"
#include "canopy/passes/upward_runner.hpp"
#include "canopy/task_graph.hpp"

namespace canopy::trees::detail {

/// The arrays a pass reads and writes, in host or device memory.
using pass_arrays = upward_arrays<float>;

/// The lanes of the host ops types (host_upward_ops, host_twig_upward_ops): the CPU backend runs
/// each task on one thread, the type only has to be the one the CPU backend always ran.
inline constexpr int host_lanes = 2;

template <class TaskData>
struct prepared_pass {
  canopy::task_graph graph;
  std::vector<TaskData> data;  ///< per task, uploaded for the GPU engine (none for node tasks)
};

struct node_pass {
  using task_data = std::int32_t;  // unused: a node task needs nothing beyond the tree
  static prepared_pass<task_data> prepare(const octree& tree, const upward_options&) { return {make_upward_graph(tree), {}}; }
  template <class F>
  static decltype(auto) with_lanes(int lanes, F&& f) {
    return with_upward_lanes(lanes, std::forward<F>(f));
  }
  template <int Lanes>
  static upward_ops<float, Lanes> ops(const pass_arrays& a, const task_data*) {
    return {a};
  }
};

struct twig_pass {
  using task_data = twig_task;
  static prepared_pass<task_data> prepare(const octree& tree, const upward_options&) {
    twig_graph tg = make_twig_graph(tree);
    return {std::move(tg.graph), std::move(tg.tasks)};
  }
  template <class F>
  static decltype(auto) with_lanes(int lanes, F&& f) {
    return with_twig_lanes(lanes, std::forward<F>(f));
  }
  template <int Lanes>
  static twig_upward_ops<float, Lanes> ops(const pass_arrays& a, const task_data* tasks) {
    return {tasks, a};
  }
};

struct bucket_pass {
  using task_data = std::int32_t;  // the bucket graph's blob (bucket_pass.hpp)
  static int bucket_points(std::int64_t points, const upward_options& o) {
    return o.bucket_points > 0 ? o.bucket_points : default_bucket_points(points);
  }
  /// The GPU's limits (bucket_upward_ops stages a bucket in shared memory); any bucket size on the CPU.
  static void check(const upward_options& o, std::int64_t points) {
    if (o.bucket_points < 0)
      throw std::invalid_argument("bucket tasks: bucket_points must be >= 0 (0 = chosen by the tree's size), got " +
                                  std::to_string(o.bucket_points));
    if (o.backend != pass_backend::gpu) return;
    using ops = bucket_upward_ops<float>;
    if (bucket_points(points, o) > ops::max_bucket_points)
      throw std::invalid_argument("bucket tasks on the gpu: at most " + std::to_string(ops::max_bucket_points) +
                                  " points a bucket, got " + std::to_string(o.bucket_points));
    if (o.scheduler.threads_per_block > 32 * ops::max_warps)
      throw std::invalid_argument("bucket tasks on the gpu: at most " + std::to_string(32 * ops::max_warps) +
                                  " threads a block, got " + std::to_string(o.scheduler.threads_per_block));
  }
  static prepared_pass<task_data> prepare(const octree& tree, const upward_options& o) {
    check(o, static_cast<std::int64_t>(tree.points.size()));
    bucket_graph bg = make_bucket_graph(tree, bucket_points(static_cast<std::int64_t>(tree.points.size()), o));
    return {std::move(bg.graph), std::move(bg.blob)};
  }
  template <class F>
  static decltype(auto) with_lanes(int, F&& f) {  // one lane a leaf (from shared memory); a bucket runs on a warp
    return f(std::integral_constant<int, 1>{});
  }
  template <int Lanes>
  static bucket_upward_ops<float, Lanes> ops(const pass_arrays& a, const task_data* blob) {
    return {blob, a};
  }
};

/// Calls f(Kind{}) with the table entry of `tasks`.
template <class F>
decltype(auto) with_pass_kind(pass_tasks tasks, F&& f) {
  switch (tasks) {
    case pass_tasks::node: return f(node_pass{});
    case pass_tasks::twig: return f(twig_pass{});
    case pass_tasks::bucket: return f(bucket_pass{});
  }
  throw std::invalid_argument("upward_runner: unknown task kind");
}

}  // namespace canopy::trees::detail
