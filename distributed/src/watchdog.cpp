// SPDX-License-Identifier: Apache-2.0
#include <canopy/distributed/watchdog.hpp>

#include <cstdio>
#include <cstdlib>
#include <utility>

namespace canopy::distributed {

watchdog::watchdog(const mpi_context& ctx, std::chrono::milliseconds limit)
    : rank_(ctx.rank()), comm_(ctx.comm()), limit_(limit) {
  MPI_Query_thread(&thread_level_);  // here, on the thread that initialised MPI
  thread_ = std::thread([this] { watch(); });
}

watchdog::~watchdog() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void watchdog::enter(std::string phase) {
  {
    std::lock_guard lock(mutex_);
    phase_ = std::move(phase);
    active_ = true;
    deadline_ = std::chrono::steady_clock::now() + limit_;
  }
  wake_.notify_all();
}

void watchdog::leave() {
  {
    std::lock_guard lock(mutex_);
    active_ = false;
  }
  wake_.notify_all();
}

void watchdog::watch() {
  std::unique_lock lock(mutex_);
  for (;;) {
    if (stop_) return;
    if (!active_) {
      wake_.wait(lock);
      continue;
    }
    if (wake_.wait_until(lock, deadline_) == std::cv_status::timeout && active_ && !stop_ &&
        std::chrono::steady_clock::now() >= deadline_) {
      std::fprintf(stderr,
                   "canopy::distributed: rank %d: %s: no progress in %.3g s (a rank stopped or hangs in a collective); "
                   "stopping every rank\n",
                   rank_, phase_.c_str(), std::chrono::duration<double>(limit_).count());
      std::fflush(stderr);
      if (thread_level_ == MPI_THREAD_MULTIPLE) MPI_Abort(comm_, 2);
      std::_Exit(2);
    }
  }
}

}  // namespace canopy::distributed
