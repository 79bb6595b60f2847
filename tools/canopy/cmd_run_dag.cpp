// SPDX-License-Identifier: Apache-2.0
// canopy run-dag: schedule a general dependency DAG read from Graphviz DOT on a backend, every task
// computing trees::dag_accumulate_ops, and check every task's value against a serial topological
// execution (the reference).
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "backends.hpp"
#include "canopy/cpu_scheduler.hpp"
#include "canopy/mode.hpp"
#include "canopy/dags/dag_accumulate.hpp"
#include "canopy/dags/dag_io.hpp"
#include "canopy/trees/errors.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "dag_backend.hpp"
#include "scheduler_cli.hpp"

namespace canopy::tool {

#if !CANOPY_HAVE_GPU
dag_run run_dag_gpu(const canopy::task_graph&, std::span<const std::int64_t>, const canopy::scheduler_options&) {
  throw std::runtime_error("gpu backend: this canopy was built without CUDA support (CANOPY_GPU=OFF)");
}
#endif

namespace {

namespace trees = canopy::trees;

struct run_dag_options {
  std::string file;
  std::string backend = "auto";
  canopy::scheduler_options scheduler;
  bool json = false;
};

// After a timeout that named no task (a chain leaves no dependency counter part-way): the first task
// that had every predecessor's value but none of its own, from the values the run wrote (a task's
// value is weight + 1 + its predecessors', 0 only until it runs, or by a wrap of 2^64 the caller
// would have to aim for). -1 when every task has a value.
canopy::task_id first_unfinished_ready_task(const canopy::task_graph& graph, std::span<const std::uint64_t> values) {
  const auto offsets = graph.pred_offsets();
  const auto preds = graph.predecessors();
  for (canopy::task_id t = 0; t < graph.task_count(); ++t) {
    if (values[static_cast<std::size_t>(t)] != 0) continue;
    bool ready = true;
    for (std::int32_t i = offsets[static_cast<std::size_t>(t)]; ready && i < offsets[static_cast<std::size_t>(t) + 1]; ++i)
      ready = values[static_cast<std::size_t>(preds[static_cast<std::size_t>(i)])] != 0;
    if (ready) return t;
  }
  return canopy::no_task;
}

dag_run run_dag_cpu(const canopy::task_graph& graph, std::span<const std::int64_t> weights,
                    std::span<const std::string> names, const canopy::scheduler_options& options) {
  canopy::cpu_scheduler sched(graph, options);
  dag_run out;
  out.values.assign(static_cast<std::size_t>(graph.task_count()), 0);
  const trees::dag_accumulate_ops ops{graph.pred_offsets().data(), graph.predecessors().data(), weights.data(),
                                      out.values.data()};
  const auto start = std::chrono::steady_clock::now();
  const auto r = sched.run(ops);
  out.elapsed_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  if (r.code == canopy::status::timeout && r.task == canopy::no_task) {
    // The timeout promises a task's name: the first that was ready and never finished.
    if (const canopy::task_id t = first_unfinished_ready_task(graph, out.values); t != canopy::no_task)
      throw std::runtime_error(fmt::format("cpu backend: timeout: deadline of {} ms passed; task {} had every "
                                           "dependency done but never finished",
                                           options.deadline.count(), names[static_cast<std::size_t>(t)]));
  }
  throw_if_failed(r, "cpu");
  out.backend = "cpu";
  out.device = std::to_string(sched.worker_count()) + " CPU workers";
  return out;
}

int run(const run_dag_options& o) {
  stage load;
  trees::dot_dag dag;
  try {
    dag = trees::load_dag_dot(o.file);
  } catch (const trees::graph_error& e) {
    // A cycle is bad input, like a syntax error (exit 2); what() names the file and the nodes.
    throw std::invalid_argument(e.what());
  }
  const auto& graph = dag.graph;
  load.done(fmt::format("read DAG: {} tasks, {} edges from {}", grouped(graph.task_count()),
                        grouped(static_cast<long long>(graph.predecessors().size())), o.file));

  stage ref;
  const auto expected = trees::reference_dag_accumulate(graph, dag.weights);
  const double reference_us = ref.elapsed_ms() * 1e3;
  ref.done("reference topological execution");

  std::string backend = o.backend;
  if (backend == "auto") backend = gpu_available() ? "gpu" : "cpu";
  dag_run result;
  if (backend == "reference") {
    result = dag_run{expected, "reference", "serial host", reference_us};
  } else {
    const auto& options = o.scheduler;
    if (backend == "gpu" && !gpu_available()) throw std::runtime_error("gpu backend: no CUDA device is available (use --backend cpu)");
    result = backend == "gpu" ? run_dag_gpu(graph, dag.weights, options) : run_dag_cpu(graph, dag.weights, dag.names, options);
    result.device += ", mode " + std::string(canopy::to_string(options.mode));
  }

  std::size_t mismatches = 0, first = 0;
  for (std::size_t t = expected.size(); t-- > 0;)
    if (result.values[t] != expected[t]) {
      ++mismatches;
      first = t;
    }
  const bool pass = mismatches == 0;
  const auto edges = static_cast<long long>(graph.predecessors().size());
  const auto sources = static_cast<long long>(graph.sources().size());
  if (o.json) {
    nlohmann::json j{{"file", o.file},         {"tasks", graph.task_count()}, {"edges", edges},
                     {"sources", sources},     {"sinks", graph.sink_count()}, {"backend", result.backend},
                     {"device", result.device}, {"elapsed_us", result.elapsed_us}, {"mismatches", mismatches},
                     {"result", pass ? "PASS" : "FAIL"}};
    if (!pass) j["first_mismatch"] = {{"task", dag.names[first]}, {"got", result.values[first]}, {"expected", expected[first]}};
    fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    return pass ? exit_ok : exit_mismatch;
  }
  fmt::print("dag       {}\n", o.file);
  const auto counted = [](long long n, const char* one, const char* many) {
    return grouped(n) + " " + (n == 1 ? one : many);
  };
  fmt::print("tasks     {} ({}, {}, {})\n", grouped(graph.task_count()), counted(edges, "edge", "edges"),
             counted(sources, "source", "sources"), counted(graph.sink_count(), "sink", "sinks"));
  fmt::print("backend   {} on {}\n", result.backend, result.device);
  fmt::print("time      {:.1f} us (the scheduled run only)\n", result.elapsed_us);
  if (pass)
    fmt::print("result    PASS: every task's value equals the topological reference\n");
  else
    fmt::print("result    FAIL: {} of {} tasks differ (first: task {}: got {}, expected {})\n", grouped(static_cast<long long>(mismatches)),
               grouped(graph.task_count()), dag.names[first], result.values[first], expected[first]);
  return pass ? exit_ok : exit_mismatch;
}

}  // namespace

command add_run_dag_command(CLI::App& app) {
  auto o = std::make_shared<run_dag_options>();
  auto* cmd = app.add_subcommand("run-dag",
                                 "Schedule a dependency DAG from a Graphviz DOT file (edge a -> b: b depends on a) and "
                                 "check it.\nEvery task t computes value[t] = weight[t] + 1 + the sum of its "
                                 "predecessors' values (mod 2^64; node attribute `weight`, default 0),\nand every "
                                 "value is compared with a serial topological execution. Exit 1 on a mismatch.");
  cmd->add_option("FILE", o->file, "Graphviz DOT digraph (node ids: numeric names by value, other names sorted)")->required();
  cmd->add_option("--backend", o->backend,
                  "reference (serial topological order), cpu (the scheduler on std::threads), gpu (CUDA), "
                  "or auto (gpu when a device is usable, else cpu)")
      ->check(CLI::IsMember({"reference", "cpu", "gpu", "auto"}))
      ->capture_default_str();
  add_scheduler_options(*cmd, o->scheduler);
  cmd->add_flag("--json", o->json, "print the result as JSON");
  return {cmd, [o] { return run(*o); }};
}

}  // namespace canopy::tool
