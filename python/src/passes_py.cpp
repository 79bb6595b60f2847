// SPDX-License-Identifier: Apache-2.0
// The upward pass: the double reference, brute-force moments, the scheduler backends (through
// trees::upward_runner, as the tool runs them) and the comparison with the reference. Payloads
// cross as raw records; python/canopy/ views them with a structured dtype built from
// payload_layout(), so the NumPy fields are the C++ struct's own bytes.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "canopy/passes/upward_runner.hpp"
#include "canopy/trees/errors.hpp"
#include "canopy/trees/multipole.hpp"
#include "canopy/trees/reference.hpp"
#include "canopy_py.hpp"

namespace canopy::python {

namespace {

namespace trees = canopy::trees;
using records_in = nb::ndarray<const std::uint8_t, nb::c_contig, nb::device::cpu>;

template <class T>
nb::dict layout() {
  using P = trees::multipole<T>;
  nb::dict d;
  d["itemsize"] = sizeof(P);
  d["count"] = offsetof(P, count);
  d["mass"] = offsetof(P, mass);
  d["com"] = offsetof(P, com);
  d["m2"] = offsetof(P, m2);
  d["lo"] = offsetof(P, lo);
  d["hi"] = offsetof(P, hi);
  return d;
}

template <class T>
std::span<const trees::multipole<T>> records_of(const records_in& a, const char* what) {
  if (a.nbytes() % sizeof(trees::multipole<T>) != 0)
    throw trees::input_error(what, std::to_string(a.nbytes()) + " bytes are not whole payload records of " +
                                       std::to_string(sizeof(trees::multipole<T>)) + " bytes");
  // NumPy allocations are aligned for doubles at least: what multipole<T> needs.
  return {reinterpret_cast<const trees::multipole<T>*>(a.data()), a.nbytes() / sizeof(trees::multipole<T>)};
}

// What one accumulate() call reports besides the payloads.
struct pass_report {
  std::string backend, tasks, device;
  double elapsed_us = 0;
};

}  // namespace

void bind_passes(nb::module_& m) {
  m.def("payload_layout", [](bool is_double) { return is_double ? layout<double>() : layout<float>(); },
        nb::arg("is_double"), "offsets and size of multipole<float> or multipole<double> (multipole.hpp)");

  m.def("reference_upward_pass", [](const trees::octree& tree) {
    std::vector<trees::multipole<double>> r;
    {
      nb::gil_scoped_release unlocked;
      r = trees::reference_upward_pass(tree);
    }
    return owned_records(std::move(r));
  }, nb::arg("tree"));
  m.def("brute_force_moments", [](const trees::octree& tree) {
    std::vector<trees::multipole<double>> r;
    {
      nb::gil_scoped_release unlocked;
      r = trees::brute_force_moments(tree);
    }
    return owned_records(std::move(r));
  }, nb::arg("tree"));

  nb::class_<pass_report>(m, "PassReport")
      .def_ro("backend", &pass_report::backend)
      .def_ro("tasks", &pass_report::tasks)
      .def_ro("device", &pass_report::device)
      .def_ro("elapsed_us", &pass_report::elapsed_us);

  // The tool's flow (tools/canopy/backends.cpp): on the GPU an untimed warm run, the timed run,
  // then one more run into poisoned payloads, so that a run that skipped nodes cannot pass on an
  // earlier run's results; on the CPU the timed run alone.
  m.def("accumulate", [](const trees::octree& tree, const std::string& backend, const std::string& tasks,
                         const std::string& mode, const std::string& push_policy, int blocks, int threads,
                         std::int32_t queue_capacity, double deadline_ms) {
    const auto scheduler = scheduler_options_from(mode, push_policy, blocks, threads, queue_capacity, deadline_ms);
    require_backend(backend);
    const trees::pass_backend b = *trees::parse_pass_backend(backend);
    trees::pass_tasks kind = trees::default_pass_tasks(b);
    if (tasks != "auto") {
      const auto t = trees::parse_pass_tasks(tasks);
      if (!t) throw trees::input_error("tasks", "unknown task kind '" + tasks + "' (auto, node, twig, bucket)");
      kind = *t;
    }
    pass_report report;
    std::vector<trees::multipole<float>> payloads;
    {
      nb::gil_scoped_release unlocked;
      trees::upward_options o;
      o.backend = b;
      o.tasks = kind;
      o.scheduler = scheduler;
      trees::upward_runner pass(tree, o);
      const bool gpu = b == trees::pass_backend::gpu;
      if (gpu) throw_if_failed(pass.run(), backend);
      const trees::timed_run t = pass.run_timed();
      throw_if_failed(t.result, backend);
      if (gpu) {
        pass.poison();
        throw_if_failed(pass.run(), backend);
      }
      payloads = pass.download();
      report = {backend, std::string(trees::to_string(kind)), pass.describe(), t.elapsed_us};
    }
    return nb::make_tuple(owned_records(std::move(payloads)), report);
  }, nb::arg("tree"), nb::arg("backend"), nb::arg("tasks"), CANOPY_PY_SCHEDULER_ARGS);

  nb::class_<trees::quantity_error>(m, "QuantityError", "The worst normalised error of one quantity (reference.hpp)")
      .def_ro("worst", &trees::quantity_error::worst)
      .def_ro("node", &trees::quantity_error::node)
      .def_ro("bound", &trees::quantity_error::bound)
      .def_prop_ro("within", &trees::quantity_error::within)
      .def("__repr__", [](const trees::quantity_error& q) {
        return "QuantityError(worst=" + std::to_string(q.worst) + ", node=" + std::to_string(q.node) +
               ", bound=" + std::to_string(q.bound) + ")";
      });
  nb::class_<trees::comparison>(m, "Comparison", "compare_payloads' result (reference.hpp)")
      .def_ro("counts_match", &trees::comparison::counts_match)
      .def_ro("first_count_mismatch", &trees::comparison::first_count_mismatch)
      .def_ro("mass", &trees::comparison::mass)
      .def_ro("com", &trees::comparison::com)
      .def_ro("m2", &trees::comparison::m2)
      .def_ro("bbox", &trees::comparison::bbox)
      .def_ro("within_tolerance", &trees::comparison::within_tolerance)
      .def_ro("bounds_meaningful", &trees::comparison::bounds_meaningful)
      .def("summary", &trees::comparison::summary)
      .def("__bool__", [](const trees::comparison& c) { return c.within_tolerance; })
      .def("__repr__", [](const trees::comparison& c) { return "<canopy.Comparison " + c.summary() + ">"; });

  m.def("compare", [](const trees::octree& tree, const records_in& computed, bool computed_double,
                      const records_in& reference, bool blocked_leaves) {
    const auto ref = records_of<double>(reference, "compare: reference");
    const auto leaves = blocked_leaves ? trees::leaf_summation::blocked : trees::leaf_summation::sequential;
    nb::gil_scoped_release unlocked;
    if (computed_double)
      return trees::compare_payloads<double>(tree, records_of<double>(computed, "compare: moments"), ref, leaves);
    return trees::compare_payloads<float>(tree, records_of<float>(computed, "compare: moments"), ref, leaves);
  }, nb::arg("tree"), nb::arg("computed"), nb::arg("computed_double"), nb::arg("reference"),
     nb::arg("blocked_leaves") = false);
}

}  // namespace canopy::python
