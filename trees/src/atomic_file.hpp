// Internal: write a file under a temporary name in the same folder, then rename it into place.
// rename() within one file system is atomic, so readers see either the old file or the complete
// new one, and a failure (full disk, exception while formatting) leaves no half-written file.
#pragma once

#include <filesystem>
#include <functional>
#include <ostream>

namespace canopy::trees::detail {

// Calls write(stream) on a binary std::ofstream for a temporary sibling of `path`, checks the
// stream, and renames. Throws std::filesystem::filesystem_error; the temporary is removed on any
// failure, including an exception from `write`.
void write_file_atomically(const std::filesystem::path& path, const std::function<void(std::ostream&)>& write);

}  // namespace canopy::trees::detail
