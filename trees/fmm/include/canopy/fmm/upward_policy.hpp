// SPDX-License-Identifier: Apache-2.0
// The FMM's multipole expansions as a payload policy of the octree upward pass
// (canopy/trees/payload_policy.hpp): a leaf is P2M of its points about its own frame, a parent adds
// each child's expansion shifted from the child's frame to its own (M2M). So the passes of
// canopy::passes (node, twig and bucket tasks, the CPU scheduler and the GPU's persistent kernel)
// compute the FMM's upward pass, with the very arithmetic of fmm::detail::upward_multipoles:
// zero, then p2m or each child's m2m in child order. Portable (CANOPY_HD).
//
//   std::vector<canopy::fmm::frame<float>> frames = ...;        // frame_of<float>(geometry[n]) per node
//   canopy::fmm::expansion_policy<float, 4> policy{frames.data()};
//   std::vector<canopy::fmm::multipole_expansion<float, 4>> out(tree.node_count());
//   canopy::cpu_scheduler(make_upward_graph(tree), {}).run(host_upward_ops(tree, out.data(), policy));
//
// On the GPU, `frames` points to device memory. The policy has no lane-group operations of its own
// (canopy/passes/group_payload.cuh), so a task runs on one lane of its group: correct, not fast;
// the FMM's own evaluator (gpu_evaluate.hpp) splits each task over a warp.
#pragma once

#include <canopy/config.hpp>
#include <canopy/fmm/expansion.hpp>
#include <canopy/fmm/kernels.hpp>
#include <canopy/trees/payload_policy.hpp>
#include <canopy/trees/point.hpp>

#include <cstdint>
#include <type_traits>

namespace canopy::fmm {

template <class T, int P>
struct expansion_policy {
  using value_type = multipole_expansion<T, P>;

  const frame<T>* frames;  ///< by node id: each expansion's centre and scale

  CANOPY_HD value_type identity() const {
    value_type m;
    set_zero(m);
    return m;
  }
  CANOPY_HD value_type leaf(std::int32_t node, const trees::point* pts, std::int32_t n) const {
    value_type m = identity();
    p2m(pts, n, frames[node], m);
    return m;
  }
  CANOPY_HD void combine(value_type& parent, const value_type& child, std::int32_t child_node,
                         std::int32_t parent_node) const {
    m2m(child, frames[child_node], frames[parent_node], parent);
  }
};

static_assert(trees::payload_policy<expansion_policy<float, 4>>);
static_assert(trees::payload_policy<expansion_policy<double, 8>>);

}  // namespace canopy::fmm
