// SPDX-License-Identifier: Apache-2.0
// The persistent kernel: one cooperative launch of co-resident blocks that loop until every sink
// has finished (or the run fails), between begin_run and end_of_run (run_lifecycle.cuh). One
// instantiation per (Ops, mode); the mode's traits select the loop (block_loop.cuh or
// warp_master_loop.cuh) and which steps of the seed's design it compiles in.
#pragma once

#include "canopy/detail/block_loop.cuh"
#include "canopy/detail/kernel_common.cuh"
#include "canopy/detail/run_lifecycle.cuh"
#include "canopy/detail/scheduler_state.hpp"
#include "canopy/detail/warp_master_loop.cuh"
#include "canopy/mode.hpp"

namespace canopy::detail {

/// Registers per thread the kernel may use. The loop keeps queue state and an Ops payload (the
/// octree's is 17 words) live at once; uncapped, nvcc gives it 72-96 registers, i.e. two blocks of
/// 256 per SM. At 64 an SM keeps twice the warps resident, which bandwidth-bound passes need.
/// Define CANOPY_KERNEL_MAX_REGISTERS to change it.
#ifndef CANOPY_KERNEL_MAX_REGISTERS
#define CANOPY_KERNEL_MAX_REGISTERS 64
#endif

/// Ops whose tasks hold large per-thread state (the FMM's expansions: 84 floats each at order 6)
/// may declare `static constexpr int max_registers = N;` (32 .. 255) instead: at 64 their bodies
/// spill, and a kernel of many more resident threads keeps more local memory live than L1 holds.
/// The grid is sized by the occupancy API, so fewer blocks become resident.
template <class Ops>
constexpr int max_registers_of() {
  if constexpr (requires { Ops::max_registers; }) {
    static_assert(Ops::max_registers >= 32 && Ops::max_registers <= 255, "Ops::max_registers must be 32..255");
    return Ops::max_registers;
  } else {
    return CANOPY_KERNEL_MAX_REGISTERS;
  }
}

template <class Ops, mode M>
__global__ void __maxnreg__(max_registers_of<Ops>()) persistent_kernel(Ops ops, const __grid_constant__ scheduler_ref r) {
  begin_run(r);
  if constexpr (traits_of(M).block_fetch) block_fetch_loop<Ops, M>(ops, r);
  else warp_master_loop<Ops, M>(ops, r);
  end_of_run(r);
}

}  // namespace canopy::detail
