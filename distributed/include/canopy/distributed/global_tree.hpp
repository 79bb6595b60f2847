// SPDX-License-Identifier: Apache-2.0
// Domain decomposition by the space-filling curve, and the global coarse tree it rests on.
//
// Every rank knows the same global tree (cornerstone's approach): the cells of the octree of all
// ranks' points down to where a cell holds at most `bucket` points, found level by level with one
// all-reduce of the children's point counts per level. Because bucket >= max_leaf, every internal
// cell of it splits in the octree of all points too, and it creates only non-empty children, so
// its nodes are exactly the top nodes of that octree. Each rank owns a contiguous run of its
// leaves in Morton order (so a contiguous range of Morton keys, and never part of a cell), chosen
// for equal weight: point counts by default, or the caller's weights (the previous step's work).
#pragma once

#include <canopy/distributed/exchange.hpp>
#include <canopy/distributed/mpi_context.hpp>
#include <canopy/trees/box.hpp>
#include <canopy/trees/point.hpp>

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace canopy::distributed {

struct decomposition_options {
  int max_leaf = 32;   // the local octrees' leaf size (build_options::max_leaf)
  int max_depth = 21;  // and their depth limit
  // Most points in a leaf of the global tree (>= max_leaf); 0 = max(max_leaf, total / (64 ranks)),
  // so a rank's share is at most about 1/64 off the even one.
  std::uint64_t bucket = 0;
  // The weight of a global leaf (its level, Morton prefix and point count) when ranks are
  // balanced; empty = its point count. The hook for the previous step's measured work.
  std::function<double(int level, std::uint64_t prefix, std::uint64_t count)> leaf_weight;
};

// Throws std::invalid_argument when `options` cannot decompose (max_leaf < 1, max_depth outside
// [0, 21], a bucket smaller than max_leaf). Both builds (host and device) check with it on every
// rank before their first collective.
void check_decomposition_options(const decomposition_options& options);

// The global coarse tree and the ranks' ranges, identical on every rank. Level-ordered like
// trees::octree (each level in Morton order, children contiguous); node 0 is the root.
struct global_tree {
  trees::box cube;                        // the root cell: the bounding cube of all ranks' points
  std::vector<std::uint8_t> level;
  std::vector<std::uint64_t> prefix;      // the cell's Morton prefix on its level (3 * level bits)
  std::vector<std::int32_t> parent;       // -1 for the root
  std::vector<std::int32_t> first_child;  // -1 for leaves
  std::vector<std::int32_t> child_count;
  std::vector<std::uint64_t> count;       // points in the cell, over all ranks
  std::vector<std::int32_t> level_offset; // level L holds nodes [level_offset[L], level_offset[L+1])
  std::vector<std::int32_t> leaves;       // leaf nodes in Morton order
  std::vector<std::int32_t> leaf_begin;   // rank r owns leaves[leaf_begin[r], leaf_begin[r+1]); ranks + 1 entries
  std::vector<std::uint64_t> key_begin;   // rank r owns Morton codes [key_begin[r], key_begin[r+1]); ranks + 1 entries

  std::int32_t node_count() const { return static_cast<std::int32_t>(level.size()); }
  std::uint64_t total() const { return count.empty() ? 0 : count[0]; }
  // The rank whose key range holds `code`.
  int owner(std::uint64_t code) const;
};

// The first Morton code of a cell and the first code past it.
std::uint64_t cell_key_begin(int level, std::uint64_t prefix);
std::uint64_t cell_key_end(int level, std::uint64_t prefix);

// The bounding cube of all ranks' points (trees::bounding_cube of the all-reduced bounding box:
// bit for bit the root cell build_octree gives the union of the points; the unit cube when there
// are none). Throws trees::input_error on the rank that holds a rejected point (before any
// collective; call it inside mpi_context::phase).
trees::box local_extent_check(std::span<const trees::point> points);
trees::box global_cube(const mpi_context& ctx, exchange& ex, std::span<const trees::point> points);

// The global tree from every rank's Morton codes over `cube` (sorted ascending), then the ranks'
// ranges (assign_ranks). Collective: one all-reduce per level of the tree.
global_tree build_global_tree(const mpi_context& ctx, exchange& ex, const trees::box& cube,
                              std::span<const std::uint64_t> sorted_codes, const decomposition_options& options);

// The counting step of the global tree, wherever the codes live: for k cells given by 9 keys each
// (the cell's first code, then the first code past each of its 8 octants), the points of each
// octant summed over all ranks (8k values). Collective.
using octant_counter = std::function<std::vector<std::uint64_t>(std::span<const std::uint64_t> bounds)>;

// build_global_tree over any counter (the GPU path counts on the device and reduces with NCCL).
// `total`: the points of all ranks.
global_tree build_global_tree(const mpi_context& ctx, const trees::box& cube, std::uint64_t total,
                              const octant_counter& count_octants, const decomposition_options& options);



// Cuts the leaves into `ranks` contiguous runs of about equal weight (options.leaf_weight, else
// counts): a leaf goes to the rank in whose share of the total its weight's midpoint falls. Sets
// leaf_begin and key_begin. Local, deterministic: every rank computes the same cut.
void assign_ranks(global_tree& tree, int ranks, const decomposition_options& options);

// Throws std::length_error when a migration would move more than 2^31 - 1 points between two
// ranks or leave more than that on this one (call it inside mpi_context::phase, before the exchange).
void check_exchange_counts(std::span<const std::size_t> send, std::span<const std::size_t> recv);

// Moves every point to the rank that owns its code (all-to-all-v). `points` and `codes` are this
// rank's, sorted by code. Returns this rank's points after the exchange (unsorted: concatenated by
// source rank). Collective.
std::vector<trees::point> migrate(const mpi_context& ctx, exchange& ex, const global_tree& tree,
                                  std::span<const trees::point> points, std::span<const std::uint64_t> codes);

}  // namespace canopy::distributed
