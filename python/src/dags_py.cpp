// SPDX-License-Identifier: Apache-2.0
// General DAGs (canopy::dags): a task graph from an edge list (or a Graphviz DOT file) with a
// weight per task, run on the CPU scheduler or the GPU computing trees::dag_accumulate_ops, and
// the serial topological reference the runs are checked against.
#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "canopy/cpu_scheduler.hpp"
#include "canopy/dags/dag_accumulate.hpp"
#include "canopy/dags/dag_io.hpp"
#include "canopy/task_graph.hpp"
#include "canopy/trees/errors.hpp"
#include "canopy_py.hpp"
#if CANOPY_PY_HAVE_GPU
#include "canopy/dags/dag_accumulate_gpu.hpp"
#endif

namespace canopy::python {

namespace {

namespace trees = canopy::trees;

// A graph and its weights, checked once (task_graph::from_edges) and run as often as asked.
struct dag {
  canopy::task_graph graph;
  std::vector<std::int64_t> weights;
  std::vector<std::string> names;  // DOT node names; empty for an edge list
};

using edges_in = nb::ndarray<const std::int32_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using weights_in = nb::ndarray<const std::int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

dag dag_from_edges(std::int32_t task_count, const edges_in& edges, const weights_in& weights) {
  if (task_count < 0) throw trees::input_error("task_count", "must be >= 0");
  if (edges.shape(1) != 2) throw trees::input_error("edges", "must have shape (E, 2): (a, b) means b depends on a");
  if (weights.shape(0) != static_cast<std::size_t>(task_count))
    throw trees::input_error("weights", std::to_string(weights.shape(0)) + " weights for " + std::to_string(task_count) + " tasks");
  std::vector<std::pair<canopy::task_id, canopy::task_id>> list(edges.shape(0));
  for (std::size_t e = 0; e < list.size(); ++e) list[e] = {edges(e, 0), edges(e, 1)};
  dag d;
  try {
    d.graph = canopy::task_graph::from_edges(task_count, list);
  } catch (const canopy::error& e) {
    // A cycle, self-loop, duplicate edge or task out of range: the graph is what is wrong.
    throw graph_rejected(e.what());
  }
  d.weights.assign(weights.data(), weights.data() + weights.shape(0));
  return d;
}

std::vector<std::uint64_t> run_cpu(const dag& d, const canopy::scheduler_options& options, std::string& device,
                                   double& elapsed_us) {
  canopy::cpu_scheduler sched(d.graph, options);
  std::vector<std::uint64_t> values(static_cast<std::size_t>(d.graph.task_count()), 0);
  const trees::dag_accumulate_ops ops{d.graph.pred_offsets().data(), d.graph.predecessors().data(), d.weights.data(),
                                      values.data()};
  const auto start = std::chrono::steady_clock::now();
  const auto r = sched.run(ops);
  elapsed_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  throw_if_failed(r, "cpu");
  device = std::to_string(sched.worker_count()) + " CPU workers";
  return values;
}

}  // namespace

void bind_dags(nb::module_& m) {
  nb::class_<dag>(m, "Dag", "A task graph with a weight per task (task_graph.hpp, dag_accumulate.hpp)")
      .def_prop_ro("task_count", [](const dag& d) { return d.graph.task_count(); })
      .def_prop_ro("edge_count", [](const dag& d) { return d.graph.predecessors().size(); })
      .def_prop_ro("sink_count", [](const dag& d) { return d.graph.sink_count(); })
      .def_prop_ro("sources", [](const dag& d) { return std::vector<canopy::task_id>(d.graph.sources()); })
      .def_prop_ro("names", [](const dag& d) { return d.names; })
      .def_prop_ro("weights", [](const dag& d) {
        return nb::ndarray<nb::numpy, const std::int64_t, nb::ndim<1>>(d.weights.data(), {d.weights.size()});
      }, nb::rv_policy::reference_internal)
      .def("reference", [](const dag& d) {
        std::vector<std::uint64_t> v;
        {
          nb::gil_scoped_release unlocked;
          v = trees::reference_dag_accumulate(d.graph, d.weights);
        }
        const std::size_t n = v.size();
        return owned_array<std::uint64_t>(std::move(v), {n});
      }, "values of the serial topological execution")
      .def("run", [](const dag& d, const std::string& backend, const std::string& mode, const std::string& push_policy,
                     int blocks, int threads, std::int32_t queue_capacity, double deadline_ms) {
        const auto options = scheduler_options_from(mode, push_policy, blocks, threads, queue_capacity, deadline_ms);
        require_backend(backend);
        std::vector<std::uint64_t> values;
        std::string device;
        double us = 0;
        {
          nb::gil_scoped_release unlocked;
          if (backend == "cpu") {
            values = run_cpu(d, options, device, us);
          } else {
#if CANOPY_PY_HAVE_GPU
            trees::dag_gpu_run r = trees::run_dag_accumulate_gpu(d.graph, d.weights, options);
            throw_if_failed(r.result, "gpu");
            values = std::move(r.values);
            device = std::move(r.device);
            us = r.elapsed_us;
#endif
          }
        }
        const std::size_t n = values.size();
        return nb::make_tuple(owned_array<std::uint64_t>(std::move(values), {n}), device, us);
      }, nb::arg("backend"), CANOPY_PY_SCHEDULER_ARGS);

  m.def("dag_from_edges", &dag_from_edges, nb::arg("task_count"), nb::arg("edges"), nb::arg("weights"));
  m.def("read_dag", [](const std::string& path) {
    trees::dot_dag parsed;
    {
      nb::gil_scoped_release unlocked;
      parsed = trees::load_dag_dot(path);
    }
    return dag{std::move(parsed.graph), std::move(parsed.weights), std::move(parsed.names)};
  }, nb::arg("path"), "a DAG from a Graphviz DOT file (dag_io.hpp): edge a -> b means b depends on a");
}

}  // namespace canopy::python
