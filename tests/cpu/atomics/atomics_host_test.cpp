// SPDX-License-Identifier: Apache-2.0
// Host fallbacks of the atomics toolkit (g++), hammered from several std::threads; closed-form
// oracles: every slot handed out exactly once, sums equal to n(n+1)/2, maxima known in advance.
// Also the CI target for ThreadSanitizer (CANOPY_SANITIZE=thread).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <numeric>
#include <thread>
#include <vector>

#include "canopy/atomics/atomics.hpp"

namespace {

namespace ca = canopy::atomics;
constexpr auto relaxed = cuda::std::memory_order_relaxed;
using device_ref_u32 = cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device>;

constexpr int kThreads = 8;

// Runs body(worker, i) for i in [0, n) split round-robin over kThreads workers.
void run_workers(int n, const std::function<void(int, int)>& body) {
  std::vector<std::thread> workers;
  for (int w = 0; w < kThreads; ++w)
    workers.emplace_back([&, w] {
      for (int i = w; i < n; i += kThreads) body(w, i);
    });
  for (auto& t : workers) t.join();
}

void expect_permutation(std::vector<std::int64_t> slots, std::int64_t count) {
  ASSERT_EQ(static_cast<std::int64_t>(slots.size()), count);
  std::sort(slots.begin(), slots.end());
  for (std::int64_t i = 0; i < count; ++i) ASSERT_EQ(slots[static_cast<std::size_t>(i)], i) << "slot " << i;
}

class sizes : public ::testing::TestWithParam<int> {};
INSTANTIATE_TEST_SUITE_P(atomics_host, sizes, ::testing::Values(0, 1, 31, 1000, 100003));

TEST_P(sizes, warp_aggregated_increment_hands_out_every_slot_once) {
  const int n = GetParam();
  std::uint32_t counter = 0;
  std::vector<std::int64_t> slot(static_cast<std::size_t>(n), -1);
  run_workers(n, [&](int, int i) {
    slot[static_cast<std::size_t>(i)] = ca::warp_aggregated_increment(device_ref_u32(counter), relaxed);
  });
  EXPECT_EQ(counter, static_cast<std::uint32_t>(n));
  expect_permutation(slot, n);
}

TEST_P(sizes, warp_reserve_gives_slots_only_to_lanes_that_ask) {
  const int n = GetParam();
  std::uint64_t counter = 0;
  std::vector<std::int64_t> slot(static_cast<std::size_t>(n), -1);
  run_workers(n, [&](int, int i) {
    const bool want = i % 3 != 1;
    const auto r = ca::warp_reserve(cuda::atomic_ref<std::uint64_t, cuda::thread_scope_device>(counter), want,
                                    cuda::std::memory_order_acq_rel);
    if (want) {
      EXPECT_EQ(r.count, 1);
      EXPECT_EQ(r.index, r.base);
      slot[static_cast<std::size_t>(i)] = static_cast<std::int64_t>(r.index);
    } else {
      EXPECT_EQ(r.count, 0);
    }
  });
  std::vector<std::int64_t> taken;
  for (int i = 0; i < n; ++i)
    if (i % 3 != 1) taken.push_back(slot[static_cast<std::size_t>(i)]);
  const auto expected = static_cast<std::int64_t>(taken.size());
  EXPECT_EQ(static_cast<std::int64_t>(counter), expected);
  expect_permutation(taken, expected);
}

TEST_P(sizes, warp_aggregated_add_ranges_tile_n_times_n_plus_1_over_2) {
  const int n = GetParam();
  std::uint64_t counter = 0;
  std::vector<std::uint64_t> begin(static_cast<std::size_t>(n));
  run_workers(n, [&](int, int i) {
    const auto value = static_cast<std::uint64_t>(i) + 1;
    begin[static_cast<std::size_t>(i)] =
        ca::warp_aggregated_add(cuda::atomic_ref<std::uint64_t, cuda::thread_scope_device>(counter), value, relaxed);
  });
  const auto total = static_cast<std::uint64_t>(n) * (static_cast<std::uint64_t>(n) + 1) / 2;
  EXPECT_EQ(counter, total);
  // The ranges [begin, begin + i + 1) must tile [0, total) without gaps or overlaps.
  std::vector<int> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return begin[static_cast<std::size_t>(a)] < begin[static_cast<std::size_t>(b)]; });
  std::uint64_t next = 0;
  for (int i : order) {
    ASSERT_EQ(begin[static_cast<std::size_t>(i)], next);
    next += static_cast<std::uint64_t>(i) + 1;
  }
  EXPECT_EQ(next, total);
}

TEST(atomics_host, warp_aggregated_add_of_zero_issues_nothing) {
  std::uint32_t counter = 7;
  unsigned long long tally = 0;
  ca::counting_ref counted{device_ref_u32(counter), &tally};
  EXPECT_EQ(ca::warp_aggregated_add(counted, 0u, relaxed), 0u);
  EXPECT_EQ(tally, 0ull);
  EXPECT_EQ(ca::warp_aggregated_add(counted, 3u, relaxed), 7u);
  EXPECT_EQ(tally, 1ull);
  EXPECT_EQ(counter, 10u);
}

TEST_P(sizes, block_aggregate_increment_if_and_fetch_add) {
  const int n = GetParam();
  std::uint32_t counter = 0;
  std::uint32_t sum = 0;
  std::vector<std::int64_t> slot(static_cast<std::size_t>(n), -1);
  run_workers(n, [&](int, int i) {
    ca::block_aggregate<std::uint32_t>::TempStorage temp;  // a host "block" is one thread
    const bool keep = i % 2 == 0;
    const auto s = ca::block_aggregate<std::uint32_t>(temp).increment_if(keep, device_ref_u32(counter), relaxed);
    if (keep) slot[static_cast<std::size_t>(i)] = s;
    ca::block_aggregate<std::uint32_t>(temp).fetch_add(static_cast<std::uint32_t>(i) + 1, device_ref_u32(sum),
                                                       cuda::std::memory_order_release);
  });
  std::vector<std::int64_t> taken;
  for (int i = 0; i < n; i += 2) taken.push_back(slot[static_cast<std::size_t>(i)]);
  EXPECT_EQ(counter, static_cast<std::uint32_t>(taken.size()));
  expect_permutation(taken, static_cast<std::int64_t>(taken.size()));
  EXPECT_EQ(sum, static_cast<std::uint32_t>(static_cast<std::uint64_t>(n) * (static_cast<std::uint64_t>(n) + 1) / 2));
}

TEST_P(sizes, hierarchical_max_finds_the_known_maximum) {
  const int n = GetParam();
  // All values negative except, when n > 0, the one at n / 2; lowest() is the identity.
  std::int32_t global = cuda::std::numeric_limits<std::int32_t>::lowest();
  run_workers(n, [&](int, int i) {
    const std::int32_t v = i == n / 2 ? 12345 : -1 - i;
    ca::hierarchical_max<std::int32_t>::TempStorage temp;
    EXPECT_EQ(ca::hierarchical_max<std::int32_t>(temp).update(
                  v, cuda::atomic_ref<std::int32_t, cuda::thread_scope_device>(global), relaxed),
              v);
  });
  EXPECT_EQ(global, n == 0 ? cuda::std::numeric_limits<std::int32_t>::lowest() : 12345);
}

TEST_P(sizes, reduce_by_key_matches_per_bin_closed_form) {
  const int n = GetParam();
  constexpr int bins = 17;
  std::vector<std::uint64_t> sums(bins, 0);
  std::vector<float> halves(bins, 0.0f);
  run_workers(n, [&](int, int i) {
    const int key = (i / 5) % bins;  // runs of 5 equal keys, like partially sorted input
    ca::warp_reduce_by_key_add<cuda::thread_scope_device>(sums.data(), key, static_cast<std::uint64_t>(i), relaxed);
    ca::warp_reduce_by_key_add<cuda::thread_scope_device>(halves.data(), key, 0.5f, relaxed);
  });
  std::vector<std::uint64_t> expect_sum(bins, 0);
  std::vector<int> expect_count(bins, 0);
  for (int i = 0; i < n; ++i) {
    expect_sum[static_cast<std::size_t>((i / 5) % bins)] += static_cast<std::uint64_t>(i);
    ++expect_count[static_cast<std::size_t>((i / 5) % bins)];
  }
  for (int b = 0; b < bins; ++b) {
    EXPECT_EQ(sums[static_cast<std::size_t>(b)], expect_sum[static_cast<std::size_t>(b)]) << "bin " << b;
    // Exact: multiples of 0.5 below 2^23 are representable, so the summation order cannot matter.
    EXPECT_EQ(halves[static_cast<std::size_t>(b)], 0.5f * static_cast<float>(expect_count[static_cast<std::size_t>(b)]))
        << "bin " << b;
  }
  const std::uint64_t all = std::accumulate(sums.begin(), sums.end(), std::uint64_t{0});
  EXPECT_EQ(all, n == 0 ? 0 : static_cast<std::uint64_t>(n - 1) * static_cast<std::uint64_t>(n) / 2);
}

TEST(atomics_host, counting_ref_counts_each_operation) {
  std::uint32_t counter = 0;
  std::int32_t maximum = 0;
  unsigned long long tally = 0;
  run_workers(1000, [&](int, int i) {
    ca::counting_ref counted{device_ref_u32(counter), &tally};
    ca::warp_aggregated_increment(counted, relaxed);
    ca::counting_ref counted_max{cuda::atomic_ref<std::int32_t, cuda::thread_scope_device>(maximum), &tally};
    counted_max.fetch_max(i, relaxed);
  });
  EXPECT_EQ(counter, 1000u);
  EXPECT_EQ(maximum, 999);
  EXPECT_EQ(tally, 2000ull);  // host fallback: one atomic per call, no aggregation
}

}  // namespace
