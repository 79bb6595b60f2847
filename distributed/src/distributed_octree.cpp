// SPDX-License-Identifier: Apache-2.0
#include <canopy/distributed/distributed_octree.hpp>
#include <canopy/trees/morton.hpp>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>

namespace canopy::distributed {

namespace {

class stopwatch {
 public:
  double lap() {
    const auto now = std::chrono::steady_clock::now();
    const double s = std::chrono::duration<double>(now - last_).count();
    last_ = now;
    return s;
  }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

void require_host(const exchange& ex, const char* what) {
  if (ex.space() != memory_space::host) {
    throw std::logic_error(std::string(what) + ": the CPU path needs an exchange on host memory (mpi_exchange)");
  }
}

}  // namespace

trees::octree_ref host_ref(const trees::octree& t) {
  trees::octree_ref r;
  r.points = t.points.data();
  r.parent = t.parent.data();
  r.first_child = t.first_child.data();
  r.child_count = t.child_count.data();
  r.point_begin = t.point_begin.data();
  r.point_count = t.point_count.data();
  r.leaves = t.leaves.data();
  r.level_offset = t.level_offset.data();
  r.node_count = t.node_count();
  r.leaf_count = static_cast<std::int32_t>(t.leaves.size());
  r.point_total = static_cast<std::int32_t>(t.points.size());
  r.depth = t.depth;
  return r;
}

distributed_octree build_distributed_octree(const mpi_context& ctx, exchange& ex, std::span<const trees::point> points,
                                            const decomposition_options& options, phase_times* times) {
  require_host(ex, "build_distributed_octree");
  stopwatch clock;
  phase_times local_times;
  phase_times& pt = times != nullptr ? *times : local_times;
  distributed_octree d;

  // The options are checked on every rank alike (they are the same everywhere), before any
  // collective.
  ctx.phase("options", [&] {
    check_decomposition_options(options);
  });
  const trees::box cube = global_cube(ctx, ex, points);
  pt.extent = clock.lap();

  // This rank's points in Morton order over the global cube (stable: ties keep input order).
  std::vector<std::uint64_t> codes;
  std::vector<trees::point> sorted;
  ctx.phase("sort", [&] {
    if (points.size() > 0x7fffffffu) throw std::length_error("more than 2^31 - 1 points on one rank");
    const std::vector<std::uint64_t> raw = trees::morton_codes(points, cube);
    // (code, index) pairs sorted as one key: stable by construction, and contiguous in memory
    // (an index sort comparing through `raw` was 8x slower on 1M points).
    std::vector<std::pair<std::uint64_t, std::uint32_t>> order(points.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = {raw[i], static_cast<std::uint32_t>(i)};
    std::sort(order.begin(), order.end());
    codes.resize(points.size());
    sorted.resize(points.size());
    for (std::size_t i = 0; i < order.size(); ++i) {
      codes[i] = order[i].first;
      sorted[i] = points[order[i].second];
    }
  });
  pt.sort = clock.lap();
  d.top = build_global_tree(ctx, ex, cube, codes, options);
  pt.global_tree = clock.lap();

  std::vector<trees::point> mine = migrate(ctx, ex, d.top, sorted, codes);
  sorted = {};
  codes = {};
  pt.migrate = clock.lap();

  ctx.phase("build", [&] {
    trees::build_options b;
    b.max_leaf = options.max_leaf;
    b.max_depth = options.max_depth;
    b.cube = cube;
    d.local = trees::build_octree(mine, b);
    const trees::octree_ref ref = host_ref(d.local);
    const trees::morton_grid grid = trees::make_morton_grid(cube);
    const auto rank = static_cast<std::size_t>(ctx.rank());
    for (std::int32_t i = d.top.leaf_begin[rank]; i < d.top.leaf_begin[rank + 1]; ++i) {
      const auto n = static_cast<std::size_t>(d.top.leaves[static_cast<std::size_t>(i)]);
      const branch_location at = locate_branch(ref, grid, d.top.level[n], d.top.prefix[n]);
      const auto held = static_cast<std::uint64_t>(at.end - at.begin);
      if (held != d.top.count[n]) {
        throw std::logic_error("global leaf " + std::to_string(n) + " holds " + std::to_string(d.top.count[n]) +
                               " points, this rank " + std::to_string(held) + " of them after the migration");
      }
      d.branches.push_back(at);
    }
  });
  pt.build = clock.lap();
  return d;
}

namespace {

template <class T>
std::vector<trees::multipole<T>> combine_levels(const global_tree& top, std::span<const trees::multipole<T>> leaves) {
  if (leaves.size() != top.leaves.size()) throw std::invalid_argument("combine_top_tree: one payload per global leaf");
  std::vector<trees::multipole<T>> m(static_cast<std::size_t>(top.node_count()), trees::multipole_identity<T>());
  for (std::size_t i = 0; i < top.leaves.size(); ++i) m[static_cast<std::size_t>(top.leaves[i])] = leaves[i];
  // Bottom-up by levels, children merged in order, as the passes do.
  for (auto level = static_cast<std::ptrdiff_t>(top.level_offset.size()) - 2; level >= 0; --level) {
    for (std::int32_t n = top.level_offset[static_cast<std::size_t>(level)];
         n < top.level_offset[static_cast<std::size_t>(level) + 1]; ++n) {
      const auto k = static_cast<std::size_t>(n);
      if (top.child_count[k] == 0) continue;
      trees::multipole<T> acc = m[static_cast<std::size_t>(top.first_child[k])];
      for (std::int32_t c = 1; c < top.child_count[k]; ++c) {
        acc = trees::m2m_merge(acc, m[static_cast<std::size_t>(top.first_child[k] + c)]);
      }
      m[k] = acc;
    }
  }
  return m;
}

}  // namespace

std::vector<trees::multipole<float>> combine_top_tree(const global_tree& top,
                                                      std::span<const trees::multipole<float>> leaves) {
  return combine_levels(top, leaves);
}

std::vector<trees::multipole<double>> combine_top_tree(const global_tree& top,
                                                       std::span<const trees::multipole<double>> leaves) {
  return combine_levels(top, leaves);
}

distributed_moments distributed_upward_pass(const mpi_context& ctx, exchange& ex, const distributed_octree& tree,
                                            const trees::upward_options& options, phase_times* times) {
  require_host(ex, "distributed_upward_pass");
  stopwatch clock;
  phase_times local_times;
  phase_times& pt = times != nullptr ? *times : local_times;
  distributed_moments m;
  const global_tree& top = tree.top;
  const auto rank = static_cast<std::size_t>(ctx.rank());
  const auto owned_begin = static_cast<std::size_t>(top.leaf_begin[rank]);
  const auto owned = static_cast<std::size_t>(top.leaf_begin[rank + 1]) - owned_begin;

  // The runner (its graph) and the pass timed apart; the agreement after them is the wait for
  // the slowest rank (pass_wait).
  ctx.phase("upward pass", [&] {
    trees::upward_runner pass(tree.local, options);
    pt.pass_graph = clock.lap();
    const canopy::run_result r = pass.run();
    if (!r.ok()) throw std::runtime_error("local upward pass: " + r.message);
    m.local = pass.download();
    pt.pass = clock.lap();
  });
  pt.pass_wait = clock.lap();

  std::vector<trees::multipole<float>> branch(owned);
  const trees::octree_ref ref = host_ref(tree.local);
  for (std::size_t i = 0; i < owned; ++i) branch[i] = branch_payload(ref, m.local.data(), tree.branches[i]);
  pt.branches = clock.lap();

  // Every rank's branch payloads, in rank order: the global leaves in Morton order.
  const std::size_t ranks = static_cast<std::size_t>(ctx.size());
  std::vector<std::size_t> counts(ranks);
  for (std::size_t r = 0; r < ranks; ++r) counts[r] = static_cast<std::size_t>(top.leaf_begin[r + 1] - top.leaf_begin[r]);
  std::vector<trees::multipole<float>> leaves(top.leaves.size());
  all_gather_v(ex, branch.data(), leaves.data(), counts);
  ex.synchronize();
  pt.exchange = clock.lap();

  m.top = combine_top_tree(top, leaves);
  pt.top = clock.lap();
  return m;
}

}  // namespace canopy::distributed
