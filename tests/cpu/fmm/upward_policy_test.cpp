// SPDX-License-Identifier: Apache-2.0
// The FMM's multipole expansions as a payload policy of the octree passes
// (canopy/fmm/upward_policy.hpp): node, twig and bucket tasks on the CPU scheduler, and each kind's
// serial operation, give bit for bit the multipoles of canopy::fmm's own upward pass
// (fmm::detail::upward_multipoles, which evaluate<T, P> uses). The same arithmetic in the same
// order (zero, then P2M, or each child's M2M in child order), so the bits must agree, in any task
// order.
#include <canopy/cpu_scheduler.hpp>
#include <canopy/fmm/evaluate.hpp>
#include <canopy/fmm/interaction_lists.hpp>
#include <canopy/fmm/upward_policy.hpp>
#include <canopy/passes/bucket_pass.hpp>
#include <canopy/passes/twig_pass.hpp>
#include <canopy/passes/upward_pass.hpp>
#include <canopy/trees/generators.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace {

namespace cf = canopy::fmm;
namespace ct = canopy::trees;

template <class T, int P>
using expansions = std::vector<cf::multipole_expansion<T, P>>;

// Poisoned output: a node a pass skips cannot match.
template <class T, int P>
expansions<T, P> poisoned(const ct::octree& tree) {
  expansions<T, P> out(static_cast<std::size_t>(tree.node_count()));
  std::memset(out.data(), 0xff, out.size() * sizeof(out[0]));
  return out;
}

template <class T, int P>
void expect_bitwise_equal(const expansions<T, P>& got, const expansions<T, P>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t n = 0; n < want.size(); ++n) {
    // The coefficients only: float expansions are 16-byte aligned, so P = 4's 35 floats carry 4
    // bytes of padding that no pass writes.
    ASSERT_EQ(std::memcmp(got[n].c, want[n].c, sizeof(want[n].c)), 0)
        << what << ": node " << n << " differs (c[0] " << got[n].c[0] << " vs " << want[n].c[0] << ")";
  }
}

template <class T, int P>
void check_tree(const ct::octree& tree, const std::string& what) {
  const std::vector<cf::cell_geometry> geometry = cf::compute_cell_geometry(tree);
  std::vector<cf::frame<T>> frames;
  for (const cf::cell_geometry& g : geometry) frames.push_back(cf::frame_of<T>(g));
  const expansions<T, P> want = cf::detail::upward_multipoles<T, P>(tree, frames);
  const cf::expansion_policy<T, P> policy{frames.data()};
  canopy::scheduler_options options;
  options.blocks = 3;  // CPU: worker threads; several, so tasks run in many orders

  {  // node tasks
    expansions<T, P> out = poisoned<T, P>(tree);
    canopy::cpu_scheduler sched(ct::make_upward_graph(tree), options);
    const auto r = sched.run(ct::host_upward_ops(tree, out.data(), policy));
    ASSERT_TRUE(r.ok()) << what << ": " << r.message;
    expect_bitwise_equal<T, P>(out, want, what + ", node tasks");
  }
  {  // twig tasks
    expansions<T, P> out = poisoned<T, P>(tree);
    const ct::twig_graph tg = ct::make_twig_graph(tree);
    canopy::cpu_scheduler sched(tg.graph, options);
    const auto r = sched.run(ct::host_twig_upward_ops(tree, tg.tasks, out.data(), policy));
    ASSERT_TRUE(r.ok()) << what << ": " << r.message;
    expect_bitwise_equal<T, P>(out, want, what + ", twig tasks");
  }
  for (const int bucket_points : {1, 40, 256}) {  // bucket tasks
    expansions<T, P> out = poisoned<T, P>(tree);
    const ct::bucket_graph bg = ct::make_bucket_graph(tree, bucket_points);
    canopy::cpu_scheduler sched(bg.graph, options);
    const ct::bucket_upward_ops<cf::expansion_policy<T, P>> ops{
        bg.blob.data(),
        {tree.points.data(), tree.first_child.data(), tree.child_count.data(), tree.point_begin.data(),
         tree.point_count.data(), out.data()},
        policy};
    const auto r = sched.run(ops);
    ASSERT_TRUE(r.ok()) << what << ": " << r.message;
    expect_bitwise_equal<T, P>(out, want, what + ", bucket tasks of " + std::to_string(bucket_points) + " points");
  }
}

struct tree_case {
  std::string name;
  ct::octree tree;
};

std::vector<tree_case> trees() {
  std::vector<tree_case> v;
  v.push_back({"plummer 3000, leaf 16", ct::build_octree(ct::generate_plummer(3000, 7), {16, 21})});
  v.push_back({"clusters 2000, leaf 1", ct::build_octree(ct::generate_clusters(2000, 3), {1, 21})});
  v.push_back({"complete depth 3", ct::build_complete_octree(3, 4, 5)});
  v.push_back({"single leaf", ct::build_octree(ct::generate_uniform(5, 1), {32, 21})});
  // Coincident points: a chain of single children down to max_depth.
  std::vector<ct::point> same(40, ct::point{0.25f, 0.5f, 0.75f, 1.0f});
  same.push_back(ct::point{-1.0f, 2.0f, 0.0f, 3.0f});
  v.push_back({"coincident points", ct::build_octree(same, {8, 12})});
  return v;
}

TEST(FmmUpwardPolicy, NodeTwigAndBucketTasksEqualTheFmmUpwardPassBitForBitInFloat) {
  for (const tree_case& c : trees()) check_tree<float, 4>(c.tree, c.name + ", float P=4");
}

TEST(FmmUpwardPolicy, NodeTwigAndBucketTasksEqualTheFmmUpwardPassBitForBitInDouble) {
  for (const tree_case& c : trees()) {
    check_tree<double, 2>(c.tree, c.name + ", double P=2");
    check_tree<double, 8>(c.tree, c.name + ", double P=8");
  }
}

TEST(FmmUpwardPolicy, SerialTwigTasksInReverseOrderEqualTheFmmUpwardPass) {
  const ct::octree tree = ct::build_octree(ct::generate_plummer(1500, 11), {8, 21});
  const std::vector<cf::cell_geometry> geometry = cf::compute_cell_geometry(tree);
  std::vector<cf::frame<float>> frames;
  for (const cf::cell_geometry& g : geometry) frames.push_back(cf::frame_of<float>(g));
  const cf::expansion_policy<float, 6> policy{frames.data()};
  expansions<float, 6> out = poisoned<float, 6>(tree);
  const ct::twig_graph tg = ct::make_twig_graph(tree);
  for (std::size_t i = tg.tasks.size(); i-- > 0;)  // tasks are level-ordered: children first when reversed
    ct::twig_task_serial<cf::expansion_policy<float, 6>>(tree.points.data(), tree.first_child.data(),
                                                        tree.child_count.data(), tree.point_begin.data(),
                                                        tree.point_count.data(), out.data(), tg.tasks[i].entry, policy);
  expect_bitwise_equal<float, 6>(out, cf::detail::upward_multipoles<float, 6>(tree, frames), "serial twig tasks");
}

// What the concept refuses, at compile time (a pass instantiated with one fails with the
// static_assert of upward_pass.hpp naming payload_policy).
struct no_value_type {
  int identity() const { return 0; }
};
struct combine_returns_a_value {
  using value_type = float;
  float identity() const { return 0; }
  float leaf(std::int32_t, const ct::point*, std::int32_t) const { return 0; }
  float combine(float& parent, const float&, std::int32_t, std::int32_t) const { return parent; }
};
static_assert(!ct::payload_policy<no_value_type>);
static_assert(!ct::payload_policy<combine_returns_a_value>);
static_assert(!ct::payload_policy<float>);
static_assert(ct::payload_policy<ct::multipole_policy<float>>);
static_assert(ct::payload_policy<cf::expansion_policy<float, 4>>);
// The passes' historical parameter still names the multipole payload.
static_assert(std::is_same_v<ct::upward_ops<float>::policy_type, ct::multipole_policy<float>>);
static_assert(std::is_same_v<ct::upward_ops<cf::expansion_policy<float, 4>>::value_type, cf::multipole_expansion<float, 4>>);

}  // namespace
