// SPDX-License-Identifier: Apache-2.0
// The GPU scheduler at the edges of the device:
//   * a grid one block over the co-resident maximum is refused with status invalid_argument
//     before launch (no task runs), for every mode and block sizes 64..1024, and the maximum
//     itself runs exactly;
//   * a run beside another kernel that holds SMs (a spinning kernel on another stream, released
//     through a flag in mapped host memory) completes or times out cleanly: status ok (exact) or
//     timeout, and the run returns. A run still going 20 s past its deadline is a hang: the test
//     then releases the spinner (so the process can end) and fails.
#include <gtest/gtest.h>

#include <cuda/atomic>

#include <chrono>
#include <cstdio>
#include <future>
#include <string>
#include <thread>

#include "canopy/gpu_scheduler.cuh"
#include "stress_common.cuh"

namespace {

using canopy::mode;
using canopy::task_id;
using canopy::testing::mix_ops;
using canopy::testing::mix_run;

class SchedulerLimits : public canopy::test::gpu_test {};

std::string name_of(mode m, int threads) { return std::string(canopy::to_string(m)) + " threads " + std::to_string(threads); }

TEST_F(SchedulerLimits, OneBlockOverTheCoResidentMaximumIsRefusedBeforeLaunch) {
  const auto g = canopy::task_graph::from_parents(canopy::testing::random_tree_parents(3000, 5));
  const auto expect = canopy::testing::reference_values(g);
  mix_run run(g);
  for (mode m : canopy::all_modes) {
    for (int threads : {64, 128, 256, 512, 1024}) {
      canopy::scheduler_options opt;
      opt.mode = m;
      opt.threads_per_block = threads;
      canopy::gpu_scheduler probe(g, opt);
      const int max = probe.max_blocks<mix_ops>(m);
      if (max == 0) {  // this kernel cannot run this block size at all: refused, never launched
        const auto r = probe.run(run.ops());
        EXPECT_EQ(r.code, canopy::status::invalid_argument) << name_of(m, threads) << ": " << r.message;
        continue;
      }
      opt.blocks = max + 1;
      canopy::gpu_scheduler over(g, opt);
      const auto r = over.run(run.ops());
      EXPECT_EQ(r.code, canopy::status::invalid_argument) << name_of(m, threads) << ": " << r.message;
      EXPECT_NE(r.message.find("co-resident"), std::string::npos) << r.message;
      CANOPY_TEST_CUDA(cudaDeviceSynchronize());
      const auto runs = run.runs.download();
      unsigned total = 0;
      for (task_id t = 0; t < g.task_count(); ++t) total += runs[t];
      EXPECT_EQ(total, 0u) << name_of(m, threads) << ": a refused run executed tasks";
      opt.blocks = max;  // the maximum itself is fine
      canopy::gpu_scheduler at(g, opt);
      const auto ok = at.run(run.ops());
      ASSERT_TRUE(ok.ok()) << name_of(m, threads) << " at " << max << " blocks: " << ok.message;
      EXPECT_EQ(run.check(expect), "") << name_of(m, threads) << " at " << max << " blocks";
    }
  }
}

// Holds its SM until *release is set (or 60 s pass, so that a broken test cannot wedge the GPU).
__global__ void spinner(const int* release, int* started) {
  if (threadIdx.x == 0) {
    cuda::atomic_ref<int, cuda::thread_scope_system>(*started).fetch_add(1, cuda::std::memory_order_relaxed);
    const std::uint64_t start = canopy::testing::global_ns();
    while (cuda::atomic_ref<const int, cuda::thread_scope_system>(*release).load(cuda::std::memory_order_relaxed) == 0) {
      if (canopy::testing::global_ns() - start > 60ull * 1000 * 1000 * 1000) break;
      __nanosleep(10000);
    }
  }
  __syncthreads();
}

TEST_F(SchedulerLimits, RunBesideAKernelHoldingSMsCompletesOrTimesOut) {
  int device = 0;
  cudaDeviceProp prop{};
  CANOPY_TEST_CUDA(cudaGetDevice(&device));
  CANOPY_TEST_CUDA(cudaGetDeviceProperties(&prop, device));
  int* flags = nullptr;  // [0] release, [1] blocks started; mapped pinned host memory
  CANOPY_TEST_CUDA(cudaHostAlloc(&flags, 2 * sizeof(int), cudaHostAllocMapped));
  flags[0] = flags[1] = 0;
  int* dflags = nullptr;
  CANOPY_TEST_CUDA(cudaHostGetDevicePointer(&dflags, flags, 0));
  auto release = [&] { cuda::atomic_ref<int, cuda::thread_scope_system>(flags[0]).store(1, cuda::std::memory_order_relaxed); };

  // One spinner block per SM on half of the SMs: all the shared memory a block may have keeps
  // any other block off those SMs.
  const int held = std::max(1, prop.multiProcessorCount / 2);
  const std::size_t smem = prop.sharedMemPerBlockOptin;
  CANOPY_TEST_CUDA(cudaFuncSetAttribute(spinner, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  cudaStream_t side = nullptr, main_stream = nullptr;
  CANOPY_TEST_CUDA(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  CANOPY_TEST_CUDA(cudaStreamCreateWithFlags(&main_stream, cudaStreamNonBlocking));
  spinner<<<held, 1024, smem, side>>>(dflags, dflags + 1);
  CANOPY_TEST_CUDA(cudaGetLastError());
  for (int i = 0; i < 5000 && cuda::atomic_ref<int, cuda::thread_scope_system>(flags[1]).load(cuda::std::memory_order_relaxed) < held; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::printf("spinner: %d of %d blocks resident, holding %d of %d SMs\n", flags[1], held, held, prop.multiProcessorCount);

  const auto g = canopy::task_graph::from_parents(canopy::testing::random_tree_parents(20000, 6));
  const auto expect = canopy::testing::reference_values(g);
  bool hung = false;
  for (mode m : {mode::lockfree, mode::continuation, mode::shared_queues, mode::mutex}) {
    mix_run run(g);
    canopy::scheduler_options opt;
    opt.mode = m;
    opt.deadline = std::chrono::milliseconds(2000);  // blocks = 0: the full co-resident grid, which cannot all fit now
    canopy::gpu_scheduler sched(g, opt);
    const mix_ops ops = run.ops();
    CANOPY_TEST_CUDA(cudaDeviceSynchronize());
    auto pending = std::async(std::launch::async, [&] { return sched.run(ops, main_stream); });
    if (pending.wait_for(opt.deadline + std::chrono::seconds(20)) != std::future_status::ready) {
      hung = true;
      ADD_FAILURE() << canopy::to_string(m) << ": the run neither finished nor timed out 20 s past its deadline "
                    << "while another kernel held " << held << " SMs (a hang); releasing the spinner";
      release();
    }
    const canopy::run_result r = pending.get();
    std::printf("beside spinner, %-14s: %s%s%s\n", std::string(canopy::to_string(m)).c_str(), std::string(canopy::to_string(r.code)).c_str(),
                r.message.empty() ? "" : ": ", r.message.c_str());
    EXPECT_TRUE(r.code == canopy::status::ok || r.code == canopy::status::timeout) << canopy::to_string(m) << ": " << r.message;
    if (r.ok()) EXPECT_EQ(run.check(expect), "") << canopy::to_string(m);
    if (r.code == canopy::status::timeout) EXPECT_NE(r.task, canopy::no_task) << r.message;
    if (hung) break;
  }
  release();
  CANOPY_TEST_CUDA(cudaStreamSynchronize(side));
  // With the SMs back, the same kind of run must work again.
  {
    mix_run run(g);
    canopy::gpu_scheduler sched(g, canopy::scheduler_options{});
    const auto r = sched.run(run.ops(), main_stream);
    EXPECT_TRUE(r.ok()) << r.message;
    EXPECT_EQ(run.check(expect), "");
  }
  CANOPY_TEST_CUDA(cudaStreamDestroy(side));
  CANOPY_TEST_CUDA(cudaStreamDestroy(main_stream));
  CANOPY_TEST_CUDA(cudaFreeHost(flags));
}

}  // namespace
