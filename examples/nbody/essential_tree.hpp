// SPDX-License-Identifier: Apache-2.0
// What the two distributed steps (the host path, distributed_step.cpp, and the device path,
// distributed_device_step.cu) share about the locally essential trees: a receiving rank's domain,
// the walk's criterion against a box, and the record a node is sent as. Plain C++ with CANOPY_HD
// where the device needs it, so g++ and nvcc both compile it.
#pragma once

#include <canopy/config.hpp>
#include <canopy/distributed/global_tree.hpp>
#include <canopy/trees/multipole.hpp>

#include <cstdint>
#include <vector>

#include "tree_walk.hpp"

namespace nbody {

// A rank's bounding box of bodies; empty (lo > hi) when it has none.
struct box6 {
  float lo[3], hi[3];
  CANOPY_HD bool empty() const { return !(lo[0] <= hi[0]); }
};

// A node of a pruned subtree sent to another rank. Links and body ranges are relative to the
// sender's block of the message; a root (the sender's global leaf `global_leaf`) is linked below
// that leaf of the top tree by the receiver.
struct let_node {
  canopy::trees::multipole<float> payload;
  std::int32_t first_child;  // -1: none
  std::int32_t child_count;  // 0: accepted for the whole box (payload only) or a leaf with bodies
  std::int32_t point_begin;
  std::int32_t point_count;
  std::int32_t global_leaf;  // the top tree's node for a root, -1 below
};

// The walk's criterion at the box's nearest point to the node's centre of mass: accepted here means
// accepted by walk_one for every body inside the box, and by the GPU's group walk for every group
// inside it. Per axis, |x - com| >= the box's distance in float too (rounding is monotone), so the
// squared distances compare the same way.
CANOPY_HD inline bool accepted_by_box(const canopy::trees::multipole<float>& m, float inv_theta, const box6& b) {
  const float reach = opening_reach(m, inv_theta);
  float d2 = 0;
  for (int a = 0; a < 3; ++a) {
    const float below = b.lo[a] - m.com[a], above = m.com[a] - b.hi[a];
    const float d = below > 0 ? below : (above > 0 ? above : 0.0f);
    d2 += d * d;
  }
  return d2 > reach * reach;
}

// The rank owning every leaf below each top node (-1 where the leaves below have several owners).
std::vector<int> top_owners(const canopy::distributed::global_tree& top);

// Each rank's domain: a rank's Morton range is not a compact region, and its one bounding box can
// cover much of the others' domains (300k Plummer bodies on 2 ranks sent up to 150k bodies to a
// rank with it, 30k with the cells). Its bodies lie in the top tree's largest cells that it owns
// whole (a Morton range is a union of a few such cells per level), whose boxes of bodies every rank
// knows from the top payloads: those boxes, per rank. A node every one of them accepts is accepted
// by every body of the rank.
std::vector<std::vector<box6>> rank_domains(const canopy::distributed::global_tree& top, const std::vector<int>& owner,
                                            const std::vector<canopy::trees::multipole<float>>& top_payload, int ranks);

}  // namespace nbody
