// SPDX-License-Identifier: Apache-2.0
// canopy accumulate / validate / bench under mpiexec: every rank makes or reads its part of the
// points (load_points_part; a file in another format than Canopy binary is read by rank 0 and
// scattered), then the distributed octree and its upward pass run across the ranks
// (canopy::distributed::run_pass_pipeline; NCCL between the GPUs where built, else MPI on host
// memory). Every failure is agreed by all ranks, and rank 0 alone prints results and writes files.
#include <algorithm>
#include <cstdint>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <mpi.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "canopy/distributed/pass_pipeline.hpp"
#include "canopy/distributed/watchdog.hpp"
#include "canopy/mode.hpp"
#include "canopy/trees/point_io.hpp"
#include "common/stats.hpp"
#include "common/text.hpp"
#include "distributed_commands.hpp"
#include "payload_text.hpp"

namespace canopy::tool {

namespace {

namespace cd = canopy::distributed;
namespace ct = canopy::trees;

// A phase that makes no progress for this long ends every rank (the watchdog: a rank stuck or
// killed outside MPI's notice). Generous: the reference check of a large part takes seconds.
constexpr std::chrono::seconds watchdog_limit{600};

// Rank 0 holds all points; every rank gets its range [n * r / P, n * (r + 1) / P), in order.
std::vector<ct::point> scatter_points(const cd::mpi_context& ctx, const std::vector<ct::point>& all) {
  std::uint64_t n = all.size();
  MPI_Bcast(&n, 1, MPI_UINT64_T, 0, ctx.comm());
  const auto size = static_cast<std::uint64_t>(ctx.size());
  std::vector<int> counts(ctx.size()), displs(ctx.size());
  for (int r = 0; r < ctx.size(); ++r) {  // the parts read_points_binary_part and load_points_part make
    const auto r64 = static_cast<std::uint64_t>(r);
    counts[r] = static_cast<int>(ct::part_begin(n, r64 + 1, size) - ct::part_begin(n, r64, size));
    displs[r] = static_cast<int>(ct::part_begin(n, r64, size));
  }
  std::vector<ct::point> mine(static_cast<std::size_t>(counts[ctx.rank()]));
  MPI_Datatype record;
  MPI_Type_contiguous(static_cast<int>(sizeof(ct::point)), MPI_BYTE, &record);
  MPI_Type_commit(&record);
  MPI_Scatterv(all.data(), counts.data(), displs.data(), record, mine.data(), counts[ctx.rank()], record, 0, ctx.comm());
  MPI_Type_free(&record);
  return mine;
}

// This rank's points of `spec`: made or read in parts, or read whole on rank 0 and scattered.
std::vector<ct::point> my_points(const cd::mpi_context& ctx, const std::string& spec, const point_options& options) {
  std::optional<std::vector<ct::point>> part;
  ctx.phase("read", [&] {
    part = load_points_part(spec, options, static_cast<std::size_t>(ctx.rank()), static_cast<std::size_t>(ctx.size()));
  });
  if (part) return std::move(*part);
  std::vector<ct::point> all;
  ctx.phase("read", [&] {
    if (ctx.rank() != 0) return;
    all = load_points(spec, options);
    // MPI_Scatterv's int displacements; a Canopy binary file has no such limit (read in parts).
    if (all.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      throw usage_error(spec, "more than 2^31 - 1 points in a file read by one rank: convert it to Canopy binary "
                              "(canopy convert), which every rank reads its part of");
  });
  return scatter_points(ctx, all);
}

// cpu, gpu or auto -> the pass backend and the exchange, the same on every rank.
struct placement {
  ct::pass_backend backend = ct::pass_backend::cpu;
  cd::exchange_kind exchange = cd::exchange_kind::mpi;
};

placement place(const cd::mpi_context& ctx, const std::string& backend) {
  bool gpu = backend == "gpu";
  if (backend == "auto") gpu = ctx.min(gpu_available() ? 1.0 : 0.0) != 0;  // gpu only when every rank has one
  ctx.phase("backend", [&] {
    if (backend == "reference")
      throw usage_error("--backend reference", "is the serial host reference: run it without mpiexec");
    if (gpu && !gpu_available()) throw std::runtime_error("gpu backend: no CUDA device is available on this rank");
  });
  placement p;
  p.backend = gpu ? ct::pass_backend::gpu : ct::pass_backend::cpu;
  p.exchange = gpu && CANOPY_DISTRIBUTED_HAVE_NCCL ? cd::exchange_kind::nccl : cd::exchange_kind::mpi;
  return p;
}

// The cpu backend's workers: the node's cores shared among its ranks, unless --blocks says.
int cpu_workers(const cd::mpi_context& ctx, int blocks) {
  if (blocks > 0) return blocks;
  const int cores = static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, cd::ranks_on_host(ctx).size));
}

cd::pipeline_options pipeline_for(const cd::mpi_context& ctx, const tree_options& tree, const placement& p,
                                  const canopy::scheduler_options& scheduler, std::optional<ct::pass_tasks> tasks) {
  cd::pipeline_options o;
  o.exchange = p.exchange;
  o.decomposition.max_leaf = tree.max_leaf;
  o.decomposition.max_depth = tree.max_depth;
  o.pass.backend = p.backend;
  o.pass.scheduler = scheduler;
  if (p.backend == ct::pass_backend::cpu) o.pass.scheduler.blocks = cpu_workers(ctx, scheduler.blocks);
  o.pass.tasks = tasks ? *tasks : ct::default_pass_tasks(p.backend);
  return o;
}

struct phase_field {
  const char* name;  // JSON key
  const char* text;  // table row
  double cd::phase_times::*field;
};

// pass_device is the stream time of `pass`: reported, not added to the step.
constexpr phase_field phases[] = {{"extent", "extent (all-reduce)", &cd::phase_times::extent},
                                  {"sort", "local sort (Morton codes)", &cd::phase_times::sort},
                                  {"global_tree", "global tree (all-reduces)", &cd::phase_times::global_tree},
                                  {"migrate", "migration (all-to-all-v)", &cd::phase_times::migrate},
                                  {"build", "local build", &cd::phase_times::build},
                                  {"pass_graph", "pass graph (set_tree)", &cd::phase_times::pass_graph},
                                  {"pass", "local upward pass", &cd::phase_times::pass},
                                  {"pass_device", "  its stream time", &cd::phase_times::pass_device},
                                  {"pass_wait", "wait for the slowest pass", &cd::phase_times::pass_wait},
                                  {"branches", "branch payloads", &cd::phase_times::branches},
                                  {"exchange", "branch exchange (all-gather-v)", &cd::phase_times::exchange},
                                  {"top", "top tree", &cd::phase_times::top}};

double step_of(const cd::phase_times& t) {
  double s = 0;
  for (const phase_field& p : phases)
    if (p.field != &cd::phase_times::pass_device) s += t.*p.field;
  return s;
}

// Each rank's median over `runs` (from `first` on) of f, then min, max and median over ranks, ms.
struct spread {
  double min = 0, max = 0, median = 0;
};
template <class F>
spread over_ranks(const cd::mpi_context& ctx, const std::vector<cd::phase_times>& runs, std::size_t first, F&& f) {
  std::vector<double> v;
  for (std::size_t r = first; r < runs.size(); ++r) v.push_back(f(runs[r]) * 1e3);
  const double mine = v.empty() ? 0.0 : canopy::bench::median(v);
  std::vector<double> all(static_cast<std::size_t>(ctx.size()));
  MPI_Allgather(&mine, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, ctx.comm());
  return {*std::min_element(all.begin(), all.end()), *std::max_element(all.begin(), all.end()), canopy::bench::median(all)};
}

nlohmann::json phases_json(const cd::mpi_context& ctx, const std::vector<cd::phase_times>& runs, std::size_t first) {
  nlohmann::json j = nlohmann::json::object();
  for (const phase_field& p : phases) {
    const spread s = over_ranks(ctx, runs, first, [&](const cd::phase_times& t) { return t.*p.field; });
    j[p.name] = {{"min_ms", s.min}, {"max_ms", s.max}};
  }
  const spread s = over_ranks(ctx, runs, first, step_of);
  j["step"] = {{"min_ms", s.min}, {"max_ms", s.max}};
  return j;
}

std::string describe(const cd::mpi_context& ctx, const cd::pipeline_result& r) {
  return fmt::format("{} points in {} parts, one a rank; global tree {} nodes, {} leaves, depth {}",
                     grouped(static_cast<long long>(r.points)), ctx.size(), grouped(r.top_nodes), grouped(r.top_leaves),
                     r.top_depth);
}

std::string backend_text(const cd::pipeline_options& o, const cd::pipeline_result& r, int ranks) {
  return fmt::format("{} on {} ranks{} ({}), mode {}, {} tasks", ct::to_string(o.pass.backend), ranks,
                     r.device.empty() ? "" : " (" + r.device + " on rank 0)", r.where,
                     canopy::to_string(o.pass.scheduler.mode), ct::to_string(o.pass.tasks));
}

int pass_command(const cd::mpi_context& ctx, const distributed_pass_request& q) {
  if (q.build_given && ctx.rank() == 0)
    spdlog::warn("--build is ignored under mpiexec: each rank builds its part where its exchange is (the GPU with NCCL)");
  cd::watchdog dog(ctx, watchdog_limit);
  dog.enter("read");
  const std::vector<ct::point> mine = my_points(ctx, q.input, q.tree.points);
  const placement p = place(ctx, q.backend.backend);
  cd::pipeline_options o = pipeline_for(ctx, q.tree, p, q.backend.scheduler, q.backend.tasks);
  o.runs = q.backend.reps + (q.backend.reps > 1 ? 1 : 0);  // one untimed warm-up before several timed runs
  o.validate = q.validate;
  stage s;
  const cd::pipeline_result r = cd::run_pass_pipeline(ctx, mine, o, &dog);
  if (ctx.rank() == 0) s.done(fmt::format("distributed upward pass on {} ranks", ctx.size()));
  const std::size_t first = q.backend.reps > 1 ? 1 : 0;
  const spread pass = over_ranks(ctx, r.runs, first, [](const cd::phase_times& t) { return t.pass; });
  const spread step = over_ranks(ctx, r.runs, first, step_of);
  const nlohmann::json phase_table = phases_json(ctx, r.runs, first);
  if (ctx.rank() != 0) return r.check && !r.check->ok ? exit_mismatch : exit_ok;

  nlohmann::json j{{"file", q.input},
                   {"ranks", ctx.size()},
                   {"points", r.points},
                   {"top_nodes", r.top_nodes},
                   {"backend", ct::to_string(o.pass.backend)},
                   {"device", r.device},
                   {"exchange", o.exchange == cd::exchange_kind::nccl ? "nccl" : "mpi"},
                   {"mode", canopy::to_string(o.pass.scheduler.mode)},
                   {"tasks", ct::to_string(o.pass.tasks)},
                   {"reps", q.backend.reps},
                   {"pass_ms", {{"min", pass.min}, {"max", pass.max}}},
                   {"step_ms", {{"min", step.min}, {"max", step.max}}},
                   {"phases", phase_table}};
  const std::string time_line =
      fmt::format("upward pass {:.3f}-{:.3f} ms, whole pipeline {:.3f}-{:.3f} ms (each rank's {} of {}, min-max over ranks)",
                  pass.min, pass.max, step.min, step.max, q.backend.reps > 1 ? "median" : "run", q.backend.reps);
  if (!q.validate) {
    if (q.json) {
      j["root"] = payload_json(r.root);
      fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
      return exit_ok;
    }
    fmt::print("points    {} ({})\nbackend   {}\nroot\n", q.input, describe(ctx, r), backend_text(o, r, ctx.size()));
    print_payload(r.root);
    fmt::print("time      {}\n", time_line);
    return exit_ok;
  }
  const cd::pipeline_check& c = *r.check;
  const auto error_json = [](const cd::pipeline_error& e) {
    return nlohmann::json{{"worst", e.worst}, {"bound", e.bound}, {"within", e.within}};
  };
  if (q.json) {
    j.update({{"against", "reference"},
              {"counts_match", c.local_counts_match && c.top_counts_match},
              {"mass", error_json(c.local_mass)},
              {"com", error_json(c.local_com)},
              {"m2", error_json(c.local_m2)},
              {"bbox", error_json(c.local_bbox)},
              {"top", {{"mass", c.top_mass}, {"com", c.top_com}, {"m2", c.top_m2}}},
              {"ranks_report", c.rank_lines},
              {"within_tolerance", c.ok}});
    fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    return c.ok ? exit_ok : exit_mismatch;
  }
  fmt::print("points    {} ({})\nbackend   {}\ncompared  every node: each rank's local tree against the double reference "
             "of that tree, the global tree against the double combination of the ranks' branch payloads\n",
             q.input, describe(ctx, r), backend_text(o, r, ctx.size()));
  fmt::print("counts    {}\n", c.local_counts_match && c.top_counts_match ? "match exactly at every node"
                                                                          : "DIFFER (see the ranks below)");
  fmt::print("\nquantity      worst error         bound\n");
  const auto row = [](const char* name, const cd::pipeline_error& e) {
    fmt::print("{:<9} {:>16.3e} {:>13.3e}  {}\n", name, e.worst, e.bound, e.within ? "ok" : "OUT OF TOLERANCE");
  };
  row("mass", c.local_mass);
  row("com", c.local_com);
  row("m2", c.local_m2);
  row("bbox", c.local_bbox);
  fmt::print("top tree  mass {:.3e}, com {:.3e}, m2 {:.3e} (bounds 1e-4, 1e-4, 1e-3)\n\n", c.top_mass, c.top_com, c.top_m2);
  for (const std::string& line : c.rank_lines) fmt::print("{}\n", line);
  fmt::print("time      {}\n", time_line);
  fmt::print("\nresult    {}\n", c.ok ? "PASS: within tolerance" : "FAIL: out of tolerance");
  return c.ok ? exit_ok : exit_mismatch;
}

// "continuation+twig,warp-rounds" -> (mode, tasks) pairs; "" -> the default mode and tasks.
std::vector<std::pair<canopy::mode, std::optional<ct::pass_tasks>>> parse_modes(const std::string& list,
                                                                                const canopy::mode fallback) {
  std::vector<std::pair<canopy::mode, std::optional<ct::pass_tasks>>> out;
  if (list.empty()) {
    out.emplace_back(fallback, std::nullopt);
    return out;
  }
  for (const std::string_view item : canopy::bench::split(list, ',')) {
    const std::size_t plus = item.find('+');
    const std::string_view mode_name = item.substr(0, plus);
    if (mode_name == "baselines" || mode_name == "all")
      throw usage_error("--modes " + std::string(item),
                        "under mpiexec the benchmark runs scheduler modes (MODE or MODE+TASKS); the baselines run on one process");
    const auto m = canopy::parse_mode(mode_name);
    if (!m) throw usage_error("--modes", fmt::format("unknown scheduler mode {}", ct::quoted_bytes(mode_name)));
    std::optional<ct::pass_tasks> tasks;
    if (plus != std::string_view::npos) {
      tasks = ct::parse_pass_tasks(item.substr(plus + 1));
      if (!tasks) throw usage_error("--modes", fmt::format("unknown task kind {} (node, twig, bucket)", ct::quoted_bytes(item.substr(plus + 1))));
    }
    out.emplace_back(*m, tasks);
  }
  return out;
}

int bench_command(const cd::mpi_context& ctx, const distributed_bench_request& q) {
  std::vector<std::pair<canopy::mode, std::optional<ct::pass_tasks>>> modes;
  ctx.phase("options", [&] {  // the same on every rank; agreed, so that one line says it
    if (!q.usage_problem.empty()) throw std::invalid_argument(q.usage_problem);
    modes = parse_modes(q.modes, q.scheduler.mode);
    if (ctx.rank() != 0) return;  // rank 0 alone writes
    if (!q.json.empty()) check_output_path("--json " + q.json, q.json);
    if (!q.csv.empty()) check_output_path("--csv " + q.csv, q.csv);
    check_distinct_outputs({{"--json " + q.json, q.json}, {"--csv " + q.csv, q.csv}});
  });
  cd::watchdog dog(ctx, watchdog_limit);
  dog.enter("read");
  const std::vector<ct::point> mine = my_points(ctx, q.input, q.tree.points);
  const placement p = place(ctx, q.backend);
  nlohmann::json results = nlohmann::json::array();
  std::ostringstream csv;
  csv << "mode,tasks,phase,min_ms,max_ms\n";
  std::uint64_t points = 0;
  std::string device, where;
  for (const auto& [mode, tasks] : modes) {
    canopy::scheduler_options scheduler = q.scheduler;
    scheduler.mode = mode;
    cd::pipeline_options o = pipeline_for(ctx, q.tree, p, scheduler, tasks);
    // Checked first: a run of the whole pipeline with every node compared; then the timed runs.
    o.validate = true;
    const cd::pipeline_result checked = cd::run_pass_pipeline(ctx, mine, o, &dog);
    const std::string name = fmt::format("{}+{}", canopy::to_string(mode), ct::to_string(o.pass.tasks));
    if (!checked.check->ok) {  // agreed: every rank returns here
      if (ctx.rank() != 0) return exit_mismatch;
      for (const std::string& line : checked.check->rank_lines) spdlog::error("{}", line);
      spdlog::error("{}: the distributed upward pass is out of tolerance (lines above); not timed", name);
      return exit_mismatch;
    }
    o.validate = false;
    o.runs = q.warmup + q.reps;
    const cd::pipeline_result r = cd::run_pass_pipeline(ctx, mine, o, &dog);
    const auto first = static_cast<std::size_t>(q.warmup);
    const spread pass = over_ranks(ctx, r.runs, first, [](const cd::phase_times& t) { return t.pass; });
    const spread step = over_ranks(ctx, r.runs, first, step_of);
    const nlohmann::json phase_table = phases_json(ctx, r.runs, first);
    points = r.points;
    device = r.device;
    where = r.where;
    if (ctx.rank() != 0) continue;
    fmt::print("{:<28} pass {:>10.3f} - {:<10.3f} step {:>10.3f} - {:<10.3f} ms   (validated: mass {:.2e}, top {:.2e})\n",
               name, pass.min, pass.max, step.min, step.max, checked.check->local_mass.worst, checked.check->top_mass);
    std::fflush(stdout);
    results.push_back({{"mode", canopy::to_string(mode)},
                       {"tasks", ct::to_string(o.pass.tasks)},
                       {"validated", true},
                       {"pass_ms", {{"min", pass.min}, {"max", pass.max}, {"median", pass.median}}},
                       {"step_ms", {{"min", step.min}, {"max", step.max}, {"median", step.median}}},
                       {"phases", phase_table}});
    for (const auto& [phase, v] : phase_table.items())
      csv << fmt::format("{},{},{},{},{}\n", canopy::to_string(mode), ct::to_string(o.pass.tasks), phase,
                         v["min_ms"].get<double>(), v["max_ms"].get<double>());
  }
  dog.leave();
  if (ctx.rank() != 0) return exit_ok;
  const nlohmann::json doc{{"benchmark", "distributed upward pass"},
                           {"input", q.input},
                           {"ranks", ctx.size()},
                           {"points", points},
                           {"backend", ct::to_string(p.backend)},
                           {"exchange", where},
                           {"device", device},
                           {"max_leaf", q.tree.max_leaf},
                           {"reps", q.reps},
                           {"warmup", q.warmup},
                           {"clock", "host clock per phase on each rank; each rank's median over reps, min-max over ranks"},
                           {"results", results}};
  if (!q.json.empty()) {
    write_file_atomically(q.json, [&](std::ostream& out) { out << doc.dump(2) << '\n'; });
    std::fprintf(summary_stream(q.json), "wrote %s\n", q.json.c_str());
  }
  if (!q.csv.empty()) {
    write_file_atomically(q.csv, [&](std::ostream& out) { out << csv.str(); });
    std::fprintf(summary_stream(q.csv), "wrote %s\n", q.csv.c_str());
  }
  return exit_ok;
}

}  // namespace

// A distributed_error (agreed by every rank) leaves these as is: main prints it once, from rank 0.
int run_distributed_pass(const distributed_pass_request& request) {
  return pass_command(cd::mpi_context(MPI_COMM_WORLD), request);
}

int run_distributed_bench(const distributed_bench_request& request) {
  return bench_command(cd::mpi_context(MPI_COMM_WORLD), request);
}

}  // namespace canopy::tool
