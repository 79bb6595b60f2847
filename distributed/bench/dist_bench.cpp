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
#include <canopy/distributed/pass_pipeline.hpp>
#include <canopy/distributed/watchdog.hpp>
#include <canopy/mode.hpp>
#include <canopy/trees/generators.hpp>
#include <canopy/trees/reference.hpp>

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

void print_lines(const std::vector<std::string>& lines, const char* prefix) {
  for (const std::string& l : lines) std::printf("%s%s\n", prefix, l.c_str());
  std::fflush(stdout);
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

    cd::pipeline_options po;
    po.exchange = a.exchange == "nccl" ? cd::exchange_kind::nccl : cd::exchange_kind::mpi;
    po.decomposition = options;
    po.pass = pass;
    po.runs = a.runs;
    po.validate = a.validate;
    po.describe = a.per_rank;
    po.probe = a.probe;
    std::vector<cd::phase_times> runs;
    std::string where, local_tree;  // local_tree: --per-rank's description of this rank's tree
    try {
      dog.enter("generate");
      std::vector<ct::point> mine;
      ctx.phase("generate", [&] { mine = ct::generate_plummer(a.points, a.seed + static_cast<std::uint64_t>(ctx.rank())); });
      const cd::pipeline_result r = cd::run_pass_pipeline(ctx, mine, po, &dog);
      runs = r.runs;
      where = r.where;
      local_tree = r.local_tree;
      if (r.check) {
        if (ctx.rank() == 0) print_lines(r.check->rank_lines, "validate ");
        if (!r.check->ok) status = 1;
      }
      if (a.probe) {
        const std::vector<std::string> lines = cd::gather_lines(ctx, "probe rank " + std::to_string(ctx.rank()) + ": " + r.probe);
        print_lines(lines, "");
      }
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
        print_lines(cd::gather_lines(ctx, line), "");
      }
    }
  }
  MPI_Finalize();
  return status;
}
