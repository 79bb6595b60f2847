// SPDX-License-Identifier: Apache-2.0
// The distributed octree and upward pass against the single-process pass over the union of the
// points, run under mpiexec -n 1..4 (CTest). Every rank generates the whole input (it is small),
// keeps the part a distribution gives it, runs the distributed build and pass; the nodes every
// rank holds are gathered and compared, node by node (matched by level and Morton prefix), with
// compare_payloads against reference_upward_pass of build_octree over all points: counts exact,
// the float quantities within the bounds written in trees/README.md. Every node of the octree of
// all points must be held exactly once.
#include <canopy/distributed/distributed_octree.hpp>
#include <canopy/distributed/mpi_exchange.hpp>
#include <canopy/trees/generators.hpp>
#include <canopy/trees/morton.hpp>
#include <canopy/trees/reference.hpp>

#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <utility>
#include <vector>

namespace cd = canopy::distributed;
namespace ct = canopy::trees;

namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

// Which rank starts with point i of n.
using distribution = std::function<int(std::size_t i, std::size_t n, int ranks)>;
const distribution by_blocks = [](std::size_t i, std::size_t n, int ranks) {
  return static_cast<int>(i * static_cast<std::size_t>(ranks) / std::max<std::size_t>(n, 1));
};
const distribution round_robin = [](std::size_t i, std::size_t, int ranks) { return static_cast<int>(i % ranks); };
const distribution all_on_last = [](std::size_t, std::size_t, int ranks) { return ranks - 1; };

struct node_record {
  std::uint64_t prefix;
  std::int32_t level;
  ct::multipole<float> payload;
};

// What the run exercised, summed over the ranks: global leaves found inside a bigger local leaf,
// and nodes of the global octree below the global tree (held in the ranks' subtrees).
struct coverage {
  std::uint64_t inside_local_leaf = 0;
  std::uint64_t below_global_tree = 0;
};

// Runs the distributed build and pass over `all` (rank r keeping the points `start` gives it),
// then checks every node against the single-process pass.
coverage check_against_single_process(const std::vector<ct::point>& all, const distribution& start,
                                  cd::decomposition_options options = {}) {
  const cd::mpi_context ctx(MPI_COMM_WORLD);
  cd::mpi_exchange ex(MPI_COMM_WORLD);
  std::vector<ct::point> mine;
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (start(i, all.size(), ctx.size()) == ctx.rank()) mine.push_back(all[i]);
  }
  const cd::distributed_octree tree = cd::build_distributed_octree(ctx, ex, mine, options);
  ct::upward_options pass;
  pass.scheduler.blocks = 1;  // one worker per rank: ranks already oversubscribe the cores
  const cd::distributed_moments moments = cd::distributed_upward_pass(ctx, ex, tree, pass);

  // The global tree and its ranges are the same on every rank.
  const std::uint64_t nodes = static_cast<std::uint64_t>(tree.top.node_count());
  EXPECT_EQ(ctx.sum(nodes), nodes * static_cast<std::uint64_t>(ctx.size()));
  EXPECT_EQ(tree.top.total(), all.size());
  // After the migration a rank holds exactly the points of its global leaves.
  std::uint64_t owned = 0;
  for (std::int32_t i = tree.top.leaf_begin[ctx.rank()]; i < tree.top.leaf_begin[ctx.rank() + 1]; ++i) {
    owned += tree.top.count[static_cast<std::size_t>(tree.top.leaves[static_cast<std::size_t>(i)])];
  }
  EXPECT_EQ(owned, tree.local.points.size());

  // Every rank's nodes (the top tree from rank 0 only), gathered everywhere.
  std::vector<node_record> held;
  cd::for_each_global_node(tree, moments, ctx.rank() == 0, [&](int level, std::uint64_t prefix, const auto& p) {
    held.push_back({prefix, level, p});
  });
  coverage covered;
  for (const cd::branch_location& at : tree.branches) covered.inside_local_leaf += at.node < 0 && at.begin < at.end;
  covered.inside_local_leaf = ctx.sum(covered.inside_local_leaf);
  covered.below_global_tree = ctx.sum(held.size()) - (tree.top.node_count());
  const std::vector<std::uint64_t> sizes = ctx.all_gather(held.size());
  std::vector<std::size_t> counts(sizes.begin(), sizes.end());
  std::vector<node_record> every(std::accumulate(counts.begin(), counts.end(), std::size_t{0}));
  cd::all_gather_v(ex, held.data(), every.data(), counts);

  ct::build_options b;
  b.max_leaf = options.max_leaf;
  b.max_depth = options.max_depth;
  const ct::octree single = ct::build_octree(all, b);
  const std::vector<ct::multipole<double>> reference = ct::reference_upward_pass(single);
  const ct::morton_grid grid = ct::make_morton_grid(single.bounds[0]);
  if (!all.empty()) {
    for (int a = 0; a < 3; ++a) {
      EXPECT_EQ(single.bounds[0].lo[a], tree.top.cube.lo[a]) << "the global cube is the single-process root cell";
      EXPECT_EQ(single.bounds[0].hi[a], tree.top.cube.hi[a]);
    }
  }
  std::map<std::pair<int, std::uint64_t>, std::int32_t> index;
  for (std::int32_t n = 0; n < single.node_count(); ++n) {
    const int level = single.level[static_cast<std::size_t>(n)];
    const std::uint64_t prefix =
        all.empty() ? 0 : ct::morton_prefix(ct::morton_code(single.points[single.point_begin[n]], grid), level);
    index[{level, prefix}] = n;
  }
  ct::multipole<float> poison{};
  poison.count = std::numeric_limits<std::uint32_t>::max();
  poison.mass = std::numeric_limits<float>::quiet_NaN();
  std::vector<ct::multipole<float>> computed(static_cast<std::size_t>(single.node_count()), poison);
  std::vector<int> seen(static_cast<std::size_t>(single.node_count()), 0);
  for (const node_record& r : every) {
    const auto it = index.find({r.level, r.prefix});
    EXPECT_NE(it, index.end()) << "a node (level " << r.level << ", prefix " << r.prefix
                               << ") that the single-process octree does not have";
    if (it == index.end()) return covered;
    computed[static_cast<std::size_t>(it->second)] = r.payload;
    ++seen[static_cast<std::size_t>(it->second)];
  }
  for (std::int32_t n = 0; n < single.node_count(); ++n) {
    EXPECT_EQ(seen[static_cast<std::size_t>(n)], 1) << "node " << n << " held " << seen[static_cast<std::size_t>(n)]
                                                    << " times over the ranks";
  }
  const ct::comparison c = ct::compare_payloads<float>(single, computed, reference);
  EXPECT_TRUE(c.counts_match) << "first count mismatch at node " << c.first_count_mismatch;
  EXPECT_LE(c.mass.worst, c.mass.bound) << "node " << c.mass.node;
  EXPECT_LE(c.com.worst, c.com.bound) << "node " << c.com.node;
  EXPECT_LE(c.m2.worst, c.m2.bound) << "node " << c.m2.node;
  EXPECT_LE(c.bbox.worst, c.bbox.bound) << "node " << c.bbox.node;
  return covered;
}

cd::decomposition_options leaf(int max_leaf, std::uint64_t bucket = 0, int max_depth = 21) {
  cd::decomposition_options o;
  o.max_leaf = max_leaf;
  o.bucket = bucket;
  o.max_depth = max_depth;
  return o;
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
  if (world_size() == 3) EXPECT_EQ(d.inside_local_leaf, 2u);
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

// MPI around GoogleTest: rank 0 prints, every rank runs every test in the same order, and the exit
// code is non-zero when any rank failed.
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  if (world_rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (failed) std::fprintf(stderr, "rank %d of %d: a test failed\n", world_rank(), world_size());
  MPI_Finalize();
  return any;
}
