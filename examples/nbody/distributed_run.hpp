// SPDX-License-Identifier: Apache-2.0
// The N-body run across MPI ranks (distributed_step.hpp), behind a plain C++ interface so that
// main.cpp compiles without MPI. Built only where MPI is found (NBODY_HAVE_MPI).
#pragma once

#include "simulation.hpp"

namespace nbody {

// Whether this nbody was built with MPI, and whether mpiexec/mpirun started it (its environment:
// Open MPI's OMPI_COMM_WORLD_SIZE, MPICH's PMI_SIZE, PMIx's PMIX_RANK).
bool distributed_built();
bool launched_by_mpiexec();

// Initialises MPI, runs the simulation with each rank owning its domain's bodies, finalises MPI.
// Rank 0 prints the per-step lines (each phase's max over ranks), the summary (min and max over
// ranks) and the checks. Returns exit_ok or exit_check_failed on every rank; a failure on any
// rank ends every rank with one line naming it (exit_run_failed).
int run_distributed(const sim_options& o, int& argc, char**& argv);

}  // namespace nbody
