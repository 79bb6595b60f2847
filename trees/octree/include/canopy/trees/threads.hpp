// SPDX-License-Identifier: Apache-2.0
// How many std::threads the host-side builders and generators of the trees library use.
// Results never depend on it: work is cut into fixed chunks, each seeded or sorted on its own,
// so one thread and sixteen produce the same bytes (tests check this).
#pragma once

namespace canopy::trees {

// 0 (the default) means std::thread::hardware_concurrency().
void set_host_threads(unsigned count) noexcept;
// The effective count, at least 1.
unsigned host_threads() noexcept;

}  // namespace canopy::trees
