// SPDX-License-Identifier: Apache-2.0
// Tuning probe (not part of any suite): what a launch, a wait and a scheduler run cost before any
// task does work (bench/RESULTS.md). Four tables:
//  1. an empty kernel, plain and cooperative launch + stream sync, by grid (1 block, half the
//     SMs .. 8 blocks per SM) and block size: does the launch floor depend on the grid?
//  2. the ways a host can launch and wait (528 x 256): launch, cooperative launch, CUDA graph,
//     a 256-byte cooperative kernel node with and without a parameter update, a flag in mapped
//     host memory polled by the host; each timed on the host (steady_clock, launch to the return
//     of the wait) and with CUDA events, 500 samples after warm-up;
//  3. a scheduler run of one no-op task on a stream of the caller's and on the legacy stream,
//     alone and followed by another kernel, graph launch on and off (same two clocks);
//  4. no-op trees (1 .. 37,449 tasks) split in three by globaltimer stamps: a one-thread stamp
//     kernel enqueued just before run() (A), the tasks' own stamps (first start, last end), and a
//     stamp kernel enqueued after run() returned (B). A -> first task is launch and start-up,
//     last task -> B is the end of the run, the host's wait and one more launch (measured alone
//     as stamp -> sync -> stamp). Medians over 200 runs.
// Usage: launch_probe [auto|spin|yield|blocking]   (the context's wait flag; default auto)
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "canopy/cuda/device_buffer.hpp"
#include "canopy/cuda/error.hpp"
#include "canopy/cuda/event.hpp"
#include "canopy/gpu_scheduler.cuh"
#include "probe_common.cuh"

namespace {

using probe::empty_kernel;

__global__ void stamp(unsigned long long* at) { *at = probe::global_timer_ns(); }

// Every block's thread 0 counts itself out; the last one writes `done` to host memory (system
// scope), which the host polls instead of waiting for the stream.
__global__ void flag_kernel(unsigned* blocks_done, volatile unsigned* done, unsigned epoch) {
  if (threadIdx.x != 0) return;
  __threadfence();
  if (atomicAdd(blocks_done, 1u) == gridDim.x - 1) {
    *blocks_done = 0;
    __threadfence_system();
    *done = epoch;
  }
}

// About the size of the scheduler's parameters (its Ops and scheduler_ref).
struct big_args {
  unsigned long long w[32];
};
__global__ void big_kernel(big_args a) {
  if (a.w[1] == 12345 && threadIdx.x == 0) printf("never\n");
}

// Each task stamps the earliest start ([0]) and the latest end ([1]) of the run.
struct stamp_ops {
  unsigned long long* first;
  __device__ void operator()(canopy::task_id) const {
    atomicMin(first, probe::global_timer_ns());
    __threadfence();
    atomicMax(first + 1, probe::global_timer_ns());
  }
};

void launch_floor_by_grid(int sms) {
  for (int threads : {128, 256})
    for (int grid : {1, sms / 2, sms, 2 * sms, 4 * sms, 8 * sms}) {
      if (grid * threads > sms * 2048) continue;  // more than can be co-resident
      const double plain = probe::median_us([&] { empty_kernel<<<grid, threads>>>(); CANOPY_CUDA_TRY(cudaStreamSynchronize(nullptr)); }, 200);
      const double coop = probe::median_us([&] {
        CANOPY_CUDA_TRY(cudaLaunchCooperativeKernel((const void*)empty_kernel, dim3(grid), dim3(threads), nullptr, 4096, nullptr));
        CANOPY_CUDA_TRY(cudaStreamSynchronize(nullptr)); }, 200);
      std::printf("empty kernel %4dx%-4d launch+sync %6.1f us, cooperative %6.1f us\n", grid, threads, plain, coop);
    }
}

// Table 2 and 3: one row, the host's clock and the events' on `st`.
template <class F>
void row(const char* what, F&& f, cudaStream_t st) {
  const double host = probe::host_median_us(f);
  const double events = probe::median_us(f, 500, st);
  std::printf("%-44s host %6.2f us   events %6.2f us\n", what, host, events);
}

void ways_to_launch_and_wait(cudaStream_t st) {
  const dim3 grid(528), block(256);
  auto plain = [&] { empty_kernel<<<grid, block, 0, st>>>(); CANOPY_CUDA_TRY(cudaStreamSynchronize(st)); };
  auto coop = [&] {
    CANOPY_CUDA_TRY(cudaLaunchCooperativeKernel((const void*)empty_kernel, grid, block, nullptr, 4096, st));
    CANOPY_CUDA_TRY(cudaStreamSynchronize(st));
  };
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CANOPY_CUDA_TRY(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  empty_kernel<<<grid, block, 0, st>>>();
  CANOPY_CUDA_TRY(cudaStreamEndCapture(st, &g));
  CANOPY_CUDA_TRY(cudaGraphInstantiate(&ge, g, 0));
  auto graph = [&] { CANOPY_CUDA_TRY(cudaGraphLaunch(ge, st)); CANOPY_CUDA_TRY(cudaStreamSynchronize(st)); };
  // The 256-byte kernel as a cooperative kernel node, launched as is or after updating its
  // parameters (what the scheduler's graph launch does when its Ops change).
  cudaGraph_t cg;
  cudaGraphExec_t cge;
  cudaGraphNode_t node;
  CANOPY_CUDA_TRY(cudaGraphCreate(&cg, 0));
  big_args args_value{};
  void* kargs[] = {&args_value};
  cudaKernelNodeParams kp{};
  kp.func = (void*)big_kernel;
  kp.gridDim = grid;
  kp.blockDim = block;
  kp.sharedMemBytes = 4096;
  kp.kernelParams = kargs;
  CANOPY_CUDA_TRY(cudaGraphAddKernelNode(&node, cg, nullptr, 0, &kp));
  cudaLaunchAttributeValue coop_value{};
  coop_value.cooperative = 1;
  CANOPY_CUDA_TRY(cudaGraphKernelNodeSetAttribute(node, cudaLaunchAttributeCooperative, &coop_value));
  CANOPY_CUDA_TRY(cudaGraphInstantiate(&cge, cg, 0));
  auto coop_graph = [&] { CANOPY_CUDA_TRY(cudaGraphLaunch(cge, st)); CANOPY_CUDA_TRY(cudaStreamSynchronize(st)); };
  auto coop_graph_update = [&] {
    args_value.w[0] ^= 1;
    CANOPY_CUDA_TRY(cudaGraphExecKernelNodeSetParams(cge, node, &kp));
    CANOPY_CUDA_TRY(cudaGraphLaunch(cge, st));
    CANOPY_CUDA_TRY(cudaStreamSynchronize(st));
  };
  auto coop_big = [&] {
    CANOPY_CUDA_TRY(cudaLaunchCooperativeKernel((const void*)big_kernel, grid, block, kargs, 4096, st));
    CANOPY_CUDA_TRY(cudaStreamSynchronize(st));
  };
  canopy::device_buffer<unsigned> blocks_done(1);
  CANOPY_CUDA_TRY(cudaMemset(blocks_done.data(), 0, sizeof(unsigned)));
  unsigned* done_h = nullptr;
  CANOPY_CUDA_TRY(cudaHostAlloc(&done_h, sizeof(unsigned), cudaHostAllocMapped));
  *done_h = 0;
  unsigned* done_d = nullptr;
  CANOPY_CUDA_TRY(cudaHostGetDevicePointer(&done_d, done_h, 0));
  unsigned epoch = 0;
  auto polled = [&] {
    ++epoch;
    flag_kernel<<<grid, block, 0, st>>>(blocks_done.data(), done_d, epoch);
    while (*(volatile unsigned*)done_h != epoch) {
    }
  };
  auto polled_then_sync = [&] { polled(); CANOPY_CUDA_TRY(cudaStreamSynchronize(st)); };
  row("empty kernel, launch + stream sync", plain, st);
  row("empty kernel, cooperative + stream sync", coop, st);
  row("empty kernel, graph launch + stream sync", graph, st);
  row("256-byte kernel, cooperative + stream sync", coop_big, st);
  row("256-byte kernel, cooperative graph + sync", coop_graph, st);
  row("256-byte kernel, coop graph, params updated", coop_graph_update, st);
  row("flag kernel, launch + host polls the flag", polled, st);
  row("flag kernel, polled, then stream sync", polled_then_sync, st);

  // The scheduler on the caller's stream, alone and followed by one more kernel on that stream;
  // then the same on the legacy default stream.
  canopy::scheduler_options o;
  o.threads_per_block = 256;
  canopy::gpu_scheduler s(probe::noop_tree(1), o);
  auto one_task = [&] { if (!s.run(probe::noop_ops{}, st).ok()) std::printf("run failed\n"); };
  auto one_task_then_kernel = [&] { one_task(); empty_kernel<<<grid, block, 0, st>>>(); CANOPY_CUDA_TRY(cudaStreamSynchronize(st)); };
  auto one_task_legacy = [&] { if (!s.run(probe::noop_ops{}).ok()) std::printf("run failed\n"); };
  auto one_task_legacy_then_kernel = [&] {
    one_task_legacy();
    empty_kernel<<<grid, block>>>();
    CANOPY_CUDA_TRY(cudaStreamSynchronize(nullptr));
  };
  for (bool graphs : {true, false}) {
    s.set_graph_launch(graphs);
    std::printf("graph launch %s:\n", graphs ? "on" : "off");
    row("scheduler run of one no-op task", one_task, st);
    row("  the same, then an empty kernel", one_task_then_kernel, st);
    row("  on the legacy stream", one_task_legacy, st);
    row("  on the legacy stream, then a kernel", one_task_legacy_then_kernel, st);
  }
  CANOPY_CUDA_TRY(cudaFreeHost(done_h));
  CANOPY_CUDA_TRY(cudaGraphExecDestroy(cge));
  CANOPY_CUDA_TRY(cudaGraphDestroy(cg));
  CANOPY_CUDA_TRY(cudaGraphExecDestroy(ge));
  CANOPY_CUDA_TRY(cudaGraphDestroy(g));
}

int stamped_runs(int sms) {
  canopy::device_buffer<unsigned long long> d(4);  // [0] first start, [1] last end, [2] stamp A, [3] stamp B
  {
    std::vector<double> ab;
    for (int i = 0; i < 200; ++i) {
      stamp<<<1, 1>>>(d.data() + 2);
      CANOPY_CUDA_TRY(cudaStreamSynchronize(nullptr));
      stamp<<<1, 1>>>(d.data() + 3);
      CANOPY_CUDA_TRY(cudaStreamSynchronize(nullptr));
      const auto h = d.download();
      ab.push_back((h[3] - h[2]) * 1e-3);
    }
    std::printf("stamp -> sync -> stamp             %6.1f us (the host's wait and one launch)\n", probe::median(ab));
  }
  for (int tasks : {1, 8, 4681, 37449}) {
    const auto graph = probe::noop_tree(tasks);
    for (canopy::mode m : {canopy::mode::lockfree, canopy::mode::continuation})
      for (int blocks : {0, sms, 1}) {
        canopy::scheduler_options o;
        o.mode = m;
        o.threads_per_block = 256;
        o.blocks = blocks;
        canopy::gpu_scheduler s(graph, o);
        std::vector<double> start, span, end, ev;
        canopy::cuda_event a, b;
        for (int i = 0; i < 203; ++i) {
          d.upload(std::vector<unsigned long long>{~0ull, 0, 0, 0});
          stamp<<<1, 1>>>(d.data() + 2);
          a.record();
          const auto r = s.run(stamp_ops{d.data()});
          b.record();
          stamp<<<1, 1>>>(d.data() + 3);
          CANOPY_CUDA_TRY(cudaDeviceSynchronize());
          const double us = 1e3 * canopy::elapsed_ms(a, b);
          if (!r.ok()) {
            std::printf("FAILED %s\n", r.message.c_str());
            return 1;
          }
          const auto h = d.download();
          if (i < 3) continue;  // warm-up
          start.push_back((h[0] - h[2]) * 1e-3);
          span.push_back((h[1] - h[0]) * 1e-3);
          end.push_back((h[3] - h[1]) * 1e-3);
          ev.push_back(us);
        }
        std::printf("noop tree %5d tasks %-13s %4d x 256: event %6.1f us | stamp A -> first task %5.1f, tasks %6.1f, last task -> stamp B %5.1f\n",
                    tasks, canopy::to_string(m).data(), s.last_grid(), probe::median(ev), probe::median(start),
                    probe::median(span), probe::median(end));
      }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const char* how = argc > 1 ? argv[1] : "auto";
  unsigned flag = cudaDeviceScheduleAuto;
  if (!std::strcmp(how, "spin")) flag = cudaDeviceScheduleSpin;
  if (!std::strcmp(how, "yield")) flag = cudaDeviceScheduleYield;
  if (!std::strcmp(how, "blocking")) flag = cudaDeviceScheduleBlockingSync;
  // Before the first call that creates the context: the flag is fixed from then on.
  CANOPY_CUDA_TRY(cudaSetDeviceFlags(flag | cudaDeviceMapHost));
  cudaDeviceProp prop{};
  CANOPY_CUDA_TRY(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs, wait flag %s\n", prop.name, prop.multiProcessorCount, how);
  cudaStream_t st;
  CANOPY_CUDA_TRY(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  std::printf("-- 1. the launch floor by grid\n");
  launch_floor_by_grid(prop.multiProcessorCount);
  std::printf("-- 2, 3. ways to launch and wait; a one-task scheduler run\n");
  ways_to_launch_and_wait(st);
  std::printf("-- 4. no-op trees split by globaltimer stamps\n");
  const int rc = stamped_runs(prop.multiProcessorCount);
  CANOPY_CUDA_TRY(cudaStreamDestroy(st));
  CANOPY_CUDA_TRY(cudaGetLastError());
  return rc;
}
