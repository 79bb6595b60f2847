// SPDX-License-Identifier: Apache-2.0
// Stream-ordered runs (gpu_scheduler::run_async): no host wait inside, captured into a caller's CUDA
// graph between a producer and a consumer kernel and replayed with changing inputs (failed
// replays included: the next replay must be exact again, with nothing written by the host), two
// schedulers on two streams from two host threads, and the ticket's rules.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "canopy/cuda/device_buffer.hpp"
#include "canopy/gpu_scheduler.cuh"
#include "gpu_backend.cuh"
#include "gpu_test.hpp"
#include "scheduler_test_graphs.hpp"

namespace {

using canopy::task_graph;
using canopy::task_id;
using canopy::test::oracle_ops;
using GpuTest = canopy::test::gpu_test;

__host__ __device__ inline std::uint64_t input_of(task_id t, std::uint32_t step) {
  std::uint64_t x = (static_cast<std::uint64_t>(step) << 32) ^ static_cast<std::uint32_t>(t);
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x & 0xffffffffull;  // sums of a few thousand of these never wrap
}

__device__ inline std::uint64_t timer_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// value[t] = input[t] + the values of t's predecessors; `victim` stalls past the run's deadline
// when the producer says so (a failed replay).
struct step_ops {
  const std::int32_t* pred_offsets;
  const task_id* preds;
  const std::uint64_t* input;
  std::uint64_t* value;
  unsigned* runs;
  const int* stall;
  task_id victim;
  std::uint64_t stall_ns;
  __device__ void operator()(task_id t) const {
    if (t == victim && *stall != 0) {
      const std::uint64_t until = timer_ns() + stall_ns;
      while (timer_ns() < until) __nanosleep(1000);
    }
    std::uint64_t s = input[t];
    for (std::int32_t j = pred_offsets[t]; j < pred_offsets[t + 1]; ++j) s += value[preds[j]];
    value[t] = s;
    atomicAdd(runs + t, 1u);
  }
};

struct replay_state {
  std::uint32_t step;
  int stall;
};

__global__ void producer(std::uint64_t* input, unsigned* runs, int n, replay_state* st, std::uint32_t stall_a,
                         std::uint32_t stall_b) {
  const std::uint32_t step = st->step;
  for (int t = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); t < n; t += static_cast<int>(gridDim.x * blockDim.x)) {
    input[t] = input_of(t, step);
    runs[t] = 0;
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) st->stall = step == stall_a || step == stall_b ? 1 : 0;
}

// Records what the run left: a checksum of every value, how many tasks did not run exactly once,
// and the run's status as the scheduler published it for device code.
__global__ void consumer(const std::uint64_t* value, const unsigned* runs, int n, const replay_state* st,
                         const canopy::device_run_status* status, unsigned long long* checksum, unsigned* bad_runs,
                         int* codes) {
  const std::uint32_t step = st->step;
  unsigned long long sum = 0;
  unsigned bad = 0;
  for (int t = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); t < n; t += static_cast<int>(gridDim.x * blockDim.x)) {
    sum += value[t] * (2ull * static_cast<unsigned long long>(t) + 1ull);
    bad += runs[t] != 1 ? 1u : 0u;
  }
  atomicAdd(checksum + step, sum);
  if (bad != 0) atomicAdd(bad_runs + step, bad);
  if (blockIdx.x == 0 && threadIdx.x == 0) codes[step] = status->code;
}

__global__ void advance(replay_state* st) { ++st->step; }

std::uint64_t expected_checksum(const task_graph& g, std::uint32_t step) {
  // Kahn's order over the predecessor lists (a tree here, but nothing assumes it).
  const auto n = static_cast<std::size_t>(g.task_count());
  std::vector<std::uint64_t> value(n, 0);
  std::vector<std::int32_t> left(g.dependency_count());
  std::vector<task_id> ready(g.sources());
  std::vector<std::vector<task_id>> succ(n);
  for (std::size_t t = 0; t < n; ++t)
    for (std::int32_t j = g.pred_offsets()[t]; j < g.pred_offsets()[t + 1]; ++j)
      succ[static_cast<std::size_t>(g.predecessors()[static_cast<std::size_t>(j)])].push_back(static_cast<task_id>(t));
  while (!ready.empty()) {
    const task_id t = ready.back();
    ready.pop_back();
    std::uint64_t s = input_of(t, step);
    for (std::int32_t j = g.pred_offsets()[t]; j < g.pred_offsets()[t + 1]; ++j) s += value[static_cast<std::size_t>(g.predecessors()[static_cast<std::size_t>(j)])];
    value[static_cast<std::size_t>(t)] = s;
    for (task_id u : succ[static_cast<std::size_t>(t)])
      if (--left[static_cast<std::size_t>(u)] == 0) ready.push_back(u);
  }
  std::uint64_t sum = 0;
  for (std::size_t t = 0; t < n; ++t) sum += value[t] * (2ull * t + 1ull);
  return sum;
}

// The run between a producer and a consumer, captured once and replayed 100 times; the inputs
// change every replay (the producer derives them from a step counter on the device). Replays 40
// and 41 stall one task past the deadline: they must time out, and replay 42 must be exact again
// although nothing on the host touched the scheduler in between.
TEST_F(GpuTest, CapturedRunIsExactOnEveryReplayAndRecoversFromFailedReplays) {
  for (const canopy::mode m : {canopy::mode::continuation, canopy::mode::lockfree, canopy::mode::mutex}) {
    SCOPED_TRACE(std::string("mode ") + std::string(canopy::to_string(m)));
    const task_graph g = task_graph::from_parents(canopy::testing::random_tree_parents(5000, 16));
    const int n = g.task_count();
    canopy::scheduler_options o;
    o.mode = m;
    // Generous: the mutex mode's runs of this graph once took more than 300 ms on an H100 (device
    // heap and lock contention); the stalled task sleeps past it by half.
    o.deadline = std::chrono::seconds(1);
    canopy::gpu_scheduler sched(g, o);
    canopy::device_buffer<std::int32_t> pred_offsets(g.pred_offsets());
    canopy::device_buffer<task_id> preds(g.predecessors().empty() ? std::vector<task_id>{0} : g.predecessors());
    canopy::device_buffer<std::uint64_t> input(static_cast<std::size_t>(n)), value(static_cast<std::size_t>(n));
    canopy::device_buffer<unsigned> runs(static_cast<std::size_t>(n));
    canopy::device_buffer<replay_state> state(1);
    constexpr int replays = 100;
    canopy::device_buffer<unsigned long long> checksum(replays);
    canopy::device_buffer<unsigned> bad_runs(replays);
    canopy::device_buffer<int> codes(replays);
    state.fill_bytes(0);
    checksum.fill_bytes(0);
    bad_runs.fill_bytes(0);
    codes.fill_bytes(0xff);
    const task_id victim = g.sources()[g.sources().size() / 2];
    step_ops ops{pred_offsets.data(), preds.data(), input.data(), value.data(), runs.data(), &state.data()->stall, victim,
                 1'500'000'000ull};

    cudaStream_t stream;
    CANOPY_TEST_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaGraph_t graph = nullptr;
    CANOPY_TEST_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    producer<<<64, 256, 0, stream>>>(input.data(), runs.data(), n, state.data(), 40, 41);
    const canopy::run_ticket ticket = sched.run_async(ops, stream);
    consumer<<<64, 256, 0, stream>>>(value.data(), runs.data(), n, state.data(), sched.device_status(), checksum.data(),
                                     bad_runs.data(), codes.data());
    advance<<<1, 1, 0, stream>>>(state.data());
    CANOPY_TEST_CUDA(cudaStreamEndCapture(stream, &graph));
    EXPECT_THROW((void)ticket.wait(), canopy::error);  // a captured run has no ticket to wait on
    cudaGraphExec_t exec = nullptr;
    CANOPY_TEST_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < replays; ++i) CANOPY_TEST_CUDA(cudaGraphLaunch(exec, stream));
    CANOPY_TEST_CUDA(cudaStreamSynchronize(stream));
    std::printf("[ info ] mode %s: %d replays in %.1f ms (two of them stall 1.5 s)\n", std::string(canopy::to_string(m)).c_str(),
                replays, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());

    const auto sums = checksum.download();
    const auto bad = bad_runs.download();
    const auto code = codes.download();
    int failures = 0;
    for (std::uint32_t s = 0; s < replays; ++s) {
      const bool stalled = s == 40 || s == 41;
      if (stalled) {
        EXPECT_EQ(code[s], static_cast<int>(canopy::status::timeout)) << "replay " << s << " should have timed out";
        continue;
      }
      EXPECT_EQ(code[s], 0) << "replay " << s;
      EXPECT_EQ(bad[s], 0u) << "replay " << s << ": tasks not run exactly once";
      EXPECT_EQ(sums[s], expected_checksum(g, s)) << "replay " << s << ": wrong values";
      failures += (code[s] != 0 || bad[s] != 0 || sums[s] != expected_checksum(g, s)) ? 1 : 0;
      if (failures > 3) break;
    }
    EXPECT_TRUE(sched.last_result().ok()) << sched.last_result().message;  // the last replay's result
    CANOPY_TEST_CUDA(cudaGraphExecDestroy(exec));
    CANOPY_TEST_CUDA(cudaGraphDestroy(graph));
    CANOPY_TEST_CUDA(cudaStreamDestroy(stream));
  }
}

// run_async must return while the stream is still busy: a gate kernel ahead of it spins until the
// host opens the gate (or gives up after 5 s and says so). A run_async that waited for the stream
// would only return after that give-up.
__global__ void gate(const volatile int* open, int* gave_up) {
  const std::uint64_t until = timer_ns() + 5'000'000'000ull;
  while (*open == 0)
    if (timer_ns() > until) {
      *gave_up = 1;
      return;
    }
}

TEST_F(GpuTest, RunAsyncReturnsWithoutWaitingForTheStream) {
  const task_graph g = task_graph::from_parents(canopy::testing::random_tree_parents(5000, 3));
  canopy::gpu_scheduler sched(g, canopy::scheduler_options{});
  canopy::test::gpu_backend::workspace w(g);
  const oracle_ops ops = w.ops();
  int* open = nullptr;
  CANOPY_TEST_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&open), sizeof(int), cudaHostAllocMapped));
  *open = 0;
  int* d_open = nullptr;
  CANOPY_TEST_CUDA(cudaHostGetDevicePointer(reinterpret_cast<void**>(&d_open), open, 0));
  canopy::device_buffer<int> gave_up(1);
  gave_up.fill_bytes(0);
  cudaStream_t stream;
  CANOPY_TEST_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  (void)sched.run(ops, stream);  // first run: builds and caches its launch
  gate<<<1, 1, 0, stream>>>(d_open, gave_up.data());
  const canopy::run_ticket t = sched.run_async(w.ops(), stream);
  const bool busy_after_enqueue = !t.ready();
  *open = 1;  // the gate opens only now: run_async returned while the gate held the stream
  const canopy::run_result r = t.wait();
  EXPECT_TRUE(busy_after_enqueue) << "the stream was idle right after run_async: it waited for the gate";
  EXPECT_EQ(gave_up.download()[0], 0) << "run_async returned only after the gate gave up: it waited for the stream";
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(canopy::test::exact_run_errors(w.read(), canopy::test::serial_sums(g)), "");
  CANOPY_TEST_CUDA(cudaStreamDestroy(stream));
  CANOPY_TEST_CUDA(cudaFreeHost(open));
}

// A ticket answers for the latest run only; runs enqueued back to back on one stream, with no
// wait between them, are each exact (the kernel resets its own state).
TEST_F(GpuTest, BackToBackRunsAndTheTicketsRules) {
  const task_graph g = task_graph::from_parents(canopy::testing::random_tree_parents(8000, 5));
  const auto expect = canopy::test::serial_sums(g);
  for (const canopy::mode m : canopy::all_modes) {
    SCOPED_TRACE(std::string("mode ") + std::string(canopy::to_string(m)));
    canopy::scheduler_options o;
    o.mode = m;
    canopy::gpu_scheduler sched(g, o);
    std::vector<canopy::test::gpu_backend::workspace> ws;
    for (int i = 0; i < 4; ++i) ws.emplace_back(g);
    std::vector<oracle_ops> ops;
    for (auto& w : ws) ops.push_back(w.ops());
    canopy::run_ticket first = sched.run_async(ops[0]);
    for (int i = 1; i < 4; ++i) (void)sched.run_async(ops[static_cast<std::size_t>(i)]);
    canopy::run_ticket last = sched.run_async(ops[0]);  // the first workspace again, rewritten
    EXPECT_THROW((void)first.wait(), canopy::error);
    const canopy::run_result r = last.wait();
    ASSERT_TRUE(r.ok()) << r.message;
    EXPECT_TRUE(last.ready());
    for (std::size_t i = 1; i < ws.size(); ++i) EXPECT_EQ(canopy::test::exact_run_errors(ws[i].read(), expect), "") << "run " << i;
    // The first workspace ran twice without being cleared: every task twice, same values.
    const auto twice = ws[0].read();
    for (std::size_t t = 0; t < expect.size(); ++t) {
      ASSERT_EQ(twice.runs[t], 2u) << "task " << t;
      ASSERT_EQ(twice.value[t], expect[t]) << "task " << t;
    }
  }
}

// Two schedulers, each driven by its own host thread on its own stream, at the same time. Both
// default to every co-resident block, so their cooperative launches cannot share the device: CUDA
// runs them one after the other, and each must still be exact every time.
TEST_F(GpuTest, TwoSchedulersOnTwoStreamsFromTwoThreads) {
  const task_graph ga = task_graph::from_parents(canopy::testing::random_tree_parents(30000, 21));
  const task_graph gb = task_graph::from_edges(6000, canopy::testing::random_dag_edges(6000, 4, 22));
  std::string errors[2];
  auto drive = [](const task_graph* g, canopy::mode m, std::string* error) {
    canopy::scheduler_options o;
    o.mode = m;
    o.deadline = std::chrono::seconds(20);
    canopy::gpu_scheduler sched(*g, o);
    canopy::test::gpu_backend::workspace w(*g);
    const auto expect = canopy::test::serial_sums(*g);
    cudaStream_t stream;
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
      *error = "cudaStreamCreate failed";
      return;
    }
    for (int i = 0; i < 50 && error->empty(); ++i) {
      const canopy::run_result r = sched.run_async(w.ops(stream), stream).wait();
      if (!r.ok()) *error = "run " + std::to_string(i) + ": " + r.message;
      else if (const std::string e = canopy::test::exact_run_errors(w.read(), expect); !e.empty())
        *error = "run " + std::to_string(i) + ": " + e;
    }
    (void)cudaStreamDestroy(stream);
  };
  std::thread a(drive, &ga, canopy::mode::continuation, &errors[0]);
  std::thread b(drive, &gb, canopy::mode::lockfree, &errors[1]);
  a.join();
  b.join();
  EXPECT_EQ(errors[0], "") << "tree on thread A";
  EXPECT_EQ(errors[1], "") << "DAG on thread B";
}

}  // namespace
