// SPDX-License-Identifier: Apache-2.0
// The GPU-resident simulation (resident.hpp): bodies, velocities and forces stay in device memory; every
// phase of a step is enqueued on one stream.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <cub/block/block_reduce.cuh>

#include <canopy/cuda/device.hpp>
#include <canopy/cuda/device_buffer.hpp>
#include <canopy/cuda/error.hpp>
#include <canopy/cuda/event.hpp>
#include <canopy/fmm/device_lists.hpp>
#include <canopy/fmm/gpu_evaluate.hpp>
#include <canopy/passes/device_octree.cuh>
#include <canopy/passes/device_octree_builder.cuh>
#include <canopy/passes/upward_runner.hpp>

#include "force_backend.hpp"
#include "group_walk.cuh"
#include "integrate.cuh"
#include "resident.hpp"

namespace nbody {

std::string gpu_fmm_orders();

namespace {

namespace ct = canopy::trees;

// The walk reads the tree's points as float4 (x, y, z, m).
static_assert(sizeof(ct::point) == sizeof(float4) && alignof(ct::point) == alignof(float4));

// Blocks of body_block threads for n items (bodies or nodes).
unsigned body_grid(std::int32_t n) { return static_cast<unsigned>((n + body_block - 1) / body_block); }

// The velocities follow their bodies into the new tree's order: out[i] = in[permutation[i]].
__global__ void gather_kernel(const float4* in, const std::int32_t* permutation, float4* out, std::int32_t n) {
  const std::int32_t i = static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = in[permutation[i]];
}

struct stream_owner {
  cudaStream_t s = nullptr;
  stream_owner() { CANOPY_CUDA_TRY(cudaStreamCreate(&s)); }
  ~stream_owner() {
    if (s != nullptr) cudaStreamDestroy(s);
  }
  stream_owner(const stream_owner&) = delete;
  stream_owner& operator=(const stream_owner&) = delete;
};

struct pinned_sums {
  double* h = nullptr;
  pinned_sums() { CANOPY_CUDA_TRY(cudaMallocHost(reinterpret_cast<void**>(&h), 2 * sizeof(double))); }
  ~pinned_sums() {
    if (h != nullptr) cudaFreeHost(h);
  }
  pinned_sums(const pinned_sums&) = delete;
  pinned_sums& operator=(const pinned_sums&) = delete;
};

namespace cf = canopy::fmm;

class gpu_resident final : public resident_sim {
 public:
  gpu_resident(const canopy::scheduler_options& options, const walk_params& params, int max_leaf, int fmm_order,
               bool fmm_level_graph)
      : params_(params),
        build_{max_leaf, ct::max_octree_depth},
        sched_options_(options),
        fmm_order_(fmm_order),
        fmm_level_graph_(fmm_level_graph) {
    if (fmm_order_ != 0 && !cf::gpu_order_supported(fmm_order_))
      throw std::invalid_argument("--order " + std::to_string(fmm_order_) + ": the GPU FMM is compiled for orders " +
                                  gpu_fmm_orders() + " (canopy::fmm::gpu_orders)");
    if (!canopy::gpu_available())
      throw std::runtime_error("gpu backend: no CUDA device is available (use --backend cpu)");
    device_name_ = canopy::gpu_name();
    if (fmm_order_ != 0) scratch_ = cf::make_kept_pool();
    // Node tasks, two lanes per node: as the example always ran the pass (upward_ops<float>).
    pass_options_ = ct::upward_options{ct::pass_backend::gpu, ct::pass_tasks::node, options};
    pass_options_.lanes = 2;
  }

  std::string describe() const override {
    if (fmm_order_ != 0) {
      const std::string fmm = "gpu (resident), " + device_name_ + "; octree built on the device; FMM order " +
                              std::to_string(fmm_order_) +
                              " (float expansions): geometry, interaction lists and task ";
      if (fmm_level_graph_)
        return fmm + "maps built on the device (no DAG edges), the evaluation level by level in a CUDA graph (P2P on a branch; "
                     "--fmm-schedule graph)";
      return fmm + "DAG built on the device, the evaluation as one task DAG in the persistent kernel" +
             (fmm_ ? ", " + std::to_string(fmm_->dag_blocks()) + " blocks" : std::string()) + ", mode " +
             std::string(canopy::to_string(sched_options_.mode)) + " (--fmm-schedule dag)";
    }
    return "gpu (resident), " + device_name_ + "; octree built on the device; upward pass " +
           (runner_ ? runner_->describe() : std::string("not run")) + "; walk: a warp per group of <= 32 bodies, " +
           std::to_string(walk_blocks_) + " blocks x " + std::to_string(group_walk_warps * 32) + " threads";
  }

  void start(const std::vector<ct::point>& pos, const std::vector<vec3>& vel) override {
    if (pos.size() != vel.size()) throw std::invalid_argument("resident: positions and velocities differ in count");
    if (pos.size() > static_cast<std::size_t>(INT32_MAX))
      throw std::invalid_argument("resident: more than 2^31 - 1 bodies");
    n_ = static_cast<std::int32_t>(pos.size());
    pos_ = canopy::device_buffer<ct::point>(pos);
    std::vector<float4> v4(vel.size());
    for (std::size_t i = 0; i < vel.size(); ++i) v4[i] = make_float4(vel[i].x, vel[i].y, vel[i].z, 0.f);
    vel_ = canopy::device_buffer<float4>(v4);
    spare_vel_ = canopy::device_buffer<float4>(vel.size());
    force_ = canopy::device_buffer<body_force>(pos.size());
    sums_ = canopy::device_buffer<double>(2);
    counters_ = canopy::device_buffer<std::int32_t>(2);
    events_[0].record(stream_.s);
    events_[1].record(stream_.s);  // no drift before the first forces
    build_and_walk(0.f, true);
    CANOPY_CUDA_TRY(cudaStreamSynchronize(stream_.s));
  }

  void step(float dt, bool energy) override {
    const float half_dt = 0.5f * dt;
    events_[0].record(stream_.s);
    // The previous step's forces: the FMM's fields live in its evaluator until this step's build.
    if (fmm_)
      kick_drift_kernel<<<body_grid(n_), body_block, 0, stream_.s>>>(pos_.data(), vel_.data(), fmm_->device_fields(), n_,
                                                                     half_dt, dt);
    else
      kick_drift_kernel<<<body_grid(n_), body_block, 0, stream_.s>>>(pos_.data(), vel_.data(), force_.data(), n_, half_dt,
                                                                     dt);
    CANOPY_CUDA_TRY(cudaGetLastError());
    events_[1].record(stream_.s);
    build_and_walk(half_dt, energy);
  }

  resident_times times() override {
    wait();
    auto ms = [&](int a) { return static_cast<double>(canopy::elapsed_ms(events_[a], events_[a + 1])); };
    return resident_times{ms(0), ms(1), ms(2), ms(3), ms(4), ms(5), ms(6)};
  }

  resident_energy energies() override {
    wait();
    return resident_energy{sums_host_.h[0], sums_host_.h[1]};
  }

  resident_tree_stats tree_stats() const override {
    return resident_tree_stats{built_.tree.depth(), built_.tree.node_count(), built_.tree.leaf_count()};
  }

  std::vector<ct::point> positions() override {
    wait();
    return pos_.download();
  }
  std::vector<vec3> velocities() override {
    wait();
    std::vector<float4> v4 = vel_.download();
    std::vector<vec3> v(v4.size());
    for (std::size_t i = 0; i < v4.size(); ++i) v[i] = vec3{v4[i].x, v4[i].y, v4[i].z};
    return v;
  }
  std::vector<body_force> forces() override {
    wait();
    if (fmm_) return to_forces(fmm_->fields());
    return force_.download();
  }
  std::vector<body_force> forces_at(float theta) override {
    wait();
    if (fmm_order_ != 0) {
      // Another evaluator over the same device tree (a diagnostic: it builds its own lists).
      cf::gpu_evaluator other(fmm_order_, built_, theta, params_.eps2, sched_options_, stream_.s, cf::dag_shape{}, schedules(),
                              scratch_.get());
      evaluate(other, stream_.s);
      CANOPY_CUDA_TRY(cudaStreamSynchronize(stream_.s));
      if (!fmm_level_graph_) require_ok(other.last_dag_result());
      return to_forces(other.fields());
    }
    canopy::device_buffer<body_force> f(static_cast<std::size_t>(n_));
    walk_params p = params_;
    p.theta = theta;
    walk(p, f.data());
    CANOPY_CUDA_TRY(cudaStreamSynchronize(stream_.s));
    return f.download();
  }

 private:
  static std::vector<body_force> to_forces(const std::vector<cf::field<float>>& f) {
    std::vector<body_force> out(f.size());
    for (std::size_t i = 0; i < f.size(); ++i) out[i] = body_force{f[i].ax, f[i].ay, f[i].az, f[i].phi};
    return out;
  }

  static void require_ok(const canopy::run_result& r) {
    if (!r.ok())
      throw std::runtime_error("gpu backend: fmm task DAG: " + std::string(canopy::to_string(r.code)) + ": " + r.message);
  }

  void wait() {
    CANOPY_CUDA_TRY(cudaStreamSynchronize(stream_.s));
    if (fmm_ && !fmm_level_graph_) require_ok(fmm_->last_dag_result());
    if (runner_) {
      const canopy::run_result r = runner_->last_result();
      if (!r.ok())
        throw std::runtime_error("gpu backend: upward pass: " + std::string(canopy::to_string(r.code)) + ": " +
                                 r.message);
    }
  }

  // The walk's groups of the current tree (forces_at reuses them), in the order the threads appended
  // them. Sorting them into Morton order (so that warps running at once walk nearby groups) was
  // measured: no faster (bench/RESULTS.md), so the threads' order is kept.
  void make_groups() {
    const ct::octree_ref t = built_.tree.ref();
    const auto capacity = static_cast<std::size_t>(max_walk_groups(t.leaf_count, t.point_total));
    if (groups_.size() < capacity) groups_ = canopy::device_buffer<walk_group>(capacity + capacity / 4);
    CANOPY_CUDA_TRY(cudaMemsetAsync(counters_.data(), 0, counters_.bytes(), stream_.s));
    make_walk_groups_kernel<<<body_grid(t.node_count), body_block, 0, stream_.s>>>(t, groups_.data(), counters_.data());
    CANOPY_CUDA_TRY(cudaGetLastError());
  }

  // The walk cells at p.theta from the payloads, then the walk.
  void walk(const walk_params& p, body_force* out) {
    const ct::octree_ref t = built_.tree.ref();
    const walk_tree view{t.points, t.first_child, t.child_count, t.point_begin, t.point_count, payloads_.data()};
    if (cells_.size() < static_cast<std::size_t>(t.node_count))
      cells_ = canopy::device_buffer<walk_cell>(static_cast<std::size_t>(t.node_count) + t.node_count / 4);
    make_walk_cells_kernel<<<body_grid(t.node_count), body_block, 0, stream_.s>>>(view, t.node_count, 1.0f / p.theta,
                                                                                 cells_.data());
    CANOPY_CUDA_TRY(cudaGetLastError());
    if (walk_blocks_ == 0) walk_blocks_ = group_walk_blocks();
    CANOPY_CUDA_TRY(cudaMemsetAsync(counters_.data() + 1, 0, sizeof(std::int32_t), stream_.s));  // next group
    group_walk_kernel<<<walk_blocks_, group_walk_warps * 32, 0, stream_.s>>>(
        cells_.data(), reinterpret_cast<const float4*>(t.points), groups_.data(), counters_.data(), counters_.data() + 1,
        p, out);
    CANOPY_CUDA_TRY(cudaGetLastError());
  }

  // build, reorder, graph, accumulate, forces, kick: events_[1] .. events_[7].
  void build_and_walk(float half_dt, bool energy) {
    cudaStream_t s = stream_.s;
    builder_.build_into(pos_.data(), static_cast<std::size_t>(n_), build_, built_, s);  // the step's one build wait
    events_[2].record(s);
    const std::int32_t nodes = built_.tree.node_count();
    if (nodes >= group_walk_max_nodes)
      throw std::runtime_error("gpu backend: more octree nodes than the walk packs (2^29)");
    // The bodies' state in the new order: positions from the tree, velocities gathered.
    gather_kernel<<<body_grid(n_), body_block, 0, s>>>(vel_.data(), built_.permutation.data(), spare_vel_.data(), n_);
    CANOPY_CUDA_TRY(cudaGetLastError());
    std::swap(vel_, spare_vel_);
    CANOPY_CUDA_TRY(cudaMemcpyAsync(pos_.data(), built_.tree.ref().points, pos_.bytes(), cudaMemcpyDeviceToDevice, s));
    events_[3].record(s);
    if (fmm_order_ != 0) {
      fmm_step(half_dt, energy);
      return;
    }
    if (payloads_.size() < nodes) {
      // Grow with slack (a tree grows a little from step to step); the runner is pointed at the new buffer
      // just below, before anything runs on it.
      CANOPY_CUDA_TRY(cudaStreamSynchronize(s));
      payloads_ = ct::device_payloads<float>(nodes + nodes / 4 + 64);
    }
    if (!runner_)
      runner_.emplace(built_.tree, payloads_, pass_options_, s);
    else
      runner_->set_tree(built_, payloads_, s);  // the builder's own tree: its graph with no host wait
    events_[4].record(s);
    runner_->run_async(s);
    events_[5].record(s);
    make_groups();
    walk(params_, force_.data());
    events_[6].record(s);
    if (energy) CANOPY_CUDA_TRY(cudaMemsetAsync(sums_.data(), 0, sums_.bytes(), s));
    kick_energy_kernel<<<body_grid(n_), body_block, 0, s>>>(pos_.data(), vel_.data(), force_.data(), n_, half_dt,
                                                            energy ? sums_.data() : nullptr);
    CANOPY_CUDA_TRY(cudaGetLastError());
    if (energy) CANOPY_CUDA_TRY(cudaMemcpyAsync(sums_host_.h, sums_.data(), sums_.bytes(), cudaMemcpyDeviceToHost, s));
    events_[7].record(s);
  }

  // What the evaluators are built for: the level graph needs no DAG edges and no scheduler.
  cf::schedules schedules() const { return fmm_level_graph_ ? cf::schedules::level_graph : cf::schedules::dag_and_level_graph; }

  // One FMM evaluation on stream s, by the schedule chosen (--fmm-schedule). The level graph is
  // captured on the evaluator's first use of it (a new evaluator each tree: a capture a step).
  void evaluate(cf::gpu_evaluator& fmm, cudaStream_t s) const {
    if (fmm_level_graph_) fmm.enqueue_level_graph(s, true);
    else fmm.enqueue_dag(s);
  }

  // The FMM's part of build_and_walk, after the reorder: events_[4] .. events_[7] (setup, an empty
  // accumulate, the evaluation, kick).
  void fmm_step(float half_dt, bool energy) {
    cudaStream_t s = stream_.s;
    // The previous tree's evaluator goes first (its memory; its fields were read by this step's
    // first kick, finished before the builder's wait). A new one per tree: the geometry, lists, DAG
    // and scheduler are the tree's; its buffers are not yet reused from step to step.
    fmm_.reset();
    const auto build = [&] {
      fmm_.emplace(fmm_order_, built_, static_cast<double>(params_.theta), static_cast<double>(params_.eps2), sched_options_,
                   s, cf::dag_shape{}, schedules(), scratch_.get());
    };
    try {
      build();
    } catch (const canopy::cuda_error& e) {
      // Short of memory the kept pool may hold: give it all back and build once more (a second
      // failure is reported as it is).
      if (!scratch_ || e.cuda_code() != cudaErrorMemoryAllocation) throw;
      (void)cudaGetLastError();
      CANOPY_CUDA_TRY(cudaStreamSynchronize(s));
      CANOPY_CUDA_TRY(cudaMemPoolTrimTo(scratch_.get(), 0));
      build();
    }
    events_[4].record(s);
    events_[5].record(s);  // P2M and M2M are the evaluation's: no separate accumulate
    evaluate(*fmm_, s);
    events_[6].record(s);
    if (energy) CANOPY_CUDA_TRY(cudaMemsetAsync(sums_.data(), 0, sums_.bytes(), s));
    kick_energy_kernel<<<body_grid(n_), body_block, 0, s>>>(pos_.data(), vel_.data(), fmm_->device_fields(), n_, half_dt,
                                                            energy ? sums_.data() : nullptr);
    CANOPY_CUDA_TRY(cudaGetLastError());
    if (energy) CANOPY_CUDA_TRY(cudaMemcpyAsync(sums_host_.h, sums_.data(), sums_.bytes(), cudaMemcpyDeviceToHost, s));
    events_[7].record(s);
  }

  walk_params params_;
  ct::build_options build_;
  canopy::scheduler_options sched_options_;
  int fmm_order_ = 0;  // 0: the Barnes-Hut walk
  bool fmm_level_graph_ = false;  // the FMM level by level in a CUDA graph, else as the task DAG
  ct::upward_options pass_options_;
  std::string device_name_;
  std::int32_t n_ = 0;
  stream_owner stream_;
  pinned_sums sums_host_;
  canopy::device_buffer<ct::point> pos_;
  canopy::device_buffer<float4> vel_, spare_vel_;
  canopy::device_buffer<body_force> force_;
  canopy::device_buffer<double> sums_;
  canopy::device_buffer<walk_group> groups_;  // the walk's groups
  canopy::device_buffer<std::int32_t> counters_;  // group count, next group to walk (start() makes them)
  canopy::device_buffer<walk_cell> cells_;  // per node, for the walk
  unsigned walk_blocks_ = 0;                      // persistent walk grid (0: not yet known)
  ct::device_octree_builder builder_;
  ct::built_device_octree built_;
  ct::device_payloads<float> payloads_;
  std::optional<ct::upward_runner> runner_;  // after built_ and payloads_: destroyed first
  // --solver fmm: the set-up's scratch (some 15 GB at 16M bodies), kept from step to step, so that
  // the next step's build reuses it with no driver call where cudaMalloc and cudaFree would map and
  // unmap it every step (canopy/fmm/device_lists.hpp); null without memory pools. What it keeps,
  // cudaMalloc cannot have: a build that runs out of memory gives it back and tries once more
  // (fmm_step).
  cf::memory_pool scratch_;
  std::optional<cf::gpu_evaluator> fmm_;      // --solver fmm: the current tree's evaluator and fields
  std::array<canopy::cuda_event, 8> events_;
};

}  // namespace

bool gpu_backend_built() { return true; }
bool gpu_backend_usable() { return canopy::gpu_available(); }
bool gpu_fmm_order_supported(int order) { return cf::gpu_order_supported(order); }
std::string gpu_fmm_orders() {
  std::string text;
  for (const int p : cf::gpu_orders) text += (text.empty() ? "" : ", ") + std::to_string(p);
  return text;
}

std::unique_ptr<resident_sim> make_resident_sim(const canopy::scheduler_options& options, const walk_params& params,
                                                int max_leaf, int fmm_order, bool fmm_level_graph) {
  return std::make_unique<gpu_resident>(options, params, max_leaf, fmm_order, fmm_level_graph);
}

}  // namespace nbody
