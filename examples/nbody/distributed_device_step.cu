// SPDX-License-Identifier: Apache-2.0
// The distributed step on the GPUs (distributed_device_step.hpp).
#include "distributed_device_step.hpp"

#if NBODY_HAVE_GPU && CANOPY_DISTRIBUTED_HAVE_NCCL

#include <cuda_runtime.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>

#include <cub/device/device_scan.cuh>

#include <canopy/cuda/device_buffer.hpp>
#include <canopy/cuda/error.hpp>
#include <canopy/distributed/branch_payload.hpp>
#include <canopy/distributed/device_distributed_octree.hpp>
#include <canopy/distributed/global_tree.hpp>
#include <canopy/distributed/nccl_exchange.hpp>
#include <canopy/passes/upward_runner.hpp>
#include <canopy/trees/octree.hpp>

#include "essential_tree.hpp"
#include "lap_clock.hpp"
#include "group_walk.cuh"
#include "integrate.cuh"

namespace nbody {

namespace {

namespace cd = canopy::distributed;
namespace ct = canopy::trees;
using clock_type = lap_clock;

std::string ms(double seconds) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f", 1e3 * seconds);
  return b;
}

unsigned grid_for(std::int64_t n) { return static_cast<unsigned>((n + body_block - 1) / body_block); }

template <class T>
void reserve(canopy::device_buffer<T>& b, std::size_t n) {
  if (b.size() < n) b = canopy::device_buffer<T>(std::max<std::size_t>(1, n + n / 4));
}

// Grows b to at least n elements keeping its first `keep` (the essential trees written so far).
template <class T>
void grow_keeping(canopy::device_buffer<T>& b, std::size_t n, std::size_t keep, cudaStream_t s) {
  if (b.size() >= n) return;
  canopy::device_buffer<T> bigger(std::max<std::size_t>(1, n + n / 2));
  if (keep != 0) CANOPY_CUDA_TRY(cudaMemcpyAsync(bigger.data(), b.data(), keep * sizeof(T), cudaMemcpyDeviceToDevice, s));
  CANOPY_CUDA_TRY(cudaStreamSynchronize(s));  // the old buffer's free must not race the copy
  b = std::move(bigger);
}

template <class T>
void upload(canopy::device_buffer<T>& b, const std::vector<T>& host, cudaStream_t s) {
  reserve(b, host.size());
  if (!host.empty())
    CANOPY_CUDA_TRY(cudaMemcpyAsync(b.data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice, s));
}

// A body's velocity (its fourth word unused) and id travel with it as 6 words of companions.
constexpr int companion_words = 6;

// What the receiver's domain is: its whole box, and the boxes of the largest top-tree cells it owns.
struct domain_view {
  box6 whole;
  const box6* boxes;
  std::int32_t count;
  float inv_theta;
  __device__ bool accepts(const ct::multipole<float>& m) const {
    if (accepted_by_box(m, inv_theta, whole)) return true;
    for (std::int32_t i = 0; i < count; ++i)
      if (!accepted_by_box(m, inv_theta, boxes[i])) return false;
    return true;
  }
};

// The records this rank may send: roots (its owned global leaves, k of them) first, then its local
// nodes. opened[j]: record j must be opened for the receiver.
struct sender_view {
  ct::octree_ref local;                    // this rank's local octree
  const ct::multipole<float>* payloads;    // its payloads
  const ct::multipole<float>* top_payload; // the top tree's, by top node
  const std::int32_t* owned_leaves;        // the top nodes of this rank's global leaves (k)
  const cd::branch_location* branches;     // where each lies in the local tree (k)
  std::int32_t k;
  __device__ const ct::multipole<float>& payload(std::int32_t j) const {
    return j < k ? top_payload[owned_leaves[j]] : payloads[j - k];
  }
};

__global__ void pack_companions(const float4* vel, const std::uint64_t* id, std::int32_t n, std::uint32_t* out) {
  const std::int32_t i = static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  const float4 v = vel[i];
  std::uint32_t* w = out + std::int64_t{i} * companion_words;
  w[0] = __float_as_uint(v.x);
  w[1] = __float_as_uint(v.y);
  w[2] = __float_as_uint(v.z);
  w[3] = __float_as_uint(v.w);
  w[4] = static_cast<std::uint32_t>(id[i]);
  w[5] = static_cast<std::uint32_t>(id[i] >> 32);
}

__global__ void unpack_companions(const std::uint32_t* in, std::int32_t n, float4* vel, std::uint64_t* id) {
  const std::int32_t i = static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  const std::uint32_t* w = in + std::int64_t{i} * companion_words;
  vel[i] = make_float4(__uint_as_float(w[0]), __uint_as_float(w[1]), __uint_as_float(w[2]), __uint_as_float(w[3]));
  id[i] = std::uint64_t{w[4]} | (std::uint64_t{w[5]} << 32);
}

// branch_of[node] = the branch whose global leaf is that local node, else -1 (set before: -1).
__global__ void mark_branches(const cd::branch_location* branches, std::int32_t k, std::int32_t* branch_of) {
  const std::int32_t i = static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < k && branches[i].node >= 0) branch_of[branches[i].node] = i;
}

// opened[j] for the k + L records.
__global__ void open_records(sender_view s, domain_view d, std::int32_t records, std::uint8_t* opened) {
  const std::int32_t j = static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (j < records) opened[j] = d.accepts(s.payload(j)) ? 0 : 1;
}

// flag[j] = 1 when record j goes to the receiver: a root always; a local node when every ancestor up
// to and including its global leaf is opened (a node above the global leaves never: the top tree
// holds it). flag[records] = 0, so that the exclusive scan's last entry is the count. bodies[j]: the
// bodies record j carries (an opened leaf, or an opened global leaf inside a bigger local leaf).
__global__ void select_records(sender_view s, const std::uint8_t* opened, const std::int32_t* branch_of,
                               std::int32_t records, std::int32_t* flag, std::int32_t* bodies) {
  const std::int32_t j = static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (j > records) return;
  if (j == records) {
    flag[j] = 0;
    bodies[j] = 0;
    return;
  }
  std::int32_t sent = 0, carried = 0;
  if (j < s.k) {
    sent = 1;
    const cd::branch_location at = s.branches[j];
    if (opened[j]) {
      if (at.node < 0) {
        carried = at.end - at.begin;
      } else if (s.local.child_count[at.node] == 0) {
        carried = s.local.point_count[at.node];
      }
    }
  } else {
    const std::int32_t a = j - s.k;
    if (branch_of[a] < 0) {  // a global leaf's node is its root record instead
      std::int32_t c = a;
      while (true) {
        const std::int32_t p = s.local.parent[c];
        if (p < 0) break;  // above the global leaves
        const std::int32_t b = branch_of[p];
        if (!opened[b >= 0 ? b : s.k + p]) break;
        if (b >= 0) {
          sent = 1;
          break;
        }
        c = p;
      }
    }
    if (sent && opened[j] && s.local.child_count[a] == 0) carried = s.local.point_count[a];
  }
  flag[j] = sent;
  bodies[j] = carried;
}

// The records and bodies for one receiver, at position[j] and body_at[j] of its block.
__global__ void write_records(sender_view s, const std::uint8_t* opened, const std::int32_t* flag,
                              const std::int32_t* position, const std::int32_t* body_at, std::int32_t records,
                              let_node* out, ct::point* out_bodies) {
  const std::int32_t j = static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (j >= records || !flag[j]) return;
  let_node r{s.payload(j), -1, 0, body_at[j], 0, -1};
  std::int32_t node = -1, first = 0, count = 0;  // the local node below, and the bodies carried
  if (j < s.k) {
    r.global_leaf = s.owned_leaves[j];
    const cd::branch_location at = s.branches[j];
    node = at.node;
    first = at.begin;
    count = at.end - at.begin;
  } else {
    node = j - s.k;
  }
  if (opened[j]) {
    if (node >= 0 && s.local.child_count[node] > 0) {
      r.first_child = position[s.k + s.local.first_child[node]];
      r.child_count = s.local.child_count[node];
    } else {
      if (node >= 0) {
        first = s.local.point_begin[node];
        count = s.local.point_count[node];
      }
      r.point_count = count;
      for (std::int32_t i = 0; i < count; ++i) out_bodies[body_at[j] + i] = s.local.points[first + i];
    }
  }
  out[position[j]] = r;
}

// The walk's tree (walk_tree): top nodes [0, T), local nodes [T, T + L), received ones after.
struct walk_arrays {
  std::int32_t* first_child;
  std::int32_t* child_count;
  std::int32_t* point_begin;
  std::int32_t* point_count;
  ct::multipole<float>* payload;
};

__global__ void link_top(walk_arrays w, const std::int32_t* first_child, const std::int32_t* child_count,
                         const ct::multipole<float>* payload, std::int32_t T) {
  const std::int32_t n = static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (n >= T) return;
  w.payload[n] = payload[n];
  w.first_child[n] = first_child[n];
  w.child_count[n] = child_count[n];
  w.point_begin[n] = 0;
  w.point_count[n] = 0;
}

__global__ void link_local(walk_arrays w, ct::octree_ref t, const ct::multipole<float>* payloads, std::int32_t T) {
  const std::int32_t n = static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (n >= t.node_count) return;
  const std::int32_t k = T + n;
  w.payload[k] = payloads[n];
  w.child_count[k] = t.child_count[n];
  w.first_child[k] = t.child_count[n] > 0 ? T + t.first_child[n] : -1;
  w.point_begin[k] = t.point_begin[n];
  w.point_count[k] = t.point_count[n];
}

// Below this rank's global leaves: its subtrees, or the cell's bodies inside a bigger local leaf.
__global__ void link_owned(walk_arrays w, const std::int32_t* owned_leaves, const cd::branch_location* branches,
                           std::int32_t k, std::int32_t T) {
  const std::int32_t i = static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= k) return;
  const std::int32_t g = owned_leaves[i];
  const cd::branch_location at = branches[i];
  if (at.node >= 0) {
    const std::int32_t n = T + at.node;
    w.first_child[g] = w.first_child[n];
    w.child_count[g] = w.child_count[n];
    w.point_begin[g] = w.point_begin[n];
    w.point_count[g] = w.point_count[n];
  } else {
    w.first_child[g] = -1;
    w.child_count[g] = 0;
    w.point_begin[g] = at.begin;
    w.point_count[g] = at.end - at.begin;
  }
}

// One sender's records at walk nodes [base, base + count), its bodies at walk points body_base on;
// a root is linked below its global leaf, which must be one of the sender's (else *bad = 1).
__global__ void link_received(walk_arrays w, const let_node* records, std::int32_t count, std::int32_t base,
                              std::int32_t body_base, const std::int32_t* top_child_count, const std::int32_t* leaf_owner,
                              std::int32_t T, std::int32_t sender, std::int32_t* bad) {
  const std::int32_t j = static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (j >= count) return;
  const let_node r = records[j];
  const std::int32_t k = base + j;
  const std::int32_t first = r.child_count > 0 ? base + r.first_child : -1;
  w.payload[k] = r.payload;
  w.child_count[k] = r.child_count;
  w.first_child[k] = first;
  w.point_begin[k] = body_base + r.point_begin;
  w.point_count[k] = r.point_count;
  if (r.global_leaf >= 0) {
    const std::int32_t g = r.global_leaf;
    if (g >= T || top_child_count[g] != 0 || leaf_owner[g] != sender) {
      atomicExch(bad, 1);
      return;
    }
    w.first_child[g] = first;
    w.child_count[g] = r.child_count;
    w.point_begin[g] = body_base + r.point_begin;
    w.point_count[g] = r.point_count;
  }
}

struct stream_owner {
  cudaStream_t s = nullptr;
  stream_owner() { CANOPY_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~stream_owner() {
    if (s != nullptr) cudaStreamDestroy(s);
  }
  stream_owner(const stream_owner&) = delete;
  stream_owner& operator=(const stream_owner&) = delete;
};

// The rank's device: its index among its host's ranks, modulo the devices it sees (one each where
// the launcher gives each rank its own GPU). run() has checked that no two ranks share one.
int select_device(int local_rank) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
    throw std::runtime_error("--backend gpu: no usable CUDA device on this rank");
  const int d = local_rank % devices;
  CANOPY_CUDA_TRY(cudaSetDevice(d));
  return d;
}

class nccl_device_step final : public device_step {
 public:
  nccl_device_step(const cd::mpi_context& ctx, int local_rank, int max_leaf, const canopy::scheduler_options& scheduler)
      : ctx_(ctx), device_(select_device(local_rank)), ex_(ctx, device_, stream_.s), max_leaf_(max_leaf),
        scheduler_(scheduler) {
    cudaDeviceProp prop{};
    CANOPY_CUDA_TRY(cudaGetDeviceProperties(&prop, device_));
    name_ = prop.name;
    walk_blocks_ = group_walk_blocks();
    counters_ = canopy::device_buffer<std::int32_t>(3);
    sums_ = canopy::device_buffer<double>(2);
  }

  std::string describe() const override { return "device " + std::to_string(device_) + " (" + name_ + ")"; }

  void start(const std::vector<dist_body>& bodies) override {
    n_ = static_cast<std::int32_t>(bodies.size());
    if (bodies.size() > 0x7fffffffu) throw std::length_error("more than 2^31 - 1 bodies on one rank");
    std::vector<ct::point> pos(bodies.size());
    std::vector<float4> vel(bodies.size());
    std::vector<std::uint64_t> id(bodies.size());
    for (std::size_t i = 0; i < bodies.size(); ++i) {
      pos[i] = bodies[i].p;
      vel[i] = make_float4(bodies[i].v.x, bodies[i].v.y, bodies[i].v.z, 0.0f);
      id[i] = bodies[i].id;
    }
    upload(pos_, pos, stream_.s);
    upload(vel_, vel, stream_.s);
    upload(id_, id, stream_.s);
    CANOPY_CUDA_TRY(cudaStreamSynchronize(stream_.s));
  }

  void rebuild_and_forces(const walk_params& params, dist_phase_times& times) override {
    auto clock = clock_type::now();
    const cudaStream_t s = stream_.s;
    MPI_Barrier(ctx_.comm());
    times.wait = lap_ms(clock);

    // 1-3. The velocities and ids go with their bodies as companions.
    const auto un = static_cast<std::size_t>(n_);
    reserve(companions_, un * companion_words);
    if (n_ > 0) {
      pack_companions<<<grid_for(n_), body_block, 0, s>>>(vel_.data(), id_.data(), n_, companions_.data());
      CANOPY_CUDA_TRY(cudaGetLastError());
    }
    cd::decomposition_options dopt;
    dopt.max_leaf = max_leaf_;
    dopt.max_depth = ct::max_octree_depth;
    cd::phase_times pt;
    tree_.build(ctx_, ex_, pos_.data(), un, dopt, &pt, cd::point_companions{companions_.data(), companion_words});
    n_ = static_cast<std::int32_t>(tree_.local_points());
    reserve(pos_, tree_.local_points());
    reserve(vel_, tree_.local_points());
    reserve(id_, tree_.local_points());
    const ct::octree_ref local = tree_.local_tree();
    if (n_ > 0) {
      CANOPY_CUDA_TRY(cudaMemcpyAsync(pos_.data(), local.points, static_cast<std::size_t>(n_) * sizeof(ct::point),
                                      cudaMemcpyDeviceToDevice, s));
      unpack_companions<<<grid_for(n_), body_block, 0, s>>>(tree_.companions(), n_, vel_.data(), id_.data());
      CANOPY_CUDA_TRY(cudaGetLastError());
    }
    times.decompose = 1e3 * (pt.extent + pt.sort + pt.global_tree);
    times.migrate = 1e3 * pt.migrate;
    times.build = 1e3 * pt.build;

    // 4. The upward pass.
    canopy::scheduler_options sopt = scheduler_;
    sopt.blocks = 0;  // as many as are co-resident
    top_payload_host_ = tree_.upward(ctx_, ex_, ct::upward_options{ct::pass_backend::gpu, ct::pass_tasks::node, sopt}, &pt);
    times.upward = 1e3 * (pt.pass_graph + pt.pass + pt.pass_wait + pt.branches);
    times.top = 1e3 * (pt.exchange + pt.top);
    clock = clock_type::now();
    upload_top();
    const double top_ms = lap_ms(clock);
    make_groups();
    CANOPY_CUDA_TRY(cudaStreamSynchronize(s));
    const double groups_ms = lap_ms(clock);
    times.build += top_ms + groups_ms;
    forces_only(params, times);
    parts_ = "extent " + ms(pt.extent) + ", sort " + ms(pt.sort) + ", global tree " + ms(pt.global_tree) + ", migrate " +
             ms(pt.migrate) + ", build " + ms(pt.build) + ", pass graph " + ms(pt.pass_graph) + ", pass " + ms(pt.pass) +
             " (device " + ms(pt.pass_device) + "), pass wait " + ms(pt.pass_wait) + ", branches " + ms(pt.branches) +
             ", exchange " + ms(pt.exchange) + ", top " + ms(pt.top) + ", top upload and boxes " + ms(1e-3 * top_ms) +
             ", groups " + ms(1e-3 * groups_ms) + ", essential " + ms(1e-3 * times.let) + ", walk " + ms(1e-3 * times.walk);
  }
  std::string last_parts() const override { return parts_; }

  void forces_only(const walk_params& params, dist_phase_times& times) override {
    auto clock = clock_type::now();
    essential_trees(params);
    times.let = lap_ms(clock);
    ctx_.phase("walk", [&] {
      if (fail_walk_) throw std::runtime_error("injected failure (--fail-rank)");
      walk(params);
    });
    times.walk = lap_ms(clock);
  }

  void kick_drift(float half_dt, float dt) override {
    if (n_ > 0) {
      kick_drift_kernel<<<grid_for(n_), body_block, 0, stream_.s>>>(pos_.data(), vel_.data(), forces_.data(), n_,
                                                                     half_dt, dt);
      CANOPY_CUDA_TRY(cudaGetLastError());
    }
    CANOPY_CUDA_TRY(cudaStreamSynchronize(stream_.s));  // so that `integrate` times it, not the next phase
  }

  void kick(float half_dt, double& kinetic, double& potential) override {
    const cudaStream_t s = stream_.s;
    CANOPY_CUDA_TRY(cudaMemsetAsync(sums_.data(), 0, 2 * sizeof(double), s));
    if (n_ > 0) {
      kick_energy_kernel<<<grid_for(n_), body_block, 0, s>>>(pos_.data(), vel_.data(), forces_.data(), n_, half_dt,
                                                              sums_.data());
      CANOPY_CUDA_TRY(cudaGetLastError());
    }
    double h[2] = {0, 0};
    CANOPY_CUDA_TRY(cudaMemcpyAsync(h, sums_.data(), sizeof(h), cudaMemcpyDeviceToHost, s));
    CANOPY_CUDA_TRY(cudaStreamSynchronize(s));
    kinetic = h[0];
    potential = h[1];
  }

  std::vector<dist_body> bodies() override {
    const auto n = static_cast<std::size_t>(n_);
    std::vector<ct::point> pos(n);
    std::vector<float4> vel(n);
    std::vector<std::uint64_t> id(n);
    if (n > 0) {
      CANOPY_CUDA_TRY(cudaMemcpyAsync(pos.data(), pos_.data(), n * sizeof(ct::point), cudaMemcpyDeviceToHost, stream_.s));
      CANOPY_CUDA_TRY(cudaMemcpyAsync(vel.data(), vel_.data(), n * sizeof(float4), cudaMemcpyDeviceToHost, stream_.s));
      CANOPY_CUDA_TRY(cudaMemcpyAsync(id.data(), id_.data(), n * sizeof(std::uint64_t), cudaMemcpyDeviceToHost, stream_.s));
    }
    CANOPY_CUDA_TRY(cudaStreamSynchronize(stream_.s));
    std::vector<dist_body> out(n);
    for (std::size_t i = 0; i < n; ++i) out[i] = dist_body{pos[i], vec3{vel[i].x, vel[i].y, vel[i].z}, 0.0f, id[i]};
    return out;
  }

  std::vector<body_force> forces() override {
    std::vector<body_force> f(static_cast<std::size_t>(n_));
    if (n_ > 0)
      CANOPY_CUDA_TRY(cudaMemcpyAsync(f.data(), forces_.data(), f.size() * sizeof(body_force), cudaMemcpyDeviceToHost,
                                      stream_.s));
    CANOPY_CUDA_TRY(cudaStreamSynchronize(stream_.s));
    return f;
  }

  std::size_t body_count() const override { return static_cast<std::size_t>(n_); }
  const let_stats& last_let() const override { return let_; }
  std::int32_t top_nodes() const override { return tree_.top().node_count(); }
  std::int32_t top_leaves() const override { return static_cast<std::int32_t>(tree_.top().leaves.size()); }
  void fail_walk(bool fail) override { fail_walk_ = fail; }
  std::size_t device_bytes() const override {
    std::size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) return 0;
    return total - free;
  }

 private:
  // The top tree's arrays and payloads, and this rank's owned leaves, on the device; every rank's
  // domain (its whole box of bodies, and the boxes of the largest top cells it owns whole).
  void upload_top() {
    const cudaStream_t s = stream_.s;
    const cd::global_tree& top = tree_.top();
    const auto T = static_cast<std::size_t>(top.node_count());
    const auto ranks = static_cast<std::size_t>(ctx_.size());
    const auto rank = static_cast<std::size_t>(ctx_.rank());
    upload(top_first_child_, top.first_child, s);
    upload(top_child_count_, top.child_count, s);
    upload(top_payload_, top_payload_host_, s);
    const std::vector<std::int32_t> owned(top.leaves.begin() + top.leaf_begin[rank], top.leaves.begin() + top.leaf_begin[rank + 1]);
    upload(owned_leaves_, owned, s);
    // The owner of each top node (-1 where mixed): for a received root's check, only the leaves'.
    const std::vector<int> owner = top_owners(top);
    leaf_owner_host_.assign(T, -1);
    for (std::size_t n = 0; n < T; ++n)
      if (top.child_count[n] == 0) leaf_owner_host_[n] = owner[n];
    upload(leaf_owner_, leaf_owner_host_, s);
    domain_ = rank_domains(top, owner, top_payload_host_, static_cast<int>(ranks));
    // Each rank's box of bodies: its local root's (the unit of its bodies' extent).
    box6 mine{{std::numeric_limits<float>::infinity(), std::numeric_limits<float>::infinity(),
               std::numeric_limits<float>::infinity()},
              {-std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
               -std::numeric_limits<float>::infinity()}};
    if (n_ > 0) {
      ct::multipole<float> root{};
      CANOPY_CUDA_TRY(cudaMemcpyAsync(&root, tree_.local_payloads(), sizeof(root), cudaMemcpyDeviceToHost, s));
      CANOPY_CUDA_TRY(cudaStreamSynchronize(s));
      for (int a = 0; a < 3; ++a) {
        mine.lo[a] = root.lo[a];
        mine.hi[a] = root.hi[a];
      }
    }
    boxes_.assign(ranks, box6{});
    MPI_Allgather(&mine, sizeof(box6), MPI_BYTE, boxes_.data(), sizeof(box6), MPI_BYTE, ctx_.comm());
  }

  void make_groups() {
    const ct::octree_ref t = tree_.local_tree();
    const auto capacity = static_cast<std::size_t>(max_walk_groups(t.leaf_count, t.point_total));
    reserve(groups_, capacity);
    CANOPY_CUDA_TRY(cudaMemsetAsync(counters_.data(), 0, sizeof(std::int32_t), stream_.s));
    if (t.node_count > 0) {
      make_walk_groups_kernel<<<grid_for(t.node_count), body_block, 0, stream_.s>>>(t, groups_.data(), counters_.data());
      CANOPY_CUDA_TRY(cudaGetLastError());
    }
  }

  // Step 5: for each other rank with bodies, the records it needs; then the exchange and the links.
  void essential_trees(const walk_params& params) {
    const cudaStream_t s = stream_.s;
    const cd::global_tree& top = tree_.top();
    const auto ranks = static_cast<std::size_t>(ctx_.size());
    const auto rank = static_cast<std::size_t>(ctx_.rank());
    const ct::octree_ref local = tree_.local_tree();
    const std::int32_t k = static_cast<std::int32_t>(tree_.branches().size());
    const std::int32_t L = local.node_count;
    const std::int32_t records = k + L;
    const auto ur = static_cast<std::size_t>(records);
    reserve(opened_, ur + 1);
    reserve(flag_, ur + 1);
    reserve(position_, ur + 1);
    reserve(carried_, ur + 1);
    reserve(body_at_, ur + 1);
    reserve(branch_of_, static_cast<std::size_t>(L) + 1);
    CANOPY_CUDA_TRY(cudaMemsetAsync(branch_of_.data(), 0xff, (static_cast<std::size_t>(L) + 1) * sizeof(std::int32_t), s));
    if (k > 0) {
      mark_branches<<<grid_for(k), body_block, 0, s>>>(tree_.device_branches(), k, branch_of_.data());
      CANOPY_CUDA_TRY(cudaGetLastError());
    }
    std::size_t scan_bytes = 0;
    CANOPY_CUDA_TRY(cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, flag_.data(), position_.data(), records + 1, s));
    reserve(scan_temp_, scan_bytes);
    const sender_view sv{local, tree_.local_payloads(), top_payload_.data(), owned_leaves_.data(), tree_.device_branches(), k};
    std::vector<std::size_t> node_send(ranks, 0), body_send(ranks, 0);
    std::size_t nodes_total = 0, bodies_total = 0;
    // No collective inside: agreed, so that a rank that fails here (its send buffers do not fit)
    // stops every rank with its message.
    ctx_.phase("essential tree", [&] {
      for (std::size_t r = 0; r < ranks; ++r) {
        const box6& b = boxes_[r];
        if (r == rank || b.empty() || records == 0) continue;
        upload(domain_boxes_, domain_[r], s);
        const domain_view dv{b, domain_boxes_.data(), static_cast<std::int32_t>(domain_[r].size()), 1.0f / params.theta};
        open_records<<<grid_for(records), body_block, 0, s>>>(sv, dv, records, opened_.data());
        select_records<<<grid_for(records + 1), body_block, 0, s>>>(sv, opened_.data(), branch_of_.data(), records, flag_.data(),
                                                                   carried_.data());
        CANOPY_CUDA_TRY(cudaGetLastError());
        CANOPY_CUDA_TRY(cub::DeviceScan::ExclusiveSum(scan_temp_.data(), scan_bytes, flag_.data(), position_.data(), records + 1, s));
        CANOPY_CUDA_TRY(cub::DeviceScan::ExclusiveSum(scan_temp_.data(), scan_bytes, carried_.data(), body_at_.data(), records + 1, s));
        std::int32_t counts[2] = {0, 0};
        CANOPY_CUDA_TRY(cudaMemcpyAsync(&counts[0], position_.data() + records, sizeof(std::int32_t), cudaMemcpyDeviceToHost, s));
        CANOPY_CUDA_TRY(cudaMemcpyAsync(&counts[1], body_at_.data() + records, sizeof(std::int32_t), cudaMemcpyDeviceToHost, s));
        CANOPY_CUDA_TRY(cudaStreamSynchronize(s));
        node_send[r] = static_cast<std::size_t>(counts[0]);
        body_send[r] = static_cast<std::size_t>(counts[1]);
        grow_keeping(send_records_, nodes_total + node_send[r], nodes_total, s);
        grow_keeping(send_bodies_, bodies_total + body_send[r], bodies_total, s);
        write_records<<<grid_for(records), body_block, 0, s>>>(sv, opened_.data(), flag_.data(), position_.data(), body_at_.data(),
                                                              records, send_records_.data() + nodes_total,
                                                              send_bodies_.data() + bodies_total);
        CANOPY_CUDA_TRY(cudaGetLastError());
        nodes_total += node_send[r];
        bodies_total += body_send[r];
      }
    });
    std::vector<std::uint64_t> c64(ranks);
    for (std::size_t r = 0; r < ranks; ++r) c64[r] = node_send[r];
    const std::vector<std::uint64_t> node_recv64 = ctx_.all_to_all(c64);
    for (std::size_t r = 0; r < ranks; ++r) c64[r] = body_send[r];
    const std::vector<std::uint64_t> body_recv64 = ctx_.all_to_all(c64);
    const std::vector<std::size_t> node_recv(node_recv64.begin(), node_recv64.end()),
        body_recv(body_recv64.begin(), body_recv64.end());
    const std::size_t nodes_in = std::accumulate(node_recv.begin(), node_recv.end(), std::size_t{0});
    const std::size_t bodies_in = std::accumulate(body_recv.begin(), body_recv.end(), std::size_t{0});
    const auto T = static_cast<std::size_t>(top.node_count());
    const std::size_t walk_nodes = T + static_cast<std::size_t>(L) + nodes_in;
    const std::size_t walk_points = static_cast<std::size_t>(n_) + bodies_in;
    ctx_.phase("essential tree", [&] {
      cd::check_exchange_counts(node_send, node_recv);
      cd::check_exchange_counts(body_send, body_recv);
      if (walk_points > 0x7fffffffu) throw std::length_error("more than 2^31 - 1 bodies in one rank's essential tree");
      if (static_cast<std::int64_t>(walk_nodes) >= group_walk_max_nodes)
        throw std::length_error("more nodes in one rank's essential tree than the walk packs (2^29)");
      reserve(recv_records_, nodes_in);
      reserve(walk_points_, walk_points);
      reserve(w_first_child_, walk_nodes);
      reserve(w_child_count_, walk_nodes);
      reserve(w_point_begin_, walk_nodes);
      reserve(w_point_count_, walk_nodes);
      reserve(w_payload_, walk_nodes);
    });
    // The exchange and the links in one phase: a rank whose collective or kernel fails (the others
    // then give up at the exchange's deadline, a peer_wait_error) is named by the agreement.
    ctx_.phase("essential tree exchange", [&] {
      if (n_ > 0)
        CANOPY_CUDA_TRY(cudaMemcpyAsync(walk_points_.data(), pos_.data(), static_cast<std::size_t>(n_) * sizeof(ct::point),
                                        cudaMemcpyDeviceToDevice, s));
      cd::all_to_all_v(ex_, send_records_.data(), node_send, recv_records_.data(), node_recv);
      cd::all_to_all_v(ex_, send_bodies_.data(), body_send, walk_points_.data() + n_, body_recv);
      ex_.synchronize();
      let_ = let_stats{nodes_total, bodies_total, nodes_in, bodies_in};

      // The links.
      walk_nodes_ = static_cast<std::int32_t>(walk_nodes);
      walk_point_count_ = static_cast<std::int32_t>(walk_points);
      const walk_arrays w{w_first_child_.data(), w_child_count_.data(), w_point_begin_.data(), w_point_count_.data(),
                          w_payload_.data()};
      const auto Ti = static_cast<std::int32_t>(T);
      if (T > 0) link_top<<<grid_for(Ti), body_block, 0, s>>>(w, top_first_child_.data(), top_child_count_.data(), top_payload_.data(), Ti);
      if (L > 0) link_local<<<grid_for(L), body_block, 0, s>>>(w, local, tree_.local_payloads(), Ti);
      if (k > 0) link_owned<<<grid_for(k), body_block, 0, s>>>(w, owned_leaves_.data(), tree_.device_branches(), k, Ti);
      CANOPY_CUDA_TRY(cudaGetLastError());
      CANOPY_CUDA_TRY(cudaMemsetAsync(counters_.data() + 2, 0, sizeof(std::int32_t), s));
      std::size_t node_at = 0, body_at = static_cast<std::size_t>(n_);
      for (std::size_t r = 0; r < ranks; ++r) {
        if (node_recv[r] > 0) {
          link_received<<<grid_for(static_cast<std::int64_t>(node_recv[r])), body_block, 0, s>>>(
              w, recv_records_.data() + node_at, static_cast<std::int32_t>(node_recv[r]),
              static_cast<std::int32_t>(T + static_cast<std::size_t>(L) + node_at), static_cast<std::int32_t>(body_at),
              top_child_count_.data(), leaf_owner_.data(), Ti, static_cast<std::int32_t>(r), counters_.data() + 2);
          CANOPY_CUDA_TRY(cudaGetLastError());
        }
        node_at += node_recv[r];
        body_at += body_recv[r];
      }
      std::int32_t bad = 0;
      CANOPY_CUDA_TRY(cudaMemcpyAsync(&bad, counters_.data() + 2, sizeof(bad), cudaMemcpyDeviceToHost, s));
      CANOPY_CUDA_TRY(cudaStreamSynchronize(s));
      if (bad != 0) throw std::logic_error("an essential tree's root is not a global leaf of its sender");
    });
  }

  // Step 6: the walk cells of the whole walk tree, then a warp per group of this rank's bodies.
  void walk(const walk_params& p) {
    const cudaStream_t s = stream_.s;
    reserve(cells_, static_cast<std::size_t>(walk_nodes_));
    reserve(forces_, static_cast<std::size_t>(std::max(n_, 1)));
    const walk_tree view{walk_points_.data(), w_first_child_.data(), w_child_count_.data(), w_point_begin_.data(),
                         w_point_count_.data(), w_payload_.data()};
    if (walk_nodes_ > 0) {
      make_walk_cells_kernel<<<grid_for(walk_nodes_), body_block, 0, s>>>(view, walk_nodes_, 1.0f / p.theta, cells_.data());
      CANOPY_CUDA_TRY(cudaGetLastError());
    }
    CANOPY_CUDA_TRY(cudaMemsetAsync(counters_.data() + 1, 0, sizeof(std::int32_t), s));
    if (n_ > 0) {
      group_walk_kernel<<<walk_blocks_, group_walk_warps * 32, 0, s>>>(
          cells_.data(), reinterpret_cast<const float4*>(walk_points_.data()), groups_.data(), counters_.data(),
          counters_.data() + 1, p, forces_.data());
      CANOPY_CUDA_TRY(cudaGetLastError());
    }
    CANOPY_CUDA_TRY(cudaStreamSynchronize(s));
  }

  const cd::mpi_context& ctx_;
  int device_;            // selected first: the stream and every buffer belong to it
  stream_owner stream_;
  std::string name_;
  cd::nccl_exchange ex_;
  int max_leaf_;
  canopy::scheduler_options scheduler_;
  unsigned walk_blocks_ = 1;
  bool fail_walk_ = false;
  cd::device_distributed_octree tree_;
  std::int32_t n_ = 0;
  canopy::device_buffer<ct::point> pos_{0};
  canopy::device_buffer<float4> vel_{0};
  canopy::device_buffer<std::uint64_t> id_{0};
  canopy::device_buffer<std::uint32_t> companions_{0};
  canopy::device_buffer<body_force> forces_{0};
  canopy::device_buffer<double> sums_{0};
  canopy::device_buffer<std::int32_t> counters_{0};  // groups, next group, a bad received root
  // The top tree.
  std::vector<ct::multipole<float>> top_payload_host_;
  std::vector<std::int32_t> leaf_owner_host_;
  canopy::device_buffer<std::int32_t> top_first_child_{0}, top_child_count_{0}, owned_leaves_{0}, leaf_owner_{0};
  canopy::device_buffer<ct::multipole<float>> top_payload_{0};
  std::vector<box6> boxes_;
  std::vector<std::vector<box6>> domain_;
  // The essential trees.
  canopy::device_buffer<box6> domain_boxes_{0};
  canopy::device_buffer<std::uint8_t> opened_{0}, scan_temp_{0};
  canopy::device_buffer<std::int32_t> flag_{0}, position_{0}, carried_{0}, body_at_{0}, branch_of_{0};
  canopy::device_buffer<let_node> send_records_{0}, recv_records_{0};
  canopy::device_buffer<ct::point> send_bodies_{0};
  let_stats let_;
  std::string parts_;
  // The walk.
  std::int32_t walk_nodes_ = 0, walk_point_count_ = 0;
  canopy::device_buffer<std::int32_t> w_first_child_{0}, w_child_count_{0}, w_point_begin_{0}, w_point_count_{0};
  canopy::device_buffer<ct::multipole<float>> w_payload_{0};
  canopy::device_buffer<ct::point> walk_points_{0};
  canopy::device_buffer<walk_group> groups_{0};
  canopy::device_buffer<walk_cell> cells_{0};
};

}  // namespace

std::unique_ptr<device_step> make_device_step(const canopy::distributed::mpi_context& ctx, int local_rank, int max_leaf,
                                              const canopy::scheduler_options& scheduler) {
  return std::make_unique<nccl_device_step>(ctx, local_rank, max_leaf, scheduler);
}

std::string device_step_gpu(int local_rank) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) return {};
  char id[32] = {};
  if (cudaDeviceGetPCIBusId(id, sizeof id, local_rank % devices) != cudaSuccess) return {};
  return id;
}

}  // namespace nbody

#else

#include <stdexcept>

namespace nbody {
std::unique_ptr<device_step> make_device_step(const canopy::distributed::mpi_context&, int, int,
                                              const canopy::scheduler_options&) {
  throw std::runtime_error("--gpu-step whole: this nbody was built without NCCL (use --gpu-step walk)");
}

std::string device_step_gpu(int) { return {}; }
}  // namespace nbody

#endif
