// SPDX-License-Identifier: Apache-2.0
// The CPU backend: the same scheduler on std::thread workers, one per "block". It runs every mode
// with the portable queues and counters the GPU kernel uses, so it is what the ThreadSanitizer
// suite exercises. A worker is a block of one thread: the block-level steps of the ladder
// (private queues, all-threads) become a worker-local ring.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "canopy/detail/backoff.hpp"
#include "canopy/detail/check_options.hpp"
#include "canopy/detail/dependency.hpp"
#include "canopy/detail/fetch_push.hpp"
#include "canopy/detail/locked_queues.hpp"
#include "canopy/detail/scheduler_state.hpp"
#include "canopy/scheduler_options.hpp"
#include "canopy/status.hpp"
#include "canopy/task_graph.hpp"

namespace canopy {

namespace detail {
/// What a CPU run keeps beyond the portable state: whether a run is in progress (one at a time per
/// scheduler), and the first exception a task threw (reported as status::task_error).
struct cpu_run_guard {
  std::atomic<bool> running{false};
  std::mutex mutex;
  std::exception_ptr thrown;  // the first exception a task threw in this run, and that task
  task_id thrower = no_task;
};

/// The CPU backend's worker threads, kept for the scheduler's life: started by its first run,
/// parked between runs (a short spin, then std::atomic::wait), woken by the next, so that a short
/// run does not pay for starting and joining threads before any work. The calling thread is
/// worker 0, so a scheduler of one worker starts no thread at all.
class cpu_worker_pool {
 public:
  using job = void (*)(void* context, int worker);
  /// Starts `threads` threads (workers 1..threads); throws std::system_error, with none left
  /// running, when the system refuses one.
  explicit cpu_worker_pool(int threads);
  cpu_worker_pool(const cpu_worker_pool&) = delete;
  cpu_worker_pool& operator=(const cpu_worker_pool&) = delete;
  ~cpu_worker_pool();
  /// Calls fn(context, w) for every worker w, 0 on the calling thread; returns when all returned.
  void run(job fn, void* context);

 private:
  void loop(int worker);
  void stop_all() noexcept;
  std::vector<std::thread> threads_;
  std::atomic<std::uint32_t> generation_{0};  // a new job (or stop) for the parked threads
  std::atomic<std::uint32_t> open_{0};        // the generation whose job threads may still join (0: none)
  std::atomic<int> inside_{0};                // pool threads that have entered a job
  std::atomic<bool> stop_{false};
  int spin_ = 0;      // pauses before parking (0 with more workers than hardware threads)
  job fn_ = nullptr;  // see cpu_scheduler.cpp: the job protocol
  void* context_ = nullptr;
};

/// now + d, saturated at the clock's end: milliseconds::max() ("no deadline") must not overflow.
inline std::chrono::steady_clock::time_point deadline_after(std::chrono::steady_clock::time_point now,
                                                            std::chrono::milliseconds d) {
  using clock = std::chrono::steady_clock;
  const auto room = std::chrono::duration_cast<std::chrono::milliseconds>(clock::time_point::max() - now);
  return d >= room ? clock::time_point::max() : now + std::chrono::duration_cast<clock::duration>(d);
}
}  // namespace detail

class cpu_scheduler {
 public:
  /// Copies what it needs from `graph`; throws canopy::error on bad options.
  cpu_scheduler(const task_graph& graph, const scheduler_options& options);
  cpu_scheduler(const cpu_scheduler&) = delete;
  cpu_scheduler& operator=(const cpu_scheduler&) = delete;
  cpu_scheduler(cpu_scheduler&&) = default;
  cpu_scheduler& operator=(cpu_scheduler&&) = default;

  /// Runs every task once, each after its dependencies, calling ops(task) on the worker threads.
  /// One run at a time: run() while another thread's run of this scheduler is in progress returns
  /// status::invalid_argument at once. An exception thrown by ops ends the run with
  /// status::task_error naming the task (the scheduler stays usable).
  template <class Ops>
  run_result run(const Ops& ops);

  int worker_count() const { return workers_; }
  const scheduler_options& options() const { return options_; }
  /// Asks a run in progress (on another thread) to stop with status::aborted. A request made while
  /// no run is in progress is dropped (run() clears the flag as it starts), as on the GPU.
  void request_abort() {
    cuda::atomic_ref<std::int32_t, cuda::thread_scope_system>(report_->abort_requested).store(1, cuda::std::memory_order_relaxed);
  }

 private:
  static constexpr cuda::thread_scope scope = cuda::thread_scope_device;  // host threads of one process

  void reset_state();                  // empty queues, initial counters (before every run)
  run_result finish();
  detail::scheduler_ref make_ref();

  template <mode M, class Ops>
  void worker_loop(const Ops& ops, int worker, std::chrono::steady_clock::time_point deadline);
  template <class Ops>
  void tree_rounds_loop(const Ops& ops, std::chrono::steady_clock::time_point deadline);  // warp_rounds on a tree
  void note_exception(task_id t) noexcept;  // the first exception of a run, kept for finish()
  template <mode M, class Ops>
  void run_mode(const Ops& ops);

  task_graph graph_;
  scheduler_options options_;
  int workers_ = 1;
  detail::queue_capacities capacity_;
  std::vector<std::int32_t> pending_;
  std::unique_ptr<detail::ring_header> global_header_;
  std::vector<std::uint64_t> global_slots_;
  std::vector<task_id> locked_slots_;
  std::vector<detail::ring_header> shared_headers_;
  std::vector<std::uint64_t> shared_slots_;
  std::unique_ptr<detail::run_counters> counters_;
  std::unique_ptr<detail::run_report> report_;
  std::unique_ptr<detail::cpu_run_guard> guard_ = std::make_unique<detail::cpu_run_guard>();
  std::unique_ptr<detail::cpu_worker_pool> pool_;  // started by the first run
};

// ---------------------------------------------------------------------------------------------

namespace detail {
/// The most tasks a CPU worker fetches at once, and the sources it claims per fetch.
inline constexpr int cpu_batch_max = 32;
/// A worker running a chain of tasks (continuation) looks at the clock and the abort flag every
/// this many tasks: a long chain must still time out.
inline constexpr int cpu_chain_check = 64;
}  // namespace detail

/// The GPU's warp rounds (mode_traits::warp_rounds) on a worker: it claims up to cpu_batch_max
/// sources, runs them, resolves them, and runs the parents they made ready as its next round, until
/// a round makes none ready; nothing is ever queued. Ops that declare tree_only only (the graph is
/// a tree: each task makes at most one ready, so a round never outgrows the one before).
template <class Ops>
void cpu_scheduler::tree_rounds_loop(const Ops& ops, std::chrono::steady_clock::time_point deadline) {
  const detail::scheduler_ref r = make_ref();
  task_id round[detail::cpu_batch_max];
  auto late = [&] { return std::chrono::steady_clock::now() > deadline && !detail::run_complete<scope>(r); };
  auto check = [&] {  // false when the run has stopped or this worker stopped it
    if (detail::should_stop<scope>(r)) return false;
    if (detail::abort_requested(r)) {
      detail::fail<scope>(r, status::aborted, no_task);
      return false;
    }
    if (late()) {
      detail::fail<scope>(r, status::timeout, no_task);
      return false;
    }
    return true;
  };
  for (bool sources = true; sources && check();) {
    std::uint32_t first = 0;
    int k = detail::claim_source_range<scope>(r, detail::cpu_batch_max, true, &first);
    sources = k > 0;
    for (int i = 0; i < k; ++i) round[i] = r.graph.sources[first + static_cast<std::uint32_t>(i)];
    for (int rounds = 1; k > 0; ++rounds) {
      for (int i = 0; i < k; ++i) {
        try {
          ops(round[i]);
        } catch (...) {
          note_exception(round[i]);
          detail::fail<scope>(r, status::task_error, round[i]);
          return;
        }
      }
      // The parents made ready overwrite the round's front: the i-th resolution writes at most
      // slot i, after it has read round[i].
      int made = 0;
      for (int i = 0; i < k; ++i)
        if (detail::resolve_parent<scope>(r.graph, r.graph.parent[round[i]], [&](task_id s) { round[made++] = s; }) == 0)
          detail::sink_finished<scope>(r);
      k = made;
      if (k > 0 && rounds % detail::cpu_chain_check == 0 && !check()) return;
    }
  }
  // Out of sources: wait for the others to finish the tree (or to fail), as an idle GPU block does.
  for (detail::backoff idle; check();) idle.pause();
}

template <mode M, class Ops>
void cpu_scheduler::worker_loop(const Ops& ops, int worker, std::chrono::steady_clock::time_point deadline) {
  constexpr mode_traits T = traits_of(M);
  if constexpr (T.warp_rounds && detail::tree_only_of<Ops>) {
    tree_rounds_loop(ops, deadline);
    return;
  }
  constexpr int batch_max = detail::cpu_batch_max;
  const detail::scheduler_ref r = make_ref();
  std::vector<task_id> private_slots(static_cast<std::size_t>(capacity_.priv));
  detail::local_ring priv{private_slots.data(), capacity_.priv, 0, 0};
  task_id batch[batch_max];
  bool sources_done = false;
  std::vector<task_id> staged;
  std::uint32_t tick = 0;

  if constexpr (T.linked_list_queue) {
    // The seed's first version starts from a queue holding every source.
    for (std::int32_t i = worker; i < r.graph.source_count; i += r.worker_count)
      if (!detail::list_push<scope>(r, r.graph.sources[i])) {
        detail::fail<scope>(r, status::queue_overflow, r.graph.sources[i]);
        break;
      }
  }
  // Past the deadline, a run that has already finished (its last sink done while this worker
  // looked) is complete, not late: the GPU kernel has the same guard.
  auto late = [&] { return std::chrono::steady_clock::now() > deadline && !detail::run_complete<scope>(r); };
  detail::backoff idle;
  while (!detail::should_stop<scope>(r)) {
    if (detail::abort_requested(r)) {
      detail::fail<scope>(r, status::aborted, no_task);
      break;
    }
    detail::batch_view b{0, 0, 0};
    if constexpr (T.linked_list_queue) b.queued = detail::list_pop<scope>(r, batch[0]) ? 1 : 0;
    else b = detail::fetch_batch<scope, M>(r, worker, &priv, batch, batch_max, false, sources_done);
    const int n = b.size();
    if (n == 0) {
      if (late()) {
        detail::fail<scope>(r, status::timeout, no_task);
        break;
      }
      idle.pause();
      continue;
    }
    staged.clear();
    for (int i = 0; i < n; ++i) {
      task_id t = b.at(r, batch, i);
      for (int hops = 1; t != no_task; ++hops) {
        try {
          ops(t);
        } catch (...) {
          note_exception(t);
          detail::fail<scope>(r, status::task_error, t);
          return;  // the run has failed; reset_state() rebuilds the queues before the next one
        }
        task_id next = no_task;
        auto on_ready = [&](task_id s) {
          if (T.continuation && next == no_task) next = s;
          else staged.push_back(s);
        };
        const int succs = T.atomic_tree ? detail::resolve_successors<scope>(r.graph, t, on_ready)
                                        : detail::resolve_locked<scope>(r, t, on_ready);
        if (succs == 0) detail::sink_finished<scope>(r);
        t = next;
        if (t != no_task && hops % detail::cpu_chain_check == 0) {
          if (late()) {
            detail::fail<scope>(r, status::timeout, no_task);
            return;
          }
          if (detail::abort_requested(r)) {
            detail::fail<scope>(r, status::aborted, no_task);
            return;
          }
        }
      }
    }
    if constexpr (T.linked_list_queue) {
      for (task_id s : staged)
        if (!detail::list_push<scope>(r, s)) {
          detail::fail<scope>(r, status::queue_overflow, s);
          break;
        }
    } else if (!staged.empty()) {
      detail::push_batch<scope, M>(r, worker, &priv, tick, staged.data(), static_cast<int>(staged.size()));
    }
    if (late()) {
      detail::fail<scope>(r, status::timeout, no_task);
      break;
    }
  }
  // A worker that stops with tasks in its private queue during a failed run simply drops them:
  // the run has already failed, and reset_state() rebuilds everything before the next run.
}

template <mode M, class Ops>
void cpu_scheduler::run_mode(const Ops& ops) {
  if (!pool_) {
    try {
      pool_ = std::make_unique<detail::cpu_worker_pool>(workers_ - 1);
    } catch (const std::system_error& e) {
      // The system refused a thread: the pool stopped the ones it had started (never a
      // std::terminate from a joinable thread's destructor), and the run says so.
      throw error(status::invalid_argument, "cpu backend: cannot start " + std::to_string(workers_) +
                                                " worker threads (" + e.what() + "); use fewer blocks");
    }
  }
  struct job {
    cpu_scheduler* self;
    const Ops* ops;
    std::chrono::steady_clock::time_point deadline;
  } j{this, &ops, detail::deadline_after(std::chrono::steady_clock::now(), options_.deadline)};
  pool_->run(
      [](void* context, int worker) {
        const job& j = *static_cast<const job*>(context);
        try {
          j.self->template worker_loop<M>(*j.ops, worker, j.deadline);
        } catch (...) {  // not the task's (worker_loop catches those): e.g. a worker's allocation
          j.self->note_exception(no_task);
          detail::fail<scope>(j.self->make_ref(), status::task_error, no_task);
        }
      },
      &j);
}

template <class Ops>
run_result cpu_scheduler::run(const Ops& ops) {
  if constexpr (detail::tree_only_of<Ops>)
    if (!graph_.is_tree())
      return run_result{status::invalid_argument, no_task, std::string("cpu backend: ") + detail::tree_only_on_a_dag};
  if (guard_->running.exchange(true, std::memory_order_acquire))
    return run_result{status::invalid_argument, no_task,
                      "cpu backend: run() while another run of this scheduler is in progress (one run at a time; "
                      "use a scheduler per thread)"};
  struct release {
    std::atomic<bool>& running;
    ~release() { running.store(false, std::memory_order_release); }
  } release_on_exit{guard_->running};
  reset_state();
  if (graph_.task_count() > 0) with_mode(options_.mode, [&](auto m) { run_mode<decltype(m)::value>(ops); });
  return finish();
}

}  // namespace canopy
