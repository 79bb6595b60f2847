// Shared between backends.cpp and backends_gpu.cu.
#pragma once

#include <string>

#include "backends.hpp"
#include "canopy/scheduler_options.hpp"
#include "canopy/status.hpp"

namespace canopy::tool {

canopy::scheduler_options to_scheduler_options(const backend_options& o);
void throw_if_failed(const canopy::run_result& r, const std::string& backend);
/// True for twig tasks (--tasks twig, or auto on the gpu backend), false for node tasks; throws
/// std::invalid_argument for anything else.
bool twig_tasks(const backend_options& o, bool gpu);  // --tasks, with auto resolved for the backend
backend_result run_gpu(const canopy::trees::octree& tree, const backend_options& options);

}  // namespace canopy::tool
