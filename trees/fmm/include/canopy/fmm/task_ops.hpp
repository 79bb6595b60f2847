// SPDX-License-Identifier: Apache-2.0
// What each task of the FMM's DAG (task_dag.hpp) does, as a trivially copyable view over the
// arrays (host or device memory) and one serial body per kind. Portable (CANOPY_HD): the CPU
// scheduler runs `task_ops` as it is (tests/cpu/fmm/task_dag_test.cpp); the GPU version
// (detail/gpu_tasks.cuh) splits the same bodies over the 32 lanes of a warp.
//
// Every task overwrites what it owns, so runs need no reset in between:
//   up(n)    writes multipoles[n]          reads its children's multipoles
//   m2l(t)   writes locals[t]              reads its sources' multipoles
//   down(n)  writes locals[n]              reads locals[n] (its own M2L's) and locals[parent]
//   p2p(i)   stores fields of its part of  reads points only
//            leaf l's points
//   l2p(l)   adds to fields of l's points  reads locals[l] and the fields l's p2p tasks stored
#pragma once

#include <canopy/config.hpp>
#include <canopy/fmm/expansion.hpp>
#include <canopy/fmm/interaction_lists.hpp>
#include <canopy/fmm/kernels.hpp>
#include <canopy/fmm/task_dag.hpp>
#include <canopy/trees/point.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <type_traits>
#include <vector>

namespace canopy::fmm {

// The arrays every task reads or writes, by node id unless said otherwise.
template <class T, int P>
struct task_data {
  // The tree (level-ordered, points in Morton order) and the expansions' frames.
  const trees::point* points;
  const std::int32_t* point_begin;
  const std::int32_t* point_count;
  const std::int32_t* first_child;
  const std::int32_t* child_count;
  const std::int32_t* parent;
  const frame<T>* frames;
  // The interaction lists (interaction_lists.hpp), CSR by target node.
  const std::int32_t* m2l_offset;
  const std::int32_t* m2l_source;
  const std::int32_t* p2p_offset;
  const std::int32_t* p2p_source;
  // The DAG's task-to-node maps (task_dag).
  task_ranges ranges;
  const std::int32_t* m2l_target;
  const std::int32_t* down_node;
  const std::int32_t* l2p_leaf;
  const std::int32_t* p2p_leaf;
  const std::int32_t* p2p_point;  // each p2p task's first point (task_dag::p2p_point)
  const std::uint8_t* has_local;
  T eps2;
  // What the run writes.
  multipole_expansion<T, P>* multipoles;
  local_expansion<T, P>* locals;
  field<T>* fields;  // by point (tree.points' order)

  CANOPY_HD bool has_m2l(std::int32_t n) const { return m2l_offset[n + 1] > m2l_offset[n]; }
  // The node a task runs on (a leaf for l2p and p2p).
  CANOPY_HD std::int32_t node_of(std::int32_t t) const {
    switch (ranges.kind_of(t)) {
      case task_kind::up: return t;
      case task_kind::m2l: return m2l_target[t - ranges.m2l_begin];
      case task_kind::down: return down_node[t - ranges.down_begin];
      case task_kind::l2p: return l2p_leaf[t - ranges.l2p_begin];
      default: return p2p_leaf[t - ranges.p2p_begin];
    }
  }
  // The points [begin, end) of p2p task p2p_begin + i: from its first point to the next part's
  // (the parts of a leaf are consecutive tasks), or to its leaf's end.
  CANOPY_HD void p2p_part(std::int32_t i, std::int32_t& leaf, std::int32_t& begin, std::int32_t& end) const {
    leaf = p2p_leaf[i];
    begin = p2p_point[i];
    end = i + 1 < ranges.end - ranges.p2p_begin && p2p_leaf[i + 1] == leaf ? p2p_point[i + 1]
                                                                           : point_begin[leaf] + point_count[leaf];
  }
};

// The serial bodies, in the order of evaluate.hpp's phases (same kernels, same source order, so
// a serial run differs from evaluate<T, P> only where l2p's far field is added: after the near
// field here, before it there).
template <class T, int P>
struct task_ops {
  task_data<T, P> d;

  CANOPY_HD void up(std::int32_t n) const {
    multipole_expansion<T, P> m;
    set_zero(m);
    if (d.child_count[n] == 0) {
      p2m(d.points + d.point_begin[n], d.point_count[n], d.frames[n], m);
    } else {
      for (std::int32_t c = d.first_child[n]; c < d.first_child[n] + d.child_count[n]; ++c)
        m2m(d.multipoles[c], d.frames[c], d.frames[n], m);
    }
    d.multipoles[n] = m;
  }

  CANOPY_HD void m2l_into(std::int32_t t) const {
    local_expansion<T, P> l;
    set_zero(l);
    for (std::int32_t k = d.m2l_offset[t]; k < d.m2l_offset[t + 1]; ++k) {
      const std::int32_t s = d.m2l_source[k];
      m2l(d.multipoles[s], d.frames[s], d.frames[t], d.eps2, l);
    }
    d.locals[t] = l;
  }

  CANOPY_HD void down(std::int32_t n) const {
    local_expansion<T, P> l;
    if (d.has_m2l(n)) l = d.locals[n];
    else set_zero(l);
    const std::int32_t p = d.parent[n];
    if (p >= 0 && d.has_local[p]) l2l(d.locals[p], d.frames[p], d.frames[n], l);
    d.locals[n] = l;
  }

  // p2p task p2p_begin + i.
  CANOPY_HD void p2p_part(std::int32_t i) const {
    std::int32_t leaf = 0, begin = 0, end = 0;
    d.p2p_part(i, leaf, begin, end);
    for (std::int32_t j = begin; j < end; ++j) {
      const trees::point q = d.points[j];
      field<T> f{T(0), T(0), T(0), T(0)};
      for (std::int32_t k = d.p2p_offset[leaf]; k < d.p2p_offset[leaf + 1]; ++k) {
        const std::int32_t s = d.p2p_source[k], sb = d.point_begin[s];
        p2p(d.points + sb, d.point_count[s], s == leaf ? j - sb : -1, d.eps2, T(q.x), T(q.y), T(q.z), f);
      }
      d.fields[j] = f;
    }
  }

  CANOPY_HD void l2p_leaf(std::int32_t leaf) const {
    const std::int32_t begin = d.point_begin[leaf], end = begin + d.point_count[leaf];
    for (std::int32_t j = begin; j < end; ++j) {
      const trees::point q = d.points[j];
      const field<T> far = l2p(d.locals[leaf], d.frames[leaf], T(q.x), T(q.y), T(q.z));
      field<T>& f = d.fields[j];
      f.ax += far.ax;
      f.ay += far.ay;
      f.az += far.az;
      f.phi += far.phi;
    }
  }

  CANOPY_HD void operator()(std::int32_t t) const {
    const std::int32_t n = d.node_of(t);
    switch (d.ranges.kind_of(t)) {
      case task_kind::up: up(n); break;
      case task_kind::m2l: m2l_into(n); break;
      case task_kind::down: down(n); break;
      case task_kind::l2p: l2p_leaf(n); break;
      case task_kind::p2p: p2p_part(t - d.ranges.p2p_begin); break;
    }
  }
};

static_assert(std::is_trivially_copyable_v<task_ops<float, 4>>);

// Host memory for a run of task_ops on the CPU (the CPU scheduler, or a serial loop): the frames
// of `geometry` and the arrays the tasks write. tree, lists and dag are referenced, not copied:
// they must outlive this object. The written arrays start as NaN, so a task that read something
// before it was written shows in the result.
template <class T, int P>
struct host_task_state {
  std::vector<frame<T>> frames;
  std::vector<multipole_expansion<T, P>> multipoles;
  std::vector<local_expansion<T, P>> locals;
  std::vector<field<T>> fields;
  task_data<T, P> data;

  host_task_state(const trees::octree& tree, std::span<const cell_geometry> geometry, const interaction_lists& lists,
                  const task_dag& dag, double eps2) {
    const auto nodes = static_cast<std::size_t>(tree.node_count());
    if (geometry.size() != nodes || dag.has_local.size() != nodes)
      throw std::invalid_argument("fmm::host_task_state: geometry or dag not of this tree");
    const T nan = std::numeric_limits<T>::quiet_NaN();
    for (const cell_geometry& g : geometry) frames.push_back(frame<T>{{T(g.center[0]), T(g.center[1]), T(g.center[2])}, T(g.scale)});
    multipoles.resize(nodes);
    locals.resize(nodes);
    for (auto& m : multipoles)
      for (T& c : m.c) c = nan;
    for (auto& l : locals)
      for (T& c : l.c) c = nan;
    fields.assign(tree.points.size(), field<T>{nan, nan, nan, nan});
    data = task_data<T, P>{tree.points.data(), tree.point_begin.data(), tree.point_count.data(), tree.first_child.data(),
                           tree.child_count.data(), tree.parent.data(), frames.data(), lists.m2l_offset.data(),
                           lists.m2l_source.data(), lists.p2p_offset.data(), lists.p2p_source.data(), dag.ranges,
                           dag.m2l_target.data(), dag.down_node.data(), dag.l2p_leaf.data(), dag.p2p_leaf.data(),
                           dag.p2p_point.data(), dag.has_local.data(), T(eps2), multipoles.data(), locals.data(), fields.data()};
  }
  host_task_state(const host_task_state&) = delete;  // data points into this object's vectors
  host_task_state& operator=(const host_task_state&) = delete;

  task_ops<T, P> ops() const { return task_ops<T, P>{data}; }
};

}  // namespace canopy::fmm
