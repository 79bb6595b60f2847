// SPDX-License-Identifier: Apache-2.0
// `canopy accumulate|validate|bench` under mpiexec (cmd_distributed.cpp, built where MPI is found:
// CANOPY_HAVE_DISTRIBUTED): the points made or read in parts, one per rank, the octree and its
// upward pass across the ranks (canopy::distributed::run_pass_pipeline), the result printed and
// written by rank 0 alone.
#pragma once

#include <string>

#include "backends.hpp"
#include "common.hpp"

namespace canopy::tool {

struct distributed_pass_request {
  std::string input;  // FILE or gen: spec
  tree_options tree;
  backend_options backend;  // backend cpu, gpu or auto (reference is refused); reps: runs of the pipeline
  bool validate = false;    // canopy validate: every node against the double reference
  bool json = false;
  bool build_given = false;  // --build was given: the distributed pipeline builds where its exchange is
};

// Exit code as the single-process commands': 0, 1 (validate: out of tolerance), 2, 3.
int run_distributed_pass(const distributed_pass_request& request);

struct distributed_bench_request {
  std::string input;  // FILE or gen: spec (from --input, or --dist and -n)
  tree_options tree;
  std::string modes;    // MODE[+TASKS] list, comma-separated; empty: the backend's default mode and tasks
  std::string backend;  // cpu, gpu or auto
  canopy::scheduler_options scheduler;
  int reps = 20;
  int warmup = 3;
  std::string json, csv;  // written by rank 0, atomically
  std::string usage_problem;  // an option that does not fit, said (exit 2) once every rank has agreed
};

int run_distributed_bench(const distributed_bench_request& request);

}  // namespace canopy::tool
