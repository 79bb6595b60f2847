// device_octree_builder: build_octree's tree, built on the GPU. The per-point and per-node logic
// is octree_steps.hpp's (shared with build_octree and driven over host arrays by the CPU test
// tests/cpu/trees/octree_steps_test.cpp); this file adds the CUDA plumbing: CUB for the reduce,
// the sort, the scans and the leaf selection, and one kernel per step. Built only with CANOPY_GPU.
#include <canopy/cuda/error.hpp>
#include <canopy/cuda/event.hpp>
#include <canopy/passes/device_octree_builder.cuh>
#include <canopy/trees/errors.hpp>
#include <canopy/trees/morton.hpp>
#include <canopy/trees/octree_steps.hpp>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace canopy::trees {

namespace {

constexpr int block_threads = 256;  // a multiple of 32 (and so of 8: a node's 8 lanes share a warp)
constexpr std::int64_t int32_limit = std::numeric_limits<std::int32_t>::max();
constexpr const char* source_name = "device_octree_builder";

// The reduced extent and what the kernels derive from it, in device memory.
struct build_header {
  point_extent extent;
  box cube;
  morton_grid grid;
};

// Readers of the caller's points. Host-device only so that thrust's iterator may name them; they
// are called in device code only.
struct aos_reader {
  const point* p;
  CANOPY_HD point operator()(std::int32_t i) const { return p[i]; }  // one 16-byte load
};
struct soa_reader {
  const float* x;
  const float* y;
  const float* z;
  const float* m;
  CANOPY_HD point operator()(std::int32_t i) const { return point{x[i], y[i], z[i], m[i]}; }
};

template <class Reader>
struct extent_at {
  Reader read;
  CANOPY_HD point_extent operator()(std::int32_t i) const {
    const point q = read(i);
    return extent_of(q.x, q.y, q.z, q.m, i);
  }
};

struct merge_op {
  CANOPY_HD point_extent operator()(const point_extent& a, const point_extent& b) const { return merge_extents(a, b); }
};

struct is_leaf_slot {
  CANOPY_HD bool operator()(std::int32_t slot) const { return slot >= 0; }
};

struct node_arrays {
  std::int32_t* parent;
  std::int32_t* first_child;
  std::int32_t* child_count;
  std::int32_t* point_begin;
  std::int32_t* point_count;
  std::uint8_t* level;
  box* bounds;
  std::int64_t capacity;  // entries in each array
};

// One level's launch: its nodes are [begin, begin + width); the next level starts at `next`.
struct level_args {
  node_arrays nodes;
  const std::uint64_t* codes;  // sorted
  const build_header* header;
  std::int32_t* ends;         // 8 per node of the level: octant_end of each octant
  std::uint64_t* counts;      // width + 1: (splits << 32) | children; the last entry 0
  const std::uint64_t* offsets;  // exclusive sum of counts
  std::int32_t* leaf_slot;    // per point: the leaf whose range starts there, else -1
  std::int32_t* level_offset;
  std::int32_t begin;
  std::int32_t width;
  std::int32_t next;
  int level;
  int max_leaf;
  int max_depth;
};

std::int64_t blocks_for(std::int64_t threads) { return (threads + block_threads - 1) / block_threads; }

__global__ void start_tree(build_header* header, node_arrays nodes, std::int32_t n) {
  const box cube = bounding_cube(header->extent);
  header->cube = cube;
  header->grid = make_morton_grid(cube);
  nodes.parent[0] = -1;
  nodes.first_child[0] = -1;
  nodes.child_count[0] = 0;
  nodes.point_begin[0] = 0;
  nodes.point_count[0] = n;
  nodes.level[0] = 0;
  nodes.bounds[0] = cube;
}

// build_octree's tree of no points: an empty leaf root over the unit cube.
__global__ void empty_tree(node_arrays nodes, std::int32_t* leaves, std::int32_t* level_offset) {
  nodes.parent[0] = -1;
  nodes.first_child[0] = -1;
  nodes.child_count[0] = 0;
  nodes.point_begin[0] = 0;
  nodes.point_count[0] = 0;
  nodes.level[0] = 0;
  nodes.bounds[0] = box{{0.0, 0.0, 0.0}, {1.0, 1.0, 1.0}};
  leaves[0] = 0;
  level_offset[0] = 0;
  level_offset[1] = 1;
}

template <class Reader>
__global__ void compute_codes(Reader read, std::int32_t n, const build_header* header, std::uint64_t* codes,
                              std::int32_t* index) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const morton_grid grid = header->grid;
  codes[i] = morton_code(read(static_cast<std::int32_t>(i)), grid);
  index[i] = static_cast<std::int32_t>(i);
}

template <class Reader>
__global__ void gather_points(Reader read, std::int32_t n, const std::int32_t* permutation, point* out) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[i] = read(permutation[i]);
}

// 8 threads per node of the level, thread o finding where octant o ends (one binary search over
// the node's range: the searches of a node run side by side, so a level costs the latency of one
// search, not eight). A node that does not split is a leaf: it claims its first point's slot.
__global__ void split_level(level_args a) {
  const std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t == 0) {
    a.counts[a.width] = 0;  // so that the exclusive sum's last entry is the level's total
    a.level_offset[a.level] = a.begin;
    a.level_offset[a.level + 1] = a.next;
  }
  const std::int64_t k = t >> 3;
  if (k >= a.width) return;  // whole groups of 8 leave together
  const unsigned o = static_cast<unsigned>(t & 7);
  const std::int32_t node = a.begin + static_cast<std::int32_t>(k);
  const std::int32_t begin = a.nodes.point_begin[node];
  const std::int32_t count = a.nodes.point_count[node];
  if (!node_splits(count, a.level, a.max_leaf, a.max_depth)) {
    if (o == 0) {
      a.counts[k] = 0;
      a.leaf_slot[begin] = node;
    }
    return;
  }
  std::int32_t* ends = a.ends + 8 * k;
  ends[o] = o == 7 ? begin + count : octant_end(a.codes, begin, begin + count, a.level, o);
  __syncwarp(0xffu << (threadIdx.x & 24u));  // the node's 8 lanes; orders their writes before the reads
  if (o == 0) {
    std::int32_t e[8];
    for (int i = 0; i < 8; ++i) e[i] = ends[i];
    a.counts[k] = std::uint64_t{1} << 32 | static_cast<std::uint64_t>(child_total(occupied_octants(begin, e)));
  }
}

// 8 threads per node of the level again: the node's child links (every node: -1/0 for leaves), and
// thread o writes the child of octant o when it holds points. Children past the arrays' capacity
// are skipped; the host then grows the arrays and launches this again (it rewrites the same values).
__global__ void emit_children(level_args a) {
  const std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t k = t >> 3;
  if (k >= a.width) return;
  const unsigned o = static_cast<unsigned>(t & 7);
  const std::int32_t node = a.begin + static_cast<std::int32_t>(k);
  const std::uint64_t before = a.offsets[k];
  const auto children = static_cast<std::int32_t>(static_cast<std::uint32_t>(a.offsets[k + 1]) -
                                                  static_cast<std::uint32_t>(before));
  const std::int64_t first = static_cast<std::int64_t>(a.next) + static_cast<std::uint32_t>(before);
  if (o == 0) {
    // Past 2^31 - 1 nodes the host throws before anyone reads this.
    a.nodes.first_child[node] = children > 0 ? static_cast<std::int32_t>(first) : -1;
    a.nodes.child_count[node] = children;
  }
  if (children == 0) return;
  const std::int32_t begin = a.nodes.point_begin[node];
  std::int32_t e[8];
  for (int i = 0; i < 8; ++i) e[i] = a.ends[8 * k + i];
  const unsigned occupied = occupied_octants(begin, e);
  if (((occupied >> o) & 1u) == 0) return;
  const std::int64_t child = first + child_rank(occupied, o);
  if (child >= a.nodes.capacity) return;
  const std::int32_t from = o == 0 ? begin : e[o - 1];
  const int child_level = a.level + 1;
  a.nodes.parent[child] = node;
  a.nodes.first_child[child] = -1;
  a.nodes.child_count[child] = 0;
  a.nodes.point_begin[child] = from;
  a.nodes.point_count[child] = e[o] - from;
  a.nodes.level[child] = static_cast<std::uint8_t>(child_level);
  a.nodes.bounds[child] = cell_box(a.header->cube, morton_prefix(a.codes[from], child_level), child_level);
}

// Makes `b` hold at least `need` elements (contents not kept); `slack` > 1 leaves room to grow.
// Queued work may still use the old buffer: wait for it before freeing.
template <class T>
void ensure(device_buffer<T>& b, std::size_t need, cudaStream_t stream, double slack = 1.0) {
  if (b.size() >= need) return;
  if (!b.empty()) {
    CANOPY_CUDA_TRY(cudaStreamSynchronize(stream));
    b = device_buffer<T>();  // free first: lower peak memory
  }
  b = device_buffer<T>(std::max(need, static_cast<std::size_t>(static_cast<double>(need) * slack)));
}

// Makes `b` hold at least `need` elements, keeping the first `keep`.
template <class T>
void grow_keeping(device_buffer<T>& b, std::size_t need, std::size_t keep, cudaStream_t stream) {
  if (b.size() >= need) return;
  device_buffer<T> bigger(need);
  if (keep != 0)
    CANOPY_CUDA_TRY(cudaMemcpyAsync(bigger.data(), b.data(), keep * sizeof(T), cudaMemcpyDeviceToDevice, stream));
  CANOPY_CUDA_TRY(cudaStreamSynchronize(stream));  // the copy (and queued readers) before the old one goes
  b = std::move(bigger);
}

template <class T>
void download_into(std::vector<T>& host, const T* device, std::size_t n, cudaStream_t stream) {
  host.resize(n);
  if (n != 0)
    CANOPY_CUDA_TRY(cudaMemcpyAsync(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost, stream));
}

void require_device_memory(const void* p, const char* what) {
  if (p == nullptr) throw std::invalid_argument(std::string(source_name) + ": " + what + " is a null pointer");
  cudaPointerAttributes attributes{};
  cuda_check(cudaPointerGetAttributes(&attributes, p), "device_octree_builder: cudaPointerGetAttributes");
  if (attributes.type == cudaMemoryTypeUnregistered)
    throw std::invalid_argument(std::string(source_name) + ": " + what +
                                " is ordinary host memory; the builder reads points in device memory");
}

void check_options(const build_options& options, std::size_t count) {
  if (options.max_leaf < 1) {
    throw input_error(std::string(source_name) + ": max_leaf", "must be at least 1, got " + std::to_string(options.max_leaf));
  }
  if (options.max_depth < 0 || options.max_depth > max_octree_depth) {
    throw input_error(std::string(source_name) + ": max_depth", "must be in [0, " + std::to_string(max_octree_depth) +
                                                                    "], got " + std::to_string(options.max_depth));
  }
  if (count > static_cast<std::size_t>(int32_limit)) {
    throw input_error(source_name, std::to_string(count) + " points exceed the 2^31 - 1 that int32 point indices can address");
  }
}

}  // namespace

// ---------------------------------------------------------------- state -----------------------

struct device_octree_builder::state {
  state() {
    void* p = nullptr;
    CANOPY_CUDA_TRY(cudaMallocHost(&p, sizeof(status)));
    host = static_cast<status*>(p);
  }
  ~state() {
    if (host != nullptr) (void)cudaFreeHost(host);
  }
  state(const state&) = delete;
  state& operator=(const state&) = delete;

  // Read by the host after each level's synchronisation (pinned, so the copies are asynchronous).
  struct status {
    std::uint64_t level_total;    // the level's (splits << 32) | children
    std::int32_t first_rejected;  // level 0 only
  };
  status* host = nullptr;

  device_buffer<std::uint64_t> codes[2];    // the sort's key buffers
  device_buffer<std::int32_t> index_spare;  // the sort's second index buffer; then the leaf slots
  device_buffer<std::int32_t> ends;         // 8 per node of the widest level so far
  device_buffer<std::uint64_t> counts, offsets;
  device_buffer<build_header> header;
  device_buffer<std::int32_t> selected;     // DeviceSelect's count (the host knows it already)
  device_buffer<unsigned char> cub_temp;
  // CUB's size queries cost host time (occupancy and attribute calls); a repeated build of the
  // same size and layout (AoS 0, SoA 1) reuses the last answer.
  std::int64_t cub_queried_points[2] = {-1, -1};
  std::size_t cub_queried_bytes[2] = {0, 0};
  cuda_event done;                          // the end of the last build's work on the workspace
  bool done_recorded = false;
  // Phase timing (set_phase_timing): events between the phases of the last build, when asked for.
  bool time_phases = false;
  bool phases_recorded = false;
  cuda_event phase[7];
  void mark(int i, cudaStream_t stream) {
    if (time_phases) phase[i].record(stream);
  }

  std::size_t bytes() const noexcept {
    return codes[0].bytes() + codes[1].bytes() + index_spare.bytes() + ends.bytes() + counts.bytes() +
           offsets.bytes() + header.bytes() + selected.bytes() + cub_temp.bytes();
  }
};

device_octree_builder::device_octree_builder() = default;
device_octree_builder::~device_octree_builder() = default;
device_octree_builder::device_octree_builder(device_octree_builder&&) noexcept = default;
device_octree_builder& device_octree_builder::operator=(device_octree_builder&&) noexcept = default;

std::size_t device_octree_builder::workspace_bytes() const noexcept { return state_ ? state_->bytes() : 0; }

void device_octree_builder::set_phase_timing(bool on) {
  if (!state_) state_ = std::make_unique<state>();
  state_->time_phases = on;
}

std::optional<build_phase_times> device_octree_builder::last_phase_times() const {
  if (!state_ || !state_->phases_recorded) return std::nullopt;
  const cuda_event* e = state_->phase;
  return build_phase_times{elapsed_ms(e[0], e[1]), elapsed_ms(e[1], e[2]), elapsed_ms(e[2], e[3]), elapsed_ms(e[3], e[4]),
                           elapsed_ms(e[4], e[5]), elapsed_ms(e[5], e[6])};
}

namespace {

// CUB's temporary storage for every call of a build of n points (level scans are at most n + 1
// long), so that the levels never reallocate it.
template <class Reader>
std::size_t cub_bytes(std::int32_t n) {
  std::size_t most = 0, bytes = 0;
  const thrust::transform_iterator<extent_at<Reader>, thrust::counting_iterator<std::int32_t>> extents(
      thrust::counting_iterator<std::int32_t>(0), extent_at<Reader>{});
  CANOPY_CUDA_TRY(cub::DeviceReduce::Reduce(nullptr, bytes, extents, static_cast<point_extent*>(nullptr), n, merge_op{},
                                            empty_extent(), nullptr));
  most = std::max(most, bytes);
  cub::DoubleBuffer<std::uint64_t> keys(nullptr, nullptr);
  cub::DoubleBuffer<std::int32_t> values(nullptr, nullptr);
  CANOPY_CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys, values, n, 0, 3 * morton_bits_per_axis, nullptr));
  most = std::max(most, bytes);
  CANOPY_CUDA_TRY(cub::DeviceScan::ExclusiveSum(nullptr, bytes, static_cast<const std::uint64_t*>(nullptr),
                                                static_cast<std::uint64_t*>(nullptr), std::int64_t{n} + 1, nullptr));
  most = std::max(most, bytes);
  CANOPY_CUDA_TRY(cub::DeviceSelect::If(nullptr, bytes, static_cast<const std::int32_t*>(nullptr),
                                        static_cast<std::int32_t*>(nullptr), static_cast<std::int32_t*>(nullptr), n,
                                        is_leaf_slot{}, nullptr));
  return std::max(most, bytes);
}

// The result's buffers while they are being filled.
struct result_parts {
  device_octree::arrays tree;
  device_buffer<std::uint8_t> level;
  device_buffer<box> bounds;
  device_buffer<std::int32_t> permutation;

  explicit result_parts(built_device_octree& out)
      : tree(out.tree.release()),
        level(std::move(out.level)),
        bounds(std::move(out.bounds)),
        permutation(std::move(out.permutation)) {}

  node_arrays nodes() const {
    return node_arrays{tree.parent.data(),      tree.first_child.data(), tree.child_count.data(),
                       tree.point_begin.data(), tree.point_count.data(), level.data(),
                       bounds.data(),           static_cast<std::int64_t>(capacity())};
  }
  std::size_t capacity() const {
    return std::min({tree.parent.size(), tree.first_child.size(), tree.child_count.size(), tree.point_begin.size(),
                     tree.point_count.size(), level.size(), bounds.size()});
  }
  void ensure_nodes(std::size_t need, cudaStream_t stream) {
    ensure(tree.parent, need, stream);
    ensure(tree.first_child, need, stream);
    ensure(tree.child_count, need, stream);
    ensure(tree.point_begin, need, stream);
    ensure(tree.point_count, need, stream);
    ensure(level, need, stream);
    ensure(bounds, need, stream);
  }
  void grow_nodes(std::size_t need, std::size_t keep, cudaStream_t stream) {
    grow_keeping(tree.parent, need, keep, stream);
    grow_keeping(tree.first_child, need, keep, stream);
    grow_keeping(tree.child_count, need, keep, stream);
    grow_keeping(tree.point_begin, need, keep, stream);
    grow_keeping(tree.point_count, need, keep, stream);
    grow_keeping(level, need, keep, stream);
    grow_keeping(bounds, need, keep, stream);
  }
  void hand_over(built_device_octree& out, std::vector<std::int32_t> level_offset, std::int32_t leaves,
                 std::int32_t points) {
    out.tree = device_octree::adopt(std::move(tree), std::move(level_offset), leaves, points);
    out.level = std::move(level);
    out.bounds = std::move(bounds);
    out.permutation = std::move(permutation);
  }
};

template <class Reader, class Fetch>
void build_tree(device_octree_builder::state& s, Reader read, Fetch fetch_point, std::int32_t n,
                const build_options& options, built_device_octree& out, cudaStream_t stream) {
  // The previous build (perhaps on another stream) may still be selecting its leaves from the
  // workspace: this stream waits for it, so that waiting for this stream covers it too.
  if (s.done_recorded) CANOPY_CUDA_TRY(cudaStreamWaitEvent(stream, s.done.get(), 0));
  result_parts r(out);
  ensure(r.tree.level_offset, max_octree_depth + 2, stream);
  ensure(s.header, 1, stream);

  if (n == 0) {
    r.ensure_nodes(1, stream);
    ensure(r.tree.leaves, 1, stream);
    empty_tree<<<1, 1, 0, stream>>>(r.nodes(), r.tree.leaves.data(), r.tree.level_offset.data());
    CANOPY_CUDA_TRY(cudaGetLastError());
    s.done.record(stream);
    s.done_recorded = true;
    r.hand_over(out, {0, 1}, 1, 0);
    return;
  }

  const auto un = static_cast<std::size_t>(n);
  ensure(s.codes[0], un, stream);
  ensure(s.codes[1], un, stream);
  ensure(s.index_spare, un, stream);
  ensure(r.permutation, un, stream);
  ensure(r.tree.points, un, stream);
  ensure(s.selected, 1, stream);
  constexpr int layout = std::is_same_v<Reader, aos_reader> ? 0 : 1;
  if (s.cub_queried_points[layout] != n) {
    s.cub_queried_bytes[layout] = cub_bytes<Reader>(n);
    s.cub_queried_points[layout] = n;
  }
  ensure(s.cub_temp, s.cub_queried_bytes[layout], stream);
  // Adaptive trees have about 4 nodes per max_leaf points (Plummer 16M, max_leaf 32: 1.94M), and
  // 1.3 to 1.6 per point for max_leaf 1 (more with chains); the arrays grow x1.5 mid-build past
  // this first guess, so it need not be an upper bound.
  const std::size_t estimate = std::min<std::size_t>(un, 4 * un / static_cast<std::size_t>(options.max_leaf)) + 64;
  if (r.capacity() < estimate) r.ensure_nodes(estimate, stream);
  void* temp = s.cub_temp.data();
  std::size_t temp_bytes = s.cub_temp.size();

  // Extent and rejected points, the root cube, codes.
  build_header* header = s.header.data();
  const thrust::transform_iterator<extent_at<Reader>, thrust::counting_iterator<std::int32_t>> extents(
      thrust::counting_iterator<std::int32_t>(0), extent_at<Reader>{read});
  s.phases_recorded = false;
  s.mark(0, stream);
  CANOPY_CUDA_TRY(cub::DeviceReduce::Reduce(temp, temp_bytes, extents, &header->extent, n, merge_op{}, empty_extent(),
                                            stream));
  start_tree<<<1, 1, 0, stream>>>(header, r.nodes(), n);
  CANOPY_CUDA_TRY(cudaGetLastError());
  s.mark(1, stream);
  const auto point_blocks = static_cast<unsigned>(blocks_for(n));
  compute_codes<<<point_blocks, block_threads, 0, stream>>>(read, n, header, s.codes[0].data(), r.permutation.data());
  CANOPY_CUDA_TRY(cudaGetLastError());
  s.mark(2, stream);

  // Stable sort of (code, input index) over the 63 code bits. The sort ping-pongs between the two
  // buffers of each pair; whichever index buffer ends up sorted becomes the result's permutation.
  cub::DoubleBuffer<std::uint64_t> keys(s.codes[0].data(), s.codes[1].data());
  cub::DoubleBuffer<std::int32_t> values(r.permutation.data(), s.index_spare.data());
  CANOPY_CUDA_TRY(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys, values, n, 0, 3 * morton_bits_per_axis, stream));
  s.mark(3, stream);
  if (values.Current() != r.permutation.data()) std::swap(r.permutation, s.index_spare);
  const std::uint64_t* codes = keys.Current();
  gather_points<<<point_blocks, block_threads, 0, stream>>>(read, n, r.permutation.data(), r.tree.points.data());
  CANOPY_CUDA_TRY(cudaGetLastError());
  std::int32_t* leaf_slot = s.index_spare.data();
  CANOPY_CUDA_TRY(cudaMemsetAsync(leaf_slot, 0xff, un * sizeof(std::int32_t), stream));
  s.mark(4, stream);

  // Levels, top-down. The host learns each level's width once per level (one synchronisation),
  // which sizes the next level's launches.
  std::vector<std::int32_t> level_offset{0, 1};
  std::int64_t begin = 0, next = 1, leaves = 0;
  int level = 0;
  for (;; ++level) {
    const std::int64_t width = next - begin;
    ensure(s.ends, static_cast<std::size_t>(8 * width), stream, 1.25);
    ensure(s.counts, static_cast<std::size_t>(width + 1), stream, 1.25);
    ensure(s.offsets, static_cast<std::size_t>(width + 1), stream, 1.25);
    level_args a{r.nodes(),
                 codes,
                 header,
                 s.ends.data(),
                 s.counts.data(),
                 s.offsets.data(),
                 leaf_slot,
                 r.tree.level_offset.data(),
                 static_cast<std::int32_t>(begin),
                 static_cast<std::int32_t>(width),
                 static_cast<std::int32_t>(next),
                 level,
                 options.max_leaf,
                 options.max_depth};
    const auto node_blocks = static_cast<unsigned>(blocks_for(8 * width));
    split_level<<<node_blocks, block_threads, 0, stream>>>(a);
    CANOPY_CUDA_TRY(cudaGetLastError());
    CANOPY_CUDA_TRY(cub::DeviceScan::ExclusiveSum(temp, temp_bytes, s.counts.data(), s.offsets.data(), width + 1, stream));
    CANOPY_CUDA_TRY(cudaMemcpyAsync(&s.host->level_total, s.offsets.data() + width, sizeof(std::uint64_t),
                                    cudaMemcpyDeviceToHost, stream));
    if (level == 0) {
      CANOPY_CUDA_TRY(cudaMemcpyAsync(&s.host->first_rejected, &header->extent.first_rejected, sizeof(std::int32_t),
                                      cudaMemcpyDeviceToHost, stream));
    }
    // Emitted before the host knows the total (it writes what fits), so that the round trip
    // below waits for the whole level.
    emit_children<<<node_blocks, block_threads, 0, stream>>>(a);
    CANOPY_CUDA_TRY(cudaGetLastError());
    CANOPY_CUDA_TRY(cudaStreamSynchronize(stream));

    if (level == 0 && s.host->first_rejected != no_rejected_point) {
      const auto index = static_cast<std::size_t>(s.host->first_rejected);
      throw rejected_point_error(source_name, index, fetch_point(index));
    }
    const std::uint64_t total = s.host->level_total;
    const auto children = static_cast<std::int64_t>(total & 0xffffffffu);
    leaves += width - static_cast<std::int64_t>(total >> 32);
    if (children == 0) break;
    if (next + children > int32_limit) {
      throw input_error(source_name, "the tree would have more than 2^31 - 1 nodes (raise max_leaf or lower max_depth)");
    }
    if (static_cast<std::size_t>(next + children) > r.capacity()) {
      const auto grown = std::max(static_cast<std::size_t>(next + children), r.capacity() + r.capacity() / 2);
      r.grow_nodes(std::min(grown, static_cast<std::size_t>(int32_limit)), static_cast<std::size_t>(next), stream);
      a.nodes = r.nodes();
      emit_children<<<node_blocks, block_threads, 0, stream>>>(a);
      CANOPY_CUDA_TRY(cudaGetLastError());
    }
    begin = next;
    next += children;
    level_offset.push_back(static_cast<std::int32_t>(next));
  }

  // Leaves in Morton order: the leaf slots in point order, the empty ones dropped.
  s.mark(5, stream);
  ensure(r.tree.leaves, static_cast<std::size_t>(leaves), stream);
  CANOPY_CUDA_TRY(cub::DeviceSelect::If(temp, temp_bytes, leaf_slot, r.tree.leaves.data(), s.selected.data(), n,
                                        is_leaf_slot{}, stream));
  s.mark(6, stream);
  s.phases_recorded = s.time_phases;
  s.done.record(stream);
  s.done_recorded = true;
  r.hand_over(out, std::move(level_offset), static_cast<std::int32_t>(leaves), n);
}

}  // namespace

// ---------------------------------------------------------------- builder ---------------------

void device_octree_builder::build_into(const point* points, std::size_t count, const build_options& options,
                                       built_device_octree& out, cudaStream_t stream) {
  check_options(options, count);
  if (count != 0) require_device_memory(points, "points");
  if (!state_) state_ = std::make_unique<state>();
  const cudaStream_t s = stream;
  auto fetch = [points, s](std::size_t i) {
    point p{};
    CANOPY_CUDA_TRY(cudaMemcpyAsync(&p, points + i, sizeof(point), cudaMemcpyDeviceToHost, s));
    CANOPY_CUDA_TRY(cudaStreamSynchronize(s));
    return p;
  };
  build_tree(*state_, aos_reader{points}, fetch, static_cast<std::int32_t>(count), options, out, stream);
}

void device_octree_builder::build_into(const device_points_soa& points, std::size_t count,
                                       const build_options& options, built_device_octree& out, cudaStream_t stream) {
  check_options(options, count);
  if (count != 0) {
    require_device_memory(points.x, "points.x");
    require_device_memory(points.y, "points.y");
    require_device_memory(points.z, "points.z");
    require_device_memory(points.m, "points.m");
  }
  if (!state_) state_ = std::make_unique<state>();
  const cudaStream_t s = stream;
  auto fetch = [points, s](std::size_t i) {
    float v[4] = {};
    const float* from[4] = {points.x, points.y, points.z, points.m};
    for (int a = 0; a < 4; ++a)
      CANOPY_CUDA_TRY(cudaMemcpyAsync(&v[a], from[a] + i, sizeof(float), cudaMemcpyDeviceToHost, s));
    CANOPY_CUDA_TRY(cudaStreamSynchronize(s));
    return point{v[0], v[1], v[2], v[3]};
  };
  build_tree(*state_, soa_reader{points.x, points.y, points.z, points.m}, fetch, static_cast<std::int32_t>(count),
             options, out, stream);
}

built_device_octree device_octree_builder::build(const point* points, std::size_t count, const build_options& options,
                                                 cudaStream_t stream) {
  built_device_octree out;
  build_into(points, count, options, out, stream);
  return out;
}

built_device_octree device_octree_builder::build(const device_points_soa& points, std::size_t count,
                                                 const build_options& options, cudaStream_t stream) {
  built_device_octree out;
  build_into(points, count, options, out, stream);
  return out;
}

void device_octree_builder::reserve(std::size_t points, cudaStream_t stream) {
  if (points > static_cast<std::size_t>(int32_limit)) {
    throw input_error(source_name, std::to_string(points) + " points exceed the 2^31 - 1 that int32 point indices can address");
  }
  if (!state_) state_ = std::make_unique<state>();
  state& s = *state_;
  if (s.done_recorded) CANOPY_CUDA_TRY(cudaStreamWaitEvent(stream, s.done.get(), 0));
  ensure(s.codes[0], points, stream);
  ensure(s.codes[1], points, stream);
  ensure(s.index_spare, points, stream);
  ensure(s.header, 1, stream);
  ensure(s.selected, 1, stream);
  ensure(s.cub_temp, std::max(cub_bytes<aos_reader>(static_cast<std::int32_t>(points)),
                              cub_bytes<soa_reader>(static_cast<std::int32_t>(points))),
         stream);
}

// ---------------------------------------------------------------- result ----------------------

octree built_device_octree::download(cudaStream_t stream) const {
  octree t;
  const octree_ref r = tree.ref();
  const auto nodes = static_cast<std::size_t>(r.node_count);
  if (nodes == 0) return t;  // an empty (default or moved-from) result
  t.depth = r.depth;
  t.level_offset.assign(tree.level_offset().begin(), tree.level_offset().end());
  download_into(t.parent, r.parent, nodes, stream);
  download_into(t.first_child, r.first_child, nodes, stream);
  download_into(t.child_count, r.child_count, nodes, stream);
  download_into(t.point_begin, r.point_begin, nodes, stream);
  download_into(t.point_count, r.point_count, nodes, stream);
  download_into(t.level, static_cast<const std::uint8_t*>(level.data()), nodes, stream);
  download_into(t.bounds, static_cast<const box*>(bounds.data()), nodes, stream);
  download_into(t.leaves, r.leaves, static_cast<std::size_t>(r.leaf_count), stream);
  download_into(t.points, r.points, static_cast<std::size_t>(r.point_total), stream);
  CANOPY_CUDA_TRY(cudaStreamSynchronize(stream));
  return t;
}

std::vector<std::int32_t> built_device_octree::download_permutation(cudaStream_t stream) const {
  std::vector<std::int32_t> host;
  download_into(host, static_cast<const std::int32_t*>(permutation.data()),
                static_cast<std::size_t>(tree.point_total()), stream);
  CANOPY_CUDA_TRY(cudaStreamSynchronize(stream));
  return host;
}

std::size_t built_device_octree::bytes() const noexcept {
  return tree.bytes() + level.bytes() + bounds.bytes() + permutation.bytes();
}

}  // namespace canopy::trees
