// SPDX-License-Identifier: Apache-2.0
// The warp-master loop of the seed's first design (modes without mode_traits::block_fetch: mutex,
// fixed-queue, private-queues): only warp masters work, each on one task: fetch, block sync,
// execute, block sync, push.
#pragma once

#include <cuda/atomic>

#include "canopy/detail/backoff.hpp"
#include "canopy/detail/kernel_common.cuh"
#include "canopy/detail/locked_queues.hpp"
#include "canopy/detail/ops_traits.cuh"
#include "canopy/mode.hpp"

namespace canopy::detail {

/// Modes mutex, fixed-queue and private-queues: only warp masters work, each on one task:
/// fetch, block sync, execute, block sync, push (the seed's first design).
template <class Ops, mode M>
__device__ void warp_master_loop(const Ops& ops, const scheduler_ref& r) {
  constexpr mode_traits T = traits_of(M);
  static_assert(!T.block_fetch && !T.atomic_tree && !T.shared_queues && !T.lockfree_global && !T.balanced_push &&
                    !T.continuation,
                "the warp-master loop runs the seed's locked designs: a mode with any later trait needs block_fetch");
  extern __shared__ task_id shared_tasks[];
  __shared__ int s_stop, s_private_mutex, s_private_head, s_private_count;
  const int tid = static_cast<int>(threadIdx.x);
  const bool master = (tid % 32) == 0;
  const std::uint64_t deadline = global_timer_ns() + r.budget_ns;
  spin_mutex_ref<cuda::thread_scope_block> private_mutex{&s_private_mutex};
  // The private queue lives in shared memory; warp masters share it under a block-scope mutex.
  // Inside the lock the ring's head and count are read and written with atomic operations. The
  // lock orders them already (exchange with acquire, store with release), but compute-sanitizer's
  // racecheck does not model locks: it reported the masters' plain loads and stores of these two
  // words as shared-memory hazards (15 reports, about 10,000 hazards over the small cases of
  // runtime_gpu_scheduler_test on an H100), which would hide a real race; it does not report
  // atomics. The slots need nothing: pushes (step 5) and pops (step 1) of a slot are separated by
  // block barriers, and two masters in the same step touch different slots.
  auto with_private = [&](auto&& f) {
    scoped_lock lock(private_mutex);
    cuda::atomic_ref<int, cuda::thread_scope_block> head(s_private_head), count(s_private_count);
    local_ring priv{shared_tasks, r.private_capacity, head.fetch_add(0, cuda::std::memory_order_relaxed),
                    count.fetch_add(0, cuda::std::memory_order_relaxed)};
    const int k = f(priv);
    head.exchange(priv.head, cuda::std::memory_order_relaxed);
    count.exchange(priv.count, cuda::std::memory_order_relaxed);
    return k;
  };
  if (tid == 0) s_stop = s_private_mutex = s_private_head = s_private_count = 0;
  __syncthreads();

  if constexpr (T.linked_list_queue) {
    // The original design starts from a global list holding every source.
    if (master) {
      const int warps = static_cast<int>(blockDim.x / 32);
      const int first = static_cast<int>(blockIdx.x) * warps + tid / 32;
      for (int i = first; i < r.graph.source_count; i += static_cast<int>(gridDim.x) * warps)
        if (!list_push<device_scope>(r, r.graph.sources[i])) {
          fail<device_scope>(r, status::queue_overflow, r.graph.sources[i]);
          break;
        }
    }
  }

  // While the block is idle only warp 0's master polls, and the block sleeps between polls:
  // thousands of warp masters polling the queue's line starve the one holding the mutex.
  const unsigned idle_max = r.idle_sleep_max_ns > 8192 ? r.idle_sleep_max_ns : 8192;
  backoff idle{64, idle_max};
  bool block_idle = false;
  for (unsigned round = 0;; ++round) {
    task_id t = no_task;
    if (master && (!block_idle || tid == 0) && !should_stop<device_scope>(r)) {  // 1. fetch
      if constexpr (T.linked_list_queue) {
        list_pop<device_scope>(r, t);
      } else {
        int got = 0;
        if constexpr (T.private_queues) got = with_private([&](local_ring& q) { return q.try_pop(&t, 1); });
        if (got == 0) got = claim_sources<device_scope>(r, &t, 1);
        if (got == 0) got = locked_pop<device_scope>(r, &t, 1);
      }
      if (t == no_task && (round & 15) == 15 && global_timer_ns() > deadline && !run_complete<device_scope>(r))
        fail<device_scope>(r, status::timeout, no_task);
      if (t == no_task && (round & 255) == 255 && abort_requested(r)) fail<device_scope>(r, status::aborted, no_task);
    }
    // 2. A block whose warp masters all came back empty sleeps before polling again, so that
    // thousands of idle warp masters do not flood the queue's line while others work.
    block_idle = !__syncthreads_or(t != no_task);
    if (block_idle) idle.pause();
    else idle = backoff{64, idle_max};
    if (master && t != no_task) invoke_task(ops, t, lane_group<1>::here());  // 3. execute
    __syncthreads();                            // 4.
    if (master && t != no_task) {               // 5. resolve and push
      task_id ready[8];
      int n_ready = 0;
      const int succs = resolve_locked<device_scope>(r, t, [&](task_id s) {
        bool ok;
        if (n_ready < 8) { ready[n_ready++] = s; return; }
        if constexpr (traits_of(M).linked_list_queue) ok = list_push<device_scope>(r, s);
        else ok = locked_push<device_scope>(r, &s, 1) == 1;
        if (!ok) fail<device_scope>(r, status::queue_overflow, s);
      });
      if (succs == 0) sink_finished<device_scope>(r);
      for (int i = 0; i < n_ready; ++i) {
        bool ok;
        if constexpr (T.linked_list_queue) {
          ok = list_push<device_scope>(r, ready[i]);
        } else {
          int done = 0;
          if constexpr (T.private_queues) done = with_private([&](local_ring& q) { return q.try_push(&ready[i], 1); });
          ok = done == 1 || locked_push<device_scope>(r, &ready[i], 1) == 1;
        }
        if (!ok) fail<device_scope>(r, status::queue_overflow, ready[i]);
      }
    }
    if (tid == 0) s_stop = should_stop<device_scope>(r) ? 1 : 0;
    __syncthreads();
    if (s_stop) break;
  }
}

}  // namespace canopy::detail
