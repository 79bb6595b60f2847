// SPDX-License-Identifier: Apache-2.0
// The octree upward pass, ready to run: one object for a task kind (node or twig tasks) on a
// backend (the CPU scheduler or the GPU persistent kernel). The tool, the benchmark and the
// N-body example all run the pass through it.
//
//   canopy::trees::upward_options o;
//   o.backend = canopy::trees::pass_backend::gpu;
//   o.tasks = canopy::trees::default_pass_tasks(o.backend);        // twig on the GPU
//   canopy::trees::upward_runner pass(tree, o);                    // upload, graph, scheduler
//   canopy::run_result r = pass.run();                             // one pass, waited for
//   std::vector<canopy::trees::multipole<float>> moments = pass.download();
//
// Host code: compiles with g++ (no CUDA headers). The GPU side lives in a .cu built only with
// CANOPY_GPU; without it, asking for the gpu backend throws std::runtime_error saying so.
//
// Adding a task kind (a new pass variant) touches three files: its ops header beside
// upward_pass.hpp, the pass_tasks list below, and its entry in src/pass_kinds.hpp. The tool's
// --tasks and the benchmark's MODE+KIND variants take the list from here.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "canopy/passes/octree_ref.hpp"
#include "canopy/scheduler_options.hpp"
#include "canopy/status.hpp"
#include "canopy/trees/multipole.hpp"
#include "canopy/trees/octree.hpp"

// cudaStream_t is `CUstream_st*`: naming the struct keeps CUDA headers out of host code.
struct CUstream_st;

namespace canopy::trees {

class device_octree;
struct built_device_octree;
template <class T>
class device_payloads;

enum class pass_backend { cpu, gpu };
inline constexpr std::array<pass_backend, 2> all_pass_backends = {pass_backend::cpu, pass_backend::gpu};

constexpr std::string_view to_string(pass_backend b) { return b == pass_backend::gpu ? "gpu" : "cpu"; }
constexpr std::optional<pass_backend> parse_pass_backend(std::string_view name) {
  for (pass_backend b : all_pass_backends)
    if (to_string(b) == name) return b;
  return std::nullopt;
}

/// How the pass is cut into scheduler tasks: `node`, one task per octree node (upward_pass.hpp);
/// `twig`, one task per twig and its leaves plus one per other node (twig_pass.hpp); `bucket`, one
/// warp task per run of about bucket_points Morton-ordered points (whole small subtrees, leaves
/// by a segmented reduction) plus one per bigger node (bucket_pass.hpp).
enum class pass_tasks { node, twig, bucket };
inline constexpr std::array<pass_tasks, 3> all_pass_tasks = {pass_tasks::node, pass_tasks::twig, pass_tasks::bucket};

constexpr std::string_view to_string(pass_tasks t) {
  switch (t) {
    case pass_tasks::node: return "node";
    case pass_tasks::twig: return "twig";
    case pass_tasks::bucket: return "bucket";
  }
  return "?";
}
constexpr std::optional<pass_tasks> parse_pass_tasks(std::string_view name) {
  for (pass_tasks t : all_pass_tasks)
    if (to_string(t) == name) return t;
  return std::nullopt;
}

/// What "auto" means: twig tasks on the GPU, where they were faster on every tree measured; node
/// tasks on the CPU, where twig tasks were not faster (bench/RESULTS.md).
constexpr pass_tasks default_pass_tasks(pass_backend b) { return b == pass_backend::gpu ? pass_tasks::twig : pass_tasks::node; }

/// Whether this build has the GPU side (CANOPY_GPU); a device may still be missing at run time.
bool gpu_pass_built() noexcept;

struct upward_options {
  pass_backend backend = pass_backend::cpu;
  pass_tasks tasks = pass_tasks::node;
  canopy::scheduler_options scheduler;
  /// GPU lanes per node task (1, 2, 4 or 8; a twig's leaves get with_twig_lanes of it);
  /// 0 = upward_lanes(tree). The CPU backend runs every task on one thread whatever it says.
  int lanes = 0;
  /// Bucket tasks: the most points of one bucket (>= 1); 0 = default_bucket_points(points).
  int bucket_points = 0;
};

/// One pass and the clock of its backend: host steady clock around the run (cpu), CUDA events
/// around it on the legacy default stream, stream time (gpu).
struct timed_run {
  canopy::run_result result;
  double elapsed_us = 0;
};

class upward_runner {
 public:
  /// Builds the task graph and the scheduler for `tree` (which must outlive the runner); on the
  /// gpu backend also uploads the tree and allocates the payloads. Throws canopy::error for bad
  /// options, canopy::cuda_error when CUDA fails, std::runtime_error for a build without CUDA.
  upward_runner(const octree& tree, const upward_options& options);
  /// The gpu backend over device data the caller owns and shares (with other runners, its own
  /// kernels): `device_tree` must be `tree` uploaded; both must outlive the runner.
  upward_runner(const octree& tree, const device_octree& device_tree, device_payloads<float>& payloads,
                const upward_options& options);
  /// The gpu backend over a tree that is already on the device (device_octree_builder's result,
  /// or any device_octree) and the caller's payloads (at least node_count entries): the task
  /// kind's graph is built by kernels from the device arrays (device_pass_graphs.cuh), with no
  /// host copy of the tree. Both must outlive the runner (or the next set_tree). Lanes: options.lanes,
  /// else chosen from the tree's points per leaf. Host waits: the graph build's (see
  /// device_pass_graphs.cuh), and the scheduler's first allocation.
  upward_runner(const device_octree& device_tree, device_payloads<float>& payloads, const upward_options& options,
                CUstream_st* stream = nullptr);
  ~upward_runner();
  upward_runner(upward_runner&&) noexcept;
  upward_runner& operator=(upward_runner&&) noexcept;

  /// One pass, complete on return. `stream` (gpu only): the stream of the launch and of the wait.
  canopy::run_result run();
  canopy::run_result run(CUstream_st* stream);
  timed_run run_timed();
  /// gpu: enqueues one pass on `stream` and returns at once (no host wait; capturable into a CUDA
  /// graph); kernels after it on the stream see the payloads. cpu: runs it, complete on return.
  void run_async(CUstream_st* stream = nullptr);
  /// The result of the last pass that completed (gpu: call after synchronising its stream).
  canopy::run_result last_result() const;
  /// gpu, device-tree runners: the next passes run on another device tree (a simulation's next
  /// step), in stream order on `stream`: its graph is built on the device and the scheduler keeps
  /// its memory. The lanes stay those of the first tree. Throws std::logic_error for a runner
  /// made from a host octree.
  void set_tree(const device_octree& device_tree, device_payloads<float>& payloads, CUstream_st* stream = nullptr);
  /// The same for a tree device_octree_builder wrote (unmodified since), with no host wait for node
  /// tasks: the graph is copied from the builder's arrays on `stream`
  /// (make_device_upward_graph(built, graph, stream) into a graph the runner keeps), so a
  /// simulation step of build, set_tree and run_async waits for the host only in the builder.
  /// Other task kinds build their graph as the device_octree overload does (twig: host waits).
  void set_tree(const built_device_octree& built, device_payloads<float>& payloads, CUstream_st* stream = nullptr);

  /// The mode of the next runs; the graph, uploads and device state are kept.
  void set_mode(canopy::mode m);
  /// Every payload byte 0xff (NaN everywhere, a count no node has), complete on return: a node a
  /// run skips cannot pass a check on an earlier run's results.
  void poison();
  /// The payloads of the last run, indexed by node.
  std::vector<multipole<float>> download() const;

  pass_backend backend() const noexcept;
  pass_tasks tasks() const noexcept;
  const canopy::scheduler_options& options() const noexcept;
  /// Lanes that run one task on the GPU (the ops' group_size); 1 on the CPU.
  int lanes() const noexcept;
  /// GPU: blocks of the last launch (-1 before the first); CPU: worker threads.
  int grid() const noexcept;
  /// "4 CPU workers, node tasks" or "<device>, 132 blocks x 128 threads, twig tasks of 16 lanes,
  /// mode continuation".
  std::string describe() const;

  /// GPU: the device tree and payloads, for the caller's own kernels (valid while the runner
  /// lives). CPU: throws std::logic_error.
  octree_ref device_tree() const;
  multipole<float>* device_payloads_data() const;
  /// CPU: the payloads in host memory (no copy). GPU: throws std::logic_error.
  std::span<const multipole<float>> host_payloads() const;

  struct engine;

 private:
  std::unique_ptr<engine> engine_;
};

}  // namespace canopy::trees
