// SPDX-License-Identifier: Apache-2.0
// The extension module canopy._canopy. The public API is the package python/canopy/, which wraps
// these functions (argument checking, NumPy dtypes, logging); this file only assembles the parts,
// one source file per concept: errors, points and octrees, upward passes, DAGs, device arrays.
#include <string>

#include "canopy/passes/upward_runner.hpp"
#include "canopy_py.hpp"

NB_MODULE(_canopy, m) {
  namespace py = canopy::python;
  m.doc() = "Canopy's C++ core (use the `canopy` package, which wraps it)";
  m.attr("__version__") = CANOPY_PY_VERSION;
  // Compiled with CANOPY_GPU: the gpu backend, device arrays and the GPU DAG runner exist (a
  // device may still be missing at run time: gpu_available()).
  m.attr("built_with_gpu") = static_cast<bool>(CANOPY_PY_HAVE_GPU);
  py::bind_errors(m);
  py::bind_points(m);
  py::bind_passes(m);
  py::bind_dags(m);
  py::bind_device(m);
}
