// SPDX-License-Identifier: Apache-2.0
// canopy-dist-bench: the distributed octree and its upward pass, timed per phase and per rank, run
// under mpiexec (one rank per GPU, or per CPU backend instance).
//
//   mpiexec -n 4 canopy-dist-bench --points 16000000 --exchange nccl --validate      # GPUs, NCCL
//   mpiexec -n 4 --oversubscribe canopy-dist-bench --points 100000 --exchange mpi    # CPU ranks
//
// Each rank generates its own Plummer sphere (seed + rank), so no rank ever holds all points;
// then global cube, global tree, migration, local build, local pass, branch exchange and top tree,
// `--runs` times. Printed on rank 0: per phase the median over runs of each rank, as min and max
// over ranks (load imbalance shows as their gap). --validate checks every node without gathering
// the points: each rank's local tree against reference_upward_pass (double) of that tree, and the
// global tree against its combination in double of the reference's branch payloads.
// The upward pass is reported in parts: the runner's graph for the step's tree (set_tree), the
// pass alone (host clock, and its stream time by CUDA events on the GPU), and the wait for the
// slowest rank's pass (the agreement after it). --per-rank prints each rank's local tree (points,
// nodes, leaves, depth, owned global leaves) beside its pass times: where the time of the slowest
// rank comes from. --tasks and --mode choose the pass's task kind and scheduler mode.
// Exit status: 0, 1 on a failed check or a failure of any rank (one line naming the rank), 2 on a
// bad argument.
#include <canopy/distributed/distributed_octree.hpp>
#include <canopy/distributed/mpi_exchange.hpp>
#include <canopy/distributed/watchdog.hpp>
#include <canopy/mode.hpp>
#include <canopy/trees/generators.hpp>
#include <canopy/trees/reference.hpp>
#if CANOPY_DISTRIBUTED_HAVE_NCCL
#include <canopy/cuda/device_buffer.hpp>
#include <canopy/distributed/device_distributed_octree.hpp>
#include <canopy/distributed/nccl_exchange.hpp>

#include <cuda_runtime.h>
#endif

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace cd = canopy::distributed;
namespace ct = canopy::trees;

namespace {

struct arguments {
  std::size_t points = 1'000'000;  // per rank
  std::string exchange = "mpi";    // mpi (host) or nccl (device)
  std::string backend;             // cpu or gpu; default: gpu with nccl, else cpu
  int max_leaf = 32;
  std::uint64_t bucket = 0;
  int runs = 5;
  std::uint64_t seed = 1;
  bool validate = false;
  bool per_rank = false;
  bool probe = false;  // --probe: the costs the pass graph's build is made of, on every rank at once
  std::string tasks;  // node, twig or bucket; default: default_pass_tasks(backend)
  std::string mode;   // a scheduler mode (canopy::parse_mode); default: scheduler_options' default
  double watchdog_s = 300;
};

const char* usage =
    "usage: canopy-dist-bench [--points N per rank (1000000)] [--exchange mpi|nccl] [--backend cpu|gpu]\n"
    "                         [--max-leaf L (32)] [--bucket B (0: auto)] [--runs R (5)] [--seed S (1)]\n"
    "                         [--validate] [--per-rank] [--probe] [--tasks node|twig|bucket] [--mode M]\n"
    "                         [--watchdog S (300)]\n";

std::optional<arguments> parse(int argc, char** argv, std::string& problem) {
  arguments a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto value = [&]() -> std::optional<std::string> {
      if (i + 1 >= argc) {
        problem = k + " needs a value";
        return std::nullopt;
      }
      return std::string(argv[++i]);
    };
    try {
      if (k == "--validate") {
        a.validate = true;
      } else if (k == "--per-rank") {
        a.per_rank = true;
      } else if (k == "--probe") {
        a.probe = true;
      } else if (k == "--points" || k == "--exchange" || k == "--backend" || k == "--max-leaf" || k == "--bucket" ||
                 k == "--runs" || k == "--seed" || k == "--watchdog" || k == "--tasks" || k == "--mode") {
        const auto v = value();
        if (!v) return std::nullopt;
        if (k == "--points") a.points = std::stoull(*v);
        if (k == "--exchange") a.exchange = *v;
        if (k == "--backend") a.backend = *v;
        if (k == "--max-leaf") a.max_leaf = std::stoi(*v);
        if (k == "--bucket") a.bucket = std::stoull(*v);
        if (k == "--runs") a.runs = std::stoi(*v);
        if (k == "--seed") a.seed = std::stoull(*v);
        if (k == "--watchdog") a.watchdog_s = std::stod(*v);
        if (k == "--tasks") a.tasks = *v;
        if (k == "--mode") a.mode = *v;
      } else if (k == "--help" || k == "-h") {
        problem = "";
        return std::nullopt;
      } else {
        problem = "unknown argument " + k;
        return std::nullopt;
      }
    } catch (const std::exception&) {
      problem = k + ": not a number";
      return std::nullopt;
    }
  }
  if (a.backend.empty()) a.backend = a.exchange == "nccl" ? "gpu" : "cpu";
  if (a.exchange != "mpi" && a.exchange != "nccl") problem = "--exchange must be mpi or nccl";
  if (a.backend != "cpu" && a.backend != "gpu") problem = "--backend must be cpu or gpu";
  if (a.exchange == "nccl" && a.backend != "gpu") problem = "--exchange nccl runs the gpu backend";
  if (a.probe && a.exchange != "nccl") problem = "--probe times the device: it needs --exchange nccl";
  if (a.runs < 1) problem = "--runs must be at least 1";
  if (!a.tasks.empty() && !ct::parse_pass_tasks(a.tasks)) problem = "--tasks must be node, twig or bucket";
  if (!a.mode.empty() && !canopy::parse_mode(a.mode)) problem = "--mode: unknown scheduler mode " + a.mode;
  if (!problem.empty()) return std::nullopt;
  return a;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The worst deviation of the float top tree from its double combination; counts exact.
struct top_check {
  bool counts_match = true;
  double mass = 0, com = 0, m2 = 0;
};

std::vector<ct::multipole<double>> combine_top_tree_double(const cd::global_tree& top,
                                                           const std::vector<ct::multipole<double>>& leaves) {
  std::vector<ct::multipole<double>> m(static_cast<std::size_t>(top.node_count()), ct::multipole_identity<double>());
  for (std::size_t i = 0; i < top.leaves.size(); ++i) m[static_cast<std::size_t>(top.leaves[i])] = leaves[i];
  for (auto level = static_cast<std::ptrdiff_t>(top.level_offset.size()) - 2; level >= 0; --level) {
    for (std::int32_t n = top.level_offset[static_cast<std::size_t>(level)];
         n < top.level_offset[static_cast<std::size_t>(level) + 1]; ++n) {
      const auto k = static_cast<std::size_t>(n);
      for (std::int32_t c = 0; c < top.child_count[k]; ++c) {
        m[k] = c == 0 ? m[static_cast<std::size_t>(top.first_child[k])]
                      : ct::m2m_merge(m[k], m[static_cast<std::size_t>(top.first_child[k] + c)]);
      }
    }
  }
  return m;
}

// Checks one rank's share and the top tree; returns false (after a line on rank 0) on a failure.
bool validate(const cd::mpi_context& ctx, const cd::global_tree& top, const ct::octree& local,
              const std::vector<ct::multipole<float>>& local_moments, const std::vector<cd::branch_location>& branches,
              const std::vector<ct::multipole<float>>& top_moments) {
  const std::vector<ct::multipole<double>> reference = ct::reference_upward_pass(local);
  const ct::comparison c = ct::compare_payloads<float>(local, local_moments, reference);
  const bool local_ok = c.counts_match && c.mass.worst <= c.mass.bound && c.com.worst <= c.com.bound &&
                        c.m2.worst <= c.m2.bound && c.bbox.worst <= c.bbox.bound;
  // The branch payloads in double, gathered; the top tree combined in double.
  std::vector<ct::multipole<double>> mine;
  for (const cd::branch_location& at : branches) {
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
  cd::mpi_exchange host(ctx.comm());
  cd::all_gather_v(host, mine.data(), leaves.data(), counts);
  const std::vector<ct::multipole<double>> exact = combine_top_tree_double(top, leaves);
  top_check t;
  const double edge = top.cube.hi[0] - top.cube.lo[0];
  for (std::size_t n = 0; n < exact.size(); ++n) {
    const ct::multipole<float>& f = top_moments[n];
    const ct::multipole<double>& d = exact[n];
    if (f.count != d.count || f.count != top.count[n]) t.counts_match = false;
    if (d.mass > 0) t.mass = std::max(t.mass, std::abs(f.mass - d.mass) / d.mass);
    const double scale = edge + std::max(std::abs(top.cube.lo[0]), std::abs(top.cube.hi[0]));
    for (int a = 0; a < 3; ++a) t.com = std::max(t.com, std::abs(f.com[a] - d.com[a]) / scale);
    for (int a = 0; a < 6; ++a) {
      if (d.mass > 0) t.m2 = std::max(t.m2, std::abs(f.m2[a] - d.m2[a]) / (d.mass * scale * scale));
    }
  }
  // Bounds for the top tree (at most a few thousand float merges above exact leaves): far above the
  // rounding, far below any lost child or misplaced point.
  const bool top_ok = t.counts_match && t.mass <= 1e-4 && t.com <= 1e-4 && t.m2 <= 1e-3;
  const int all_ok = static_cast<int>(ctx.min(local_ok && top_ok ? 1.0 : 0.0));
  char line[512];
  std::snprintf(line, sizeof line,
                "rank %d: local tree %s (counts %s, mass %.2g/%.2g, com %.2g/%.2g, m2 %.2g/%.2g); top tree %s (counts %s, "
                "mass %.2g, com %.2g, m2 %.2g)",
                ctx.rank(), local_ok ? "ok" : "FAILED", c.counts_match ? "exact" : "differ", c.mass.worst, c.mass.bound,
                c.com.worst, c.com.bound, c.m2.worst, c.m2.bound, top_ok ? "ok" : "FAILED",
                t.counts_match ? "exact" : "differ", t.mass, t.com, t.m2);
  // Every rank's line, in rank order, from rank 0.
  for (int r = 0; r < ctx.size(); ++r) {
    if (r == ctx.rank() && r != 0) MPI_Send(line, sizeof line, MPI_CHAR, 0, 7, ctx.comm());
    if (ctx.rank() == 0) {
      char other[512];
      if (r != 0) MPI_Recv(other, sizeof other, MPI_CHAR, r, 7, ctx.comm(), MPI_STATUS_IGNORE);
      std::printf("validate %s\n", r == 0 ? line : other);
    }
  }
  return all_ok != 0;
}

// Rank 0 prints every rank's `line`, in rank order.
void print_in_rank_order(const cd::mpi_context& ctx, const std::string& line) {
  for (int r = 0; r < ctx.size(); ++r) {
    if (r == ctx.rank() && r != 0) {
      MPI_Send(line.c_str(), static_cast<int>(line.size()), MPI_CHAR, 0, 8, ctx.comm());
    }
    if (ctx.rank() == 0) {
      if (r == 0) {
        std::printf("%s\n", line.c_str());
      } else {
        MPI_Status st;
        MPI_Probe(r, 8, ctx.comm(), &st);
        int n = 0;
        MPI_Get_count(&st, MPI_CHAR, &n);
        std::string other(static_cast<std::size_t>(n), '\0');
        MPI_Recv(other.data(), n, MPI_CHAR, r, 8, ctx.comm(), MPI_STATUS_IGNORE);
        std::printf("%s\n", other.c_str());
      }
    }
  }
  std::fflush(stdout);
}

// This rank's local tree in a few numbers (--per-rank).
std::string describe_local(const cd::global_tree& top, int rank, const ct::octree& local) {
  const auto owned = top.leaf_begin[static_cast<std::size_t>(rank) + 1] - top.leaf_begin[static_cast<std::size_t>(rank)];
  char line[256];
  std::snprintf(line, sizeof line, "%zu points, %d nodes, %zu leaves, depth %d, %lld owned global leaves of %zu",
                local.points.size(), local.node_count(), local.leaves.size(), local.depth, static_cast<long long>(owned),
                top.leaves.size());
  return line;
}

#if CANOPY_DISTRIBUTED_HAVE_NCCL
// --probe: what the twig graph build of set_tree is made of (device_pass_graphs.cu: cudaMalloc and
// cudaFree of its scratch and arrays, host round trips), timed on every rank at the same time.
std::string probe_device(cudaStream_t stream) {
  using clock = std::chrono::steady_clock;
  const auto us = [](clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); };
  std::vector<double> alloc, release, trip;
  std::uint32_t* host = nullptr;
  (void)cudaMallocHost(&host, sizeof(std::uint32_t));
  for (int i = 0; i < 21; ++i) {
    void* p = nullptr;
    auto t0 = clock::now();
    if (cudaMalloc(&p, std::size_t{64} << 20) != cudaSuccess) return "cudaMalloc failed";
    auto t1 = clock::now();
    (void)cudaFree(p);
    auto t2 = clock::now();
    void* d = nullptr;
    (void)cudaMalloc(&d, 4);
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
  std::snprintf(line, sizeof line, "cudaMalloc 64 MiB %.1f us, its cudaFree %.1f us, a 4-byte read-back and stream wait %.1f us (medians of 21)",
                median(alloc), median(release), median(trip));
  return line;
}
#endif

[[maybe_unused]] int node_local_rank(MPI_Comm comm) {
  MPI_Comm local;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  int r = 0;
  MPI_Comm_rank(local, &r);
  MPI_Comm_free(&local);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  // MPI_THREAD_SINGLE: the watchdog then ends a stuck rank with _Exit and mpiexec ends the others
  // (MPI_THREAD_MULTIPLE would let it call MPI_Abort, but costs every MPI call a lock).
  MPI_Init(&argc, &argv);
  int status = 0;
  {
    const cd::mpi_context ctx(MPI_COMM_WORLD);
    std::string problem;
    const std::optional<arguments> parsed = parse(argc, argv, problem);
    if (!parsed) {
      if (ctx.rank() == 0) std::fprintf(stderr, "%s%s%s", problem.empty() ? "" : "canopy-dist-bench: ", problem.c_str(),
                                        problem.empty() ? usage : "\n");
      MPI_Finalize();
      return problem.empty() ? 0 : 2;
    }
    const arguments& a = *parsed;
    cd::watchdog dog(ctx, std::chrono::milliseconds(static_cast<long long>(a.watchdog_s * 1000)));
    cd::decomposition_options options;
    options.max_leaf = a.max_leaf;
    options.bucket = a.bucket;
    ct::upward_options pass;
    pass.backend = a.backend == "gpu" ? ct::pass_backend::gpu : ct::pass_backend::cpu;
    pass.tasks = a.tasks.empty() ? ct::default_pass_tasks(pass.backend) : *ct::parse_pass_tasks(a.tasks);
    if (!a.mode.empty()) pass.scheduler.mode = *canopy::parse_mode(a.mode);
    if (pass.backend == ct::pass_backend::cpu) pass.scheduler.blocks = 1;

    std::vector<cd::phase_times> runs;
    std::string where, local_tree;  // local_tree: --per-rank's description of this rank's tree
    try {
      dog.enter("generate");
      std::vector<ct::point> mine;
      ctx.phase("generate", [&] { mine = ct::generate_plummer(a.points, a.seed + static_cast<std::uint64_t>(ctx.rank())); });
      bool checked = true;
      if (a.exchange == "mpi") {
        cd::mpi_exchange ex(ctx.comm());
        where = "MPI exchange on host memory, " + std::string(a.backend) + " backend";
        for (int run = 0; run < a.runs; ++run) {
          cd::phase_times t;
          dog.enter("build");
          const cd::distributed_octree tree = cd::build_distributed_octree(ctx, ex, mine, options, &t);
          dog.enter("upward pass");
          const cd::distributed_moments m = cd::distributed_upward_pass(ctx, ex, tree, pass, &t);
          runs.push_back(t);
          if (a.validate && run + 1 == a.runs) {
            dog.enter("validate");
            checked = validate(ctx, tree.top, tree.local, m.local, tree.branches, m.top);
          }
          if (a.per_rank && run + 1 == a.runs) local_tree = describe_local(tree.top, ctx.rank(), tree.local);
        }
      } else {
#if CANOPY_DISTRIBUTED_HAVE_NCCL
        int devices = 0;
        ctx.phase("device", [&] {
          if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) throw std::runtime_error("no CUDA device");
        });
        const int device = node_local_rank(ctx.comm()) % devices;
        cudaStream_t stream = nullptr;
        ctx.phase("device", [&] {
          if (cudaSetDevice(device) != cudaSuccess || cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
            throw std::runtime_error("cannot use CUDA device " + std::to_string(device));
          }
        });
        dog.enter("NCCL set-up");
        cd::nccl_exchange ex(ctx, device, stream);
        where = "NCCL exchange on device memory, gpu backend, device " + std::to_string(device) + " of " +
                std::to_string(devices) + " on rank 0's host";
        canopy::device_buffer<ct::point> d_points(mine);
        cd::device_distributed_octree tree;
        for (int run = 0; run < a.runs; ++run) {
          cd::phase_times t;
          dog.enter("build");
          tree.build(ctx, ex, d_points.data(), mine.size(), options, &t);
          dog.enter("upward pass");
          const std::vector<ct::multipole<float>> top = tree.upward(ctx, ex, pass, &t);
          runs.push_back(t);
          if (a.validate && run + 1 == a.runs) {
            dog.enter("validate");
            checked = validate(ctx, tree.top(), tree.download_local(), tree.download_local_payloads(), tree.branches(), top);
          }
          if (a.per_rank && run + 1 == a.runs) {
            dog.enter("per-rank");
            local_tree = describe_local(tree.top(), ctx.rank(), tree.download_local());
          }
        }
        if (a.probe) {
          dog.enter("probe");
          MPI_Barrier(ctx.comm());
          const std::string line = "probe rank " + std::to_string(ctx.rank()) + ": " + probe_device(stream);
          print_in_rank_order(ctx, line);
        }
#else
        ctx.phase("exchange", [] { throw std::runtime_error("built without NCCL (CANOPY_GPU and CANOPY_NCCL_ROOT)"); });
#endif
      }
      dog.leave();
      if (!checked) status = 1;
    } catch (const cd::distributed_error& e) {
      dog.leave();
      if (ctx.rank() == 0) std::fprintf(stderr, "canopy-dist-bench: %s\n", e.what());
      status = 1;
    }

    if (!runs.empty()) {
      struct phase {
        const char* name;
        double cd::phase_times::*field;
      };
      // pass_device is the stream time of `pass`: printed, not added to the total.
      const phase phases[] = {{"extent (all-reduce)", &cd::phase_times::extent},
                              {"local sort (Morton codes)", &cd::phase_times::sort},
                              {"global tree (all-reduces)", &cd::phase_times::global_tree},
                              {"migration (all-to-all-v)", &cd::phase_times::migrate},
                              {"local build", &cd::phase_times::build},
                              {"pass graph (runner set_tree)", &cd::phase_times::pass_graph},
                              {"local upward pass", &cd::phase_times::pass},
                              {"  its stream time (events)", &cd::phase_times::pass_device},
                              {"wait for the slowest pass", &cd::phase_times::pass_wait},
                              {"branch payloads", &cd::phase_times::branches},
                              {"branch exchange (all-gather-v)", &cd::phase_times::exchange},
                              {"top tree", &cd::phase_times::top}};
      if (ctx.rank() == 0) {
        std::printf("canopy-dist-bench: %d ranks x %zu Plummer points, max_leaf %d, %s, %s tasks, mode %s, %d runs\n",
                    ctx.size(), a.points, a.max_leaf, where.c_str(), std::string(ct::to_string(pass.tasks)).c_str(),
                    std::string(canopy::to_string(pass.scheduler.mode)).c_str(), a.runs);
        std::printf("%-32s %12s %12s   (ms: each rank's median over runs, min and max over ranks)\n", "phase", "min",
                    "max");
      }
      double total_min = 0, total_max = 0;
      std::vector<double> sum(runs.size(), 0.0);
      for (const phase& p : phases) {
        std::vector<double> v;
        for (std::size_t r = 0; r < runs.size(); ++r) {
          v.push_back(runs[r].*p.field);
          if (p.field != &cd::phase_times::pass_device) sum[r] += runs[r].*p.field;
        }
        const double lo = ctx.min(median(v)) * 1e3, hi = ctx.max(median(v)) * 1e3;
        if (ctx.rank() == 0) std::printf("%-32s %12.3f %12.3f\n", p.name, lo, hi);
      }
      total_min = ctx.min(median(sum)) * 1e3;
      total_max = ctx.max(median(sum)) * 1e3;
      if (ctx.rank() == 0) std::printf("%-32s %12.3f %12.3f\n", "total", total_min, total_max);
      if (a.per_rank) {
        std::vector<double> graph, alone, device, wait;
        for (const cd::phase_times& t : runs) {
          graph.push_back(t.pass_graph);
          alone.push_back(t.pass);
          device.push_back(t.pass_device);
          wait.push_back(t.pass_wait);
        }
        char line[512];
        std::snprintf(line, sizeof line, "rank %d: %s; pass graph %.3f ms, pass %.3f ms (stream %.3f), wait %.3f ms (medians)",
                      ctx.rank(), local_tree.empty() ? "no tree" : local_tree.c_str(), 1e3 * median(graph),
                      1e3 * median(alone), 1e3 * median(device), 1e3 * median(wait));
        print_in_rank_order(ctx, line);
      }
    }
  }
  MPI_Finalize();
  return status;
}
