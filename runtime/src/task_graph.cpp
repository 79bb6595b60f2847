// SPDX-License-Identifier: Apache-2.0
#include "canopy/task_graph.hpp"

#include <algorithm>
#include <string>

namespace canopy {
namespace {

std::string task_list(const std::vector<task_id>& ts) {
  std::string s;
  for (std::size_t i = 0; i < ts.size() && i < 16; ++i) s += (i ? " -> " : "") + std::to_string(ts[i]);
  if (ts.size() > 16) s += " -> ...";
  return s;
}

// Kahn's algorithm over successor lists; returns the topological order (shorter than n on a cycle).
template <class Succ>
std::vector<task_id> topological_order(std::int32_t n, std::vector<std::int32_t> indeg, Succ&& for_each_succ) {
  std::vector<task_id> order;
  order.reserve(static_cast<std::size_t>(n));
  for (task_id t = 0; t < n; ++t)
    if (indeg[static_cast<std::size_t>(t)] == 0) order.push_back(t);
  for (std::size_t i = 0; i < order.size(); ++i)
    for_each_succ(order[i], [&](task_id s) {
      if (--indeg[static_cast<std::size_t>(s)] == 0) order.push_back(s);
    });
  return order;
}

}  // namespace

task_graph task_graph::from_parents(std::span<const task_id> parent, std::span<const task_id> sources_order) {
  task_graph g;
  const auto n = static_cast<std::int64_t>(parent.size());
  if (n > INT32_MAX - 1) throw error(status::invalid_argument, "task graph: too many tasks");
  g.task_count_ = static_cast<std::int32_t>(n);
  g.parent_.assign(parent.begin(), parent.end());
  for (task_id t = 0; t < g.task_count_; ++t) {
    const task_id p = parent[static_cast<std::size_t>(t)];
    if (p == t) throw error(status::invalid_argument, "task graph: task " + std::to_string(t) + " is its own parent");
    if (p != no_task && (p < 0 || p >= g.task_count_))
      throw error(status::invalid_argument,
                  "task graph: task " + std::to_string(t) + " has parent " + std::to_string(p) + ", out of range");
  }
  g.finish();
  if (!sources_order.empty()) {
    std::vector<task_id> given(sources_order.begin(), sources_order.end());
    std::vector<task_id> expect = g.sources_;
    std::sort(given.begin(), given.end());
    if (given != expect)
      throw error(status::invalid_argument, "task graph: sources_order is not a permutation of the tasks without children");
    g.sources_.assign(sources_order.begin(), sources_order.end());
  }
  return g;
}

task_graph task_graph::from_edges(std::int32_t task_count, std::span<const std::pair<task_id, task_id>> edges) {
  if (task_count < 0) throw error(status::invalid_argument, "task graph: negative task count");
  task_graph g;
  g.task_count_ = task_count;
  std::vector<std::pair<task_id, task_id>> e(edges.begin(), edges.end());
  for (const auto& [a, b] : e) {
    if (a < 0 || a >= task_count || b < 0 || b >= task_count)
      throw error(status::invalid_argument, "task graph: edge " + std::to_string(a) + " -> " + std::to_string(b) +
                                                " names a task outside 0.." + std::to_string(task_count - 1));
    if (a == b) throw error(status::invalid_argument, "task graph: task " + std::to_string(a) + " depends on itself");
  }
  std::sort(e.begin(), e.end());
  if (auto d = std::adjacent_find(e.begin(), e.end()); d != e.end())
    throw error(status::invalid_argument,
                "task graph: duplicate edge " + std::to_string(d->first) + " -> " + std::to_string(d->second));
  g.succ_offsets_.assign(static_cast<std::size_t>(task_count) + 1, 0);
  for (const auto& [a, b] : e) ++g.succ_offsets_[static_cast<std::size_t>(a) + 1];
  for (std::int32_t t = 0; t < task_count; ++t) g.succ_offsets_[t + 1] += g.succ_offsets_[t];
  g.succ_.resize(e.size());
  {
    std::vector<std::int32_t> fill(g.succ_offsets_.begin(), g.succ_offsets_.end() - 1);
    for (const auto& [a, b] : e) g.succ_[static_cast<std::size_t>(fill[static_cast<std::size_t>(a)]++)] = b;
  }
  // A graph with an empty succ_offsets is a tree; keep a DAG's offsets non-empty even with no tasks.
  g.finish();
  return g;
}

void task_graph::finish() {
  const auto n = static_cast<std::size_t>(task_count_);
  auto for_each_succ = [&](task_id t, auto&& f) {
    if (is_tree()) {
      if (parent_[static_cast<std::size_t>(t)] != no_task) f(parent_[static_cast<std::size_t>(t)]);
    } else {
      for (std::int32_t i = succ_offsets_[static_cast<std::size_t>(t)]; i < succ_offsets_[static_cast<std::size_t>(t) + 1]; ++i)
        f(succ_[static_cast<std::size_t>(i)]);
    }
  };
  dependency_count_.assign(n, 0);
  for (task_id t = 0; t < task_count_; ++t) for_each_succ(t, [&](task_id s) { ++dependency_count_[static_cast<std::size_t>(s)]; });

  pred_offsets_.assign(n + 1, 0);
  for (std::size_t t = 0; t < n; ++t) pred_offsets_[t + 1] = pred_offsets_[t] + dependency_count_[t];
  pred_.resize(static_cast<std::size_t>(pred_offsets_[n]));
  {
    std::vector<std::int32_t> fill(pred_offsets_.begin(), pred_offsets_.end() - 1);
    for (task_id t = 0; t < task_count_; ++t)
      for_each_succ(t, [&](task_id s) { pred_[static_cast<std::size_t>(fill[static_cast<std::size_t>(s)]++)] = t; });
  }

  const auto order = topological_order(task_count_, dependency_count_, for_each_succ);
  if (order.size() != n) {
    // Every task not in `order` lies on or behind a cycle; walk predecessors inside that set
    // until a task repeats, which yields the cycle itself.
    std::vector<char> left(n, 1);
    for (task_id t : order) left[static_cast<std::size_t>(t)] = 0;
    task_id t = static_cast<task_id>(std::find(left.begin(), left.end(), 1) - left.begin());
    std::vector<std::int32_t> seen_at(n, -1);
    std::vector<task_id> path;
    while (seen_at[static_cast<std::size_t>(t)] < 0) {
      seen_at[static_cast<std::size_t>(t)] = static_cast<std::int32_t>(path.size());
      path.push_back(t);
      for (std::int32_t i = pred_offsets_[static_cast<std::size_t>(t)]; i < pred_offsets_[static_cast<std::size_t>(t) + 1]; ++i)
        if (left[static_cast<std::size_t>(pred_[static_cast<std::size_t>(i)])]) { t = pred_[static_cast<std::size_t>(i)]; break; }
    }
    std::vector<task_id> cycle(path.begin() + seen_at[static_cast<std::size_t>(t)], path.end());
    std::reverse(cycle.begin(), cycle.end());  // predecessors were walked: reverse into dependency order
    cycle.push_back(cycle.front());
    throw error(status::invalid_argument, "task graph: cycle " + task_list(cycle));
  }

  sources_.clear();
  sink_count_ = 0;
  for (task_id t = 0; t < task_count_; ++t) {
    if (dependency_count_[static_cast<std::size_t>(t)] == 0) sources_.push_back(t);
    int succs = 0;
    for_each_succ(t, [&](task_id) { ++succs; });
    if (succs == 0) ++sink_count_;
  }
}

task_graph_ref task_graph::host_ref(std::int32_t* pending) const {
  return task_graph_ref{task_count_,
                        parent_.empty() ? nullptr : parent_.data(),
                        is_tree() ? nullptr : succ_offsets_.data(),
                        succ_.empty() ? nullptr : succ_.data(),
                        dependency_count_.data(),
                        pending,
                        sources_.data(),
                        static_cast<std::int32_t>(sources_.size()),
                        sink_count_};
}

void task_graph::withhold_dependency(task_id t) {
  if (t < 0 || t >= task_count_) throw error(status::invalid_argument, "withhold_dependency: no task " + std::to_string(t));
  const bool was_source = dependency_count_[static_cast<std::size_t>(t)] == 0;
  ++dependency_count_[static_cast<std::size_t>(t)];
  if (was_source) sources_.erase(std::find(sources_.begin(), sources_.end(), t));
}

task_id task_graph::find_stuck_task(std::span<const std::int32_t> pending) const {
  if (pending.size() != static_cast<std::size_t>(task_count_)) return no_task;
  // A finished or untouched task's counter equals its dependency count (the last arriver resets
  // it); a counter anywhere else was reached by some predecessors but not all.
  auto partial = [&](task_id t) { return pending[static_cast<std::size_t>(t)] != dependency_count_[static_cast<std::size_t>(t)]; };
  task_id best = no_task;
  for (task_id t = 0; t < task_count_; ++t) {
    if (!partial(t)) continue;
    bool upstream_partial = false;
    for (std::int32_t i = pred_offsets_[static_cast<std::size_t>(t)]; i < pred_offsets_[static_cast<std::size_t>(t) + 1]; ++i)
      upstream_partial |= partial(pred_[static_cast<std::size_t>(i)]);
    if (!upstream_partial) return t;
    if (best == no_task) best = t;
  }
  return best;
}

}  // namespace canopy
