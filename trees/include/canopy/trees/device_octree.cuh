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
// Host code only besides the view; needs nvcc (or at least cuda_runtime.h). Every CUDA runtime
// call is checked: a failure throws canopy::trees::cuda_error naming the call, file:line and the
// CUDA error string.
#pragma once

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

// A CUDA runtime call failed. what() == "<file>:<line>: <call>: <cudaErrorName>: <description>".
class cuda_error : public std::runtime_error {
 public:
  cuda_error(cudaError_t code, const std::string& what) : std::runtime_error(what), code_(code) {}
  cudaError_t code() const noexcept { return code_; }

 private:
  cudaError_t code_;
};

namespace detail {
[[noreturn]] inline void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line) {
  throw cuda_error(code, std::string(file) + ":" + std::to_string(line) + ": " + call + ": " +
                             cudaGetErrorName(code) + ": " + cudaGetErrorString(code));
}
}  // namespace detail

}  // namespace canopy::trees

// Throws canopy::trees::cuda_error when `call` (an expression of type cudaError_t) fails.
#define CANOPY_TREES_CUDA_CHECK(call)                                                   \
  do {                                                                                  \
    const cudaError_t canopy_trees_cuda_err_ = (call);                                  \
    if (canopy_trees_cuda_err_ != cudaSuccess)                                          \
      ::canopy::trees::detail::throw_cuda_error(canopy_trees_cuda_err_, #call, __FILE__, __LINE__); \
  } while (0)

namespace canopy::trees {

// Device view of an octree (the arrays of octree.hpp, in device memory). Trivially copyable:
// pass it by value to kernels. Valid while the device_octree it came from lives and is not moved.
struct octree_ref {
  const point* points = nullptr;              // sorted by Morton code; 16-byte aligned (float4 loads)
  const std::int32_t* parent = nullptr;       // -1 for the root
  const std::int32_t* first_child = nullptr;  // -1 for leaves
  const std::int32_t* child_count = nullptr;  // 0 for leaves
  const std::int32_t* point_begin = nullptr;
  const std::int32_t* point_count = nullptr;
  const std::int32_t* leaves = nullptr;        // leaf ids in Morton order (= increasing point_begin)
  const std::int32_t* level_offset = nullptr;  // depth + 2 entries; also kept on the host
  std::int32_t node_count = 0;
  std::int32_t leaf_count = 0;
  std::int32_t point_total = 0;  // number of points
  std::int32_t depth = 0;        // deepest level (root is level 0)
};

static_assert(std::is_trivially_copyable_v<octree_ref>, "octree_ref is passed by value into kernels");

namespace detail {

// Owning cudaMalloc'd array of n elements of T (uninitialised unless uploaded); move-only.
template <class T>
class device_array {
 public:
  device_array() = default;
  explicit device_array(std::size_t n) : size_(n) {
    if (n != 0) CANOPY_TREES_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), n * sizeof(T)));
  }
  explicit device_array(std::span<const T> host) : device_array(host.size()) {
    if (!host.empty())
      CANOPY_TREES_CUDA_CHECK(cudaMemcpy(data_, host.data(), host.size_bytes(), cudaMemcpyHostToDevice));
  }
  device_array(const device_array&) = delete;
  device_array& operator=(const device_array&) = delete;
  device_array(device_array&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  device_array& operator=(device_array&& other) noexcept {
    if (this != &other) {
      release();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  ~device_array() { release(); }

  T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }

 private:
  void release() noexcept {
    // cudaFree can only report an earlier asynchronous error here; a destructor must not throw.
    if (data_ != nullptr) (void)cudaFree(data_);
    data_ = nullptr;
    size_ = 0;
  }
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace detail

// Owner of device copies of an octree's arrays (points, parent, first_child, child_count,
// point_begin, point_count, leaves, level_offset). level and bounds are not copied: no upward pass
// needs them. Copies are synchronous (cudaMemcpy) and made once, at construction.
class device_octree {
 public:
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

    points_ = detail::device_array<point>(std::span<const point>(tree.points));
    parent_ = detail::device_array<std::int32_t>(std::span<const std::int32_t>(tree.parent));
    first_child_ = detail::device_array<std::int32_t>(std::span<const std::int32_t>(tree.first_child));
    child_count_ = detail::device_array<std::int32_t>(std::span<const std::int32_t>(tree.child_count));
    point_begin_ = detail::device_array<std::int32_t>(std::span<const std::int32_t>(tree.point_begin));
    point_count_ = detail::device_array<std::int32_t>(std::span<const std::int32_t>(tree.point_count));
    leaves_ = detail::device_array<std::int32_t>(std::span<const std::int32_t>(tree.leaves));
    level_offset_ = detail::device_array<std::int32_t>(std::span<const std::int32_t>(tree.level_offset));
    // A copy from pageable memory may return before its DMA lands; a kernel on a non-blocking
    // stream would not wait for it.
    if (n != 0) CANOPY_TREES_CUDA_CHECK(cudaStreamSynchronize(nullptr));
    host_level_offset_ = tree.level_offset;
    node_count_ = static_cast<std::int32_t>(n);
    leaf_count_ = static_cast<std::int32_t>(tree.leaves.size());
    point_total_ = static_cast<std::int32_t>(tree.points.size());
    depth_ = n == 0 ? 0 : tree.depth;
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

 private:
  detail::device_array<point> points_;
  detail::device_array<std::int32_t> parent_, first_child_, child_count_, point_begin_, point_count_, leaves_,
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
  std::vector<multipole<T>> download() const {
    std::vector<multipole<T>> host(storage_.size());
    if (!host.empty())
      CANOPY_TREES_CUDA_CHECK(cudaMemcpy(host.data(), storage_.data(), bytes(), cudaMemcpyDeviceToHost));
    return host;
  }

  // Copy from the host, complete on return (e.g. to poison the payloads before a test); sizes must
  // match.
  void upload(std::span<const multipole<T>> host) {
    if (host.size() != storage_.size())
      throw std::invalid_argument("device_payloads::upload: " + std::to_string(host.size()) + " payloads for " +
                                  std::to_string(storage_.size()) + " nodes");
    if (!host.empty()) {
      CANOPY_TREES_CUDA_CHECK(cudaMemcpy(storage_.data(), host.data(), bytes(), cudaMemcpyHostToDevice));
      CANOPY_TREES_CUDA_CHECK(cudaStreamSynchronize(nullptr));  // as in device_octree's constructor
    }
  }

 private:
  static std::size_t checked_size(std::int32_t node_count) {
    if (node_count < 0) throw std::invalid_argument("device_payloads: negative node count");
    return static_cast<std::size_t>(node_count);
  }
  detail::device_array<multipole<T>> storage_;
};

}  // namespace canopy::trees
