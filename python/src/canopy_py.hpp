// SPDX-License-Identifier: Apache-2.0
// What the binding's source files share: the bind_* entry points (one file per concept), the
// options every scheduler backend takes, and NumPy arrays that own C++ vectors without a copy.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "canopy/scheduler_options.hpp"
#include "canopy/status.hpp"

namespace canopy::python {

namespace nb = nanobind;

void bind_errors(nb::module_& m);
void bind_points(nb::module_& m);
void bind_passes(nb::module_& m);
void bind_dags(nb::module_& m);
void bind_device(nb::module_& m);  // GPU builds only; does nothing otherwise

/// A run that ended with a status other than ok: becomes canopy.RunError with .status and .task.
class run_failure : public std::runtime_error {
 public:
  run_failure(const std::string& backend, const canopy::run_result& r);
  const canopy::run_result& result() const noexcept { return result_; }

 private:
  canopy::run_result result_;
};

/// The gpu backend was asked for where there is none (not built, or no device): becomes
/// canopy.BackendUnavailableError.
class backend_unavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A graph the scheduler cannot run (task_graph::from_edges refused it: a cycle, a self-loop, a
/// duplicate edge, a task out of range; the message names the tasks): becomes canopy.GraphError.
class graph_rejected : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Throws run_failure when `r` failed.
void throw_if_failed(const canopy::run_result& r, const std::string& backend);

/// "cpu" or "gpu" checked against what this build and machine have; throws backend_unavailable.
void require_backend(const std::string& backend);

/// The scheduler options from their Python keyword arguments (names as the tool's options); a bad
/// name or value throws trees::input_error naming the argument.
canopy::scheduler_options scheduler_options_from(const std::string& mode, const std::string& push_policy, int blocks,
                                                 int threads, std::int32_t queue_capacity, double deadline_ms);

/// The keyword arguments of scheduler_options_from, in one place for every binding that takes them.
#define CANOPY_PY_SCHEDULER_ARGS                                                                          \
  nb::arg("mode") = "continuation", nb::arg("push_policy") = "round-robin", nb::arg("blocks") = 0,         \
      nb::arg("threads") = 128, nb::arg("queue_capacity") = 0, nb::arg("deadline_ms") = 10000.0

/// A NumPy array over `values`, which the array then owns (moved into a capsule: no copy).
/// `shape` must describe values.size() elements of `Scalar` (values' bytes reinterpreted).
template <class Scalar, class T>
nb::ndarray<nb::numpy, Scalar> owned_array(std::vector<T>&& values, std::initializer_list<std::size_t> shape) {
  auto* owned = new std::vector<T>(std::move(values));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::ndarray<nb::numpy, Scalar>(reinterpret_cast<Scalar*>(owned->data()), shape, owner);
}

/// A vector of trivially copyable records as an (n, sizeof(T)) uint8 array that owns them; the
/// Python layer views it with the record's structured dtype.
template <class T>
nb::ndarray<nb::numpy, std::uint8_t> owned_records(std::vector<T>&& values) {
  const std::size_t n = values.size();
  return owned_array<std::uint8_t>(std::move(values), {n, sizeof(T)});
}

}  // namespace canopy::python
