// The persistent kernel: one cooperative launch of co-resident blocks that loop until every sink
// has finished (or the run fails). One instantiation per (Ops, mode); the mode's traits select the
// loop (block_loop.cuh or warp_master_loop.cuh) and which steps of the seed's design it compiles in.
#pragma once

#include "canopy/detail/block_loop.cuh"
#include "canopy/detail/kernel_common.cuh"
#include "canopy/detail/scheduler_state.hpp"
#include "canopy/detail/warp_master_loop.cuh"
#include "canopy/mode.hpp"

namespace canopy::detail {

/// Entering a run: block 0 resets the counters of the *next* run (the host alternates between two
/// sets). No block of the previous run, which used them, is still running, and none of this run
/// touches them, so consecutive runs need neither a memset nor a last-block-out handshake (which
/// cost a serialised atomic per block at the end of every run). A failed run is reset by the host.
__device__ inline void prepare_next_run(const scheduler_ref& r) {
  if (blockIdx.x != 0 || threadIdx.x != 0 || r.next_counters == nullptr) return;
  run_counters& c = *r.next_counters;
  c.stop = 0;
  c.source_cursor = 0;
  c.sinks_left = r.graph.sink_count;
}

/// Registers per thread the kernel may use. The loop keeps queue state and an Ops payload (the
/// octree's is 17 words) live at once; uncapped, nvcc gives it 72-96 registers, i.e. two blocks of
/// 256 per SM. At 64 an SM keeps twice the warps resident, which bandwidth-bound passes need.
/// Define CANOPY_KERNEL_MAX_REGISTERS to change it.
#ifndef CANOPY_KERNEL_MAX_REGISTERS
#define CANOPY_KERNEL_MAX_REGISTERS 64
#endif

template <class Ops, mode M>
__global__ void __maxnreg__(CANOPY_KERNEL_MAX_REGISTERS) persistent_kernel(Ops ops, scheduler_ref r) {
  prepare_next_run(r);
  if constexpr (traits_of(M).block_fetch) block_fetch_loop<Ops, M>(ops, r);
  else warp_master_loop<Ops, M>(ops, r);
}

}  // namespace canopy::detail
