// SPDX-License-Identifier: Apache-2.0
// The distributed octree and upward pass on CPU ranks (MPI exchange, CPU backend) against the
// single-process pass over the union of the points, run under mpiexec -n 1..4 (CTest); the check
// itself is distributed_check.hpp, shared with the GPU test.
#include "distributed_check.hpp"

#include <canopy/trees/generators.hpp>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>

namespace cd = canopy::distributed;
namespace ct = canopy::trees;
using namespace distributed_check;

namespace {

struct host_run {
  cd::distributed_octree tree;
  cd::distributed_moments moments;
};

host_run run_on_host(const cd::mpi_context& ctx, const std::vector<ct::point>& mine, const cd::decomposition_options& o) {
  cd::mpi_exchange ex(ctx.comm());
  host_run r{cd::build_distributed_octree(ctx, ex, mine, o), {}};
  ct::upward_options pass;
  pass.scheduler.blocks = 1;  // one worker per rank: ranks already oversubscribe the cores
  r.moments = cd::distributed_upward_pass(ctx, ex, r.tree, pass);
  return r;
}

coverage check_against_single_process(const std::vector<ct::point>& all, const distribution& start,
                                      const cd::decomposition_options& options = {}) {
  return distributed_check::check_against_single_process(all, start, options, run_on_host);
}

}  // namespace


TEST(DistributedOctree, PlummerInBlocksEqualsOneProcess) {
  check_against_single_process(ct::generate_plummer(3000, 7), by_blocks, leaf(8));
}

// Large buckets: most of the octree lies in the ranks' subtrees, and global leaves at rank
// boundaries sit inside local leaves (a rank's few points of a big cell).
TEST(DistributedOctree, DeepSubtreesUnderLargeBuckets) {
  const coverage c = check_against_single_process(ct::generate_plummer(3000, 31), round_robin, leaf(16, 400));
  EXPECT_GT(c.below_global_tree, 100u);
  const coverage d = check_against_single_process(ct::generate_uniform(3000, 37), by_blocks, leaf(8, 40));
  // Deterministic input: under 3 ranks two global leaves at the boundaries lie inside local leaves.
  if (world_size() == 3) {
    EXPECT_EQ(d.inside_local_leaf, 2u);
  }
}

TEST(DistributedOctree, UniformRoundRobinWithBucketsAboveTheLeafSize) {
  check_against_single_process(ct::generate_uniform(2000, 3), round_robin, leaf(4, 64));
}

TEST(DistributedOctree, AllPointsStartOnOneRank) {
  check_against_single_process(ct::generate_plummer(1500, 11), all_on_last, leaf(16));
}

TEST(DistributedOctree, NoPointsAnywhere) { check_against_single_process({}, by_blocks, leaf(8)); }

TEST(DistributedOctree, OnePoint) { check_against_single_process({ct::point{0.5f, -2.0f, 3.0f, 1.0f}}, all_on_last); }

TEST(DistributedOctree, FewerPointsThanRanks) {
  check_against_single_process(ct::generate_uniform(3, 5), round_robin, leaf(1));
}

// Coincident points share a cell down to max_depth: no rank boundary may cut them, so the rank
// that owns the cell holds them all (the others may be left empty).
TEST(DistributedOctree, IdenticalPointsAcrossARankBoundary) {
  std::vector<ct::point> all = ct::generate_uniform(600, 9);
  all.insert(all.begin() + 300, 900, ct::point{0.5f, 0.5f, 0.5f, 0.001f});
  check_against_single_process(all, by_blocks, leaf(8));
}

TEST(DistributedOctree, AllPointsIdentical) {
  check_against_single_process(std::vector<ct::point>(700, ct::point{1.0f, 2.0f, 3.0f, 0.5f}), round_robin, leaf(8));
}

// As many clusters of identical points as there could be ranks, of equal size: every rank owns
// one cell of the global tree, on max_depth.
TEST(DistributedOctree, EachRankHoldsOneCell) {
  std::vector<ct::point> all;
  for (int c = 0; c < 4; ++c) all.insert(all.end(), 200, ct::point{0.1f + 0.25f * c, 0.3f, 0.7f - 0.1f * c, 1.0f});
  check_against_single_process(all, round_robin, leaf(8));
}

TEST(DistributedOctree, ShallowTreeWithLeavesOnMaxDepth) {
  check_against_single_process(ct::generate_plummer(2000, 13), by_blocks, leaf(4, 0, 3));
}

TEST(DistributedOctree, MassesOfZeroAndLeafSizeOne) {
  std::vector<ct::point> all = ct::generate_uniform(400, 17);
  for (std::size_t i = 0; i < all.size(); i += 3) all[i].m = 0.0f;
  check_against_single_process(all, round_robin, leaf(1));
}

// The weight hook moves the rank boundaries (here: the heavy work is in the first leaves); the
// result must not change.
TEST(DistributedOctree, WeightsFromThePreviousStepMoveBoundariesNotResults) {
  cd::decomposition_options o = leaf(8);
  o.leaf_weight = [](int level, std::uint64_t prefix, std::uint64_t count) {
    return static_cast<double>(count) * (prefix % 7 == 0 ? 50.0 : 1.0) + level;
  };
  check_against_single_process(ct::generate_plummer(2500, 19), round_robin, o);
}

TEST(DistributedOctree, RanksAreContiguousAndBalancedByCount) {
  const cd::mpi_context ctx(MPI_COMM_WORLD);
  cd::mpi_exchange ex(MPI_COMM_WORLD);
  const std::vector<ct::point> all = ct::generate_plummer(4000, 23);
  std::vector<ct::point> mine;
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (round_robin(i, all.size(), ctx.size()) == ctx.rank()) mine.push_back(all[i]);
  }
  const cd::distributed_octree tree = cd::build_distributed_octree(ctx, ex, mine, leaf(8));
  const std::vector<std::uint64_t> held = ctx.all_gather(tree.local.points.size());
  const double even = 4000.0 / ctx.size();
  for (int r = 0; r < ctx.size(); ++r) {
    EXPECT_LE(tree.top.key_begin[static_cast<std::size_t>(r)], tree.top.key_begin[static_cast<std::size_t>(r) + 1]);
    // The bucket is max(max_leaf, N / (64 P)): a rank's share is within a few buckets of even.
    EXPECT_NEAR(static_cast<double>(held[static_cast<std::size_t>(r)]), even, 0.1 * even + 16) << "rank " << r;
  }
}

// The exchange contract over MPI on host memory (the GPU test runs the same body over NCCL).
TEST(DistributedOctree, MpiExchangeKeepsTheContract) {
  cd::mpi_exchange ex(MPI_COMM_WORLD);
  struct host_bytes {
    std::vector<std::byte> bytes;
    std::byte* data() { return bytes.data(); }
  };
  check_exchange_contract(
      ex,
      [](const void* from, std::size_t n) {
        host_bytes b{std::vector<std::byte>(n)};
        if (n != 0) std::memcpy(b.bytes.data(), from, n);
        return b;
      },
      [](host_bytes& b, void* to, std::size_t n) {
        if (n != 0) std::memcpy(to, b.bytes.data(), n);
      });
}

// A bad point on one rank: every rank throws the same distributed_error naming it, none hangs.
TEST(DistributedOctree, BadInputOnOneRankStopsEveryRank) {
  const cd::mpi_context ctx(MPI_COMM_WORLD);
  cd::mpi_exchange ex(MPI_COMM_WORLD);
  std::vector<ct::point> mine = ct::generate_uniform(50, 29 + static_cast<std::uint64_t>(ctx.rank()));
  const int bad = ctx.size() - 1;
  if (ctx.rank() == bad) mine[7].y = std::numeric_limits<float>::quiet_NaN();
  try {
    (void)cd::build_distributed_octree(ctx, ex, mine, leaf(8));
    ADD_FAILURE() << "no error";
  } catch (const cd::distributed_error& e) {
    EXPECT_EQ(e.rank(), bad);
    EXPECT_EQ(e.phase(), "extent");
    EXPECT_NE(std::string(e.what()).find("rank " + std::to_string(bad) + ": extent: "), std::string::npos) << e.what();
    EXPECT_NE(e.cause().find("point 7"), std::string::npos) << e.what();
    EXPECT_NE(e.cause().find("not finite"), std::string::npos) << e.what();
  }
  // The ranks are still in step: a collective afterwards completes.
  EXPECT_EQ(ctx.sum(1), static_cast<std::uint64_t>(ctx.size()));
}

TEST(DistributedOctree, TheLowestFailingRankIsNamed) {
  const cd::mpi_context ctx(MPI_COMM_WORLD);
  try {
    ctx.phase("work", [&] {
      if (ctx.rank() % 2 == 1 || ctx.size() == 1) throw std::runtime_error("failed on rank " + std::to_string(ctx.rank()));
    });
    ADD_FAILURE() << "no error";
  } catch (const cd::distributed_error& e) {
    const int first = ctx.size() == 1 ? 0 : 1;
    EXPECT_EQ(e.rank(), first);
    EXPECT_EQ(std::string(e.what()), "rank " + std::to_string(first) + ": work: failed on rank " + std::to_string(first));
  }
}

// A rank that failed only waiting for a peer (peer_wait_error: a collective's deadline passed) is
// named only when no rank failed for a cause of its own, even when it is the lower rank; when every
// failure is a wait, the lowest of them.
TEST(DistributedOctree, ARankThatOnlyWaitedIsNotNamed) {
  const cd::mpi_context ctx(MPI_COMM_WORLD);
  const int last = ctx.size() - 1;
  try {
    ctx.phase("work", [&] {
      if (ctx.rank() == last) throw std::runtime_error("failed on rank " + std::to_string(last));
      throw cd::peer_wait_error("waited for rank " + std::to_string(last));
    });
    ADD_FAILURE() << "no error";
  } catch (const cd::distributed_error& e) {
    EXPECT_EQ(e.rank(), last);
    EXPECT_EQ(e.cause(), "failed on rank " + std::to_string(last));
  }
  try {
    ctx.phase("wait", [&] {
      if (ctx.rank() % 2 == 1 || ctx.size() == 1) throw cd::peer_wait_error("rank " + std::to_string(ctx.rank()) + " waited");
    });
    ADD_FAILURE() << "no error";
  } catch (const cd::distributed_error& e) {
    const int first = ctx.size() == 1 ? 0 : 1;
    EXPECT_EQ(e.rank(), first);
    EXPECT_EQ(e.cause(), "rank " + std::to_string(first) + " waited");
  }
}

TEST(DistributedOctree, BadOptionsAreRefusedOnEveryRank) {
  const cd::mpi_context ctx(MPI_COMM_WORLD);
  cd::mpi_exchange ex(MPI_COMM_WORLD);
  EXPECT_THROW((void)cd::build_distributed_octree(ctx, ex, {}, leaf(8, 4)), cd::distributed_error);
  EXPECT_THROW((void)cd::build_distributed_octree(ctx, ex, {}, leaf(0)), cd::distributed_error);
}

// build_octree over a given cube (what each rank does) refuses points outside it.
TEST(DistributedOctree, GivenCubeMustHoldThePoints) {
  ct::build_options b;
  b.cube = ct::box{{0, 0, 0}, {1, 1, 1}};
  const std::vector<ct::point> inside{{0.5f, 0.5f, 0.5f, 1.0f}};
  EXPECT_EQ(ct::build_octree(inside, b).bounds[0].hi[0], 1.0);
  const std::vector<ct::point> outside{{0.5f, 1.0f, 0.5f, 1.0f}};
  EXPECT_THROW((void)ct::build_octree(outside, b), ct::input_error);
  b.cube = ct::box{{0, 0, 0}, {1, 2, 1}};
  EXPECT_THROW((void)ct::build_octree(inside, b), ct::input_error);
}

int main(int argc, char** argv) { return run_all_tests_under_mpi(argc, argv); }
