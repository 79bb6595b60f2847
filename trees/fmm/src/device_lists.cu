// SPDX-License-Identifier: Apache-2.0
// The device twins of compute_cell_geometry, build_interaction_lists and build_task_dag
// (canopy/fmm/device_lists.hpp says what each computes and why it equals the host's).
#include <canopy/cuda/error.hpp>
#include <canopy/fmm/detail/geometry_ops.hpp>
#include <canopy/fmm/device_lists.hpp>

#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>
#include <cuda/atomic>
#include <thrust/iterator/counting_iterator.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "device_copy.cuh"

namespace canopy::fmm {
namespace {

constexpr int threads = 256;

unsigned grid_for(std::int64_t items, int per_block = threads) {
  return static_cast<unsigned>(std::max<std::int64_t>((items + per_block - 1) / per_block, 1));
}

// The set-up's temporaries: from the caller's memory pool when it gives one (cudaMallocFromPoolAsync,
// freed with cudaFreeAsync in the stream's order), else cudaMalloc and cudaFree. A pool that keeps
// what is freed (cudaMemPoolAttrReleaseThreshold) serves a caller that builds again and again (the
// N-body step builds for every tree) with no driver call, where cudaMalloc and cudaFree cost every
// time: on an H200, cudaFree takes about 0.8 ms a GB and cudaMalloc 0.2
// (bench/results/h200/fmm_pool/alloc.txt), and the lists' keys alone are some 10 GB at 16M
// Plummer points. The results, which any stream may use, are device_buffers either way.
template <class T>
class stream_buffer {
 public:
  stream_buffer() = default;
  stream_buffer(std::size_t n, cudaStream_t stream, cudaMemPool_t pool) : size_(n), stream_(stream), pool_(pool) {
    if (n == 0) return;
    void* p = nullptr;
    if (pool != nullptr) CANOPY_CUDA_TRY(cudaMallocFromPoolAsync(&p, n * sizeof(T), pool, stream));
    else CANOPY_CUDA_TRY(cudaMalloc(&p, n * sizeof(T)));
    data_ = static_cast<T*>(p);
  }
  stream_buffer(stream_buffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)), stream_(o.stream_), pool_(o.pool_) {}
  stream_buffer& operator=(stream_buffer&& o) noexcept {
    if (this != &o) {
      release();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      stream_ = o.stream_;
      pool_ = o.pool_;
    }
    return *this;
  }
  stream_buffer(const stream_buffer&) = delete;
  stream_buffer& operator=(const stream_buffer&) = delete;
  ~stream_buffer() { release(); }
  T* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::size_t bytes() const { return size_ * sizeof(T); }

 private:
  // Either way after the work the stream has for it. Errors here can only be earlier asynchronous
  // ones, which the stream's next synchronisation reports; a destructor must not throw.
  void release() noexcept {
    if (data_ == nullptr) return;
    if (pool_ != nullptr) {
      (void)cudaFreeAsync(data_, stream_);
    } else {
      (void)cudaStreamSynchronize(stream_);
      (void)cudaFree(data_);
    }
    data_ = nullptr;
    size_ = 0;
  }
  T* data_ = nullptr;
  std::size_t size_ = 0;
  cudaStream_t stream_ = nullptr;
  cudaMemPool_t pool_ = nullptr;
};

// CUB's temporary storage, grown as the calls need it.
struct cub_scratch {
  cudaStream_t stream;
  cudaMemPool_t pool;
  stream_buffer<std::byte> buffer;
  cub_scratch(cudaStream_t s, cudaMemPool_t p) : stream(s), pool(p) {}
  void* reserve(std::size_t bytes) {
    if (buffer.size() < std::max<std::size_t>(bytes, 1)) {
      buffer = stream_buffer<std::byte>();
      buffer = stream_buffer<std::byte>(std::max<std::size_t>(bytes, 1), stream, pool);
    }
    return buffer.data();
  }
};

template <class T>
std::vector<T> read_back(const T* src, std::size_t n, cudaStream_t stream) {
  std::vector<T> out(n);
  if (n != 0) CANOPY_CUDA_TRY(cudaMemcpyAsync(out.data(), src, n * sizeof(T), cudaMemcpyDeviceToHost, stream));
  CANOPY_CUDA_TRY(cudaStreamSynchronize(stream));
  return out;
}

// Index of the first of sorted[0, count) not below `key`.
template <class T>
__device__ std::int32_t lower_bound(const T* sorted, std::int32_t count, T key) {
  std::int32_t lo = 0, hi = count;
  while (lo < hi) {
    const std::int32_t mid = lo + (hi - lo) / 2;
    if (sorted[mid] < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// ---- geometry ---------------------------------------------------------------------------------

// One level's mass sums: a leaf over its points, a parent over its children (the level below is
// done), both in index order, as compute_cell_geometry.
__global__ void mass_sums_kernel(trees::octree_ref t, std::int32_t begin, std::int32_t end, detail::mass_sums* sums) {
  const std::int32_t n = begin + static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (n >= end) return;
  detail::mass_sums s{0, 0, 0, 0};
  if (t.child_count[n] == 0) {
    for (std::int32_t j = t.point_begin[n]; j < t.point_begin[n] + t.point_count[n]; ++j) detail::add_point(s, t.points[j]);
  } else {
    for (std::int32_t c = t.first_child[n]; c < t.first_child[n] + t.child_count[n]; ++c) detail::add_sums(s, sums[c]);
  }
  sums[n] = s;
}

__global__ void centers_kernel(std::int32_t nodes, const detail::mass_sums* sums, const trees::box* bounds, cell_geometry* g,
                               unsigned long long* radius2_bits) {
  const std::int32_t n = static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (n >= nodes) return;
  const trees::box b = bounds[n];
  cell_geometry cg;
  detail::center_of(sums[n], b, cg.center);
  cg.scale = 0.5 * (b.hi[0] - b.lo[0]);
  cg.radius = 0;
  g[n] = cg;
  radius2_bits[n] = 0;  // the bits of +0.0
}

// A warp per leaf: for the leaf and each of its ancestors, the largest squared distance from that
// node's centre to the leaf's points, merged into the node's maximum. A non-negative double orders
// as its bits do, so the maximum is an integer atomic max on the bits: exact, in any order.
__global__ void radius_kernel(trees::octree_ref t, const cell_geometry* g, unsigned long long* radius2_bits) {
  const std::int64_t warp = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (warp >= t.leaf_count) return;
  const std::int32_t leaf = t.leaves[warp];
  const std::int32_t begin = t.point_begin[leaf], end = begin + t.point_count[leaf];
  for (std::int32_t a = leaf; a >= 0; a = t.parent[a]) {
    const double c[3] = {g[a].center[0], g[a].center[1], g[a].center[2]};
    double r2 = 0;
    for (std::int32_t j = begin + lane; j < end; j += 32) r2 = fmax(r2, detail::distance2(t.points[j], c));
    for (int off = 16; off > 0; off /= 2) r2 = fmax(r2, __shfl_xor_sync(0xffffffffu, r2, off));
    if (lane == 0 && r2 > 0) {
      const auto bits = static_cast<unsigned long long>(__double_as_longlong(r2));
      cuda::atomic_ref<unsigned long long, cuda::thread_scope_device> slot(radius2_bits[a]);
      // Relaxed: the maximum is read only after the kernel ends. The load first spares the
      // atomic where an earlier leaf already set a larger radius (most leaves, near the root).
      if (bits > slot.load(cuda::memory_order_relaxed)) slot.fetch_max(bits, cuda::memory_order_relaxed);
    }
  }
}

__global__ void radius_sqrt_kernel(std::int32_t nodes, const unsigned long long* radius2_bits, cell_geometry* g) {
  const std::int32_t n = static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (n >= nodes) return;
  g[n].radius = __dsqrt_rn(__longlong_as_double(static_cast<long long>(radius2_bits[n])));
}

// ---- interaction lists ------------------------------------------------------------------------

enum pair_action : std::uint8_t { act_m2l, act_p2p, act_same, act_split_target, act_split_source };

// A pair's (target, source) as one key, the target above the source's `shift` bits (enough for
// any node id): sorting the keys sorts by target, then source, over 2 x shift bits (42 for two
// million nodes: one pass of the radix sort fewer than with the source in the low 32 bits).
__device__ std::uint64_t pair_key(std::int32_t a, std::int32_t b, int shift) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << shift) | static_cast<std::uint32_t>(b);
}

// The bits that hold any value in [0, n] (at least one): pair_key's source field and row range for a
// tree of n nodes, and the transposed M2L keys' (a node id, or n for a dropped wait).
int id_bits(std::int32_t n) { return std::max(1, static_cast<int>(std::bit_width(static_cast<std::uint32_t>(n)))); }

// build_interaction_lists' decision for one pair, in the host's order of tests.
__device__ pair_action decide(const trees::octree_ref& t, const cell_geometry* g, std::int32_t a, std::int32_t b, double theta) {
  const bool leaf_a = t.child_count[a] == 0, leaf_b = t.child_count[b] == 0;
  if (a != b && detail::separated(g[a].center, g[a].radius, g[b].center, g[b].radius, theta)) return act_m2l;
  if (leaf_a && leaf_b) return act_p2p;
  if (a == b) return act_same;
  if (leaf_b || (!leaf_a && g[a].radius >= g[b].radius)) return act_split_target;
  return act_split_source;
}

// One level of the pair traversal in one pass: every pair of the frontier is decided, and what it
// makes (children pairs for the next frontier, an M2L or a P2P key) is written at places reserved
// with one atomic per block and kind (a block-wide scan of the counts, packed in one 64-bit word:
// children in the high 32 bits, m2l in bits 16-31, p2p in 0-15; a block of 256 pairs makes at
// most 256 x 64 children). The order within a level is therefore not fixed, which is why the keys
// are sorted afterwards: the lists come out the same. cursor = {next, m2l, p2p}: an output past
// its buffer's capacity is counted but not written, and the host runs the level again with larger
// buffers (build_interaction_lists).
constexpr int traverse_threads = 256;
static_assert(traverse_threads <= 0xffff && std::uint64_t{traverse_threads} * 64 < (std::uint64_t{1} << 32),
              "traverse_level_kernel's packed counts: a block's m2l and p2p counts fit 16 bits, its children 32");

__global__ void __launch_bounds__(traverse_threads)
    traverse_level_kernel(trees::octree_ref t, const cell_geometry* g, double theta, const int2* pairs, std::int32_t count,
                          int2* next, std::uint64_t next_capacity, std::uint64_t* m2l_keys, std::uint64_t m2l_capacity,
                          std::uint64_t* p2p_keys, std::uint64_t p2p_capacity, int shift, unsigned long long* cursor) {
  using block_scan = cub::BlockScan<unsigned long long, traverse_threads>;
  __shared__ typename block_scan::TempStorage scan_storage;
  __shared__ unsigned long long base[3];
  const std::int32_t i = static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  pair_action act = act_m2l;
  int2 p{0, 0};
  unsigned long long mine = 0;  // this pair's outputs, packed
  if (i < count) {
    p = pairs[i];
    act = decide(t, g, p.x, p.y, theta);
    switch (act) {
      case act_m2l: mine = 1ull << 16; break;
      case act_p2p: mine = 1ull; break;
      case act_same: mine = static_cast<unsigned long long>(t.child_count[p.x] * t.child_count[p.x]) << 32; break;
      case act_split_target: mine = static_cast<unsigned long long>(t.child_count[p.x]) << 32; break;
      case act_split_source: mine = static_cast<unsigned long long>(t.child_count[p.y]) << 32; break;
    }
  }
  unsigned long long before = 0, total = 0;
  block_scan(scan_storage).ExclusiveSum(mine, before, total);
  if (threadIdx.x == 0) {
    base[0] = atomicAdd(&cursor[0], total >> 32);
    base[1] = atomicAdd(&cursor[1], (total >> 16) & 0xffffu);
    base[2] = atomicAdd(&cursor[2], total & 0xffffu);
  }
  __syncthreads();
  if (i >= count) return;
  switch (act) {
    case act_m2l: {
      const unsigned long long k = base[1] + ((before >> 16) & 0xffffu);
      if (k < m2l_capacity) m2l_keys[k] = pair_key(p.x, p.y, shift);
      break;
    }
    case act_p2p: {
      const unsigned long long k = base[2] + (before & 0xffffu);
      if (k < p2p_capacity) p2p_keys[k] = pair_key(p.x, p.y, shift);
      break;
    }
    default: {
      unsigned long long k = base[0] + (before >> 32);
      if (k + (mine >> 32) > next_capacity) break;
      if (act == act_same) {
        const std::int32_t first = t.first_child[p.x], last = first + t.child_count[p.x];
        for (std::int32_t ca = first; ca < last; ++ca)
          for (std::int32_t cb = first; cb < last; ++cb) next[k++] = int2{ca, cb};
      } else if (act == act_split_target) {
        for (std::int32_t ca = t.first_child[p.x]; ca < t.first_child[p.x] + t.child_count[p.x]; ++ca) next[k++] = int2{ca, p.y};
      } else {
        for (std::int32_t cb = t.first_child[p.y]; cb < t.first_child[p.y] + t.child_count[p.y]; ++cb) next[k++] = int2{p.x, cb};
      }
      break;
    }
  }
}

// Sorted pair_key keys into CSR: offset[r] = the first key of row r or later.
__global__ void csr_rows_kernel(const std::uint64_t* keys, std::int32_t count, std::int32_t rows, int shift, std::int32_t* offset,
                                std::int32_t* column) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i <= rows) offset[i] = lower_bound(keys, count, static_cast<std::uint64_t>(i) << shift);
  if (i < count) column[i] = static_cast<std::int32_t>(keys[i] & ((std::uint64_t{1} << shift) - 1));
}

// Sorts `count` pair_key keys (row < rows, column < 2^shift) and cuts them into rows + 1 offsets
// and the columns.
std::pair<device_buffer<std::int32_t>, device_buffer<std::int32_t>> keys_to_csr(stream_buffer<std::uint64_t>& keys,
                                                                                 std::int32_t count, std::int32_t rows, int shift,
                                                                                 cub_scratch& scratch, cudaStream_t stream) {
  const cudaMemPool_t pool = scratch.pool;
  device_buffer<std::int32_t> offset(static_cast<std::size_t>(rows) + 1), column(static_cast<std::size_t>(count));
  if (count > 0) {
    stream_buffer<std::uint64_t> alternate(static_cast<std::size_t>(count), stream, pool);
    cub::DoubleBuffer<std::uint64_t> db(keys.data(), alternate.data());
    const int end_bit = shift + id_bits(rows);
    std::size_t bytes = 0;
    CANOPY_CUDA_TRY(cub::DeviceRadixSort::SortKeys(nullptr, bytes, db, count, 0, end_bit, stream));
    CANOPY_CUDA_TRY(cub::DeviceRadixSort::SortKeys(scratch.reserve(bytes), bytes, db, count, 0, end_bit, stream));
    const std::int64_t items = std::max<std::int64_t>(count, std::int64_t{rows} + 1);
    csr_rows_kernel<<<grid_for(items), threads, 0, stream>>>(db.Current(), count, rows, shift, offset.data(), column.data());
    CANOPY_CUDA_TRY(cudaGetLastError());
  } else {
    CANOPY_CUDA_TRY(cudaMemsetAsync(offset.data(), 0, offset.bytes(), stream));
  }
  return {std::move(offset), std::move(column)};
}

// Grows `buffer` to hold at least `need` elements, keeping its first `used`.
void grow_keeping(stream_buffer<std::uint64_t>& buffer, std::size_t used, std::size_t need, cudaStream_t stream, cudaMemPool_t pool) {
  if (buffer.size() >= need) return;
  stream_buffer<std::uint64_t> bigger(std::max(need, buffer.size() + buffer.size() / 2), stream, pool);
  if (used != 0)
    CANOPY_CUDA_TRY(cudaMemcpyAsync(bigger.data(), buffer.data(), used * sizeof(std::uint64_t), cudaMemcpyDeviceToDevice, stream));
  buffer = std::move(bigger);  // the old one freed after the copy, in the stream's order
}

// ---- task DAG ---------------------------------------------------------------------------------

// Per node: has_local (it or an ancestor has an M2L list), and the flags the selections read.
__global__ void node_flags_kernel(trees::octree_ref t, const std::int32_t* m2l_offset, std::uint8_t* has_local,
                                  std::uint8_t* has_m2l, std::uint8_t* internal) {
  const std::int32_t n = static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (n >= t.node_count) return;
  bool local = false;
  for (std::int32_t a = n; a >= 0 && !local; a = t.parent[a]) local = m2l_offset[a + 1] > m2l_offset[a];
  has_local[n] = local;
  has_m2l[n] = m2l_offset[n + 1] > m2l_offset[n];
  internal[n] = t.child_count[n] != 0;
}

__global__ void leaf_flags_kernel(trees::octree_ref t, const std::uint8_t* has_local, std::uint8_t* l2p) {
  const std::int32_t i = static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < t.leaf_count) l2p[i] = has_local[t.leaves[i]];
}

// meta = {m2l targets, down nodes, internal nodes, l2p leaves (the selections' counts), then the
// internal and the down level offsets (levels + 1 each)}: the one read the host needs.
__global__ void level_offsets_kernel(const std::int32_t* level_offset, std::int32_t levels, const std::int32_t* internal_node,
                                     const std::int32_t* down_node, std::int32_t* meta) {
  const std::int32_t l = static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (l > levels) return;
  meta[4 + l] = lower_bound(internal_node, meta[2], level_offset[l]);
  meta[4 + levels + 1 + l] = lower_bound(down_node, meta[1], level_offset[l]);
}

// node -> task id of each kind (-1: none), from the selections.
__global__ void task_maps_kernel(task_ranges r, const std::int32_t* m2l_target, const std::int32_t* down_node,
                                 const std::int32_t* l2p_leaf, std::int32_t* m2l_task, std::int32_t* down_task,
                                 std::int32_t* l2p_task) {
  const std::int32_t i = static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < r.down_begin - r.m2l_begin) m2l_task[m2l_target[i]] = r.m2l_begin + i;
  if (i < r.l2p_begin - r.down_begin) down_task[down_node[i]] = r.down_begin + i;
  if (i < r.p2p_begin - r.l2p_begin) l2p_task[l2p_leaf[i]] = r.l2p_begin + i;
}

// How many p2p tasks each leaf gets (task_dag.hpp's p2p_parts): a warp per leaf sums its sources'
// points over its P2P row. part_count by leaf index (tree.leaves' order), parts_of by node; the
// order key of the leaf's parts (64 less p2p_cost_class: an ascending sort puts the longest class
// first) and its leaf index, for the sort that numbers the p2p tasks.
__global__ void p2p_parts_kernel(trees::octree_ref t, const std::int32_t* p2p_offset, const std::int32_t* p2p_source,
                                 std::int64_t part_interactions, std::int32_t* part_count, std::int32_t* parts_of,
                                 std::uint8_t* order_key, std::int32_t* order_leaf) {
  const std::int64_t warp = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (warp >= t.leaf_count) return;
  const std::int32_t leaf = t.leaves[warp];
  std::int64_t source_points = 0;
  for (std::int32_t k = p2p_offset[leaf] + lane; k < p2p_offset[leaf + 1]; k += 32) source_points += t.point_count[p2p_source[k]];
  for (int off = 16; off > 0; off /= 2) source_points += __shfl_xor_sync(0xffffffffu, source_points, off);
  if (lane == 0) {
    const std::int32_t parts = p2p_parts(t.point_count[leaf], source_points, part_interactions);
    part_count[warp] = parts;
    parts_of[leaf] = parts;
    order_key[warp] = static_cast<std::uint8_t>(64 - p2p_cost_class(p2p_part_cost(t.point_count[leaf], source_points, parts)));
    order_leaf[warp] = static_cast<std::int32_t>(warp);
  }
}

// The part counts in the p2p tasks' order (order[i]: the leaf index with the i-th longest parts).
__global__ void p2p_ordered_counts_kernel(std::int32_t leaves, const std::int32_t* order, const std::int32_t* part_count,
                                          std::int32_t* ordered_count) {
  const std::int32_t i = static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < leaves) ordered_count[i] = part_count[order[i]];
}

// Each leaf's p2p tasks from its first (part_offset, the scan of the ordered counts): leaf and
// first point, the i-th leaf of `order` at part_offset[i].
__global__ void p2p_tasks_kernel(trees::octree_ref t, const std::int32_t* order, const std::int32_t* part_offset,
                                 std::int32_t* p2p_leaf, std::int32_t* p2p_point) {
  const std::int32_t i = static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= t.leaf_count) return;
  const std::int32_t leaf = t.leaves[order[i]], first = part_offset[i], parts = part_offset[i + 1] - first;
  for (std::int32_t q = 0; q < parts; ++q) {
    p2p_leaf[first + q] = leaf;
    p2p_point[first + q] = t.point_begin[leaf] + p2p_part_begin(t.point_count[leaf], parts, q);
  }
}

// The M2L lists transposed, step one: for every M2L entry, the node its m2l task waits for (the
// source, or its ancestor `levels` up: dag_shape) as the key and the m2l task as the value, so that
// a sort by key groups each up task's waiting m2l tasks. A warp per m2l task reads its row
// coalesced. A wait that repeats the row's previous entry's gets the key `nodes`, sorted past every
// node and dropped: equal waits are adjacent in a row, because the row is sorted by source id,
// node ids go level by level with every level in Morton order (so the ancestors k levels up of one
// level's sorted nodes do not decrease), waits of different levels differ, and the sources whose
// ancestor chain ends at the root (levels <= k) are the row's first. The kept entries are the m2l
// task's predecessors: their count is its dependency count, summed by the warp (no atomics).
__global__ void m2l_transpose_keys_kernel(task_ranges r, std::int32_t nodes, const std::int32_t* parent, int levels,
                                          const std::int32_t* m2l_target, const std::int32_t* m2l_offset,
                                          const std::int32_t* m2l_source, std::int32_t* keys, std::int32_t* values,
                                          std::int32_t* m2l_deps) {
  const std::int64_t warp = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (warp >= r.down_begin - r.m2l_begin) return;
  const auto i = static_cast<std::int32_t>(warp);
  const std::int32_t target = m2l_target[i], begin = m2l_offset[target], end = m2l_offset[target + 1];
  std::int32_t kept = 0;
  for (std::int32_t k = begin + lane; k < end; k += 32) {
    const std::int32_t w = m2l_wait_node(parent, m2l_source[k], levels);
    const bool first = levels == 0 || k == begin || m2l_wait_node(parent, m2l_source[k - 1], levels) != w;
    keys[k] = first ? w : nodes;
    values[k] = r.m2l_begin + i;
    kept += first;
  }
  for (int off = 16; off > 0; off /= 2) kept += __shfl_xor_sync(0xffffffffu, kept, off);
  if (lane == 0) m2l_deps[i] = kept;
}

// Step two, after the sort: waiting_offset[n] = the first sorted key not below n, for n in
// [0, nodes]; waiting_offset[nodes] is how many waits were kept.
__global__ void waiting_offsets_kernel(const std::int32_t* sorted_keys, std::int32_t count, std::int32_t nodes,
                                       std::int32_t* waiting_offset) {
  const std::int32_t n = static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (n <= nodes) waiting_offset[n] = lower_bound(sorted_keys, count, n);
}

// Step three: each kept wait into its up task's successors, after the parent edge (a flat copy:
// sorted entry j belongs to up task sorted_keys[j], at its place in that row; the dropped ones,
// keyed `nodes`, come last and are skipped).
__global__ void up_waiters_kernel(const std::int32_t* parent, std::int32_t nodes, const std::int32_t* sorted_keys,
                                  const std::int32_t* sorted_values, std::int32_t count, const std::int32_t* waiting_offset,
                                  const std::int32_t* succ_offset, std::int32_t* successor) {
  const std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= count) return;
  const std::int32_t n = sorted_keys[j];
  if (n >= nodes) return;
  successor[succ_offset[n] + (parent[n] >= 0) + (static_cast<std::int32_t>(j) - waiting_offset[n])] = sorted_values[j];
}

struct dag_view {
  trees::octree_ref t;
  task_ranges r;
  const std::int32_t *m2l_offset, *m2l_target, *down_node, *l2p_leaf, *p2p_leaf;
  const std::uint8_t* has_local;
  const std::int32_t *m2l_task, *down_task, *l2p_task;
  const std::int32_t* waiting_offset;  // the transposed M2L lists' rows (their entries: up_waiters_kernel)
  const std::int32_t* m2l_deps;        // per m2l task: its kept waits
  const std::int32_t* p2p_parts_of;    // per leaf: its p2p tasks
};

// Successor and predecessor counts of each task (task_dag.hpp's table), and the sinks.
__global__ void task_counts_kernel(dag_view v, std::int32_t* succ_count, std::int32_t* dependency_count, std::uint8_t* is_source,
                                   std::int32_t* sinks) {
  const std::int32_t task = static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (task > v.r.end) return;
  if (task == v.r.end) {
    succ_count[task] = 0;  // the scan's extra element: the edge count lands here
    return;
  }
  std::int32_t succ = 0, deps = 0;
  switch (v.r.kind_of(task)) {
    case task_kind::up: {
      const std::int32_t n = task;
      succ = (v.t.parent[n] >= 0) + (v.waiting_offset[n + 1] - v.waiting_offset[n]);
      deps = v.t.child_count[n];
      break;
    }
    case task_kind::m2l: {
      const std::int32_t n = v.m2l_target[task - v.r.m2l_begin];
      (void)n;
      succ = 1;
      deps = v.m2l_deps[task - v.r.m2l_begin];
      break;
    }
    case task_kind::down: {
      // Every child of a node with a local has one too (has_local is inherited), and a leaf with
      // a down task has an l2p task.
      const std::int32_t n = v.down_node[task - v.r.down_begin];
      succ = v.t.child_count[n] == 0 ? 1 : v.t.child_count[n];
      const std::int32_t p = v.t.parent[n];
      deps = (v.m2l_task[n] >= 0) + (p >= 0 && v.down_task[p] >= 0);
      break;
    }
    case task_kind::l2p: deps = 1 + v.p2p_parts_of[v.l2p_leaf[task - v.r.l2p_begin]]; break;
    case task_kind::p2p: succ = v.has_local[v.p2p_leaf[task - v.r.p2p_begin]] ? 1 : 0; break;
  }
  succ_count[task] = succ;
  dependency_count[task] = deps;
  is_source[task] = deps == 0;
  if (succ == 0) {
    cuda::atomic_ref<std::int32_t, cuda::thread_scope_device> s(*sinks);
    s.fetch_add(1, cuda::memory_order_relaxed);  // a count read after the kernel
  }
}

__global__ void successors_kernel(dag_view v, const std::int32_t* succ_offset, std::int32_t* successor) {
  const std::int32_t task = static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (task >= v.r.end) return;
  std::int32_t k = succ_offset[task];
  switch (v.r.kind_of(task)) {
    case task_kind::up: {
      const std::int32_t n = task;
      if (v.t.parent[n] >= 0) successor[k] = v.t.parent[n];  // then the waiting m2l tasks: up_waiters_kernel
      break;
    }
    case task_kind::m2l: successor[k] = v.down_task[v.m2l_target[task - v.r.m2l_begin]]; break;
    case task_kind::down: {
      const std::int32_t n = v.down_node[task - v.r.down_begin];
      if (v.t.child_count[n] == 0) {
        successor[k] = v.l2p_task[n];
      } else {
        for (std::int32_t c = v.t.first_child[n]; c < v.t.first_child[n] + v.t.child_count[n]; ++c) successor[k++] = v.down_task[c];
      }
      break;
    }
    case task_kind::l2p: break;
    case task_kind::p2p: {
      const std::int32_t leaf = v.p2p_leaf[task - v.r.p2p_begin];
      if (v.has_local[leaf]) successor[k] = v.l2p_task[leaf];
      break;
    }
  }
}

}  // namespace

// ---- the API ----------------------------------------------------------------------------------

memory_pool make_kept_pool() {
  int device = 0, pools = 0;
  CANOPY_CUDA_TRY(cudaGetDevice(&device));
  CANOPY_CUDA_TRY(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device));
  if (pools == 0) return memory_pool();
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  cudaMemPool_t pool = nullptr;
  CANOPY_CUDA_TRY(cudaMemPoolCreate(&pool, &props));
  memory_pool kept(pool);
  std::uint64_t keep = UINT64_MAX;
  CANOPY_CUDA_TRY(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  return kept;
}

device_buffer<cell_geometry> compute_cell_geometry(const trees::built_device_octree& tree, cudaStream_t stream, cudaMemPool_t pool) {
  const trees::octree_ref t = tree.tree.ref();
  const std::int32_t nodes = t.node_count;
  device_buffer<cell_geometry> g(static_cast<std::size_t>(nodes));
  if (nodes == 0) return g;
  stream_buffer<detail::mass_sums> sums(static_cast<std::size_t>(nodes), stream, pool);
  stream_buffer<unsigned long long> radius2(static_cast<std::size_t>(nodes), stream, pool);
  const std::span<const std::int32_t> levels = tree.tree.level_offset();
  for (std::size_t l = levels.size() - 1; l-- > 0;) {  // deepest level first
    const std::int32_t begin = levels[l], end = levels[l + 1];
    mass_sums_kernel<<<grid_for(end - begin), threads, 0, stream>>>(t, begin, end, sums.data());
    CANOPY_CUDA_TRY(cudaGetLastError());
  }
  centers_kernel<<<grid_for(nodes), threads, 0, stream>>>(nodes, sums.data(), tree.bounds.data(), g.data(), radius2.data());
  CANOPY_CUDA_TRY(cudaGetLastError());
  radius_kernel<<<grid_for(std::int64_t{t.leaf_count} * 32), threads, 0, stream>>>(t, g.data(), radius2.data());
  CANOPY_CUDA_TRY(cudaGetLastError());
  radius_sqrt_kernel<<<grid_for(nodes), threads, 0, stream>>>(nodes, radius2.data(), g.data());
  CANOPY_CUDA_TRY(cudaGetLastError());
  CANOPY_CUDA_TRY(cudaStreamSynchronize(stream));  // complete for any stream (the header's promise)
  return g;
}

interaction_lists device_interaction_lists::download() const {
  interaction_lists l;
  l.m2l_offset = m2l_offset.download();
  l.m2l_source = m2l_source.download();
  l.p2p_offset = p2p_offset.download();
  l.p2p_source = p2p_source.download();
  return l;
}

device_interaction_lists build_interaction_lists(const trees::built_device_octree& tree, const device_buffer<cell_geometry>& geometry,
                                                 double theta, cudaStream_t stream, cudaMemPool_t pool) {
  if (!(theta > 0.0 && theta <= 1.0))
    throw std::invalid_argument("build_interaction_lists: theta must be in (0, 1], not " + std::to_string(theta));
  const trees::octree_ref t = tree.tree.ref();
  const std::int32_t nodes = t.node_count;
  if (geometry.size() != static_cast<std::size_t>(nodes))
    throw std::invalid_argument("build_interaction_lists: geometry has " + std::to_string(geometry.size()) +
                                " cells for a tree of " + std::to_string(nodes) + " nodes");
  cub_scratch scratch(stream, pool);
  const int shift = id_bits(nodes);
  stream_buffer<int2> frontier, next;
  stream_buffer<std::uint64_t> m2l_keys, p2p_keys;
  stream_buffer<unsigned long long> cursor(3, stream, pool);
  std::uint64_t m2l_used = 0, p2p_used = 0;
  std::int64_t size = nodes > 0 ? 1 : 0;
  if (size > 0) {
    frontier = stream_buffer<int2>(1, stream, pool);
    CANOPY_CUDA_TRY(cudaMemsetAsync(frontier.data(), 0, frontier.bytes(), stream));  // the pair (root, root)
    // First guesses of the lists' lengths (a Plummer sphere at theta 0.5 makes about 320 M2L and
    // 64 P2P pairs a node; pairs grow as theta^-3): too small costs a level run again and a copy.
    // Capped at 2^31 keys: more pairs than that are refused below ("more than 2^31 - 1 pairs"), so
    // a larger guess could only fail the allocation where the exact size would have fit.
    const double per_node = 360.0 * std::min(64.0, std::pow(0.5 / theta, 3.0));
    const double cap = 2147483648.0;
    m2l_keys = stream_buffer<std::uint64_t>(static_cast<std::size_t>(std::min(cap, per_node * nodes + 64)), stream, pool);
    p2p_keys = stream_buffer<std::uint64_t>(static_cast<std::size_t>(std::min(cap, 72.0 * nodes + 64)), stream, pool);
  }
  double growth = 8;  // the last level's next / size: the guess of this level's (too small: the level runs again)
  while (size > 0) {
    const auto guess = static_cast<std::size_t>(1.25 * growth * static_cast<double>(size)) + 1024;
    if (next.size() < guess) {
      next = stream_buffer<int2>();
      next = stream_buffer<int2>(guess, stream, pool);
    }
    for (;;) {
      const unsigned long long start[3] = {0, m2l_used, p2p_used};
      CANOPY_CUDA_TRY(cudaMemcpyAsync(cursor.data(), start, sizeof(start), cudaMemcpyHostToDevice, stream));
      traverse_level_kernel<<<grid_for(size, traverse_threads), traverse_threads, 0, stream>>>(
          t, geometry.data(), theta, frontier.data(), static_cast<std::int32_t>(size), next.data(), next.size(), m2l_keys.data(),
          m2l_keys.size(), p2p_keys.data(), p2p_keys.size(), shift, cursor.data());
      CANOPY_CUDA_TRY(cudaGetLastError());
      const std::vector<unsigned long long> end = read_back(cursor.data(), 3, stream);
      // The CSR arrays and the frontier's indices are int32.
      if (end[1] > 0x7fffffffu || end[2] > 0x7fffffffu || end[0] > 0x7fffffffu)
        throw std::invalid_argument("build_interaction_lists: more than 2^31 - 1 pairs");
      bool again = false;
      if (end[0] > next.size()) {
        next = stream_buffer<int2>();
        next = stream_buffer<int2>(static_cast<std::size_t>(end[0]), stream, pool);
        again = true;
      }
      if (end[1] > m2l_keys.size()) {
        grow_keeping(m2l_keys, m2l_used, static_cast<std::size_t>(end[1] + (end[1] - m2l_used)), stream, pool);
        again = true;
      }
      if (end[2] > p2p_keys.size()) {
        grow_keeping(p2p_keys, p2p_used, static_cast<std::size_t>(end[2] + (end[2] - p2p_used)), stream, pool);
        again = true;
      }
      if (again) continue;  // the level's outputs did not all fit: run it again into the larger buffers
      m2l_used = end[1];
      p2p_used = end[2];
      growth = std::max(1.0, static_cast<double>(end[0]) / static_cast<double>(size));
      size = static_cast<std::int64_t>(end[0]);
      break;
    }
    std::swap(frontier, next);
  }
  device_interaction_lists out;
  out.node_count = nodes;
  out.m2l_count = static_cast<std::int32_t>(m2l_used);
  out.p2p_count = static_cast<std::int32_t>(p2p_used);
  std::tie(out.m2l_offset, out.m2l_source) = keys_to_csr(m2l_keys, out.m2l_count, nodes, shift, scratch, stream);
  std::tie(out.p2p_offset, out.p2p_source) = keys_to_csr(p2p_keys, out.p2p_count, nodes, shift, scratch, stream);
  CANOPY_CUDA_TRY(cudaStreamSynchronize(stream));  // complete for any stream (the header's promise)
  return out;
}

canopy::task_graph device_task_dag::download_graph() const {
  if (!has_graph) throw std::logic_error("fmm::device_task_dag: built with dag_parts::maps_only, it has no graph to download");
  const std::vector<std::int32_t> offset = succ_offset.download();
  const std::vector<std::int32_t> succ = successor.download();
  std::vector<std::pair<task_id, task_id>> edges;
  edges.reserve(succ.size());
  for (std::int32_t task = 0; task < ranges.end; ++task)
    for (std::int32_t k = offset[static_cast<std::size_t>(task)]; k < offset[static_cast<std::size_t>(task) + 1]; ++k)
      edges.emplace_back(task, succ[static_cast<std::size_t>(k)]);
  return canopy::task_graph::from_edges(ranges.end, edges);
}

task_dag device_task_dag::download() const {
  task_dag d;
  d.ranges = ranges;
  const auto first = [](const device_buffer<std::int32_t>& b, std::int32_t n) {
    std::vector<std::int32_t> v = b.download();
    v.resize(static_cast<std::size_t>(n));
    return v;
  };
  d.m2l_target = first(m2l_target, ranges.down_begin - ranges.m2l_begin);
  d.down_node = first(down_node, ranges.l2p_begin - ranges.down_begin);
  d.l2p_leaf = first(l2p_leaf, ranges.p2p_begin - ranges.l2p_begin);
  d.p2p_leaf = first(p2p_leaf, ranges.end - ranges.p2p_begin);
  d.p2p_point = first(p2p_point, ranges.end - ranges.p2p_begin);
  d.internal_node = first(internal_node, internal_level_offset.empty() ? 0 : internal_level_offset.back());
  d.has_local = has_local.download();
  d.internal_level_offset = internal_level_offset;
  d.down_level_offset = down_level_offset;
  if (has_graph) d.graph = download_graph();
  return d;
}

device_task_dag build_task_dag(const trees::built_device_octree& tree, const device_interaction_lists& lists, cudaStream_t stream,
                               const dag_shape& shape, dag_parts parts, cudaMemPool_t pool) {
  const trees::octree_ref t = tree.tree.ref();
  const std::int32_t nodes = t.node_count;
  const auto n_size = static_cast<std::size_t>(nodes);
  if (lists.node_count != nodes || lists.m2l_offset.size() != n_size + 1 || lists.p2p_offset.size() != n_size + 1)
    throw std::invalid_argument("fmm::build_task_dag: lists are not of this tree (" + std::to_string(nodes) + " nodes)");
  if (shape.m2l_wait_levels < 0)
    throw std::invalid_argument("fmm::build_task_dag: m2l_wait_levels must be >= 0, not " + std::to_string(shape.m2l_wait_levels));
  if (shape.p2p_part_interactions < 0)
    throw std::invalid_argument("fmm::build_task_dag: p2p_part_interactions must be >= 0, not " +
                                std::to_string(shape.p2p_part_interactions));
  device_task_dag d;
  d.node_count = nodes;
  const std::int32_t levels = nodes == 0 ? 1 : t.depth + 1;
  if (nodes == 0) {
    d.internal_level_offset.assign(static_cast<std::size_t>(levels) + 1, 0);
    d.down_level_offset.assign(static_cast<std::size_t>(levels) + 1, 0);
    if (parts == dag_parts::maps_and_graph) {
      d.succ_offset = device_buffer<std::int32_t>(std::vector<std::int32_t>{0});
      d.has_graph = true;
    }
    return d;
  }
  const auto leaves = static_cast<std::size_t>(t.leaf_count);
  cub_scratch scratch(stream, pool);

  // has_local and the four selections (in ascending node ids, the leaves in Morton order: what
  // the host's loops give).
  d.has_local = device_buffer<std::uint8_t>(n_size);
  stream_buffer<std::uint8_t> has_m2l(n_size, stream, pool), internal(n_size, stream, pool),
      l2p_flag(std::max<std::size_t>(leaves, 1), stream, pool);
  node_flags_kernel<<<grid_for(nodes), threads, 0, stream>>>(t, lists.m2l_offset.data(), d.has_local.data(), has_m2l.data(),
                                                             internal.data());
  CANOPY_CUDA_TRY(cudaGetLastError());
  leaf_flags_kernel<<<grid_for(t.leaf_count), threads, 0, stream>>>(t, d.has_local.data(), l2p_flag.data());
  CANOPY_CUDA_TRY(cudaGetLastError());
  d.m2l_target = device_buffer<std::int32_t>(n_size);
  d.down_node = device_buffer<std::int32_t>(n_size);
  d.internal_node = device_buffer<std::int32_t>(n_size);
  d.l2p_leaf = device_buffer<std::int32_t>(std::max<std::size_t>(leaves, 1));
  // The p2p tasks a leaf: counted; the leaves ordered longest class first (a stable radix sort of
  // 64 less the classes, so a class keeps tree.leaves' order, as the host's stable_sort);
  // the counts in that order scanned into each leaf's first, their total into meta's last.
  stream_buffer<std::int32_t> part_count(leaves + 1, stream, pool), part_offset(leaves + 1, stream, pool),
      parts_of(n_size, stream, pool);
  stream_buffer<std::uint8_t> order_key(leaves, stream, pool), order_key_alt(leaves, stream, pool);
  stream_buffer<std::int32_t> order(leaves, stream, pool), order_alt(leaves, stream, pool),
      ordered_count(leaves + 1, stream, pool);
  CANOPY_CUDA_TRY(cudaMemsetAsync(part_count.data(), 0, part_count.bytes(), stream));
  CANOPY_CUDA_TRY(cudaMemsetAsync(ordered_count.data(), 0, ordered_count.bytes(), stream));
  CANOPY_CUDA_TRY(cudaMemsetAsync(parts_of.data(), 0, parts_of.bytes(), stream));
  p2p_parts_kernel<<<grid_for(std::int64_t{t.leaf_count} * 32), threads, 0, stream>>>(
      t, lists.p2p_offset.data(), lists.p2p_source.data(), shape.p2p_part_interactions, part_count.data(), parts_of.data(),
      order_key.data(), order.data());
  CANOPY_CUDA_TRY(cudaGetLastError());
  cub::DoubleBuffer<std::uint8_t> sorted_order_key(order_key.data(), order_key_alt.data());
  cub::DoubleBuffer<std::int32_t> sorted_order(order.data(), order_alt.data());
  {
    std::size_t bytes = 0;
    CANOPY_CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, bytes, sorted_order_key, sorted_order, t.leaf_count, 0, 8, stream));
    CANOPY_CUDA_TRY(cub::DeviceRadixSort::SortPairs(scratch.reserve(bytes), bytes, sorted_order_key, sorted_order, t.leaf_count, 0,
                                                    8, stream));
  }
  p2p_ordered_counts_kernel<<<grid_for(t.leaf_count), threads, 0, stream>>>(t.leaf_count, sorted_order.Current(), part_count.data(),
                                                                             ordered_count.data());
  CANOPY_CUDA_TRY(cudaGetLastError());
  {
    std::size_t bytes = 0;
    CANOPY_CUDA_TRY(
        cub::DeviceScan::ExclusiveSum(nullptr, bytes, ordered_count.data(), part_offset.data(), t.leaf_count + 1, stream));
    CANOPY_CUDA_TRY(cub::DeviceScan::ExclusiveSum(scratch.reserve(bytes), bytes, ordered_count.data(), part_offset.data(),
                                                  t.leaf_count + 1, stream));
  }
  stream_buffer<std::int32_t> meta(4 + 2 * (static_cast<std::size_t>(levels) + 1) + 1, stream, pool);
  CANOPY_CUDA_TRY(cudaMemcpyAsync(meta.data() + meta.size() - 1, part_offset.data() + leaves, sizeof(std::int32_t),
                                  cudaMemcpyDeviceToDevice, stream));
  const thrust::counting_iterator<std::int32_t> ids(0);
  const auto select = [&](auto in, const std::uint8_t* flags, std::int32_t* out, std::int32_t* count, std::int32_t n) {
    std::size_t bytes = 0;
    CANOPY_CUDA_TRY(cub::DeviceSelect::Flagged(nullptr, bytes, in, flags, out, count, n, stream));
    CANOPY_CUDA_TRY(cub::DeviceSelect::Flagged(scratch.reserve(bytes), bytes, in, flags, out, count, n, stream));
  };
  select(ids, has_m2l.data(), d.m2l_target.data(), meta.data() + 0, nodes);
  select(ids, d.has_local.data(), d.down_node.data(), meta.data() + 1, nodes);
  select(ids, internal.data(), d.internal_node.data(), meta.data() + 2, nodes);
  select(t.leaves, l2p_flag.data(), d.l2p_leaf.data(), meta.data() + 3, t.leaf_count);
  level_offsets_kernel<<<grid_for(levels + 1), threads, 0, stream>>>(t.level_offset, levels, d.internal_node.data(),
                                                                    d.down_node.data(), meta.data());
  CANOPY_CUDA_TRY(cudaGetLastError());
  const std::vector<std::int32_t> m = read_back(meta.data(), meta.size(), stream);
  const auto lv = static_cast<std::size_t>(levels) + 1;
  d.internal_level_offset.assign(m.begin() + 4, m.begin() + 4 + static_cast<std::ptrdiff_t>(lv));
  d.down_level_offset.assign(m.begin() + 4 + static_cast<std::ptrdiff_t>(lv), m.end() - 1);
  const std::int32_t p2p_tasks = m.back();

  // Task ids are int32: refuse more tasks than that rather than wrap the ranges (as build_task_dag).
  const std::int64_t task_count = static_cast<std::int64_t>(nodes) + m[0] + m[1] + m[3] + p2p_tasks;
  if (task_count > std::numeric_limits<std::int32_t>::max())
    throw std::length_error("fmm::build_task_dag (device): " + std::to_string(task_count) + " tasks, more than task ids hold (2^31 - 1)");
  task_ranges& r = d.ranges;
  r.m2l_begin = nodes;
  r.down_begin = r.m2l_begin + m[0];
  r.l2p_begin = r.down_begin + m[1];
  r.p2p_begin = r.l2p_begin + m[3];
  r.end = r.p2p_begin + p2p_tasks;
  d.p2p_leaf = device_buffer<std::int32_t>(static_cast<std::size_t>(std::max(p2p_tasks, 1)));
  d.p2p_point = device_buffer<std::int32_t>(static_cast<std::size_t>(std::max(p2p_tasks, 1)));
  p2p_tasks_kernel<<<grid_for(t.leaf_count), threads, 0, stream>>>(t, sorted_order.Current(), part_offset.data(), d.p2p_leaf.data(),
                                                                    d.p2p_point.data());
  CANOPY_CUDA_TRY(cudaGetLastError());
  if (parts == dag_parts::maps_only) {
    CANOPY_CUDA_TRY(cudaStreamSynchronize(stream));  // complete for any stream (the header's promise)
    return d;
  }

  // node -> task maps; the transposed M2L lists.
  stream_buffer<std::int32_t> m2l_task(n_size, stream, pool), down_task(n_size, stream, pool), l2p_task(n_size, stream, pool);
  for (auto* b : {&m2l_task, &down_task, &l2p_task}) CANOPY_CUDA_TRY(cudaMemsetAsync(b->data(), 0xff, b->bytes(), stream));
  task_maps_kernel<<<grid_for(nodes), threads, 0, stream>>>(r, d.m2l_target.data(), d.down_node.data(), d.l2p_leaf.data(),
                                                            m2l_task.data(), down_task.data(), l2p_task.data());
  CANOPY_CUDA_TRY(cudaGetLastError());
  // The transposed M2L lists: (wait, m2l task) pairs sorted by the wait (a stable radix sort of
  // bit_width(nodes) bits: each row in ascending m2l task ids, as the host has them).
  const auto entries = static_cast<std::size_t>(std::max(lists.m2l_count, 1));
  stream_buffer<std::int32_t> keys(entries, stream, pool), keys_alt(entries, stream, pool), values(entries, stream, pool),
      values_alt(entries, stream, pool);
  stream_buffer<std::int32_t> m2l_deps(static_cast<std::size_t>(std::max(m[0], 1)), stream, pool);
  stream_buffer<std::int32_t> waiting_offset(n_size + 1, stream, pool);
  cub::DoubleBuffer<std::int32_t> sorted_keys(keys.data(), keys_alt.data()), sorted_values(values.data(), values_alt.data());
  if (m[0] > 0) {
    m2l_transpose_keys_kernel<<<grid_for(std::int64_t{m[0]} * 32), threads, 0, stream>>>(
        r, nodes, t.parent, shape.m2l_wait_levels, d.m2l_target.data(), lists.m2l_offset.data(), lists.m2l_source.data(),
        keys.data(), values.data(), m2l_deps.data());
    CANOPY_CUDA_TRY(cudaGetLastError());
    const int end_bit = id_bits(nodes);
    std::size_t bytes = 0;
    CANOPY_CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, bytes, sorted_keys, sorted_values, lists.m2l_count, 0, end_bit, stream));
    CANOPY_CUDA_TRY(cub::DeviceRadixSort::SortPairs(scratch.reserve(bytes), bytes, sorted_keys, sorted_values, lists.m2l_count, 0,
                                                    end_bit, stream));
  }
  waiting_offsets_kernel<<<grid_for(std::int64_t{nodes} + 1), threads, 0, stream>>>(sorted_keys.Current(), lists.m2l_count, nodes,
                                                                                   waiting_offset.data());
  CANOPY_CUDA_TRY(cudaGetLastError());

  // The graph: counts, a scan into offsets, the successors, the sources.
  const dag_view v{t,
                   r,
                   lists.m2l_offset.data(),
                   d.m2l_target.data(),
                   d.down_node.data(),
                   d.l2p_leaf.data(),
                   d.p2p_leaf.data(),
                   d.has_local.data(),
                   m2l_task.data(),
                   down_task.data(),
                   l2p_task.data(),
                   waiting_offset.data(),
                   m2l_deps.data(),
                   parts_of.data()};
  const auto tasks = static_cast<std::size_t>(r.end);
  stream_buffer<std::int32_t> succ_count(tasks + 1, stream, pool);
  stream_buffer<std::uint8_t> is_source(tasks, stream, pool);
  stream_buffer<std::int32_t> sinks(1, stream, pool);
  CANOPY_CUDA_TRY(cudaMemsetAsync(sinks.data(), 0, sinks.bytes(), stream));
  d.dependency_count = device_buffer<std::int32_t>(tasks);
  d.succ_offset = device_buffer<std::int32_t>(tasks + 1);
  task_counts_kernel<<<grid_for(r.end + 1), threads, 0, stream>>>(v, succ_count.data(), d.dependency_count.data(), is_source.data(),
                                                                  sinks.data());
  CANOPY_CUDA_TRY(cudaGetLastError());
  std::size_t bytes = 0;
  CANOPY_CUDA_TRY(cub::DeviceScan::ExclusiveSum(nullptr, bytes, succ_count.data(), d.succ_offset.data(), r.end + 1, stream));
  CANOPY_CUDA_TRY(
      cub::DeviceScan::ExclusiveSum(scratch.reserve(bytes), bytes, succ_count.data(), d.succ_offset.data(), r.end + 1, stream));
  d.sources = device_buffer<std::int32_t>(tasks);
  stream_buffer<std::int32_t> source_count(1, stream, pool);
  select(ids, is_source.data(), d.sources.data(), source_count.data(), r.end);
  // One read: the edge count (the scan's last element), the sources and the sinks.
  std::int32_t counts[3] = {0, 0, 0};
  CANOPY_CUDA_TRY(cudaMemcpyAsync(&counts[0], d.succ_offset.data() + r.end, sizeof(std::int32_t), cudaMemcpyDeviceToHost, stream));
  CANOPY_CUDA_TRY(cudaMemcpyAsync(&counts[1], source_count.data(), sizeof(std::int32_t), cudaMemcpyDeviceToHost, stream));
  CANOPY_CUDA_TRY(cudaMemcpyAsync(&counts[2], sinks.data(), sizeof(std::int32_t), cudaMemcpyDeviceToHost, stream));
  CANOPY_CUDA_TRY(cudaStreamSynchronize(stream));
  d.edge_count = counts[0];
  d.source_count = counts[1];
  d.sink_count = counts[2];
  d.has_graph = true;
  d.successor = device_buffer<std::int32_t>(static_cast<std::size_t>(std::max(d.edge_count, 1)));
  successors_kernel<<<grid_for(r.end), threads, 0, stream>>>(v, d.succ_offset.data(), d.successor.data());
  CANOPY_CUDA_TRY(cudaGetLastError());
  if (lists.m2l_count > 0) {
    up_waiters_kernel<<<grid_for(lists.m2l_count), threads, 0, stream>>>(t.parent, nodes, sorted_keys.Current(),
                                                                         sorted_values.Current(), lists.m2l_count,
                                                                         waiting_offset.data(), d.succ_offset.data(),
                                                                         d.successor.data());
    CANOPY_CUDA_TRY(cudaGetLastError());
  }
  CANOPY_CUDA_TRY(cudaStreamSynchronize(stream));  // complete for any stream (the header's promise)
  return d;
}

}  // namespace canopy::fmm
