// SPDX-License-Identifier: Apache-2.0
// `canopy bench build`: the host octree build (build_octree) against the GPU build
// (device_octree_builder) and the task graphs built on the device from its result, on the same
// points. Every GPU tree is downloaded and compared with the host's, node for node, before any
// of its times count. Host code; the GPU side is build_bench_gpu.cu (CANOPY_GPU), without it
// run_build_bench throws std::runtime_error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "canopy/trees/octree.hpp"
#include "canopy/trees/point.hpp"
#include "common/stats.hpp"

namespace canopy::bench {

struct build_case {
  std::string label;                 ///< "depth 5 (8 per leaf)", "plummer 16M"
  std::vector<trees::point> points;  ///< in no particular order (complete trees are shuffled)
  trees::build_options options;
};

struct build_bench_options {
  int reps = 20;       ///< timed GPU runs per case
  int host_reps = 5;   ///< timed host builds per case (a 16M build takes seconds)
  int warmup = 2;
};

/// Milliseconds; stream = CUDA events around the enqueue on one stream (the builder waits for the
/// host once per build, after the spans, so it includes that round trip); e2e = host clock until the host may
/// use the result.
struct build_result {
  std::string label;
  std::size_t points = 0;
  std::int32_t nodes = 0, leaves = 0, depth = 0;
  summary host_ms;           ///< build_octree, host clock
  summary gpu_build_stream;  ///< device_octree_builder::build_into
  summary gpu_build_e2e;
  summary node_graph_stream; ///< make_device_upward_graph(built.tree.ref()): checked, two host waits
  summary trusted_graph_stream;  ///< make_device_upward_graph(built): the builder's tree, no check, no host wait
  summary twig_graph_stream; ///< make_device_twig_graph on the built tree
  summary pipeline_stream;   ///< unsorted device points -> tree -> node task graph ready to run (build + trusted graph)
  summary pipeline_e2e;      ///< the same, host clock until the host may launch on it
  summary pipeline_checked_e2e;  ///< build, stream synchronisation, then the checked graph (host clock)
  /// The GPU build's phases (device_octree_builder::last_phase_times), stream time of each.
  summary box, keys, sort, gather, spans, nodes_emit;
  double floor_ms = 0;       ///< the build's fewest bytes (points read, sorted points and permutation written) at copy bandwidth
  std::size_t workspace_bytes = 0;  ///< the builder's workspace after the case
  bool checked = false;      ///< the GPU tree equalled the host's before timing
};

struct build_report {
  std::string device;
  double copy_gb_per_s = 0;
  std::vector<build_result> results;
};

/// Runs every case; throws std::runtime_error for a GPU tree that differs from the host's (naming
/// the first differing array and node), or without a GPU.
build_report run_build_bench(const std::vector<build_case>& cases, const build_bench_options& options);

}  // namespace canopy::bench
