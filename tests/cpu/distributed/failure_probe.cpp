// SPDX-License-Identifier: Apache-2.0
// A distributed build and pass in which one rank fails, as a program: the CTest cases run it under
// mpiexec and check that every rank stops within bounded time, with one line naming the failing
// rank and its cause, and a non-zero exit.
//   failure_probe nan|throw|stall RANK
//     nan:   RANK holds a point with a NaN coordinate (bad input, caught by the agreement)
//     throw: RANK throws in the middle of the local pass (caught by the agreement)
//     stall: RANK stops answering before a collective (the watchdog ends every rank)
//     kill:  RANK is killed (SIGKILL) before a collective (mpiexec ends every rank, naming it)
#include <canopy/distributed/distributed_octree.hpp>
#include <canopy/distributed/mpi_exchange.hpp>
#include <canopy/distributed/watchdog.hpp>
#include <canopy/trees/generators.hpp>

#include <mpi.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>

namespace cd = canopy::distributed;
namespace ct = canopy::trees;

int main(int argc, char** argv) {
  // MPI_THREAD_SINGLE: the watchdog then ends a stuck rank with _Exit and mpiexec ends the others
  // (MPI_THREAD_MULTIPLE would let it call MPI_Abort, but costs every MPI call a lock).
  MPI_Init(&argc, &argv);
  const std::string mode = argc > 1 ? argv[1] : "";
  const int failing = argc > 2 ? std::atoi(argv[2]) : 0;
  int status = 0;
  {
    const cd::mpi_context ctx(MPI_COMM_WORLD);
    cd::mpi_exchange ex(MPI_COMM_WORLD);
    cd::watchdog dog(ctx, std::chrono::seconds(3));
    std::vector<ct::point> mine = ct::generate_plummer(500, 1 + static_cast<std::uint64_t>(ctx.rank()));
    if (mode == "nan" && ctx.rank() == failing) mine[3].x = std::numeric_limits<float>::quiet_NaN();
    try {
      dog.enter("build");
      if (mode == "stall" && ctx.rank() == failing) std::this_thread::sleep_for(std::chrono::hours(1));
      if (mode == "kill" && ctx.rank() == failing) std::raise(SIGKILL);
      const cd::distributed_octree tree = cd::build_distributed_octree(ctx, ex, mine, {});
      dog.enter("upward pass");
      ct::upward_options pass;
      pass.scheduler.blocks = 1;
      ctx.phase("inject", [&] {
        if (mode == "throw" && ctx.rank() == failing) throw std::runtime_error("injected failure");
      });
      (void)cd::distributed_upward_pass(ctx, ex, tree, pass);
      dog.leave();
    } catch (const cd::distributed_error& e) {
      dog.leave();
      // Every rank knows the error; one of them says it.
      if (ctx.rank() == 0) std::fprintf(stderr, "canopy-dist: %s\n", e.what());
      status = 1;
    }
  }
  MPI_Finalize();
  return status;
}
