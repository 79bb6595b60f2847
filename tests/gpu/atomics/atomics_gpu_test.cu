// SPDX-License-Identifier: Apache-2.0
// Device paths of the atomics toolkit against closed-form oracles: every slot handed out exactly
// once, ranges tiling [0, n(n+1)/2), known maxima, per-bin sums; plus the aggregation claims
// (no more atomics than one per warp or per block). Label `gpu`; skips without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "canopy/atomics/atomics.hpp"
#include "gpu_test.hpp"

namespace {

namespace ca = canopy::atomics;
using canopy::device_buffer;
constexpr auto relaxed = cuda::std::memory_order_relaxed;
using device_ref_u32 = cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device>;

constexpr int kBlock = 256;

__host__ __device__ bool asks(std::uint32_t i) { return (i / 32) % 3 != 0 && i % 5 != 0; }  // whole warps idle too

int blocks_for(int n) { return std::max(1, (n + kBlock - 1) / kBlock); }

class atomics_gpu : public canopy::test::gpu_test {};
class atomics_gpu_sizes : public canopy::test::gpu_test, public ::testing::WithParamInterface<int> {};
INSTANTIATE_TEST_SUITE_P(sizes, atomics_gpu_sizes, ::testing::Values(1, 31, 1000, 100003, 1 << 22));

void expect_permutation(std::vector<std::int64_t> slots, std::int64_t count) {
  ASSERT_EQ(static_cast<std::int64_t>(slots.size()), count);
  std::sort(slots.begin(), slots.end());
  for (std::int64_t i = 0; i < count; ++i) ASSERT_EQ(slots[static_cast<std::size_t>(i)], i) << "slot " << i;
}

std::int64_t warps_with(int n, bool (*pred)(std::uint32_t)) {
  std::int64_t warps = 0;
  for (int w = 0; w < n; w += 32) {
    bool any = false;
    for (int i = w; i < std::min(n, w + 32); ++i) any = any || pred(static_cast<std::uint32_t>(i));
    warps += any ? 1 : 0;
  }
  return warps;
}

bool always(std::uint32_t) { return true; }
bool host_asks(std::uint32_t i) { return asks(i); }

// ---- warp_aggregated_increment ------------------------------------------------------------

__global__ void increment_kernel(std::uint32_t* counter, unsigned long long* tally, std::int64_t* slot, int n,
                                 bool divergent, cuda::std::memory_order order) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  slot[i] = -1;
  if (divergent && !asks(static_cast<std::uint32_t>(i))) return;
  ca::counting_ref counted{device_ref_u32(*counter), tally};
  slot[i] = ca::warp_aggregated_increment(counted, order);
}

void check_increment(int n, bool divergent, cuda::std::memory_order order) {
  device_buffer<std::uint32_t> counter(1);
  device_buffer<unsigned long long> tally(1);
  device_buffer<std::int64_t> slot(static_cast<std::size_t>(n));
  counter.fill_bytes(0);
  tally.fill_bytes(0);
  increment_kernel<<<blocks_for(n), kBlock>>>(counter.data(), tally.data(), slot.data(), n, divergent, order);
  CANOPY_TEST_CUDA(cudaGetLastError());
  const auto slots = slot.download();
  std::vector<std::int64_t> taken;
  for (int i = 0; i < n; ++i)
    if (!divergent || asks(static_cast<std::uint32_t>(i))) taken.push_back(slots[static_cast<std::size_t>(i)]);
  EXPECT_EQ(counter.download()[0], taken.size());
  expect_permutation(taken, static_cast<std::int64_t>(taken.size()));
  // One atomic per converged group: at least one per warp with a participant, never more than
  // one per participant. Fully converged warps (the usual case) reach the lower bound.
  const auto atomics = static_cast<std::int64_t>(tally.download()[0]);
  const auto min_atomics = warps_with(n, divergent ? host_asks : always);
  EXPECT_GE(atomics, min_atomics);
  EXPECT_LE(atomics, static_cast<std::int64_t>(taken.size()));
  ::testing::Test::RecordProperty("global_atomics", static_cast<int>(atomics));
  ::testing::Test::RecordProperty("one_per_warp", static_cast<int>(min_atomics));
}

TEST_P(atomics_gpu_sizes, warp_aggregated_increment_every_slot_once) { check_increment(GetParam(), false, relaxed); }

TEST_P(atomics_gpu_sizes, warp_aggregated_increment_divergent_lanes) { check_increment(GetParam(), true, relaxed); }

TEST_F(atomics_gpu, warp_aggregated_increment_acq_rel_path) {
  check_increment(100003, true, cuda::std::memory_order_acq_rel);
}

TEST_F(atomics_gpu, warp_aggregated_increment_one_atomic_per_full_warp) {
  const int n = 1 << 20;
  device_buffer<std::uint32_t> counter(1);
  device_buffer<unsigned long long> tally(1);
  device_buffer<std::int64_t> slot(static_cast<std::size_t>(n));
  counter.fill_bytes(0);
  tally.fill_bytes(0);
  increment_kernel<<<n / kBlock, kBlock>>>(counter.data(), tally.data(), slot.data(), n, false, relaxed);
  CANOPY_TEST_CUDA(cudaGetLastError());
  // Every thread participates and nothing diverges before the call: 32x fewer atomics exactly.
  EXPECT_EQ(tally.download()[0], static_cast<unsigned long long>(n / 32));
}

// ---- warp_reserve -------------------------------------------------------------------------

__global__ void reserve_kernel(unsigned long long* counter, std::int64_t* index, std::int64_t* base, int* count,
                               int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  const bool want = asks(static_cast<std::uint32_t>(i));
  const auto r = ca::warp_reserve(cuda::atomic_ref<unsigned long long, cuda::thread_scope_device>(*counter), want,
                                  cuda::std::memory_order_acq_rel);
  index[i] = want ? static_cast<std::int64_t>(r.index) : -1;
  base[i] = r.count > 0 ? static_cast<std::int64_t>(r.base) : -1;
  count[i] = r.count;
}

TEST_P(atomics_gpu_sizes, warp_reserve_slots_and_warp_ranges) {
  const int n = GetParam();
  device_buffer<unsigned long long> counter(1);
  device_buffer<std::int64_t> index(static_cast<std::size_t>(n)), base(static_cast<std::size_t>(n));
  device_buffer<int> count(static_cast<std::size_t>(n));
  counter.fill_bytes(0);
  reserve_kernel<<<blocks_for(n), kBlock>>>(counter.data(), index.data(), base.data(), count.data(), n);
  CANOPY_TEST_CUDA(cudaGetLastError());
  const auto idx = index.download();
  const auto bases = base.download();
  const auto counts = count.download();
  std::vector<std::int64_t> taken;
  for (int i = 0; i < n; ++i) {
    const auto u = static_cast<std::size_t>(i);
    if (!asks(static_cast<std::uint32_t>(i))) continue;
    taken.push_back(idx[u]);
    // The lane's slot lies in its warp's range, and the warp reserved no more than 32.
    ASSERT_GE(counts[u], 1);
    ASSERT_LE(counts[u], 32);
    ASSERT_GE(idx[u], bases[u]);
    ASSERT_LT(idx[u], bases[u] + counts[u]);
  }
  // Warps where nobody asks report count 0 (no atomic issued).
  for (int w = 0; w < n; w += 32) {
    bool any = false;
    for (int i = w; i < std::min(n, w + 32); ++i) any = any || asks(static_cast<std::uint32_t>(i));
    if (any) continue;
    for (int i = w; i < std::min(n, w + 32); ++i) ASSERT_EQ(counts[static_cast<std::size_t>(i)], 0) << "lane " << i;
  }
  EXPECT_EQ(counter.download()[0], taken.size());
  expect_permutation(taken, static_cast<std::int64_t>(taken.size()));
}

// ---- warp_aggregated_add ------------------------------------------------------------------

__global__ void add_kernel(unsigned long long* counter, unsigned long long* begin, int n, int modulus) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  const auto value = static_cast<unsigned long long>(modulus == 0 ? i + 1 : i % modulus);
  begin[i] = ca::warp_aggregated_add(cuda::atomic_ref<unsigned long long, cuda::thread_scope_device>(*counter), value,
                                     cuda::std::memory_order_release);
}

void check_add(int n, int modulus) {
  device_buffer<unsigned long long> counter(1), begin(static_cast<std::size_t>(n));
  counter.fill_bytes(0);
  add_kernel<<<blocks_for(n), kBlock>>>(counter.data(), begin.data(), n, modulus);
  CANOPY_TEST_CUDA(cudaGetLastError());
  const auto b = begin.download();
  auto value = [&](int i) { return static_cast<unsigned long long>(modulus == 0 ? i + 1 : i % modulus); };
  std::vector<int> order;
  for (int i = 0; i < n; ++i)
    if (value(i) > 0) order.push_back(i);
  std::sort(order.begin(), order.end(), [&](int x, int y) { return b[static_cast<std::size_t>(x)] < b[static_cast<std::size_t>(y)]; });
  unsigned long long next = 0;
  for (int i : order) {
    ASSERT_EQ(b[static_cast<std::size_t>(i)], next) << "lane " << i;
    next += value(i);
  }
  unsigned long long total = 0;
  for (int i = 0; i < n; ++i) total += value(i);
  if (modulus == 0) EXPECT_EQ(total, static_cast<unsigned long long>(n) * (static_cast<unsigned long long>(n) + 1) / 2);
  EXPECT_EQ(next, total);
  EXPECT_EQ(counter.download()[0], total);
}

TEST_P(atomics_gpu_sizes, warp_aggregated_add_tiles_n_n_plus_1_over_2) { check_add(GetParam(), 0); }
TEST_P(atomics_gpu_sizes, warp_aggregated_add_with_zero_lanes) { check_add(GetParam(), 7); }

// ---- block_aggregate ----------------------------------------------------------------------

// 2D blocks and a grid larger than n: out-of-range threads still join the collective with 0.
__global__ void block_kernel(std::uint32_t* counter, std::uint32_t* sum, unsigned long long* tally,
                             std::int64_t* slot, int n) {
  __shared__ ca::block_aggregate<std::uint32_t>::TempStorage temp;
  const int in_block = static_cast<int>(threadIdx.y * blockDim.x + threadIdx.x);
  const int i = static_cast<int>(blockIdx.x * blockDim.x * blockDim.y) + in_block;
  const bool valid = i < n;
  const bool keep = valid && asks(static_cast<std::uint32_t>(i));
  ca::counting_ref counted{device_ref_u32(*counter), tally};
  const std::uint32_t s = ca::block_aggregate<std::uint32_t>(temp).increment_if(keep, counted, relaxed);
  if (valid) slot[i] = keep ? static_cast<std::int64_t>(s) : -1;
  __syncthreads();  // TempStorage is reused below
  ca::block_aggregate<std::uint32_t>(temp).fetch_add(valid ? static_cast<std::uint32_t>(i) + 1 : 0u,
                                                     device_ref_u32(*sum), cuda::std::memory_order_acq_rel);
}

TEST_P(atomics_gpu_sizes, block_aggregate_slots_and_sum) {
  const int n = GetParam();
  const dim3 block(16, 8);
  const int per_block = 16 * 8;
  const int blocks = (n + per_block - 1) / per_block;
  device_buffer<std::uint32_t> counter(1), sum(1);
  device_buffer<unsigned long long> tally(1);
  device_buffer<std::int64_t> slot(static_cast<std::size_t>(n));
  counter.fill_bytes(0);
  sum.fill_bytes(0);
  tally.fill_bytes(0);
  block_kernel<<<blocks, block>>>(counter.data(), sum.data(), tally.data(), slot.data(), n);
  CANOPY_TEST_CUDA(cudaGetLastError());
  const auto slots = slot.download();
  std::vector<std::int64_t> taken;
  for (int i = 0; i < n; ++i)
    if (asks(static_cast<std::uint32_t>(i))) taken.push_back(slots[static_cast<std::size_t>(i)]);
  EXPECT_EQ(counter.download()[0], taken.size());
  expect_permutation(taken, static_cast<std::int64_t>(taken.size()));
  const auto expected_sum = static_cast<std::uint32_t>(static_cast<std::uint64_t>(n) * (static_cast<std::uint64_t>(n) + 1) / 2);
  EXPECT_EQ(sum.download()[0], expected_sum);  // modulo 2^32, like the counter itself
  // Exactly one global atomic per block that kept anything.
  std::int64_t blocks_keeping = 0;
  for (int b = 0; b < blocks; ++b) {
    bool any = false;
    for (int i = b * per_block; i < std::min(n, (b + 1) * per_block); ++i) any = any || asks(static_cast<std::uint32_t>(i));
    blocks_keeping += any ? 1 : 0;
  }
  EXPECT_EQ(static_cast<std::int64_t>(tally.download()[0]), blocks_keeping);
}

// ---- hierarchical_max ---------------------------------------------------------------------

__host__ __device__ std::int32_t max_input(int i, int n) { return i == n / 3 ? 12345 : -1 - i; }

__global__ void max_kernel(std::int32_t* global, unsigned long long* tally, std::int32_t* block_result, int n) {
  __shared__ ca::hierarchical_max<std::int32_t>::TempStorage temp;
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const std::int32_t v = i < n ? max_input(i, n) : cuda::std::numeric_limits<std::int32_t>::lowest();
  ca::counting_ref counted{cuda::atomic_ref<std::int32_t, cuda::thread_scope_device>(*global), tally};
  const std::int32_t m = ca::hierarchical_max<std::int32_t>(temp).update(v, counted, relaxed);
  if (i < n) block_result[i] = m;
}

TEST_P(atomics_gpu_sizes, hierarchical_max_known_maximum_one_atomic_per_block) {
  const int n = GetParam();
  const int blocks = blocks_for(n);
  device_buffer<std::int32_t> global(std::vector<std::int32_t>{cuda::std::numeric_limits<std::int32_t>::lowest()});
  device_buffer<unsigned long long> tally(1);
  device_buffer<std::int32_t> block_result(static_cast<std::size_t>(n));
  tally.fill_bytes(0);
  max_kernel<<<blocks, kBlock>>>(global.data(), tally.data(), block_result.data(), n);
  CANOPY_TEST_CUDA(cudaGetLastError());
  EXPECT_EQ(global.download()[0], 12345);
  EXPECT_EQ(tally.download()[0], static_cast<unsigned long long>(blocks));
  const auto got = block_result.download();
  for (int b = 0; b < blocks; ++b) {
    std::int32_t expect = cuda::std::numeric_limits<std::int32_t>::lowest();
    for (int i = b * kBlock; i < std::min(n, (b + 1) * kBlock); ++i) expect = std::max(expect, max_input(i, n));
    for (int i = b * kBlock; i < std::min(n, (b + 1) * kBlock); ++i)
      ASSERT_EQ(got[static_cast<std::size_t>(i)], expect) << "thread " << i;
  }
}

// ---- warp_reduce_by_key_add -----------------------------------------------------------------

constexpr int kBins = 97;

__global__ void by_key_kernel(unsigned long long* sums, float* halves, int n, int run) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  const int key = (i / run) % kBins;
  ca::warp_reduce_by_key_add<cuda::thread_scope_device>(sums, key, static_cast<unsigned long long>(i), relaxed);
  ca::warp_reduce_by_key_add<cuda::thread_scope_device>(halves, static_cast<std::uint64_t>(key), 0.5f, relaxed);
}

// A shared-memory table (block scope), flushed to global once per block.
__global__ void by_key_shared_kernel(unsigned* counts, int n, int run) {
  __shared__ unsigned table[kBins];
  for (int b = static_cast<int>(threadIdx.x); b < kBins; b += static_cast<int>(blockDim.x)) table[b] = 0;
  __syncthreads();
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) ca::warp_reduce_by_key_add<cuda::thread_scope_block>(table, (i / run) % kBins, 1u, relaxed);
  __syncthreads();
  for (int b = static_cast<int>(threadIdx.x); b < kBins; b += static_cast<int>(blockDim.x))
    if (table[b] != 0) cuda::atomic_ref<unsigned, cuda::thread_scope_device>(counts[b]).fetch_add(table[b], relaxed);
}

class reduce_by_key_gpu : public canopy::test::gpu_test, public ::testing::WithParamInterface<std::tuple<int, int>> {};
INSTANTIATE_TEST_SUITE_P(runs, reduce_by_key_gpu,
                         ::testing::Combine(::testing::Values(1, 1000, 1 << 20), ::testing::Values(1, 3, 32, 100)));

TEST_P(reduce_by_key_gpu, per_bin_sums_match_closed_form) {
  const auto [n, run] = GetParam();
  device_buffer<unsigned long long> sums(kBins);
  device_buffer<float> halves(kBins);
  device_buffer<unsigned> counts(kBins);
  sums.fill_bytes(0);
  halves.fill_bytes(0);
  counts.fill_bytes(0);
  by_key_kernel<<<blocks_for(n), kBlock>>>(sums.data(), halves.data(), n, run);
  by_key_shared_kernel<<<blocks_for(n), kBlock>>>(counts.data(), n, run);
  CANOPY_TEST_CUDA(cudaGetLastError());
  std::vector<unsigned long long> expect_sum(kBins, 0);
  std::vector<unsigned> expect_count(kBins, 0);
  for (int i = 0; i < n; ++i) {
    expect_sum[static_cast<std::size_t>((i / run) % kBins)] += static_cast<unsigned long long>(i);
    ++expect_count[static_cast<std::size_t>((i / run) % kBins)];
  }
  const auto got_sum = sums.download();
  const auto got_half = halves.download();
  const auto got_count = counts.download();
  for (std::size_t b = 0; b < kBins; ++b) {
    EXPECT_EQ(got_sum[b], expect_sum[b]) << "bin " << b;
    // Exact: multiples of 0.5 below 2^23 are representable, so summation order cannot matter.
    EXPECT_EQ(got_half[b], 0.5f * static_cast<float>(expect_count[b])) << "bin " << b;
    EXPECT_EQ(got_count[b], expect_count[b]) << "bin " << b;
  }
  const auto total = std::accumulate(got_sum.begin(), got_sum.end(), 0ull);
  EXPECT_EQ(total, static_cast<unsigned long long>(n - 1) * static_cast<unsigned long long>(n) / 2);
}

}  // namespace
