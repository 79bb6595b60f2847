// SPDX-License-Identifier: Apache-2.0
// The last resort against a hang in a collective: a rank that died without reaching an agreement
// step (killed, stuck in a kernel, a bug) leaves the others waiting in MPI or NCCL forever. A
// watchdog thread ends this rank when the current phase has run longer than its limit: one line on
// stderr naming the rank and the phase, then MPI_Abort (which ends every rank of the job) when MPI
// allows calls from this thread (MPI_THREAD_MULTIPLE), else _Exit, after which mpiexec ends the
// others.
//
//   canopy::distributed::watchdog dog(ctx, std::chrono::seconds(60));
//   dog.enter("migrate");  ...  dog.enter("build");  ...  dog.leave();
#pragma once

#include <canopy/distributed/mpi_context.hpp>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace canopy::distributed {

class watchdog {
 public:
  watchdog(const mpi_context& ctx, std::chrono::milliseconds limit);
  ~watchdog();
  watchdog(const watchdog&) = delete;
  watchdog& operator=(const watchdog&) = delete;

  // A phase begins: its clock starts now.
  void enter(std::string phase);
  // No phase runs (the watchdog waits without a deadline).
  void leave();

 private:
  void watch();

  int rank_;
  MPI_Comm comm_;
  int thread_level_ = MPI_THREAD_SINGLE;
  std::chrono::milliseconds limit_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::string phase_;
  bool active_ = false;
  bool stop_ = false;
  std::chrono::steady_clock::time_point deadline_{};
  std::thread thread_;
};

}  // namespace canopy::distributed
