// The persistent kernel: one cooperative launch of co-resident blocks that loop until every sink
// has finished (or the run fails). One instantiation per (Ops, mode); the mode's traits select
// which steps of the seed's design are compiled in.
#pragma once

#include <cuda/atomic>

#include "canopy/detail/scheduler_state.hpp"
#include "canopy/lane_group.cuh"
#include "canopy/prefetch.cuh"

namespace canopy::detail {

inline constexpr cuda::thread_scope device_scope = cuda::thread_scope_device;

__device__ __forceinline__ std::uint64_t global_timer_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/// Dynamic shared memory of one block: the batch, the staging area for tasks made ready, and the
/// private queue.
__host__ __device__ constexpr std::size_t kernel_shared_bytes(int threads, int private_capacity) {
  return sizeof(task_id) * (2 * static_cast<std::size_t>(threads) + static_cast<std::size_t>(private_capacity));
}

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

/// A block's batch: `queued` tasks in the shared batch array, then `sources` consecutive entries of
/// graph.sources from `source_first`. Sources are handed over as a range so that the master does
/// not copy thousands of ids one by one while the block waits; each group reads its own.
struct block_batch {
  int queued;
  int sources;
  std::uint32_t source_first;
  __device__ int size() const { return queued + sources; }
  __device__ task_id at(const scheduler_ref& r, const task_id* batch, int i) const {
    return i < queued ? batch[i] : r.graph.sources[source_first + static_cast<std::uint32_t>(i - queued)];
  }
};

/// The master's fetch, in pop order: private, own shared, sources, global (the first fetch of a
/// run goes to the sources directly: every queue is still empty, and the block's first range of
/// sources is dealt statically, no atomic: one L2 round trip less, and no queue of blocks on the
/// cursor's line, before the first task).
///
/// `sources_done` is the block's own note that the sources are exhausted: the cursor only grows,
/// so once a claim comes back short no later claim can succeed, and the block stops reading the
/// cursor's line (every idle block of a full grid polling it slowed the blocks that work).
template <mode M>
__device__ block_batch fetch_block_batch(const scheduler_ref& r, int worker, local_ring* priv, task_id* out, int max,
                                         bool first, bool& sources_done) {
  constexpr mode_traits T = traits_of(M);
  block_batch b{0, 0, 0};
  if (!first) {
    if constexpr (T.private_queues) b.queued += priv->try_pop(out, max);
    if constexpr (T.shared_queues)
      if (b.queued < max) b.queued += r.shared_ring<device_scope>(worker).try_pop(out + b.queued, max - b.queued);
  }
  if (b.queued < max && !sources_done) {
    const int want = max - b.queued < r.source_chunk ? max - b.queued : r.source_chunk;
    if (first && r.static_sources > 0) {
      // The host made source_chunk <= max, so want == source_chunk here and the static ranges
      // tile [0, static_sources).
      b.source_first = static_cast<std::uint32_t>(worker) * static_cast<std::uint32_t>(r.source_chunk);
      b.sources = sources_from(r, b.source_first, want);
    } else {
      b.sources = claim_source_range<device_scope>(r, want, !first, &b.source_first);
    }
    sources_done = b.sources < want;
  }
  // A first fetch that got sources does not look at the global queue: it is (nearly) empty at the
  // start of a run, and the look is an L2 round trip before the block's first task.
  if (b.size() < max && !(first && b.size() > 0)) {
    const int room = max - b.size();
    if constexpr (T.lockfree_global) b.queued += r.global_ring<device_scope>().try_pop(out + b.queued, room);
    else b.queued += locked_pop<device_scope>(r, out + b.queued, room);
  }
  return b;
}

/// Ops that run each task on a lane group declare `group_size` (canopy/lane_group.cuh).
template <class Ops>
inline constexpr bool has_group_operator = requires { Ops::group_size; };

template <class Ops>
constexpr int group_size_of() {
  if constexpr (has_group_operator<Ops>) {
    constexpr int G = Ops::group_size;
    static_assert(G == 1 || G == 2 || G == 4 || G == 8 || G == 16 || G == 32,
                  "Ops::group_size must be 1, 2, 4, 8, 16 or 32");
    return G;
  } else {
    return 1;
  }
}

/// The most tasks a lane group runs one after the other in a batch: Ops::tasks_per_group if
/// declared (1 .. 32), else 4; at most G, so that a batch fits the blockDim.x entries of the batch
/// array. A run with few sources per block runs fewer (run_batch_max).
/// Bigger batches spread the master's fetch (L2 round trips while the block waits) over more work.
template <class Ops>
inline constexpr bool has_tasks_per_group = requires { Ops::tasks_per_group; };

template <class Ops, int G>
constexpr int tasks_per_group_of() {
  int t = 4;
  if constexpr (has_tasks_per_group<Ops>) {
    static_assert(Ops::tasks_per_group >= 1 && Ops::tasks_per_group <= 32, "Ops::tasks_per_group must be 1..32");
    t = Ops::tasks_per_group;
  }
  return t < G ? t : G;
}

/// The most tasks a block's master fetches at once in one run over `sources` sources on `grid`
/// blocks: groups x tasks per group, where a graph with few sources per block runs fewer tasks per
/// group (down to min(4, Ops's)), so that every block still gets about four batches of sources.
/// With fewer, a block that runs slower than others (four share an SM's bandwidth) cannot leave
/// its work to them, and the run waits for it: on an H100, 16 twigs per group made depth 7 (two
/// batches per block) 4-12% slower while depth 8 got 1.5% faster; sized this way, depth 7 went
/// from 321 to 292 us and depth 8 kept its 16 (bench/RESULTS.md).
template <class Ops>
CANOPY_HD constexpr int run_batch_max(int threads, std::int64_t sources, int grid) {
  constexpr int G = group_size_of<Ops>();
  constexpr int most = tasks_per_group_of<Ops, G>();
  constexpr int least = most < 4 ? most : 4;
  const std::int64_t groups = threads / G;
  const std::int64_t fits = sources / (static_cast<std::int64_t>(grid > 0 ? grid : 1) * groups * 4);
  const int per_group = fits >= most ? most : fits <= least ? least : static_cast<int>(fits);
  return static_cast<int>(groups) * per_group;
}

/// Ops may declare `__device__ void prefetch(task_id, canopy::prefetch_stage) const`
/// (canopy/prefetch.cuh).
template <class Ops>
inline constexpr bool has_prefetch = requires(const Ops& o, task_id t) { o.prefetch(t, prefetch_stage::data); };

/// How many tasks of its share ahead of the one it runs a group asks for the data of (0: no
/// prefetch at all). On an H100 at depth 8: 1 took the continuation twig pass from 1950-1990 to
/// 1856-1879 us; 2 made it 2150 us (the lines left L2 before their turn; bench/RESULTS.md).
/// It changes inline kernel templates: set it for the whole project, never per file.
#ifndef CANOPY_PREFETCH_AHEAD
#define CANOPY_PREFETCH_AHEAD 1
#endif

/// When a group starts its share of a full batch (tasks i, i + groups, ... of the batch), lane k
/// asks for the structure of the k-th of them, so that the share's first dependent loads overlap
/// once, and for the data of the first CANOPY_PREFETCH_AHEAD.
template <class Ops, int G>
__device__ __forceinline__ void prefetch_share(const Ops& ops, const scheduler_ref& r, const block_batch& cur,
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
__device__ __forceinline__ void prefetch_next(const Ops& ops, const scheduler_ref& r, const block_batch& cur,
                                              const task_id* batch, int i, int groups, int todo,
                                              const lane_group<G>& g) {
  if constexpr (has_prefetch<Ops> && CANOPY_PREFETCH_AHEAD > 0) {
    const int next = i + CANOPY_PREFETCH_AHEAD * groups;
    if (g.rank == 0 && next < todo) ops.prefetch(cur.at(r, batch, next), prefetch_stage::data);
  }
}

template <class Ops, int G>
__device__ __forceinline__ void invoke_task(const Ops& ops, task_id t, const lane_group<G>& g) {
  if constexpr (has_group_operator<Ops>) ops(t, g);
  else ops(t);
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
  const bool tree = r.graph.succ_offsets == nullptr;
  for (int hops = 1; t != no_task; ++hops) {
    // A tree task's parent is loaded before the task runs, so that its L2 round trip overlaps the
    // task instead of coming between the task and its arrival (a climbing chain waits for it on
    // every level).
    task_id parent = no_task;
    if constexpr (T.atomic_tree)
      if (g.rank == 0 && tree) parent = r.graph.parent[t];
    invoke_task(ops, t, g);
    if constexpr (!T.atomic_tree) return;
    // The barrier orders every lane's writes before lane 0's release in arrive(); after lane 0's
    // acquire the second barrier orders the other lanes' reads of the children after it.
    g.sync();
    task_id next = no_task;
    if (g.rank == 0) {
      auto on_ready = [&](task_id s) {
        if (T.continuation && climb && hops < max_chain && next == no_task) next = s;
        else stage(s);
      };
      const int succs = tree ? resolve_parent<device_scope>(r.graph, parent, on_ready)
                             : resolve_successors<device_scope>(r.graph, t, on_ready);
      if (succs == 0) sink_finished<device_scope>(r);
    }
    t = g.from_first(next);
    g.sync();
  }
}

/// The longest an idle block sleeps before it looks at the queues again: 1/64 of the time the run
/// has taken so far, at least 512 ns, at most r.idle_sleep_max_ns. A block asleep when the run
/// ends delays the end by up to twice its sleep (__nanosleep's range), so the cap must stay small
/// in short runs (a depth-5 tree takes ~30 us: a 2 us floor cost it 2 us on an H100); in long ones
/// the idle blocks' polling is what costs (see auto_idle_sleep_ns in gpu_scheduler.cuh), and the
/// end is a small fraction of the run (at most ~1/32 of it once the run has taken 32 us).
__device__ __forceinline__ unsigned idle_sleep_cap(const scheduler_ref& r, std::uint64_t start) {
  constexpr unsigned floor_ns = 512;
  const std::uint64_t cap = (global_timer_ns() - start) >> 6;
  return cap < floor_ns ? (r.idle_sleep_max_ns < floor_ns ? r.idle_sleep_max_ns : floor_ns)
                        : cap > r.idle_sleep_max_ns ? r.idle_sleep_max_ns : static_cast<unsigned>(cap);
}

/// What the block master keeps between rounds (shared memory; thread 0 only).
struct master_state {
  local_ring priv;  // the block's private queue
  std::uint32_t tick;  // round-robin push policy
  bool first_fetch;
  bool sources_done;
  std::uint64_t start;  // the block's start (global timer): deadline and idle sleep cap
};

/// Modes all-threads and later: the block master fetches a batch for the whole block, every lane
/// group runs its share of it (a group is one thread unless Ops asks for more), and the master
/// pushes what the block made ready.
template <class Ops, mode M>
__device__ void block_fetch_loop(const Ops& ops, const scheduler_ref& r) {
  constexpr mode_traits T = traits_of(M);
  constexpr int G = group_size_of<Ops>();
  const lane_group<G> g = lane_group<G>::here();
  extern __shared__ task_id shared_tasks[];
  task_id* batch = shared_tasks;
  task_id* staged = batch + blockDim.x;
  const int stage_capacity = static_cast<int>(blockDim.x);
  __shared__ block_batch s_batch;
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

  for (;;) {
    if (tid == 0) {
      block_batch b{0, 0, 0};
      const bool first_fetch = ms.first_fetch;
      const std::uint64_t start = ms.start;
      backoff idle{64, idle_sleep_cap(r, start)};
      for (unsigned polls = 0;; ++polls) {
        if (!(first_fetch && polls == 0) && should_stop<device_scope>(r)) { b.queued = -1; break; }
        b = fetch_block_batch<M>(r, worker, &ms.priv, batch, batch_max, polls == 0 && first_fetch, ms.sources_done);
        if (b.size() > 0) break;
        if ((polls & 15) == 15 && global_timer_ns() > start + r.budget_ns) {
          // A run whose last sink finished while this block was polling is complete, not late.
          if (!run_complete<device_scope>(r)) fail<device_scope>(r, status::timeout, no_task);
          b.queued = -1;
          break;
        }
        if ((polls & 255) == 255 && abort_requested(r)) { fail<device_scope>(r, status::aborted, no_task); b.queued = -1; break; }
        if ((polls & 7) == 7) idle.max_ns = idle_sleep_cap(r, start);
        idle.pause();
      }
      s_batch = b;
      ms.first_fetch = false;
    }
    __syncthreads();
    if (s_batch.queued < 0) break;
    block_batch cur = s_batch;
    const int n = cur.size();
    // Continuation pays when the block has little else to do (the latency-bound top of a tree, small
    // trees): the group runs the parent at once, no queue round trip. With a full batch the block
    // is bandwidth-bound, and a group climbing alone would hold the whole block at the barrier
    // below (on an H100 that made depth 8 1.4x slower than staging): then it stages like
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
        // lane's release, as in execute_chain. On an H100 this took the depth-8 twig pass from
        // 2350 to 2010 us; in lockfree-tree the same change made it slower (2360 -> 2525 us, not
        // understood yet), so the earlier modes keep resolving after each task.
        for (int i = group; i < todo; i += groups) {
          prefetch_next(ops, r, cur, batch, i, groups, todo, g);
          invoke_task(ops, cur.at(r, batch, i), g);
        }
        g.sync();
        for (int i = group + g.rank * groups; i < todo; i += groups * G) {
          const int succs = resolve_successors<device_scope>(r.graph, cur.at(r, batch, i), stage);
          if (succs == 0) sink_finished<device_scope>(r);
        }
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
          if (T.continuation && !climb) {
            // Every thread is past the barrier above, done with `batch`: the rest goes there.
            const int done = push_some<device_scope, M>(r, worker, &ms.priv, ms.tick, staged, k);
            for (int i = done; i < k; ++i) batch[left++] = staged[i];
          } else {
            push_batch<device_scope, M>(r, worker, &ms.priv, ms.tick, staged, k);
          }
        }
        s_staged = 0;
        s_left = left;  // not s_batch: thread 0 may be fetching into it before all have read this
      }
      __syncthreads();
      todo = s_left;
      if (todo == 0) break;
      cur = block_batch{todo, 0, 0};  // the leftovers, in `batch`
      climb = true;
    }
    // The next fetch overwrites `batch` only after every thread passed the barrier above.
  }
}

/// Modes mutex, fixed-queue and private-queues: only warp masters work, each on one task:
/// fetch, block sync, execute, block sync, push (the seed's first design).
template <class Ops, mode M>
__device__ void warp_master_loop(const Ops& ops, const scheduler_ref& r) {
  constexpr mode_traits T = traits_of(M);
  extern __shared__ task_id shared_tasks[];
  __shared__ int s_stop, s_private_mutex, s_private_head, s_private_count;
  const int tid = static_cast<int>(threadIdx.x);
  const bool master = (tid % 32) == 0;
  const std::uint64_t deadline = global_timer_ns() + r.budget_ns;
  spin_mutex_ref<cuda::thread_scope_block> private_mutex{&s_private_mutex};
  // The private queue lives in shared memory; warp masters share it under a block-scope mutex.
  auto with_private = [&](auto&& f) {
    scoped_lock lock(private_mutex);
    local_ring priv{shared_tasks, r.private_capacity, s_private_head, s_private_count};
    const int k = f(priv);
    s_private_head = priv.head;
    s_private_count = priv.count;
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

  // While the block is idle only warp 0's master polls, and the block sleeps between polls: on an
  // H100 thousands of warp masters polling the queue's line starved the one holding the mutex
  // for hundreds of milliseconds.
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

/// Registers per thread the kernel may use. The loop keeps queue state and an Ops payload (the
/// octree's is 17 words) live at once; uncapped, nvcc gave it 72-96 registers, i.e. two blocks of
/// 256 per SM. At 64 an H100 keeps twice the warps resident and the bandwidth-bound depth-8 pass
/// ran 1.5-2.6x faster (bench/RESULTS.md). Define CANOPY_KERNEL_MAX_REGISTERS to change it.
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
