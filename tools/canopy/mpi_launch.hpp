// SPDX-License-Identifier: Apache-2.0
// `canopy` under mpiexec: whether this process is one rank of several, and MPI's life in main.
//
// A launcher (Open MPI's mpiexec/mpirun, MPICH's Hydra, Slurm's srun through PMI or PMIx) says so
// in the environment. Two binaries share every command: `canopy`, which needs neither MPI nor NCCL
// at run time, and `canopy-mpi` (built where MPI is found), which initialises MPI when launched.
// Under a launcher `canopy` replaces itself by the canopy-mpi beside it (execv, same arguments), so
// users type `mpiexec -n 4 canopy validate ...`. There `accumulate`, `validate` and `bench` run the
// distributed pipeline (cmd_distributed.cpp) over every rank, even with -n 1; the other commands
// run on a single rank and refuse more. A plain `canopy ...` never starts MPI.
#pragma once

#include <string>

namespace canopy::tool {

struct distributed_pass_request;   // distributed_commands.hpp
struct distributed_bench_request;

class mpi_launch {
 public:
  // canopy-mpi: initialises MPI when a launcher started this process. canopy: under a launcher,
  // execs the canopy-mpi of its own folder when there is one (and returns only when there is not).
  mpi_launch(int& argc, char**& argv);
  ~mpi_launch();  // MPI_Finalize, when initialised
  mpi_launch(const mpi_launch&) = delete;
  mpi_launch& operator=(const mpi_launch&) = delete;

  // A launcher started this process (whatever the build).
  static bool launched() noexcept;
  // The launcher's rank count (from its environment; 1 when not launched or not said).
  static int launched_size() noexcept;
  // MPI is initialised: the distributed commands can run.
  static bool active() noexcept;
  static int rank() noexcept;  // 0 when not active
  static int size() noexcept;  // 1 when not active

  // The launcher's rank of this process (from its environment; 0 when not said): which rank
  // speaks when MPI is not initialised (a build without it).
  static int launched_rank() noexcept;

  // After an error on this rank that the others did not agree on (outside the distributed
  // pipeline's phases, which agree every failure): ends every rank with `code` (MPI_Abort), since
  // the others may wait for this one in their next collective.
  [[noreturn]] static void abort_all(int code);

  // The distributed commands (cmd_distributed.cpp); only when active(), so only in canopy-mpi.
  static int run_pass(const distributed_pass_request& request);
  static int run_bench(const distributed_bench_request& request);
};

}  // namespace canopy::tool
