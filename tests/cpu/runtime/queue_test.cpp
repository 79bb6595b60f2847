// SPDX-License-Identifier: Apache-2.0
// Closed-form oracles for the queues: every pushed id is popped exactly once, whatever the
// interleaving, thread count and capacity (capacities around the 32-lane and power-of-two edges).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <tuple>
#include <vector>

#include "canopy/detail/queue.hpp"

namespace {

using ring = canopy::detail::ring_ref<cuda::thread_scope_device>;

struct owned_ring {
  explicit owned_ring(std::int32_t capacity)
      : header(canopy::detail::ring_header::empty(capacity)), slots(static_cast<std::size_t>(capacity), 0) {}
  ring ref() { return ring{&header, slots.data()}; }
  canopy::detail::ring_header header;
  std::vector<std::uint64_t> slots;
};

TEST(RingQueue, SingleThreadFifoAndFull) {
  for (int cap : {1, 2, 3, 31, 32, 33}) {
    owned_ring q(cap);
    auto r = q.ref();
    for (int round = 0; round < 3; ++round) {  // several turns: sequence numbers must advance
      for (int i = 0; i < cap; ++i) ASSERT_TRUE(r.try_push(round * 100 + i)) << "cap " << cap;
      EXPECT_FALSE(r.try_push(-5)) << "a full queue must refuse, cap " << cap;
      EXPECT_EQ(r.size_hint(), cap);
      for (int i = 0; i < cap; ++i) {
        canopy::task_id t = -1;
        ASSERT_TRUE(r.try_pop(t));
        EXPECT_EQ(t, round * 100 + i);
      }
      canopy::task_id t;
      EXPECT_FALSE(r.try_pop(t)) << "an empty queue must report empty";
    }
  }
}

TEST(RingQueue, BatchOperationsArePartialNotLossy) {
  owned_ring q(5);
  auto r = q.ref();
  const canopy::task_id in[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(r.try_push(in, 8), 5);  // takes what fits, says how many
  canopy::task_id out[8];
  EXPECT_EQ(r.try_pop(out, 3), 3);
  EXPECT_EQ(r.try_push(in + 5, 3), 3);
  EXPECT_EQ(r.try_pop(out + 3, 8), 5);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(out[i], i);
}

class RingQueueConcurrent : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(RingQueueConcurrent, EveryItemPoppedExactlyOnce) {
  const auto [threads, capacity] = GetParam();
  constexpr int per_thread = 8000;
  const int total = threads * per_thread;
  owned_ring q(capacity);
  const ring r = q.ref();
  std::vector<std::atomic<int>> seen(static_cast<std::size_t>(total));
  std::atomic<int> popped{0};
  std::vector<std::thread> pool;
  for (int w = 0; w < threads; ++w) {
    pool.emplace_back([&, w] {
      // Each thread both produces its own range and consumes anyone's, with mixed batch sizes.
      int next = w * per_thread;
      const int end = next + per_thread;
      canopy::task_id buf[7];
      int batch = 1 + w % 7;
      while (next < end || popped.load() < total) {
        if (next < end) {
          canopy::task_id in[7];
          int k = std::min(batch, end - next);
          for (int i = 0; i < k; ++i) in[i] = next + i;
          next += r.try_push(in, k);
        }
        const int got = r.try_pop(buf, batch);
        for (int i = 0; i < got; ++i) seen[static_cast<std::size_t>(buf[i])].fetch_add(1);
        popped.fetch_add(got);
        batch = batch % 7 + 1;
      }
    });
  }
  for (auto& t : pool) t.join();
  EXPECT_EQ(popped.load(), total);
  long long sum = 0;
  for (int i = 0; i < total; ++i) {
    ASSERT_EQ(seen[static_cast<std::size_t>(i)].load(), 1) << "item " << i;
    sum += i;
  }
  EXPECT_EQ(sum, static_cast<long long>(total) * (total - 1) / 2);
  EXPECT_EQ(q.header.items, 0);
  EXPECT_EQ(q.header.space, capacity);
}

INSTANTIATE_TEST_SUITE_P(ThreadsByCapacity, RingQueueConcurrent,
                         ::testing::Combine(::testing::Values(2, 3, 4, 8), ::testing::Values(1, 2, 3, 31, 32, 33)));

// try_push in its three steps, as the GPU's lane groups push a burst (reserve_push by one lane,
// fill by every lane in any order, publish after them): producers fill their tickets last first,
// and half of each burst from another thread, while consumers pop; every item is still popped
// exactly once, and the ring ends empty with all its space back.
TEST(RingQueue, SplitPushFilledOutOfOrderAndByOtherThreads) {
  for (const int capacity : {1, 3, 32}) {
    constexpr int producers = 3, per_producer = 200;
    const int total = producers * per_producer;
    owned_ring q(capacity);
    const ring r = q.ref();
    std::vector<std::atomic<int>> seen(static_cast<std::size_t>(total));
    std::atomic<int> popped{0};
    std::vector<std::thread> pool;
    for (int w = 0; w < producers; ++w) {
      pool.emplace_back([&, w] {
        int next = w * per_producer;
        const int end = next + per_producer;
        int want = 1 + w;
        while (next < end) {
          std::uint64_t first = 0;
          const int k = r.reserve_push(std::min(want, end - next), &first);
          if (k > 0) {
            const int half = k / 2;
            // The first half by a helper (another lane), the rest here, last ticket first.
            std::thread helper;
            if (half > 0)
              helper = std::thread([&] {
                for (int i = 0; i < half; ++i) r.fill(first + static_cast<std::uint64_t>(i), next + i);
              });
            for (int i = k - 1; i >= half; --i) r.fill(first + static_cast<std::uint64_t>(i), next + i);
            if (helper.joinable()) helper.join();
            r.publish(k);
            next += k;
          } else {
            std::this_thread::yield();  // full: let the consumer run
          }
          want = want % 5 + 1;
        }
      });
    }
    pool.emplace_back([&] {
      canopy::task_id buf[4];
      while (popped.load() < total) {
        const int got = r.try_pop(buf, 4);
        if (got == 0) std::this_thread::yield();
        for (int i = 0; i < got; ++i) seen[static_cast<std::size_t>(buf[i])].fetch_add(1);
        popped.fetch_add(got);
      }
    });
    for (auto& t : pool) t.join();
    for (int i = 0; i < total; ++i) ASSERT_EQ(seen[static_cast<std::size_t>(i)].load(), 1) << "item " << i << ", capacity " << capacity;
    EXPECT_EQ(q.header.items, 0);
    EXPECT_EQ(q.header.space, capacity);
  }
}

TEST(LocalRing, WrapsAndReportsFullEmpty) {
  canopy::task_id storage[3];
  canopy::detail::local_ring q{storage, 3, 0, 0};
  const canopy::task_id in[5] = {1, 2, 3, 4, 5};
  EXPECT_EQ(q.try_push(in, 5), 3);
  canopy::task_id out[5];
  EXPECT_EQ(q.try_pop(out, 2), 2);
  EXPECT_EQ(q.try_push(in + 3, 2), 2);
  EXPECT_EQ(q.try_pop(out + 2, 5), 3);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(out[i], i + 1);
  EXPECT_EQ(q.try_pop(out, 1), 0);
}

}  // namespace
