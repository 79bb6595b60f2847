// SPDX-License-Identifier: Apache-2.0
// gpu_evaluator's implementation for one order P (canopy/fmm/gpu_evaluate.hpp): the device copies
// of the tree, the lists and the DAG (uploaded from the host, or built on the device from the
// GPU-built tree), the scheduler, and the two captured level graphs. Included
// by gpu_evaluate_p<P>.cu, one translation unit per order, so each compiles (and caches) alone.
#pragma once

#include <cuda_runtime.h>

#include <canopy/cuda/device_buffer.hpp>
#include <canopy/cuda/error.hpp>
#include <canopy/cuda/event.hpp>
#include <canopy/fmm/detail/gpu_tasks.cuh>
#include <canopy/fmm/device_lists.hpp>
#include <canopy/fmm/evaluate.hpp>
#include <canopy/fmm/gpu_evaluate.hpp>
#include <canopy/fmm/task_dag.hpp>
#include <canopy/fmm/task_ops.hpp>
#include <canopy/gpu_scheduler.cuh>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "device_copy.cuh"

namespace canopy::fmm::detail {

struct graph_exec_deleter {
  void operator()(cudaGraphExec_t g) const noexcept { (void)cudaGraphExecDestroy(g); }
};
using graph_exec = std::unique_ptr<std::remove_pointer_t<cudaGraphExec_t>, graph_exec_deleter>;

// Device geometry to the expansions' float frames (frame_of's conversion, element by element).
template <int = 0>
__global__ void frames_kernel(std::int32_t nodes, const cell_geometry* g, frame<float>* f) {
  const std::int32_t n = static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (n < nodes) f[n] = frame<float>{{float(g[n].center[0]), float(g[n].center[1]), float(g[n].center[2])}, float(g[n].scale)};
}

// Each node's height (the most levels below it to a leaf: 0 at a leaf), a thread a leaf climbing
// to the root with atomicMax; `height` zeroed before.
template <int = 0>
__global__ void heights_kernel(const std::int32_t* leaves, std::int32_t leaf_count, const std::int32_t* parent, int* height) {
  const std::int32_t i = static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= leaf_count) return;
  int h = 0;
  for (std::int32_t n = parent[leaves[i]]; n >= 0; n = parent[n]) {
    ++h;
    if (atomicMax(height + n, h) >= h) break;  // another leaf's climb got here with as many levels or more
  }
}

// Which tasks are urgent (gpu_evaluator::set_urgent_height): every up task, and the m2l and down
// tasks of nodes at least `min_height` levels above their deepest leaf; l2p and p2p never.
template <int = 0>
__global__ void urgent_kernel(task_ranges r, const std::int32_t* m2l_target, const std::int32_t* down_node, const int* height,
                              int min_height, std::uint8_t* urgent) {
  const std::int32_t t = static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (t >= r.end) return;
  bool u = false;
  switch (r.kind_of(t)) {
    case task_kind::up: u = true; break;
    case task_kind::m2l: u = height[m2l_target[t - r.m2l_begin]] >= min_height; break;
    case task_kind::down: u = height[down_node[t - r.down_begin]] >= min_height; break;
    default: break;
  }
  urgent[t] = u ? 1 : 0;
}

// The DAG's sources are the leaves' up tasks, then the p2p tasks longest first (task_dag.hpp):
// unless the caller chose (dealt_sources >= 0), only the up tasks are dealt out when a run starts.
inline canopy::scheduler_options dealing_up_tasks(canopy::scheduler_options o, std::int32_t leaves) {
  if (o.dealt_sources < 0) o.dealt_sources = leaves;
  return o;
}

template <int P>
class gpu_evaluator_impl final : public gpu_evaluator_base {
 public:
  static constexpr int threads = 128;  // the baseline's blocks: 4 warps, a node per warp

  // From a host tree: everything uploaded, the DAG built on the host.
  gpu_evaluator_impl(const trees::octree& tree, std::span<const cell_geometry> geometry, const interaction_lists& lists,
                     double eps2, const canopy::scheduler_options& options, const dag_shape& shape)
      : dag_(build_task_dag(tree, lists, shape)),
        depth_(tree.depth),
        ranges_(dag_->ranges),
        internal_level_offset_(dag_->internal_level_offset),
        down_level_offset_(dag_->down_level_offset),
        points_(tree.points),
        point_begin_(tree.point_begin),
        point_count_(tree.point_count),
        first_child_(tree.first_child),
        child_count_(tree.child_count),
        parent_(tree.parent),
        frames_(frames_of(geometry, tree)),
        m2l_offset_(lists.m2l_offset),
        m2l_source_(lists.m2l_source),
        p2p_offset_(lists.p2p_offset),
        p2p_source_(lists.p2p_source),
        m2l_target_(dag_->m2l_target),
        down_node_(dag_->down_node),
        l2p_leaf_(dag_->l2p_leaf),
        p2p_leaf_(dag_->p2p_leaf),
        p2p_point_(dag_->p2p_point),
        internal_node_(dag_->internal_node),
        leaves_(tree.leaves),
        has_local_(dag_->has_local),
        multipoles_(geometry.size()),
        locals_(geometry.size()),
        fields_(tree.points.size()) {
    sched_.emplace(dag_->graph, dealing_up_tasks(options, static_cast<std::int32_t>(tree.leaves.size())));
    finish(eps2);
  }

  // From the GPU-built tree: geometry, lists and DAG built on the device (device_lists.hpp); the
  // tree's arrays copied device to device, so the evaluator does not depend on `tree` afterwards.
  gpu_evaluator_impl(const trees::built_device_octree& tree, double theta, double eps2, const canopy::scheduler_options& options,
                     cudaStream_t stream, const dag_shape& shape, schedules runs, cudaMemPool_t scratch) {
    const trees::octree_ref t = tree.tree.ref();
    const auto nodes = static_cast<std::size_t>(t.node_count);
    device_buffer<cell_geometry> geometry = compute_cell_geometry(tree, stream, scratch);
    device_interaction_lists lists = build_interaction_lists(tree, geometry, theta, stream, scratch);
    const bool dag = runs == schedules::dag_and_level_graph;
    device_dag_.emplace(
        build_task_dag(tree, lists, stream, shape, dag ? dag_parts::maps_and_graph : dag_parts::maps_only, scratch));
    const device_task_dag& d = *device_dag_;
    depth_ = tree.tree.depth();
    ranges_ = d.ranges;
    internal_level_offset_ = d.internal_level_offset;
    down_level_offset_ = d.down_level_offset;
    points_ = device_copy(t.points, static_cast<std::size_t>(t.point_total), stream);
    point_begin_ = device_copy(t.point_begin, nodes, stream);
    point_count_ = device_copy(t.point_count, nodes, stream);
    first_child_ = device_copy(t.first_child, nodes, stream);
    child_count_ = device_copy(t.child_count, nodes, stream);
    parent_ = device_copy(t.parent, nodes, stream);
    leaves_ = device_copy(t.leaves, static_cast<std::size_t>(t.leaf_count), stream);
    frames_ = device_buffer<frame<float>>(nodes);
    if (nodes != 0) {
      frames_kernel<<<static_cast<unsigned>((nodes + threads - 1) / threads), threads, 0, stream>>>(t.node_count, geometry.data(),
                                                                                                   frames_.data());
      CANOPY_CUDA_TRY(cudaGetLastError());
    }
    m2l_offset_ = std::move(lists.m2l_offset);
    m2l_source_ = std::move(lists.m2l_source);
    p2p_offset_ = std::move(lists.p2p_offset);
    p2p_source_ = std::move(lists.p2p_source);
    multipoles_ = device_buffer<multipole_expansion<float, P>>(nodes);
    locals_ = device_buffer<local_expansion<float, P>>(nodes);
    fields_ = device_buffer<field<float>>(static_cast<std::size_t>(t.point_total));
    if (dag) {
      const canopy::device_task_graph graph = canopy::device_task_graph::from_trusted_dag(
          d.succ_offset.data(), d.successor.data(), d.task_count(), d.edge_count, d.dependency_count.data(), d.sources.data(),
          d.source_count, d.sink_count, stream);
      sched_.emplace(graph, dealing_up_tasks(options, t.leaf_count), stream);  // copies the graph and synchronises `stream`
    } else {
      CANOPY_CUDA_TRY(cudaStreamSynchronize(stream));  // as the scheduler's copy does: the tree's copies are done
    }
    finish(eps2);
  }

  void enqueue_dag(cudaStream_t stream) override {
    if (!sched_) throw std::logic_error("fmm::gpu_evaluator: built for the level graph alone (schedules::level_graph): no DAG to run");
    gpu_tasks<P> tasks = tasks_;
    tasks.staged = dag_staged_;
    sched_->run_async(dag_ops<P>{tasks}, stream);
  }

  void enqueue_level_graph(cudaStream_t stream, bool near_field_branch) override {
    CANOPY_CUDA_TRY(cudaGraphLaunch(level_graph(near_field_branch), stream));
  }

  // Each phase alone, between events, every body's clock cycles counted per phase (clock slots
  // [clock_slots p, clock_slots (p + 1)) for phase p, as gpu_tasks counts them by kind), then the busy fraction of the
  // phase's resident warp slots: the body cycles over (time x SM clock x the warps its kernel keeps
  // resident on the whole GPU, cudaOccupancyMaxActiveBlocksPerMultiprocessor).
  level_phase_times time_level_phases(cudaStream_t stream) override {
    level_phase_times t;
    std::array<cuda_event, 7> e;
    device_buffer<unsigned long long> slots(6 * clock_slots);  // six phases
    slots.fill_bytes(0, stream);
    int kernels = 0, phase = -1;
    std::array<task_kind, 6> kind_of{};
    std::array<int, 6> resident{};  // warps of the phase's kernel an SM keeps at once
    for_each_launch([&](int p, auto kind, const std::int32_t* nodes, std::int32_t count) {
      for (; phase < p; ++phase) e[static_cast<std::size_t>(phase + 1)].record(stream);  // the phase's start
      kind_of[static_cast<std::size_t>(p)] = decltype(kind)::value;
      resident[static_cast<std::size_t>(p)] = resident_warps<decltype(kind)::value>();
      launch<decltype(kind)::value>(nodes, count, stream, kernels, slots.data() + clock_slots * p);
      if (p == 1) t.m2m_levels += count > 0;
      if (p == 3) t.l2l_levels += count > 0;
    });
    e[6].record(stream);
    CANOPY_CUDA_TRY(cudaStreamSynchronize(stream));
    const std::vector<unsigned long long> c = slots.download();
    int device = 0, sms = 0, khz = 0;
    CANOPY_CUDA_TRY(cudaGetDevice(&device));
    CANOPY_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    CANOPY_CUDA_TRY(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device));
    for (std::size_t p = 0; p < 6; ++p) {
      t.ms[p] = static_cast<double>(elapsed_ms(e[p], e[p + 1]));
      const auto k = static_cast<std::size_t>(kind_of[p]);
      const std::size_t slot = clock_slots * p + clock_slots_per_kind * k;
      const unsigned long long cycles = c[slot];
      t.clocks.cycles[k] += cycles;
      t.clocks.tasks[k] += c[slot + 1];
      t.clocks.longest[k] = std::max(t.clocks.longest[k], c[slot + 2]);
      const double slot_cycles = t.ms[p] * 1e-3 * khz * 1e3 * sms * resident[p];
      t.busy[p] = slot_cycles > 0 ? static_cast<double>(cycles) / slot_cycles : 0;
    }
    return t;
  }

  void set_task_clocks(bool on) override {
    if (on) {
      if (clocks_.size() == 0) clocks_ = device_buffer<unsigned long long>(clock_slots);
      CANOPY_CUDA_TRY(cudaMemset(clocks_.data(), 0, clocks_.bytes()));
      tasks_.clocks = clocks_.data();
    } else {
      tasks_.clocks = nullptr;
    }
  }
  void set_task_timeline(bool on) override {
    if (on) {
      if (timeline_.size() == 0) timeline_ = device_buffer<unsigned long long>(2 * static_cast<std::size_t>(std::max(ranges_.end, 1)));
      CANOPY_CUDA_TRY(cudaMemset(timeline_.data(), 0, timeline_.bytes()));
      tasks_.timeline = timeline_.data();
    } else {
      tasks_.timeline = nullptr;
    }
  }
  std::vector<unsigned long long> read_task_timeline() override {
    if (timeline_.size() == 0) return {};
    CANOPY_CUDA_TRY(cudaDeviceSynchronize());
    std::vector<unsigned long long> v = timeline_.download();
    v.resize(2 * static_cast<std::size_t>(ranges_.end));
    return v;
  }
  task_clocks read_task_clocks() override {
    task_clocks c;
    if (clocks_.size() == 0) return c;
    CANOPY_CUDA_TRY(cudaDeviceSynchronize());
    const std::vector<unsigned long long> v = clocks_.download();
    for (int k = 0; k < 5; ++k) {
      const auto slot = static_cast<std::size_t>(clock_slots_per_kind * k);
      c.cycles[k] = v[slot];
      c.tasks[k] = v[slot + 1];
      c.longest[k] = v[slot + 2];
    }
    return c;
  }

  void set_urgent_height(int min_height) override {
    urgent_height_ = min_height;
    if (min_height < 0 || ranges_.end == 0) {
      tasks_.urgent = nullptr;
      return;
    }
    const auto nodes = static_cast<std::size_t>(ranges_.m2l_begin);
    if (height_.size() == 0) {
      height_ = device_buffer<int>(std::max<std::size_t>(nodes, 1));
      height_.fill_bytes(0);
      const auto leaves = static_cast<std::int32_t>(leaves_.size());
      if (leaves > 0) {
        heights_kernel<<<static_cast<unsigned>((leaves + threads - 1) / threads), threads>>>(leaves_.data(), leaves,
                                                                                            parent_.data(), height_.data());
        CANOPY_CUDA_TRY(cudaGetLastError());
      }
      urgent_ = device_buffer<std::uint8_t>(static_cast<std::size_t>(ranges_.end));
    }
    urgent_kernel<<<static_cast<unsigned>((ranges_.end + threads - 1) / threads), threads>>>(
        ranges_, m2l_target_ptr_, down_node_ptr_, height_.data(), min_height, urgent_.data());
    CANOPY_CUDA_TRY(cudaGetLastError());
    CANOPY_CUDA_TRY(cudaDeviceSynchronize());
    tasks_.urgent = urgent_.data();
  }
  int urgent_height() const override { return urgent_height_; }

  void set_staged_kinds(unsigned dag, unsigned level_graph) override {
    for (const unsigned kinds : {dag, level_graph})
      if ((kinds & ~all_staged_kinds) != 0)
        throw std::invalid_argument("fmm::gpu_evaluator: staged kinds " + std::to_string(kinds) +
                                    " name a kind that does not stage (bits of " + std::to_string(all_staged_kinds) + " only)");
    if (level_graph != graph_staged_) {
      CANOPY_CUDA_TRY(cudaDeviceSynchronize());  // no captured graph still runs when it is dropped
      serial_ = graph_exec{};  // captured with the old setting: again on the next use
      branch_ = graph_exec{};
    }
    dag_staged_ = dag;  // both only once nothing can throw
    graph_staged_ = level_graph;
  }
  unsigned dag_staged_kinds() const override { return dag_staged_; }
  unsigned level_graph_staged_kinds() const override { return graph_staged_; }

  canopy::run_result last_dag_result() const override { return sched_ ? sched_->last_result() : canopy::run_result{}; }
  std::vector<field<float>> fields() const override { return fields_.download(); }
  const field<float>* device_fields() const override { return fields_.data(); }
  void poison(cudaStream_t stream) override {
    multipoles_.fill_bytes(0xff, stream);
    locals_.fill_bytes(0xff, stream);
    fields_.fill_bytes(0xff, stream);
  }
  int dag_blocks() const override { return sched_ ? sched_->last_grid() : 0; }
  bool runs_dag() const override { return sched_.has_value(); }
  int level_graph_kernels(bool near_field_branch) const override {
    (void)level_graph(near_field_branch);
    return near_field_branch ? branch_kernels_ : serial_kernels_;
  }
  // The device path's DAG is downloaded on the first call (synchronous; for checks).
  const task_dag& dag() const override {
    if (!sched_) throw std::logic_error("fmm::gpu_evaluator: built for the level graph alone (schedules::level_graph): no DAG");
    if (!dag_) dag_ = device_dag_->download();
    return *dag_;
  }
  task_ranges ranges() const override { return ranges_; }

 private:
  // The task view over the device arrays, and the two level graphs.
  void finish(double eps2) {
    const std::int32_t* m2l_target = device_dag_ ? device_dag_->m2l_target.data() : m2l_target_.data();
    const std::int32_t* down_node = device_dag_ ? device_dag_->down_node.data() : down_node_.data();
    const std::int32_t* l2p_leaf = device_dag_ ? device_dag_->l2p_leaf.data() : l2p_leaf_.data();
    const std::int32_t* p2p_leaf = device_dag_ ? device_dag_->p2p_leaf.data() : p2p_leaf_.data();
    const std::int32_t* p2p_point = device_dag_ ? device_dag_->p2p_point.data() : p2p_point_.data();
    const std::uint8_t* has_local = device_dag_ ? device_dag_->has_local.data() : has_local_.data();
    internal_node_ptr_ = device_dag_ ? device_dag_->internal_node.data() : internal_node_.data();
    m2l_target_ptr_ = m2l_target;
    down_node_ptr_ = down_node;
    l2p_leaf_ptr_ = l2p_leaf;
    tasks_.d = task_data<float, P>{points_.data(), point_begin_.data(), point_count_.data(), first_child_.data(),
                                   child_count_.data(), parent_.data(), frames_.data(), m2l_offset_.data(),
                                   m2l_source_.data(), p2p_offset_.data(), p2p_source_.data(), ranges_,
                                   m2l_target, down_node, l2p_leaf, p2p_leaf, p2p_point,
                                   has_local, static_cast<float>(eps2), multipoles_.data(), locals_.data(),
                                   fields_.data()};
    set_urgent_height(default_urgent_height);
  }

  // The level graph, captured on its first use: an evaluator that only runs the DAG (the N-body
  // step builds one per tree) never pays for the two captures and instantiations.
  cudaGraphExec_t level_graph(bool branch) const {
    graph_exec& g = branch ? branch_ : serial_;
    if (!g) g = capture(branch, branch ? branch_kernels_ : serial_kernels_);
    return g.get();
  }

  static device_buffer<frame<float>> frames_of(std::span<const cell_geometry> geometry, const trees::octree& tree) {
    if (geometry.size() != static_cast<std::size_t>(tree.node_count()))
      throw std::invalid_argument("fmm::gpu_evaluator: geometry has " + std::to_string(geometry.size()) +
                                  " cells for a tree of " + std::to_string(tree.node_count()) + " nodes");
    std::vector<frame<float>> f;
    f.reserve(geometry.size());
    for (const cell_geometry& g : geometry) f.push_back(frame_of<float>(g));
    return device_buffer<frame<float>>(f);
  }

  // The level-by-level evaluation's kernel launches in order, f(phase, kind, nodes, count) with
  // the phase's index in level_phase_times (0 P2M, 1 M2M, 2 M2L, 3 L2L, 4 P2P, 5 L2P) and the kind
  // as a std::integral_constant: P2M over every leaf, M2M level by level from the deepest internal
  // level up, M2L over every target, L2L level by level from the root down, P2P over the DAG's
  // p2p tasks (stores; nodes null: the kernel runs task indices), L2P (adds). The captured graphs
  // and time_level_phases both launch this sequence.
  template <class F>
  void for_each_launch(F&& f) const {
    using k = task_kind;
    f(0, std::integral_constant<k, k::up>{}, leaves_.data(), static_cast<std::int32_t>(leaves_.size()));
    for (int level = depth_; level >= 0; --level) {
      const std::int32_t b = internal_level_offset_[static_cast<std::size_t>(level)];
      f(1, std::integral_constant<k, k::up>{}, internal_node_ptr_ + b, internal_level_offset_[static_cast<std::size_t>(level) + 1] - b);
    }
    f(2, std::integral_constant<k, k::m2l>{}, m2l_target_ptr_, ranges_.down_begin - ranges_.m2l_begin);
    for (int level = 0; level <= depth_; ++level) {
      const std::int32_t b = down_level_offset_[static_cast<std::size_t>(level)];
      f(3, std::integral_constant<k, k::down>{}, down_node_ptr_ + b, down_level_offset_[static_cast<std::size_t>(level) + 1] - b);
    }
    f(4, std::integral_constant<k, k::p2p>{}, nullptr, p2p_tasks());
    f(5, std::integral_constant<k, k::l2p>{}, l2p_leaf_ptr_, ranges_.p2p_begin - ranges_.l2p_begin);
  }

  std::int32_t p2p_tasks() const { return ranges_.end - ranges_.p2p_begin; }

  // Warps of phase_kernel<P, K> resident on one SM at once (its blocks of `threads`).
  template <task_kind K>
  static int resident_warps() {
    int blocks = 0;
    CANOPY_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, phase_kernel<P, K>, threads, 0));
    return blocks * (threads / 32);
  }

  // One phase kernel over `count` nodes; `clocks`: where its bodies count their cycles (null: not
  // counted, as in the captured graphs).
  template <task_kind K>
  void launch(const std::int32_t* nodes, std::int32_t count, cudaStream_t s, int& kernels,
              unsigned long long* clocks = nullptr) const {
    if (count <= 0) return;
    const auto blocks = static_cast<unsigned>((static_cast<std::int64_t>(count) * 32 + threads - 1) / threads);
    gpu_tasks<P> tasks = tasks_;
    tasks.clocks = clocks;
    tasks.staged = graph_staged_;
    phase_kernel<P, K><<<blocks, threads, 0, s>>>(tasks, nodes, count);
    CANOPY_CUDA_TRY(cudaGetLastError());
    ++kernels;
  }

  // The phase-by-phase evaluation, captured from a stream of our own: P2M over every leaf, M2M
  // level by level from the deepest internal level up, M2L over every target, L2L level by level
  // from the root down, then P2P (stores) and L2P (adds). With `branch`, P2P forks from the start
  // onto a second stream and joins before L2P.
  graph_exec capture(bool branch, int& kernels) const {
    kernels = 0;
    cudaStream_t s = nullptr, near = nullptr;
    cudaEvent_t fork = nullptr, join = nullptr;
    CANOPY_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CANOPY_CUDA_TRY(cudaStreamCreateWithFlags(&near, cudaStreamNonBlocking));
    CANOPY_CUDA_TRY(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    CANOPY_CUDA_TRY(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    try {
      CANOPY_CUDA_TRY(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      for_each_launch([&](int p, auto kind, const std::int32_t* nodes, std::int32_t count) {
        constexpr task_kind K = decltype(kind)::value;
        if (branch && K == task_kind::p2p) return;  // launched on the branch below, before the first
        if (branch && p == 0) {
          CANOPY_CUDA_TRY(cudaEventRecord(fork, s));
          CANOPY_CUDA_TRY(cudaStreamWaitEvent(near, fork));
          launch<task_kind::p2p>(nullptr, p2p_tasks(), near, kernels);
          CANOPY_CUDA_TRY(cudaEventRecord(join, near));
        }
        if (branch && K == task_kind::l2p) CANOPY_CUDA_TRY(cudaStreamWaitEvent(s, join));
        launch<K>(nodes, count, s, kernels);
      });
      CANOPY_CUDA_TRY(cudaStreamEndCapture(s, &graph));
      CANOPY_CUDA_TRY(cudaGraphInstantiate(&exec, graph, 0));
    } catch (...) {
      cudaGraph_t dropped = nullptr;
      (void)cudaStreamEndCapture(s, &dropped);  // leaves the stream out of capture mode
      if (dropped != nullptr) (void)cudaGraphDestroy(dropped);
      if (graph != nullptr) (void)cudaGraphDestroy(graph);
      (void)cudaEventDestroy(fork);
      (void)cudaEventDestroy(join);
      (void)cudaStreamDestroy(near);
      (void)cudaStreamDestroy(s);
      throw;
    }
    (void)cudaGraphDestroy(graph);
    (void)cudaEventDestroy(fork);
    (void)cudaEventDestroy(join);
    (void)cudaStreamDestroy(near);
    (void)cudaStreamDestroy(s);
    return graph_exec(exec);
  }

  mutable std::optional<task_dag> dag_;      // the host path's DAG; the device path's once downloaded
  std::optional<device_task_dag> device_dag_;  // the device path's DAG (its arrays are the tasks' maps)
  int depth_ = 0;
  task_ranges ranges_{};
  std::vector<std::int32_t> internal_level_offset_, down_level_offset_;
  device_buffer<trees::point> points_;
  device_buffer<std::int32_t> point_begin_, point_count_, first_child_, child_count_, parent_;
  device_buffer<frame<float>> frames_;
  device_buffer<std::int32_t> m2l_offset_, m2l_source_, p2p_offset_, p2p_source_;
  device_buffer<std::int32_t> m2l_target_, down_node_, l2p_leaf_, p2p_leaf_, p2p_point_, internal_node_;  // the host path's uploads
  device_buffer<std::int32_t> leaves_;  // the tree's leaves (P2M's list in the level graph)
  device_buffer<std::uint8_t> has_local_;
  device_buffer<multipole_expansion<float, P>> multipoles_;
  device_buffer<local_expansion<float, P>> locals_;
  device_buffer<field<float>> fields_;
  const std::int32_t *m2l_target_ptr_ = nullptr, *down_node_ptr_ = nullptr, *l2p_leaf_ptr_ = nullptr,
                     *internal_node_ptr_ = nullptr;
  gpu_tasks<P> tasks_{};
  unsigned dag_staged_ = default_dag_staged_kinds;            // set_staged_kinds
  unsigned graph_staged_ = default_level_graph_staged_kinds;
  device_buffer<unsigned long long> clocks_;  // set_task_clocks' counts
  device_buffer<unsigned long long> timeline_;  // set_task_timeline's times
  device_buffer<int> height_;  // each node's height (heights_kernel), for set_urgent_height
  device_buffer<std::uint8_t> urgent_;  // per task: urgent (urgent_kernel)
  int urgent_height_ = -1;
  std::optional<canopy::gpu_scheduler> sched_;
  mutable graph_exec serial_, branch_;  // captured on first use (level_graph)
  mutable int serial_kernels_ = 0, branch_kernels_ = 0;
};

template <int P>
std::unique_ptr<gpu_evaluator_base> make_gpu_evaluator(const trees::octree& tree, std::span<const cell_geometry> geometry,
                                                       const interaction_lists& lists, double eps2,
                                                       const canopy::scheduler_options& options, const dag_shape& shape) {
  return std::make_unique<gpu_evaluator_impl<P>>(tree, geometry, lists, eps2, options, shape);
}

template <int P>
std::unique_ptr<gpu_evaluator_base> make_gpu_evaluator(const trees::built_device_octree& tree, double theta, double eps2,
                                                       const canopy::scheduler_options& options, cudaStream_t stream,
                                                       const dag_shape& shape, schedules runs, cudaMemPool_t scratch) {
  return std::make_unique<gpu_evaluator_impl<P>>(tree, theta, eps2, options, stream, shape, runs, scratch);
}

}  // namespace canopy::fmm::detail

// One order per translation unit (gpu_evaluate_p<P>.cu): CANOPY_FMM_INSTANTIATE_GPU_EVALUATOR(P).
#define CANOPY_FMM_INSTANTIATE_GPU_EVALUATOR(P)                                                                    \
  template std::unique_ptr<canopy::fmm::detail::gpu_evaluator_base> canopy::fmm::detail::make_gpu_evaluator<P>( \
      const canopy::trees::octree&, std::span<const canopy::fmm::cell_geometry>, const canopy::fmm::interaction_lists&, \
      double, const canopy::scheduler_options&, const canopy::fmm::dag_shape&);                                    \
  template std::unique_ptr<canopy::fmm::detail::gpu_evaluator_base> canopy::fmm::detail::make_gpu_evaluator<P>( \
      const canopy::trees::built_device_octree&, double, double, const canopy::scheduler_options&, cudaStream_t,    \
      const canopy::fmm::dag_shape&, canopy::fmm::schedules, cudaMemPool_t);
