// SPDX-License-Identifier: Apache-2.0
// The distributed force evaluation (distributed_step.hpp): decomposition, migration, local build,
// distributed upward pass, essential-tree exchange and walk.
#include "distributed_step.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>

#include <canopy/distributed/global_tree.hpp>
#include <canopy/passes/upward_runner.hpp>
#include <canopy/trees/morton.hpp>

#include "essential_tree.hpp"
#include "lap_clock.hpp"
#include "force_backend.hpp"

namespace nbody {

namespace cd = canopy::distributed;
namespace ct = canopy::trees;

namespace {

using clock_type = lap_clock;

// Sorts bodies by Morton code over `cube`, ties in their current order; returns the codes.
std::vector<std::uint64_t> sort_by_code(std::vector<dist_body>& bodies, const ct::box& cube, unsigned threads) {
  const std::size_t n = bodies.size();
  const ct::morton_grid grid = ct::make_morton_grid(cube);
  std::vector<std::pair<std::uint64_t, std::uint32_t>> order(n);
  parallel_for(n, threads, 1 << 16, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) order[i] = {ct::morton_code(bodies[i].p, grid), static_cast<std::uint32_t>(i)};
  });
  // (code, index) pairs are distinct, so any sort gives the stable order: chunks sorted on their
  // threads, then merged pairwise (16M bodies per rank would spend seconds in one std::sort).
  const std::size_t parts = std::max<std::size_t>(1, std::min<std::size_t>(threads, n / 65536));
  std::vector<std::size_t> bound(parts + 1);
  for (std::size_t k = 0; k <= parts; ++k) bound[k] = k * n / parts;
  parallel_for(parts, threads, 1, [&](std::size_t pb, std::size_t pe) {
    for (std::size_t k = pb; k < pe; ++k) std::sort(order.begin() + bound[k], order.begin() + bound[k + 1]);
  });
  std::vector<std::pair<std::uint64_t, std::uint32_t>> scratch(parts > 1 ? n : 0);
  for (std::size_t width = 1; width < parts; width *= 2) {
    const std::size_t pairs = (parts + 2 * width - 1) / (2 * width);
    parallel_for(pairs, threads, 1, [&](std::size_t qb, std::size_t qe) {
      for (std::size_t q = qb; q < qe; ++q) {
        const std::size_t lo = bound[2 * width * q], mid = bound[std::min(parts, 2 * width * q + width)],
                          hi = bound[std::min(parts, 2 * width * (q + 1))];
        std::merge(order.begin() + lo, order.begin() + mid, order.begin() + mid, order.begin() + hi, scratch.begin() + lo);
      }
    });
    order.swap(scratch);
  }
  std::vector<dist_body> sorted(n);
  std::vector<std::uint64_t> codes(n);
  parallel_for(n, threads, 1 << 16, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) {
      sorted[i] = bodies[order[i].second];
      codes[i] = order[i].first;
    }
  });
  bodies.swap(sorted);
  return codes;
}

// The GPU walk's groups (group_walk.cuh's make_walk_groups_kernel, on the host): the largest nodes
// of at most 32 bodies, consecutive siblings merged while they fit, a bigger leaf cut in runs of 32;
// packed as (first body << 5) | (count - 1).
std::vector<std::uint64_t> walk_groups(const ct::octree& t) {
  std::vector<std::uint64_t> groups;
  const auto add = [&](std::int32_t begin, std::int32_t count) {
    groups.push_back((static_cast<std::uint64_t>(begin) << 5) | static_cast<std::uint64_t>(count - 1));
  };
  for (std::int32_t i = 0; i < t.node_count(); ++i) {
    const auto k = static_cast<std::size_t>(i);
    const std::int32_t count = t.point_count[k];
    if (count <= 32) {
      if (t.parent[k] < 0 && count > 0) add(t.point_begin[k], count);
      continue;
    }
    if (t.child_count[k] == 0) {
      for (std::int32_t r = 0; r < count; r += 32) add(t.point_begin[k] + r, std::min(32, count - r));
      continue;
    }
    std::int32_t run_begin = 0, run_count = 0;
    for (std::int32_t c = t.first_child[k]; c < t.first_child[k] + t.child_count[k]; ++c) {
      const std::int32_t kc = t.point_count[static_cast<std::size_t>(c)];
      if (run_count > 0 && (kc > 32 || run_count + kc > 32)) {
        add(run_begin, run_count);
        run_count = 0;
      }
      if (kc > 32 || kc == 0) continue;
      if (run_count == 0) run_begin = t.point_begin[static_cast<std::size_t>(c)];
      run_count += kc;
    }
    if (run_count > 0) add(run_begin, run_count);
  }
  return groups;
}

std::vector<std::size_t> to_sizes(const std::vector<std::uint64_t>& v) { return {v.begin(), v.end()}; }

}  // namespace

std::vector<int> top_owners(const cd::global_tree& top) {
  const auto T = static_cast<std::size_t>(top.node_count());
  std::vector<int> owner(T, -1);
  const auto ranks = top.leaf_begin.empty() ? std::size_t{0} : top.leaf_begin.size() - 1;
  for (std::size_t r = 0; r < ranks; ++r)
    for (std::int32_t i = top.leaf_begin[r]; i < top.leaf_begin[r + 1]; ++i)
      owner[static_cast<std::size_t>(top.leaves[static_cast<std::size_t>(i)])] = static_cast<int>(r);
  for (std::size_t n = T; n-- > 0;) {  // children after their parents (level order)
    if (top.child_count[n] == 0) continue;
    const auto first = static_cast<std::size_t>(top.first_child[n]);
    int o = owner[first];
    for (std::size_t c = first + 1; c < first + static_cast<std::size_t>(top.child_count[n]); ++c)
      if (owner[c] != o) o = -1;
    owner[n] = o;
  }
  return owner;
}

std::vector<std::vector<box6>> rank_domains(const cd::global_tree& top, const std::vector<int>& owner,
                                            const std::vector<ct::multipole<float>>& top_payload, int ranks) {
  std::vector<std::vector<box6>> domain(static_cast<std::size_t>(ranks));
  for (std::size_t n = 0; n < owner.size(); ++n) {
    const int o = owner[n];
    if (o < 0 || (top.parent[n] >= 0 && owner[static_cast<std::size_t>(top.parent[n])] == o)) continue;
    const ct::multipole<float>& m = top_payload[n];
    if (m.count == 0) continue;
    domain[static_cast<std::size_t>(o)].push_back(box6{{m.lo[0], m.lo[1], m.lo[2]}, {m.hi[0], m.hi[1], m.hi[2]}});
  }
  return domain;
}

distributed_step::distributed_step(const cd::mpi_context& ctx, cd::exchange& ex, int max_leaf, balance_by balance,
                                   const canopy::scheduler_options& scheduler, unsigned threads)
    : ctx_(ctx), ex_(ex), max_leaf_(max_leaf), balance_(balance), scheduler_(scheduler), threads_(threads) {}

void distributed_step::rebuild(std::vector<dist_body>& bodies, dist_phase_times& times) {
  auto clock = clock_type::now();
  const auto ranks = static_cast<std::size_t>(ctx_.size());
  const auto rank = static_cast<std::size_t>(ctx_.rank());

  // The wait for the others apart, so that the phases below time this rank's work.
  MPI_Barrier(ctx_.comm());
  times.wait = lap_ms(clock);

  // 1. Decompose.
  std::vector<ct::point> pos(bodies.size());
  for (std::size_t i = 0; i < bodies.size(); ++i) pos[i] = bodies[i].p;
  const ct::box cube = cd::global_cube(ctx_, ex_, pos);
  pos = {};
  std::vector<std::uint64_t> codes;
  ctx_.phase("sort", [&] {
    if (bodies.size() > 0x7fffffffu) throw std::length_error("more than 2^31 - 1 bodies on one rank");
    codes = sort_by_code(bodies, cube, threads_);
  });
  cd::decomposition_options dopt;
  dopt.max_leaf = max_leaf_;
  dopt.max_depth = ct::max_octree_depth;
  cd::global_tree top = cd::build_global_tree(ctx_, ex_, cube, codes, dopt);
  // By work: each global leaf weighs the interactions its bodies took last step, summed over ranks
  // (every rank must cut the same way), then the leaves are cut again. A step with no measurement
  // (the first) keeps the count cut.
  double my_work = 0;
  for (const dist_body& b : bodies) my_work += b.work;
  std::vector<double> sums{my_work};
  ex_.all_reduce(sums.data(), 1, cd::element_type::f64, cd::reduce_op::sum);
  if (balance_ == balance_by::work && sums[0] > 0) {
    std::vector<double> weight(top.leaves.size(), 0.0);
    std::size_t b = 0;
    for (std::size_t i = 0; i < top.leaves.size(); ++i) {
      const auto n = static_cast<std::size_t>(top.leaves[i]);
      const std::uint64_t end = cd::cell_key_end(top.level[n], top.prefix[n]);
      for (; b < bodies.size() && codes[b] < end; ++b) weight[i] += bodies[b].work;
    }
    ex_.all_reduce(weight.data(), weight.size(), cd::element_type::f64, cd::reduce_op::sum);
    std::map<std::pair<int, std::uint64_t>, double> by_cell;
    for (std::size_t i = 0; i < top.leaves.size(); ++i) {
      const auto n = static_cast<std::size_t>(top.leaves[i]);
      by_cell[{top.level[n], top.prefix[n]}] = weight[i];
    }
    dopt.leaf_weight = [&by_cell](int level, std::uint64_t prefix, std::uint64_t) { return by_cell.at({level, prefix}); };
    cd::assign_ranks(top, static_cast<int>(ranks), dopt);
  }
  times.decompose = lap_ms(clock);

  // 2. Migrate: the sorted bodies are cut at the ranks' first keys.
  std::vector<std::size_t> send(ranks);
  std::vector<std::uint64_t> send64(ranks);
  for (std::size_t r = 0; r < ranks; ++r) {
    const auto b = std::lower_bound(codes.begin(), codes.end(), top.key_begin[r]);
    const auto e = std::lower_bound(codes.begin(), codes.end(), top.key_begin[r + 1]);
    send[r] = static_cast<std::size_t>(e - b);
    send64[r] = send[r];
  }
  const std::vector<std::size_t> recv = to_sizes(ctx_.all_to_all(send64));
  ctx_.phase("migrate", [&] { cd::check_exchange_counts(send, recv); });
  std::vector<dist_body> mine(std::accumulate(recv.begin(), recv.end(), std::size_t{0}));
  cd::all_to_all_v(ex_, bodies.data(), send, mine.data(), recv);
  bodies.swap(mine);
  mine = {};
  // Each source's run is sorted; sorting the whole by (code, position) keeps sources in rank order
  // on equal codes, as one rank's stable sort would.
  sort_by_code(bodies, cube, threads_);
  times.migrate = lap_ms(clock);

  // 3. Build over the global cube. The bodies are in Morton order already, so the builder's stable
  // sort keeps them in place: its points are the bodies (checked).
  tree_ = cd::distributed_octree{};
  tree_.top = std::move(top);
  ctx_.phase("build", [&] {
    std::vector<ct::point> pts(bodies.size());
    for (std::size_t i = 0; i < bodies.size(); ++i) pts[i] = bodies[i].p;
    ct::build_options b;
    b.max_leaf = max_leaf_;
    b.max_depth = ct::max_octree_depth;
    b.cube = cube;
    tree_.local = ct::build_octree(pts, b);
    for (std::size_t i = 0; i < pts.size(); ++i) {
      const ct::point& q = tree_.local.points[i];
      if (q.x != pts[i].x || q.y != pts[i].y || q.z != pts[i].z || q.m != pts[i].m)
        throw std::logic_error("the local octree's point order differs from the bodies' Morton order");
    }
    const ct::octree_ref ref = cd::host_ref(tree_.local);
    const ct::morton_grid grid = ct::make_morton_grid(cube);
    for (std::int32_t i = tree_.top.leaf_begin[rank]; i < tree_.top.leaf_begin[rank + 1]; ++i) {
      const auto n = static_cast<std::size_t>(tree_.top.leaves[static_cast<std::size_t>(i)]);
      const cd::branch_location at = cd::locate_branch(ref, grid, tree_.top.level[n], tree_.top.prefix[n]);
      if (static_cast<std::uint64_t>(at.end - at.begin) != tree_.top.count[n])
        throw std::logic_error("a global leaf's bodies are not all on its owner after the migration");
      tree_.branches.push_back(at);
    }
  });
  if (walker_ != nullptr) groups_ = walk_groups(tree_.local);
  times.build = lap_ms(clock);

  // 4. The distributed upward pass.
  cd::phase_times pt;
  canopy::scheduler_options sopt = scheduler_;
  sopt.blocks = static_cast<int>(threads_);
  moments_ = cd::distributed_upward_pass(ctx_, ex_, tree_, ct::upward_options{ct::pass_backend::cpu, ct::pass_tasks::node, sopt},
                                         &pt);
  times.upward = 1e3 * (pt.pass + pt.branches);
  times.top = 1e3 * (pt.exchange + pt.top);
}

void distributed_step::forces(std::vector<dist_body>& bodies, const walk_params& params, std::vector<body_force>& out,
                              dist_phase_times& times, bool record_work) {
  auto clock = clock_type::now();
  const auto ranks = static_cast<std::size_t>(ctx_.size());
  const auto rank = static_cast<std::size_t>(ctx_.rank());
  const cd::global_tree& top = tree_.top;
  const ct::octree& local = tree_.local;
  const float inv_theta = 1.0f / params.theta;

  // Every rank's bounding box of bodies.
  box6 mine{{std::numeric_limits<float>::infinity(), std::numeric_limits<float>::infinity(),
             std::numeric_limits<float>::infinity()},
            {-std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
             -std::numeric_limits<float>::infinity()}};
  for (const dist_body& b : bodies) {
    const float c[3] = {b.p.x, b.p.y, b.p.z};
    for (int a = 0; a < 3; ++a) {
      mine.lo[a] = std::min(mine.lo[a], c[a]);
      mine.hi[a] = std::max(mine.hi[a], c[a]);
    }
  }
  std::vector<box6> boxes(ranks);
  const std::vector<std::size_t> ones(ranks, 1);
  cd::all_gather_v(ex_, &mine, boxes.data(), ones);

  // Every rank's domain (essential_tree.hpp): a node is sent as a multipole when each of its boxes
  // accepts it, and the rank's whole box accepting it implies that.
  const auto T = static_cast<std::size_t>(top.node_count());
  const std::vector<int> owner_of = top_owners(top);
  const std::vector<std::vector<box6>> domain = rank_domains(top, owner_of, moments_.top, static_cast<int>(ranks));
  const auto accepted_by = [&](const ct::multipole<float>& m, std::size_t r) {
    if (accepted_by_box(m, inv_theta, boxes[r])) return true;
    for (const box6& b : domain[r])
      if (!accepted_by_box(m, inv_theta, b)) return false;
    return true;
  };

  // 5. The pruned subtrees for each other rank with bodies.
  const auto owned_begin = static_cast<std::size_t>(top.leaf_begin[rank]);
  const std::size_t owned = tree_.branches.size();
  std::vector<let_node> send_nodes;
  std::vector<ct::point> send_bodies;
  std::vector<std::size_t> node_counts(ranks, 0), body_counts(ranks, 0);
  std::deque<std::pair<std::size_t, std::int32_t>> open;  // (record, local node) to expand
  for (std::size_t r = 0; r < ranks; ++r) {
    if (r == rank || boxes[r].empty()) continue;
    const std::size_t node_base = send_nodes.size(), body_base = send_bodies.size();
    auto add_bodies = [&](let_node& rec, std::int32_t b, std::int32_t e) {
      rec.point_begin = static_cast<std::int32_t>(send_bodies.size() - body_base);
      rec.point_count = e - b;
      send_bodies.insert(send_bodies.end(), local.points.begin() + b, local.points.begin() + e);
    };
    // A record for a node: payload only when the box accepts it, bodies for a leaf, else opened later.
    auto add_node = [&](const ct::multipole<float>& m, std::int32_t local_node, std::int32_t global_leaf) {
      let_node rec{m, -1, 0, 0, 0, global_leaf};
      const std::size_t at = send_nodes.size();
      if (!accepted_by(m, r)) {
        if (local.child_count[static_cast<std::size_t>(local_node)] == 0)
          add_bodies(rec, local.point_begin[static_cast<std::size_t>(local_node)],
                     local.point_begin[static_cast<std::size_t>(local_node)] + local.point_count[static_cast<std::size_t>(local_node)]);
        else
          open.emplace_back(at, local_node);
      }
      send_nodes.push_back(rec);
    };
    for (std::size_t i = 0; i < owned; ++i) {
      const cd::branch_location& at = tree_.branches[i];
      const std::int32_t g = top.leaves[owned_begin + i];
      const ct::multipole<float>& m = moments_.top[static_cast<std::size_t>(g)];
      if (at.node >= 0) {
        add_node(m, at.node, g);
      } else {
        // The cell's bodies within a bigger local leaf: a leaf of the global octree.
        let_node rec{m, -1, 0, 0, 0, g};
        if (!accepted_by(m, r)) add_bodies(rec, at.begin, at.end);
        send_nodes.push_back(rec);
      }
      // Breadth first: an opened node's children are appended together, so they are contiguous.
      while (!open.empty()) {
        const auto [record, n] = open.front();
        open.pop_front();
        const auto k = static_cast<std::size_t>(n);
        send_nodes[record].first_child = static_cast<std::int32_t>(send_nodes.size() - node_base);
        send_nodes[record].child_count = local.child_count[k];
        for (std::int32_t c = local.first_child[k]; c < local.first_child[k] + local.child_count[k]; ++c)
          add_node(moments_.local[static_cast<std::size_t>(c)], c, -1);
      }
    }
    node_counts[r] = send_nodes.size() - node_base;
    body_counts[r] = send_bodies.size() - body_base;
  }
  std::vector<std::uint64_t> counts64(2 * ranks);
  for (std::size_t r = 0; r < ranks; ++r) counts64[r] = node_counts[r];
  const std::vector<std::size_t> node_recv = to_sizes(ctx_.all_to_all({counts64.data(), ranks}));
  for (std::size_t r = 0; r < ranks; ++r) counts64[r] = body_counts[r];
  const std::vector<std::size_t> body_recv = to_sizes(ctx_.all_to_all({counts64.data(), ranks}));
  ctx_.phase("essential tree", [&] {
    cd::check_exchange_counts(node_counts, node_recv);
    cd::check_exchange_counts(body_counts, body_recv);
    if (bodies.size() + std::accumulate(body_recv.begin(), body_recv.end(), std::size_t{0}) > 0x7fffffffu)
      throw std::length_error("more than 2^31 - 1 bodies in one rank's essential tree");
  });
  std::vector<let_node> recv_nodes(std::accumulate(node_recv.begin(), node_recv.end(), std::size_t{0}));
  std::vector<ct::point> recv_bodies(std::accumulate(body_recv.begin(), body_recv.end(), std::size_t{0}));
  cd::all_to_all_v(ex_, send_nodes.data(), node_counts, recv_nodes.data(), node_recv);
  cd::all_to_all_v(ex_, send_bodies.data(), body_counts, recv_bodies.data(), body_recv);
  ex_.synchronize();
  let_ = let_stats{send_nodes.size(), send_bodies.size(), recv_nodes.size(), recv_bodies.size()};

  // The walk's tree: top nodes [0, T), local nodes [T, T + L), received nodes after.
  const auto L = static_cast<std::size_t>(local.node_count());
  const std::size_t total = T + L + recv_nodes.size();
  first_child_.assign(total, -1);
  child_count_.assign(total, 0);
  point_begin_.assign(total, 0);
  point_count_.assign(total, 0);
  payload_.resize(total);
  for (std::size_t n = 0; n < T; ++n) {
    payload_[n] = moments_.top[n];
    first_child_[n] = top.first_child[n];
    child_count_[n] = top.child_count[n];
  }
  for (std::size_t n = 0; n < L; ++n) {
    payload_[T + n] = moments_.local[n];
    child_count_[T + n] = local.child_count[n];
    first_child_[T + n] = local.child_count[n] > 0 ? static_cast<std::int32_t>(T) + local.first_child[n] : -1;
    point_begin_[T + n] = local.point_begin[n];
    point_count_[T + n] = local.point_count[n];
  }
  // Below this rank's global leaves: its own subtrees (or the cell's bodies in a bigger local leaf).
  for (std::size_t i = 0; i < owned; ++i) {
    const auto g = static_cast<std::size_t>(top.leaves[owned_begin + i]);
    const cd::branch_location& at = tree_.branches[i];
    if (at.node >= 0) {
      const std::size_t k = T + static_cast<std::size_t>(at.node);
      first_child_[g] = first_child_[k];
      child_count_[g] = child_count_[k];
      point_begin_[g] = point_begin_[k];
      point_count_[g] = point_count_[k];
    } else {
      point_begin_[g] = at.begin;
      point_count_[g] = at.end - at.begin;
    }
  }
  // Below the others': the received subtrees, relinked into this numbering.
  points_.resize(bodies.size() + recv_bodies.size());
  for (std::size_t i = 0; i < bodies.size(); ++i) points_[i] = bodies[i].p;
  std::copy(recv_bodies.begin(), recv_bodies.end(), points_.begin() + static_cast<std::ptrdiff_t>(bodies.size()));
  std::size_t node_at = 0, body_at = bodies.size();
  for (std::size_t r = 0; r < ranks; ++r) {
    for (std::size_t j = 0; j < node_recv[r]; ++j) {
      const let_node& rec = recv_nodes[node_at + j];
      const std::size_t k = T + L + node_at + j;
      payload_[k] = rec.payload;
      child_count_[k] = rec.child_count;
      first_child_[k] = rec.child_count > 0 ? static_cast<std::int32_t>(T + L + node_at) + rec.first_child : -1;
      point_begin_[k] = static_cast<std::int32_t>(body_at) + rec.point_begin;
      point_count_[k] = rec.point_count;
      if (rec.global_leaf >= 0) {
        const auto g = static_cast<std::size_t>(rec.global_leaf);
        if (g >= T || top.child_count[g] != 0 || owner_of[g] != static_cast<int>(r))
          throw std::logic_error("an essential tree's root is not a global leaf of its sender");
        first_child_[g] = first_child_[k];
        child_count_[g] = child_count_[k];
        point_begin_[g] = point_begin_[k];
        point_count_[g] = point_count_[k];
      }
    }
    node_at += node_recv[r];
    body_at += body_recv[r];
  }
  times.let = lap_ms(clock);

  // 6. The walk: this rank's bodies are points_[0, n), so a body skips itself by index.
  const walk_tree view{points_.data(), first_child_.data(), child_count_.data(), point_begin_.data(), point_count_.data(),
                       payload_.data()};
  out.resize(bodies.size());
  // Agreed: a rank whose walk fails (a CUDA error, the injected failure) ends every rank with its
  // error instead of leaving them in the next step's collectives.
  ctx_.phase("walk", [&] {
    if (fail_walk_) throw std::runtime_error("injected failure (--fail-rank)");
    if (walker_ != nullptr) {
      gpu_walk_times gt;
      walker_->walk(view, static_cast<std::int32_t>(total), static_cast<std::int32_t>(points_.size()),
                    static_cast<std::int32_t>(bodies.size()), groups_, params, out.data(), gt);
      times.let += gt.upload_ms;
      times.walk = gt.walk_ms;
      return;
    }
    parallel_for(bodies.size(), threads_, 256, [&](std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e; ++i) {
        std::uint32_t interactions = 0;
        const ct::point& p = points_[i];
        out[i] = walk_one(view, static_cast<std::int32_t>(i), p.x, p.y, p.z, params, &interactions);
        if (record_work) bodies[i].work = static_cast<float>(interactions);
      }
    });
    times.walk = lap_ms(clock);  // this rank's walk, not the agreement's wait for the others
  });
}

}  // namespace nbody
