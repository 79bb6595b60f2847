// SPDX-License-Identifier: Apache-2.0
#include <canopy/trees/atomic_file.hpp>
#include <canopy/trees/errors.hpp>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <string>
#include <system_error>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace canopy::trees {

namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail(const std::string& what, const fs::path& path, int err) {
  throw fs::filesystem_error(what, path, std::error_code(err != 0 ? err : EIO, std::generic_category()));
}

// The temporaries being written, for remove_temporary_files() in a signal handler: a fixed table
// of paths, each slot claimed and released through a lock-free atomic.
constexpr int pending_slots = 64;
enum slot_state : int { slot_free = 0, slot_filling = 1, slot_in_use = 2, slot_removing = 3 };
struct pending_slot {
  std::atomic<int> state{slot_free};
  char path[PATH_MAX];
};
static_assert(std::atomic<int>::is_always_lock_free, "remove_temporary_files must be async-signal-safe");
pending_slot pending[pending_slots];

// Claims a slot for `tmp`, or returns -1. A table that is full (64 writers at once) only loses the
// clean-up on a signal, never the write.
int register_temporary(const fs::path& tmp) {
  const std::string& s = tmp.native();
  if (s.size() >= PATH_MAX) return -1;
  for (int i = 0; i < pending_slots; ++i) {
    int expected = slot_free;
    if (pending[i].state.compare_exchange_strong(expected, slot_filling, std::memory_order_acquire)) {
      std::memcpy(pending[i].path, s.c_str(), s.size() + 1);
      pending[i].state.store(slot_in_use, std::memory_order_release);
      return i;
    }
  }
  return -1;
}

void release_temporary(int slot) {
  if (slot < 0) return;
  // Fails only when a signal handler is removing it: the process is ending; leave the slot.
  int expected = slot_in_use;
  pending[slot].state.compare_exchange_strong(expected, slot_free, std::memory_order_release);
}

// Registers a temporary for the lifetime of the object.
class pending_temporary {
 public:
  explicit pending_temporary(const fs::path& tmp) : slot_(register_temporary(tmp)) {}
  ~pending_temporary() { release_temporary(slot_); }
  pending_temporary(const pending_temporary&) = delete;
  pending_temporary& operator=(const pending_temporary&) = delete;

 private:
  int slot_ = -1;
};

// Where the bytes go: the file to create or replace through a temporary (`in_place` false), or a
// character device / FIFO to open and write (`in_place` true).
struct target {
  fs::path path;
  bool in_place = false;
  bool exists = false;
  struct stat st {};
};

// See is_write_protected. `st` is the file's own stat (links followed).
bool write_protected(const fs::path& file, const struct stat& st) {
  if (!S_ISREG(st.st_mode)) return false;
  if (::geteuid() == 0) return (st.st_mode & 0222) == 0;
  return ::faccessat(AT_FDCWD, file.c_str(), W_OK, AT_EACCESS) != 0 && (errno == EACCES || errno == EPERM);
}

constexpr int max_symlink_hops = 40;  // Linux's own limit (ELOOP)

target resolve(const fs::path& user) {
  if (user.empty()) throw input_error("output file", "the name is empty");
  fs::path p = user;
  for (int hops = 0;; ++hops) {
    target t;
    t.path = p;
    if (::lstat(p.c_str(), &t.st) != 0) {
      const int err = errno;
      if (err != ENOENT) fail("cannot look at the output file", user, err);
      if (!p.has_filename()) fail("no such directory", user, ENOENT);
      return t;  // a new file
    }
    t.exists = true;
    if (S_ISLNK(t.st.st_mode)) {
      // A device or FIFO behind links (/dev/stdout, /proc/self/fd/1 -> "pipe:[...]") is opened
      // through them: the kernel follows links that are not paths.
      struct stat behind {};
      if (::stat(p.c_str(), &behind) == 0 && (S_ISCHR(behind.st_mode) || S_ISFIFO(behind.st_mode))) {
        t.st = behind;
        t.in_place = true;
        return t;
      }
      if (hops == max_symlink_hops) fail("cannot follow the output file's links", user, ELOOP);
      std::error_code ec;
      const fs::path next = fs::read_symlink(p, ec);
      if (ec) fail("cannot read the output file's link", user, ec.value());
      p = next.is_absolute() ? next : p.parent_path() / next;
      continue;
    }
    if (S_ISREG(t.st.st_mode)) {
      // Renaming over it needs only the folder's permission: a file its owner made read-only
      // (chmod a-w) would be replaced silently. Refused as `cp` refuses it.
      if (write_protected(p, t.st)) fail("write-protected file: not replaced", user, EACCES);
      return t;
    }
    if (S_ISCHR(t.st.st_mode) || S_ISFIFO(t.st.st_mode)) {
      t.in_place = true;
      return t;
    }
    if (S_ISDIR(t.st.st_mode)) fail("is a directory", user, EISDIR);
    const char* kind = S_ISBLK(t.st.st_mode) ? "a block device" : S_ISSOCK(t.st.st_mode) ? "a socket" : "a special file";
    throw input_error(user.string(), std::string("is ") + kind + ", not a regular file, character device or FIFO: not written");
  }
}

void write_checked(std::ofstream& out, const fs::path& user, const std::function<void(std::ostream&)>& write) {
  write(out);
  out.flush();
  if (!out) fail("write failed", user, errno);
  out.close();
  if (!out) fail("close failed", user, errno);
}

// The replaced file's permission bits and, for root, its owner: set on the empty temporary, before
// any byte is written to it.
void keep_metadata(const fs::path& tmp, const fs::path& user, const struct stat& old) {
  if (::geteuid() == 0) (void)::chown(tmp.c_str(), old.st_uid, old.st_gid);  // best effort
  if (::chmod(tmp.c_str(), old.st_mode & 07777) != 0) fail("cannot set the permissions of the new file", user, errno);
}

}  // namespace

bool is_write_protected(const fs::path& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && write_protected(path, st);
}

fs::path temporary_name_for(const fs::path& path) {
  // pid + a process-wide counter: unique among concurrent writers of the same folder, including
  // threads of this process writing the same target.
  static std::atomic<unsigned long> counter{0};
  const std::string suffix = std::string(temporary_marker) + std::to_string(::getpid()) + "." +
                             std::to_string(counter.fetch_add(1, std::memory_order_relaxed));
  const fs::path dir = path.parent_path();
  long name_max = ::pathconf(dir.empty() ? "." : dir.c_str(), _PC_NAME_MAX);
  if (name_max <= 0) name_max = NAME_MAX;
  std::string name = path.filename().native();
  const auto room = static_cast<std::size_t>(name_max);
  if (name.size() + suffix.size() > room) name.resize(room > suffix.size() ? room - suffix.size() : 0);
  return dir / (name + suffix);
}

void write_file_atomically(const fs::path& path, const std::function<void(std::ostream&)>& write) {
  const target t = resolve(path);
  if (t.in_place) {
    // No rename over a device or a FIFO: write into it (O_TRUNC does nothing to either).
    errno = 0;
    std::ofstream out(t.path, std::ios::binary);
    if (!out) fail("cannot open for writing", path, errno);
    write_checked(out, path, write);
    return;
  }
  const fs::path tmp = temporary_name_for(t.path);
  const pending_temporary registered(tmp);  // before the file exists: a signal never misses it
  try {
    errno = 0;
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail("cannot create a temporary file beside the output file", path, errno);
    if (t.exists) keep_metadata(tmp, path, t.st);
    write_checked(out, path, write);
    std::error_code ec;
    fs::rename(tmp, t.path, ec);
    if (ec) fail("cannot rename the temporary file into place", path, ec.value());
  } catch (...) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw;
  }
}

scoped_temporary_file::scoped_temporary_file(fs::path path) : path_(std::move(path)), slot_(register_temporary(path_)) {}

scoped_temporary_file::~scoped_temporary_file() {
  std::error_code ignored;
  fs::remove(path_, ignored);
  release_temporary(slot_);
}

void remove_temporary_files() noexcept {
  for (auto& slot : pending) {
    int expected = slot_in_use;
    if (slot.state.compare_exchange_strong(expected, slot_removing, std::memory_order_acquire)) ::unlink(slot.path);
  }
}

}  // namespace canopy::trees
