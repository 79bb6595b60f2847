// SPDX-License-Identifier: Apache-2.0
// Does a kernel enqueued after run_async start without waiting for the host? (issue 16)
//
// A no-op tree of the depth-5 octree's shape (37,449 tasks), counted so that every sample is
// checked: each task runs exactly once. Task 0 (the root, the run's last task) stamps the global
// timer when it ends; a one-thread "consumer" kernel enqueued after the run stamps the timer when
// it starts. The gap between the two stamps is what the next kernel waits after the run's work:
//   run_async: run_async(ops, s); consumer<<<1, 1, 0, s>>>   (no host wait in between)
//   run:       run(ops, s) (stream sync inside); consumer<<<1, 1, 0, s>>>
// Also the stream time of the pair (CUDA events around both, no host wait inside for run_async)
// and the host time of the run_async call itself. Medians of 200 samples, min and max.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "canopy/cuda/device_buffer.hpp"
#include "canopy/cuda/error.hpp"
#include "canopy/cuda/event.hpp"
#include "canopy/gpu_scheduler.cuh"
#include "probe_common.cuh"

namespace {

struct stamped_ops {
  unsigned* runs;
  unsigned long long* root_end;
  __device__ void operator()(canopy::task_id t) const {
    atomicAdd(runs + t, 1u);
    if (t == 0) *root_end = probe::global_timer_ns();
  }
};

__global__ void consumer(unsigned long long* start) { *start = probe::global_timer_ns(); }

struct stats {
  double median, min, max;
};
stats summarise(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

}  // namespace

int main() {
  if (!canopy::gpu_available()) {
    std::fprintf(stderr, "stream_probe: no CUDA device\n");
    return 1;
  }
  const int n = 37449;
  const canopy::task_graph g = probe::noop_tree(n);
  canopy::gpu_scheduler sched(g, canopy::scheduler_options{});
  canopy::device_buffer<unsigned> runs(static_cast<std::size_t>(n));
  canopy::device_buffer<unsigned long long> stamps(2);  // [0] root end, [1] consumer start
  const stamped_ops ops{runs.data(), stamps.data()};
  cudaStream_t s = nullptr;
  CANOPY_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  canopy::cuda_event a, b;
  constexpr int samples = 200;
  for (const bool async : {true, false}) {
    std::vector<double> gap, stream_us, call_us;
    for (int i = 0; i < samples + 5; ++i) {
      runs.fill_bytes(0, s);
      a.record(s);
      const auto t0 = std::chrono::steady_clock::now();
      if (async) {
        sched.run_async(ops, s);
      } else {
        const canopy::run_result r = sched.run(ops, s);
        if (!r.ok()) {
          std::fprintf(stderr, "stream_probe: run failed: %s\n", r.message.c_str());
          return 1;
        }
      }
      const auto t1 = std::chrono::steady_clock::now();
      consumer<<<1, 1, 0, s>>>(stamps.data() + 1);
      b.record(s);
      CANOPY_CUDA_TRY(cudaStreamSynchronize(s));
      if (async && !sched.last_result().ok()) {
        std::fprintf(stderr, "stream_probe: run failed: %s\n", sched.last_result().message.c_str());
        return 1;
      }
      const std::vector<unsigned> r = runs.download();
      if (std::any_of(r.begin(), r.end(), [](unsigned c) { return c != 1; })) {
        std::fprintf(stderr, "stream_probe: a task did not run exactly once\n");
        return 1;
      }
      const std::vector<unsigned long long> st = stamps.download();
      if (i < 5) continue;  // warm-up
      gap.push_back(1e-3 * static_cast<double>(static_cast<long long>(st[1] - st[0])));
      stream_us.push_back(1e3 * canopy::elapsed_ms(a, b));
      call_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
    const stats gs = summarise(gap), ss = summarise(stream_us), cs = summarise(call_us);
    std::printf("%-9s root end -> next kernel start %6.2f us (min %6.2f, max %7.2f); run + next kernel, stream time %6.2f us "
                "(min %6.2f, max %7.2f); host time of the call %6.2f us (min %6.2f, max %7.2f)\n",
                async ? "run_async" : "run", gs.median, gs.min, gs.max, ss.median, ss.min, ss.max, cs.median, cs.min, cs.max);
  }
  CANOPY_CUDA_TRY(cudaStreamDestroy(s));
  return 0;
}
