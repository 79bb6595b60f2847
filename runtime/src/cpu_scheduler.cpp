#include "canopy/cpu_scheduler.hpp"

namespace canopy {

cpu_scheduler::cpu_scheduler(const task_graph& graph, const scheduler_options& options)
    : graph_(graph), options_(options) {
  if (options.blocks < 0) throw error(status::invalid_argument, "cpu backend: blocks must be >= 0");
  if (options.global_queue_capacity < 0 || options.shared_queue_capacity < 0 || options.private_queue_capacity < 0)
    throw error(status::invalid_argument, "cpu backend: queue capacities must be >= 0 (0 = default)");
  if (options.deadline.count() <= 0) throw error(status::invalid_argument, "cpu backend: deadline must be positive");
  workers_ = options.blocks > 0 ? options.blocks : std::max(1u, std::thread::hardware_concurrency());
  global_capacity_ = options.global_queue_capacity > 0 ? options.global_queue_capacity : std::max(1, graph.task_count());
  shared_capacity_ = options.shared_queue_capacity > 0 ? options.shared_queue_capacity : detail::default_shared_capacity;
  private_capacity_ = options.private_queue_capacity > 0 ? options.private_queue_capacity : detail::default_private_capacity;
  pending_ = graph.dependency_count();
  global_header_ = std::make_unique<ring_header>();
  global_slots_.assign(static_cast<std::size_t>(global_capacity_), 0);
  locked_slots_.assign(static_cast<std::size_t>(global_capacity_), no_task);
  shared_headers_.assign(static_cast<std::size_t>(workers_), ring_header::empty(shared_capacity_));
  shared_slots_.assign(static_cast<std::size_t>(workers_) * static_cast<std::size_t>(shared_capacity_), 0);
  counters_ = std::make_unique<detail::run_counters>();
  report_ = std::make_unique<detail::run_report>();
  reset_state();
}

void cpu_scheduler::reset_state() {
  detail::list_clear_host(*counters_);
  *global_header_ = ring_header::empty(global_capacity_);
  std::fill(global_slots_.begin(), global_slots_.end(), 0);
  std::fill(shared_headers_.begin(), shared_headers_.end(), ring_header::empty(shared_capacity_));
  std::fill(shared_slots_.begin(), shared_slots_.end(), 0);
  *counters_ = detail::run_counters::initial(graph_.sink_count(), workers_);
  // abort_requested is left alone: another thread may be setting it right now (request_abort is
  // meant to be called concurrently); finish() clears it atomically once a run has ended.
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
                               shared_capacity_,
                               workers_,
                               private_capacity_,
                               /*source_chunk*/ detail::cpu_batch_max,
                               options_.policy,
                               counters_.get(),
                               /*next_counters*/ nullptr,
                               report_.get(),
                               /*budget_ns*/ 0,
                               /*idle_sleep_max_ns*/ 0,
                               /*static_sources*/ 0,
                               /*batch_max*/ detail::cpu_batch_max};  // worker_loop uses the constant itself
}

run_result cpu_scheduler::finish(std::chrono::steady_clock::duration) {
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
    r.message = "deadline of " + std::to_string(options_.deadline.count()) + " ms passed; task " +
                std::to_string(r.task) + " never became ready";
  } else if (r.code == status::queue_overflow) {
    r.message = "global queue full (capacity " + std::to_string(global_capacity_) + ") while pushing task " +
                std::to_string(r.task);
  } else if (r.code == status::aborted && r.message.empty()) {
    r.message = "run aborted by the host";
  }
  if (!r.ok()) pending_ = graph_.dependency_count();  // a failed run leaves counters half-way
  cuda::atomic_ref<std::int32_t, cuda::thread_scope_system>(report_->abort_requested).store(0, cuda::std::memory_order_relaxed);
  return r;
}

}  // namespace canopy
