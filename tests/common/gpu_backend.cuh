// SPDX-License-Identifier: Apache-2.0
// The GPU backend as the scheduler contract (scheduler_contract.inc) sees it: canopy::gpu_scheduler
// running oracle_ops (trivially copyable, a __host__ __device__ operator()) on device memory.
// Tests skip themselves without a device (gpu_test).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "canopy/cuda/device_buffer.hpp"
#include "canopy/gpu_scheduler.cuh"
#include "canopy/task_graph.hpp"
#include "gpu_test.hpp"
#include "scheduler_oracle.hpp"

namespace canopy::test {

static_assert(std::is_trivially_copyable_v<oracle_ops>, "the kernel takes the op by value");
static_assert(std::is_trivially_copyable_v<tree_oracle_ops>, "the kernel takes the op by value");

struct gpu_backend {
  using scheduler = gpu_scheduler;
  using fixture = gpu_test;
  static constexpr const char* name = "gpu";
  /// Blocks for the tests that want "several": 0 = every co-resident block.
  static constexpr int several_workers = 0;
  /// The locked modes run on warp masters that share their block's private queue.
  static constexpr bool warp_masters = true;
  /// In warp-rounds, a DAG's lane groups are workers of their own (run_dag_by_groups): the idle
  /// ones pop what the others push, so a queue of capacity 1 may never fill.
  static constexpr bool group_workers = true;

  /// Grids each exactness test runs on: one block, one per SM, every co-resident block (of both
  /// kernels a tree's runs use: the oracle op's and tree_oracle_ops').
  static std::vector<int> grids(const task_graph& g, const scheduler_options& o) {
    const gpu_scheduler probe(g, o);
    return {1, probe.sm_count(), std::min(probe.max_blocks<oracle_ops>(o.mode), probe.max_blocks<tree_oracle_ops>(o.mode))};
  }

  /// The oracle's inputs and outputs for one graph, in device memory. Buffers hold at least one
  /// element so that an empty graph still has valid pointers.
  class workspace {
   public:
    explicit workspace(const task_graph& g)
        : n_(static_cast<std::size_t>(g.task_count())),
          pred_offsets_(g.pred_offsets()),
          preds_(g.predecessors().empty() ? std::vector<task_id>{0} : g.predecessors()),
          value_(std::max<std::size_t>(n_, 1)),
          runs_(std::max<std::size_t>(n_, 1)),
          early_(1) {}
    /// Clears the outputs on `stream`: the run that uses these ops must be ordered after it (a run
    /// on a non-blocking stream is not ordered after the legacy default stream).
    oracle_ops ops(cudaStream_t stream = nullptr) {
      static_assert(poison_value == 0, "fill_bytes(0) writes the poison");
      value_.fill_bytes(0, stream);
      runs_.fill_bytes(0, stream);
      early_.fill_bytes(0, stream);
      return oracle_ops{pred_offsets_.data(), preds_.data(), value_.data(), runs_.data(), early_.data()};
    }
    outcome read() const {
      outcome o{value_.download(), runs_.download(), early_.download()[0]};
      o.value.resize(n_);
      o.runs.resize(n_);
      return o;
    }

   private:
    std::size_t n_;
    canopy::device_buffer<std::int32_t> pred_offsets_;
    canopy::device_buffer<task_id> preds_;
    canopy::device_buffer<std::uint64_t> value_;
    canopy::device_buffer<unsigned> runs_;
    canopy::device_buffer<unsigned> early_;
  };
};

}  // namespace canopy::test
