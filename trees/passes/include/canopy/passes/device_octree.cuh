// SPDX-License-Identifier: Apache-2.0
// An octree and its node payloads in GPU memory, in the cuCollections shape: a move-only RAII host
// owner (device_octree, device_payloads<T>) and a trivially copyable view (octree_ref) passed by
// value into kernels, the user's own kernels included.
//
//   canopy::trees::octree tree = canopy::trees::build_octree(points);
//   canopy::trees::device_octree d_tree(tree);                 // cudaMalloc + copy, once
//   canopy::trees::device_payloads<float> moments(d_tree.node_count());
//   my_upward_pass<<<grid, block>>>(d_tree.ref(), moments.data());
//   std::vector<canopy::trees::multipole<float>> host = moments.download();
//
// Host code only besides the view (cuda_runtime.h; g++ or nvcc). The arrays are
// canopy::device_buffer (canopy/cuda/): a failed CUDA call throws canopy::cuda_error naming the
// call, file:line and the CUDA error string.
#pragma once

#include <canopy/cuda/device_buffer.hpp>
#include <canopy/cuda/error.hpp>
#include <canopy/passes/octree_ref.hpp>
#include <canopy/trees/multipole.hpp>
#include <canopy/trees/octree.hpp>
#include <canopy/trees/point.hpp>

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace canopy::trees {

// Owner of device copies of an octree's arrays (points, parent, first_child, child_count,
// point_begin, point_count, leaves, level_offset). level and bounds are not copied: no upward pass
// needs them. Copies are synchronous (cudaMemcpy) and made once, at construction. The GPU builder
// (device_octree_builder.cuh) fills the arrays on the device instead and hands them over with
// adopt().
class device_octree {
 public:
  // The device arrays behind a tree. A buffer may be longer than the tree needs (a builder keeps
  // its capacity for the next, larger build); only the first node_count / leaf_count /
  // point_total / depth + 2 entries are the tree.
  struct arrays {
    device_buffer<point> points;
    device_buffer<std::int32_t> parent, first_child, child_count, point_begin, point_count, leaves, level_offset;
  };

  device_octree() = default;

  // Throws std::invalid_argument when the arrays' sizes disagree (a malformed octree; the full
  // check is check_invariants), cuda_error when an allocation or copy fails.
  explicit device_octree(const octree& tree) {
    const std::size_t n = tree.parent.size();
    if (n > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()) ||
        tree.points.size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
      throw std::invalid_argument("device_octree: more than 2^31 - 1 nodes or points");
    if (tree.first_child.size() != n || tree.child_count.size() != n || tree.point_begin.size() != n ||
        tree.point_count.size() != n)
      throw std::invalid_argument("device_octree: parent, first_child, child_count, point_begin and point_count "
                                  "must all have node_count entries");
    if (n != 0 && tree.level_offset.size() != static_cast<std::size_t>(tree.depth) + 2)
      throw std::invalid_argument("device_octree: level_offset must have depth + 2 entries");
    if (n != 0 && (tree.level_offset.front() != 0 || tree.level_offset.back() != static_cast<std::int32_t>(n)))
      throw std::invalid_argument("device_octree: level_offset must run from 0 to node_count");
    if (tree.leaves.size() > n) throw std::invalid_argument("device_octree: more leaves than nodes");

    points_ = device_buffer<point>(tree.points);
    parent_ = device_buffer<std::int32_t>(tree.parent);
    first_child_ = device_buffer<std::int32_t>(tree.first_child);
    child_count_ = device_buffer<std::int32_t>(tree.child_count);
    point_begin_ = device_buffer<std::int32_t>(tree.point_begin);
    point_count_ = device_buffer<std::int32_t>(tree.point_count);
    leaves_ = device_buffer<std::int32_t>(tree.leaves);
    level_offset_ = device_buffer<std::int32_t>(tree.level_offset);  // each upload has landed on return
    host_level_offset_ = tree.level_offset;
    node_count_ = static_cast<std::int32_t>(n);
    leaf_count_ = static_cast<std::int32_t>(tree.leaves.size());
    point_total_ = static_cast<std::int32_t>(tree.points.size());
    depth_ = n == 0 ? 0 : tree.depth;
  }

  // Takes over arrays filled on the device (by a kernel, in stream order before any use of the
  // tree) as the tree with host_level_offset (depth + 2 entries from 0 to node_count, level 0 = the
  // root alone), leaf_count leaves and point_total points. Throws std::invalid_argument when the
  // offsets are malformed or a buffer is shorter than those counts need (the buffers are then
  // released).
  static device_octree adopt(arrays a, std::vector<std::int32_t> host_level_offset, std::int32_t leaf_count,
                             std::int32_t point_total) {
    const std::size_t levels = host_level_offset.size();
    if (levels < 2 || levels > 2 + static_cast<std::size_t>(max_octree_depth) || host_level_offset[0] != 0 ||
        host_level_offset[1] != 1)
      throw std::invalid_argument("device_octree::adopt: level_offset must have 2 to 23 entries starting 0, 1");
    for (std::size_t l = 1; l < levels; ++l)
      if (host_level_offset[l] <= host_level_offset[l - 1])
        throw std::invalid_argument("device_octree::adopt: level_offset must increase");
    const auto nodes = static_cast<std::size_t>(host_level_offset.back());
    if (leaf_count < 1 || static_cast<std::size_t>(leaf_count) > nodes || point_total < 0)
      throw std::invalid_argument("device_octree::adopt: leaf_count must be in [1, node_count], point_total >= 0");
    if (a.parent.size() < nodes || a.first_child.size() < nodes || a.child_count.size() < nodes ||
        a.point_begin.size() < nodes || a.point_count.size() < nodes ||
        a.leaves.size() < static_cast<std::size_t>(leaf_count) || a.level_offset.size() < levels ||
        a.points.size() < static_cast<std::size_t>(point_total))
      throw std::invalid_argument("device_octree::adopt: a device array is shorter than the tree needs");
    device_octree t;
    t.points_ = std::move(a.points);
    t.parent_ = std::move(a.parent);
    t.first_child_ = std::move(a.first_child);
    t.child_count_ = std::move(a.child_count);
    t.point_begin_ = std::move(a.point_begin);
    t.point_count_ = std::move(a.point_count);
    t.leaves_ = std::move(a.leaves);
    t.level_offset_ = std::move(a.level_offset);
    t.node_count_ = static_cast<std::int32_t>(nodes);
    t.leaf_count_ = leaf_count;
    t.point_total_ = point_total;
    t.depth_ = static_cast<std::int32_t>(levels) - 2;
    t.host_level_offset_ = std::move(host_level_offset);
    return t;
  }

  // Gives the device arrays back (to be refilled and adopted again), leaving this tree empty.
  arrays release() noexcept {
    arrays a{std::move(points_),      std::move(parent_),      std::move(first_child_), std::move(child_count_),
             std::move(point_begin_), std::move(point_count_), std::move(leaves_),      std::move(level_offset_)};
    *this = device_octree();
    return a;
  }

  device_octree(const device_octree&) = delete;
  device_octree& operator=(const device_octree&) = delete;
  // A moved-from device_octree is empty (node_count 0, null pointers).
  device_octree(device_octree&& other) noexcept { *this = std::move(other); }
  device_octree& operator=(device_octree&& other) noexcept {
    if (this != &other) {
      points_ = std::move(other.points_);
      parent_ = std::move(other.parent_);
      first_child_ = std::move(other.first_child_);
      child_count_ = std::move(other.child_count_);
      point_begin_ = std::move(other.point_begin_);
      point_count_ = std::move(other.point_count_);
      leaves_ = std::move(other.leaves_);
      level_offset_ = std::move(other.level_offset_);
      host_level_offset_ = std::exchange(other.host_level_offset_, {});
      node_count_ = std::exchange(other.node_count_, 0);
      leaf_count_ = std::exchange(other.leaf_count_, 0);
      point_total_ = std::exchange(other.point_total_, 0);
      depth_ = std::exchange(other.depth_, 0);
    }
    return *this;
  }
  ~device_octree() = default;

  octree_ref ref() const noexcept {
    octree_ref r;
    r.points = points_.data();
    r.parent = parent_.data();
    r.first_child = first_child_.data();
    r.child_count = child_count_.data();
    r.point_begin = point_begin_.data();
    r.point_count = point_count_.data();
    r.leaves = leaves_.data();
    r.level_offset = level_offset_.data();
    r.node_count = node_count_;
    r.leaf_count = leaf_count_;
    r.point_total = point_total_;
    r.depth = depth_;
    return r;
  }

  // Host copy of level_offset: level L holds nodes [level_offset[L], level_offset[L + 1]).
  // Host code sizes per-level launches from it without a device round trip.
  std::span<const std::int32_t> level_offset() const noexcept { return host_level_offset_; }
  std::int32_t node_count() const noexcept { return node_count_; }
  std::int32_t leaf_count() const noexcept { return leaf_count_; }
  std::int32_t point_total() const noexcept { return point_total_; }
  std::int32_t depth() const noexcept { return depth_; }
  // Device bytes the arrays hold (their capacity, which may exceed the tree: see arrays).
  std::size_t bytes() const noexcept {
    return points_.bytes() + parent_.bytes() + first_child_.bytes() + child_count_.bytes() + point_begin_.bytes() +
           point_count_.bytes() + leaves_.bytes() + level_offset_.bytes();
  }

 private:
  device_buffer<point> points_;
  device_buffer<std::int32_t> parent_, first_child_, child_count_, point_begin_, point_count_, leaves_,
      level_offset_;
  std::vector<std::int32_t> host_level_offset_;
  std::int32_t node_count_ = 0;
  std::int32_t leaf_count_ = 0;
  std::int32_t point_total_ = 0;
  std::int32_t depth_ = 0;
};

// One multipole<T> per node in device memory, indexed by node id; move-only. Contents are
// uninitialised until a pass (or upload) writes them.
template <class T>
class device_payloads {
 public:
  device_payloads() = default;
  explicit device_payloads(std::int32_t node_count) : storage_(checked_size(node_count)) {}

  multipole<T>* data() const noexcept { return storage_.data(); }
  std::int32_t size() const noexcept { return static_cast<std::int32_t>(storage_.size()); }
  std::size_t bytes() const noexcept { return storage_.size() * sizeof(multipole<T>); }

  // Synchronous copy to the host (waits for work on the legacy default stream; synchronise other
  // streams first).
  std::vector<multipole<T>> download() const { return storage_.download(); }

  // Copy from the host, complete on return (e.g. to poison the payloads before a test); sizes must
  // match.
  void upload(std::span<const multipole<T>> host) {
    if (host.size() != storage_.size())
      throw std::invalid_argument("device_payloads::upload: " + std::to_string(host.size()) + " payloads for " +
                                  std::to_string(storage_.size()) + " nodes");
    storage_.upload(host);
  }

  // Sets every byte to `value`, stream-ordered (0xff: NaN in every float and a count no node has,
  // so a node a run skips cannot pass a check).
  void fill_bytes(int value, cudaStream_t stream = nullptr) { storage_.fill_bytes(value, stream); }

 private:
  static std::size_t checked_size(std::int32_t node_count) {
    if (node_count < 0) throw std::invalid_argument("device_payloads: negative node count");
    return static_cast<std::size_t>(node_count);
  }
  device_buffer<multipole<T>> storage_;
};

}  // namespace canopy::trees
