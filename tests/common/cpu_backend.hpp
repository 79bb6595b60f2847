// SPDX-License-Identifier: Apache-2.0
// The CPU backend as the scheduler contract (scheduler_contract.inc) sees it: canopy::cpu_scheduler
// running oracle_ops on host memory.
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "canopy/cpu_scheduler.hpp"
#include "canopy/task_graph.hpp"
#include "scheduler_oracle.hpp"

namespace canopy::test {

struct cpu_backend {
  using scheduler = cpu_scheduler;
  using fixture = ::testing::Test;
  static constexpr const char* name = "cpu";
  /// Workers for the tests that want "several": more than one, and more than this machine's cores
  /// may have, so workers interleave.
  static constexpr int several_workers = 3;
  /// Whether the locked modes' workers are GPU warp masters that share a block's private queue
  /// (which can absorb ready tasks a round at a time); a CPU worker is a block of one.
  static constexpr bool warp_masters = false;
  /// A CPU worker runs a DAG's ready tasks as the block loop does in every mode (no separate
  /// workers per lane group, as the GPU's warp-rounds has).
  static constexpr bool group_workers = false;

  /// Worker counts each exactness test runs on.
  static std::vector<int> grids(const task_graph&, const scheduler_options&) { return {1, 2, 4, 8}; }

  /// The oracle's inputs and outputs for one graph, in host memory.
  class workspace {
   public:
    explicit workspace(const task_graph& g)
        : pred_offsets_(g.pred_offsets()),
          preds_(g.predecessors()),
          value_(static_cast<std::size_t>(g.task_count())),
          runs_(static_cast<std::size_t>(g.task_count())) {}
    /// Clears the outputs and returns the op that writes them.
    oracle_ops ops() {
      std::fill(value_.begin(), value_.end(), poison_value);
      std::fill(runs_.begin(), runs_.end(), 0u);
      early_ = 0;
      return oracle_ops{pred_offsets_.data(), preds_.data(), value_.data(), runs_.data(), &early_};
    }
    outcome read() const { return outcome{value_, runs_, early_}; }

   private:
    std::vector<std::int32_t> pred_offsets_;
    std::vector<task_id> preds_;
    std::vector<std::uint64_t> value_;
    std::vector<unsigned> runs_;
    unsigned early_ = 0;
  };
};

}  // namespace canopy::test
