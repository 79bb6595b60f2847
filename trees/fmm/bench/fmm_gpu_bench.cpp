// SPDX-License-Identifier: Apache-2.0
// The FMM on one GPU (issue 40, items 4 and 5): the whole evaluation as one task DAG in the
// scheduler's persistent kernel against the same task bodies phase by phase and level by level in
// a CUDA graph (serial, and with P2P on a parallel branch), on Plummer spheres.
//
//   canopy_fmm_gpu_bench [--n 65536,1048576] [--order 5] [--theta 0.5] [--eps2 1e-6]
//                        [--max-leaf 32] [--reps 20] [--sample 1000] [--full-check 200000] [--seed 1]
//                        [--m2l-wait-levels 0] [--mode warp-rounds] [--blocks 0] [--idle-sleep-ns 0]
//                        [--dealt-sources -1] [--p2p-part 16384] [--urgent-heights -1]
//                        [--staged-kinds 5,7] [--setup-reps 5] [--setup-only 0]
//
// --dealt-sources: scheduler_options::dealt_sources for the DAG (-1: the evaluator deals the
// leaves' up tasks and leaves the p2p tasks to be claimed, longest first; 2147483647: every source
// dealt at the start, as before that choice).
// --urgent-heights lists gpu_evaluator::set_urgent_height values (-1: no task urgent, the queues
// first in, first out), each one more DAG variant (an evaluator of its own, for every
// --m2l-wait-levels value), timed interleaved with the others in the same process.
// --staged-kinds: gpu_evaluator::set_staged_kinds for every evaluator, the DAG's and the level
// graphs' masks: bit 1 << kind for up (1), m2l (2), down (4); default 5,7 (the evaluator's).
// --p2p-part: dag_shape::p2p_part_interactions, the P2P work (points x source points) above which
// a leaf's P2P is cut into several tasks, in the DAG and the level graph alike (0: one a leaf).
// --setup-reps: the set-up from the device-built octree, stage by stage (setup_stages below);
// --setup-only 1: only that, for sizes whose CPU reference would take too long.
//
// --m2l-wait-levels lists DAG shapes (task_dag.hpp's dag_shape): each value k is one more DAG
// variant, its m2l tasks waiting for the up task of each source's ancestor k levels up (0: every
// source, one edge per M2L pair), each in an evaluator of its own over the same tree and lists.
// The level graphs run on the first evaluator (they do not depend on the shape).
//
// Two clocks (bench/README's): stream time, CUDA events around the enqueue with no host wait
// inside; end to end, the host clock from the call until the host knows the run succeeded (stream
// synchronised, the scheduler's status read; the fields stay on the device). Median, min and max
// over --reps after 3 warm-up runs. Before anything is timed, each variant's result (from memory
// poisoned with NaN) is checked against the CPU evaluation with the same lists and order: every
// point up to --full-check points, else a sample of --sample points (evaluate_points, bit for bit
// evaluate's there); the last timed run's result is checked again. The accuracy against direct
// summation (double, over all points) is on a sample of --sample points.
#include <canopy/cuda/device_buffer.hpp>
#include <canopy/fmm/device_lists.hpp>
#include <canopy/fmm/evaluate.hpp>
#include <canopy/fmm/gpu_evaluate.hpp>
#include <canopy/passes/device_octree_builder.cuh>
#include <canopy/fmm/interaction_lists.hpp>
#include <canopy/trees/generators.hpp>
#include <canopy/trees/octree.hpp>

#include <cuda_runtime.h>

#include <optional>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace cf = canopy::fmm;
namespace ct = canopy::trees;

struct options {
  std::vector<std::size_t> sizes{65536, 1048576};
  int order = 5;  // with theta 0.5: the fastest measured that is as accurate as the walk (bench/RESULTS.md)
  double theta = 0.5;
  double eps2 = 1e-6;
  int max_leaf = 32;
  int reps = 20;
  std::size_t sample = 1000;
  std::size_t full_check = 200000;
  std::uint64_t seed = 1;
  std::vector<int> m2l_wait_levels{0};
  std::vector<int> urgent_heights{cf::default_urgent_height};
  unsigned dag_staged = cf::default_dag_staged_kinds;  // gpu_evaluator::set_staged_kinds, every evaluator
  unsigned graph_staged = cf::default_level_graph_staged_kinds;
  std::int64_t p2p_part = cf::dag_shape{}.p2p_part_interactions;  // 0: a p2p task a leaf
  canopy::mode mode = cf::default_scheduler_options().mode;
  int blocks = 0;  // the DAG's grid (scheduler_options::blocks; 0: the scheduler's choice)
  long long idle_sleep_ns = 0;  // scheduler_options::idle_sleep_max (0: automatic)
  long long dealt_sources = -1;  // scheduler_options::dealt_sources (-1: the leaves' up tasks, gpu_evaluate.hpp)
  int setup_reps = 5;       // the set-up from the device-built octree, timed stage by stage
  bool setup_only = false;  // only that (no host tree, no evaluation): for sizes the CPU check can't afford
};

canopy::scheduler_options scheduler_options_of(const options& o) {
  canopy::scheduler_options s = cf::default_scheduler_options();
  s.mode = o.mode;
  s.blocks = o.blocks;
  s.idle_sleep_max = std::chrono::nanoseconds(o.idle_sleep_ns);
  s.dealt_sources = static_cast<std::int32_t>(o.dealt_sources);
  return s;
}

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "canopy_fmm_gpu_bench: %s\nusage: canopy_fmm_gpu_bench [--n N[,N...]] [--order 4|5|6|8] [--theta T] [--eps2 E]\n"
               "       [--max-leaf L] [--reps R] [--sample S] [--full-check N] [--seed S] [--m2l-wait-levels K[,K...]]\n"
               "       [--mode MODE] [--blocks B] [--idle-sleep-ns S] [--dealt-sources D] [--p2p-part I] [--urgent-heights H[,H...]]\n"
               "       [--staged-kinds DAG,GRAPH]\n"
               "       [--setup-reps R] [--setup-only 0|1]\n",
               why.c_str());
  std::exit(2);
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage("missing value after " + a);
    const std::string v = argv[++i];
    try {
      if (a == "--n") {
        o.sizes.clear();
        std::stringstream ss(v);
        for (std::string item; std::getline(ss, item, ',');) o.sizes.push_back(std::stoull(item));
      } else if (a == "--order") o.order = std::stoi(v);
      else if (a == "--theta") o.theta = std::stod(v);
      else if (a == "--eps2") o.eps2 = std::stod(v);
      else if (a == "--max-leaf") o.max_leaf = std::stoi(v);
      else if (a == "--reps") o.reps = std::stoi(v);
      else if (a == "--sample") o.sample = std::stoull(v);
      else if (a == "--full-check") o.full_check = std::stoull(v);
      else if (a == "--seed") o.seed = std::stoull(v);
      else if (a == "--setup-reps") o.setup_reps = std::stoi(v);
      else if (a == "--p2p-part") o.p2p_part = std::stoll(v);
      else if (a == "--blocks") o.blocks = std::stoi(v);
      else if (a == "--idle-sleep-ns") o.idle_sleep_ns = std::stoll(v);
      else if (a == "--dealt-sources") o.dealt_sources = std::stoll(v);
      else if (a == "--setup-only") o.setup_only = std::stoi(v) != 0;
      else if (a == "--mode") {
        const std::optional<canopy::mode> m = canopy::parse_mode(v);
        if (!m) usage("--mode: unknown mode '" + v + "'");
        o.mode = *m;
      }
      else if (a == "--m2l-wait-levels") {
        o.m2l_wait_levels.clear();
        std::stringstream ss(v);
        for (std::string item; std::getline(ss, item, ',');) o.m2l_wait_levels.push_back(std::stoi(item));
      }
      else if (a == "--staged-kinds") {
        const std::size_t comma = v.find(',');
        if (comma == std::string::npos) usage("--staged-kinds wants two masks, DAG,GRAPH");
        // Masks of all_staged_kinds' bits: anything wider is refused here, not cut to 32 bits (a
        // value of 2^32 + 5 would have passed as 5).
        const auto mask = [&](const std::string& text) {
          const unsigned long long m = std::stoull(text);
          if ((m & ~static_cast<unsigned long long>(cf::all_staged_kinds)) != 0)
            usage("--staged-kinds: " + text + " names a kind that does not stage (bits of " +
                  std::to_string(cf::all_staged_kinds) + " only)");
          return static_cast<unsigned>(m);
        };
        o.dag_staged = mask(v.substr(0, comma));
        o.graph_staged = mask(v.substr(comma + 1));
      }
      else if (a == "--urgent-heights") {
        o.urgent_heights.clear();
        std::stringstream ss(v);
        for (std::string item; std::getline(ss, item, ',');) o.urgent_heights.push_back(std::stoi(item));
      }
      else usage("unknown option " + a);
    } catch (const std::logic_error&) {
      usage("bad value '" + v + "' for " + a);
    }
  }
  if (!cf::gpu_order_supported(o.order)) usage("--order must be 4, 5, 6 or 8");
  if (o.setup_reps < 0) usage("--setup-reps must be >= 0");
  if (o.p2p_part < 0) usage("--p2p-part must be >= 0");
  if (o.dealt_sources < -1 || o.dealt_sources > std::numeric_limits<std::int32_t>::max())
    usage("--dealt-sources must be in [-1, 2^31 - 1]");
  if (o.blocks < 0) usage("--blocks must be >= 0");
  if (o.idle_sleep_ns < 0 || o.idle_sleep_ns > 1000000) usage("--idle-sleep-ns must be in [0, 1000000]");
  if (o.reps < 1 || o.sizes.empty()) usage("--reps must be >= 1 and --n must name a size");
  if (o.m2l_wait_levels.empty() || *std::min_element(o.m2l_wait_levels.begin(), o.m2l_wait_levels.end()) < 0)
    usage("--m2l-wait-levels must name levels >= 0");
  if (o.urgent_heights.empty() || o.m2l_wait_levels.size() * o.urgent_heights.size() > 16)
    usage("--urgent-heights must name a height (-1: none), and at most 16 DAG variants in all");
  return o;
}

void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "canopy_fmm_gpu_bench: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

struct stats {
  double median, min, max;
};
stats stats_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return {n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]), v.front(), v.back()};
}

double percentile(std::vector<double> v, double q) {  // nearest rank
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto r = static_cast<std::size_t>(std::ceil(q / 100.0 * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, r == 0 ? 0 : r - 1)];
}

template <int P>
std::vector<cf::field<float>> cpu_fields(const ct::octree& tree, const std::vector<cf::cell_geometry>& geometry,
                                         const cf::interaction_lists& lists, double eps2, const std::vector<std::int32_t>& which,
                                         bool all) {
  return all ? cf::evaluate<float, P>(tree, geometry, lists, eps2)
             : cf::evaluate_points<float, P>(tree, geometry, lists, eps2, which);
}

// Largest |gpu - cpu| / (|cpu| + 1e-3 median |cpu|) over the checked points, acceleration and
// potential (the measure and the 1e-4 bound of tests/gpu/fmm: float rounding in other orders).
constexpr double rounding_bound = 1e-4;
double difference(const std::vector<cf::field<float>>& gpu, const std::vector<cf::field<float>>& cpu,
                  const std::vector<std::int32_t>& which) {
  std::vector<double> ma, mp;
  for (const auto& f : cpu) {
    ma.push_back(std::sqrt(double(f.ax) * f.ax + double(f.ay) * f.ay + double(f.az) * f.az));
    mp.push_back(std::abs(double(f.phi)));
  }
  const double fa = 1e-3 * percentile(ma, 50), fp = 1e-3 * percentile(mp, 50);
  double worst = 0;
  for (std::size_t k = 0; k < cpu.size(); ++k) {
    const cf::field<float>& g = gpu[which.empty() ? k : static_cast<std::size_t>(which[k])];
    if (!std::isfinite(double(g.ax) + g.ay + g.az + g.phi)) return INFINITY;
    const double ex = double(g.ax) - cpu[k].ax, ey = double(g.ay) - cpu[k].ay, ez = double(g.az) - cpu[k].az;
    worst = std::max(worst, std::sqrt(ex * ex + ey * ey + ez * ez) / (ma[k] + fa));
    worst = std::max(worst, std::abs(double(g.phi) - cpu[k].phi) / (mp[k] + fp));
  }
  return worst;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The set-up the N-body step pays for every tree (--solver fmm builds an evaluator per step), stage
// by stage, host clock around each call (each returns with its stream synchronised): the octree
// from device points, the cells' geometry, the interaction lists, the task DAG, freeing them; then
// the whole evaluator from the built tree (the three stages again, the tree's copies, the
// expansions' buffers and the scheduler's sizing) and its destruction. Median of --setup-reps after
// one warm-up. `host_lists`, when given (the same points' host lists), must have the device
// lists' counts, or the times do not count.
void setup_stages(const options& o, std::size_t n, const cf::interaction_lists* host_lists) {
  if (o.setup_reps == 0) return;
  const std::vector<ct::point> points = ct::generate_plummer(n, o.seed);
  canopy::device_buffer<ct::point> d_points(points);
  ct::device_octree_builder builder;
  ct::built_device_octree built;
  cudaStream_t stream = nullptr;
  cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  const char* names[] = {"octree build",    "geometry",        "lists",           "task DAG", "task DAG, maps only",
                         "free the four",   "evaluator (all)", "evaluator freed", "evaluator, level graph only",
                         "that one freed"};
  constexpr int stages = 10;
  // Each rep twice: the set-up's scratch from cudaMalloc (no pool, the default) and from a pool
  // that keeps what is freed (as the N-body example gives it), its memory reused from the last
  // rep (the first rep, not counted, fills it). Without memory pools both are cudaMalloc.
  std::vector<double> ms[2][stages];
  const cf::memory_pool kept = cf::make_kept_pool();
  std::int64_t m2l = 0, p2p = 0, edges = 0, nodes = 0;
  for (int rep = 0; rep <= o.setup_reps; ++rep)
  for (const int keep : {0, 1}) {
    const cudaMemPool_t scratch = keep ? kept.get() : nullptr;
    double t[stages];
    auto t0 = std::chrono::steady_clock::now();
    builder.build_into(d_points.data(), n, {o.max_leaf, 21}, built, stream);
    cuda_ok(cudaStreamSynchronize(stream), "octree build");
    t[0] = seconds_since(t0);
    {
      t0 = std::chrono::steady_clock::now();
      canopy::device_buffer<cf::cell_geometry> g = cf::compute_cell_geometry(built, stream, scratch);
      t[1] = seconds_since(t0);
      t0 = std::chrono::steady_clock::now();
      cf::device_interaction_lists l = cf::build_interaction_lists(built, g, o.theta, stream, scratch);
      t[2] = seconds_since(t0);
      t0 = std::chrono::steady_clock::now();
      cf::device_task_dag d =
          cf::build_task_dag(built, l, stream, cf::dag_shape{0, o.p2p_part}, cf::dag_parts::maps_and_graph, scratch);
      t[3] = seconds_since(t0);
      t0 = std::chrono::steady_clock::now();
      cf::device_task_dag maps =
          cf::build_task_dag(built, l, stream, cf::dag_shape{0, o.p2p_part}, cf::dag_parts::maps_only, scratch);
      t[4] = seconds_since(t0);
      m2l = l.m2l_count;
      p2p = l.p2p_count;
      edges = d.edge_count;
      nodes = l.node_count;
      t0 = std::chrono::steady_clock::now();
    }
    t[5] = seconds_since(t0);
    for (const cf::schedules runs : {cf::schedules::dag_and_level_graph, cf::schedules::level_graph}) {
      const int k = runs == cf::schedules::level_graph ? 8 : 6;
      t0 = std::chrono::steady_clock::now();
      std::optional<cf::gpu_evaluator> ev;
      ev.emplace(o.order, built, o.theta, o.eps2, scheduler_options_of(o), stream, cf::dag_shape{0, o.p2p_part}, runs, scratch);
      t[k] = seconds_since(t0);
      t0 = std::chrono::steady_clock::now();
      ev.reset();
      t[k + 1] = seconds_since(t0);
    }
    if (rep > 0)
      for (int k = 0; k < stages; ++k) ms[keep][k].push_back(1e3 * t[k]);
  }
  cuda_ok(cudaStreamSynchronize(stream), "set-up");
  (void)cudaStreamDestroy(stream);
  std::printf("\nset-up from the device-built octree, %zu Plummer points, order %d, theta %.2f, leaves of %d: %lld nodes, "
              "%lld M2L pairs, %lld P2P pairs, %lld DAG edges\n",
              n, o.order, o.theta, o.max_leaf, static_cast<long long>(nodes), static_cast<long long>(m2l),
              static_cast<long long>(p2p), static_cast<long long>(edges));
  if (host_lists != nullptr) {
    const bool same = static_cast<std::size_t>(m2l) == host_lists->m2l_source.size() &&
                      static_cast<std::size_t>(p2p) == host_lists->p2p_source.size();
    std::printf("check device lists' counts against the host's: %s\n", same ? "equal" : "DIFFERENT");
    if (!same) {
      std::fprintf(stderr, "canopy_fmm_gpu_bench: the device lists' counts differ from the host's: the set-up times do not count\n");
      std::exit(1);
    }
  }
  std::printf("| set-up stage, %zu points | host ms, cudaMalloc (median / min / max of %d) | host ms, kept pool |\n"
              "|---|---|---|\n",
              n, o.setup_reps);
  for (int k = 0; k < stages; ++k) {
    const stats a = stats_of(ms[0][k]), b = stats_of(ms[1][k]);
    std::printf("| %s | %.2f / %.2f / %.2f | %.2f / %.2f / %.2f |\n", names[k], a.median, a.min, a.max, b.median, b.min, b.max);
  }
  for (const int keep : {0, 1}) {
    const auto med = [&](int k) { return stats_of(ms[keep][k]).median; };
    std::printf("%s: evaluator beyond geometry, lists and DAG (copies, buffers, scheduler): %.2f ms; level graph only, "
                "beyond geometry, lists and maps: %.2f ms\n",
                keep ? "kept pool" : "cudaMalloc", med(6) - med(1) - med(2) - med(3), med(8) - med(1) - med(2) - med(4));
  }
}

int run_size(const options& o, std::size_t n) {
  if (o.setup_only) {
    setup_stages(o, n, nullptr);
    return 0;
  }
  const auto t_build = std::chrono::steady_clock::now();
  const ct::octree tree = ct::build_octree(ct::generate_plummer(n, o.seed), {o.max_leaf, 21});
  const std::vector<cf::cell_geometry> geometry = cf::compute_cell_geometry(tree);
  const cf::interaction_lists lists = cf::build_interaction_lists(tree, geometry, o.theta);
  const double host_lists_s = seconds_since(t_build);
  setup_stages(o, n, &lists);

  // The checked points: all of them, or a fixed random sample.
  const bool check_all = n <= o.full_check;
  std::vector<std::int32_t> sample;
  {
    std::mt19937_64 rng(o.seed + 1);
    std::uniform_int_distribution<std::int32_t> pick(0, static_cast<std::int32_t>(std::max<std::size_t>(n, 1) - 1));
    for (std::size_t k = 0; k < std::min(o.sample, n); ++k) sample.push_back(pick(rng));
  }
  const auto t_cpu = std::chrono::steady_clock::now();
  std::vector<cf::field<float>> cpu;
  switch (o.order) {
    case 4: cpu = cpu_fields<4>(tree, geometry, lists, o.eps2, sample, check_all); break;
    case 5: cpu = cpu_fields<5>(tree, geometry, lists, o.eps2, sample, check_all); break;
    case 6: cpu = cpu_fields<6>(tree, geometry, lists, o.eps2, sample, check_all); break;
    default: cpu = cpu_fields<8>(tree, geometry, lists, o.eps2, sample, check_all); break;
  }
  const double cpu_s = seconds_since(t_cpu);
  const std::vector<std::int32_t> checked = check_all ? std::vector<std::int32_t>{} : sample;

  std::vector<std::unique_ptr<cf::gpu_evaluator>> dags;
  std::vector<int> dag_wait, dag_urgent;  // each DAG variant's m2l_wait_levels and urgent height
  for (const int k : o.m2l_wait_levels)
    for (const int h : o.urgent_heights) {
      dags.push_back(std::make_unique<cf::gpu_evaluator>(o.order, tree, geometry, lists, o.eps2, scheduler_options_of(o),
                                                         cf::dag_shape{k, o.p2p_part}));
      dags.back()->set_urgent_height(h);
      dags.back()->set_staged_kinds(o.dag_staged, o.graph_staged);
      dag_wait.push_back(k);
      dag_urgent.push_back(h);
    }
  cf::gpu_evaluator& fmm = *dags.front();
  const cf::task_dag& dag = fmm.dag();
  std::printf("\n## Plummer %zu points, order %d, theta %.2f, eps2 %g, max_leaf %d, DAG mode %s, staged kinds %u,%u\n\n", n,
              o.order, o.theta, o.eps2, o.max_leaf, std::string(canopy::to_string(o.mode)).c_str(), o.dag_staged, o.graph_staged);
  std::printf("tree: %d nodes, %zu leaves, depth %d; M2L pairs %zu, P2P leaf pairs %zu; host tree+lists %.2f s, "
              "CPU reference (%s) %.2f s\n",
              tree.node_count(), tree.leaves.size(), tree.depth, lists.m2l_source.size(), lists.p2p_source.size(),
              host_lists_s, check_all ? "every point" : "sample", cpu_s);
  std::printf("DAG: %d tasks (up %d, m2l %zu, down %zu, l2p %zu, p2p %zu: leaves cut at %lld interactions); level graph %d "
              "kernels (%d with the P2P branch)\n",
              dag.task_count(), dag.ranges.m2l_begin, dag.m2l_target.size(), dag.down_node.size(), dag.l2p_leaf.size(),
              dag.p2p_leaf.size(), static_cast<long long>(o.p2p_part), fmm.level_graph_kernels(false), fmm.level_graph_kernels(true));
  std::vector<std::string> dag_names;
  for (std::size_t i = 0; i < dags.size(); ++i) {
    const canopy::task_graph& g = dags[i]->dag().graph;
    std::int32_t widest = 0;
    for (std::size_t t = 0; t + 1 < g.succ_offsets().size(); ++t) widest = std::max(widest, g.succ_offsets()[t + 1] - g.succ_offsets()[t]);
    const int k = dag_wait[i];
    const int h = dag_urgent[i];
    dag_names.push_back((k == 0 ? std::string("task DAG (m2l waits for each source") : "task DAG (m2l waits " + std::to_string(k) + " levels up") +
                        (h < 0 ? std::string(", none urgent)") : ", urgent height " + std::to_string(h) + ")"));
    if (h == o.urgent_heights.front())
      std::printf("DAG shape m2l_wait_levels %d: %zu edges, at most %d successors a task\n", k, g.successors().size(), widest);
  }

  cudaStream_t stream = nullptr;
  cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  cudaEvent_t start = nullptr, stop = nullptr;
  cuda_ok(cudaEventCreate(&start), "cudaEventCreate");
  cuda_ok(cudaEventCreate(&stop), "cudaEventCreate");

  struct variant {
    const char* name;
    cf::gpu_evaluator* ev;
    std::function<void()> enqueue;
    bool scheduler;
    std::vector<double> t1, t2;
  };
  std::vector<variant> variants;
  for (std::size_t i = 0; i < dags.size(); ++i) {
    cf::gpu_evaluator* ev = dags[i].get();
    variants.push_back({dag_names[i].c_str(), ev, [ev, stream] { ev->enqueue_dag(stream); }, true, {}, {}});
  }
  variants.push_back({"level graph (serial phases)", &fmm, [&] { fmm.enqueue_level_graph(stream, false); }, false, {}, {}});
  variants.push_back({"level graph (P2P on a branch)", &fmm, [&] { fmm.enqueue_level_graph(stream, true); }, false, {}, {}});
  const std::size_t first_graph = dags.size();
  const auto finish = [&](const variant& v) {
    cuda_ok(cudaStreamSynchronize(stream), v.name);
    if (v.scheduler) {
      const canopy::run_result r = v.ev->last_dag_result();
      if (!r.ok()) {
        std::fprintf(stderr, "canopy_fmm_gpu_bench: %s: %s (%s)\n", v.name, std::string(canopy::to_string(r.code)).c_str(),
                     r.message.c_str());
        std::exit(1);
      }
    }
  };
  const auto check = [&](const variant& v, const char* when) {
    const double d = difference(v.ev->fields(), cpu, checked);
    std::printf("check %-40s %-12s largest difference to the CPU %.2e (bound %.0e)\n", v.name, when, d, rounding_bound);
    if (d <= rounding_bound) return true;
    std::fprintf(stderr, "canopy_fmm_gpu_bench: %s disagrees with the CPU evaluation: its times do not count\n", v.name);
    return false;
  };

  // Correct first: each variant from poisoned memory, against the CPU, before any timing. Every
  // variant is checked before a disagreement stops the run, so that a failure says which of the
  // schedules (the DAG's shapes, the level graphs) it shows in.
  bool agree = true;
  for (variant& v : variants) {
    v.ev->poison(stream);
    v.enqueue();
    finish(v);
    agree = check(v, "before") && agree;
    for (int w = 0; w < 3; ++w) {  // warm-up
      v.enqueue();
      finish(v);
    }
  }
  if (!agree) std::exit(1);
  // Interleaved, so that clocks and temperature drift alike for every variant.
  for (int rep = 0; rep < o.reps; ++rep) {
    for (variant& v : variants) {
      cuda_ok(cudaEventRecord(start, stream), "cudaEventRecord");
      v.enqueue();
      cuda_ok(cudaEventRecord(stop, stream), "cudaEventRecord");
      finish(v);
      float ms = 0;
      cuda_ok(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
      v.t1.push_back(1000.0 * ms);
    }
    for (variant& v : variants) {
      const auto t0 = std::chrono::steady_clock::now();
      v.enqueue();
      finish(v);
      v.t2.push_back(1e6 * seconds_since(t0));
    }
  }
  for (const variant& v : variants) {  // the last timed run of each, checked again
    v.ev->poison(stream);
    v.enqueue();
    finish(v);
    if (!check(v, "after")) std::exit(1);
  }

  std::printf("\n| %zu points, p %d | stream us (median / min / max) | end to end us (median / min / max) |\n|---|---|---|\n", n,
              o.order);
  for (const variant& v : variants) {
    const stats a = stats_of(v.t1), b = stats_of(v.t2);
    std::printf("| %s | %.1f / %.1f / %.1f | %.1f / %.1f / %.1f |\n", v.name, a.median, a.min, a.max, b.median, b.min, b.max);
  }
  for (std::size_t d = 0; d < first_graph; ++d) {
    const double dag_t1 = stats_of(variants[d].t1).median, dag_t2 = stats_of(variants[d].t2).median;
    for (std::size_t k = first_graph; k < variants.size(); ++k)
      std::printf("speed-up of the %s over the %s: %.2fx stream, %.2fx end to end\n", variants[d].name, variants[k].name,
                  stats_of(variants[k].t1).median / dag_t1, stats_of(variants[k].t2).median / dag_t2);
  }
  std::printf("DAG grid: %d blocks\n", fmm.dag_blocks());
  {
    // Where the baseline's time goes: each phase alone (median of 5 runs), the share of its
    // resident warp slots its bodies fill, and the same bodies' clock cycles, kind by kind, in the
    // phases and in one DAG run: whether a body runs slower in the persistent kernel, and how much
    // of the DAG's warp time is spent in bodies.
    std::vector<cf::level_phase_times> runs;
    for (int r = 0; r < 5; ++r) runs.push_back(fmm.time_level_phases(stream));
    const char* phases[] = {"P2M", "M2M", "M2L", "L2L", "P2P", "L2P"};
    std::printf("level phases alone, us (median of 5) and busy share of the warp slots:");
    double sum = 0, busy_us = 0;
    for (int p = 0; p < 6; ++p) {
      std::vector<double> ms, busy;
      for (const cf::level_phase_times& x : runs) {
        ms.push_back(x.ms[p]);
        busy.push_back(x.busy[p]);
      }
      const double us = 1000.0 * stats_of(ms).median, b = stats_of(busy).median;
      sum += us;
      busy_us += us * b;
      std::printf(" %s %.1f (%.0f%%)%s", phases[p], us, 100.0 * b, p < 5 ? ";" : "");
    }
    std::printf("; sum %.1f, busy %.1f (%.0f%%); %d M2M and %d L2L levels\n", sum, busy_us, 100.0 * busy_us / sum,
                runs.front().m2m_levels, runs.front().l2l_levels);
    const cf::task_clocks& graph_clocks = runs.back().clocks;
    fmm.set_task_clocks(true);
    cuda_ok(cudaEventRecord(start, stream), "cudaEventRecord");
    fmm.enqueue_dag(stream);
    cuda_ok(cudaEventRecord(stop, stream), "cudaEventRecord");
    finish(variants[0]);
    float dag_ms = 0;
    cuda_ok(cudaEventElapsedTime(&dag_ms, start, stop), "cudaEventElapsedTime");
    const cf::task_clocks dag_clocks = fmm.read_task_clocks();
    fmm.set_task_clocks(false);
    int khz = 0, device = 0;
    cuda_ok(cudaGetDevice(&device), "cudaGetDevice");
    cuda_ok(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device), "cudaDeviceGetAttribute");
    const char* kinds[] = {"up", "m2l", "down", "l2p", "p2p"};
    double dag_body = 0;
    std::printf("task bodies' clocks (kcycles a task, graph phases / DAG; Gcycles in all):");
    for (int k = 0; k < 5; ++k) {
      const double g = graph_clocks.tasks[k] ? double(graph_clocks.cycles[k]) / graph_clocks.tasks[k] / 1e3 : 0;
      const double d = dag_clocks.tasks[k] ? double(dag_clocks.cycles[k]) / dag_clocks.tasks[k] / 1e3 : 0;
      dag_body += double(dag_clocks.cycles[k]);
      std::printf(" %s %.2f / %.2f (%.2f / %.2f)%s", kinds[k], g, d, graph_clocks.cycles[k] / 1e9, dag_clocks.cycles[k] / 1e9,
                  k < 4 ? ";" : "\n");
    }
    // The longest single body of each kind bounds any schedule from below (a phase, or the DAG,
    // ends no sooner than its longest task): at the device's clock rate.
    std::printf("longest body, us (graph phases / DAG):");
    for (int k = 0; k < 5; ++k)
      std::printf(" %s %.1f / %.1f%s", kinds[k], 1e3 * double(graph_clocks.longest[k]) / khz, 1e3 * double(dag_clocks.longest[k]) / khz,
                  k < 4 ? ";" : "\n");
    // Every block of the persistent kernel holds threads_per_block / 32 warps (128 threads: 4).
    const double warp_cycles = double(dag_ms) * 1e-3 * khz * 1e3 * fmm.dag_blocks() * 4.0;
    std::printf("DAG run with clocks %.1f us: its warps' cycles %.2f G, in task bodies %.2f G (%.0f%%)\n", 1000.0 * dag_ms,
                warp_cycles / 1e9, dag_body / 1e9, 100.0 * dag_body / warp_cycles);
  }
  {
    // The DAG's timeline: each task's body start and end (global timer) in one run. A task is
    // ready when its last predecessor ends (a source: when the first body starts); what it waited
    // is its start minus that. The chain of last predecessors back from the last task to end is
    // the run's realised critical path: its bodies against its waits say whether the run is
    // bounded by work on that chain or by the scheduler's hand-overs.
    fmm.set_task_timeline(true);
    fmm.enqueue_dag(stream);
    finish(variants[0]);
    const std::vector<unsigned long long> tl = fmm.read_task_timeline();
    fmm.set_task_timeline(false);
    const canopy::task_graph& g = fmm.dag().graph;
    const auto tasks = static_cast<std::size_t>(g.task_count());
    if (tl.size() == 2 * tasks && tasks > 0) {
      const auto start = [&](std::size_t t) { return double(tl[2 * t]); };
      const auto end = [&](std::size_t t) { return double(tl[2 * t + 1]); };
      double t0 = start(0), t1 = end(0), body = 0;
      std::size_t last = 0;
      for (std::size_t t = 0; t < tasks; ++t) {
        t0 = std::min(t0, start(t));
        if (end(t) > t1) {
          t1 = end(t);
          last = t;
        }
        body += end(t) - start(t);
      }
      std::vector<double> ready(tasks, t0);
      std::vector<std::size_t> made_ready(tasks, tasks);  // the predecessor that ended last (none: a source)
      for (std::size_t t = 0; t < tasks; ++t) {
        for (std::int32_t k = g.pred_offsets()[t]; k < g.pred_offsets()[t + 1]; ++k) {
          const auto p = static_cast<std::size_t>(g.predecessors()[static_cast<std::size_t>(k)]);
          if (made_ready[t] == tasks || end(p) > end(made_ready[t])) made_ready[t] = p;
        }
        if (made_ready[t] != tasks) ready[t] = end(made_ready[t]);
      }
      const char* kinds[] = {"up", "m2l", "down", "l2p", "p2p"};
      std::vector<double> waits[5];
      for (std::size_t t = 0; t < tasks; ++t)
        waits[static_cast<int>(dag.ranges.kind_of(static_cast<std::int32_t>(t)))].push_back((start(t) - ready[t]) / 1e3);
      std::printf("DAG timeline: span %.1f us from the first body's start; bodies %.1f ms of warp time; wait from ready to start, us "
                  "(median / p90 / max):",
                  (t1 - t0) / 1e3, body / 1e6);
      for (int k = 0; k < 5; ++k)
        std::printf(" %s %.1f / %.1f / %.1f%s", kinds[k], percentile(waits[k], 50), percentile(waits[k], 90), percentile(waits[k], 100),
                    k < 4 ? ";" : "\n");
      double chain_body = 0, chain_wait = 0;
      int hops = 0, chain_kinds[5] = {};
      std::string chain;  // first task first: kind (wait + body, us)
      for (std::size_t t = last;; t = made_ready[t]) {
        chain_body += end(t) - start(t);
        chain_wait += start(t) - ready[t];
        ++hops;
        const int kind = static_cast<int>(dag.ranges.kind_of(static_cast<std::int32_t>(t)));
        ++chain_kinds[kind];
        char hop[96];
        std::snprintf(hop, sizeof hop, "%s%s (%.1f + %.1f)", made_ready[t] == tasks ? "" : " <- ", kinds[kind],
                      (start(t) - ready[t]) / 1e3, (end(t) - start(t)) / 1e3);
        chain = hop + chain;
        if (made_ready[t] == tasks) break;
      }
      std::printf("DAG critical chain (last predecessors back from the last task): %d tasks (up %d, m2l %d, down %d, l2p %d, "
                  "p2p %d), bodies %.1f us, waits %.1f us\n",
                  hops, chain_kinds[0], chain_kinds[1], chain_kinds[2], chain_kinds[3], chain_kinds[4], chain_body / 1e3,
                  chain_wait / 1e3);
      std::printf("DAG critical chain, first task first, kind (wait + body, us):%s\n", chain.c_str());
    }
  }

  // Accuracy against direct summation (double, every point as a source) on the sample.
  fmm.enqueue_dag(stream);
  finish(variants[0]);
  const std::vector<cf::field<float>> got = fmm.fields();
  std::vector<double> acc, phi;
  for (const std::int32_t j : sample) {
    const ct::point& q = tree.points[static_cast<std::size_t>(j)];
    cf::field<double> f{0, 0, 0, 0};
    for (std::size_t s = 0; s < tree.points.size(); ++s) {
      if (static_cast<std::int32_t>(s) == j) continue;
      const ct::point& p = tree.points[s];
      const double dx = double(p.x) - q.x, dy = double(p.y) - q.y, dz = double(p.z) - q.z;
      const double inv_r = 1.0 / std::sqrt(dx * dx + dy * dy + dz * dz + o.eps2);
      const double w = p.m * inv_r * inv_r * inv_r;
      f.ax += w * dx;
      f.ay += w * dy;
      f.az += w * dz;
      f.phi -= p.m * inv_r;
    }
    const cf::field<float>& g = got[static_cast<std::size_t>(j)];
    const double ex = g.ax - f.ax, ey = g.ay - f.ay, ez = g.az - f.az;
    acc.push_back(std::sqrt(ex * ex + ey * ey + ez * ez) / std::sqrt(f.ax * f.ax + f.ay * f.ay + f.az * f.az));
    phi.push_back(std::abs(g.phi - f.phi) / std::abs(f.phi));
  }
  std::printf("accuracy against direct summation (%zu sampled points): acc p50 %.2e p99 %.2e max %.2e, phi p50 %.2e p99 %.2e\n",
              sample.size(), percentile(acc, 50), percentile(acc, 99), percentile(acc, 100), percentile(phi, 50),
              percentile(phi, 99));

  (void)cudaEventDestroy(start);
  (void)cudaEventDestroy(stop);
  (void)cudaStreamDestroy(stream);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  int device = 0;
  cudaDeviceProp prop{};
  cuda_ok(cudaGetDevice(&device), "cudaGetDevice");
  cuda_ok(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  std::printf("# canopy_fmm_gpu_bench on %s (%d SMs)\n", prop.name, prop.multiProcessorCount);
  try {
    for (const std::size_t n : o.sizes) run_size(o, n);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "canopy_fmm_gpu_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
