// SPDX-License-Identifier: Apache-2.0
// The bucket decomposition of an octree (canopy/passes/bucket_pass.hpp).
#include "canopy/passes/bucket_pass.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

namespace canopy::trees {

int default_bucket_points(std::int64_t points) {
  // 128 points while that still makes more buckets than the GPU has warps (up to a few million
  // points), 256 above, where fewer and larger buckets amortise their barriers (the sweep is in
  // bench/RESULTS.md); the GPU stages at most 256.
  return points >= (std::int64_t{1} << 22) ? 256 : 128;
}

namespace {

/// The work of one bucket: its leaves in Morton order, its internal nodes by height.
struct bucket_builder {
  const octree& tree;
  std::vector<std::int32_t> leaves;
  std::vector<std::vector<std::int32_t>> waves;  // waves[h - 1]: the internal nodes of height h

  /// Adds the subtree of `root` (depth first, children in order, so leaves come in Morton order),
  /// each internal node to the wave of its height.
  void add(std::int32_t root) {
    // Iterative post-order: (node, next child to visit, height so far).
    struct frame {
      std::int32_t node, next;
      int height;
    };
    std::vector<frame> stack{{root, 0, 0}};
    int result = 0;
    while (!stack.empty()) {
      frame& f = stack.back();
      const std::int32_t k = tree.child_count[static_cast<std::size_t>(f.node)];
      if (k == 0) {
        leaves.push_back(f.node);
        result = 0;
        stack.pop_back();
      } else if (f.next < k) {
        const std::int32_t c = tree.first_child[static_cast<std::size_t>(f.node)] + f.next++;
        stack.push_back({c, 0, 0});
        continue;
      } else {
        const int h = f.height + 1;
        if (waves.size() < static_cast<std::size_t>(h)) waves.resize(static_cast<std::size_t>(h));
        waves[static_cast<std::size_t>(h - 1)].push_back(f.node);
        result = h;
        stack.pop_back();
      }
      if (!stack.empty()) stack.back().height = std::max(stack.back().height, result);
    }
  }
};

}  // namespace

bucket_graph make_bucket_graph(const octree& tree, int bucket_points) {
  if (bucket_points < 1)
    throw std::invalid_argument("make_bucket_graph: bucket_points must be at least 1 (got " +
                                std::to_string(bucket_points) + ")");
  const auto nodes = static_cast<std::int32_t>(tree.child_count.size());
  bucket_graph out;
  if (nodes == 0) {
    out.graph = task_graph::from_parents({});
    return out;
  }
  std::vector<std::int32_t> records;  // 4 per task
  std::vector<std::int32_t> lists;    // the buckets' lists, offsets relative to their start
  std::vector<task_id> parent;
  std::vector<task_id> sources;       // buckets and big leaves, in Morton order
  auto new_task = [&](std::int32_t a, std::int32_t b, std::int32_t c, std::int32_t d, task_id p) {
    const auto t = static_cast<task_id>(parent.size());
    for (const std::int32_t v : {a, b, c, d}) records.push_back(v);
    parent.push_back(p);
    return t;
  };
  auto big = [&](std::int32_t n) { return tree.point_count[static_cast<std::size_t>(n)] > bucket_points; };
  std::vector<std::size_t> list_fixups;  // record indices holding list offsets
  // A bucket of the consecutive small siblings [a, b), waited for by task p.
  auto add_bucket = [&](std::int32_t a, std::int32_t b, task_id p) {
    bucket_builder bb{tree, {}, {}};
    for (std::int32_t c = a; c < b; ++c) bb.add(c);
    const std::int32_t begin = tree.point_begin[static_cast<std::size_t>(a)];
    const std::int32_t end = tree.point_begin[static_cast<std::size_t>(b - 1)] + tree.point_count[static_cast<std::size_t>(b - 1)];
    const auto list = static_cast<std::int32_t>(lists.size());
    lists.push_back(static_cast<std::int32_t>(bb.leaves.size()));
    for (const std::int32_t leaf : bb.leaves) lists.insert(lists.end(), {leaf, tree.point_begin[static_cast<std::size_t>(leaf)] - begin});
    lists.insert(lists.end(), {-1, end - begin});  // a closing record: where the last leaf ends
    for (const auto& w : bb.waves) {
      lists.push_back(static_cast<std::int32_t>(w.size()));
      for (const std::int32_t n : w)
        lists.insert(lists.end(), {n, tree.first_child[static_cast<std::size_t>(n)], tree.child_count[static_cast<std::size_t>(n)]});
    }
    list_fixups.push_back(records.size() + 2);
    const task_id t = new_task(~begin, end, list, static_cast<std::int32_t>(lists.size()), p);
    sources.push_back(t);
    ++out.bucket_count;
    out.max_waves = std::max(out.max_waves, static_cast<std::int32_t>(bb.waves.size()));
  };

  // The big nodes, from the root down (a task's parent is numbered before it); each one's small
  // children are packed greedily into buckets, a big child ending a run.
  auto new_big = [&](std::int32_t n, task_id p, std::vector<std::pair<std::int32_t, task_id>>& todo) {
    const std::int32_t k = tree.child_count[static_cast<std::size_t>(n)];
    const task_id t = new_task(n, tree.first_child[static_cast<std::size_t>(n)], k, 0, p);
    ++out.big_count;
    if (k == 0) sources.push_back(t);  // a big leaf: its P2M is a source
    else todo.emplace_back(n, t);
  };
  if (!big(0)) {
    add_bucket(0, 1, no_task);
  } else {
    std::vector<std::pair<std::int32_t, task_id>> todo;
    new_big(0, no_task, todo);
    while (!todo.empty()) {
      const auto [n, t] = todo.back();
      todo.pop_back();
      const std::int32_t first = tree.first_child[static_cast<std::size_t>(n)];
      const std::int32_t end = first + tree.child_count[static_cast<std::size_t>(n)];
      std::int32_t run = first;  // the small children [run, c) not yet in a bucket
      std::int64_t run_points = 0;
      for (std::int32_t c = first; c < end; ++c) {
        const std::int64_t pc = tree.point_count[static_cast<std::size_t>(c)];
        if (big(c) || (run < c && run_points + pc > bucket_points)) {
          if (run < c) add_bucket(run, c, t);
          run = c;
          run_points = 0;
        }
        if (big(c)) {
          new_big(c, t, todo);
          run = c + 1;
        } else {
          run_points += pc;
        }
      }
      if (run < end) add_bucket(run, end, t);
    }
  }

  // The sources (buckets and big leaves) in Morton order: by their first point.
  std::stable_sort(sources.begin(), sources.end(), [&](task_id a, task_id b) {
    auto first_point = [&](task_id t) {
      const std::int32_t x = records[4 * static_cast<std::size_t>(t)];
      return x < 0 ? ~x : tree.point_begin[static_cast<std::size_t>(x)];
    };
    return first_point(a) < first_point(b);
  });

  // The blob: the records, then the lists (their offsets made absolute).
  const std::size_t list_base = records.size();
  if (list_base + lists.size() > static_cast<std::size_t>(INT32_MAX))
    throw std::invalid_argument("make_bucket_graph: the task data would exceed 2^31 - 1 words");
  for (const std::size_t i : list_fixups) {
    records[i] += static_cast<std::int32_t>(list_base);
    records[i + 1] += static_cast<std::int32_t>(list_base);
  }
  out.blob = std::move(records);
  out.blob.insert(out.blob.end(), lists.begin(), lists.end());
  out.graph = task_graph::from_parents(parent, sources);
  return out;
}

}  // namespace canopy::trees
