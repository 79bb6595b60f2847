// SPDX-License-Identifier: Apache-2.0
#include <canopy/trees/errors.hpp>
#include <canopy/trees/morton.hpp>
#include <canopy/trees/octree.hpp>
#include <canopy/trees/octree_steps.hpp>

#include "lattice.hpp"
#include "parallel.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>

namespace canopy::trees {

namespace {

constexpr std::size_t int32_limit = static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max());
constexpr std::size_t point_chunk = std::size_t{1} << 16;  // points per parallel part
constexpr std::size_t node_chunk = std::size_t{1} << 12;   // nodes per parallel part

// ---------------------------------------------------------------- radix sort ------------------

struct keyed_index {
  std::uint64_t code;
  std::uint32_t index;
};

// Stable LSD radix sort by `code`, 8 bits per pass, each pass a parallel histogram + scatter: every
// part counts its digits, parts are given disjoint output ranges per digit in part order, and each
// part scatters its own range in input order, so the result is the unique stable order whatever
// the number of parts. Passes in which every key has the same digit are skipped (coincident points,
// lattices, codes that leave the top bits zero). 8-bit digits keep the scatter at 256 output
// streams per thread, which the write-combining buffers and TLB still handle well.
void radix_sort(std::vector<keyed_index>& items, int key_bits) {
  const std::size_t n = items.size();
  if (n < 2) return;
  // More parts than threads (each >= 2^17 items, at most 64) so that threads pick them up
  // dynamically and a core busy with something else does not hold the pass back.
  const std::size_t parts = std::clamp<std::size_t>(n >> 17, 1, 64);
  auto buffer = std::make_unique_for_overwrite<keyed_index[]>(n);
  keyed_index* src = items.data();
  keyed_index* dst = buffer.get();
  std::vector<std::array<std::size_t, 256>> offsets(parts);
  for (int shift = 0; shift < key_bits; shift += 8) {
    detail::parallel_parts(parts, [&](std::size_t p) {
      std::array<std::size_t, 256>& h = offsets[p];
      h.fill(0);
      const std::size_t end = detail::range_begin(n, parts, p + 1);
      for (std::size_t i = detail::range_begin(n, parts, p); i < end; ++i) ++h[(src[i].code >> shift) & 0xff];
    });
    std::size_t running = 0;
    bool single_digit = false;
    for (std::size_t d = 0; d < 256; ++d) {
      std::size_t digit_total = 0;
      for (std::size_t p = 0; p < parts; ++p) {
        const std::size_t c = offsets[p][d];
        offsets[p][d] = running;
        running += c;
        digit_total += c;
      }
      single_digit = single_digit || digit_total == n;
    }
    if (single_digit) continue;
    detail::parallel_parts(parts, [&](std::size_t p) {
      std::array<std::size_t, 256>& next = offsets[p];
      const std::size_t end = detail::range_begin(n, parts, p + 1);
      for (std::size_t i = detail::range_begin(n, parts, p); i < end; ++i) dst[next[(src[i].code >> shift) & 0xff]++] = src[i];
    });
    std::swap(src, dst);
  }
  if (src != items.data()) {
    detail::parallel_chunks(n, point_chunk, [&](std::size_t b, std::size_t e) {
      std::memcpy(items.data() + b, src + b, (e - b) * sizeof(keyed_index));
    });
  }
}

// ---------------------------------------------------------------- helpers ---------------------

void resize_nodes(octree& t, std::size_t count) {
  t.parent.resize(count);
  t.first_child.resize(count);
  t.child_count.resize(count);
  t.point_begin.resize(count);
  t.point_count.resize(count);
  t.level.resize(count);
  t.bounds.resize(count);
}

octree empty_tree() {
  octree t;
  t.depth = 0;
  t.level_offset = {0, 1};
  t.parent = {-1};
  t.first_child = {-1};
  t.child_count = {0};
  t.point_begin = {0};
  t.point_count = {0};
  t.level = {0};
  t.bounds = {box{{0.0, 0.0, 0.0}, {1.0, 1.0, 1.0}}};
  t.leaves = {0};
  return t;
}

struct extent {
  double lo[3] = {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity(),
                  std::numeric_limits<double>::infinity()};
  double hi[3] = {-std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                  -std::numeric_limits<double>::infinity()};
  std::size_t first_bad = std::numeric_limits<std::size_t>::max();
  double mass = 0.0;  // the total mass, in double
};

// Bounding box of the points, and the first point with a non-finite coordinate or mass, or a
// coordinate beyond max_coordinate_magnitude.
extent measure(std::span<const point> points) {
  const std::size_t parts = (points.size() + point_chunk - 1) / point_chunk;
  std::vector<extent> partial(parts);
  detail::parallel_parts(parts, [&](std::size_t p) {
    extent& e = partial[p];
    const std::size_t end = std::min(points.size(), (p + 1) * point_chunk);
    for (std::size_t i = p * point_chunk; i < end; ++i) {
      const point& q = points[i];
      if (rejected_point(q.x, q.y, q.z, q.m)) {
        e.first_bad = i;
        return;
      }
      e.mass += q.m;
      const double v[3] = {q.x, q.y, q.z};
      for (int a = 0; a < 3; ++a) {
        e.lo[a] = std::min(e.lo[a], v[a]);
        e.hi[a] = std::max(e.hi[a], v[a]);
      }
    }
  });
  extent all;
  for (const extent& e : partial) {
    all.first_bad = std::min(all.first_bad, e.first_bad);
    all.mass += e.mass;
    for (int a = 0; a < 3; ++a) {
      all.lo[a] = std::min(all.lo[a], e.lo[a]);
      all.hi[a] = std::max(all.hi[a], e.hi[a]);
    }
  }
  return all;
}

// %g, so that 3e+38 reads as such (std::to_string prints 39 digits).
std::string fmt_value(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
  return buf;
}

}  // namespace

// ---------------------------------------------------------------- adaptive --------------------

void check_moment_range(const std::string& source, double total_mass, const box& cube) {
  // The float payloads' largest terms are the total mass M, its first moments (M |x| <= M L) and
  // second moments (M L^2), L = the root edge plus the largest |coordinate| (reference.hpp), with a
  // few of each summed in a merge: M max(1, L)^2 <= 2^120 leaves float (2^128) a factor 256. The
  // coordinate limit alone bounded only L: 1,000 masses of 1e36 summed to inf and exit 0.
  double magnitude = 0.0;
  for (int a = 0; a < 3; ++a) magnitude = std::max({magnitude, std::abs(cube.lo[a]), std::abs(cube.hi[a])});
  const double reach = std::max(1.0, cube.hi[0] - cube.lo[0] + magnitude);
  if (!(total_mass * reach * reach <= max_moment_magnitude)) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "the total mass %.6g times the squared extent %.6g is beyond 2^120 (~1.3e36): the float "
                  "moments would overflow; scale the masses or coordinates down",
                  total_mass, reach * reach);
    throw input_error(source, buf);
  }
}

input_error rejected_point_error(std::string source, std::size_t index, const point& q) {
  const bool finite = std::isfinite(q.x) && std::isfinite(q.y) && std::isfinite(q.z) && std::isfinite(q.m);
  const std::string where = "point " + std::to_string(index) + " (" + fmt_value(q.x) + ", " + fmt_value(q.y) + ", " +
                            fmt_value(q.z) + ", m " + fmt_value(q.m) + ")";
  if (finite && q.m < 0.0f) return input_error(std::move(source), where + " has a negative mass");
  return input_error(std::move(source), finite ? where + " has a coordinate beyond +-2^50 (~1.13e15), the largest "
                                                         "whose float second moments cannot overflow"
                                               : where + " is not finite");
}

std::string given_cube_problem(const box& cube, const double lo[3], const double hi[3]) {
  const auto fmt_value = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return std::string(buf);
  };
  const double edge = cube.hi[0] - cube.lo[0];
  for (int a = 0; a < 3; ++a) {
    if (!std::isfinite(cube.lo[a]) || !std::isfinite(cube.hi[a]) || !(cube.hi[a] - cube.lo[a] > 0.0) ||
        cube.hi[a] - cube.lo[a] != edge) {
      return "not a cube of positive finite edge";
    }
  }
  for (int a = 0; a < 3; ++a) {
    if (!(lo[a] >= cube.lo[a] && hi[a] < cube.hi[a])) {
      return "the points' bounding box (axis " + std::to_string(a) + ": [" + fmt_value(lo[a]) + ", " + fmt_value(hi[a]) +
             "]) is not inside the cube [" + fmt_value(cube.lo[a]) + ", " + fmt_value(cube.hi[a]) + ")";
    }
  }
  return "";
}

octree build_octree(std::span<const point> points, const build_options& options) {
  if (options.max_leaf < 1) {
    throw input_error("build_octree: max_leaf", "must be at least 1, got " + std::to_string(options.max_leaf));
  }
  if (options.max_depth < 0 || options.max_depth > max_octree_depth) {
    throw input_error("build_octree: max_depth", "must be in [0, " + std::to_string(max_octree_depth) + "], got " +
                                                     std::to_string(options.max_depth));
  }
  const std::size_t n = points.size();
  if (n > int32_limit) {
    throw input_error("build_octree", std::to_string(n) + " points exceed the 2^31 - 1 that int32 point indices can address");
  }
  if (n == 0) return empty_tree();

  const extent ext = measure(points);
  if (ext.first_bad != std::numeric_limits<std::size_t>::max()) {
    throw rejected_point_error("build_octree", ext.first_bad, points[ext.first_bad]);
  }
  box cube{};
  if (options.cube) {
    const double lo[3] = {ext.lo[0], ext.lo[1], ext.lo[2]};
    const double hi[3] = {ext.hi[0], ext.hi[1], ext.hi[2]};
    if (const std::string problem = given_cube_problem(*options.cube, lo, hi); !problem.empty()) {
      throw input_error("build_octree: cube", problem);
    }
    cube = *options.cube;
  } else {
    cube = bounding_cube(ext.lo, ext.hi);
  }
  check_moment_range("build_octree", ext.mass, cube);

  // Codes, stable sort, gather.
  std::vector<keyed_index> order(n);
  {
    const morton_grid grid = make_morton_grid(cube);
    detail::parallel_chunks(n, point_chunk, [&](std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e; ++i) order[i] = {morton_code(points[i], grid), static_cast<std::uint32_t>(i)};
    });
  }
  radix_sort(order, 3 * morton_bits_per_axis);

  octree t;
  t.points.resize(n);
  detail::parallel_chunks(n, point_chunk, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) t.points[i] = points[order[i].index];
  });

  // Top-down, one level at a time: each splitting node's octant ranges are found by binary search
  // on the sorted codes (8 searches per node, independent of its size), children are numbered by a
  // prefix sum over the level, so the next level comes out in Morton order with siblings adjacent.
  resize_nodes(t, 1);
  t.parent[0] = -1;
  t.first_child[0] = -1;
  t.child_count[0] = 0;
  t.point_begin[0] = 0;
  t.point_count[0] = static_cast<std::int32_t>(n);
  t.level[0] = 0;
  t.bounds[0] = cube;
  t.level_offset = {0, 1};
  std::size_t begin = 0, end = 1;
  int level = 0;
  std::vector<std::array<std::int32_t, 9>> split;  // octant boundaries of the level's nodes
  std::vector<std::int32_t> new_children;
  for (;; ++level) {
    const std::size_t width = end - begin;
    split.resize(width);
    new_children.assign(width, 0);
    const bool can_split = level < options.max_depth;
    detail::parallel_chunks(width, node_chunk, [&](std::size_t b, std::size_t e) {
      for (std::size_t k = b; k < e; ++k) {
        const std::size_t node = begin + k;
        if (!can_split || t.point_count[node] <= options.max_leaf) continue;
        std::array<std::int32_t, 9>& s = split[k];
        s[0] = t.point_begin[node];
        const auto last = order.begin() + t.point_begin[node] + t.point_count[node];
        auto from = order.begin() + s[0];
        int children = 0;
        for (unsigned octant = 0; octant < 8; ++octant) {
          const auto to = std::partition_point(
              from, last, [&](const keyed_index& x) { return morton_octant(x.code, level) <= octant; });
          s[octant + 1] = static_cast<std::int32_t>(to - order.begin());
          children += to != from;
          from = to;
        }
        new_children[k] = children;
      }
    });
    std::size_t total = 0;
    for (std::size_t k = 0; k < width; ++k) {
      t.first_child[begin + k] = new_children[k] > 0 ? static_cast<std::int32_t>(end + total) : -1;
      t.child_count[begin + k] = new_children[k];
      total += static_cast<std::size_t>(new_children[k]);
    }
    if (total == 0) break;
    if (end + total > int32_limit) {
      throw input_error("build_octree", "the tree would have more than 2^31 - 1 nodes (raise max_leaf or lower max_depth)");
    }
    resize_nodes(t, end + total);
    const int child_level = level + 1;
    detail::parallel_chunks(width, node_chunk, [&](std::size_t b, std::size_t e) {
      for (std::size_t k = b; k < e; ++k) {
        const std::size_t node = begin + k;
        if (t.child_count[node] == 0) continue;
        std::size_t child = static_cast<std::size_t>(t.first_child[node]);
        const std::array<std::int32_t, 9>& s = split[k];
        for (int octant = 0; octant < 8; ++octant) {
          if (s[octant + 1] == s[octant]) continue;
          t.parent[child] = static_cast<std::int32_t>(node);
          t.first_child[child] = -1;
          t.child_count[child] = 0;
          t.point_begin[child] = s[octant];
          t.point_count[child] = s[octant + 1] - s[octant];
          t.level[child] = static_cast<std::uint8_t>(child_level);
          t.bounds[child] = cell_box(cube, morton_prefix(order[s[octant]].code, child_level), child_level);
          ++child;
        }
      }
    });
    begin = end;
    end += total;
    t.level_offset.push_back(static_cast<std::int32_t>(end));
  }
  t.depth = level;

  for (std::size_t node = 0; node < end; ++node) {
    if (t.child_count[node] == 0) t.leaves.push_back(static_cast<std::int32_t>(node));
  }
  // Leaves hold disjoint, non-empty ranges of the Morton-sorted points, so sorting them by range
  // start is sorting them in Morton (depth-first) order.
  std::sort(t.leaves.begin(), t.leaves.end(),
            [&](std::int32_t a, std::int32_t b) { return t.point_begin[a] < t.point_begin[b]; });
  return t;
}

// ---------------------------------------------------------------- complete --------------------

octree build_complete_octree(int depth, int per_leaf, std::uint64_t seed) {
  const std::size_t n = detail::lattice_point_count("build_complete_octree", depth, per_leaf);
  // 8^0 + ... + 8^depth nodes; depth <= 10 here because of the point limit, so this fits int32.
  std::vector<std::size_t> offset(static_cast<std::size_t>(depth) + 2);
  offset[0] = 0;
  for (int l = 0; l <= depth; ++l) offset[l + 1] = offset[l] + (std::size_t{1} << (3 * l));
  const std::size_t nodes = offset[depth + 1];
  if (nodes > int32_limit) {
    throw input_error("build_complete_octree", "a depth-" + std::to_string(depth) + " tree has more than 2^31 - 1 nodes");
  }

  octree t;
  t.depth = depth;
  t.level_offset.assign(offset.begin(), offset.end());
  resize_nodes(t, nodes);
  const box unit{{0.0, 0.0, 0.0}, {1.0, 1.0, 1.0}};
  for (int l = 0; l <= depth; ++l) {
    const std::size_t span = static_cast<std::size_t>(per_leaf) << (3 * (depth - l));  // points per node
    detail::parallel_chunks(offset[l + 1] - offset[l], node_chunk, [&](std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e; ++i) {
        const std::size_t node = offset[l] + i;
        t.parent[node] = l == 0 ? -1 : static_cast<std::int32_t>(offset[l - 1] + i / 8);
        t.first_child[node] = l < depth ? static_cast<std::int32_t>(offset[l + 1] + 8 * i) : -1;
        t.child_count[node] = l < depth ? 8 : 0;
        t.point_begin[node] = static_cast<std::int32_t>(i * span);
        t.point_count[node] = static_cast<std::int32_t>(span);
        t.level[node] = static_cast<std::uint8_t>(l);
        t.bounds[node] = cell_box(unit, i, l);  // the Morton index on level l is the cell's prefix
      }
    });
  }
  t.leaves.resize(offset[depth + 1] - offset[depth]);
  for (std::size_t i = 0; i < t.leaves.size(); ++i) t.leaves[i] = static_cast<std::int32_t>(offset[depth] + i);
  t.points.resize(n);
  detail::fill_lattice_points(t.points, depth, per_leaf, seed);
  return t;
}

// ---------------------------------------------------------------- invariants ------------------

void check_invariants(const octree& t) {
  const std::size_t nodes = t.parent.size();
  auto fail = [](std::int64_t node, const std::string& what) { throw invariant_error(node, what); };
  if (t.first_child.size() != nodes || t.child_count.size() != nodes || t.point_begin.size() != nodes ||
      t.point_count.size() != nodes || t.level.size() != nodes || t.bounds.size() != nodes) {
    fail(-1, "per-node arrays have different sizes");
  }
  if (nodes == 0) fail(-1, "no nodes: every tree has a root (an empty tree has one empty root)");
  if (nodes > int32_limit) fail(-1, "more than 2^31 - 1 nodes");
  if (t.depth < 0 || t.depth > max_octree_depth) fail(-1, "depth " + std::to_string(t.depth) + " outside [0, 21]");
  if (t.level_offset.size() != static_cast<std::size_t>(t.depth) + 2) {
    fail(-1, "level_offset has " + std::to_string(t.level_offset.size()) + " entries, depth + 2 = " +
                 std::to_string(t.depth + 2) + " expected");
  }
  if (t.level_offset[0] != 0 || t.level_offset[1] != 1) fail(-1, "level 0 must hold exactly the root, node 0");
  if (static_cast<std::size_t>(t.level_offset.back()) != nodes) fail(-1, "level_offset does not end at the node count");
  for (int l = 0; l <= t.depth; ++l) {
    if (t.level_offset[l + 1] <= t.level_offset[l]) fail(-1, "level " + std::to_string(l) + " is empty");
  }
  const std::size_t n_points = t.points.size();
  if (n_points > int32_limit) fail(-1, "more than 2^31 - 1 points");

  // Root.
  if (t.parent[0] != -1) fail(0, "the root's parent is not -1");
  if (t.point_begin[0] != 0 || static_cast<std::size_t>(t.point_count[0]) != n_points) {
    fail(0, "the root does not cover all " + std::to_string(n_points) + " points");
  }
  const box& root = t.bounds[0];
  const double root_edge = root.hi[0] - root.lo[0];
  if (!(root_edge > 0.0) || !std::isfinite(root_edge)) fail(0, "root cell has no positive finite edge");
  // Cell bounds are lo + index * edge in double: their rounding is a few ulps of the coordinates'
  // magnitude. The slack is 1e-9 of the root edge (2000 times below a level-21 cell) plus 64 ulps
  // of the magnitude (for cubes far from the origin), and is far below any cell edge the builder
  // can produce from float input.
  double magnitude = 0.0;
  for (int a = 0; a < 3; ++a) magnitude = std::max({magnitude, std::abs(root.lo[a]), std::abs(root.hi[a])});
  const double slack = 1e-9 * root_edge + 64.0 * std::numeric_limits<double>::epsilon() * magnitude;

  for (int l = 0; l <= t.depth; ++l) {
    const std::int32_t lb = t.level_offset[l], le = t.level_offset[l + 1];
    // The children of level l, taken in node order, must be exactly level l + 1, in order.
    std::int32_t expected_child = le;
    std::int32_t previous_end = -1;
    for (std::int32_t n = lb; n < le; ++n) {
      if (t.level[n] != l) fail(n, "level is " + std::to_string(t.level[n]) + " but it is stored in level " + std::to_string(l));
      const std::int32_t pb = t.point_begin[n], pc = t.point_count[n];
      if (pb < 0 || pc < 0 || static_cast<std::size_t>(pb) + static_cast<std::size_t>(pc) > n_points) {
        fail(n, "point range outside the points");
      }
      if (pc == 0 && !(n == 0 && n_points == 0)) fail(n, "empty node (only the root of an empty tree may be empty)");
      if (pb < previous_end) fail(n, "not after the previous node of its level in Morton order");
      previous_end = pb + pc;
      const box& b = t.bounds[n];
      const double edge = b.hi[0] - b.lo[0];
      const double expected_edge = std::ldexp(root_edge, -l);
      for (int a = 0; a < 3; ++a) {
        if (std::abs((b.hi[a] - b.lo[a]) - expected_edge) > slack) fail(n, "cell is not a cube of edge root / 2^level");
      }
      if (n > 0) {
        const std::int32_t p = t.parent[n];
        if (p < 0 || p >= lb || l == 0 || p < t.level_offset[l - 1]) fail(n, "parent is not on the level above");
        if (n < t.first_child[p] || n >= t.first_child[p] + t.child_count[p]) fail(n, "parent does not list it as a child");
        const box& pbx = t.bounds[p];
        unsigned octant = 0;
        for (int a = 0; a < 3; ++a) {
          const double mid = pbx.lo[a] + 0.5 * (pbx.hi[a] - pbx.lo[a]);
          const bool upper = std::abs(b.lo[a] - mid) <= slack;
          if (!upper && std::abs(b.lo[a] - pbx.lo[a]) > slack) fail(n, "cell is not an octant of its parent's cell");
          octant |= static_cast<unsigned>(upper) << (2 - a);
        }
        if (n > t.first_child[p]) {
          // Siblings in increasing octant order: Morton order within the level.
          const box& prev = t.bounds[n - 1];
          unsigned prev_octant = 0;
          for (int a = 0; a < 3; ++a) {
            const double mid = pbx.lo[a] + 0.5 * (pbx.hi[a] - pbx.lo[a]);
            prev_octant |= static_cast<unsigned>(std::abs(prev.lo[a] - mid) <= slack) << (2 - a);
          }
          if (octant <= prev_octant) fail(n, "siblings are not in increasing octant order");
        }
      } else if (edge <= 0.0) {
        fail(n, "degenerate root cell");
      }
      const std::int32_t fc = t.first_child[n], cc = t.child_count[n];
      if (cc == 0) {
        if (fc != -1) fail(n, "leaf with first_child " + std::to_string(fc) + " (must be -1)");
        for (std::int32_t i = pb; i < pb + pc; ++i) {
          const point& q = t.points[static_cast<std::size_t>(i)];
          const float v[3] = {q.x, q.y, q.z};
          for (int a = 0; a < 3; ++a) {
            if (!(v[a] >= b.lo[a] - slack && v[a] <= b.hi[a] + slack)) {
              fail(n, "point " + std::to_string(i) + " lies outside the leaf's cell");
            }
          }
        }
        continue;
      }
      if (cc < 0 || cc > 8) fail(n, "child_count " + std::to_string(cc) + " outside 0..8");
      if (l == t.depth) fail(n, "node on the deepest level has children");
      if (fc != expected_child) {
        fail(n, "children start at " + std::to_string(fc) + ", expected " + std::to_string(expected_child) +
                    " (children of a level must be the next level, contiguous and in order)");
      }
      expected_child += cc;
      std::int32_t next_point = pb;
      for (std::int32_t c = fc; c < fc + cc; ++c) {
        if (t.parent[c] != n) fail(c, "parent link " + std::to_string(t.parent[c]) + " but listed as a child of " + std::to_string(n));
        if (t.point_begin[c] != next_point) fail(c, "child point ranges do not tile the parent's range");
        next_point += t.point_count[c];
      }
      if (next_point != pb + pc) fail(n, "children's point ranges do not add up to the node's");
    }
    if (l < t.depth && expected_child != t.level_offset[l + 2]) {
      fail(-1, "level " + std::to_string(l + 1) + " holds nodes that are nobody's children");
    }
  }

  // Leaves: each exactly once, in Morton order, tiling all points.
  std::size_t leaf_total = 0;
  for (std::size_t n = 0; n < nodes; ++n) leaf_total += t.child_count[n] == 0;
  if (t.leaves.size() != leaf_total) {
    fail(-1, "leaves lists " + std::to_string(t.leaves.size()) + " nodes, the tree has " + std::to_string(leaf_total) + " leaves");
  }
  std::int32_t next_point = 0;
  for (std::size_t i = 0; i < t.leaves.size(); ++i) {
    const std::int32_t leaf = t.leaves[i];
    if (leaf < 0 || static_cast<std::size_t>(leaf) >= nodes || t.child_count[leaf] != 0) {
      fail(leaf, "listed in leaves but is not a leaf");
    }
    if (t.point_begin[leaf] != next_point) fail(leaf, "leaves are not in Morton order or do not tile the points");
    next_point += t.point_count[leaf];
  }
  if (static_cast<std::size_t>(next_point) != n_points) fail(-1, "leaves do not cover every point");
}

std::string structure_difference(const octree& a, const octree& b) {
  const auto compare = [](const char* name, const std::vector<std::int32_t>& x, const std::vector<std::int32_t>& y) -> std::string {
    if (x.size() != y.size()) return std::string(name) + ": " + std::to_string(x.size()) + " entries against " + std::to_string(y.size());
    const auto d = std::mismatch(x.begin(), x.end(), y.begin());
    return d.first == x.end() ? std::string() : std::string(name) + "[" + std::to_string(d.first - x.begin()) + "] differs";
  };
  for (const std::string& d : {compare("parent", a.parent, b.parent), compare("first_child", a.first_child, b.first_child),
                               compare("child_count", a.child_count, b.child_count),
                               compare("point_begin", a.point_begin, b.point_begin),
                               compare("point_count", a.point_count, b.point_count), compare("leaves", a.leaves, b.leaves),
                               compare("level_offset", a.level_offset, b.level_offset)})
    if (!d.empty()) return d;
  return {};
}

}  // namespace canopy::trees
