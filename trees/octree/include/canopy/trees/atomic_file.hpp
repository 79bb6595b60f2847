// SPDX-License-Identifier: Apache-2.0
// Write a file under a temporary name in the same folder, then rename it into place.
// rename() within one file system is atomic, so readers see either the old file or the complete
// new one, and a failure (full disk, exception while formatting) leaves no half-written file.
// Shared by the point files, the DOT export (canopy::dags) and the tool's output files.
#pragma once

#include <filesystem>
#include <functional>
#include <ostream>

namespace canopy::trees {

// Calls write(stream) on a binary std::ofstream for a temporary sibling of `path`, checks the
// stream, and renames. Throws std::filesystem::filesystem_error; the temporary is removed on any
// failure, including an exception from `write`.
void write_file_atomically(const std::filesystem::path& path, const std::function<void(std::ostream&)>& write);

}  // namespace canopy::trees
