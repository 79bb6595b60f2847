// SPDX-License-Identifier: Apache-2.0
#include "common.hpp"


#include <charconv>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <limits>
#include <optional>
#include <string_view>
#include <system_error>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "canopy/trees/atomic_file.hpp"
#include "canopy/trees/generators.hpp"
#include "canopy/trees/point_io.hpp"

namespace canopy::tool {

namespace trees = canopy::trees;

const char* const input_help =
    "points file (Canopy binary or CSV, Tipsy, Gadget-1/2, PLY or NumPy .npy, told apart by its content), "
    "or a generator spec: "
    "gen:uniform|plummer|clusters:N[:SEED] or gen:lattice:DEPTH:PER_LEAF[:SEED] (SEED defaults to 1)";

void add_point_options(CLI::App& command, point_options& options) {
  command.add_option("--family", options.family, "Tipsy input: read only gas, dark or star particles")
      ->check(CLI::IsMember({"all", "gas", "dark", "star"}))
      ->capture_default_str();
  command.add_option("--type", options.type, "Gadget input: read only particle type N (0..5)")
      ->check(CLI::IsMember({"all", "0", "1", "2", "3", "4", "5"}))
      ->capture_default_str();
}

void add_tree_options(CLI::App& command, tree_options& options) {
  add_point_options(command, options.points);
  command.add_option("--max-leaf", options.max_leaf, "split a cell holding more points than this")
      ->check(CLI::Range(1, std::numeric_limits<int>::max()))
      ->capture_default_str();
  command.add_option("--max-depth", options.max_depth, "deepest level (root is 0); Morton codes allow 21")
      ->check(CLI::Range(0, 21))
      ->capture_default_str();
}

void add_seed_option(CLI::App& command, std::uint64_t& seed, const std::string& help) {
  command.add_option("--seed", seed, help)
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            std::uint64_t value{};
            const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
            if (ec == std::errc{} && end == text.data() + text.size()) return {};
            return fmt::format("SEED must be an integer in [0, {}], not {}", std::numeric_limits<std::uint64_t>::max(),
                               trees::quoted_bytes(text));
          },
          "SEED"))
      ->capture_default_str();
}

namespace {

constexpr std::string_view generator_prefix = "gen:";

struct generator_spec {
  trees::distribution dist{};
  std::int64_t n = 0;  // points (or, for lattice, the depth)
  std::int64_t per_leaf = 0;
  std::uint64_t seed = 1;
};

template <class Int>
Int parse_number(const std::string& spec, std::string_view field, std::string_view what, Int lo, Int hi) {
  Int value{};
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
  if (ec != std::errc{} || end != field.data() + field.size() || value < lo || value > hi)
    throw usage_error(spec,
                      fmt::format("{} must be an integer in [{}, {}], not {}", what, lo, hi, trees::quoted_bytes(field)));
  return value;
}

generator_spec parse_generator_spec(const std::string& spec) {
  const auto parts = canopy::bench::split(std::string_view(spec).substr(generator_prefix.size()), ':');
  if (parts.empty() || parts[0].empty())
    throw usage_error(spec, "a generator spec is gen:DIST:N[:SEED] or gen:lattice:DEPTH:PER_LEAF[:SEED]");
  generator_spec g;
  g.dist = trees::parse_distribution(parts[0]);  // throws input_error naming the distribution
  constexpr std::int64_t max_points = std::numeric_limits<std::int32_t>::max();
  std::size_t next = 2;
  if (g.dist == trees::distribution::lattice) {
    if (parts.size() < 3 || parts.size() > 4)
      throw usage_error(spec, "a lattice spec is gen:lattice:DEPTH:PER_LEAF[:SEED]");
    g.n = parse_number<std::int64_t>(spec, parts[1], "DEPTH", 0, 21);
    g.per_leaf = parse_number<std::int64_t>(spec, parts[2], "PER_LEAF", 1, max_points);
    next = 3;
  } else {
    if (parts.size() < 2 || parts.size() > 3) throw usage_error(spec, "a generator spec is gen:DIST:N[:SEED]");
    g.n = parse_number<std::int64_t>(spec, parts[1], "N", 0, max_points);
  }
  if (parts.size() > next)
    g.seed = parse_number<std::uint64_t>(spec, parts[next], "SEED", 0, std::numeric_limits<std::uint64_t>::max());
  return g;
}

bool is_generator_spec(const std::string& spec) { return spec.starts_with(generator_prefix); }

// --family/--type choose particles of a file; for a generator they would silently do nothing.
void check_no_point_options(const std::string& spec, const point_options& options) {
  if (options.family != "all") throw usage_error("--family", "applies to Tipsy files, not to " + spec);
  if (options.type != "all") throw usage_error("--type", "applies to Gadget files, not to " + spec);
}

// A clear message for a missing or unreadable file before the readers see it.
void check_readable(const std::string& file) {
  std::error_code ec;
  const auto st = std::filesystem::status(file, ec);
  if (st.type() == std::filesystem::file_type::not_found) throw usage_error(file, "no such file");
  // A name too long, a loop of links, a folder we may not enter: say which, not "no such file".
  if (ec) throw usage_error(file, ec.message());
  if (std::filesystem::is_directory(st)) throw usage_error(file, "is a directory, not a points file");
}

}  // namespace

std::vector<trees::point> load_points(const std::string& spec, const point_options& options) {
  stage t;
  if (!is_generator_spec(spec)) {
    check_readable(spec);
    trees::read_options read;
    read.family = trees::parse_tipsy_family(options.family);
    read.gadget_type = options.type == "all" ? -1 : options.type[0] - '0';  // checked by add_point_options
    auto points = trees::read_points(spec, read);
    t.done(fmt::format("read {} points from {} ({})", grouped(static_cast<long long>(points.size())), spec,
                       trees::to_string(trees::detect_point_format(spec))));
    return points;
  }
  check_no_point_options(spec, options);
  const auto g = parse_generator_spec(spec);
  std::vector<trees::point> points;
  switch (g.dist) {
    case trees::distribution::uniform: points = trees::generate_uniform(static_cast<std::size_t>(g.n), g.seed); break;
    case trees::distribution::plummer: points = trees::generate_plummer(static_cast<std::size_t>(g.n), g.seed); break;
    case trees::distribution::clusters: points = trees::generate_clusters(static_cast<std::size_t>(g.n), g.seed); break;
    case trees::distribution::lattice:
      points = trees::generate_lattice(static_cast<int>(g.n), static_cast<int>(g.per_leaf), g.seed);
      break;
  }
  t.done(fmt::format("generated {} points ({})", grouped(static_cast<long long>(points.size())), spec));
  return points;
}

std::optional<std::vector<trees::point>> load_points_part(const std::string& spec, const point_options& options,
                                                          std::size_t part, std::size_t parts) {
  stage t;
  if (!is_generator_spec(spec)) {
    check_readable(spec);
    if (trees::detect_point_format(spec) != trees::point_format::binary) return std::nullopt;
    check_no_point_options(spec, options);  // --family/--type do not apply to Canopy binary files
    std::uint64_t total = 0;
    auto points = trees::read_points_binary_part(spec, part, parts, &total);
    t.done(fmt::format("read {} of the {} points of {} (part {} of {})", grouped(static_cast<long long>(points.size())),
                       grouped(static_cast<long long>(total)), spec, part + 1, parts));
    return points;
  }
  check_no_point_options(spec, options);
  const auto g = parse_generator_spec(spec);
  if (g.dist == trees::distribution::lattice)
    throw usage_error(spec, "a lattice spec builds one complete octree in place, on one process: under mpiexec give "
                            "gen:uniform|plummer|clusters:N or a points file");
  const auto n = static_cast<std::size_t>(g.n);
  auto points = trees::generate_slice(g.dist, n, g.seed, trees::part_begin(n, part, parts),
                                      trees::part_begin(n, part + 1, parts));
  t.done(fmt::format("generated {} of the {} points of {} (part {} of {})", grouped(static_cast<long long>(points.size())),
                     grouped(static_cast<long long>(n)), spec, part + 1, parts));
  return points;
}

loaded_tree load_tree(const std::string& spec, const tree_options& options) {
  loaded_tree r;
  if (is_generator_spec(spec)) {
    check_no_point_options(spec, options.points);
    const auto g = parse_generator_spec(spec);
    if (g.dist == trees::distribution::lattice) {
      stage t;
      r.tree = trees::build_complete_octree(static_cast<int>(g.n), static_cast<int>(g.per_leaf), g.seed);
      r.build_ms = t.elapsed_ms();
      r.complete = true;
      t.done(fmt::format("built complete octree of depth {}: {} nodes, {} points", r.tree.depth,
                         grouped(r.tree.node_count()), grouped(static_cast<long long>(r.tree.points.size()))));
      return r;
    }
  }
  stage read;
  const auto points = load_points(spec, options.points);
  r.load_ms = read.elapsed_ms();
  stage t;
  r.tree = trees::build_octree(points, trees::build_options{options.max_leaf, options.max_depth});
  r.build_ms = t.elapsed_ms();
  t.done(fmt::format("built octree: depth {}, {} nodes, {} leaves", r.tree.depth, grouped(r.tree.node_count()),
                     grouped(static_cast<long long>(r.tree.leaves.size()))));
  return r;
}

void stage::done(const std::string& what) const { spdlog::info("{} ({:.1f} ms)", what, elapsed_ms()); }

void check_output_path(const std::string& subject, const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  if (path.empty()) throw usage_error("output file", "the name is empty");
  // Not standard output (the tool's outputs are binary files or are named on purpose); a file named
  // "-" used to be written. /dev/stdout writes to stdout, through a pipe or a terminal.
  if (path == "-")
    throw usage_error(subject, "'-' is not standard output here: give /dev/stdout for that, or ./- for a file named '-'");
  const auto dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw usage_error(subject, "directory does not exist");
  const long name_max = ::pathconf(dir.c_str(), _PC_NAME_MAX);
  if (name_max > 0 && path.filename().native().size() > static_cast<std::size_t>(name_max))
    throw usage_error(subject, fmt::format("the file name is {} bytes, longer than the {} its folder allows",
                                           path.filename().native().size(), name_max));
  const auto st = fs::status(path, ec);  // through links: what would be written
  if (ec && st.type() != fs::file_type::not_found) throw usage_error(subject, ec.message());
  if (fs::is_directory(st)) throw usage_error(subject, "is a directory");
  if (fs::exists(st) && !fs::is_regular_file(st) && !fs::is_character_file(st) && !fs::is_fifo(st))
    throw usage_error(subject, "not a regular file, character device or FIFO: not written");
  if (trees::is_write_protected(path)) {
    struct stat file {};
    ::stat(path.c_str(), &file);
    throw usage_error(subject, fmt::format("the file is write-protected (mode {:04o}): not replaced; make it writable "
                                           "(chmod u+w) or remove it first",
                                           file.st_mode & 07777));
  }
}

namespace {

// What an output would write: the file's device and inode when it exists, else the canonical path
// it would be created at (dangling links followed); nothing for a character device, which takes
// any number of outputs (/dev/null, a terminal).
std::optional<std::string> output_identity(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISCHR(st.st_mode)) return std::nullopt;
    return fmt::format("inode {}:{}", st.st_dev, st.st_ino);
  }
  fs::path p = path;
  std::error_code ec;
  for (int hops = 0; hops < 40 && fs::is_symlink(fs::symlink_status(p, ec)); ++hops) {
    const fs::path next = fs::read_symlink(p, ec);
    if (ec) break;
    p = next.is_absolute() ? next : p.parent_path() / next;
  }
  const fs::path where = fs::weakly_canonical(fs::absolute(p, ec), ec);
  return "path " + (ec ? p.lexically_normal() : where).string();
}

}  // namespace

void check_distinct_outputs(const std::vector<std::pair<std::string, std::filesystem::path>>& outputs) {
  std::vector<std::optional<std::string>> ids;
  for (const auto& [subject, path] : outputs) ids.push_back(path.empty() ? std::nullopt : output_identity(path));
  for (std::size_t i = 0; i < outputs.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (ids[i] && ids[j] && *ids[i] == *ids[j])
        throw usage_error(outputs[i].first, fmt::format("names the same file as {}: each output needs its own file",
                                                        outputs[j].first));
}

void write_file_atomically(const std::filesystem::path& path, const std::function<void(std::ostream&)>& write) {
  // Checked first so that the user reads which argument is wrong, not the temporary file's name.
  check_output_path(path.string(), path);
  canopy::trees::write_file_atomically(path, write);
}

// --- the process's streams and signals (main.cpp) ------------------------------------------------

namespace {

extern "C" void remove_temporaries_and_die(int sig) {
  canopy::trees::remove_temporary_files();  // async-signal-safe
  // SA_RESETHAND restored the default action; the signal is blocked until this handler returns,
  // then ends the process with it (a shell sees 128 + sig).
  ::raise(sig);
}

}  // namespace

void remove_temporaries_on_signals() {
  struct sigaction action {};
  action.sa_handler = remove_temporaries_and_die;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND;
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler == SIG_IGN) continue;  // nohup, `&` keep ignoring
    ::sigaction(sig, &action, nullptr);
  }
}

void reserve_standard_streams() {
  // A closed descriptor 0, 1 or 2 would be reused by the next open(), and progress lines or results
  // would land in an output file. Read-only /dev/null holds the number: writing to it fails with
  // EBADF, as writing to the closed descriptor would have (check_standard_output reports it).
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    const int held = ::open("/dev/null", O_RDONLY);
    if (held >= 0 && held != fd) {
      ::dup2(held, fd);
      ::close(held);
    }
  }
}

std::FILE* summary_stream(const std::filesystem::path& output) {
  struct stat out {}, file {};
  const bool same = ::fstat(STDOUT_FILENO, &out) == 0 && ::stat(output.c_str(), &file) == 0 &&
                    out.st_dev == file.st_dev && out.st_ino == file.st_ino;
  return same ? stderr : stdout;
}

namespace {
int first_stdout_errno = 0;  // of the first flush that failed (flush_standard_output)
}  // namespace

bool flush_standard_output() {
  errno = 0;
  std::cout.flush();
  const bool flushed = std::fflush(stdout) == 0;
  if (!flushed && first_stdout_errno == 0) first_stdout_errno = errno;
  return flushed && std::ferror(stdout) == 0 && std::cout;
}

int check_standard_output(int code) {
  if (flush_standard_output()) return code;
  int err = first_stdout_errno;
  // A write that failed earlier (a buffer that filled up, a flush of the library's) left no errno
  // behind: a write of no bytes asks the descriptor again (/dev/full: ENOSPC, a closed stdout:
  // EBADF). "Input/output error", which nothing had said, was the guess here before.
  if (err == 0 && ::write(STDOUT_FILENO, "", 0) < 0) err = errno;
  const std::string reason = err != 0 ? std::strerror(err) : "a write failed";
  std::fputs(fmt::format("canopy: error: standard output: {}\n", reason).c_str(), stderr);
  return exit_failed;
}

}  // namespace canopy::tool
