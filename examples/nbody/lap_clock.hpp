// SPDX-License-Identifier: Apache-2.0
// The host clock of the distributed steps' phases: each reading returns the milliseconds since the
// last and restarts the lap.
#pragma once

#include <chrono>

namespace nbody {

using lap_clock = std::chrono::steady_clock;

inline double lap_ms(lap_clock::time_point& start) {
  const auto now = lap_clock::now();
  const double ms = std::chrono::duration<double, std::milli>(now - start).count();
  start = now;
  return ms;
}

}  // namespace nbody
