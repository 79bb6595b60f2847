// SPDX-License-Identifier: Apache-2.0
#include <canopy/distributed/pass_pipeline.hpp>

#include <canopy/distributed/mpi_exchange.hpp>
#include <canopy/trees/reference.hpp>
#if CANOPY_DISTRIBUTED_HAVE_NCCL
#include <canopy/cuda/device_buffer.hpp>
#include <canopy/distributed/device_distributed_octree.hpp>
#include <canopy/distributed/nccl_exchange.hpp>

#include <cuda_runtime.h>
#endif

#include <mpi.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <utility>

namespace canopy::distributed {

namespace ct = canopy::trees;

namespace {

// The watchdog's phase, when there is one.
void tell(watchdog* dog, const char* phase) {
  if (dog != nullptr) dog->enter(phase);
}

// The worst of (worst, bound, within) over the ranks: the largest worst, with the bound of the rank
// whose worst / bound is largest, within only when within on every rank.
pipeline_error reduce_error(const mpi_context& ctx, const ct::quantity_error& q) {
  const std::array<double, 3> mine{q.worst, q.bound, q.within() ? 1.0 : 0.0};
  std::vector<double> all(3 * static_cast<std::size_t>(ctx.size()));
  MPI_Allgather(mine.data(), 3, MPI_DOUBLE, all.data(), 3, MPI_DOUBLE, ctx.comm());
  pipeline_error e;
  double ratio = -1;
  for (int r = 0; r < ctx.size(); ++r) {
    const double* x = &all[3 * static_cast<std::size_t>(r)];
    e.worst = std::max(e.worst, x[0]);
    e.within = e.within && x[2] != 0;
    const double ratio_r = x[1] > 0 ? x[0] / x[1] : (x[0] > 0 ? HUGE_VAL : 0.0);
    if (ratio_r > ratio) {
      ratio = ratio_r;
      e.bound = x[1];
    }
  }
  return e;
}

pipeline_check check_pipeline(const mpi_context& ctx, const global_tree& top, const ct::octree& local,
                              const std::vector<ct::multipole<float>>& local_moments,
                              const std::vector<branch_location>& branches,
                              const std::vector<ct::multipole<float>>& top_moments) {
  const std::vector<ct::multipole<double>> reference = ct::reference_upward_pass(local);
  const ct::comparison c = ct::compare_payloads<float>(local, local_moments, reference);
  // The branch payloads in double, gathered; the top tree combined in double.
  std::vector<ct::multipole<double>> mine;
  for (const branch_location& at : branches) {
    if (at.node >= 0) {
      mine.push_back(reference[static_cast<std::size_t>(at.node)]);
    } else if (at.begin < at.end) {
      mine.push_back(ct::p2m<double>(local.points.data() + at.begin, at.end - at.begin));
    } else {
      mine.push_back(ct::multipole_identity<double>());
    }
  }
  std::vector<std::size_t> counts(static_cast<std::size_t>(ctx.size()));
  for (std::size_t r = 0; r < counts.size(); ++r) counts[r] = static_cast<std::size_t>(top.leaf_begin[r + 1] - top.leaf_begin[r]);
  std::vector<ct::multipole<double>> leaves(top.leaves.size());
  mpi_exchange host(ctx.comm());
  all_gather_v(host, mine.data(), leaves.data(), counts);
  const std::vector<ct::multipole<double>> exact = combine_top_tree(top, leaves);

  pipeline_check k;
  const double edge = top.cube.hi[0] - top.cube.lo[0];
  const double scale = edge + std::max(std::abs(top.cube.lo[0]), std::abs(top.cube.hi[0]));
  for (std::size_t n = 0; n < exact.size(); ++n) {
    const ct::multipole<float>& f = top_moments[n];
    const ct::multipole<double>& d = exact[n];
    if (f.count != d.count || f.count != top.count[n]) k.top_counts_match = false;
    if (d.mass > 0) k.top_mass = std::max(k.top_mass, std::abs(f.mass - d.mass) / d.mass);
    for (int a = 0; a < 3; ++a) k.top_com = std::max(k.top_com, std::abs(f.com[a] - d.com[a]) / scale);
    for (int a = 0; a < 6; ++a)
      if (d.mass > 0) k.top_m2 = std::max(k.top_m2, std::abs(f.m2[a] - d.m2[a]) / (d.mass * scale * scale));
  }
  // Bounds for the top tree (at most a few thousand float merges above exact leaves): far above the
  // rounding, far below any lost child or misplaced point. The same on every rank (same inputs).
  const bool top_ok = k.top_counts_match && k.top_mass <= 1e-4 && k.top_com <= 1e-4 && k.top_m2 <= 1e-3;
  const bool local_ok = c.counts_match && c.within_tolerance;
  k.local_counts_match = ctx.min(c.counts_match ? 1.0 : 0.0) != 0;
  k.local_mass = reduce_error(ctx, c.mass);
  k.local_com = reduce_error(ctx, c.com);
  k.local_m2 = reduce_error(ctx, c.m2);
  k.local_bbox = reduce_error(ctx, c.bbox);
  k.ok = ctx.min(local_ok && top_ok ? 1.0 : 0.0) != 0;
  char line[512];
  std::snprintf(line, sizeof line,
                "rank %d: local tree %s (counts %s, mass %.2g/%.2g, com %.2g/%.2g, m2 %.2g/%.2g); top tree %s (counts %s, "
                "mass %.2g, com %.2g, m2 %.2g)",
                ctx.rank(), local_ok ? "ok" : "FAILED", c.counts_match ? "exact" : "differ", c.mass.worst, c.mass.bound,
                c.com.worst, c.com.bound, c.m2.worst, c.m2.bound, top_ok ? "ok" : "FAILED",
                k.top_counts_match ? "exact" : "differ", k.top_mass, k.top_com, k.top_m2);
  k.rank_lines = gather_lines(ctx, line);
  return k;
}

std::string describe_local(const global_tree& top, int rank, const ct::octree& local) {
  const auto owned = top.leaf_begin[static_cast<std::size_t>(rank) + 1] - top.leaf_begin[static_cast<std::size_t>(rank)];
  char line[256];
  std::snprintf(line, sizeof line, "%zu points, %d nodes, %zu leaves, depth %d, %lld owned global leaves of %zu",
                local.points.size(), local.node_count(), local.leaves.size(), local.depth, static_cast<long long>(owned),
                top.leaves.size());
  return line;
}

void note_top(pipeline_result& r, const global_tree& top, const std::vector<ct::multipole<float>>& moments) {
  r.root = moments.empty() ? ct::multipole_identity<float>() : moments.front();
  r.points = top.total();
  r.top_nodes = top.node_count();
  r.top_leaves = static_cast<std::int32_t>(top.leaves.size());
  r.top_depth = top.level_offset.empty() ? 0 : static_cast<std::int32_t>(top.level_offset.size()) - 2;
}

#if CANOPY_DISTRIBUTED_HAVE_NCCL
double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// options.probe: what the twig graph build of set_tree is made of (device_pass_graphs.cu: cudaMalloc
// and cudaFree of its scratch and arrays, host round trips), timed on every rank at the same time.
std::string probe_device(cudaStream_t stream) {
  using clock = std::chrono::steady_clock;
  const auto us = [](clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); };
  std::vector<double> alloc, release, trip;
  std::uint32_t* host = nullptr;
  if (cudaMallocHost(&host, sizeof(std::uint32_t)) != cudaSuccess) return "cudaMallocHost failed";
  for (int i = 0; i < 21; ++i) {
    void* p = nullptr;
    auto t0 = clock::now();
    if (cudaMalloc(&p, std::size_t{64} << 20) != cudaSuccess) return "cudaMalloc failed";
    auto t1 = clock::now();
    (void)cudaFree(p);
    auto t2 = clock::now();
    void* d = nullptr;
    if (cudaMalloc(&d, 4) != cudaSuccess) return "cudaMalloc failed";
    auto t3 = clock::now();
    (void)cudaMemcpyAsync(host, d, 4, cudaMemcpyDeviceToHost, stream);
    (void)cudaStreamSynchronize(stream);
    auto t4 = clock::now();
    (void)cudaFree(d);
    alloc.push_back(us(t1 - t0));
    release.push_back(us(t2 - t1));
    trip.push_back(us(t4 - t3));
  }
  (void)cudaFreeHost(host);
  char line[256];
  std::snprintf(line, sizeof line,
                "cudaMalloc 64 MiB %.1f us, its cudaFree %.1f us, a 4-byte read-back and stream wait %.1f us (medians of 21)",
                median_of(alloc), median_of(release), median_of(trip));
  return line;
}

// The stream of the nccl path, destroyed on every way out.
struct owned_stream {
  cudaStream_t s = nullptr;
  ~owned_stream() {
    if (s != nullptr) (void)cudaStreamDestroy(s);
  }
};

void run_on_devices(const mpi_context& ctx, std::span<const ct::point> points, const pipeline_options& o, watchdog* dog,
                    pipeline_result& r) {
  int devices = 0;
  ctx.phase("device", [&] {
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) throw std::runtime_error("no CUDA device");
  });
  const int device = ranks_on_host(ctx).rank % devices;
  owned_stream stream;
  ctx.phase("device", [&] {
    if (cudaSetDevice(device) != cudaSuccess || cudaStreamCreateWithFlags(&stream.s, cudaStreamNonBlocking) != cudaSuccess)
      throw std::runtime_error("cannot use CUDA device " + std::to_string(device));
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, device) == cudaSuccess) r.device = prop.name;
  });
  tell(dog, "NCCL set-up");
  nccl_exchange ex(ctx, device, stream.s);
  r.where = "NCCL exchange on device memory, gpu backend, device " + std::to_string(device) + " of " +
            std::to_string(devices) + " on rank 0's host";
  std::optional<device_buffer<ct::point>> d_points;
  ctx.phase("upload", [&] { d_points.emplace(std::vector<ct::point>(points.begin(), points.end())); });
  device_distributed_octree tree;
  for (int run = 0; run < o.runs; ++run) {
    phase_times t;
    tell(dog, "build");
    tree.build(ctx, ex, d_points->data(), points.size(), o.decomposition, &t);
    tell(dog, "upward pass");
    const std::vector<ct::multipole<float>> top = tree.upward(ctx, ex, o.pass, &t);
    r.runs.push_back(t);
    if (run + 1 < o.runs) continue;
    note_top(r, tree.top(), top);
    if (o.validate) {
      tell(dog, "validate");
      ct::octree local;
      std::vector<ct::multipole<float>> payloads;
      ctx.phase("validate", [&] {  // a failed copy on one rank: every rank stops before the check's collectives
        local = tree.download_local();
        payloads = tree.download_local_payloads();
      });
      r.check = check_pipeline(ctx, tree.top(), local, payloads, tree.branches(), top);
    }
    if (o.describe) {
      tell(dog, "describe");
      ctx.phase("describe", [&] { r.local_tree = describe_local(tree.top(), ctx.rank(), tree.download_local()); });
    }
  }
  if (o.probe) {
    tell(dog, "probe");
    MPI_Barrier(ctx.comm());
    r.probe = probe_device(stream.s);
  }
}
#endif

}  // namespace

std::vector<std::string> gather_lines(const mpi_context& ctx, const std::string& line) {
  std::vector<std::string> lines;
  for (int r = 0; r < ctx.size(); ++r) {
    if (r == ctx.rank() && r != 0) MPI_Send(line.data(), static_cast<int>(line.size()), MPI_CHAR, 0, 8, ctx.comm());
    if (ctx.rank() != 0) continue;
    if (r == 0) {
      lines.push_back(line);
      continue;
    }
    MPI_Status st;
    MPI_Probe(r, 8, ctx.comm(), &st);
    int n = 0;
    MPI_Get_count(&st, MPI_CHAR, &n);
    std::string other(static_cast<std::size_t>(n), '\0');
    MPI_Recv(other.data(), n, MPI_CHAR, r, 8, ctx.comm(), MPI_STATUS_IGNORE);
    lines.push_back(std::move(other));
  }
  return lines;
}

host_ranks ranks_on_host(const mpi_context& ctx) {
  MPI_Comm local;
  MPI_Comm_split_type(ctx.comm(), MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  host_ranks h;
  MPI_Comm_rank(local, &h.rank);
  MPI_Comm_size(local, &h.size);
  MPI_Comm_free(&local);
  return h;
}

pipeline_result run_pass_pipeline(const mpi_context& ctx, std::span<const ct::point> points, const pipeline_options& o,
                                  watchdog* dog) {
  ctx.phase("options", [&] {
    if (o.runs < 1) throw std::invalid_argument("runs must be at least 1");
    if (o.exchange == exchange_kind::nccl && o.pass.backend != ct::pass_backend::gpu)
      throw std::invalid_argument("the NCCL exchange runs the gpu backend");
    if (o.probe && o.exchange != exchange_kind::nccl) throw std::invalid_argument("the probe times the device: it needs NCCL");
  });
  pipeline_result r;
  if (o.exchange == exchange_kind::mpi) {
    mpi_exchange ex(ctx.comm());
    r.where = std::string("MPI exchange on host memory, ") + std::string(ct::to_string(o.pass.backend)) + " backend";
    for (int run = 0; run < o.runs; ++run) {
      phase_times t;
      tell(dog, "build");
      const distributed_octree tree = build_distributed_octree(ctx, ex, points, o.decomposition, &t);
      tell(dog, "upward pass");
      const distributed_moments m = distributed_upward_pass(ctx, ex, tree, o.pass, &t);
      r.runs.push_back(t);
      if (run + 1 < o.runs) continue;
      note_top(r, tree.top, m.top);
      if (o.validate) {
        tell(dog, "validate");
        r.check = check_pipeline(ctx, tree.top, tree.local, m.local, tree.branches, m.top);
      }
      if (o.describe) r.local_tree = describe_local(tree.top, ctx.rank(), tree.local);
    }
  } else {
#if CANOPY_DISTRIBUTED_HAVE_NCCL
    run_on_devices(ctx, points, o, dog, r);
#else
    ctx.phase("exchange", [] { throw std::runtime_error("built without NCCL (CANOPY_GPU and CANOPY_NCCL_ROOT)"); });
#endif
  }
  if (dog != nullptr) dog->leave();
  return r;
}

}  // namespace canopy::distributed
