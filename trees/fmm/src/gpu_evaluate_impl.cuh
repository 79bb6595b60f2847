// SPDX-License-Identifier: Apache-2.0
// gpu_evaluator's implementation for one order P (canopy/fmm/gpu_evaluate.hpp): the device copies
// of the tree, the lists and the DAG, the scheduler, and the two captured level graphs. Included
// by gpu_evaluate_p<P>.cu, one translation unit per order, so each compiles (and caches) alone.
#pragma once

#include <cuda_runtime.h>

#include <canopy/cuda/device_buffer.hpp>
#include <canopy/cuda/error.hpp>
#include <canopy/fmm/detail/gpu_tasks.cuh>
#include <canopy/fmm/evaluate.hpp>
#include <canopy/fmm/gpu_evaluate.hpp>
#include <canopy/fmm/task_dag.hpp>
#include <canopy/fmm/task_ops.hpp>
#include <canopy/gpu_scheduler.cuh>

#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace canopy::fmm::detail {

struct graph_exec_deleter {
  void operator()(cudaGraphExec_t g) const noexcept { (void)cudaGraphExecDestroy(g); }
};
using graph_exec = std::unique_ptr<std::remove_pointer_t<cudaGraphExec_t>, graph_exec_deleter>;

template <int P>
class gpu_evaluator_impl final : public gpu_evaluator_base {
 public:
  static constexpr int threads = 128;  // the baseline's blocks: 4 warps, a node per warp

  gpu_evaluator_impl(const trees::octree& tree, std::span<const cell_geometry> geometry, const interaction_lists& lists,
                     double eps2, const canopy::scheduler_options& options)
      : dag_(build_task_dag(tree, lists)),
        depth_(tree.depth),
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
        m2l_target_(dag_.m2l_target),
        down_node_(dag_.down_node),
        l2p_leaf_(dag_.l2p_leaf),
        p2p_leaf_(dag_.p2p_leaf),
        internal_node_(dag_.internal_node),
        has_local_(dag_.has_local),
        multipoles_(geometry.size()),
        locals_(geometry.size()),
        fields_(tree.points.size()),
        sched_(dag_.graph, options) {
    tasks_.d = task_data<float, P>{points_.data(), point_begin_.data(), point_count_.data(), first_child_.data(),
                                   child_count_.data(), parent_.data(), frames_.data(), m2l_offset_.data(),
                                   m2l_source_.data(), p2p_offset_.data(), p2p_source_.data(), dag_.ranges,
                                   m2l_target_.data(), down_node_.data(), l2p_leaf_.data(), p2p_leaf_.data(),
                                   has_local_.data(), static_cast<float>(eps2), multipoles_.data(), locals_.data(),
                                   fields_.data()};
    serial_ = capture(false, serial_kernels_);
    branch_ = capture(true, branch_kernels_);
  }

  void enqueue_dag(cudaStream_t stream) override { sched_.run_async(dag_ops<P>{tasks_}, stream); }

  void enqueue_level_graph(cudaStream_t stream, bool near_field_branch) override {
    CANOPY_CUDA_TRY(cudaGraphLaunch(near_field_branch ? branch_.get() : serial_.get(), stream));
  }

  canopy::run_result last_dag_result() const override { return sched_.last_result(); }
  std::vector<field<float>> fields() const override { return fields_.download(); }
  void poison(cudaStream_t stream) override {
    multipoles_.fill_bytes(0xff, stream);
    locals_.fill_bytes(0xff, stream);
    fields_.fill_bytes(0xff, stream);
  }
  int dag_blocks() const override { return sched_.last_grid(); }
  int level_graph_kernels(bool near_field_branch) const override {
    return near_field_branch ? branch_kernels_ : serial_kernels_;
  }
  const task_dag& dag() const override { return dag_; }

 private:
  static device_buffer<frame<float>> frames_of(std::span<const cell_geometry> geometry, const trees::octree& tree) {
    if (geometry.size() != static_cast<std::size_t>(tree.node_count()))
      throw std::invalid_argument("fmm::gpu_evaluator: geometry has " + std::to_string(geometry.size()) +
                                  " cells for a tree of " + std::to_string(tree.node_count()) + " nodes");
    std::vector<frame<float>> f;
    f.reserve(geometry.size());
    for (const cell_geometry& g : geometry) f.push_back(frame_of<float>(g));
    return device_buffer<frame<float>>(f);
  }

  template <task_kind K>
  void launch(const std::int32_t* nodes, std::int32_t count, cudaStream_t s, int& kernels) const {
    if (count <= 0) return;
    const auto blocks = static_cast<unsigned>((static_cast<std::int64_t>(count) * 32 + threads - 1) / threads);
    phase_kernel<P, K><<<blocks, threads, 0, s>>>(tasks_, nodes, count);
    CANOPY_CUDA_TRY(cudaGetLastError());
    ++kernels;
  }

  // The phase-by-phase evaluation, captured from a stream of our own: P2M over every leaf, M2M
  // level by level from the deepest internal level up, M2L over every target, L2L level by level
  // from the root down, then P2P (stores) and L2P (adds). With `branch`, P2P forks from the start
  // onto a second stream and joins before L2P.
  graph_exec capture(bool branch, int& kernels) {
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
      const auto p2p = [&](cudaStream_t on) {
        launch<task_kind::p2p>(p2p_leaf_.data(), static_cast<std::int32_t>(dag_.p2p_leaf.size()), on, kernels);
      };
      if (branch) {
        CANOPY_CUDA_TRY(cudaEventRecord(fork, s));
        CANOPY_CUDA_TRY(cudaStreamWaitEvent(near, fork));
        p2p(near);
        CANOPY_CUDA_TRY(cudaEventRecord(join, near));
      }
      launch<task_kind::up>(p2p_leaf_.data(), static_cast<std::int32_t>(dag_.p2p_leaf.size()), s, kernels);  // P2M
      for (int level = depth_; level >= 0; --level) {
        const std::int32_t b = dag_.internal_level_offset[static_cast<std::size_t>(level)];
        launch<task_kind::up>(internal_node_.data() + b, dag_.internal_level_offset[static_cast<std::size_t>(level) + 1] - b, s, kernels);
      }
      launch<task_kind::m2l>(m2l_target_.data(), static_cast<std::int32_t>(dag_.m2l_target.size()), s, kernels);
      for (int level = 0; level <= depth_; ++level) {
        const std::int32_t b = dag_.down_level_offset[static_cast<std::size_t>(level)];
        launch<task_kind::down>(down_node_.data() + b, dag_.down_level_offset[static_cast<std::size_t>(level) + 1] - b, s, kernels);
      }
      if (branch) CANOPY_CUDA_TRY(cudaStreamWaitEvent(s, join));
      else p2p(s);
      launch<task_kind::l2p>(l2p_leaf_.data(), static_cast<std::int32_t>(dag_.l2p_leaf.size()), s, kernels);
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

  task_dag dag_;
  int depth_;
  device_buffer<trees::point> points_;
  device_buffer<std::int32_t> point_begin_, point_count_, first_child_, child_count_, parent_;
  device_buffer<frame<float>> frames_;
  device_buffer<std::int32_t> m2l_offset_, m2l_source_, p2p_offset_, p2p_source_;
  device_buffer<std::int32_t> m2l_target_, down_node_, l2p_leaf_, p2p_leaf_, internal_node_;
  device_buffer<std::uint8_t> has_local_;
  device_buffer<multipole_expansion<float, P>> multipoles_;
  device_buffer<local_expansion<float, P>> locals_;
  device_buffer<field<float>> fields_;
  gpu_tasks<P> tasks_{};
  canopy::gpu_scheduler sched_;
  graph_exec serial_, branch_;
  int serial_kernels_ = 0, branch_kernels_ = 0;
};

template <int P>
std::unique_ptr<gpu_evaluator_base> make_gpu_evaluator(const trees::octree& tree, std::span<const cell_geometry> geometry,
                                                       const interaction_lists& lists, double eps2,
                                                       const canopy::scheduler_options& options) {
  return std::make_unique<gpu_evaluator_impl<P>>(tree, geometry, lists, eps2, options);
}

}  // namespace canopy::fmm::detail

// One order per translation unit (gpu_evaluate_p<P>.cu): CANOPY_FMM_INSTANTIATE_GPU_EVALUATOR(P).
#define CANOPY_FMM_INSTANTIATE_GPU_EVALUATOR(P)                                                                    \
  template std::unique_ptr<canopy::fmm::detail::gpu_evaluator_base> canopy::fmm::detail::make_gpu_evaluator<P>( \
      const canopy::trees::octree&, std::span<const canopy::fmm::cell_geometry>, const canopy::fmm::interaction_lists&, \
      double, const canopy::scheduler_options&);
