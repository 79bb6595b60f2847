// SPDX-License-Identifier: Apache-2.0
// After a sticky CUDA error (a kernel that traps corrupts the process's context for good), the
// scheduler reports it as a typed status and never crashes the process: run() returns
// status::device_error with CUDA's message, run_async() and a new scheduler's constructor throw
// canopy::cuda_error (a canopy::error with status::device_error). A sticky error cannot be undone
// inside a process, so each case runs in a child process of its own (a death test in the
// "threadsafe" style: the child re-executes this binary from the start, with a fresh CUDA context)
// and exits 0 only when every expectation held, printing what it saw.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "canopy/gpu_scheduler.cuh"
#include "gpu_test.hpp"

namespace {

struct count_ops {
  unsigned int* runs;
  __device__ void operator()(canopy::task_id t) const { atomicAdd(runs + t, 1u); }
};

__global__ void trap_kernel() { __trap(); }

std::vector<canopy::task_id> chain(int n) {
  std::vector<canopy::task_id> parent(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) parent[static_cast<std::size_t>(i)] = i + 1 < n ? i + 1 : canopy::no_task;
  return parent;
}

[[noreturn]] void fail_child(const std::string& what) {
  std::fprintf(stderr, "sticky-error child: %s\n", what.c_str());
  std::exit(1);
}

// The child's whole life: a working scheduler, a trap, then every entry point.
void after_a_sticky_error(canopy::mode m) {
  const auto g = canopy::task_graph::from_parents(chain(100));
  canopy::scheduler_options opt;
  opt.mode = m;
  canopy::gpu_scheduler sched(g, opt);
  canopy::device_buffer<unsigned int> runs(100);
  runs.fill_bytes(0);
  const canopy::run_result before = sched.run(count_ops{runs.data()});
  if (!before.ok()) fail_child("the run before the trap failed: " + before.message);

  trap_kernel<<<1, 1>>>();
  const cudaError_t trapped = cudaDeviceSynchronize();
  if (trapped == cudaSuccess) fail_child("the trap kernel did not fail");
  if (cudaDeviceSynchronize() == cudaSuccess) fail_child("the trap's error is not sticky on this device");

  canopy::run_result after;
  try {
    after = sched.run(count_ops{runs.data()});
  } catch (const std::exception& e) {
    fail_child(std::string("run() threw after a sticky error: ") + e.what());
  }
  if (after.code != canopy::status::device_error) fail_child("run() returned " + std::string(canopy::to_string(after.code)) + ": " + after.message);
  if (after.message.empty()) fail_child("run()'s device_error has no message");

  try {
    (void)sched.run_async(count_ops{runs.data()});
    fail_child("run_async() returned normally after a sticky error");
  } catch (const canopy::error& e) {
    if (e.code() != canopy::status::device_error) fail_child("run_async() threw " + std::string(canopy::to_string(e.code())));
  }
  try {
    canopy::gpu_scheduler another(g, opt);
    fail_child("a new scheduler was constructed after a sticky error");
  } catch (const canopy::error& e) {
    if (e.code() != canopy::status::device_error) fail_child("the constructor threw " + std::string(canopy::to_string(e.code())));
  }
  std::fprintf(stderr, "sticky-error child (%s): trap -> %s; run() -> device_error: %s; run_async and the constructor threw device_error\n",
               std::string(canopy::to_string(m)).c_str(), cudaGetErrorName(trapped), after.message.c_str());
  std::exit(0);
}

TEST(StickyError, EveryEntryPointReportsADeviceErrorInEveryMode) {
  CANOPY_SKIP_WITHOUT_GPU();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (const canopy::mode m : canopy::all_modes) {
    EXPECT_EXIT(after_a_sticky_error(m), ::testing::ExitedWithCode(0), "sticky-error child \\(") << canopy::to_string(m);
  }
}

}  // namespace
