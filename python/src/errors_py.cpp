// SPDX-License-Identifier: Apache-2.0
// C++ exceptions -> the Python classes of canopy/errors.py, with the attributes a caller tests
// (source and problem of bad input, the node of a broken invariant, the tasks of a bad graph, the
// status and task of a failed run). Also the option parsing every scheduler binding shares.
#include <chrono>
#include <cmath>
#include <exception>
#include <filesystem>
#include <string>

#include "canopy/cuda/device.hpp"
#include "canopy/cuda/error.hpp"
#include "canopy/mode.hpp"
#include "canopy/passes/upward_runner.hpp"
#include "canopy/push_policy.hpp"
#include "canopy/trees/errors.hpp"
#include "canopy_py.hpp"

namespace canopy::python {

namespace {

namespace trees = canopy::trees;

// Sets the Python error to canopy.errors.<name>(message, **attributes). The classes live in Python
// so that they can be documented, caught and subclassed there; the module is imported lazily
// (it is imported already whenever `canopy` is).
void raise_as(const char* name, const char* message, nb::kwargs attributes = {}) {
  nb::object cls;
  try {
    cls = nb::module_::import_("canopy.errors").attr(name);
  } catch (const nb::python_error&) {
    PyErr_SetString(PyExc_RuntimeError, message);  // the extension used without its package
    return;
  }
  nb::object instance = cls(message, **attributes);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(instance.ptr())), instance.ptr());
}

const char* graph_kind_name(trees::graph_error::kind k) {
  switch (k) {
    case trees::graph_error::kind::cycle: return "cycle";
    case trees::graph_error::kind::multiple_parents: return "multiple_parents";
    case trees::graph_error::kind::multiple_roots: return "multiple_roots";
  }
  return "unknown";
}

void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const trees::input_error& e) {
    nb::kwargs a;
    a["source"] = e.source();
    a["problem"] = e.problem();
    raise_as("InputError", e.what(), a);
  } catch (const trees::invariant_error& e) {
    nb::kwargs a;
    a["node"] = e.node();
    raise_as("InvariantError", e.what(), a);
  } catch (const trees::graph_error& e) {
    nb::kwargs a;
    nb::list tasks;
    for (const std::size_t t : e.nodes()) tasks.append(t);
    a["tasks"] = tasks;
    a["kind"] = graph_kind_name(e.problem());
    raise_as("GraphError", e.what(), a);
  } catch (const run_failure& e) {
    nb::kwargs a;
    a["status"] = std::string(canopy::to_string(e.result().code));
    a["task"] = e.result().task;
    raise_as("RunError", e.what(), a);
  } catch (const graph_rejected& e) {
    nb::kwargs a;
    a["tasks"] = nb::list();
    a["kind"] = "rejected";
    raise_as("GraphError", e.what(), a);
  } catch (const backend_unavailable& e) {
    raise_as("BackendUnavailableError", e.what());
  } catch (const std::filesystem::filesystem_error& e) {
    // A writer's I/O failure (a directory in the way, a full disk): Python's own OSError, whose
    // constructor picks the subclass (IsADirectoryError, PermissionError, ...) from errno.
    const nb::object error = nb::borrow(PyExc_OSError)(e.code().value(), e.code().message(), e.path1().string());
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
  } catch (const canopy::error& e) {
    // Thrown before a run: bad options or graph (invalid_argument), or a CUDA failure
    // (cuda_error, device_error).
    nb::kwargs a;
    a["status"] = std::string(canopy::to_string(e.code()));
    a["task"] = canopy::no_task;
    raise_as(e.code() == canopy::status::invalid_argument ? "OptionError" : "RunError", e.what(), a);
  }
}

}  // namespace

run_failure::run_failure(const std::string& backend, const canopy::run_result& r)
    : std::runtime_error(backend + " backend: " + std::string(canopy::to_string(r.code)) + ": " + r.message), result_(r) {}

void throw_if_failed(const canopy::run_result& r, const std::string& backend) {
  if (!r.ok()) throw run_failure(backend, r);
}

void require_backend(const std::string& backend) {
  if (backend == "cpu") return;
  if (backend != "gpu") throw trees::input_error("backend", "unknown backend '" + backend + "' (reference, cpu, gpu)");
  if (!trees::gpu_pass_built())
    throw backend_unavailable("gpu backend: this canopy module was built without CUDA support (CANOPY_GPU=OFF)");
  if (!canopy::gpu_available()) throw backend_unavailable("gpu backend: no CUDA device is available (use backend='cpu')");
}

canopy::scheduler_options scheduler_options_from(const std::string& mode, const std::string& push_policy, int blocks,
                                                 int threads, std::int32_t queue_capacity, double deadline_ms) {
  canopy::scheduler_options o;
  const auto m = canopy::parse_mode(mode);
  if (!m) {
    std::string names;
    for (const auto& row : canopy::mode_table) names += (names.empty() ? "" : ", ") + std::string(row.name);
    throw trees::input_error("mode", "unknown scheduler mode '" + mode + "' (" + names + ")");
  }
  o.mode = *m;
  const auto policy = canopy::parse_push_policy(push_policy);
  if (!policy) {
    std::string names;
    for (const auto& row : canopy::push_policy_table) names += (names.empty() ? "" : ", ") + std::string(row.name);
    throw trees::input_error("push_policy", "unknown push policy '" + push_policy + "' (" + names + ")");
  }
  o.policy = *policy;
  if (blocks < 0) throw trees::input_error("blocks", "must be >= 0 (0: one worker per core, or a full GPU), not " + std::to_string(blocks));
  o.blocks = blocks;
  o.threads_per_block = threads;
  if (queue_capacity < 0) throw trees::input_error("queue_capacity", "must be >= 0 (0: the task count)");
  o.global_queue_capacity = queue_capacity;
  if (!std::isfinite(deadline_ms) || deadline_ms < 1)
    throw trees::input_error("deadline_ms", "must be a finite number of milliseconds >= 1");
  // As the tool's --deadline-ms: at most 1e12 (1e300 overflowed the 64-bit count into a negative
  // deadline, "deadline must be positive"), and a fraction rounds up.
  if (deadline_ms > 1e12) throw trees::input_error("deadline_ms", "must be at most 1e12 ms (about 31 years)");
  o.deadline = std::chrono::milliseconds(static_cast<long long>(std::ceil(deadline_ms)));
  return o;
}

void bind_errors(nb::module_& m) {
  nb::register_exception_translator(translate);
  m.def("gpu_available", [] { return trees::gpu_pass_built() && canopy::gpu_available(); },
        "True when this module has the gpu backend and a CUDA device is usable");
  m.def("modes", [] {
    nb::list out;
    for (const auto& row : canopy::mode_table) out.append(nb::make_tuple(std::string(row.name), std::string(row.summary)));
    return out;
  }, "(name, summary) of every scheduler mode, in the table's order (canopy::mode_table)");
  m.def("push_policies", [] {
    nb::list out;
    for (const auto& row : canopy::push_policy_table)
      out.append(nb::make_tuple(std::string(row.name), std::string(row.summary)));
    return out;
  }, "(name, summary) of every push policy (canopy::push_policy_table)");
  // Checked here so that a bad name fails before a tree is built.
  m.def("check_scheduler_options", [](const std::string& mode, const std::string& push_policy, int blocks, int threads,
                                      std::int32_t queue_capacity, double deadline_ms) {
    (void)scheduler_options_from(mode, push_policy, blocks, threads, queue_capacity, deadline_ms);
  }, CANOPY_PY_SCHEDULER_ARGS);
}

}  // namespace canopy::python
