// SPDX-License-Identifier: Apache-2.0
#include <canopy/trees/atomic_file.hpp>

#include <atomic>
#include <cerrno>
#include <fstream>
#include <string>
#include <system_error>

#include <unistd.h>

namespace canopy::trees {

namespace {

std::filesystem::path temporary_sibling(const std::filesystem::path& path) {
  // pid + a process-wide counter: unique among concurrent writers of the same folder, including
  // threads of this process writing the same target.
  static std::atomic<unsigned long> counter{0};
  std::filesystem::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1, std::memory_order_relaxed));
  return tmp;
}

[[noreturn]] void fail(const std::string& what, const std::filesystem::path& path, int err) {
  throw std::filesystem::filesystem_error(what, path, std::error_code(err != 0 ? err : EIO, std::generic_category()));
}

}  // namespace

void write_file_atomically(const std::filesystem::path& path, const std::function<void(std::ostream&)>& write) {
  const std::filesystem::path tmp = temporary_sibling(path);
  try {
    {
      errno = 0;
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      if (!out) fail("cannot create temporary file", tmp, errno);
      write(out);
      out.flush();
      if (!out) fail("write failed", tmp, errno);
      out.close();
      if (!out) fail("close failed", tmp, errno);
    }
    std::filesystem::rename(tmp, path);
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw;
  }
}

}  // namespace canopy::trees
