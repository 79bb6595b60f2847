// SPDX-License-Identifier: Apache-2.0
// Payload policies other than the multipole on the GPU backend (canopy/passes/group_payload.cuh's
// one-lane path): the FMM's expansions (canopy/fmm/upward_policy.hpp) against canopy::fmm's own
// CPU upward pass, and the user payload of examples/payloads/com_sphere.hpp against its promises,
// through node, twig and bucket tasks in every mode. The GPU contracts a * b + c into FMAs where
// the host does not, so the expansions agree to float rounding, not bit for bit. Label `gpu`.
#include <gtest/gtest.h>

#include <canopy/cuda/device_buffer.hpp>
#include <canopy/fmm/evaluate.hpp>
#include <canopy/fmm/interaction_lists.hpp>
#include <canopy/fmm/upward_policy.hpp>
#include <canopy/gpu_scheduler.cuh>
#include <canopy/passes/bucket_pass.hpp>
#include <canopy/passes/device_octree.cuh>
#include <canopy/passes/twig_pass.hpp>
#include <canopy/passes/upward_pass.hpp>
#include <canopy/trees/generators.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "com_sphere.hpp"
#include "gpu_test.hpp"

namespace {
namespace cf = canopy::fmm;
namespace ct = canopy::trees;

class payload_policy_gpu : public canopy::test::gpu_test {};

constexpr int order = 4;
using fmm_policy = cf::expansion_policy<float, order>;
using expansion = cf::multipole_expansion<float, order>;
using payload_example::com_sphere;
using payload_example::com_sphere_policy;

enum class kind { node, twig, bucket };
constexpr const char* name_of(kind k) { return k == kind::node ? "node" : k == kind::twig ? "twig" : "bucket"; }

// Runs `policy` over `tree` on the GPU with tasks of kind K in mode m (twice: the second run checks
// the scheduler's reset), returns the payloads. K at compile time: each (policy, kind) is a
// persistent kernel per mode, so a test compiles only the ones it runs.
template <kind K, class Policy>
std::vector<typename Policy::value_type> run_on_gpu(const ct::octree& tree, const Policy& policy, canopy::mode m,
                                                    const std::string& what) {
  using value_type = typename Policy::value_type;
  ct::device_octree d(tree);
  canopy::device_buffer<value_type> out(static_cast<std::size_t>(tree.node_count()));
  const ct::octree_ref t = d.ref();
  const ct::upward_arrays<Policy> arrays{t.points, t.first_child, t.child_count, t.point_begin, t.point_count, out.data()};
  canopy::scheduler_options o;
  o.mode = m;
  o.threads_per_block = 128;  // bucket tasks: at most 4 warps a block
  std::vector<value_type> result;
  auto run = [&](const canopy::task_graph& graph, const auto& ops) {
    canopy::gpu_scheduler sched(graph, o);
    for (int pass = 0; pass < 2; ++pass) {
      out.fill_bytes(0xff);
      const auto r = sched.run(ops);
      ASSERT_TRUE(r.ok()) << what << ", run " << pass << ": " << canopy::to_string(r.code) << ": " << r.message;
    }
    result = out.download();
  };
  if constexpr (K == kind::node) {
    run(ct::make_upward_graph(tree), ct::upward_ops<Policy, 2>{arrays, policy});
  } else if constexpr (K == kind::twig) {
    const ct::twig_graph tg = ct::make_twig_graph(tree);
    const canopy::device_buffer<ct::twig_task> tasks(tg.tasks);
    run(tg.graph, ct::twig_upward_ops<Policy, 2>{tasks.data(), arrays, policy});
  } else {
    const ct::bucket_graph bg = ct::make_bucket_graph(tree, 64);
    const canopy::device_buffer<std::int32_t> blob(bg.blob);
    run(bg.graph, ct::bucket_upward_ops<Policy, 1>{blob.data(), arrays, policy});
  }
  return result;
}

std::vector<std::pair<std::string, ct::octree>> trees_to_check() {
  std::vector<std::pair<std::string, ct::octree>> out;
  out.emplace_back("complete depth 3", ct::build_complete_octree(3, 8, 5));
  out.emplace_back("plummer 1", ct::build_octree(ct::generate_plummer(1, 1), ct::build_options{16, 21}));
  out.emplace_back("plummer 20000", ct::build_octree(ct::generate_plummer(20000, 3), ct::build_options{16, 21}));
  out.emplace_back("clusters 5000, leaf 1", ct::build_octree(ct::generate_clusters(5000, 4), ct::build_options{1, 21}));
  return out;
}

TEST_F(payload_policy_gpu, fmm_expansions_equal_the_fmm_upward_pass) {
  for (const auto& [name, tree] : trees_to_check()) {
    std::vector<cf::frame<float>> frames;
    for (const cf::cell_geometry& g : cf::compute_cell_geometry(tree)) frames.push_back(cf::frame_of<float>(g));
    const std::vector<expansion> want = cf::detail::upward_multipoles<float, order>(tree, frames);
    const canopy::device_buffer<cf::frame<float>> d_frames(frames);
    const fmm_policy policy{d_frames.data()};
    auto check = [&](auto k) {
      constexpr kind K = decltype(k)::value;
      for (canopy::mode m : canopy::all_modes) {
        if (!canopy::traits_of(m).atomic_tree && tree.node_count() > 5000) continue;  // the seed's slow designs
        const std::string what = name + ", " + name_of(K) + " tasks, " + std::string(canopy::to_string(m));
        const std::vector<expansion> got = run_on_gpu<K>(tree, policy, m, what);
        ASSERT_EQ(got.size(), want.size()) << what;
        for (std::size_t n = 0; n < want.size(); ++n) {
          // Scaled coefficients are O(mass): compare each with the node's largest, the monopole
          // (c[0], the mass) included. Float P2M and M2M chains: a few hundred ulps at most.
          float scale = 0.f;
          for (float c : want[n].c) scale = std::max(scale, std::abs(c));
          for (int i = 0; i < expansion::size; ++i)
            ASSERT_NEAR(got[n].c[i], want[n].c[i], 1e-4f * scale + 1e-30f) << what << ": node " << n << ", coefficient " << i;
        }
      }
    };
    check(std::integral_constant<kind, kind::node>{});
    check(std::integral_constant<kind, kind::twig>{});
    check(std::integral_constant<kind, kind::bucket>{});
  }
}

// Twig tasks only: the kind that uses all of group_payload's operations (a twig's leaves on
// sub-groups, gathered into the twig); the FMM test above runs every kind.
TEST_F(payload_policy_gpu, user_payload_keeps_its_promises) {
  for (const auto& [name, tree] : trees_to_check()) {
    {
      for (canopy::mode m : canopy::all_modes) {
        if (!canopy::traits_of(m).atomic_tree && tree.node_count() > 5000) continue;
        const std::string what = name + ", twig tasks, " + std::string(canopy::to_string(m));
        const std::vector<com_sphere> got = run_on_gpu<kind::twig>(tree, com_sphere_policy{}, m, what);
        for (std::int32_t n = 0; n < tree.node_count(); ++n) {
          const com_sphere& s = got[static_cast<std::size_t>(n)];
          const std::int32_t begin = tree.point_begin[n], count = tree.point_count[n];
          ASSERT_EQ(s.count, static_cast<std::uint32_t>(count)) << what << ": node " << n;
          double mass = 0;
          for (std::int32_t i = begin; i < begin + count; ++i) mass += tree.points[i].m;
          ASSERT_NEAR(s.mass, mass, 1e-4 * mass) << what << ": node " << n;
          const double edge = tree.bounds[n].hi[0] - tree.bounds[n].lo[0];
          const double slack = 1e-5 * (edge + std::abs(s.com[0]) + std::abs(s.com[1]) + std::abs(s.com[2]) + s.radius);
          for (std::int32_t i = begin; i < begin + count; ++i) {
            const ct::point& p = tree.points[i];
            const double dx = p.x - double(s.com[0]), dy = p.y - double(s.com[1]), dz = p.z - double(s.com[2]);
            ASSERT_LE(std::sqrt(dx * dx + dy * dy + dz * dz), s.radius + slack) << what << ": node " << n << ", point " << i;
          }
        }
      }
    }
  }
}

}  // namespace
