// TEMPORARY stand-in until the scheduler work replaces this file with the real backends.
#include "backends.hpp"

#include <stdexcept>

namespace canopy::tool {

bool gpu_available() { return false; }

backend_result run_backend(const canopy::trees::octree&, const backend_options& options) {
  throw std::runtime_error("backend '" + options.backend + "' is not built yet");
}

}  // namespace canopy::tool
