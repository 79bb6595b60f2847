// SPDX-License-Identifier: Apache-2.0
// A payload of your own for the octree upward pass: what a new payload costs is this header (and
// its test, tests/cpu/trees/user_payload_test.cpp). Each node gets its mass, its centre of mass
// and the radius of a sphere about that centre holding all of its points: the "bmax" of
// Barnes-Hut opening criteria (Bonsai, cornerstone), which is smaller than the cell's
// half-diagonal where points sit in a corner of their cell.
//
// A payload policy (canopy/trees/payload_policy.hpp) says how a leaf summarises its points and how
// a parent takes in one child; the passes (node, twig or bucket tasks, on the CPU scheduler or the
// GPU's persistent kernel) do the rest:
//
//   std::vector<com_sphere> out(tree.node_count());
//   canopy::cpu_scheduler(canopy::trees::make_upward_graph(tree), {})
//       .run(canopy::trees::host_upward_ops(tree, out.data(), com_sphere_policy{}));
//
// The combine is a shift as much as a sum: a child's sphere, moved to the parent's new centre,
// grows by the distance it moved. So a parent's radius bounds its points' distances from above
// (it is not their maximum, which only the points could give), and the order of the children
// changes it by rounding and by the bound's slack: a GPU pass and a CPU pass agree to that, not
// bit for bit.
#pragma once

#include <canopy/config.hpp>
#include <canopy/trees/payload_policy.hpp>
#include <canopy/trees/point.hpp>

#include <cmath>
#include <cstdint>

namespace payload_example {

struct com_sphere {
  std::uint32_t count;  // points, exact
  float mass;
  float com[3];
  float radius;  // every point of the node lies within radius of com
};

struct com_sphere_policy {
  using value_type = com_sphere;

  CANOPY_HD value_type identity() const { return {0u, 0.f, {0.f, 0.f, 0.f}, 0.f}; }

  CANOPY_HD value_type leaf(std::int32_t /*node*/, const canopy::trees::point* pts, std::int32_t n) const {
    value_type r = identity();
    if (n <= 0) return r;
    float sx = 0.f, sy = 0.f, sz = 0.f, cx = 0.f, cy = 0.f, cz = 0.f;
    for (std::int32_t i = 0; i < n; ++i) {
      r.mass += pts[i].m;
      sx += pts[i].m * pts[i].x;
      sy += pts[i].m * pts[i].y;
      sz += pts[i].m * pts[i].z;
      cx += pts[i].x;
      cy += pts[i].y;
      cz += pts[i].z;
    }
    r.count = static_cast<std::uint32_t>(n);
    // Massless points: their centroid (a centre must still be a position inside the cell).
    const bool massive = r.mass > 0.f;
    const float w = massive ? r.mass : static_cast<float>(n);
    r.com[0] = (massive ? sx : cx) / w;
    r.com[1] = (massive ? sy : cy) / w;
    r.com[2] = (massive ? sz : cz) / w;
    for (std::int32_t i = 0; i < n; ++i)
      r.radius = larger(r.radius, distance(pts[i].x - r.com[0], pts[i].y - r.com[1], pts[i].z - r.com[2]));
    return r;
  }

  CANOPY_HD void combine(value_type& parent, const value_type& child, std::int32_t /*child_node*/,
                         std::int32_t /*parent_node*/) const {
    if (child.count == 0) return;
    if (parent.count == 0) {  // the first child: its sphere as it is
      parent = child;
      return;
    }
    const float mass = parent.mass + child.mass;
    const bool massive = mass > 0.f;
    // The child's weight in the new centre (by counts when both are massless).
    const float wc = massive ? child.mass / mass
                             : static_cast<float>(child.count) / static_cast<float>(parent.count + child.count);
    float com[3];
    for (int k = 0; k < 3; ++k) com[k] = parent.com[k] + wc * (child.com[k] - parent.com[k]);
    const float moved_parent = distance(parent.com[0] - com[0], parent.com[1] - com[1], parent.com[2] - com[2]);
    const float moved_child = distance(child.com[0] - com[0], child.com[1] - com[1], child.com[2] - com[2]);
    parent.radius = larger(parent.radius + moved_parent, child.radius + moved_child);
    parent.count += child.count;
    parent.mass = mass;
    for (int k = 0; k < 3; ++k) parent.com[k] = com[k];
  }

 private:
  CANOPY_HD static float larger(float a, float b) { return a > b ? a : b; }
  CANOPY_HD static float distance(float dx, float dy, float dz) {
#if CANOPY_DEVICE_CODE
    return ::sqrtf(dx * dx + dy * dy + dz * dz);
#else
    return std::sqrt(dx * dx + dy * dy + dz * dz);
#endif
  }
};

static_assert(canopy::trees::payload_policy<com_sphere_policy>);

}  // namespace payload_example
