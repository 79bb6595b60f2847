// SPDX-License-Identifier: Apache-2.0
// The Barnes-Hut force walk: for one body, an iterative, stack-based descent of the octree that
// takes a node's multipole (monopole + quadrupole about its centre of mass) when the node is far
// enough, and sums the node's bodies directly when it is a leaf that is too close.
//
// Portable (CANOPY_HD, plain arithmetic): the same function runs on the host threads of the CPU
// backend; the GPU walk (group_walk.cuh, a warp per 32 bodies) shares its physics: opening_reach,
// add_cell, add_body.
//
// Physics (G = 1, Plummer softening eps): the potential of a body of mass m at distance r is
// -m / sqrt(r^2 + eps^2). For a node with mass M, centre of mass c and central second moments
// S = sum m d d^T (d = x_j - c; multipole<T>::m2 holds exactly these), expanding each softened
// 1/|r - d| to second order in d about c, with r = x - c, R^2 = r^2 + eps^2 and the traceless
// quadrupole Q = 3 S - tr(S) I (trees::traceless_quadrupole), gives
//   phi(x) = -M / R - (r.Q.r - tr(S) eps^2) / (2 R^5)
//   a(x)   = -M r / R^3 + Q r / R^5 - (5/2) (r.Q.r) r / R^7 + (5/2) tr(S) eps^2 r / R^7.
// The tr(S) terms vanish without softening (the usual traceless form); with softening they are
// what the traceless form leaves out, so the expansion stays exact to second order. The first
// order term vanishes because the expansion is about the centre of mass.
//
// Opening criterion (Barnes 1994, the "bmax" variant used by GADGET-style codes): a node of
// bounding-box edge s (the largest side of the box of its points, from the payload) whose centre
// of mass lies a distance delta from the box's centre is accepted for a body at distance d from
// the centre of mass when
//   d > s / theta + delta.
// Plain s / d < theta can accept a node that contains the body (a com near a corner and theta
// above 1/sqrt(3)). With the delta term that needs d <= the box's half-diagonal + delta, at most
// (sqrt(3) / 2) s + delta, so it cannot happen for theta <= 2 / sqrt(3) (about 1.155), the largest
// theta the example accepts (max_theta).
#pragma once

#include <canopy/config.hpp>
#include <canopy/trees/multipole.hpp>
#include <canopy/trees/octree.hpp>
#include <canopy/trees/point.hpp>

#include <cstdint>

// Device pass: the hardware reciprocal square root; host (g++ or nvcc's host pass): 1 / sqrt.
#if CANOPY_DEVICE_CODE
#define NBODY_SQRT(x) ::sqrtf(x)
#define NBODY_RSQRT(x) ::rsqrtf(x)
#else
#include <cmath>
#define NBODY_SQRT(x) std::sqrt(x)
#define NBODY_RSQRT(x) (1.0f / std::sqrt(x))
#endif

namespace nbody {

namespace ct = canopy::trees;

// Acceleration and potential of one body; 16 bytes, one vector store on the GPU.
struct alignas(16) body_force {
  float ax, ay, az, phi;
};

// The largest opening angle for which the criterion below never accepts a node that contains the
// body: 2 / sqrt(3).
inline constexpr double max_theta = 1.1547005383792515;

struct walk_params {
  float theta = 0.5f;       // opening angle
  float eps2 = 1e-4f;       // softening length squared
  bool quadrupole = true;   // false: monopole only (to show what the quadrupole buys)
};

// Views of the octree (host or device memory) and its upward-pass payloads, by node id.
struct walk_tree {
  const ct::point* points;           // bodies, in the octree's (Morton) order
  const std::int32_t* first_child;
  const std::int32_t* child_count;
  const std::int32_t* point_begin;
  const std::int32_t* point_count;
  const ct::multipole<float>* payload;
};

// The opening distance of a node (see the criterion above): a body (or, in the GPU's group walk,
// every point of a group's box) farther than this from the node's centre of mass may take the
// node's multipole.
CANOPY_HD inline float opening_reach(const ct::multipole<float>& m, float inv_theta) {
  const float sx = m.hi[0] - m.lo[0], sy = m.hi[1] - m.lo[1], sz = m.hi[2] - m.lo[2];
  const float s = sx > sy ? (sx > sz ? sx : sz) : (sy > sz ? sy : sz);
  const float cx = 0.5f * (m.hi[0] + m.lo[0]) - m.com[0];
  const float cy = 0.5f * (m.hi[1] + m.lo[1]) - m.com[1];
  const float cz = 0.5f * (m.hi[2] + m.lo[2]) - m.com[2];
  const float delta = NBODY_SQRT(cx * cx + cy * cy + cz * cz);
  return s * inv_theta + delta;
}

// What a force evaluation needs of an accepted node: mass, traceless quadrupole Q (xx, xy, xz, yy,
// yz, zz) and tr(S).
struct cell_moments {
  float mass;
  float q[6];
  float tr;
};

CANOPY_HD inline cell_moments moments_of(const ct::multipole<float>& m) {
  const ct::quadrupole<float> q = ct::traceless_quadrupole(m);
  return cell_moments{m.mass, {q.q[0], q.q[1], q.q[2], q.q[3], q.q[4], q.q[5]}, m.m2[0] + m.m2[3] + m.m2[5]};
}

// Adds an accepted node's field at r = x - com (the expansion in the header comment).
CANOPY_HD inline void add_cell(float rx, float ry, float rz, const cell_moments& c, const walk_params& p, body_force& f) {
  const float r2 = rx * rx + ry * ry + rz * rz;
  const float R2 = r2 + p.eps2;
  const float inv_R = NBODY_RSQRT(R2);
  const float inv_R2 = inv_R * inv_R;
  const float inv_R3 = inv_R * inv_R2;
  float fx = -c.mass * inv_R3 * rx, fy = -c.mass * inv_R3 * ry, fz = -c.mass * inv_R3 * rz;
  float ph = -c.mass * inv_R;
  if (p.quadrupole) {
    // Q r
    const float qx = c.q[0] * rx + c.q[1] * ry + c.q[2] * rz;
    const float qy = c.q[1] * rx + c.q[3] * ry + c.q[4] * rz;
    const float qz = c.q[2] * rx + c.q[4] * ry + c.q[5] * rz;
    const float rqr = rx * qx + ry * qy + rz * qz;
    const float inv_R5 = inv_R3 * inv_R2;
    const float inv_R7 = inv_R5 * inv_R2;
    const float radial = 2.5f * (c.tr * p.eps2 - rqr) * inv_R7;
    fx += qx * inv_R5 + radial * rx;
    fy += qy * inv_R5 + radial * ry;
    fz += qz * inv_R5 + radial * rz;
    ph -= 0.5f * (rqr - c.tr * p.eps2) * inv_R5;
  }
  f.ax += fx;
  f.ay += fy;
  f.az += fz;
  f.phi += ph;
}

// Adds one body of mass m at offset (dx, dy, dz) from the evaluation point (softened).
CANOPY_HD inline void add_body(float dx, float dy, float dz, float m, float eps2, body_force& f) {
  const float inv_R = NBODY_RSQRT(dx * dx + dy * dy + dz * dz + eps2);
  const float w = m * inv_R * inv_R * inv_R;
  f.ax += w * dx;
  f.ay += w * dy;
  f.az += w * dz;
  f.phi -= m * inv_R;
}

// Deepest a stack can get: the walk pushes all children of an opened node, so at most 7 waiting
// siblings per level below the root plus the 8 children of the deepest opened node.
inline constexpr int walk_stack_size = 7 * ct::max_octree_depth + 8;

// Force on body `self` (an index into t.points) at position (x, y, z), which is t.points[self]:
// its own contribution is skipped by index. Pass self = -1 to evaluate at an arbitrary position.
// `interactions`, when given, counts the accepted nodes and the bodies summed (the body's work,
// which the distributed run balances by).
CANOPY_HD inline body_force walk_one(const walk_tree& t, std::int32_t self, float x, float y, float z,
                                     const walk_params& p, std::uint32_t* interactions = nullptr) {
  body_force f{0.f, 0.f, 0.f, 0.f};
  const float inv_theta = 1.0f / p.theta;
  std::int32_t stack[walk_stack_size];
  int top = 0;
  stack[top++] = 0;  // the root
  while (top > 0) {
    const std::int32_t n = stack[--top];
    const ct::multipole<float>& m = t.payload[n];
    if (m.count == 0) continue;  // only the root of an empty tree
    const float rx = x - m.com[0], ry = y - m.com[1], rz = z - m.com[2];
    const float r2 = rx * rx + ry * ry + rz * rz;
    const float reach = opening_reach(m, inv_theta);
    if (r2 > reach * reach) {
      add_cell(rx, ry, rz, moments_of(m), p, f);  // accepted: the node's multipole
      if (interactions != nullptr) ++*interactions;
      continue;
    }
    const std::int32_t children = t.child_count[n];
    if (children == 0) {
      // A leaf too close to take whole: its bodies one by one.
      const std::int32_t b = t.point_begin[n], e = b + t.point_count[n];
      for (std::int32_t j = b; j < e; ++j) {
        if (j == self) continue;
        const ct::point q = t.points[j];
        add_body(q.x - x, q.y - y, q.z - z, q.m, p.eps2, f);
      }
      if (interactions != nullptr) *interactions += static_cast<std::uint32_t>(e - b);
      continue;
    }
    const std::int32_t first = t.first_child[n];
    // Push in reverse so the first child is visited first (depth-first in Morton order).
    for (std::int32_t c = children - 1; c >= 0; --c) stack[top++] = first + c;
  }
  return f;
}

}  // namespace nbody
