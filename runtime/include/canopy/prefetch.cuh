// SPDX-License-Identifier: Apache-2.0
// Asking for bytes ahead of their use: the device side of the optional `prefetch` hook of an Ops
// (canopy/lane_group.cuh).
//
// A lane group runs its share of a batch one task after the other, and a task of the octree pass
// starts with a chain of dependent loads (its entry, the node's structure, the points), each link
// a DRAM round trip that nothing else of the group overlaps. Two stages keep the bytes in flight
// bounded: when its share starts, a group asks for every task's small records (`structure`, into
// L1, all at once), and while it runs a task, for the next task's bulk bytes (`data`, into L2).
// Asking for every task's data at once instead reads more from DRAM: the last tasks' lines leave
// L2 before their turn.
#pragma once

#if !defined(__CUDACC__)
#error "canopy/prefetch.cuh is device code: include it from .cu files only"
#endif

#include <cstdint>

namespace canopy {

/// What the scheduler asks an Ops::prefetch for: `structure` for every task of a group's share
/// when the share starts (the small records the task reads first, into this SM's L1: nothing that
/// must wait for more than one load), `data` for the task the group runs next (its bulk bytes,
/// into L2; by then its structure is in L1).
enum class prefetch_stage { structure, data };

/// Starts bringing [p, p + bytes) into this SM's L1 (one `prefetch.global.L1` per 128-byte line
/// touched, at most 4). A hint. L1 is not coherent between SMs: use it only for data that no task
/// of the run writes (a graph's structure, read-only inputs), never for results of other tasks.
__device__ __forceinline__ void prefetch_l1(const void* p, std::uint32_t bytes) {
  const auto a = static_cast<std::uintptr_t>(__cvta_generic_to_global(p));
  const std::uintptr_t last = (a + (bytes == 0 ? 1 : bytes) - 1) & ~std::uintptr_t{127};
  int lines = 0;
  for (std::uintptr_t line = a & ~std::uintptr_t{127}; line <= last && lines < 4; line += 128, ++lines)
    asm volatile("prefetch.global.L1 [%0];" ::"l"(line));
}

/// Starts bringing [p, p + bytes) into L2 and returns at once; a hint: nothing waits for it, and a
/// line it fetched may be gone again before it is read. The range is widened to 16-byte bounds.
/// sm_90 and later issue one bulk prefetch (TMA) for the whole range; older devices one
/// `prefetch.global.L2` per 128-byte line, at most 32 lines (a path this project's builds, which
/// target sm_90, do not compile). L2 is the device's point of coherence, so prefetching data that
/// another SM writes during the run never makes a later read stale.
__device__ __forceinline__ void prefetch_l2(const void* p, std::uint32_t bytes) {
  if (bytes == 0) return;
  const auto a = static_cast<std::uintptr_t>(__cvta_generic_to_global(p));
  const std::uintptr_t lo = a & ~std::uintptr_t{15};
  const std::uintptr_t hi = (a + bytes + 15) & ~std::uintptr_t{15};
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(lo), "r"(static_cast<std::uint32_t>(hi - lo)));
#else
  const std::uintptr_t last = hi - 1;
  int lines = 0;
  for (std::uintptr_t line = lo & ~std::uintptr_t{127}; line <= last && lines < 32; line += 128, ++lines)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(line));
#endif
}

}  // namespace canopy
