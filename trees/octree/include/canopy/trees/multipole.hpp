// SPDX-License-Identifier: Apache-2.0
// Node payload of the octree upward pass and its two operations, P2M (points -> moments) and M2M
// (merge two children's moments). Portable: plain arithmetic only, no std:: calls, so the same
// code runs in kernels (T = float), in the CPU backend and in the double reference.
//
// Moments are the mass, the centre of mass, and the central second moments (the mass-weighted
// scatter matrix about the centre of mass) m2 = sum m (x - com)(x - com)^T, stored as
// xx, xy, xz, yy, yz, zz. They merge exactly under the parallel-axis shift (Chan, Golub & LeVeque
// 1979, "pairwise" update): with d = com_b - com_a and M = Ma + Mb,
//   com = com_a + (Mb / M) d,   m2 = m2_a + m2_b + (Ma Mb / M) d d^T.
// The merge is associative and commutative (up to rounding) with identity multipole_identity():
// count 0, mass 0, lo = +inf, hi = -inf.
// The box's min and max are canopy::smaller/larger (canopy/min_max.hpp): fmin/fmax on the device,
// a select on the host; the point readers reject NaN, so the two agree up to the sign of a zero.
//
// Massless points: a node whose total mass is 0 but which holds points takes the unweighted
// centroid of its points as com and m2 = 0 (the weighted scatter of zero masses). Merging follows
// the same rule (count-weighted when both masses are 0; a massless side otherwise does not move
// the com), so p2m over a range equals any merge tree over its parts.
#pragma once

#include <canopy/config.hpp>
#include <canopy/min_max.hpp>
#include <canopy/trees/payload_policy.hpp>
#include <canopy/trees/point.hpp>

#include <cstdint>
#include <type_traits>

namespace canopy::trees {

template <class T>
struct multipole {
  std::uint32_t count;  // number of points, exact
  T mass;
  T com[3];
  T m2[6];  // central second moments about com: xx, xy, xz, yy, yz, zz
  T lo[3];  // bounding box of the points (identity: +inf)
  T hi[3];  //                              (identity: -inf)
};

static_assert(std::is_trivially_copyable_v<multipole<float>>);
static_assert(std::is_trivially_copyable_v<multipole<double>>);

namespace detail {
// __builtin_huge_val is a constant in both g++ and nvcc (host and device code), where
// std::numeric_limits<T>::infinity() would need --expt-relaxed-constexpr in device code.
template <class T>
CANOPY_HD constexpr T positive_infinity() {
  if constexpr (sizeof(T) == sizeof(float)) {
    return __builtin_huge_valf();
  } else {
    return __builtin_huge_val();
  }
}
}  // namespace detail

template <class T>
CANOPY_HD multipole<T> multipole_identity() {
  multipole<T> r{};
  r.count = 0;
  r.mass = T(0);
  for (int i = 0; i < 3; ++i) {
    r.com[i] = T(0);
    r.lo[i] = detail::positive_infinity<T>();
    r.hi[i] = -detail::positive_infinity<T>();
  }
  for (int i = 0; i < 6; ++i) r.m2[i] = T(0);
  return r;
}

// p2m sums a leaf's points in blocks of p2m_block, in order, and adds the blocks' sums with
// compensated (Kahan) summation: each sum then carries an error of about (min(n, p2m_block) + 2) u
// of its terms' magnitude (reference.hpp, leaf_summation::blocked) instead of n u. One leaf of 8M
// points (max depth 0) lost 4% of its mass to plain float summation, and the bound that covered
// it (0.95 of the mass) checked nothing. A leaf of at most p2m_block points gets the bits of a
// plain loop (adding one block's sum to zero is exact).
inline constexpr std::int32_t p2m_block = 64;

namespace detail {
// Kahan's compensated sum (Higham, Accuracy and Stability, sec. 4.3): no reassociation happens
// without -ffast-math (not used) in g++ or nvcc, so the compensation survives compilation.
template <class T>
struct compensated_sum {
  T sum = T(0), carry = T(0);
  CANOPY_HD void add(T x) {
    const T y = x - carry;
    const T t = sum + y;
    carry = (t - sum) - y;
    sum = t;
  }
};

// One running sum: what device code adds the blocks with (see p2m).
template <class T>
struct plain_sum {
  T sum = T(0);
  CANOPY_HD void add(T x) { sum += x; }
};

// p2m's two passes over pts[0, n) in blocks of Block points, each block summed in order and the
// blocks' sums added by Sum (compensated_sum or plain_sum). With one block (Block at least n) and
// plain_sum every quantity is one running sum in point order, the lane groups' leaf_summation::
// sequential.
template <class T, std::int32_t Block, template <class> class Sum>
CANOPY_HD multipole<T> p2m_blocks(const point* pts, std::int32_t n) {
  static_assert(Block > 0);
  multipole<T> r = multipole_identity<T>();
  if (n <= 0) return r;
  Sum<T> mass, sx, sy, sz;
  for (std::int32_t b = 0; b < n; b += (n - b > Block ? Block : n - b)) {
    const std::int32_t e = n - b > Block ? b + Block : n;
    T bm = T(0), bx = T(0), by = T(0), bz = T(0);
    for (std::int32_t i = b; i < e; ++i) {
      const T x = T(pts[i].x), y = T(pts[i].y), z = T(pts[i].z), m = T(pts[i].m);
      bm += m;
      bx += m * x;
      by += m * y;
      bz += m * z;
      r.lo[0] = canopy::smaller(r.lo[0], x);
      r.lo[1] = canopy::smaller(r.lo[1], y);
      r.lo[2] = canopy::smaller(r.lo[2], z);
      r.hi[0] = canopy::larger(r.hi[0], x);
      r.hi[1] = canopy::larger(r.hi[1], y);
      r.hi[2] = canopy::larger(r.hi[2], z);
    }
    mass.add(bm);
    sx.add(bx);
    sy.add(by);
    sz.add(bz);
  }
  r.count = static_cast<std::uint32_t>(n);
  r.mass = mass.sum;
  if (mass.sum > T(0)) {
    r.com[0] = sx.sum / mass.sum;
    r.com[1] = sy.sum / mass.sum;
    r.com[2] = sz.sum / mass.sum;
  } else {
    // All massless: the unweighted centroid (see the header comment); m2 stays 0.
    Sum<T> cx, cy, cz;
    for (std::int32_t b = 0; b < n; b += (n - b > Block ? Block : n - b)) {
      const std::int32_t e = n - b > Block ? b + Block : n;
      T bx = T(0), by = T(0), bz = T(0);
      for (std::int32_t i = b; i < e; ++i) {
        bx += T(pts[i].x);
        by += T(pts[i].y);
        bz += T(pts[i].z);
      }
      cx.add(bx);
      cy.add(by);
      cz.add(bz);
    }
    r.com[0] = cx.sum / T(n);
    r.com[1] = cy.sum / T(n);
    r.com[2] = cz.sum / T(n);
    return r;
  }
  Sum<T> m2[6];
  for (std::int32_t b = 0; b < n; b += (n - b > Block ? Block : n - b)) {
    const std::int32_t e = n - b > Block ? b + Block : n;
    T xx = T(0), xy = T(0), xz = T(0), yy = T(0), yz = T(0), zz = T(0);
    for (std::int32_t i = b; i < e; ++i) {
      const T m = T(pts[i].m);
      const T dx = T(pts[i].x) - r.com[0], dy = T(pts[i].y) - r.com[1], dz = T(pts[i].z) - r.com[2];
      xx += m * dx * dx;
      xy += m * dx * dy;
      xz += m * dx * dz;
      yy += m * dy * dy;
      yz += m * dy * dz;
      zz += m * dz * dz;
    }
    m2[0].add(xx);
    m2[1].add(xy);
    m2[2].add(xz);
    m2[3].add(yy);
    m2[4].add(yz);
    m2[5].add(zz);
  }
  for (int k = 0; k < 6; ++k) r.m2[k] = m2[k].sum;
  return r;
}
}  // namespace detail

// Moments of pts[0, n). Two passes: mass, weighted position sum and bounding box first, then the
// second moments about the finished com. Summing (x - com)^2 instead of x^2 - com^2 avoids the
// catastrophic cancellation of the one-pass formula, which in float loses all digits for a small
// cell far from the origin. On the host each sum is blocked and compensated (p2m_block). Device
// code keeps one running sum per quantity, as the lane groups do (group_p2m): the blocks' extra
// sums cost the twig kernel of one lane about 100 bytes of spills at its 64-register cap
// (tools/kernel-registers), and the GPU's bounds are leaf_summation::sequential anyway.
template <class T>
CANOPY_HD multipole<T> p2m(const point* pts, std::int32_t n) {
#if CANOPY_DEVICE_CODE
  return detail::p2m_blocks<T, 0x7fffffff, detail::plain_sum>(pts, n);
#else
  return detail::p2m_blocks<T, p2m_block, detail::compensated_sum>(pts, n);
#endif
}

// Moments of the union of two disjoint point sets.
template <class T>
CANOPY_HD multipole<T> m2m_merge(const multipole<T>& a, const multipole<T>& b) {
  // The identity returns the other side bit for bit, so merging in an identity-initialised
  // accumulator adds no rounding.
  if (a.count == 0) return b;
  if (b.count == 0) return a;
  multipole<T> r;
  r.count = a.count + b.count;
  r.mass = a.mass + b.mass;
  const T d[3] = {b.com[0] - a.com[0], b.com[1] - a.com[1], b.com[2] - a.com[2]};
  // Weight of b in the new com, and the parallel-axis factor Ma Mb / M (0 when either is massless).
  T wb, shift;
  if (r.mass > T(0)) {
    wb = b.mass / r.mass;
    shift = a.mass * wb;
  } else {
    wb = T(b.count) / T(r.count);
    shift = T(0);
  }
  for (int i = 0; i < 3; ++i) {
    r.com[i] = a.com[i] + wb * d[i];
    r.lo[i] = canopy::smaller(a.lo[i], b.lo[i]);
    r.hi[i] = canopy::larger(a.hi[i], b.hi[i]);
  }
  r.m2[0] = a.m2[0] + b.m2[0] + shift * d[0] * d[0];
  r.m2[1] = a.m2[1] + b.m2[1] + shift * d[0] * d[1];
  r.m2[2] = a.m2[2] + b.m2[2] + shift * d[0] * d[2];
  r.m2[3] = a.m2[3] + b.m2[3] + shift * d[1] * d[1];
  r.m2[4] = a.m2[4] + b.m2[4] + shift * d[1] * d[2];
  r.m2[5] = a.m2[5] + b.m2[5] + shift * d[2] * d[2];
  return r;
}

// The multipole payload as the upward pass's payload policy (payload_policy.hpp): P2M at a leaf,
// m2m_merge of the children in order from the identity. Merging the identity returns the other
// side bit for bit, so the passes' fold from identity() gives the bits that starting from the
// first child gave. Stateless: the pass's ops carry it for free. On the GPU, multipole_policy<float>
// runs on lane groups (group_payload<multipole_policy<float>> in canopy/passes/group_multipole.cuh).
template <class T>
struct multipole_policy {
  using value_type = multipole<T>;
  CANOPY_HD value_type identity() const { return multipole_identity<T>(); }
  CANOPY_HD value_type leaf(std::int32_t /*node*/, const point* pts, std::int32_t n) const { return p2m<T>(pts, n); }
  CANOPY_HD void combine(value_type& parent, const value_type& child, std::int32_t /*child_node*/,
                         std::int32_t /*parent_node*/) const {
    parent = m2m_merge(parent, child);
  }
};

static_assert(payload_policy<multipole_policy<float>>);
static_assert(payload_policy<multipole_policy<double>>);

// Traceless quadrupole about the com, Q = sum m (3 (x-com)(x-com)^T - |x-com|^2 I) = 3 m2 - tr(m2) I,
// in the same order as m2 (xx, xy, xz, yy, yz, zz): what a Barnes-Hut / FMM kernel evaluates.
template <class T>
struct quadrupole {
  T q[6];
};

template <class T>
CANOPY_HD quadrupole<T> traceless_quadrupole(const multipole<T>& m) {
  const T trace = m.m2[0] + m.m2[3] + m.m2[5];
  quadrupole<T> r;
  r.q[0] = T(3) * m.m2[0] - trace;
  r.q[1] = T(3) * m.m2[1];
  r.q[2] = T(3) * m.m2[2];
  r.q[3] = T(3) * m.m2[3] - trace;
  r.q[4] = T(3) * m.m2[4];
  r.q[5] = T(3) * m.m2[5] - trace;
  return r;
}

}  // namespace canopy::trees
