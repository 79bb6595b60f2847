// SPDX-License-Identifier: Apache-2.0
// The check shared by the CPU and GPU tests of canopy::distributed: the distributed build and pass
// over a distribution of the points against the single-process pass over all of them. Every rank
// generates the whole (small) input, keeps the part a distribution gives it, runs the distributed
// build and pass; the nodes every rank holds are gathered and compared, node by node (matched by
// level and Morton prefix), with compare_payloads against reference_upward_pass of build_octree over
// all points: counts exact, the float quantities within the bounds of trees/README.md. Every node
// of the octree of all points must be held exactly once.
#pragma once

#include <canopy/distributed/distributed_octree.hpp>
#include <canopy/distributed/mpi_exchange.hpp>
#include <canopy/trees/morton.hpp>
#include <canopy/trees/reference.hpp>

#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <utility>
#include <vector>

namespace distributed_check {

namespace cd = canopy::distributed;
namespace ct = canopy::trees;

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
inline int world_size() {
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
// `run(ctx, mine, options)` builds and passes: the CPU path (run_on_host) or the GPU path.
template <class Run>
coverage check_against_single_process(const std::vector<ct::point>& all, const distribution& start,
                                      const cd::decomposition_options& options, Run&& run) {
  const cd::mpi_context ctx(MPI_COMM_WORLD);
  cd::mpi_exchange ex(MPI_COMM_WORLD);
  std::vector<ct::point> mine;
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (start(i, all.size(), ctx.size()) == ctx.rank()) mine.push_back(all[i]);
  }
  const auto [tree, moments] = run(ctx, mine, options);

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

// The exchange contract, one body for both engines: `to_space(bytes, size)` copies host bytes into
// a buffer in ex.space() (returning an owner with .data()), `from_space(owner, bytes, size)` copies
// back. Uneven and empty parts on purpose: rank 1 sends nothing to anyone in the all-gather, and
// rank r sends (r + q) % 3 records to rank q in the all-to-all.
struct record {
  std::int32_t from, to, index;
};

template <class ToSpace, class FromSpace>
void check_exchange_contract(cd::exchange& ex, ToSpace&& to_space, FromSpace&& from_space) {
  const cd::mpi_context ctx(MPI_COMM_WORLD);
  const int p = ctx.size(), me = ctx.rank();

  std::vector<std::uint64_t> u{static_cast<std::uint64_t>(me) + 1, 1000u * (static_cast<std::uint64_t>(me) + 1)};
  auto du = to_space(u.data(), u.size() * sizeof(std::uint64_t));
  ex.all_reduce(du.data(), 2, cd::element_type::u64, cd::reduce_op::sum);
  ex.synchronize();
  from_space(du, u.data(), u.size() * sizeof(std::uint64_t));
  const auto tri = static_cast<std::uint64_t>(p) * static_cast<std::uint64_t>(p + 1) / 2;
  EXPECT_EQ(u[0], tri);
  EXPECT_EQ(u[1], 1000u * tri);

  std::vector<float> f{static_cast<float>(me) - 0.5f, -static_cast<float>(me)};
  auto df = to_space(f.data(), f.size() * sizeof(float));
  ex.all_reduce(df.data(), 2, cd::element_type::f32, cd::reduce_op::min);
  ex.synchronize();
  from_space(df, f.data(), f.size() * sizeof(float));
  EXPECT_EQ(f[0], -0.5f);
  EXPECT_EQ(f[1], -static_cast<float>(p - 1));

  std::vector<double> d{static_cast<double>(me) * 0.25};
  auto dd = to_space(d.data(), sizeof(double));
  ex.all_reduce(dd.data(), 1, cd::element_type::f64, cd::reduce_op::max);
  ex.synchronize();
  from_space(dd, d.data(), sizeof(double));
  EXPECT_EQ(d[0], (p - 1) * 0.25);

  // all-gather-v: rank r contributes r == 1 ? 0 : r + 2 records.
  auto part = [](int r) { return r == 1 ? std::size_t{0} : static_cast<std::size_t>(r) + 2; };
  std::vector<record> mine;
  for (std::size_t i = 0; i < part(me); ++i) mine.push_back({me, -1, static_cast<std::int32_t>(i)});
  std::vector<std::size_t> counts;
  std::size_t total = 0;
  for (int r = 0; r < p; ++r) {
    counts.push_back(part(r));
    total += part(r);
  }
  auto dmine = to_space(mine.data(), mine.size() * sizeof(record));
  std::vector<record> all(total, record{-9, -9, -9});
  auto dall = to_space(all.data(), all.size() * sizeof(record));
  cd::all_gather_v(ex, static_cast<const record*>(static_cast<const void*>(dmine.data())),
                   static_cast<record*>(static_cast<void*>(dall.data())), counts);
  ex.synchronize();
  from_space(dall, all.data(), all.size() * sizeof(record));
  std::size_t k = 0;
  for (int r = 0; r < p; ++r) {
    for (std::size_t i = 0; i < part(r); ++i, ++k) {
      EXPECT_EQ(all[k].from, r);
      EXPECT_EQ(all[k].index, static_cast<std::int32_t>(i));
    }
  }

  // all-to-all-v: (r + q) % 3 records from r to q, this rank's own part included.
  std::vector<record> send;
  std::vector<std::size_t> send_counts, recv_counts;
  std::size_t incoming = 0;
  for (int q = 0; q < p; ++q) {
    const auto n = static_cast<std::size_t>((me + q) % 3);
    for (std::size_t i = 0; i < n; ++i) send.push_back({me, q, static_cast<std::int32_t>(i)});
    send_counts.push_back(n);
    recv_counts.push_back(n);  // (q + me) % 3 from q: the same number
    incoming += n;
  }
  auto dsend = to_space(send.data(), send.size() * sizeof(record));
  std::vector<record> got(incoming, record{-9, -9, -9});
  auto dgot = to_space(got.data(), got.size() * sizeof(record));
  cd::all_to_all_v(ex, static_cast<const record*>(static_cast<const void*>(dsend.data())), send_counts,
                   static_cast<record*>(static_cast<void*>(dgot.data())), recv_counts);
  ex.synchronize();
  from_space(dgot, got.data(), got.size() * sizeof(record));
  k = 0;
  for (int q = 0; q < p; ++q) {
    for (std::size_t i = 0; i < recv_counts[static_cast<std::size_t>(q)]; ++i, ++k) {
      EXPECT_EQ(got[k].from, q);
      EXPECT_EQ(got[k].to, me);
      EXPECT_EQ(got[k].index, static_cast<std::int32_t>(i));
    }
  }
}

inline cd::decomposition_options leaf(int max_leaf, std::uint64_t bucket = 0, int max_depth = 21) {
  cd::decomposition_options o;
  o.max_leaf = max_leaf;
  o.bucket = bucket;
  o.max_depth = max_depth;
  return o;
}

// MPI around GoogleTest: rank 0 prints, every rank runs every test in the same order, and the exit
// code is non-zero when any rank failed. `before_finalize` releases what must go before MPI does.
inline int run_all_tests_under_mpi(int argc, char** argv, const std::function<void()>& before_finalize = {}) {
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
  if (before_finalize) before_finalize();
  MPI_Finalize();
  return any;
}

}  // namespace distributed_check
