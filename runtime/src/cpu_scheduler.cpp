// SPDX-License-Identifier: Apache-2.0
#include "canopy/cpu_scheduler.hpp"

#include "canopy/detail/check_options.hpp"

namespace canopy {

namespace detail {

namespace {
/// One spin of a worker waiting for work or for the others: a CPU pause, not a system call.
inline void spin_pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#else
  std::this_thread::yield();
#endif
}
/// Spins before parking: a run that follows the last within about this many pauses (tens of
/// microseconds) finds the workers awake; an idle scheduler's threads sleep. With more workers
/// than hardware threads nobody spins: a spinning thread would take the core of one that works.
constexpr int spins_before_parking = 1 << 11;
int spin_budget(std::size_t pool_threads) {
  const unsigned hw = std::thread::hardware_concurrency();
  return hw != 0 && pool_threads + 1 > hw ? 0 : spins_before_parking;
}
}  // namespace

cpu_worker_pool::cpu_worker_pool(int threads) {
  threads_.reserve(static_cast<std::size_t>(threads > 0 ? threads : 0));
  spin_ = spin_budget(static_cast<std::size_t>(threads > 0 ? threads : 0));
  try {
    for (int w = 1; w <= threads; ++w) threads_.emplace_back([this, w] { loop(w); });
  } catch (...) {
    stop_all();
    throw;
  }
}

cpu_worker_pool::~cpu_worker_pool() { stop_all(); }

void cpu_worker_pool::stop_all() noexcept {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

// The job protocol. A run publishes its job (fn_, context_), then generation_ = G and open_ = G,
// and wakes the threads. A thread that sees G enters (inside_ + 1) and runs the job only if open_
// is still G. When worker 0 (the caller) returns from the job the run has ended (every worker's
// loop returns once the run is complete or has failed), so the caller closes it (open_ = 0) and
// waits for the threads inside, not for those that have not woken yet: on a machine with more
// workers than cores a parked thread can take a scheduler tick to wake, and such a thread then
// finds the run closed and skips it. The caller's close and a thread's entry are sequentially
// consistent, so either the caller waits for the thread or the thread sees the run closed; fn_ is
// rewritten only by the next run, after every thread that could read it has left.
void cpu_worker_pool::loop(int worker) {
  std::uint32_t seen = 0;
  for (;;) {
    std::uint32_t g = generation_.load(std::memory_order_acquire);
    for (int spins = 0; g == seen && spins < spin_; ++spins) {
      spin_pause();
      g = generation_.load(std::memory_order_acquire);
    }
    while (g == seen) {
      generation_.wait(seen, std::memory_order_acquire);
      g = generation_.load(std::memory_order_acquire);
    }
    seen = g;
    if (stop_.load(std::memory_order_acquire)) return;
    inside_.fetch_add(1, std::memory_order_seq_cst);
    if (open_.load(std::memory_order_seq_cst) == g) fn_(context_, worker);
    if (inside_.fetch_sub(1, std::memory_order_seq_cst) == 1) inside_.notify_all();
  }
}

void cpu_worker_pool::run(job fn, void* context) {
  fn_ = fn;
  context_ = context;
  const std::uint32_t g = generation_.load(std::memory_order_relaxed) + 1;
  open_.store(g, std::memory_order_seq_cst);
  generation_.store(g, std::memory_order_release);  // publishes fn_ and context_
  generation_.notify_all();
  fn(context, 0);
  open_.store(0, std::memory_order_seq_cst);  // the run has ended: latecomers skip it
  int inside = inside_.load(std::memory_order_seq_cst);
  for (int spins = 0; inside != 0 && spins < spin_; ++spins) {
    spin_pause();
    inside = inside_.load(std::memory_order_seq_cst);
  }
  while (inside != 0) {
    inside_.wait(inside, std::memory_order_seq_cst);
    inside = inside_.load(std::memory_order_seq_cst);
  }
}

}  // namespace detail

void cpu_scheduler::note_exception(task_id t) noexcept {
  const std::lock_guard<std::mutex> lock(guard_->mutex);
  if (!guard_->thrown) {
    guard_->thrown = std::current_exception();
    guard_->thrower = t;
  }
}

cpu_scheduler::cpu_scheduler(const task_graph& graph, const scheduler_options& options)
    : graph_(graph), options_(options) {
  detail::check_options(options, "cpu backend", false);
  workers_ = options.blocks > 0 ? options.blocks : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  capacity_ = detail::resolve_capacities(options, graph.task_count());
  pending_ = graph.dependency_count();
  global_header_ = std::make_unique<detail::ring_header>();
  global_slots_.assign(static_cast<std::size_t>(capacity_.global), 0);
  locked_slots_.assign(static_cast<std::size_t>(capacity_.global), no_task);
  shared_headers_.assign(static_cast<std::size_t>(workers_), detail::ring_header::empty(capacity_.shared));
  shared_slots_.assign(static_cast<std::size_t>(workers_) * static_cast<std::size_t>(capacity_.shared), 0);
  counters_ = std::make_unique<detail::run_counters>();
  report_ = std::make_unique<detail::run_report>();
  reset_state();
}

void cpu_scheduler::reset_state() {
  detail::list_clear_host(*counters_);
  *global_header_ = detail::ring_header::empty(capacity_.global);
  std::fill(global_slots_.begin(), global_slots_.end(), 0);
  std::fill(shared_headers_.begin(), shared_headers_.end(), detail::ring_header::empty(capacity_.shared));
  std::fill(shared_slots_.begin(), shared_slots_.end(), 0);
  *counters_ = detail::run_counters::initial(graph_.sink_count());
  // An abort requested while no run was in progress is dropped, as on the GPU (request_abort):
  // only a request made during the run stops it. finish() clears the flag again once it has ended.
  cuda::atomic_ref<std::int32_t, cuda::thread_scope_system>(report_->abort_requested).store(0, cuda::std::memory_order_relaxed);
  report_->code = 0;
  report_->task = no_task;
}

detail::scheduler_ref cpu_scheduler::make_ref() {
  return detail::scheduler_ref{graph_.host_ref(pending_.data()),
                               global_header_.get(),
                               global_slots_.data(),
                               locked_slots_.data(),
                               shared_headers_.data(),
                               shared_slots_.data(),
                               capacity_.shared,
                               workers_,
                               capacity_.priv,
                               /*source_chunk*/ detail::cpu_batch_max,
                               options_.policy,
                               counters_.get(),
                               /*shared_queue_count*/ workers_,
                               report_.get(),
                               /*budget_ns*/ 0,
                               /*idle_sleep_max_ns*/ 0,
                               /*idle_sleep_long_ns*/ 0,
                               /*static_sources*/ 0,
                               /*batch_max*/ detail::cpu_batch_max};  // worker_loop uses the constant itself
}

run_result cpu_scheduler::finish() {
  run_result r;
  r.code = static_cast<status>(counters_->code);
  if (r.code == status::ok && counters_->sinks_left != 0) {
    // Workers only stop early through fail() or an abort; anything else is a scheduler bug.
    r.code = status::aborted;
    r.message = "run ended with " + std::to_string(counters_->sinks_left) + " sinks unfinished";
  }
  r.task = counters_->failed_task;
  if (r.code == status::timeout) {
    r.task = graph_.find_stuck_task(pending_);
    r.message = "deadline of " + std::to_string(options_.deadline.count()) + " ms passed; ";
    // A chain (every task one dependency) leaves no counter part-way: its next task was queued or
    // running, and the counters cannot tell which. Say so rather than name task -1.
    r.message += r.task != no_task ? "task " + std::to_string(r.task) + " never became ready"
                                   : "unfinished tasks remain, none waiting on a partly finished set of dependencies "
                                     "(the next was queued or running)";
  } else if (r.code == status::queue_overflow) {
    r.message = "global queue full (capacity " + std::to_string(capacity_.global) + ") while pushing task " +
                std::to_string(r.task);
  } else if (r.code == status::aborted && r.message.empty()) {
    r.message = "run aborted by the host";
  } else if (r.code == status::task_error) {
    std::string what = "an exception not derived from std::exception";
    try {
      if (guard_->thrown) std::rethrow_exception(guard_->thrown);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    if (guard_->thrown) r.task = guard_->thrower;  // two tasks may throw at once: report the one kept
    r.message = (r.task == no_task ? std::string("a worker") : "task " + std::to_string(r.task)) + " threw: " + what;
  }
  guard_->thrown = nullptr;
  guard_->thrower = no_task;
  if (!r.ok()) pending_ = graph_.dependency_count();  // a failed run leaves counters half-way
  // A failed mutex-mode run can leave nodes in its list; free them now (the workers have joined),
  // not at the next run's reset, which a scheduler destroyed after its last run never reaches.
  detail::list_clear_host(*counters_);
  cuda::atomic_ref<std::int32_t, cuda::thread_scope_system>(report_->abort_requested).store(0, cuda::std::memory_order_relaxed);
  return r;
}

}  // namespace canopy
