// SPDX-License-Identifier: Apache-2.0
// The mode and push-policy tables: names round-trip, with_mode reaches every row with its own
// compile-time mode, values outside the tables are refused, and the trait checker rejects the
// combinations the loops cannot honour.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "canopy/mode.hpp"
#include "canopy/push_policy.hpp"

namespace {

using canopy::mode;
using canopy::push_policy;

TEST(ModeTable, NamesRoundTripAndAreDistinct) {
  std::set<std::string> names;
  for (const mode m : canopy::all_modes) {
    const std::string name(canopy::to_string(m));
    EXPECT_TRUE(names.insert(name).second) << name << " twice";
    ASSERT_TRUE(canopy::parse_mode(name).has_value()) << name;
    EXPECT_EQ(*canopy::parse_mode(name), m);
    EXPECT_FALSE(canopy::info(m).summary.empty()) << name;
  }
  EXPECT_EQ(names.size(), canopy::mode_count);
  EXPECT_FALSE(canopy::parse_mode("lock-free").has_value());
  EXPECT_EQ(canopy::to_string(static_cast<mode>(canopy::mode_count)), "unknown");
  EXPECT_EQ(canopy::to_string(static_cast<mode>(-1)), "unknown");
}

TEST(ModeTable, WithModeReachesEveryRowWithItsOwnMode) {
  for (const mode m : canopy::all_modes) {
    const mode seen = canopy::with_mode(m, [](auto M) { return decltype(M)::value; });
    EXPECT_EQ(seen, m) << canopy::to_string(m);
    int calls = 0;
    canopy::with_mode(m, [&](auto M) {
      ++calls;
      EXPECT_EQ(canopy::traits_of(decltype(M)::value).continuation, canopy::traits_of(m).continuation);
    });
    EXPECT_EQ(calls, 1) << canopy::to_string(m);
  }
}

TEST(ModeTable, ValuesOutsideTheTableAreRefused) {
  for (const mode bad : {static_cast<mode>(canopy::mode_count), static_cast<mode>(-1)}) {
    int calls = 0;
    try {
      canopy::with_mode(bad, [&](auto) { ++calls; });
      ADD_FAILURE() << "with_mode accepted " << static_cast<int>(bad);
    } catch (const canopy::error& e) {
      EXPECT_EQ(e.code(), canopy::status::invalid_argument) << e.what();
    }
    EXPECT_EQ(calls, 0);
  }
}

TEST(ModeTable, TraitCheckerRejectsWhatTheLoopsCannotHonour) {
  for (const auto& row : canopy::mode_table) EXPECT_TRUE(canopy::consistent(row.traits)) << row.name;
  EXPECT_FALSE(canopy::consistent({.block_fetch = true, .continuation = true}));  // climbs without counters
  EXPECT_FALSE(canopy::consistent({.block_fetch = true, .atomic_tree = true, .balanced_push = true}));  // nowhere to push
  EXPECT_FALSE(canopy::consistent({.atomic_tree = true}));                                               // warp masters lock the tree
  EXPECT_FALSE(canopy::consistent({.linked_list_queue = true, .private_queues = true}));
  EXPECT_TRUE(canopy::consistent({.block_fetch = true, .atomic_tree = true, .continuation = true}));  // not a rung, still fine
}

TEST(PushPolicyTable, NamesRoundTripAndOutsideValuesAreUnknown) {
  for (const push_policy p : canopy::all_push_policies) {
    const auto back = canopy::parse_push_policy(canopy::to_string(p));
    ASSERT_TRUE(back.has_value()) << canopy::to_string(p);
    EXPECT_EQ(*back, p);
  }
  EXPECT_EQ(canopy::all_push_policies.size(), canopy::push_policy_count);
  EXPECT_EQ(canopy::to_string(static_cast<push_policy>(canopy::push_policy_count)), "unknown");
  EXPECT_FALSE(canopy::parse_push_policy("random").has_value());
}

}  // namespace
