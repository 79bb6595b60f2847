// SPDX-License-Identifier: Apache-2.0
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
#include <cuda/std/functional>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/reverse_iterator.h>
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

// The levels a build can have: 0..21.
constexpr int level_slots = max_octree_depth + 1;

std::int64_t blocks_for(std::int64_t threads) { return (threads + block_threads - 1) / block_threads; }

// The root cube: the points' bounding cube, or the caller's (build_options::cube; the host checks
// it against the extent at the build's one synchronisation).
__global__ void start_tree(build_header* header, bool given, box given_cube) {
  const box cube = given ? given_cube : bounding_cube(header->extent);
  header->cube = cube;
  header->grid = make_morton_grid(cube);
}

// build_octree's tree of no points: an empty leaf root over the unit cube.
__global__ void empty_tree(flat_tree_out nodes, std::int32_t* level_offset) {
  nodes.parent[0] = -1;
  nodes.first_child[0] = -1;
  nodes.child_count[0] = 0;
  nodes.point_begin[0] = 0;
  nodes.point_count[0] = 0;
  nodes.level[0] = 0;
  nodes.bounds[0] = box{{0.0, 0.0, 0.0}, {1.0, 1.0, 1.0}};
  nodes.leaves[0] = 0;
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

// The gather reads points at random: each thread keeps gather_items loads in flight (one per
// point left latency-bound at about a third of the copy bandwidth).
constexpr int gather_items = 4;

template <class Reader>
__global__ void gather_points(Reader read, std::int32_t n, const std::int32_t* permutation, point* out) {
  const std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * blockDim.x * gather_items + threadIdx.x;
  std::int32_t from[gather_items];
#pragma unroll
  for (int k = 0; k < gather_items; ++k) {
    const std::int64_t i = base + static_cast<std::int64_t>(k) * blockDim.x;
    from[k] = i < n ? permutation[i] : -1;
  }
  point p[gather_items];
#pragma unroll
  for (int k = 0; k < gather_items; ++k)
    if (from[k] >= 0) p[k] = read(from[k]);
#pragma unroll
  for (int k = 0; k < gather_items; ++k) {
    const std::int64_t i = base + static_cast<std::int64_t>(k) * blockDim.x;
    if (i < n) out[i] = p[k];
  }
}

// P[t] = window_level(t - window), 0 for t < window (octree_steps.hpp's sliding_max reads it).
__global__ void window_levels(const std::uint64_t* codes, std::int32_t n, std::int64_t window, std::uint8_t* p) {
  const std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= n + window) return;
  p[t] = t < window ? std::uint8_t{0} : window_level(codes, n, t - window, window);
}

// The segment of P an index lies in (the scans' keys).
struct segment_of {
  std::int64_t width;
  CANOPY_HD std::int64_t operator()(std::int64_t t) const { return t / width; }
};
struct max_u8 {
  CANOPY_HD std::uint8_t operator()(std::uint8_t a, std::uint8_t b) const { return a < b ? b : a; }
};

// The span kernels' per-block node counts: a shared counter per level, cleared, added to for
// every level of a point's span, then flushed to `level_nodes` (one atomic per level and block).
__device__ void clear_level_counts(std::int32_t* counts) {
  for (int l = static_cast<int>(threadIdx.x); l < level_slots; l += blockDim.x) counts[l] = 0;
}
__device__ void flush_level_counts(const std::int32_t* counts, std::int32_t* level_nodes) {
  for (int l = static_cast<int>(threadIdx.x); l < level_slots; l += blockDim.x)
    if (counts[l] != 0) atomicAdd(&level_nodes[l], counts[l]);
}
// Point i's span from its first level and the largest window level over the windows it is in.
__device__ void record_span(std::int64_t i, int first, std::uint8_t largest, int max_depth, std::uint16_t* span,
                            std::int32_t* counts) {
  const int leaf = leaf_level(largest, max_depth);
  span[i] = pack_span(first, leaf);
  for (int l = first; l <= leaf; ++l) atomicAdd(&counts[l], 1);
}

// Per point: its span (first level, leaf level), and the node count of every level.
__global__ void point_spans(const std::uint64_t* codes, std::int32_t n, const std::uint8_t* pre, const std::uint8_t* suf,
                            std::int64_t width, int max_depth, std::uint16_t* span, std::int32_t* level_nodes) {
  __shared__ std::int32_t counts[level_slots];
  clear_level_counts(counts);
  __syncthreads();
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) record_span(i, first_level(codes, i), sliding_max(pre, suf, i, width), max_depth, span, counts);
  __syncthreads();
  flush_level_counts(counts, level_nodes);
}

// point_spans for windows up to tile_window_limit, in one pass over the codes: a block's tile of
// tile_points points loads the codes it and its windows need into shared memory once, computes
// the window levels there and their sliding maximum by doubling (log2(window + 1) rounds), then
// the spans. Same results as window_levels + the two scans + point_spans.
constexpr int tile_points = 1024;
constexpr int tile_window_limit = 1024;

std::size_t tile_shared_bytes(std::int64_t window) {
  return static_cast<std::size_t>(tile_points + 2 * window) * sizeof(std::uint64_t) +
         2 * static_cast<std::size_t>(tile_points + window);
}

__global__ void point_spans_tiled(const std::uint64_t* codes, std::int32_t n, int window, int max_depth,
                                  std::uint16_t* span, std::int32_t* level_nodes) {
  extern __shared__ std::uint64_t tile_codes[];  // [tile_points + 2 window): points i0 - window ...
  __shared__ std::int32_t counts[level_slots];
  const int levels_len = tile_points + window;  // window levels of j = i0 - window ...
  auto* levels = reinterpret_cast<std::uint8_t*>(tile_codes + tile_points + 2 * window);
  std::uint8_t* other = levels + levels_len;
  const std::int64_t i0 = static_cast<std::int64_t>(blockIdx.x) * tile_points;
  const std::int64_t j0 = i0 - window;
  clear_level_counts(counts);
  for (int u = static_cast<int>(threadIdx.x); u < tile_points + 2 * window; u += blockDim.x) {
    const std::int64_t j = j0 + u;
    tile_codes[u] = j >= 0 && j < n ? codes[j] : 0;
  }
  __syncthreads();
  for (int u = static_cast<int>(threadIdx.x); u < levels_len; u += blockDim.x) {
    const std::int64_t j = j0 + u;
    levels[u] = j < 0 || j + window >= n ? std::uint8_t{0} : window_level(tile_codes[u], tile_codes[u + window]);
  }
  __syncthreads();
  // After round k, levels[u] = max over [u, u + 2^(k+1)) (valid while u + 2^(k+1) <= levels_len).
  int reach = 1;
  while (2 * reach <= window + 1) {
    for (int u = static_cast<int>(threadIdx.x); u + 2 * reach <= levels_len; u += blockDim.x)
      other[u] = max_u8{}(levels[u], levels[u + reach]);
    __syncthreads();
    std::uint8_t* swap = levels;
    levels = other;
    other = swap;
    reach *= 2;
  }
  for (int k = static_cast<int>(threadIdx.x); k < tile_points; k += blockDim.x) {
    const std::int64_t i = i0 + k;
    if (i >= n) break;
    const int first = i == 0 ? 0 : first_level(tile_codes[k + window - 1], tile_codes[k + window]);
    record_span(i, first, max_u8{}(levels[k], levels[k + window + 1 - reach]), max_depth, span, counts);
  }
  __syncthreads();
  flush_level_counts(counts, level_nodes);
}

struct is_leaf_start {
  const std::uint16_t* span;
  CANOPY_HD bool operator()(std::int32_t i) const { return starts_leaf(span[i]); }
};
struct nodes_of_leaf {
  const std::uint16_t* span;
  CANOPY_HD std::int32_t operator()(std::int32_t i) const { return span_nodes(span[i]); }
};

// The device's level_offset from the level counts (every slot: past the depth they repeat the total).
__global__ void level_offsets(const std::int32_t* level_nodes, std::int32_t* level_offset) {
  std::int32_t sum = 0;
  level_offset[0] = 0;
  for (int l = 0; l < level_slots; ++l) level_offset[l + 1] = sum += level_nodes[l];
}

// One thread per leaf start e: its nodes, one per level of its span, as (level, e) pairs at
// position[e]; the stable sort by level then numbers them as build_octree does.
__global__ void expand_nodes(const std::int32_t* leaf_point, std::int32_t leaves, const std::uint16_t* span,
                             const std::int32_t* position, std::uint8_t* level_key, std::int32_t* node_leaf) {
  const std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= leaves) return;
  const std::uint16_t s = span[leaf_point[e]];
  std::int32_t at = position[e];
  for (int l = span_first(s); l <= span_leaf(s); ++l, ++at) {
    level_key[at] = static_cast<std::uint8_t>(l);
    node_leaf[at] = static_cast<std::int32_t>(e);
  }
}

// One thread per node: its slot's entry in the inverse numbering (flat_tree_view::node_of_slot).
__global__ void number_nodes(const std::int32_t* node_leaf, const std::uint8_t* level_key, std::int32_t nodes_total,
                             const std::int32_t* leaf_point, const std::uint16_t* span, const std::int32_t* first_slot,
                             std::int32_t* node_of_slot) {
  const std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= nodes_total) return;
  const std::int32_t e = node_leaf[t];
  node_of_slot[first_slot[e] + level_key[t] - span_first(span[leaf_point[e]])] = static_cast<std::int32_t>(t);
}

// One thread per node: emit_flat_node (octree_steps.hpp).
__global__ void emit_nodes(flat_tree_view v, const build_header* header, const std::uint8_t* level_key,
                           std::int32_t nodes_total, flat_tree_out out) {
  const std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= nodes_total) return;
  emit_flat_node(v, header->cube, static_cast<std::int32_t>(t), level_key[t], out);
}

// Makes `b` hold at least `need` elements (contents not kept); `slack` > 1 leaves room to grow.
// A buffer that must grow again gets at least an eighth more than it needs: a tree rebuilt every
// step whose points or nodes grow a little (a rank of a distributed run) then reallocates rarely,
// and each reallocation is a cudaFree that waits for the device and a cudaMalloc, which slow down
// several times with one process per GPU on a 4-GPU host. Queued work may still use the old buffer:
// wait for it before freeing.
template <class T>
void ensure(device_buffer<T>& b, std::size_t need, cudaStream_t stream, double slack = 1.0) {
  if (b.size() >= need) return;
  if (!b.empty()) {
    CANOPY_CUDA_TRY(cudaStreamSynchronize(stream));
    b = device_buffer<T>();  // free first: lower peak memory
    slack = std::max(slack, 1.125);
  }
  b = device_buffer<T>(std::max(need, static_cast<std::size_t>(static_cast<double>(need) * slack)));
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

  // Read by the host at the build's one synchronisation (pinned, so the copies are asynchronous).
  struct status {
    point_extent extent;                          // checked against a given cube
    std::int32_t first_rejected;
    std::int32_t leaves;                          // the leaf starts DeviceSelect found
    std::int32_t level_nodes[max_octree_depth + 1];  // nodes per level
  };
  status* host = nullptr;

  // Per point: the sort's second key buffer (then the window levels and their two scans, then the
  // leaf starts and their node positions) and its second index buffer (then the points' spans).
  device_buffer<std::uint64_t> codes[2];
  device_buffer<std::int32_t> index_spare;
  // Per node: the (level, leaf start) pairs and the sort's second buffers.
  device_buffer<std::uint8_t> node_key[2];
  device_buffer<std::int32_t> node_leaf[2];
  device_buffer<std::int32_t> level_nodes;  // nodes per level
  device_buffer<build_header> header;
  device_buffer<std::int32_t> selected;     // DeviceSelect's count
  device_buffer<unsigned char> cub_temp;
  // CUB's size queries cost host time (occupancy and attribute calls); a repeated build of the
  // same size and layout (AoS 0, SoA 1) reuses the last answer, and the node sort's answer is kept
  // for the node buffers' capacity.
  std::int64_t cub_queried_points[2] = {-1, -1};
  std::size_t cub_queried_bytes[2] = {0, 0};
  std::size_t node_sort_queried_for = 0;
  std::size_t node_sort_bytes = 0;
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
    return codes[0].bytes() + codes[1].bytes() + index_spare.bytes() + node_key[0].bytes() + node_key[1].bytes() +
           node_leaf[0].bytes() + node_leaf[1].bytes() + level_nodes.bytes() + header.bytes() + selected.bytes() +
           cub_temp.bytes();
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

// The window scans' iterators: keys are segment numbers, the suffix scan runs backwards.
using segment_keys = thrust::transform_iterator<segment_of, thrust::counting_iterator<std::int64_t>>;
using reverse_keys = thrust::reverse_iterator<segment_keys>;
using reverse_bytes = thrust::reverse_iterator<std::uint8_t*>;
using leaf_starts = thrust::counting_iterator<std::int32_t>;
using leaf_node_counts = thrust::transform_iterator<nodes_of_leaf, const std::int32_t*>;

// CUB's temporary storage for every call of a build of n points but the node sort (the window
// scans run over at most 2n entries, the leaf starts are at most n).
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
  const auto window_items = static_cast<std::uint32_t>(2 * static_cast<std::int64_t>(n));
  const segment_keys segments(thrust::counting_iterator<std::int64_t>(0), segment_of{1});
  CANOPY_CUDA_TRY(cub::DeviceScan::InclusiveScanByKey(nullptr, bytes, segments, static_cast<std::uint8_t*>(nullptr),
                                                      static_cast<std::uint8_t*>(nullptr), max_u8{}, window_items,
                                                      cuda::std::equal_to<>{}, nullptr));
  most = std::max(most, bytes);
  CANOPY_CUDA_TRY(cub::DeviceScan::InclusiveScanByKey(nullptr, bytes, reverse_keys(segments), reverse_bytes(nullptr),
                                                      reverse_bytes(nullptr), max_u8{}, window_items,
                                                      cuda::std::equal_to<>{}, nullptr));
  most = std::max(most, bytes);
  CANOPY_CUDA_TRY(cub::DeviceSelect::If(nullptr, bytes, leaf_starts(0), static_cast<std::int32_t*>(nullptr),
                                        static_cast<std::int32_t*>(nullptr), n, is_leaf_start{}, nullptr));
  most = std::max(most, bytes);
  CANOPY_CUDA_TRY(cub::DeviceScan::ExclusiveSum(nullptr, bytes, leaf_node_counts(nullptr, nodes_of_leaf{}),
                                                static_cast<std::int32_t*>(nullptr), n, nullptr));
  return std::max(most, bytes);
}

// The node sort's temporary storage for `nodes` (level, leaf start) pairs.
std::size_t node_sort_bytes(std::size_t nodes) {
  std::size_t bytes = 0;
  cub::DoubleBuffer<std::uint8_t> keys(nullptr, nullptr);
  cub::DoubleBuffer<std::int32_t> values(nullptr, nullptr);
  CANOPY_CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys, values, static_cast<std::int64_t>(nodes), 0, 5,
                                                  nullptr));
  return bytes;
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

  flat_tree_out nodes(std::int32_t* leaves) const {
    return flat_tree_out{tree.parent.data(),      tree.first_child.data(), tree.child_count.data(),
                         tree.point_begin.data(), tree.point_count.data(), level.data(),
                         bounds.data(),           leaves};
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
  // The previous build (perhaps on another stream) may still be emitting its nodes from the
  // workspace: this stream waits for it, so that waiting for this stream covers it too.
  if (s.done_recorded) CANOPY_CUDA_TRY(cudaStreamWaitEvent(stream, s.done.get(), 0));
  result_parts r(out);
  ensure(r.tree.level_offset, max_octree_depth + 2, stream);
  ensure(s.header, 1, stream);

  if (n == 0) {
    r.ensure_nodes(1, stream);
    ensure(r.tree.leaves, 1, stream);
    empty_tree<<<1, 1, 0, stream>>>(r.nodes(r.tree.leaves.data()), r.tree.level_offset.data());
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
  ensure(s.level_nodes, level_slots, stream);
  constexpr int layout = std::is_same_v<Reader, aos_reader> ? 0 : 1;
  if (s.cub_queried_points[layout] != n) {
    s.cub_queried_bytes[layout] = cub_bytes<Reader>(n);
    s.cub_queried_points[layout] = n;
  }
  ensure(s.cub_temp, s.cub_queried_bytes[layout], stream);
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
  start_tree<<<1, 1, 0, stream>>>(header, options.cube.has_value(), options.cube.value_or(box{}));
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
  gather_points<<<static_cast<unsigned>(blocks_for((std::int64_t{n} + gather_items - 1) / gather_items)), block_threads, 0, stream>>>(
      read, n, r.permutation.data(), r.tree.points.data());
  CANOPY_CUDA_TRY(cudaGetLastError());
  s.mark(4, stream);

  // Spans (octree_steps.hpp, "the flat build"): in one tiled pass for windows up to
  // tile_window_limit points, else through the scans: the free key buffer then holds the window
  // levels P and their segment-wise prefix and suffix maxima (3 (n + window) <= 6n bytes of its 8n).
  const std::int64_t window = std::min<std::int64_t>(options.max_leaf, n);  // windows past n are all 0
  auto* scratch = reinterpret_cast<std::uint8_t*>(keys.Alternate());
  auto* span = reinterpret_cast<std::uint16_t*>(s.index_spare.data());
  CANOPY_CUDA_TRY(cudaMemsetAsync(s.level_nodes.data(), 0, level_slots * sizeof(std::int32_t), stream));
  if (window <= tile_window_limit) {
    point_spans_tiled<<<static_cast<unsigned>((std::int64_t{n} + tile_points - 1) / tile_points), block_threads,
                        tile_shared_bytes(window), stream>>>(codes, n, static_cast<int>(window), options.max_depth,
                                                             span, s.level_nodes.data());
    CANOPY_CUDA_TRY(cudaGetLastError());
  } else {
    const std::int64_t width = window + 1;
    const auto window_items = static_cast<std::uint32_t>(n + window);
    std::uint8_t* p = scratch;
    std::uint8_t* pre = p + window_items;
    std::uint8_t* suf = pre + window_items;
    window_levels<<<static_cast<unsigned>(blocks_for(window_items)), block_threads, 0, stream>>>(codes, n, window, p);
    CANOPY_CUDA_TRY(cudaGetLastError());
    const segment_keys segments(thrust::counting_iterator<std::int64_t>(0), segment_of{width});
    CANOPY_CUDA_TRY(cub::DeviceScan::InclusiveScanByKey(temp, temp_bytes, segments, p, pre, max_u8{}, window_items,
                                                        cuda::std::equal_to<>{}, stream));
    const reverse_keys back_segments(segments + window_items);
    CANOPY_CUDA_TRY(cub::DeviceScan::InclusiveScanByKey(temp, temp_bytes, back_segments, reverse_bytes(p + window_items),
                                                        reverse_bytes(suf + window_items), max_u8{}, window_items,
                                                        cuda::std::equal_to<>{}, stream));
    point_spans<<<point_blocks, block_threads, 0, stream>>>(codes, n, pre, suf, width, options.max_depth, span,
                                                            s.level_nodes.data());
    CANOPY_CUDA_TRY(cudaGetLastError());
  }
  // The leaf starts in point order (the scans are done with the scratch: it now holds them).
  auto* leaf_point = reinterpret_cast<std::int32_t*>(scratch);
  std::int32_t* position = leaf_point + un;  // 4n + 4n bytes of the 8n
  CANOPY_CUDA_TRY(cub::DeviceSelect::If(temp, temp_bytes, leaf_starts(0), leaf_point, s.selected.data(), n,
                                        is_leaf_start{span}, stream));

  // The build's one host round trip: the rejected-point check, the leaf and node counts.
  CANOPY_CUDA_TRY(cudaMemcpyAsync(&s.host->first_rejected, &header->extent.first_rejected, sizeof(std::int32_t),
                                  cudaMemcpyDeviceToHost, stream));
  if (options.cube) {
    CANOPY_CUDA_TRY(cudaMemcpyAsync(&s.host->extent, &header->extent, sizeof(point_extent), cudaMemcpyDeviceToHost,
                                    stream));
  }
  CANOPY_CUDA_TRY(cudaMemcpyAsync(&s.host->leaves, s.selected.data(), sizeof(std::int32_t), cudaMemcpyDeviceToHost, stream));
  CANOPY_CUDA_TRY(cudaMemcpyAsync(s.host->level_nodes, s.level_nodes.data(), level_slots * sizeof(std::int32_t),
                                  cudaMemcpyDeviceToHost, stream));
  CANOPY_CUDA_TRY(cudaStreamSynchronize(stream));
  if (s.host->first_rejected != no_rejected_point) {
    const auto index = static_cast<std::size_t>(s.host->first_rejected);
    throw rejected_point_error(source_name, index, fetch_point(index));
  }
  if (options.cube) {
    const point_extent& e = s.host->extent;
    const double lo[3] = {e.lo[0], e.lo[1], e.lo[2]};
    const double hi[3] = {e.hi[0], e.hi[1], e.hi[2]};
    if (const std::string problem = given_cube_problem(*options.cube, lo, hi); !problem.empty()) {
      throw input_error(std::string(source_name) + ": cube", problem);
    }
  }
  const std::int32_t leaves = s.host->leaves;
  std::vector<std::int32_t> level_offset{0};
  std::int64_t total = 0;
  for (int l = 0; l < level_slots && s.host->level_nodes[l] != 0; ++l) {
    total += s.host->level_nodes[l];
    if (total > int32_limit) {
      throw input_error(source_name, "the tree would have more than 2^31 - 1 nodes (raise max_leaf or lower max_depth)");
    }
    level_offset.push_back(static_cast<std::int32_t>(total));
  }
  const auto nodes = static_cast<std::size_t>(total);

  // Nodes: numbered by a stable sort of (level, leaf start) pairs, then emitted one thread each.
  s.mark(5, stream);
  r.ensure_nodes(nodes, stream);
  ensure(r.tree.leaves, static_cast<std::size_t>(leaves), stream);
  for (int b = 0; b < 2; ++b) {
    ensure(s.node_key[b], nodes, stream, 1.25);
    ensure(s.node_leaf[b], nodes, stream, 1.25);
  }
  if (s.node_sort_queried_for != s.node_key[0].size()) {
    s.node_sort_bytes = node_sort_bytes(s.node_key[0].size());
    s.node_sort_queried_for = s.node_key[0].size();
  }
  if (s.cub_temp.size() < s.node_sort_bytes) {
    ensure(s.cub_temp, s.node_sort_bytes, stream);
    temp = s.cub_temp.data();
    temp_bytes = s.cub_temp.size();
  }
  level_offsets<<<1, 1, 0, stream>>>(s.level_nodes.data(), r.tree.level_offset.data());
  CANOPY_CUDA_TRY(cudaGetLastError());
  CANOPY_CUDA_TRY(cub::DeviceScan::ExclusiveSum(temp, temp_bytes, leaf_node_counts(leaf_point, nodes_of_leaf{span}),
                                                position, leaves, stream));
  expand_nodes<<<static_cast<unsigned>(blocks_for(leaves)), block_threads, 0, stream>>>(
      leaf_point, leaves, span, position, s.node_key[0].data(), s.node_leaf[0].data());
  CANOPY_CUDA_TRY(cudaGetLastError());
  cub::DoubleBuffer<std::uint8_t> node_keys(s.node_key[0].data(), s.node_key[1].data());
  cub::DoubleBuffer<std::int32_t> node_values(s.node_leaf[0].data(), s.node_leaf[1].data());
  CANOPY_CUDA_TRY(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, node_keys, node_values,
                                                  static_cast<std::int64_t>(nodes), 0, 5, stream));
  // The inverse numbering goes to the sort's free value buffer.
  std::int32_t* node_of_slot = node_values.Alternate();
  const auto node_blocks = static_cast<unsigned>(blocks_for(static_cast<std::int64_t>(nodes)));
  number_nodes<<<node_blocks, block_threads, 0, stream>>>(node_values.Current(), node_keys.Current(),
                                                          static_cast<std::int32_t>(nodes), leaf_point, span, position,
                                                          node_of_slot);
  CANOPY_CUDA_TRY(cudaGetLastError());
  const flat_tree_view view{codes,    n,           leaf_point, leaves, span, node_values.Current(), position,
                            node_of_slot, r.tree.level_offset.data()};
  emit_nodes<<<node_blocks, block_threads, 0, stream>>>(view, header, node_keys.Current(), static_cast<std::int32_t>(nodes),
                                                        r.nodes(r.tree.leaves.data()));
  CANOPY_CUDA_TRY(cudaGetLastError());
  s.mark(6, stream);
  s.phases_recorded = s.time_phases;
  s.done.record(stream);
  s.done_recorded = true;
  r.hand_over(out, std::move(level_offset), leaves, n);
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
