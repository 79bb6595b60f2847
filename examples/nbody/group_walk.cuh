// SPDX-License-Identifier: Apache-2.0
// The GPU force walk: one warp walks the tree once for a group of at most 32 bodies that share an
// octree node (so are close in space), the way Bonsai and Ryoanji walk.
//
// Groups (make_walk_groups_kernel): the largest nodes with at most 32 bodies, consecutive siblings
// merged while they hold at most 32 bodies together (they share the parent's cell, and a warp's
// lanes stay busy: at 1M and 16M Plummer bodies merging halved the walk's time); a leaf of more than 32 bodies (max_leaf above 32,
// or a leaf at the deepest level) is cut into runs of 32. Every body is in exactly one group.
//
// The opening decision is made for the group's bounding box, not for each body: a node is accepted
// when its centre of mass is farther than its opening reach (tree_walk.hpp's opening_reach, the
// "bmax" criterion) from every point of the box. That is the per-body criterion applied to the
// box's nearest point, so every body of the group sees at least the accuracy of walk_one, and the
// whole warp takes the same decisions: no divergence, one load of a node for the whole group.
//
// Per node the walk reads one walk_cell (make_walk_cells_kernel, after the upward pass): centre of
// mass and squared reach, mass and traceless quadrupole, and the links, in four aligned 16-byte
// loads. The traversal is a depth-first walk over sibling ranges: the stack (shared memory, per
// warp) holds child ranges (first child, count <= 8); each iteration pops one range and tests its
// nodes one per lane. Accepted nodes go to a list in shared memory, evaluated 32 at a time by every
// lane for its own body (broadcast reads); a leaf that is too close has its bodies staged in shared
// memory 32 at a time; an opened internal node pushes its child range. Popping one range and
// pushing at most 8 bounds the stack by the usual depth-first argument: at most 7 ranges wait per
// level below the root plus the 8 just pushed, 7 * max_octree_depth + 8 entries (155).
//
// The physics (opening_reach, moments_of, add_cell, add_body) is tree_walk.hpp's, shared with the
// CPU's walk_one.
//
// The kernels are static (internal linkage): each .cu that includes this header has its own copy.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include <canopy/cuda/error.hpp>

#include "tree_walk.hpp"

namespace nbody {

inline constexpr int group_walk_warps = 4;  // warps per block
inline constexpr int group_walk_stack = 7 * ct::max_octree_depth + 8;
// Child ranges are packed as (first << 3) | (count - 1): node ids below 2^29.
inline constexpr std::int64_t group_walk_max_nodes = std::int64_t{1} << 29;

// What the walk reads of a node, 64 bytes: com.xyz and reach^2 (+inf: never accepted); mass and Q xx,
// xy, xz; Q yy, yz, zz and tr(S); links: first child and child count, or first body and body count
// (child count 0).
struct alignas(16) walk_cell {
  float4 com_reach2;
  float4 mass_q012;
  float4 q345_tr;
  int4 links;  // x first child / first body, y child count, z body count
};

// cells[i] for every node, from the upward pass's payloads, at opening angle 1 / inv_theta.
static __global__ void make_walk_cells_kernel(walk_tree t, std::int32_t nodes, float inv_theta, walk_cell* cells) {
  const std::int32_t i = static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= nodes) return;
  const ct::multipole<float> m = t.payload[i];
  const float reach = opening_reach(m, inv_theta);
  const cell_moments c = moments_of(m);
  const std::int32_t children = t.child_count[i];
  walk_cell w;
  w.com_reach2 = make_float4(m.com[0], m.com[1], m.com[2], m.count != 0 ? reach * reach : __int_as_float(0x7f800000));
  w.mass_q012 = make_float4(c.mass, c.q[0], c.q[1], c.q[2]);
  w.q345_tr = make_float4(c.q[3], c.q[4], c.q[5], c.tr);
  w.links = children > 0 ? make_int4(t.first_child[i], children, 0, 0) : make_int4(t.point_begin[i], 0, t.point_count[i], 0);
  cells[i] = w;
}

// A group packed in one 64-bit word (one load): (first body << 5) | (count - 1).
using walk_group = unsigned long long;
__host__ __device__ constexpr walk_group pack_group(std::int32_t begin, std::int32_t count) {
  return (static_cast<walk_group>(begin) << 5) | static_cast<walk_group>(count - 1);
}

namespace detail {

__device__ inline float warp_min(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fminf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ inline float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ inline void append_group(walk_group* groups, std::int32_t* group_count, std::int32_t begin,
                                    std::int32_t count) {
  groups[atomicAdd(group_count, 1)] = pack_group(begin, count);
}

}  // namespace detail

// The walk's groups (first body, count), appended at an atomic counter by one thread per node of more
// than 32 bodies (its children's groups) or the root of at most 32. The order of the appends varies
// from run to run (the groups and so the forces do not).
static __global__ void make_walk_groups_kernel(ct::octree_ref t, walk_group* groups, std::int32_t* group_count) {
  const std::int32_t i = static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= t.node_count) return;
  const std::int32_t count = t.point_count[i];
  if (count <= 32) {
    if (t.parent[i] < 0 && count > 0) detail::append_group(groups, group_count, t.point_begin[i], count);
    return;
  }
  const std::int32_t children = t.child_count[i];
  if (children == 0) {  // a big leaf: runs of 32
    const std::int32_t begin = t.point_begin[i];
    for (std::int32_t r = 0; r < count; r += 32)
      detail::append_group(groups, group_count, begin + r, count - r < 32 ? count - r : 32);
    return;
  }
  // The children of at most 32 bodies are groups, consecutive ones merged while they fit (their bodies
  // are contiguous: siblings' ranges follow each other in Morton order).
  std::int32_t run_begin = 0, run_count = 0;
  const std::int32_t first = t.first_child[i];
  for (std::int32_t c = 0; c < children; ++c) {
    const std::int32_t k = first + c, kc = t.point_count[k];
    if (run_count > 0 && (kc > 32 || run_count + kc > 32)) {
      detail::append_group(groups, group_count, run_begin, run_count);
      run_count = 0;
    }
    if (kc > 32 || kc == 0) continue;
    if (run_count == 0) run_begin = t.point_begin[k];
    run_count += kc;
  }
  if (run_count > 0) detail::append_group(groups, group_count, run_begin, run_count);
}

// At most leaf_count + point_total / 32 groups: each group holds a leaf no other group holds, or is a
// run of 32 bodies of one leaf.
inline std::int64_t max_walk_groups(std::int64_t leaves, std::int64_t points) { return leaves + points / 32 + 1; }

// out[i] = the force on bodies[i] for every body of the groups. Persistent warps: launch
// group_walk_warps * 32 threads per block and as many blocks as fit; each warp takes the next group
// from *next_group (zero before the launch) until *group_count are done.
static __global__ void __launch_bounds__(group_walk_warps * 32)
    group_walk_kernel(const walk_cell* cells, const float4* bodies, const walk_group* groups,
                      const std::int32_t* group_count, std::int32_t* next_group, walk_params p, body_force* out) {
  constexpr int list_capacity = 32 + 8;  // a flush at 32, plus one iteration's accepted nodes
  __shared__ std::uint32_t stack_memory[group_walk_warps][group_walk_stack];
  __shared__ float4 list_memory[group_walk_warps][3][list_capacity];
  __shared__ float4 body_memory[group_walk_warps][32];
  constexpr unsigned all = 0xffffffffu;
  const int lane = static_cast<int>(threadIdx.x & 31u);
  const int warp = static_cast<int>(threadIdx.x >> 5);
  std::uint32_t* stack = stack_memory[warp];
  float4* list_com_mass = list_memory[warp][0];  // com.xyz, mass
  float4* list_q0123 = list_memory[warp][1];     // Q xx, xy, xz, yy
  float4* list_q45_tr = list_memory[warp][2];    // Q yz, zz, tr(S), unused
  float4* staged = body_memory[warp];
  const std::int32_t groups_total = *group_count;

  // Every lane adds the first `k` listed nodes' fields for its own body.
  auto evaluate = [&](const float4& me, int k, body_force& f) {
    for (int j = 0; j < k; ++j) {
      const float4 a = list_com_mass[j], b = list_q0123[j], c = list_q45_tr[j];
      const cell_moments m{a.w, {b.x, b.y, b.z, b.w, c.x, c.y}, c.z};
      add_cell(me.x - a.x, me.y - a.y, me.z - a.z, m, p, f);
    }
  };

  for (;;) {
    std::int32_t g = 0;
    if (lane == 0) g = atomicAdd(next_group, 1);
    g = __shfl_sync(all, g, 0);
    if (g >= groups_total) return;  // the whole warp
    const walk_group key = groups[g];
    const auto group_begin = static_cast<std::int32_t>(key >> 5);
    const int group_size = static_cast<int>(key & 31u) + 1;
    const std::int32_t self = group_begin + lane;
    const bool valid = lane < group_size;
    // A lane past the group's end stands on its first body (it keeps the box, writes nothing).
    const float4 me = bodies[valid ? self : group_begin];

    // The group's box.
    const float lox = detail::warp_min(me.x), hix = detail::warp_max(me.x);
    const float loy = detail::warp_min(me.y), hiy = detail::warp_max(me.y);
    const float loz = detail::warp_min(me.z), hiz = detail::warp_max(me.z);

    int top = 1, listed = 0;
    if (lane == 0) stack[0] = 0u;  // the root alone: first 0, count 1
    __syncwarp();
    body_force f{0.f, 0.f, 0.f, 0.f};
    while (top > 0) {
      const std::uint32_t range = stack[--top];
      __syncwarp();  // every lane has read the slot before the pushes below may overwrite it
      const auto first = static_cast<std::int32_t>(range >> 3);
      const int count = static_cast<int>(range & 7u) + 1;

      bool accept = false, open_node = false, open_leaf = false;
      float4 com = make_float4(0.f, 0.f, 0.f, 0.f);
      int4 links = make_int4(0, 0, 0, 0);
      if (lane < count) {
        com = cells[first + lane].com_reach2;
        links = cells[first + lane].links;
        // Distance from the centre of mass to the nearest point of the group's box, from the box's
        // bounds (a centre and half extent would round, and could make it exceed a body's own).
        const float dx = fmaxf(fmaxf(lox - com.x, com.x - hix), 0.f);
        const float dy = fmaxf(fmaxf(loy - com.y, com.y - hiy), 0.f);
        const float dz = fmaxf(fmaxf(loz - com.z, com.z - hiz), 0.f);
        // A node with neither children nor bodies but a mass (an essential tree's node that the
        // sender found accepted for each of this rank's domain boxes) is taken whole even where the
        // group's box, which may span two of those boxes, is too close: each body of the group
        // would take it (walk_one), and dropping it would lose its mass. An empty node (no mass)
        // has an infinite reach and is never taken.
        accept = dx * dx + dy * dy + dz * dz > com.w || (links.y == 0 && links.z == 0 && com.w < __int_as_float(0x7f800000));
        open_node = !accept && links.y > 0;
        open_leaf = !accept && links.y == 0 && links.z > 0;
      }
      const unsigned accepted = __ballot_sync(all, accept);
      const unsigned opened = __ballot_sync(all, open_node);
      unsigned leaves = __ballot_sync(all, open_leaf);
      const unsigned below = (1u << lane) - 1u;

      // Accepted nodes join the list; opened nodes push their child ranges.
      if (accept) {
        const float4 b = cells[first + lane].mass_q012, c = cells[first + lane].q345_tr;
        const int slot = listed + __popc(accepted & below);
        list_com_mass[slot] = make_float4(com.x, com.y, com.z, b.x);
        list_q0123[slot] = make_float4(b.y, b.z, b.w, c.x);
        list_q45_tr[slot] = make_float4(c.y, c.z, c.w, 0.f);
      }
      listed += __popc(accepted);
      if (top + __popc(opened) > group_walk_stack) __trap();  // cannot happen (see the bound above)
      if (open_node)
        stack[top + __popc(opened & below)] =
            (static_cast<std::uint32_t>(links.x) << 3) | static_cast<std::uint32_t>(links.y - 1);
      top += __popc(opened);
      __syncwarp();

      if (listed >= 32) {  // a full list: every lane takes the 32 nodes, the rest move down
        evaluate(me, 32, f);
        __syncwarp();
        if (lane < listed - 32) {
          list_com_mass[lane] = list_com_mass[lane + 32];
          list_q0123[lane] = list_q0123[lane + 32];
          list_q45_tr[lane] = list_q45_tr[lane + 32];
        }
        listed -= 32;
        __syncwarp();
      }

      // Leaves too close: their bodies, 32 at a time, staged in shared memory.
      for (; leaves != 0; leaves &= leaves - 1) {
        const int k = __ffs(leaves) - 1;
        const std::int32_t begin = __shfl_sync(all, links.x, k);
        const std::int32_t points = __shfl_sync(all, links.z, k);
        for (std::int32_t base = 0; base < points; base += 32) {
          const std::int32_t chunk = points - base < 32 ? points - base : 32;
          if (lane < chunk) staged[lane] = bodies[begin + base + lane];
          __syncwarp();
          for (int j = 0; j < chunk; ++j) {
            const float4 q = staged[j];
            if (begin + base + j != self) add_body(q.x - me.x, q.y - me.y, q.z - me.z, q.w, p.eps2, f);
          }
          __syncwarp();
        }
      }
    }
    evaluate(me, listed, f);  // what is left on the list
    if (valid) out[self] = f;
    __syncwarp();  // the next group's root push must not overtake a lane still reading the stack
  }
}

// Blocks of group_walk_kernel for the current device: as many as are co-resident (persistent warps).
inline unsigned group_walk_blocks() {
  int per_sm = 0, device = 0, sms = 0;
  CANOPY_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, group_walk_kernel, group_walk_warps * 32, 0));
  CANOPY_CUDA_TRY(cudaGetDevice(&device));
  CANOPY_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return static_cast<unsigned>((per_sm > 1 ? per_sm : 1) * sms);
}

}  // namespace nbody
