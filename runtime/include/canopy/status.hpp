// SPDX-License-Identifier: Apache-2.0
// Run results and typed errors. A scheduler run never drops work silently and never hangs: it
// ends with one of these statuses, and a failed status names the task it concerns.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include "canopy/config.hpp"

namespace canopy {

enum class status : int {
  ok = 0,
  queue_overflow = 1,    ///< the global queue was full (or, in `mutex` mode, the device heap was)
  timeout = 2,           ///< the deadline passed; `task` names a task that never became ready
  aborted = 3,           ///< the host asked the run to stop
  invalid_argument = 4,  ///< bad options or graph, detected before launch
  device_error = 5,      ///< a CUDA call failed
  task_error = 6,        ///< a task's operation threw (CPU backend); `task` names it, the message says what
};

constexpr std::string_view to_string(status s) {
  switch (s) {
    case status::ok: return "ok";
    case status::queue_overflow: return "queue overflow";
    case status::timeout: return "timeout";
    case status::aborted: return "aborted";
    case status::invalid_argument: return "invalid argument";
    case status::device_error: return "device error";
    case status::task_error: return "task error";
  }
  return "unknown";
}

/// What a run reports. `task` is the task the status concerns (the task that could not be queued
/// on overflow, a task that never became ready on timeout), `no_task` otherwise.
struct run_result {
  status code = status::ok;
  task_id task = no_task;
  std::string message;
  bool ok() const { return code == status::ok; }
  explicit operator bool() const { return ok(); }
};

/// Thrown by constructors and validation (a run itself returns a run_result).
class error : public std::runtime_error {
 public:
  error(status code, const std::string& what) : std::runtime_error(what), code_(code) {}
  status code() const { return code_; }

 private:
  status code_;
};

}  // namespace canopy
