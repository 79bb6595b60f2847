// SPDX-License-Identifier: Apache-2.0
// The GPU path of the distributed octree (device_distributed_octree.hpp).
#include <canopy/cuda/device_buffer.hpp>
#include <canopy/cuda/error.hpp>
#include <canopy/cuda/event.hpp>
#include <canopy/distributed/branch_payload.hpp>
#include <canopy/distributed/device_distributed_octree.hpp>
#include <canopy/passes/device_octree.cuh>
#include <canopy/passes/device_octree_builder.cuh>
#include <canopy/trees/errors.hpp>
#include <canopy/trees/morton.hpp>
#include <canopy/trees/octree_steps.hpp>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <chrono>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>

namespace canopy::distributed {

using trees::morton_grid;
using trees::multipole;
using trees::point;
using trees::point_extent;

namespace {

constexpr int block_threads = 256;
unsigned blocks_for(std::size_t n) { return static_cast<unsigned>((n + block_threads - 1) / block_threads); }

struct extent_at {
  const point* p;
  CANOPY_HD point_extent operator()(std::int32_t i) const {
    const point q = p[i];
    return trees::extent_of(q.x, q.y, q.z, q.m, i);
  }
};
struct merge_op {
  CANOPY_HD point_extent operator()(const point_extent& a, const point_extent& b) const {
    return trees::merge_extents(a, b);
  }
};

__device__ std::int64_t lower_bound_of(const std::uint64_t* a, std::int64_t n, std::uint64_t key) {
  std::int64_t lo = 0, hi = n;
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (a[mid] < key) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

__global__ void compute_codes(const point* p, std::int32_t n, morton_grid g, std::uint64_t* codes, std::int32_t* index) {
  const std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i >= n) return;
  codes[i] = trees::morton_code(p[i], g);
  index[i] = static_cast<std::int32_t>(i);
}

// out[i] = in[index[i]], records of `words` 32-bit words (the companions).
__global__ void gather_words(const std::uint32_t* in, const std::int32_t* index, std::int64_t n, int words,
                             std::uint32_t* out) {
  const std::int64_t t = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (t >= n * words) return;
  const std::int64_t i = t / words, k = t % words;
  out[t] = in[std::int64_t{index[i]} * words + k];
}

__global__ void gather_points(const point* p, const std::int32_t* index, std::int32_t n, point* out) {
  const std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i < n) out[i] = p[index[i]];
}

// Positions of `keys` in the sorted codes.
__global__ void lower_bounds(const std::uint64_t* codes, std::int64_t n, const std::uint64_t* keys, std::int32_t k,
                             std::uint64_t* position) {
  const std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i < k) position[i] = static_cast<std::uint64_t>(lower_bound_of(codes, n, keys[i]));
}

// Thread (cell, octant): the octant's points, from 9 keys per cell.
__global__ void octant_counts(const std::uint64_t* codes, std::int64_t n, const std::uint64_t* bounds, std::int32_t cells,
                              std::uint64_t* counts) {
  const std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i >= std::int64_t{cells} * 8) return;
  const std::int64_t cell = i / 8, octant = i % 8;
  const std::int64_t b = lower_bound_of(codes, n, bounds[9 * cell + octant]);
  const std::int64_t e = lower_bound_of(codes, n, bounds[9 * cell + octant + 1]);
  counts[i] = static_cast<std::uint64_t>(e - b);
}

__global__ void locate(trees::octree_ref t, morton_grid g, const std::uint64_t* cells, std::int32_t k,
                       branch_location* out) {
  const std::int32_t i = static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < k) out[i] = locate_branch(t, g, static_cast<int>(cells[2 * i]), cells[2 * i + 1]);
}

__global__ void gather_branches(trees::octree_ref t, const multipole<float>* payloads, const branch_location* at,
                                std::int32_t k, multipole<float>* out) {
  const std::int32_t i = static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < k) out[i] = branch_payload(t, payloads, at[i]);
}

// At least n elements (contents not kept); a buffer that grows again gets an eighth more, so that
// a rank whose share changes a little each step reallocates rarely (cudaMalloc and cudaFree slow
// down several times with one process per GPU).
template <class T>
void ensure(device_buffer<T>& b, std::size_t n) {
  if (b.size() >= n) return;
  b = device_buffer<T>(b.empty() ? n : n + n / 8);
}

template <class T>
std::vector<T> download_n(const device_buffer<T>& b, std::size_t n, cudaStream_t stream) {
  std::vector<T> host(n);
  if (n != 0) {
    CANOPY_CUDA_TRY(cudaMemcpyAsync(host.data(), b.data(), n * sizeof(T), cudaMemcpyDeviceToHost, stream));
  }
  CANOPY_CUDA_TRY(cudaStreamSynchronize(stream));
  return host;
}

template <class T>
void upload_n(device_buffer<T>& b, const std::vector<T>& host, cudaStream_t stream) {
  ensure(b, host.size());
  if (!host.empty()) {
    CANOPY_CUDA_TRY(cudaMemcpyAsync(b.data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice, stream));
  }
  CANOPY_CUDA_TRY(cudaStreamSynchronize(stream));  // `host` may go away after the return
}

double lap(std::chrono::steady_clock::time_point& last) {
  const auto now = std::chrono::steady_clock::now();
  const double s = std::chrono::duration<double>(now - last).count();
  last = now;
  return s;
}

}  // namespace

struct device_distributed_octree::state {
  global_tree top;
  std::size_t held = 0;
  device_buffer<point_extent> extent;
  device_buffer<float> box6;
  device_buffer<std::uint64_t> codes[2];
  device_buffer<std::int32_t> index[2];
  device_buffer<std::uint8_t> cub_temp;
  device_buffer<point> sorted;
  device_buffer<point> mine;
  int words = 0;  // the companions' words per point
  device_buffer<std::uint32_t> companions_sorted, companions_mine, companions;
  device_buffer<std::uint64_t> keys, positions;
  trees::device_octree_builder builder;
  trees::built_device_octree built;
  std::vector<branch_location> branches;
  device_buffer<branch_location> device_branches;
  trees::device_payloads<float> payloads;
  device_buffer<multipole<float>> branch_payloads, leaf_payloads;
  const std::uint64_t* sorted_codes = nullptr;
  // Kept from step to step, as a simulation keeps it (after built and payloads: destroyed first);
  // made again only when the task kind changes.
  std::optional<trees::upward_runner> runner;
  trees::pass_tasks runner_tasks = trees::pass_tasks::node;
  // The pass's stream clock, made at the first pass (on the exchange's device).
  std::optional<canopy::cuda_event> pass_start, pass_stop;
};

device_distributed_octree::device_distributed_octree() : s_(std::make_unique<state>()) {}
device_distributed_octree::~device_distributed_octree() = default;
device_distributed_octree::device_distributed_octree(device_distributed_octree&&) noexcept = default;
device_distributed_octree& device_distributed_octree::operator=(device_distributed_octree&&) noexcept = default;

const global_tree& device_distributed_octree::top() const { return s_->top; }
const std::vector<branch_location>& device_distributed_octree::branches() const { return s_->branches; }
std::size_t device_distributed_octree::local_points() const { return s_->held; }
trees::octree_ref device_distributed_octree::local_tree() const { return s_->built.tree.ref(); }
const multipole<float>* device_distributed_octree::local_payloads() const { return s_->payloads.data(); }
const branch_location* device_distributed_octree::device_branches() const { return s_->device_branches.data(); }
std::uint32_t* device_distributed_octree::companions() const { return s_->words > 0 ? s_->companions.data() : nullptr; }
int device_distributed_octree::companion_words() const { return s_->words; }
trees::octree device_distributed_octree::download_local() const {
  CANOPY_CUDA_TRY(cudaDeviceSynchronize());  // the build ran on the exchange's (non-blocking) stream
  return s_->built.download(nullptr);
}
std::vector<multipole<float>> device_distributed_octree::download_local_payloads() const {
  CANOPY_CUDA_TRY(cudaDeviceSynchronize());
  std::vector<multipole<float>> p = s_->payloads.download();
  p.resize(static_cast<std::size_t>(s_->built.tree.node_count()));  // the buffer keeps slack
  return p;
}

void device_distributed_octree::build(const mpi_context& ctx, nccl_exchange& ex, const point* points, std::size_t count,
                                      const decomposition_options& options, phase_times* times,
                                      point_companions companions) {
  state& s = *s_;
  const cudaStream_t stream = ex.stream();
  phase_times ignored;
  phase_times& pt = times != nullptr ? *times : ignored;
  auto clock = std::chrono::steady_clock::now();

  // Every rank must carry the same companions: the migration's exchange of them is collective.
  const double words_min = ctx.min(companions.words), words_max = ctx.max(companions.words);
  ctx.phase("options", [&] {
    check_decomposition_options(options);
    if (words_min != words_max)
      throw std::invalid_argument("point companions: every rank must give the same words per point (" +
                                  std::to_string(static_cast<int>(words_min)) + " to " + std::to_string(static_cast<int>(words_max)) +
                                  ")");
    if (count > 0x7fffffffu) throw std::length_error("more than 2^31 - 1 points on one rank");
    if (companions.words < 0 || companions.words > 64 || (companions.words > 0 && companions.data == nullptr && count > 0))
      throw std::invalid_argument("point companions: 0 to 64 words per point, and an array when there are any");
  });
  s.words = companions.words;
  const auto n = static_cast<std::int32_t>(count);

  // Global cube: the extent on the device, checked on the host, reduced by NCCL.
  point_extent local = trees::empty_extent();
  ctx.phase("extent", [&] {
    if (n == 0) return;
    ensure(s.extent, 1);
    const thrust::transform_iterator<extent_at, thrust::counting_iterator<std::int32_t>> extents(
        thrust::counting_iterator<std::int32_t>(0), extent_at{points});
    std::size_t temp = 0;
    CANOPY_CUDA_TRY(cub::DeviceReduce::Reduce(nullptr, temp, extents, s.extent.data(), n, merge_op{},
                                              trees::empty_extent(), stream));
    ensure(s.cub_temp, temp);
    CANOPY_CUDA_TRY(cub::DeviceReduce::Reduce(s.cub_temp.data(), temp, extents, s.extent.data(), n, merge_op{},
                                              trees::empty_extent(), stream));
    local = download_n(s.extent, 1, stream)[0];
    if (local.first_rejected != trees::no_rejected_point) {
      point p{};
      CANOPY_CUDA_TRY(cudaMemcpy(&p, points + local.first_rejected, sizeof(point), cudaMemcpyDeviceToHost));
      throw trees::rejected_point_error("canopy::distributed", static_cast<std::size_t>(local.first_rejected), p);
    }
  });
  std::vector<float> v(6);
  for (int a = 0; a < 3; ++a) {
    v[static_cast<std::size_t>(a)] = local.lo[a];
    v[static_cast<std::size_t>(3 + a)] = -local.hi[a];
  }
  // Each exchange below runs inside a phase: a rank whose collective fails (an NCCL or CUDA
  // error; the others then give up at the exchange's deadline with a peer_wait_error) reaches the
  // same agreement as the others, which names it, instead of leaving them in the next collective.
  ctx.phase("extent exchange", [&] {
    upload_n(s.box6, v, stream);
    ex.all_reduce(s.box6.data(), 6, element_type::f32, reduce_op::min);
    ex.synchronize();
    v = download_n(s.box6, 6, stream);
  });
  trees::box cube{{0.0, 0.0, 0.0}, {1.0, 1.0, 1.0}};
  if (v[0] <= -v[3]) {
    const double lo[3] = {v[0], v[1], v[2]};
    const double hi[3] = {-v[3], -v[4], -v[5]};
    cube = trees::bounding_cube(lo, hi);
  }
  pt.extent = lap(clock);

  // Codes over the global cube, sorted with their indices; the points gathered in that order.
  const morton_grid grid = trees::make_morton_grid(cube);
  ctx.phase("sort", [&] {
    const auto un = static_cast<std::size_t>(n);
    for (int k = 0; k < 2; ++k) {
      ensure(s.codes[k], un);
      ensure(s.index[k], un);
    }
    ensure(s.sorted, un);
    if (n == 0) {
      s.sorted_codes = s.codes[0].data();
      return;
    }
    compute_codes<<<blocks_for(un), block_threads, 0, stream>>>(points, n, grid, s.codes[0].data(), s.index[0].data());
    CANOPY_CUDA_TRY(cudaGetLastError());
    cub::DoubleBuffer<std::uint64_t> keys(s.codes[0].data(), s.codes[1].data());
    cub::DoubleBuffer<std::int32_t> values(s.index[0].data(), s.index[1].data());
    std::size_t temp = 0;
    CANOPY_CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, temp, keys, values, n, 0, 3 * trees::morton_bits_per_axis,
                                                    stream));
    ensure(s.cub_temp, temp);
    CANOPY_CUDA_TRY(cub::DeviceRadixSort::SortPairs(s.cub_temp.data(), temp, keys, values, n, 0,
                                                    3 * trees::morton_bits_per_axis, stream));
    gather_points<<<blocks_for(un), block_threads, 0, stream>>>(points, values.Current(), n, s.sorted.data());
    CANOPY_CUDA_TRY(cudaGetLastError());
    if (s.words > 0) {
      const std::size_t w = un * static_cast<std::size_t>(s.words);
      ensure(s.companions_sorted, w);
      gather_words<<<blocks_for(w), block_threads, 0, stream>>>(companions.data, values.Current(), n, s.words,
                                                                s.companions_sorted.data());
      CANOPY_CUDA_TRY(cudaGetLastError());
    }
    s.sorted_codes = keys.Current();
    CANOPY_CUDA_TRY(cudaStreamSynchronize(stream));  // so that the phase's time is its own, and its errors
  });
  pt.sort = lap(clock);

  // The global tree: each level's octant counts by binary searches, summed by NCCL.
  const std::uint64_t total = ctx.sum(count);
  const octant_counter counter = [&](std::span<const std::uint64_t> bounds) {
    const std::size_t cells = bounds.size() / 9;
    upload_n(s.keys, std::vector<std::uint64_t>(bounds.begin(), bounds.end()), stream);
    ensure(s.positions, 8 * cells);
    octant_counts<<<blocks_for(8 * cells), block_threads, 0, stream>>>(s.sorted_codes, n, s.keys.data(),
                                                                       static_cast<std::int32_t>(cells), s.positions.data());
    CANOPY_CUDA_TRY(cudaGetLastError());
    ex.all_reduce(s.positions.data(), 8 * cells, element_type::u64, reduce_op::sum);
    ex.synchronize();
    return download_n(s.positions, 8 * cells, stream);
  };
  ctx.phase("global tree", [&] { s.top = build_global_tree(ctx, cube, total, counter, options); });
  pt.global_tree = lap(clock);

  // Migration: the send counts from the ranks' first keys, the points by grouped send/receive.
  const auto ranks = static_cast<std::size_t>(ctx.size());
  std::vector<std::uint64_t> at;
  ctx.phase("rank ranges", [&] {
    upload_n(s.keys, s.top.key_begin, stream);
    ensure(s.positions, ranks + 1);
    lower_bounds<<<blocks_for(ranks + 1), block_threads, 0, stream>>>(s.sorted_codes, n, s.keys.data(),
                                                                      static_cast<std::int32_t>(ranks + 1), s.positions.data());
    CANOPY_CUDA_TRY(cudaGetLastError());
    at = download_n(s.positions, ranks + 1, stream);
  });
  std::vector<std::uint64_t> send64(ranks);
  for (std::size_t r = 0; r < ranks; ++r) send64[r] = at[r + 1] - at[r];
  const std::vector<std::uint64_t> recv64 = ctx.all_to_all(send64);
  const std::vector<std::size_t> send(send64.begin(), send64.end()), recv(recv64.begin(), recv64.end());
  s.held = std::accumulate(recv.begin(), recv.end(), std::size_t{0});
  ctx.phase("migrate", [&] {  // a rank that cannot hold its share says so on every rank
    check_exchange_counts(send, recv);
    ensure(s.mine, s.held);
    if (s.words > 0) ensure(s.companions_mine, s.held * static_cast<std::size_t>(s.words));
  });
  ctx.phase("migration", [&] {
    all_to_all_v(ex, s.sorted.data(), send, s.mine.data(), recv);
    if (s.words > 0) {
      ex.all_to_all_v(s.companions_sorted.data(), send, s.companions_mine.data(), recv, 4 * static_cast<std::size_t>(s.words));
    }
    ex.synchronize();
  });
  pt.migrate = lap(clock);

  // The local tree over the global cube, and where each owned global leaf lies in it.
  ctx.phase("build", [&] {
    trees::build_options b;
    b.max_leaf = options.max_leaf;
    b.max_depth = options.max_depth;
    b.cube = cube;
    s.builder.build_into(s.mine.data(), s.held, b, s.built, stream);
    if (s.words > 0) {  // into the tree's order: its point i is mine[permutation[i]]
      const std::size_t w = s.held * static_cast<std::size_t>(s.words);
      ensure(s.companions, w);
      if (w != 0) {
        gather_words<<<blocks_for(w), block_threads, 0, stream>>>(s.companions_mine.data(), s.built.permutation.data(),
                                                                  static_cast<std::int64_t>(s.held), s.words,
                                                                  s.companions.data());
        CANOPY_CUDA_TRY(cudaGetLastError());
      }
    }
    const auto rank = static_cast<std::size_t>(ctx.rank());
    const auto first = static_cast<std::size_t>(s.top.leaf_begin[rank]);
    const auto owned = static_cast<std::size_t>(s.top.leaf_begin[rank + 1]) - first;
    std::vector<std::uint64_t> cells(2 * owned);
    for (std::size_t i = 0; i < owned; ++i) {
      const auto node = static_cast<std::size_t>(s.top.leaves[first + i]);
      cells[2 * i] = s.top.level[node];
      cells[2 * i + 1] = s.top.prefix[node];
    }
    upload_n(s.keys, cells, stream);
    ensure(s.device_branches, owned);
    if (owned != 0) {
      locate<<<blocks_for(owned), block_threads, 0, stream>>>(s.built.tree.ref(), grid, s.keys.data(),
                                                              static_cast<std::int32_t>(owned), s.device_branches.data());
      CANOPY_CUDA_TRY(cudaGetLastError());
    }
    s.branches = download_n(s.device_branches, owned, stream);
    for (std::size_t i = 0; i < owned; ++i) {
      const auto node = static_cast<std::size_t>(s.top.leaves[first + i]);
      const auto held = static_cast<std::uint64_t>(s.branches[i].end - s.branches[i].begin);
      if (held != s.top.count[node]) {
        throw std::logic_error("global leaf " + std::to_string(node) + " holds " + std::to_string(s.top.count[node]) +
                               " points, this rank " + std::to_string(held) + " of them after the migration");
      }
    }
  });
  pt.build = lap(clock);
}

std::vector<multipole<float>> device_distributed_octree::upward(const mpi_context& ctx, nccl_exchange& ex,
                                                                 const trees::upward_options& options, phase_times* times) {
  state& s = *s_;
  const cudaStream_t stream = ex.stream();
  phase_times ignored;
  phase_times& pt = times != nullptr ? *times : ignored;
  auto clock = std::chrono::steady_clock::now();

  // Three clocks, so that the pass is reported alone: the runner's graph for this tree
  // (pass_graph: set_tree, or the runner made the first time), the pass launched and waited for
  // (pass, host clock; pass_device, CUDA events around it on the stream), and the agreement after
  // it (pass_wait: this rank waiting for the slowest rank's pass).
  ctx.phase("upward pass", [&] {
    if (options.backend != trees::pass_backend::gpu) throw std::invalid_argument("the device path runs the gpu backend");
    const std::int32_t nodes = s.built.tree.node_count();
    if (s.payloads.size() < nodes) {
      // Grown with slack (the tree changes a little from step to step); the runner is pointed at the
      // new buffer below, before anything runs on it.
      CANOPY_CUDA_TRY(cudaStreamSynchronize(stream));
      s.payloads = trees::device_payloads<float>(nodes + nodes / 4 + 64);
    }
    if (s.runner && s.runner_tasks != options.tasks) s.runner.reset();
    if (!s.runner) {
      s.runner.emplace(s.built.tree, s.payloads, options, stream);
      s.runner_tasks = options.tasks;
    } else {
      if (s.runner->options().mode != options.scheduler.mode) s.runner->set_mode(options.scheduler.mode);
      s.runner->set_tree(s.built, s.payloads, stream);  // node tasks: no host wait; twig: a device graph build
    }
    if (!s.pass_start) {
      s.pass_start.emplace();
      s.pass_stop.emplace();
    }
    CANOPY_CUDA_TRY(cudaStreamSynchronize(stream));  // so that the graph's time is its own
    pt.pass_graph = lap(clock);
    s.pass_start->record(stream);
    s.runner->run_async(stream);
    s.pass_stop->record(stream);
    CANOPY_CUDA_TRY(cudaStreamSynchronize(stream));
    pt.pass = lap(clock);
    pt.pass_device = 1e-3 * static_cast<double>(canopy::elapsed_ms(*s.pass_start, *s.pass_stop));
    const canopy::run_result r = s.runner->last_result();
    if (!r.ok()) throw std::runtime_error("local upward pass: " + r.message);
  });
  pt.pass_wait = lap(clock);

  const auto owned = static_cast<std::int32_t>(s.branches.size());
  const auto ranks = static_cast<std::size_t>(ctx.size());
  std::vector<std::size_t> counts(ranks);
  for (std::size_t r = 0; r < ranks; ++r) counts[r] = static_cast<std::size_t>(s.top.leaf_begin[r + 1] - s.top.leaf_begin[r]);
  std::vector<multipole<float>> leaves;
  // One phase for the branch payloads and their exchange (see "extent exchange" in build): its
  // failures are agreed like the others.
  ctx.phase("branch exchange", [&] {
    ensure(s.branch_payloads, s.branches.size());
    if (owned != 0) {
      gather_branches<<<blocks_for(s.branches.size()), block_threads, 0, stream>>>(
          s.built.tree.ref(), s.payloads.data(), s.device_branches.data(), owned, s.branch_payloads.data());
      CANOPY_CUDA_TRY(cudaGetLastError());
    }
    pt.branches = lap(clock);
    ensure(s.leaf_payloads, s.top.leaves.size());
    all_gather_v(ex, s.branch_payloads.data(), s.leaf_payloads.data(), counts);
    ex.synchronize();
    leaves = download_n(s.leaf_payloads, s.top.leaves.size(), stream);
  });
  pt.exchange = lap(clock);

  std::vector<multipole<float>> top = combine_top_tree(s.top, leaves);
  pt.top = lap(clock);
  return top;
}

}  // namespace canopy::distributed
