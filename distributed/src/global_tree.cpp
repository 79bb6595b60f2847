// SPDX-License-Identifier: Apache-2.0
#include <canopy/distributed/global_tree.hpp>
#include <canopy/trees/errors.hpp>
#include <canopy/trees/morton.hpp>
#include <canopy/trees/octree.hpp>
#include <canopy/trees/octree_steps.hpp>

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

namespace canopy::distributed {

void check_decomposition_options(const decomposition_options& options) {
  if (options.max_leaf < 1) throw std::invalid_argument("max_leaf must be at least 1");
  if (options.max_depth < 0 || options.max_depth > trees::max_octree_depth) {
    throw std::invalid_argument("max_depth must be in [0, 21]");
  }
  if (options.bucket != 0 && options.bucket < static_cast<std::uint64_t>(options.max_leaf)) {
    throw std::invalid_argument("bucket must be 0 (automatic) or at least max_leaf");
  }
}

namespace {
constexpr std::uint64_t key_limit = std::uint64_t{1} << 63;  // past every 63-bit Morton code
}

std::uint64_t cell_key_begin(int level, std::uint64_t prefix) {
  return prefix << (3 * (trees::morton_bits_per_axis - level));
}
std::uint64_t cell_key_end(int level, std::uint64_t prefix) {
  return (prefix + 1) << (3 * (trees::morton_bits_per_axis - level));
}

int global_tree::owner(std::uint64_t code) const {
  const auto it = std::upper_bound(key_begin.begin(), key_begin.end(), code);
  const auto r = static_cast<int>(it - key_begin.begin()) - 1;
  return std::clamp(r, 0, static_cast<int>(key_begin.size()) - 2);
}

trees::box local_extent_check(std::span<const trees::point> points) {
  trees::point_extent e = trees::empty_extent();
  for (std::size_t i = 0; i < points.size(); ++i) {
    const trees::point& p = points[i];
    if (trees::rejected_point(p.x, p.y, p.z, p.m)) throw trees::rejected_point_error("canopy::distributed", i, p);
    e = trees::merge_extents(e, trees::extent_of(p.x, p.y, p.z, p.m, 0));
  }
  trees::box b{};
  for (int a = 0; a < 3; ++a) {
    b.lo[a] = e.lo[a];
    b.hi[a] = e.hi[a];
  }
  return b;
}

trees::box global_cube(const mpi_context& ctx, exchange& ex, std::span<const trees::point> points) {
  if (ex.space() != memory_space::host) throw std::logic_error("global_cube: needs an exchange on host memory");
  trees::box local{};
  ctx.phase("extent", [&] { local = local_extent_check(points); });
  // min of lo and of -hi in one all-reduce; min and max are exact in float, so the order in which
  // ranks combine cannot change a bit, and the cube equals the one build_octree gives the union.
  float v[6];
  for (int a = 0; a < 3; ++a) {
    v[a] = static_cast<float>(local.lo[a]);
    v[3 + a] = -static_cast<float>(local.hi[a]);
  }
  ex.all_reduce(v, 6, element_type::f32, reduce_op::min);
  double lo[3], hi[3];
  for (int a = 0; a < 3; ++a) {
    lo[a] = v[a];
    hi[a] = -v[3 + a];
  }
  if (lo[0] > hi[0]) return trees::box{{0.0, 0.0, 0.0}, {1.0, 1.0, 1.0}};  // no points anywhere
  return trees::bounding_cube(lo, hi);
}

global_tree build_global_tree(const mpi_context& ctx, exchange& ex, const trees::box& cube,
                              std::span<const std::uint64_t> sorted_codes, const decomposition_options& options) {
  if (ex.space() != memory_space::host) throw std::logic_error("build_global_tree: needs an exchange on host memory");
  const std::uint64_t total = ctx.sum(sorted_codes.size());
  const octant_counter count = [&](std::span<const std::uint64_t> bounds) {
    std::vector<std::uint64_t> counts(bounds.size() / 9 * 8);
    for (std::size_t k = 0; 9 * k < bounds.size(); ++k) {
      auto from = std::lower_bound(sorted_codes.begin(), sorted_codes.end(), bounds[9 * k]);
      for (std::size_t octant = 0; octant < 8; ++octant) {
        const auto to = std::lower_bound(from, sorted_codes.end(), bounds[9 * k + 1 + octant]);
        counts[8 * k + octant] = static_cast<std::uint64_t>(to - from);
        from = to;
      }
    }
    ex.all_reduce(counts.data(), counts.size(), element_type::u64, reduce_op::sum);
    return counts;
  };
  return build_global_tree(ctx, cube, total, count, options);
}

global_tree build_global_tree(const mpi_context& ctx, const trees::box& cube, std::uint64_t total,
                              const octant_counter& count_octants, const decomposition_options& options) {
  global_tree t;
  t.cube = cube;
  const std::uint64_t ranks = static_cast<std::uint64_t>(ctx.size());
  const std::uint64_t max_leaf = static_cast<std::uint64_t>(options.max_leaf);
  const std::uint64_t bucket = options.bucket != 0 ? options.bucket : std::max(max_leaf, total / (64 * ranks));

  t.level = {0};
  t.prefix = {0};
  t.parent = {-1};
  t.first_child = {-1};
  t.child_count = {0};
  t.count = {total};
  t.level_offset = {0, 1};
  std::vector<std::uint64_t> counts, bounds;
  std::vector<std::int32_t> splitting;
  for (int level = 0; level < options.max_depth; ++level) {
    const auto begin = static_cast<std::size_t>(t.level_offset[static_cast<std::size_t>(level)]);
    const auto end = static_cast<std::size_t>(t.level_offset[static_cast<std::size_t>(level) + 1]);
    splitting.clear();
    for (std::size_t n = begin; n < end; ++n) {
      if (t.count[n] > bucket) splitting.push_back(static_cast<std::int32_t>(n));
    }
    if (splitting.empty()) break;  // the same on every rank: the counts are global
    bounds.clear();
    for (const std::int32_t n : splitting) {
      const std::uint64_t p = t.prefix[static_cast<std::size_t>(n)];
      bounds.push_back(cell_key_begin(level, p));
      for (unsigned octant = 0; octant < 8; ++octant) bounds.push_back(cell_key_end(level + 1, p << 3 | octant));
    }
    counts = count_octants(bounds);
    if (counts.size() != 8 * splitting.size()) throw std::logic_error("build_global_tree: the counter gave too few counts");
    for (std::size_t k = 0; k < splitting.size(); ++k) {
      const auto n = static_cast<std::size_t>(splitting[k]);
      t.first_child[n] = t.node_count();
      for (unsigned octant = 0; octant < 8; ++octant) {
        if (counts[8 * k + octant] == 0) continue;  // only non-empty children, as build_octree
        t.level.push_back(static_cast<std::uint8_t>(level + 1));
        t.prefix.push_back(t.prefix[n] << 3 | octant);
        t.parent.push_back(static_cast<std::int32_t>(n));
        t.first_child.push_back(-1);
        t.child_count.push_back(0);
        t.count.push_back(counts[8 * k + octant]);
        ++t.child_count[n];
      }
    }
    t.level_offset.push_back(t.node_count());
  }
  for (std::int32_t n = 0; n < t.node_count(); ++n) {
    if (t.child_count[static_cast<std::size_t>(n)] == 0) t.leaves.push_back(n);
  }
  std::sort(t.leaves.begin(), t.leaves.end(), [&](std::int32_t a, std::int32_t b) {
    return cell_key_begin(t.level[static_cast<std::size_t>(a)], t.prefix[static_cast<std::size_t>(a)]) <
           cell_key_begin(t.level[static_cast<std::size_t>(b)], t.prefix[static_cast<std::size_t>(b)]);
  });
  assign_ranks(t, ctx.size(), options);
  return t;
}

void assign_ranks(global_tree& t, int ranks, const decomposition_options& options) {
  const std::size_t leaves = t.leaves.size();
  std::vector<double> weight(leaves);
  for (std::size_t i = 0; i < leaves; ++i) {
    const auto n = static_cast<std::size_t>(t.leaves[i]);
    weight[i] = options.leaf_weight ? options.leaf_weight(t.level[n], t.prefix[n], t.count[n])
                                    : static_cast<double>(t.count[n]);
    if (!(weight[i] >= 0.0)) throw std::invalid_argument("assign_ranks: a leaf weight is negative or NaN");
  }
  const double total = std::accumulate(weight.begin(), weight.end(), 0.0);
  t.leaf_begin.assign(static_cast<std::size_t>(ranks) + 1, static_cast<std::int32_t>(leaves));
  t.leaf_begin[0] = 0;
  // Leaf i goes to the rank whose share [r W / P, (r + 1) W / P) holds its weight's midpoint:
  // non-decreasing in i, so every rank gets a contiguous run (perhaps empty). With no weight at all
  // (no points) the one leaf, the empty root, goes to rank 0.
  double before = 0.0;
  int rank = 0;
  for (std::size_t i = 0; i < leaves; ++i) {
    const double mid = before + 0.5 * weight[i];
    const int owner = total > 0.0 ? std::min(ranks - 1, static_cast<int>(mid / total * ranks)) : 0;
    while (rank < owner) t.leaf_begin[static_cast<std::size_t>(++rank)] = static_cast<std::int32_t>(i);
    before += weight[i];
  }
  t.key_begin.assign(static_cast<std::size_t>(ranks) + 1, key_limit);
  t.key_begin[0] = 0;
  for (int r = 1; r < ranks; ++r) {
    const auto first = static_cast<std::size_t>(t.leaf_begin[static_cast<std::size_t>(r)]);
    if (first < leaves) {
      const auto n = static_cast<std::size_t>(t.leaves[first]);
      t.key_begin[static_cast<std::size_t>(r)] = cell_key_begin(t.level[n], t.prefix[n]);
    }
  }
}

void check_exchange_counts(std::span<const std::size_t> send, std::span<const std::size_t> recv) {
  constexpr std::size_t limit = 0x7fffffff;  // MPI's int counts, the builders' int32 indices
  std::size_t total = 0;
  for (std::size_t r = 0; r < send.size(); ++r) {
    if (send[r] > limit || recv[r] > limit) {
      throw std::length_error("more than 2^31 - 1 points to or from rank " + std::to_string(r));
    }
    total += recv[r];
  }
  if (total > limit) throw std::length_error(std::to_string(total) + " points would land on this rank (at most 2^31 - 1)");
}

std::vector<trees::point> migrate(const mpi_context& ctx, exchange& ex, const global_tree& tree,
                                  std::span<const trees::point> points, std::span<const std::uint64_t> codes) {
  const auto ranks = static_cast<std::size_t>(ctx.size());
  std::vector<std::size_t> send(ranks);
  std::vector<std::uint64_t> send64(ranks);
  for (std::size_t r = 0; r < ranks; ++r) {
    const auto b = std::lower_bound(codes.begin(), codes.end(), tree.key_begin[r]);
    const auto e = std::lower_bound(codes.begin(), codes.end(), tree.key_begin[r + 1]);
    send[r] = static_cast<std::size_t>(e - b);
    send64[r] = send[r];
  }
  const std::vector<std::uint64_t> recv64 = ctx.all_to_all(send64);
  std::vector<std::size_t> recv(recv64.begin(), recv64.end());
  ctx.phase("migrate", [&] { check_exchange_counts(send, recv); });
  std::vector<trees::point> mine(std::accumulate(recv.begin(), recv.end(), std::size_t{0}));
  all_to_all_v(ex, points.data(), send, mine.data(), recv);
  return mine;
}

}  // namespace canopy::distributed
