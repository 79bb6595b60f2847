// SPDX-License-Identifier: Apache-2.0
// The CPU path's FMM (--solver fmm --backend cpu): per step, the cells' geometry, the interaction
// lists and the task DAG of the new octree (canopy::fmm, host versions), then the whole evaluation
// as that DAG on canopy::cpu_scheduler: the same DAG and the same task bodies (task_ops.hpp) that
// the GPU runs, here serially per task on std::thread workers. Float expansions, as on the GPU.
#include <chrono>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <canopy/cpu_scheduler.hpp>
#include <canopy/fmm/interaction_lists.hpp>
#include <canopy/fmm/task_dag.hpp>
#include <canopy/fmm/task_ops.hpp>

#include "force_backend.hpp"
#include "simulation.hpp"

namespace nbody {

namespace {

namespace cf = canopy::fmm;

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

template <int P>
class cpu_fmm_backend final : public force_backend {
 public:
  cpu_fmm_backend(const canopy::scheduler_options& options, unsigned threads)
      : options_(options), threads_(threads == 0 ? std::max(1u, std::thread::hardware_concurrency()) : threads) {
    if (options_.blocks == 0) options_.blocks = static_cast<int>(threads_);
  }

  std::string describe() const override {
    return "cpu, FMM order " + std::to_string(P) + " (float expansions; its task DAG on " +
           std::to_string(options_.blocks) + " scheduler workers), mode " + std::string(canopy::to_string(options_.mode));
  }

  // params.theta is the FMM's opening parameter, params.eps2 its softening (near and far field).
  void compute(const canopy::trees::octree& tree, const walk_params& params, std::span<body_force> out,
               force_times& times) override {
    if (out.size() != tree.points.size()) throw std::invalid_argument("cpu fmm: output size differs from the body count");
    auto t0 = std::chrono::steady_clock::now();
    // The state and the scheduler refer to the previous tree's lists and DAG: dropped first.
    state_.reset();
    sched_.reset();
    geometry_ = cf::compute_cell_geometry(tree);
    lists_ = cf::build_interaction_lists(tree, geometry_, params.theta);
    dag_ = cf::build_task_dag(tree, lists_);
    sched_.emplace(dag_.graph, options_);
    state_.emplace(tree, geometry_, lists_, dag_, params.eps2);
    times.setup_ms = ms_since(t0);
    times.accumulate_ms = 0;  // P2M and M2M are tasks of the DAG

    t0 = std::chrono::steady_clock::now();
    const canopy::run_result r = sched_->run(state_->ops());
    if (!r.ok())
      throw std::runtime_error("cpu fmm: task DAG: " + std::string(canopy::to_string(r.code)) + ": " + r.message);
    const std::vector<cf::field<float>>& f = state_->fields;
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = body_force{f[i].ax, f[i].ay, f[i].az, f[i].phi};
    times.forces_ms = ms_since(t0);
  }

  std::vector<canopy::trees::multipole<float>> last_payloads() const override { return {}; }

 private:
  canopy::scheduler_options options_;
  unsigned threads_;
  std::vector<cf::cell_geometry> geometry_;
  cf::interaction_lists lists_;
  cf::task_dag dag_;
  std::optional<canopy::cpu_scheduler> sched_;
  std::optional<cf::host_task_state<float, P>> state_;  // refers to geometry_, lists_, dag_ and the tree
};

}  // namespace

std::unique_ptr<force_backend> make_cpu_fmm_backend(const canopy::scheduler_options& options, unsigned threads,
                                                    int order) {
  static_assert(min_fmm_order == cf::min_order && max_fmm_order == cf::max_order);
  switch (order) {
    case 2: return std::make_unique<cpu_fmm_backend<2>>(options, threads);
    case 3: return std::make_unique<cpu_fmm_backend<3>>(options, threads);
    case 4: return std::make_unique<cpu_fmm_backend<4>>(options, threads);
    case 5: return std::make_unique<cpu_fmm_backend<5>>(options, threads);
    case 6: return std::make_unique<cpu_fmm_backend<6>>(options, threads);
    case 7: return std::make_unique<cpu_fmm_backend<7>>(options, threads);
    case 8: return std::make_unique<cpu_fmm_backend<8>>(options, threads);
    default: break;
  }
  throw std::invalid_argument("--order must be in " + std::to_string(min_fmm_order) + ".." +
                              std::to_string(max_fmm_order) + ", not " + std::to_string(order));
}

}  // namespace nbody
