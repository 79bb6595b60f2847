// SPDX-License-Identifier: Apache-2.0
// The GPU scheduler at the edges of the device:
//   * a grid one block over the co-resident maximum is refused with status invalid_argument
//     before launch (no task runs), for every mode and block sizes 64..1024, and the maximum
//     itself runs exactly;
//   * beside another kernel that holds half the SMs (a spinning kernel on another stream, released
//     through a flag in mapped host memory, proven resident by its heartbeat): a full grid waits,
//     runs no task until the SMs are free, and then runs exactly, its deadline counting from its
//     start; a grid that fits the free SMs runs beside the other kernel (BesideASpinner below).
#include <gtest/gtest.h>

#include <cuda/atomic>

#include <chrono>
#include <cstdio>
#include <future>
#include <optional>
#include <string>
#include <thread>

#include "canopy/cuda/device_buffer.hpp"
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
// Every block counts itself into started when it begins, keeps beat (the global timer) fresh
// while it spins, so the host can see it is still resident, and raises ended to the time it leaves.
struct spinner_flags {
  int release;
  int started;
  unsigned long long beat;   // global timer, written by the spinning blocks
  unsigned long long ended;  // the latest global timer at which a spinner block left
};

__global__ void spinner(spinner_flags* f) {
  if (threadIdx.x == 0) {
    cuda::atomic_ref<int, cuda::thread_scope_system>(f->started).fetch_add(1, cuda::std::memory_order_relaxed);
    const std::uint64_t start = canopy::testing::global_ns();
    for (;;) {
      const std::uint64_t now = canopy::testing::global_ns();
      cuda::atomic_ref<unsigned long long, cuda::thread_scope_system>(f->beat).store(now, cuda::std::memory_order_relaxed);
      if (cuda::atomic_ref<const int, cuda::thread_scope_system>(f->release).load(cuda::std::memory_order_relaxed) != 0) break;
      if (now - start > 60ull * 1000 * 1000 * 1000) break;
      __nanosleep(10000);
    }
    cuda::atomic_ref<unsigned long long, cuda::thread_scope_system>(f->ended)
        .fetch_max(canopy::testing::global_ns(), cuda::std::memory_order_relaxed);
  }
  __syncthreads();
}

// mix_ops that also leave, for the host, whether any task has run yet (a plain store to mapped
// host memory, readable while the kernel runs) and, for after the run, when the first one ran.
struct watched_ops {
  canopy::testing::mix_ops inner;
  int* any_ran;                    // mapped host memory
  unsigned long long* first_ns;    // device memory, ULLONG_MAX before the run
  __device__ void operator()(task_id t) const {
    atomicMin(first_ns, static_cast<unsigned long long>(canopy::testing::global_ns()));
    if (cuda::atomic_ref<int, cuda::thread_scope_system>(*any_ran).load(cuda::std::memory_order_relaxed) == 0)
      cuda::atomic_ref<int, cuda::thread_scope_system>(*any_ran).store(1, cuda::std::memory_order_relaxed);
    inner(t);
  }
};

// What Canopy does beside a kernel that holds SMs, defined and tested exactly:
//  * a run whose grid needs SMs that another kernel holds (blocks = 0: the full co-resident grid)
//    is a cooperative launch, which starts only once every block can be resident: it waits, runs
//    no task while the other kernel holds the SMs, and then runs exactly. Its deadline counts from
//    its blocks' start on the device, so the wait is not part of it (a deadline shorter than the
//    wait still finishes ok);
//  * a run whose grid fits the SMs that are free starts at once and finishes beside the other
//    kernel.
// The spinner is proven resident during the run's wait: every block reported its start, and its
// heartbeat advances across the window in which the test checks that the run has not started.
class BesideASpinner : public canopy::test::gpu_test {
 protected:
  void SetUp() override {
    canopy::test::gpu_test::SetUp();
    if (IsSkipped()) return;
    int device = 0;
    CANOPY_TEST_CUDA(cudaGetDevice(&device));
    CANOPY_TEST_CUDA(cudaGetDeviceProperties(&prop_, device));
    CANOPY_TEST_CUDA(cudaHostAlloc(&host_, sizeof(spinner_flags) + sizeof(int), cudaHostAllocMapped));
    CANOPY_TEST_CUDA(cudaHostGetDevicePointer(&dev_, host_, 0));
    CANOPY_TEST_CUDA(cudaFuncSetAttribute(spinner, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(prop_.sharedMemPerBlockOptin)));
    CANOPY_TEST_CUDA(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
    CANOPY_TEST_CUDA(cudaStreamCreateWithFlags(&main_, cudaStreamNonBlocking));
  }
  void TearDown() override {
    if (host_ != nullptr) {
      release();
      if (side_ != nullptr) (void)cudaStreamSynchronize(side_);
      if (main_ != nullptr) (void)cudaStreamSynchronize(main_);
      (void)cudaFreeHost(host_);
    }
    if (side_ != nullptr) (void)cudaStreamDestroy(side_);
    if (main_ != nullptr) (void)cudaStreamDestroy(main_);
  }
  spinner_flags& flags() { return *reinterpret_cast<spinner_flags*>(host_); }
  int* any_ran_host() { return reinterpret_cast<int*>(reinterpret_cast<char*>(host_) + sizeof(spinner_flags)); }
  int* any_ran_device() { return reinterpret_cast<int*>(reinterpret_cast<char*>(dev_) + sizeof(spinner_flags)); }
  unsigned long long beat() {
    return cuda::atomic_ref<unsigned long long, cuda::thread_scope_system>(flags().beat).load(cuda::std::memory_order_relaxed);
  }
  void release() { cuda::atomic_ref<int, cuda::thread_scope_system>(flags().release).store(1, cuda::std::memory_order_relaxed); }
  // Launches one spinner block on each of `held` SMs (all the shared memory a block may have keeps
  // any other block off its SM) and waits until every one has started.
  void hold(int held) {
    flags() = spinner_flags{0, 0, 0, 0};
    *any_ran_host() = 0;
    spinner<<<held, 1024, prop_.sharedMemPerBlockOptin, side_>>>(reinterpret_cast<spinner_flags*>(dev_));
    CANOPY_TEST_CUDA(cudaGetLastError());
    for (int i = 0; i < 5000 && cuda::atomic_ref<int, cuda::thread_scope_system>(flags().started).load(cuda::std::memory_order_relaxed) < held; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_EQ(flags().started, held) << "the spinner's blocks did not all become resident within 5 s";
  }
  // Half the SMs: what the spinner holds in both tests.
  int held() const { return std::max(1, prop_.multiProcessorCount / 2); }
  // Holds held() SMs, then enqueues `ops` on the main stream with run_async, which must return at
  // once (it must not wait for the spinner). If either step fails the test fails, the spinner is
  // released (so that nothing waits for it) and there is no ticket.
  std::optional<canopy::run_ticket> hold_and_enqueue(canopy::gpu_scheduler& sched, const watched_ops& ops) {
    hold(held());
    if (HasFatalFailure()) return std::nullopt;
    auto pending = std::async(std::launch::async, [&] { return sched.run_async(ops, main_); });
    if (pending.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
      release();
      ADD_FAILURE() << "run_async did not return within 5 s while another kernel held " << held()
                    << " SMs (it waited for the device)";
      return std::nullopt;
    }
    return pending.get();
  }
  // The graph both tests run: small enough that the slowest mode (mutex: a global lock per queue
  // operation) runs in milliseconds on the full grid.
  const canopy::task_graph graph_ = canopy::task_graph::from_parents(canopy::testing::random_tree_parents(2000, 6));
  const std::vector<std::uint64_t> expect_ = canopy::testing::reference_values(graph_);
  cudaDeviceProp prop_{};
  void* host_ = nullptr;
  void* dev_ = nullptr;
  cudaStream_t side_ = nullptr, main_ = nullptr;
};

TEST_F(BesideASpinner, AFullGridWaitsForTheHeldSMsThenRunsExactly) {
  const int held = this->held();
  const auto& g = graph_;
  const auto& expect = expect_;
  canopy::device_buffer<unsigned long long> first_ns(1);
  for (mode m : canopy::all_modes) {
    SCOPED_TRACE(std::string(canopy::to_string(m)));
    canopy::testing::mix_run run(g);
    // Everything that may wait for the device (allocation, the first launch's set-up) happens
    // before the spinner holds SMs: a warm-up run, checked and timed.
    canopy::scheduler_options warm_opt;
    warm_opt.mode = m;
    canopy::gpu_scheduler warm(g, warm_opt);
    first_ns.fill_bytes(0xff);
    const auto t0 = std::chrono::steady_clock::now();
    const auto w = warm.run(watched_ops{run.ops(), any_ran_device(), first_ns.data()});
    const auto warm_ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_TRUE(w.ok()) << w.message;
    ASSERT_EQ(run.check(expect), "");
    // The deadline: a few times what the run needs, and shorter than the wait below, which is
    // therefore not part of it.
    canopy::scheduler_options opt = warm_opt;
    opt.deadline = std::chrono::milliseconds(std::max<long long>(100, 5 * warm_ms));
    const auto window = opt.deadline + std::chrono::milliseconds(200);
    canopy::gpu_scheduler sched(g, opt);
    ASSERT_TRUE(sched.run(watched_ops{run.ops(), any_ran_device(), first_ns.data()}).ok());
    const watched_ops ops{run.ops(), any_ran_device(), first_ns.data()};
    first_ns.fill_bytes(0xff);

    const auto ticket = hold_and_enqueue(sched, ops);
    if (!ticket) return;
    // The window, longer than the deadline: the spinner is seen spinning and the run has not started.
    const unsigned long long beat0 = beat();
    std::this_thread::sleep_for(window);
    const bool ran_early = cuda::atomic_ref<int, cuda::thread_scope_system>(*any_ran_host()).load(cuda::std::memory_order_relaxed) != 0;
    const bool done_early = ticket->ready();
    const unsigned long long beat1 = beat();
    EXPECT_GT(beat1, beat0) << "the spinner stopped beating: it was not resident for the whole window";
    EXPECT_FALSE(ran_early) << "a task ran while another kernel held " << held << " of " << prop_.multiProcessorCount << " SMs";
    EXPECT_FALSE(done_early) << "the run finished while the SMs it needs were held";
    release();
    std::printf("%-14s beside a spinner on %d of %d SMs (warm run %lld ms, deadline %lld ms): %s during %lld ms (spinner beating: %s), ",
                std::string(canopy::to_string(m)).c_str(), held, prop_.multiProcessorCount, static_cast<long long>(warm_ms),
                static_cast<long long>(opt.deadline.count()), ran_early || done_early ? "RAN" : "no task",
                static_cast<long long>(window.count()), beat1 > beat0 ? "yes" : "no");
    auto result = std::async(std::launch::async, [&] { return ticket->wait(); });
    if (result.wait_for(std::chrono::seconds(20)) != std::future_status::ready)
      FAIL() << "the run did not finish within 20 s of the SMs' release (a hang)";  // the TearDown releases the rest
    const canopy::run_result r = result.get();
    CANOPY_TEST_CUDA(cudaStreamSynchronize(side_));
    std::printf("then %s\n", std::string(canopy::to_string(r.code)).c_str());
    EXPECT_TRUE(r.ok()) << r.message << " (the deadline must count from the run's start, not its enqueue)";
    if (r.ok()) EXPECT_EQ(run.check(expect), "");
    EXPECT_GE(first_ns.download()[0], flags().ended) << "a task ran before the spinner's last block left";
  }
}

TEST_F(BesideASpinner, AGridThatFitsTheFreeSMsRunsBesideIt) {
  const int held = this->held();
  const int free_sms = prop_.multiProcessorCount - held;
  const auto& g = graph_;
  const auto& expect = expect_;
  canopy::device_buffer<unsigned long long> first_ns(1);
  for (mode m : canopy::all_modes) {
    SCOPED_TRACE(std::string(canopy::to_string(m)));
    canopy::testing::mix_run run(g);
    canopy::scheduler_options opt;
    opt.mode = m;
    opt.blocks = free_sms;  // one block per free SM
    opt.deadline = std::chrono::seconds(30);
    canopy::gpu_scheduler sched(g, opt);
    first_ns.fill_bytes(0xff);
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(sched.run(watched_ops{run.ops(), any_ran_device(), first_ns.data()}).ok());
    const auto warm_ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
    const watched_ops ops{run.ops(), any_ran_device(), first_ns.data()};

    const auto ticket = hold_and_enqueue(sched, ops);
    if (!ticket) return;
    const auto t1 = std::chrono::steady_clock::now();
    auto result = std::async(std::launch::async, [&] { return ticket->wait(); });
    const bool finished = result.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
    const auto beside_ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t1).count();
    const bool spinner_still_there = cuda::atomic_ref<unsigned long long, cuda::thread_scope_system>(flags().ended)
                                         .load(cuda::std::memory_order_relaxed) == 0;
    release();
    EXPECT_TRUE(finished) << "a grid of " << free_sms << " blocks did not finish within 10 s beside a kernel holding the other " << held << " SMs";
    EXPECT_TRUE(spinner_still_there) << "the spinner left before the run finished: the run did not run beside it";
    if (result.wait_for(std::chrono::seconds(20)) != std::future_status::ready) FAIL() << "the run did not finish (a hang)";
    const canopy::run_result r = result.get();
    CANOPY_TEST_CUDA(cudaStreamSynchronize(side_));
    std::printf("%-14s %d blocks beside a spinner on %d SMs: %s while it spun (%lld ms; %lld ms alone)\n", std::string(canopy::to_string(m)).c_str(),
                free_sms, held, finished && spinner_still_there ? "finished" : "did not finish", static_cast<long long>(beside_ms),
                static_cast<long long>(warm_ms));
    EXPECT_TRUE(r.ok()) << r.message;
    if (r.ok()) EXPECT_EQ(run.check(expect), "");
  }
}

}  // namespace
