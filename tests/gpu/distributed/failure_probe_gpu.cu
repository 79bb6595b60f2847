// SPDX-License-Identifier: Apache-2.0
// The GPU path of canopy::distributed (device_distributed_octree over nccl_exchange, one rank a
// GPU) with one rank failing, as a program: tools/gpu-check runs it under mpirun -n 2 and checks
// that every rank stops within bounded time, with one line naming the failing rank and its cause,
// and a non-zero exit (tests/cpu/distributed/failure_probe.cpp does the same over MPI).
//   distributed_failure_probe_gpu MODE RANK
//     none:  no failure: the build, the pass and the probe's exchange step, exit 0
//     nan:   RANK holds a point with a NaN coordinate (the build's extent phase refuses it)
//     cuda:  RANK's stream runs a kernel that executes __trap() between the build and the pass: a
//            sticky error, which the pass's first CUDA call meets
//     oom:   RANK asks for an impossible device buffer (cudaMalloc fails) in the exchange step,
//            while the other ranks wait in its collective
//     nccl:  RANK's all-gather-v names a root outside the communicator (ncclInvalidArgument on it)
//            while the other ranks are inside theirs
//     abort: RANK aborts its communicator while the other ranks are inside a collective with it
//     stall: RANK stops answering inside the exchange step (its watchdog ends it, mpirun the rest)
//     kill:  RANK is killed (SIGKILL) while the other ranks are inside the exchange's collective
// An agreed failure prints one line on rank 0, "canopy-dist-gpu: rank R: PHASE: CAUSE", and every
// rank exits 1. In the oom, nccl and abort modes the other ranks give up on their collective at
// the exchange's 2 s deadline (a peer_wait_error), and the agreement still names RANK.
#include <canopy/cuda/device_buffer.hpp>
#include <canopy/distributed/device_distributed_octree.hpp>
#include <canopy/distributed/nccl_exchange.hpp>
#include <canopy/distributed/watchdog.hpp>
#include <canopy/trees/generators.hpp>

#include <cuda_runtime.h>
#include <mpi.h>

#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace cd = canopy::distributed;
namespace ct = canopy::trees;

namespace {

// Short limits, so that each case ends in seconds: the exchange gives up on a collective after
// nccl_timeout, the step watchdog ends a rank whose exchange step (or its agreement) runs past
// step_limit, and the guard bounds everything else (set-up, the build and pass, the clean-up).
// step_limit outlasts nccl_timeout and the abort after it (about half a second) with room to spare:
// a rank that failed at once waits in the agreement for the others' deadline, and a rank that gave
// up on a stalled peer must not reach its own watchdog before the stalled rank's.
constexpr auto nccl_timeout = std::chrono::seconds(2);
constexpr auto step_limit = std::chrono::seconds(5);
constexpr auto guard_limit = std::chrono::seconds(20);

__global__ void trap_kernel() { __trap(); }

// The probe's own collective step, agreed like the library's phases: every rank all-gathers one
// word from each rank over NCCL, and RANK fails in the mode's way. The watchdog's clock restarts
// for the agreement: a rank that finished its part, or gave up waiting for a peer, then waits
// there, so that the watchdog of a rank that stopped answering inside its part fires first and
// its line is the one that names the stall.
void exchange_step(const cd::mpi_context& ctx, cd::nccl_exchange& ex, cd::watchdog& dog, const std::string& mode,
                   int failing) {
  dog.enter("exchange");
  std::exception_ptr failure;
  try {
    const bool me = ctx.rank() == failing;
    const auto ranks = static_cast<std::size_t>(ctx.size());
    canopy::device_buffer<std::uint64_t> send(1), recv(ranks + 1);  // a spare word for the bad root
    CANOPY_CUDA_TRY(cudaMemsetAsync(send.data(), 0, sizeof(std::uint64_t), ex.stream()));
    std::vector<std::size_t> counts(ranks, 1);
    if (me) {
      if (mode == "stall") std::this_thread::sleep_for(std::chrono::hours(1));
      // The others enqueue their part first, and wait inside the collective for this rank.
      if (mode == "kill" || mode == "abort") std::this_thread::sleep_for(std::chrono::milliseconds(300));
      if (mode == "kill") std::raise(SIGKILL);
      if (mode == "abort") ex.abort();  // the all-gather below then throws: the communicator was aborted
      if (mode == "oom") canopy::device_buffer<std::byte> huge(std::size_t{1} << 50);
      if (mode == "nccl") counts.push_back(1);  // rank `size` as a root: NCCL refuses the call
    }
    ex.all_gather_v(send.data(), recv.data(), counts, sizeof(std::uint64_t));
    ex.synchronize();
  } catch (...) {
    failure = std::current_exception();
  }
  dog.enter("exchange: agreement");
  ctx.agree("exchange", failure);
}

int device_for_this_rank(const cd::mpi_context& ctx) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
  if (ctx.min(devices) == 0) return -1;
  MPI_Comm local;
  MPI_Comm_split_type(ctx.comm(), MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  int local_rank = 0;
  MPI_Comm_rank(local, &local_rank);
  MPI_Comm_free(&local);
  return local_rank % devices;
}

}  // namespace

int main(int argc, char** argv) {
  // MPI_THREAD_SINGLE, as the CPU probe: a watchdog ends its rank with _Exit and mpirun ends the
  // others.
  MPI_Init(&argc, &argv);
  const std::string mode = argc > 1 ? argv[1] : "";
  const int failing = argc > 2 ? std::atoi(argv[2]) : 1;
  int status = 0;
  {
    const cd::mpi_context ctx(MPI_COMM_WORLD);
    const char* modes[] = {"none", "nan", "cuda", "oom", "nccl", "abort", "stall", "kill"};
    bool known = false;
    for (const char* m : modes) known = known || mode == m;
    if (!known || failing < 0 || failing >= ctx.size()) {
      if (ctx.rank() == 0) {
        std::fprintf(stderr, "usage: distributed_failure_probe_gpu none|nan|cuda|oom|nccl|abort|stall|kill RANK (0..%d)\n",
                     ctx.size() - 1);
      }
      MPI_Finalize();
      return 2;
    }
    const int device = device_for_this_rank(ctx);
    if (device < 0) {
      if (ctx.rank() == 0) std::fprintf(stderr, "canopy-dist-gpu: a rank has no CUDA device\n");
      MPI_Finalize();
      return 2;
    }
    cd::watchdog guard(ctx, guard_limit);
    cd::watchdog dog(ctx, step_limit);
    guard.enter("set-up");
    cudaStream_t stream = nullptr;
    try {
      ctx.phase("device", [&] {
        CANOPY_CUDA_TRY(cudaSetDevice(device));
        CANOPY_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      });
      // Declared before what uses it, so that the tree's buffers are freed before the exchange ends
      // its communicator; neither is ended with an explicit abort() after a failure: their
      // destructors are the clean-up under test (bounded: the exchange's destructor aborts when
      // its stream or its finalisation does not finish within its timeout, or the stream failed).
      cd::nccl_exchange ex(ctx, device, stream, nccl_timeout);
      std::vector<ct::point> mine = ct::generate_plummer(20000, 1 + static_cast<std::uint64_t>(ctx.rank()));
      if (mode == "nan" && ctx.rank() == failing) mine[3].x = std::numeric_limits<float>::quiet_NaN();
      std::optional<canopy::device_buffer<ct::point>> points;
      ctx.phase("upload", [&] { points.emplace(mine); });
      cd::device_distributed_octree tree;
      try {
        guard.enter("build");
        cd::decomposition_options options;
        options.max_leaf = 16;
        tree.build(ctx, ex, points->data(), mine.size(), options);
        if (mode == "cuda" && ctx.rank() == failing) {
          trap_kernel<<<1, 1, 0, stream>>>();  // not waited for: the pass's first CUDA call meets it
        }
        guard.enter("upward pass");
        ct::upward_options pass;
        pass.backend = ct::pass_backend::gpu;
        pass.tasks = ct::default_pass_tasks(pass.backend);
        (void)tree.upward(ctx, ex, pass);
        guard.leave();
        exchange_step(ctx, ex, dog, mode, failing);
        dog.leave();
      } catch (const cd::distributed_error& e) {
        dog.leave();
        // Every rank holds the same error; one of them says it.
        if (ctx.rank() == 0) std::fprintf(stderr, "canopy-dist-gpu: %s\n", e.what());
        status = 1;
      }
      guard.enter("clean-up");
    } catch (const cd::distributed_error& e) {  // the set-up failed (agreed)
      if (ctx.rank() == 0) std::fprintf(stderr, "canopy-dist-gpu: %s\n", e.what());
      status = 1;
    } catch (const std::exception& e) {
      // A failure outside an agreed phase: the other ranks may be waiting in a collective.
      std::fprintf(stderr, "canopy-dist-gpu: rank %d: %s (not agreed)\n", ctx.rank(), e.what());
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
    guard.enter("clean-up");
    if (stream != nullptr) (void)cudaStreamDestroy(stream);
    guard.leave();
  }
  MPI_Finalize();
  return status;
}
