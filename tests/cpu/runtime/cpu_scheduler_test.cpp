// The CPU backend: the scheduler contract (tests/common/scheduler_contract.inc) on std::thread
// workers, plus what only the CPU backend has. Built under ThreadSanitizer too: the oracle op reads
// its predecessors' values with plain loads, so a missing release/acquire is a reported race.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "cpu_backend.hpp"

using backend = canopy::test::cpu_backend;
#include "scheduler_contract.inc"

CANOPY_INSTANTIATE_SCHEDULER_CONTRACT(cpu);

namespace {

// `blocks` is the worker count on the CPU; 0 means one per hardware thread (at least one).
TEST(CpuScheduler, BlocksAreWorkerThreads) {
  const auto g = canopy::task_graph::from_parents(canopy::testing::random_tree_parents(100, 1));
  for (const int blocks : {1, 3, 8}) {
    canopy::scheduler_options o;
    o.blocks = blocks;
    EXPECT_EQ(canopy::cpu_scheduler(g, o).worker_count(), blocks);
  }
  EXPECT_EQ(canopy::cpu_scheduler(g, canopy::scheduler_options{}).worker_count(),
            static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

}  // namespace
