// SPDX-License-Identifier: Apache-2.0
// The block loop of modes with mode_traits::block_fetch (all-threads and later): the block master
// fetches a batch for the whole block, every lane group runs its share of it, and the master
// pushes what the block made ready.
#pragma once

#include <cuda/atomic>

#include "canopy/detail/backoff.hpp"
#include "canopy/detail/dependency.hpp"
#include "canopy/detail/fetch_push.hpp"
#include "canopy/detail/kernel_common.cuh"
#include "canopy/detail/ops_traits.cuh"
#include "canopy/lane_group.cuh"
#include "canopy/mode.hpp"

namespace canopy::detail {

/// When a group starts its share of a full batch (tasks i, i + groups, ... of the batch), lane k
/// asks for the structure of the k-th of them, so that the share's first dependent loads overlap
/// once, and for the data of the first CANOPY_PREFETCH_AHEAD.
template <class Ops, int G>
__device__ __forceinline__ void prefetch_share(const Ops& ops, const scheduler_ref& r, const batch_view& cur,
                                               const task_id* batch, int todo, int group, int groups,
                                               const lane_group<G>& g) {
  if constexpr (has_prefetch<Ops> && CANOPY_PREFETCH_AHEAD > 0) {
    const int i = group + g.rank * groups;  // i < todo <= batch_max <= groups * tasks per group
    if (i < todo) {
      const task_id t = cur.at(r, batch, i);
      ops.prefetch(t, prefetch_stage::structure);
      if (g.rank < CANOPY_PREFETCH_AHEAD) ops.prefetch(t, prefetch_stage::data);
    }
  }
}

/// Before a group runs task i of its share, lane 0 asks for the data of the one it runs
/// CANOPY_PREFETCH_AHEAD tasks later.
template <class Ops, int G>
__device__ __forceinline__ void prefetch_next(const Ops& ops, const scheduler_ref& r, const batch_view& cur,
                                              const task_id* batch, int i, int groups, int todo,
                                              const lane_group<G>& g) {
  if constexpr (has_prefetch<Ops> && CANOPY_PREFETCH_AHEAD > 0) {
    const int next = i + CANOPY_PREFETCH_AHEAD * groups;
    if (g.rank == 0 && next < todo) ops.prefetch(cur.at(r, batch, next), prefetch_stage::data);
  }
}

/// Runs `t` on group g and, in continuation mode when `climb` is set, the chain of tasks it makes
/// ready; other tasks it makes ready go to `stage` (atomic-tree modes). Locked-tree modes leave
/// resolution to the caller. Every lane of the group calls this with the same task; lane 0
/// resolves.
template <mode M, class Ops, int G, class Stage>
__device__ __forceinline__ void execute_chain(const Ops& ops, const scheduler_ref& r, task_id t, const lane_group<G>& g,
                                              bool climb, Stage&& stage) {
  constexpr mode_traits T = traits_of(M);
  // A chain is cut after this many tasks (the next one is staged like any other ready task): a
  // DAG with a long dependency chain would otherwise hold the block, and the tasks it staged, for
  // the whole chain. Trees are at most 22 levels deep and never reach it.
  constexpr int max_chain = 64;
  // Known at compile time for Ops that run on trees only (tree_only_of): no DAG code in their kernel.
  const bool tree = tree_only_of<Ops> || r.graph.succ_offsets == nullptr;
  for (int hops = 1; t != no_task; ++hops) {
    // A tree task's parent, and a DAG task's successor range, are loaded before the task runs, so
    // that their L2 round trips overlap the task instead of coming between the task and its
    // arrivals (a climbing chain waits for them on every hop). The range's two registers live
    // across the task: Ops that declare tree_only do not carry them (registers the octree kernels
    // need for their own loads; see bench/RESULTS.md).
    task_id parent = no_task;
    std::int32_t succ_begin = 0, succ_end = 0;
    if constexpr (T.atomic_tree) {
      if (tree) {
        if (g.rank == 0) parent = r.graph.parent[t];
      } else if constexpr (!tree_only_of<Ops>) {
        succ_begin = r.graph.succ_offsets[t];
        succ_end = r.graph.succ_offsets[t + 1];
      }
    }
    invoke_task(ops, t, g);
    if constexpr (!T.atomic_tree) return;
    // The barrier orders every lane's writes before the arriving lanes' releases; after the
    // acquire of the lane that made the next task ready, the second barrier orders the other
    // lanes' reads of that task's inputs after it.
    g.sync();
    const bool may_climb = T.continuation && climb && hops < max_chain;
    if (tree) {
      task_id next = no_task;
      if (g.rank == 0) {
        const int succs = resolve_parent<device_scope>(r.graph, parent, [&](task_id s) {
          if (may_climb) next = s;
          else stage(s);
        });
        if (succs == 0) sink_finished<device_scope>(r);
      }
      t = g.from_first(next);
    } else {
      // A DAG task's successors are resolved by the group's lanes at once (lane k arrives at
      // successors k, k + G, ...; a lane with several issues them together, arrive_each): each
      // arrival is a device-scope atomic, an L2 round trip, and one lane doing them one after the
      // other would put all of them on the chain's critical path. The
      // lowest lane that made a successor ready hands it to the group when it may climb; every
      // other ready successor is staged.
      const std::int32_t b = succ_begin, e = succ_end;
      task_id mine = no_task;
      arrive_each<device_scope>(r.graph, b + g.rank, e, G, [&](task_id s) {
        if (mine == no_task) mine = s;
        else stage(s);
      });
      const int leader = may_climb ? g.first_with(mine != no_task) : -1;
      if (mine != no_task && g.rank != leader) stage(mine);
      if (e == b && g.rank == 0) sink_finished<device_scope>(r);
      t = leader < 0 ? no_task : g.from_lane(mine, leader);
    }
    g.sync();
  }
}

/// A DAG task with more successors than this is resolved by its whole lane group (lane k arrives
/// at successors k, k + G, ...), not by the one lane that holds it: one round of arrive_each's
/// relaxed fetch_subs is four wide, so a lane alone pays a chain of L2 round trips for every four
/// successors, while the block waits at its barrier. The FMM's up tasks have hundreds to thousands
/// of successors (one per M2L target waiting for them): one lane took about 75 rounds for 300.
inline constexpr int wide_successors = 4;

/// The continuation mode's resolution of a full batch: task i of the batch is the share of group
/// i % groups (one task per lane of it: tasks per group <= G), each lane resolving its own task, so
/// that the arrivals of several tasks overlap; a DAG task with more than wide_successors successors
/// is resolved afterwards by every lane of its group, one such task after the other.
template <class Ops, int G, class Stage>
__device__ __forceinline__ void resolve_share(const scheduler_ref& r, const batch_view& cur, const task_id* batch, int todo,
                                              int group, int groups, const lane_group<G>& g, Stage&& stage) {
  const bool tree = tree_only_of<Ops> || r.graph.succ_offsets == nullptr;
  if (G == 1 || tree) {
    for (int i = group + g.rank * groups; i < todo; i += groups * G) {
      const int succs = resolve_successors<device_scope, tree_only_of<Ops>>(r.graph, cur.at(r, batch, i), stage);
      if (succs == 0) sink_finished<device_scope>(r);
    }
    return;
  }
  if constexpr (!tree_only_of<Ops>) {
    const int i = group + g.rank * groups;  // at most one task a lane: todo <= groups * G
    std::int32_t b = 0, e = 0;
    if (i < todo) {
      const task_id done = cur.at(r, batch, i);
      b = r.graph.succ_offsets[done];
      e = r.graph.succ_offsets[done + 1];
      if (e == b) sink_finished<device_scope>(r);
    }
    const bool wide = e - b > wide_successors;
    if (!wide) arrive_each<device_scope>(r.graph, b, e, 1, stage);
    for (int leader = g.first_with(wide); leader >= 0; leader = g.first_with(wide && g.rank > leader)) {
      const std::int32_t wb = g.from_lane(b, leader), we = g.from_lane(e, leader);
      arrive_each<device_scope>(r.graph, wb + g.rank, we, G, stage);
    }
  }
}

/// The longest an idle block sleeps before it looks at the queues again: 1/64 of the time the run
/// has taken so far, at least 512 ns, at most r.idle_sleep_max_ns; and a block that has been idle
/// for more than 16 of those longest sleeps, at most 1/16 of its idle time, up to
/// r.idle_sleep_long_ns. A block asleep when the run ends delays the end by up to twice its sleep
/// (__nanosleep's range), so the cap must stay small in short runs, whose whole length is a few
/// such sleeps, and in a long run's last levels, where blocks wait a few tens of µs (the climb
/// above a big tree's twigs); but a block that waits for milliseconds (a deep DAG at full
/// occupancy: one block works, the others poll) slows the working block by its polling alone,
/// even every few µs (see auto_idle_sleep_long_ns in gpu_scheduler.cuh). `now` is the global
/// timer, `idle_start` its value when this block's master began looking for work.
__device__ __forceinline__ unsigned idle_sleep_cap(const scheduler_ref& r, std::uint64_t start, std::uint64_t now,
                                                   std::uint64_t idle_start) {
  constexpr unsigned floor_ns = 512;
  const std::uint64_t cap = (now - start) >> 6;
  const std::uint64_t idle = (now - idle_start) >> 4;
  std::uint64_t limit = r.idle_sleep_max_ns;
  if (idle > limit) limit = idle < r.idle_sleep_long_ns ? idle : r.idle_sleep_long_ns;
  return cap < floor_ns ? (limit < floor_ns ? static_cast<unsigned>(limit) : floor_ns)
                        : cap > limit ? static_cast<unsigned>(limit) : static_cast<unsigned>(cap);
}

/// What a warp of warp_rounds keeps between rounds (shared memory, written by lane 0): the sources
/// it holds but has not run yet, [first, end) of graph.sources.
struct warp_sources {
  std::uint32_t first, end;
  bool claimed;  // it has claimed from the cursor at least once (its first range is dealt)
  bool done;     // the sources are exhausted, or the run stopped
};

/// warp_rounds on a tree: a warp runs up to 32 of its sources (lane group j takes tasks j, j + 32 /
/// G, ...), its lanes resolve them one task each, and the parents they made ready are the warp's
/// next round, until a round makes none ready; then it takes more sources (its share of the
/// block's statically dealt chunk first, then claims of up to 32 from the cursor). Nothing is
/// queued and no block barrier is waited on: a warp whose sources ran short (an adaptive tree's
/// leaves hold 1 to 32 points) goes on without waiting for the block's slowest warp. In a tree
/// every task makes at most one task ready, so a round never holds more than the 32 it started
/// with. `lists`: 32 task slots per warp (the block's staging area). A warp looks at the stop flag
/// at each claim and every 64 rounds of a climb (a long chain's): a failed run's warps stop after
/// the sources they hold.
template <class Ops, int G>
__device__ __forceinline__ void run_tree_by_warps(const Ops& ops, const scheduler_ref& r, int worker, task_id* lists,
                                                  const lane_group<G>& g) {
  constexpr int per_warp = 32 / G;  // lane groups in a warp
  // Lane 0 keeps the warp's range in shared memory, not registers: held across the tasks, it
  // pushes the twig kernel past its register cap (CANOPY_KERNEL_MAX_REGISTERS), and the spill is a
  // stack frame on every task's path.
  __shared__ warp_sources warp_state[32];
  const int lane = static_cast<int>(threadIdx.x) & 31;
  warp_sources& ws = warp_state[threadIdx.x >> 5];
  task_id* list = lists + (threadIdx.x & ~31u);
  if (lane == 0) {
    // The block's static chunk (as its first fetch would take it), split evenly over its warps.
    const auto warps = static_cast<std::uint32_t>(blockDim.x >> 5);
    const auto chunk = static_cast<std::uint32_t>(r.source_chunk);
    const std::uint32_t slice = (chunk + warps - 1) / warps;
    const std::uint32_t block_end = min(static_cast<std::uint32_t>(worker + 1) * chunk, r.static_sources);
    const std::uint32_t first = static_cast<std::uint32_t>(worker) * chunk + (threadIdx.x >> 5) * slice;
    const std::uint32_t end = min(first + slice, block_end);
    ws.first = first < end ? first : end;
    ws.end = end;
    ws.claimed = false;
    ws.done = false;
  }
  for (;;) {
    // Lane 0 reads what it wrote and hands it to the warp (a shuffle, not a read of ws by every
    // lane: nothing would order that read before lane 0's next write).
    const int held = __shfl_sync(0xffffffffu, lane == 0 ? (ws.done ? -1 : static_cast<int>(ws.end - ws.first)) : 0, 0);
    if (held < 0) return;
    const std::uint32_t first = __shfl_sync(0xffffffffu, lane == 0 ? ws.first : 0u, 0);
    const int n = held < 32 ? held : 32;  // this pass's first round
    if (n > 0) {
      if (lane < n) {
        const task_id t = r.graph.sources[first + static_cast<std::uint32_t>(lane)];
        list[lane] = t;
        if constexpr (has_prefetch<Ops> && CANOPY_PREFETCH_AHEAD > 0) {
          ops.prefetch(t, prefetch_stage::structure);
          if (lane < per_warp) ops.prefetch(t, prefetch_stage::data);
        }
      }
      int k = n;
      for (unsigned rounds = 1;; ++rounds) {
        __syncwarp();
        for (int i = lane / G; i < k; i += per_warp) {
          if constexpr (has_prefetch<Ops> && CANOPY_PREFETCH_AHEAD > 0)
            if (g.rank == 0 && i + per_warp < k) ops.prefetch(list[i + per_warp], prefetch_stage::data);
          invoke_task(ops, list[i], g);
        }
        // Every lane's writes before the resolving lanes' releases (the tasks ran on lane groups,
        // resolve on single lanes); a lane that made a parent ready acquired its children's.
        __syncwarp();
        task_id ready = no_task;
        if (lane < k) {
          const task_id done = list[lane];
          if (resolve_parent<device_scope>(r.graph, r.graph.parent[done], [&](task_id s) { ready = s; }) == 0)
            sink_finished<device_scope>(r);
        }
        const unsigned made = __ballot_sync(0xffffffffu, ready != no_task);
        if (made == 0) break;
        // An octree climbs at most 22 rounds, a general tree (a chain) may climb for long: every 64
        // rounds the warp looks at the stop flag.
        if ((rounds & 63) == 0 && __shfl_sync(0xffffffffu, lane == 0 && should_stop<device_scope>(r) ? 1 : 0, 0) != 0)
          return;
        __syncwarp();  // every lane has read its slot of `list` before it is overwritten
        if (ready != no_task) list[__popc(made & ((1u << lane) - 1u))] = ready;
        k = __popc(made);
      }
    }
    if (lane == 0) {
      // Read again rather than kept: a register held across the rounds' tasks spills (the range is
      // unchanged since the top of this pass).
      const int range = static_cast<int>(ws.end - ws.first);
      if (range > 32) {
        ws.first += 32;
      } else {
        // As many sources a claim as the warp's share of a block's batch (at least 1, at most 32);
        // a claim that came back short means the cursor is past the last source.
        const int share = r.batch_max / (static_cast<int>(blockDim.x) / G) * per_warp;
        const int per_claim = share < 1 ? 1 : share > 32 ? 32 : share;
        // The stop flag is read relaxed, beside the claim (an acquire would wait for it first): a
        // stopped run's warps need not see it at once, and wait_for_stop acquires it. The relaxed
        // load beside the claim costs no round trip of its own.
        const bool stopping =
            cuda::atomic_ref<std::int32_t, device_scope>(r.counters->stop).load(cuda::std::memory_order_relaxed) != 0;
        std::uint32_t f = 0;
        const bool exhausted = ws.claimed && range < per_claim;
        const int got = exhausted ? 0 : claim_source_range<device_scope>(r, per_claim, true, &f);
        ws.done = got == 0 || stopping;
        ws.first = f;
        ws.end = f + static_cast<std::uint32_t>(got);
        ws.claimed = true;
      }
    }
  }
}

/// One poll of an idle block's thread 0, after it found nothing to do: every 16 polls the deadline
/// (a run whose last sink finished while it polled is complete, not late), every 256 the host's
/// abort request, every 8 a new sleep cap, then the sleep. True when it failed the run (the caller
/// stops polling). `start`: the block's start, `idle_start`: when it began polling (global timer).
__device__ __forceinline__ bool idle_poll(const scheduler_ref& r, unsigned polls, std::uint64_t start,
                                          std::uint64_t idle_start, backoff& idle) {
  if ((polls & 15) == 15 && global_timer_ns() > start + r.budget_ns) {
    if (!run_complete<device_scope>(r)) fail<device_scope>(r, status::timeout, no_task);
    return true;
  }
  if ((polls & 255) == 255 && abort_requested(r)) {
    fail<device_scope>(r, status::aborted, no_task);
    return true;
  }
  if ((polls & 7) == 7) idle.max_ns = idle_sleep_cap(r, start, global_timer_ns(), idle_start);
  idle.pause();
  return false;
}

/// A block with nothing more to run (warp_rounds) waits for the run to stop (the root finished, or
/// a failure), and fails it when the deadline passes or the host asks to abort, as an idle block
/// master does. `start`: the block's start (global timer).
__device__ inline void wait_for_stop(const scheduler_ref& r, std::uint64_t start) {
  const std::uint64_t idle_start = global_timer_ns();
  backoff idle{64, idle_sleep_cap(r, start, idle_start, idle_start)};
  for (unsigned polls = 0; !should_stop<device_scope>(r); ++polls)
    if (idle_poll(r, polls, start, idle_start, idle)) return;
}

/// Fills the slots of the k tickets from `ticket` of `ring` (reserve_push claimed them) with the
/// next k tasks of `ready` (bit j: the successor at dag.succ[first + j * stride]), clearing their
/// bits. Four slot reads are issued together: a lane may push 32 tasks, and one read after the
/// other would put as many L2 round trips before the continuation. The caller issued an acq_rel
/// fence after the arrivals that made them ready (fill_after_fence).
__device__ __forceinline__ void fill_ready_bits(const scheduler_ref& r, const ring_ref<device_scope>& ring, std::uint64_t ticket,
                                                int k, std::int32_t first, std::int32_t stride, unsigned& ready) {
  while (k > 0) {
    task_id s[4];
    std::uint64_t t[4];
    int n = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      s[j] = no_task;
      if (n < k && ready != 0) {
        s[j] = r.graph.succ[first + (__ffs(ready) - 1) * stride];
        t[j] = ticket + static_cast<std::uint64_t>(n++);
        ready &= ready - 1;
      }
    }
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (s[j] != no_task) ring.fill_after_fence(t[j], s[j]);
    ticket += static_cast<std::uint64_t>(n);
    k -= n;
  }
}

/// Pushes the ready tasks of one lane, a bit each in `ready` (bit k: the successor at
/// dag.succ[first + k * stride]), for run_dag_by_groups: at most `per_queue` a reservation (and a
/// publication) to the shared queue the push policy picks, a new pick after each (round_robin: the
/// next block's queue each time; locality the lane's own block's queue until it is full;
/// least_loaded the emptiest of its own and two sampled); what no shared queue takes in three picks goes to the
/// global queue; when that is full too the run fails with queue_overflow naming the first task
/// that found no room.
/// The caller issued an acq_rel fence after the arrivals that made them ready (fill_after_fence).
/// `tick`: the lane's own push counter.
__device__ __forceinline__ void push_ready_bits(const scheduler_ref& r, int worker, std::uint32_t& tick, std::int32_t first,
                                                std::int32_t stride, unsigned ready, int per_queue) {
  int left = __popc(ready);
  for (int attempt = 0; left > 0 && attempt < 3;) {
    const int q = pick_shared_queue(r.policy, worker, r.worker_count, tick, attempt,
                                    [&](int i) { return r.shared_ring<device_scope>(i); });
    const ring_ref<device_scope> ring = r.shared_ring<device_scope>(q);
    std::uint64_t ticket = 0;
    const int k = ring.reserve_push(per_queue < left ? per_queue : left, &ticket);
    if (k == 0) {
      ++attempt;  // full: the policy's next pick
      continue;
    }
    fill_ready_bits(r, ring, ticket, k, first, stride, ready);
    ring.publish(k);
    left -= k;
    ++tick;
    attempt = 0;
  }
  if (left == 0) return;
  ++tick;
  const ring_ref<device_scope> global = r.global_ring<device_scope>();
  std::uint64_t ticket = 0;
  const int k = global.reserve_push(left, &ticket);
  if (k > 0) {
    fill_ready_bits(r, global, ticket, k, first, stride, ready);
    global.publish(k);
  }
  if (k < left) fail<device_scope>(r, status::queue_overflow, r.graph.succ[first + (__ffs(ready) - 1) * stride]);
}

/// Pushes the urgent ready tasks of the group's lanes (Ops::urgent, ops_traits.cuh), a bit each in
/// `urgent` as in push_ready_bits, to the global queue, which run_dag_by_groups' groups look at
/// before their own block's queue: an urgent task starts when the first group anywhere looks for
/// work, not behind the tasks queued before it. One reservation for the whole group, its lanes'
/// tickets by a prefix sum: every lane of every group reserving on the one queue's counter (a
/// compare-and-swap loop) held the group, and the continuation with it, up to 378 us on the 64k
/// FMM (bench/RESULTS.md). What the global queue has no room for stays in `urgent` (the caller
/// pushes it with the others). Every lane calls it; the caller issued the fence, as for
/// push_ready_bits.
template <int G>
__device__ __forceinline__ void push_urgent_bits(const scheduler_ref& r, const lane_group<G>& g, std::int32_t first,
                                                 std::int32_t stride, unsigned& urgent) {
  const int mine = __popc(urgent);
  const int upto = group_inclusive_sum(g, mine);
  const int total = g.from_lane(upto, G - 1);
  const ring_ref<device_scope> global = r.global_ring<device_scope>();
  std::uint64_t ticket = 0;
  int k = 0;
  if (g.rank == 0) k = global.reserve_push(total, &ticket);
  k = g.from_first(k);
  ticket = g.from_first(ticket);
  const int before = upto - mine;
  const int take = k - before < mine ? k - before : mine;
  if (take > 0) fill_ready_bits(r, global, ticket + static_cast<std::uint64_t>(before), take, first, stride, urgent);
  g.sync();  // every fill before the publication (a consumer would otherwise wait at the slot)
  if (g.rank == 0 && k > 0) global.publish(k);
}

/// The arrivals of a task that lane group `g` ran at its successors dag.succ[b .. e), and the
/// pushes of those it made ready. Returns, in every lane, the continuation: the first successor (in
/// successor order) it made ready, which the group runs next with no queue round trip; the others
/// are pushed (push_ready_bits).
///
/// Lane k arrives at successors k, k + G, ... in windows of 32 a lane. In a window a lane issues
/// its relaxed fetch_subs four at a time after one release fence, then one acq_rel fence if any was
/// the last (it acquires what the other predecessors released, for the continuation and for the
/// tasks it pushes, and releases it to their consumers), then pushes all it made ready with a
/// reservation a queue. Ops that name urgent tasks (Ops::urgent, ops_traits.cuh): the group runs the
/// first urgent one it made ready next, if any, and pushes the other urgent ones to the global
/// queue with one reservation (push_urgent_bits). Why the burst: an FMM up task is the last source
/// of up to a thousand M2L tasks; each
/// pushed as it was made ready (a reservation, a ticket, the slot's check, a release store, a
/// publication) held the group, and with it the continuation (the parent's up task, the run's
/// critical path), 35 to 455 us a hop on the 64k FMM (bench/RESULTS.md). A task with at most G
/// successors makes one arrival a lane, arrive()'s acq_rel, and needs no fence unless it pushes.
template <class Ops, int G>
__device__ __forceinline__ task_id resolve_dag_successors(const Ops& ops, const scheduler_ref& r, int worker, std::uint32_t& tick,
                                                          const lane_group<G>& g, std::int32_t b, std::int32_t e,
                                                          int per_queue) {
  const task_graph_ref& dag = r.graph;
  constexpr int window = 32 * G;
  const bool one_each = e - b <= G;
  if (!one_each) cuda::atomic_thread_fence(cuda::std::memory_order_release, device_scope);
  task_id next = no_task;
  for (std::int32_t w = b; w < e; w += window) {
    const std::int32_t first = w + g.rank;  // this lane's successors: first + k * G, k < 32
    unsigned ready = 0, urgent = 0;  // urgent: the ready ones Ops::urgent names (a subset)
    if (one_each) {
      if (first < e && arrive<device_scope>(dag, dag.succ[first])) {
        ready = 1;
        if constexpr (has_urgent<Ops>) urgent = ops.urgent(dag.succ[first]) ? 1u : 0u;
      }
    } else {
      for (int k0 = 0; k0 < 32 && first + k0 * G < e; k0 += 4) {
        task_id s[4];
        std::int32_t reset[4], left[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const std::int32_t i = first + (k0 + j) * G;
          s[j] = i < e ? dag.succ[i] : no_task;
          reset[j] = s[j] != no_task ? dag.dependency_count[s[j]] : 0;
        }
#pragma unroll
        for (int j = 0; j < 4; ++j)
          left[j] = s[j] != no_task ? cuda::atomic_ref<std::int32_t, device_scope>(dag.pending[s[j]]).fetch_sub(1, cuda::std::memory_order_relaxed) : 0;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          if (left[j] != 1) continue;
          // The last arriver resets the counter for the next run (arrive() says why relaxed).
          cuda::atomic_ref<std::int32_t, device_scope>(dag.pending[s[j]]).store(reset[j], cuda::std::memory_order_relaxed);
          ready |= 1u << (k0 + j);
          if constexpr (has_urgent<Ops>)
            if (ops.urgent(s[j])) urgent |= 1u << (k0 + j);
        }
      }
      if (ready != 0) cuda::atomic_thread_fence(cuda::std::memory_order_acq_rel, device_scope);
    }
    if (next == no_task) {
      // The first made ready in successor order (the first urgent one, if any): the lowest lane's
      // lowest bit of the lowest k.
      bool of_urgent = false;
      if constexpr (has_urgent<Ops>) of_urgent = g.any(urgent != 0);
      const unsigned among = of_urgent ? urgent : ready;
      const int lowest = among != 0 ? (__ffs(among) - 1) * G + g.rank : window;
      const int pick = group_min(g, lowest);
      if (pick < window) {
        if (g.rank == pick % G) {
          const unsigned bit = 1u << (pick / G);
          ready &= ~bit;
          urgent &= ~bit;
        }
        next = dag.succ[w + pick];
      }
    }
    if (!g.any(ready != 0)) continue;
    // A lane that pushes after arrive()'s acq_rel still needs the release before its relaxed fills.
    if (one_each && ready != 0) cuda::atomic_thread_fence(cuda::std::memory_order_acq_rel, device_scope);
    if constexpr (has_urgent<Ops>) {
      if (g.any(urgent != 0)) {
        ready &= ~urgent;
        push_urgent_bits(r, g, first, G, urgent);
        ready |= urgent;  // what the global queue had no room for
      }
    }
    if (ready != 0) push_ready_bits(r, worker, tick, first, G, ready, per_queue);
  }
  return next;
}

/// warp_rounds on a DAG (Ops without tree_only, or a graph with successor lists): every lane group
/// is a worker of its own, and nothing waits at a block barrier. A group takes one task at a time:
/// its block's statically dealt sources (split over the block's groups), then its own block's
/// shared queue, the global queue, another block's shared queue (a steal), a source claimed from
/// the cursor (scheduler_options::dealt_sources). It runs the task, resolves the successors with
/// all its lanes (resolve_dag_successors: lane k arrives at successors k, k + G, ...), runs the first one made
/// ready next (continuation, no queue round trip) and pushes the others, at most a block's groups'
/// worth (`groups`) a reservation, so that under the default round_robin policy a wide fan-out
/// spreads over several blocks' queues. With Ops::urgent the global queue holds the urgent tasks
/// and is looked at first (ops_traits.cuh). The block loop makes every group of a
/// block wait for the longest task of the block's batch: with the FMM's tasks (from a few thousand
/// to a few hundred thousand cycles) its warps spent three quarters of the run there
/// (bench/RESULTS.md). Trees run here too when the Ops do not declare tree_only (a parent per task).
template <class Ops, int G>
__device__ void run_dag_by_groups(const Ops& ops, const scheduler_ref& r, int worker, const lane_group<G>& g) {
  const auto groups = static_cast<std::uint32_t>(blockDim.x) / G;
  const auto group = static_cast<std::uint32_t>(threadIdx.x) / G;
  const bool tree = tree_only_of<Ops> || r.graph.succ_offsets == nullptr;
  const std::uint64_t start = global_timer_ns();
  const auto total = static_cast<std::uint32_t>(r.graph.source_count);
  // The block's static chunk (fetch_batch's first fetch), task group, group + groups, ... of it.
  std::uint32_t static_next = 0, static_end = 0;
  if (r.static_sources > 0) {
    const auto chunk = static_cast<std::uint32_t>(r.source_chunk);
    const std::uint32_t first = static_cast<std::uint32_t>(worker) * chunk;
    static_end = min(min(first + chunk, static_cast<std::uint32_t>(r.static_sources)), total);
    static_next = first + group;
  }
  bool sources_done = false;
  std::uint32_t tick = threadIdx.x;  // spreads the first pushes of a block's lanes over the queues
  task_id t = no_task;
  for (unsigned hops = 0;; ++hops) {
    if (t == no_task) {
      int stop = 0;
      task_id got = no_task;
      if (g.rank == 0) {
        const std::uint64_t idle_start = global_timer_ns();
        backoff idle{64, idle_sleep_cap(r, start, idle_start, idle_start)};
        for (unsigned polls = 0;; ++polls) {
          if (static_next < static_end) {
            got = r.graph.sources[static_next];
            static_next += groups;
            break;
          }
          if (should_stop<device_scope>(r)) {
            stop = 1;
            break;
          }
          // Ops that name urgent tasks find them in the global queue (push_urgent_bits): look there
          // first. Otherwise it holds only what the shared queues had no room for.
          if (has_urgent<Ops> && r.global_ring<device_scope>().try_pop(got)) break;
          if (r.shared_ring<device_scope>(worker).try_pop(got)) break;
          if (!has_urgent<Ops> && r.global_ring<device_scope>().try_pop(got)) break;
          if (r.worker_count > 1) {
            const std::uint32_t seed = mix32(static_cast<std::uint32_t>(worker) * 0x9e3779b9U + polls * 0x85ebca6bU + group);
            const int victim = static_cast<int>((static_cast<std::uint32_t>(worker) + 1 + seed % static_cast<std::uint32_t>(r.worker_count - 1)) %
                                                static_cast<std::uint32_t>(r.worker_count));
            if (r.shared_ring<device_scope>(victim).try_pop(got)) break;
          }
          if (!sources_done) {
            // One source a claim: a group runs one task at a time, and a source it held would wait
            // behind the queues' tasks while an idle group could run it (sources listed longest
            // first, as the FMM's p2p tasks are, would lose that order).
            std::uint32_t f = 0;
            const int n = claim_source_range<device_scope>(r, 1, true, &f);
            if (n > 0) {
              got = r.graph.sources[f];
              break;
            }
            sources_done = true;
          }
          if (idle_poll(r, polls, start, idle_start, idle)) {
            stop = 1;
            break;
          }
        }
      }
      if (g.from_first(stop) != 0) return;
      t = g.from_first(got);
      // Orders the other lanes' reads of the task's inputs after lane 0's acquire (the pop's).
      g.sync();
    } else if ((hops & 63) == 0 && g.from_first(g.rank == 0 && should_stop<device_scope>(r) ? 1 : 0) != 0) {
      return;  // a long chain looks at the stop flag every 64 tasks
    }
    // The successors (or the parent) are loaded before the task runs, so that the loads overlap it.
    task_id parent = no_task;
    std::int32_t succ_begin = 0, succ_end = 0;
    if (tree) {
      if (g.rank == 0) parent = r.graph.parent[t];
    } else if constexpr (!tree_only_of<Ops>) {
      succ_begin = r.graph.succ_offsets[t];
      succ_end = r.graph.succ_offsets[t + 1];
    }
    invoke_task(ops, t, g);
    // Every lane's writes before the arriving lanes' releases.
    g.sync();
    if (tree) {
      task_id mine = no_task;
      if (g.rank == 0 && resolve_parent<device_scope>(r.graph, parent, [&](task_id s) { mine = s; }) == 0)
        sink_finished<device_scope>(r);
      t = g.from_first(mine);
    } else if constexpr (!tree_only_of<Ops>) {
      t = resolve_dag_successors(ops, r, worker, tick, g, succ_begin, succ_end, static_cast<int>(groups));
      if (succ_end == succ_begin && g.rank == 0) sink_finished<device_scope>(r);
    }
    // After the acquire of the lane that made `t` ready, the other lanes' reads of its inputs.
    g.sync();
  }
}

/// What the block master keeps between rounds (shared memory; thread 0 only).
struct master_state {
  local_ring priv;  // the block's private queue
  std::uint32_t tick;  // round-robin push policy
  bool first_fetch;
  bool sources_done;
  std::uint64_t start;  // the block's start (global timer): deadline and idle sleep cap
  std::uint64_t idle_start;  // when the master last began looking for work (idle sleep cap)
};

/// The block master fetches a batch for the whole block, every lane group runs its share of it (a
/// group is one thread unless Ops asks for more), and the master pushes what the block made ready.
template <class Ops, mode M>
__device__ void block_fetch_loop(const Ops& ops, const scheduler_ref& r) {
  constexpr mode_traits T = traits_of(M);
  static_assert(T.block_fetch && !T.linked_list_queue, "the block loop runs fixed-ring modes with block_fetch");
  constexpr int G = group_size_of<Ops>();
  const lane_group<G> g = lane_group<G>::here();
  extern __shared__ task_id shared_tasks[];
  task_id* batch = shared_tasks;
  task_id* staged = batch + blockDim.x;
  const int stage_capacity = static_cast<int>(blockDim.x);
  __shared__ batch_view s_batch;
  __shared__ int s_staged, s_left;
  const int tid = static_cast<int>(threadIdx.x);
  const int worker = static_cast<int>(blockIdx.x);
  const int groups = static_cast<int>(blockDim.x) / G;
  const int group = tid / G;
  const int batch_max = r.batch_max;  // run_batch_max, as the host computed it (and source_chunk from it)

  // The master's own state lives in shared memory, not registers: every thread would otherwise
  // keep it live across the task it runs, and the octree tasks' payloads need those registers
  // (at the 64-register cap the twig kernel spilled 168 bytes per thread).
  __shared__ master_state ms;
  if (tid == 0) {
    ms.priv = local_ring{staged + stage_capacity, r.private_capacity, 0, 0};
    ms.tick = 0;
    ms.first_fetch = true;
    ms.sources_done = false;
    ms.start = global_timer_ns();
    s_staged = 0;
  }

  if constexpr (T.warp_rounds && tree_only_of<Ops>) {
    // The warps run every task (nothing is queued), then the block waits for the run to stop. The
    // block loop below is not compiled in: a second inlined copy of the task beside the warps'
    // pushed the kernel past its register cap (332 bytes of spills a thread).
    run_tree_by_warps(ops, r, worker, staged, g);
    __syncthreads();
    if (tid == 0) wait_for_stop(r, ms.start);
  } else if constexpr (T.warp_rounds) {
    run_dag_by_groups(ops, r, worker, g);
  } else {
    for (;;) {
      if (tid == 0) {
        batch_view b{0, 0, 0};
        const bool first_fetch = ms.first_fetch;
        const std::uint64_t start = ms.start;
        // In shared memory, as the rest of the master's state: a register held across the loop
        // raises the kernel's count, for light Ops over a residency step (fewer blocks per SM).
        ms.idle_start = global_timer_ns();
        backoff idle{64, idle_sleep_cap(r, start, ms.idle_start, ms.idle_start)};
        for (unsigned polls = 0;; ++polls) {
          if (!(first_fetch && polls == 0) && should_stop<device_scope>(r)) { b.queued = -1; break; }
          b = fetch_batch<device_scope, M>(r, worker, &ms.priv, batch, batch_max, polls == 0 && first_fetch, ms.sources_done);
          if (b.size() > 0) break;
          if (idle_poll(r, polls, start, ms.idle_start, idle)) {
            b.queued = -1;
            break;
          }
        }
        s_batch = b;
        ms.first_fetch = false;
      }
      __syncthreads();
      if (s_batch.queued < 0) break;
      batch_view cur = s_batch;
      const int n = cur.size();
      // Continuation pays when the block has little else to do (the latency-bound top of a tree, small
      // trees): the group runs the parent at once, no queue round trip. With a full batch the block
      // is bandwidth-bound, and a group climbing alone would hold the whole block at the barrier
      // below while the others wait: then it stages like
      // `lockfree`, and whatever finds no room in the queues the block runs itself right away
      // (second pass, climbing), so continuation never needs queue space for a tree.
      bool climb = n < groups;
      for (int todo = n;;) {
        auto stage = [&](task_id s) {
          const int slot = cuda::atomic_ref<int, cuda::thread_scope_block>(s_staged).fetch_add(1, cuda::std::memory_order_relaxed);
          if (slot < stage_capacity) {
            staged[slot] = s;
          } else if (!(T.lockfree_global ? r.global_ring<device_scope>().try_push(s)
                                         : locked_push<device_scope>(r, &s, 1) == 1)) {
            // A DAG task made more tasks ready than the staging area holds: straight to global.
            fail<device_scope>(r, status::queue_overflow, s);
          }
        };
        if (!climb) prefetch_share(ops, r, cur, batch, todo, group, groups, g);
        if (!T.continuation || climb) {
          for (int i = group; i < todo; i += groups) {
            if (!climb) prefetch_next(ops, r, cur, batch, i, groups, todo, g);
            execute_chain<M>(ops, r, cur.at(r, batch, i), g, climb, stage);
          }
        } else {
          // Continuation with a full batch: the group runs its whole share of the batch first and
          // then resolves it, one task per lane, so that the arrivals (a load of the successor, then
          // a device-scope acq_rel atomic: two L2 round trips) overlap instead of stalling the group
          // after every task. The group barrier orders every lane's writes before the arriving
          // lane's release, as in execute_chain. The earlier modes keep resolving after each task: the
          // same change made lockfree-tree slower, for reasons not understood yet.
          for (int i = group; i < todo; i += groups) {
            prefetch_next(ops, r, cur, batch, i, groups, todo, g);
            invoke_task(ops, cur.at(r, batch, i), g);
          }
          g.sync();
          resolve_share<Ops>(r, cur, batch, todo, group, groups, g, stage);
        }
        __syncthreads();
        if (tid == 0) {
          int k = s_staged < stage_capacity ? s_staged : stage_capacity;
          int left = 0;
          if constexpr (!T.atomic_tree) {
            // all-threads: the master resolves the whole batch under one hold of the tree mutex.
            spin_mutex_ref<device_scope> m{&r.counters->tree_mutex};
            scoped_lock lock(m);
            for (int i = 0; i < todo; ++i) {
              const int succs = resolve_successors<device_scope>(r.graph, cur.at(r, batch, i), [&](task_id s) {
                if (k < stage_capacity) staged[k++] = s;
                else if (locked_push<device_scope>(r, &s, 1) != 1) fail<device_scope>(r, status::queue_overflow, s);
              });
              if (succs == 0) sink_finished<device_scope>(r);
            }
          }
          if (k > 0) {
            // A DAG's worker keeps about one batch in the queues only it pops (push_some says why).
            const int per_queue = !tree_only_of<Ops> && r.graph.succ_offsets != nullptr ? batch_max : 0;
            if (T.continuation && !climb) {
              // Every thread is past the barrier above, done with `batch`: the rest goes there.
              const int done = push_some<device_scope, M>(r, worker, &ms.priv, ms.tick, staged, k, per_queue);
              for (int i = done; i < k; ++i) batch[left++] = staged[i];
            } else {
              push_batch<device_scope, M>(r, worker, &ms.priv, ms.tick, staged, k, per_queue);
            }
          }
          s_staged = 0;
          s_left = left;  // not s_batch: thread 0 may be fetching into it before all have read this
        }
        __syncthreads();
        todo = s_left;
        if (todo == 0) break;
        cur = batch_view{todo, 0, 0};  // the leftovers, in `batch`
        climb = true;
      }
      // The next fetch overwrites `batch` only after every thread passed the barrier above.
    }
  }
}

}  // namespace canopy::detail
