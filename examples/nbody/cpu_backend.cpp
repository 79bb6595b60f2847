// SPDX-License-Identifier: Apache-2.0
// The CPU backend: the upward pass on canopy::cpu_scheduler (std::thread workers running the same
// scheduler as the GPU kernel), the force walk on host threads.
#include <atomic>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <canopy/passes/upward_runner.hpp>

#include "force_backend.hpp"
#include "resident.hpp"

namespace nbody {

namespace {

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

class cpu_backend final : public force_backend {
 public:
  cpu_backend(const canopy::scheduler_options& options, unsigned threads)
      : options_(options), threads_(threads == 0 ? std::max(1u, std::thread::hardware_concurrency()) : threads) {
    if (options_.blocks == 0) options_.blocks = static_cast<int>(threads_);
  }

  std::string describe() const override {
    return "cpu, " + std::to_string(options_.blocks) + " scheduler workers, " + std::to_string(threads_) +
           " walk threads, mode " + std::string(canopy::to_string(options_.mode));
  }

  void compute(const canopy::trees::octree& tree, const walk_params& params, std::span<body_force> out,
               force_times& times) override {
    namespace ct = canopy::trees;
    if (out.size() != tree.points.size()) throw std::invalid_argument("cpu backend: output size differs from the body count");
    auto t0 = std::chrono::steady_clock::now();
    // The tree changes every step, so does its task graph: a new scheduler per step (what any
    // user of an adaptive tree pays; it is the "setup" column).
    pass_.reset();
    pass_.emplace(tree, ct::upward_options{ct::pass_backend::cpu, ct::pass_tasks::node, options_});
    times.setup_ms = ms_since(t0);

    const ct::timed_run r = pass_->run_timed();
    times.accumulate_ms = r.elapsed_us / 1e3;
    if (!r.result.ok())
      throw std::runtime_error("cpu backend: upward pass: " + std::string(canopy::to_string(r.result.code)) + ": " +
                               r.result.message);

    t0 = std::chrono::steady_clock::now();
    const ct::multipole<float>* payload = pass_->host_payloads().data();
    const walk_tree view{tree.points.data(),      tree.first_child.data(), tree.child_count.data(),
                         tree.point_begin.data(), tree.point_count.data(), payload};
    const ct::point* pts = tree.points.data();
    // Consecutive bodies are neighbours in Morton order, so a chunk walks nearly the same nodes.
    parallel_for(out.size(), threads_, 256, [&](std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e; ++i)
        out[i] = walk_one(view, static_cast<std::int32_t>(i), pts[i].x, pts[i].y, pts[i].z, params);
    });
    times.forces_ms = ms_since(t0);
  }

  std::vector<canopy::trees::multipole<float>> last_payloads() const override {
    return pass_ ? pass_->download() : std::vector<canopy::trees::multipole<float>>{};
  }

 private:
  canopy::scheduler_options options_;
  unsigned threads_;
  std::optional<canopy::trees::upward_runner> pass_;  // the last step's upward pass and payloads
};

}  // namespace

void parallel_for(std::size_t n, unsigned threads, std::size_t chunk,
                  const std::function<void(std::size_t, std::size_t)>& fn) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  if (chunk == 0) chunk = 1;
  const std::size_t chunks = (n + chunk - 1) / chunk;
  if (threads == 1 || chunks <= 1) {
    if (n > 0) fn(0, n);
    return;
  }
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (;;) {
      const std::size_t c = next.fetch_add(1, std::memory_order_relaxed);
      if (c >= chunks) return;
      fn(c * chunk, std::min(n, (c + 1) * chunk));
    }
  };
  const unsigned helpers = static_cast<unsigned>(std::min<std::size_t>(threads, chunks)) - 1;
  std::vector<std::thread> pool;
  pool.reserve(helpers);
  for (unsigned t = 0; t < helpers; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
}

std::unique_ptr<force_backend> make_cpu_backend(const canopy::scheduler_options& options, unsigned threads) {
  return std::make_unique<cpu_backend>(options, threads);
}

#if !NBODY_HAVE_GPU
bool gpu_backend_built() { return false; }
bool gpu_backend_usable() { return false; }
bool gpu_fmm_order_supported(int) { return false; }
std::string gpu_fmm_orders() { return {}; }
std::unique_ptr<resident_sim> make_resident_sim(const canopy::scheduler_options&, const walk_params&, int, int, bool) {
  throw std::runtime_error("gpu backend: this nbody was built without CUDA (CANOPY_GPU=OFF)");
}
#endif

}  // namespace nbody
