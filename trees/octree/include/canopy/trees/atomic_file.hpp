// SPDX-License-Identifier: Apache-2.0
// Write an output file so that a failure never leaves half of it: a regular file is written under
// a temporary name in the same folder, then renamed into place. rename() within one file system is
// atomic, so readers see either the old file or the complete new one, and a failure (full disk,
// exception while formatting, SIGINT in the tool) leaves no half-written file.
// Shared by the point files, the DOT export (canopy::dags) and the tool's output files.
//
// What `path` may be (docs/RELIABILITY.md, "Output files"):
//  * missing, or a regular file: temporary + rename. A replaced file keeps its permission bits
//    (0600 stays 0600) and, when the writer is root, its owner and group. The name given gets a
//    new file: another hard link to the old one keeps the old contents.
//  * a write-protected regular file (one the writer could not open for writing, or, for root, one
//    with no write permission bit at all, mode 0444): refused with filesystem_error (EACCES), as
//    `cp` without -f refuses it; nothing is written. Replacing it used to be silent.
//  * a symbolic link: followed (chains too, at most 40 links), and the file it points to is
//    created or replaced as above; the link itself stays.
//  * a character device or a FIFO (/dev/null, /dev/stdout, a named pipe), directly or through a
//    link: opened and written in place, as a shell's `>` does (a FIFO waits for its reader); never
//    renamed over.
//  * a directory: std::filesystem::filesystem_error (EISDIR); a block device, a socket or anything
//    else: input_error. Nothing is written.
// Every error names `path`, the caller's name, never the temporary's.
#pragma once

#include <filesystem>
#include <functional>
#include <ostream>

namespace canopy::trees {

// Calls write(stream) on a binary stream for `path` as described above and checks the stream.
// Throws std::filesystem::filesystem_error (path1() is `path`; the temporary is removed on any
// failure, including an exception from `write`) or input_error (a file type it will not write).
void write_file_atomically(const std::filesystem::path& path, const std::function<void(std::ostream&)>& write);

// Whether write_file_atomically would refuse the existing regular file `path` (through links) as
// write-protected: the writer may not write it (access(W_OK), effective ids), or the writer is
// root and no write permission bit is set. False for a missing file and for anything else.
bool is_write_protected(const std::filesystem::path& path);

// The temporary name write_file_atomically uses for a regular file `path`:
// "<name>.canopy-incomplete.<pid>.<n>" beside it, <name> shortened when the whole name would be
// longer than the folder allows (NAME_MAX), so that a user who finds one (after a SIGKILL, say)
// knows what it is.
std::filesystem::path temporary_name_for(const std::filesystem::path& path);

// The marker every temporary name contains (".canopy-incomplete.").
inline constexpr const char* temporary_marker = ".canopy-incomplete.";

// A temporary file of the caller's own (a JSON handed to a plotting script): registered like the
// temporaries above, so that remove_temporary_files() removes it on a signal, and removed when
// the object is destroyed. Holds only the name; the caller creates the file.
class scoped_temporary_file {
 public:
  explicit scoped_temporary_file(std::filesystem::path path);
  ~scoped_temporary_file();
  scoped_temporary_file(const scoped_temporary_file&) = delete;
  scoped_temporary_file& operator=(const scoped_temporary_file&) = delete;
  const std::filesystem::path& path() const noexcept { return path_; }

 private:
  std::filesystem::path path_;
  int slot_ = -1;
};

// Removes the temporary files of the writes in progress in this process, and those of the
// scoped_temporary_file objects alive. Async-signal-safe (it
// only reads a fixed table and calls unlink): a SIGINT/SIGTERM handler calls it before it ends
// the process (the `canopy` tool does).
void remove_temporary_files() noexcept;

}  // namespace canopy::trees
