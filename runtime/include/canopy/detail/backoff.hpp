// SPDX-License-Identifier: Apache-2.0
// Polite spinning: exponential __nanosleep on the device, yield on the host (the CPU backend may
// run more workers than cores, and a spinning worker must let the one it waits for run).
#pragma once

#include "canopy/config.hpp"

#if !CANOPY_DEVICE_CODE
#include <thread>
#endif

namespace canopy::detail {

struct backoff {
  unsigned ns = 32;
  unsigned max_ns = 1024;
  CANOPY_HD void pause() {
#if CANOPY_DEVICE_CODE
    __nanosleep(ns < max_ns ? ns : max_ns);
    if (ns < max_ns) ns *= 2;
#else
    std::this_thread::yield();
#endif
  }
};

}  // namespace canopy::detail
