// SPDX-License-Identifier: Apache-2.0
#include "mpi_launch.hpp"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string_view>
#include <system_error>

#include "distributed_commands.hpp"

#if CANOPY_HAVE_DISTRIBUTED
#include <mpi.h>
#endif

namespace canopy::tool {

namespace {

bool initialised = false;
int world_rank = 0;
int world_size = 1;

// A positive count from the environment, or 0.
int env_count(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return 0;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return *end == '\0' && n > 0 && n < (1L << 30) ? static_cast<int>(n) : 0;
}

}  // namespace

bool mpi_launch::launched() noexcept {
  // Open MPI, MPICH/Hydra and Slurm's PMI-2 set a size; PMIx launchers a rank.
  return env_count("OMPI_COMM_WORLD_SIZE") > 0 || env_count("PMI_SIZE") > 0 || std::getenv("PMIX_RANK") != nullptr;
}

int mpi_launch::launched_size() noexcept {
  if (const int n = env_count("OMPI_COMM_WORLD_SIZE"); n > 0) return n;
  if (const int n = env_count("PMI_SIZE"); n > 0) return n;
  return 1;
}

int mpi_launch::launched_rank() noexcept {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"}) {
    const char* v = std::getenv(name);
    if (v != nullptr && *v != '\0') return static_cast<int>(std::strtol(v, nullptr, 10));
  }
  return 0;
}

bool mpi_launch::active() noexcept { return initialised; }
int mpi_launch::rank() noexcept { return world_rank; }
int mpi_launch::size() noexcept { return world_size; }

mpi_launch::mpi_launch([[maybe_unused]] int& argc, [[maybe_unused]] char**& argv) {
  if (!launched()) return;
#if !CANOPY_HAVE_DISTRIBUTED
  // canopy under a launcher: canopy-mpi from the same folder takes over, with the same arguments.
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return;
  const std::filesystem::path mpi = self.parent_path() / "canopy-mpi";
  if (::access(mpi.c_str(), X_OK) != 0) return;  // none: main says the build has no MPI
  ::execv(mpi.c_str(), argv);                   // returns only on failure: go on without MPI
#else
  // MPI_THREAD_SINGLE: the pipeline's watchdog ends a stuck rank with _Exit and the launcher ends
  // the others (MPI_THREAD_MULTIPLE would let it call MPI_Abort, but costs every MPI call a lock).
  if (MPI_Init(&argc, &argv) != MPI_SUCCESS) return;
  initialised = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
#endif
}

mpi_launch::~mpi_launch() {
#if CANOPY_HAVE_DISTRIBUTED
  if (initialised) MPI_Finalize();
  initialised = false;
#endif
}

int mpi_launch::run_pass([[maybe_unused]] const distributed_pass_request& request) {
#if CANOPY_HAVE_DISTRIBUTED
  return run_distributed_pass(request);
#else
  throw std::logic_error("the distributed commands are in canopy-mpi");
#endif
}

int mpi_launch::run_bench([[maybe_unused]] const distributed_bench_request& request) {
#if CANOPY_HAVE_DISTRIBUTED
  return run_distributed_bench(request);
#else
  throw std::logic_error("the distributed commands are in canopy-mpi");
#endif
}

void mpi_launch::abort_all(int code) {
#if CANOPY_HAVE_DISTRIBUTED
  if (initialised) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  std::_Exit(code);
}

}  // namespace canopy::tool
