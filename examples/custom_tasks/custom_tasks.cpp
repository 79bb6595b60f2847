// SPDX-License-Identifier: Apache-2.0
// Custom tasks: your own payload and operation, scheduled by Canopy. Every node of a random tree
// gets the size of its subtree and the largest value in it; the result is checked serially.
#include <canopy/cpu_scheduler.hpp>
#include <canopy/task_graph.hpp>

#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

struct subtree_summary {  // the payload: anything trivially copyable
  int count;
  float max;
};

// Called once per node, after all of its children have finished (their results are visible).
// For a tree, a task's predecessors in the graph are its children.
struct summarise {
  const std::int32_t* child_offsets;  // children of t: children[child_offsets[t] .. child_offsets[t+1])
  const canopy::task_id* children;
  const float* value;
  subtree_summary* out;
  void operator()(canopy::task_id t) const {
    subtree_summary s{1, value[t]};  // a leaf; an internal node combines its children below
    for (std::int32_t i = child_offsets[t]; i < child_offsets[t + 1]; ++i)
      s = {s.count + out[children[i]].count, std::max(s.max, out[children[i]].max)};
    out[t] = s;
  }
};

int main() {
  const int n = 100000;
  std::mt19937 rng(42);
  std::vector<canopy::task_id> parent(n, canopy::no_task);  // node 0 is the root
  std::vector<float> value(n);
  for (int i = 0; i < n; ++i) {
    if (i > 0) parent[i] = static_cast<canopy::task_id>(rng() % i);
    value[i] = static_cast<float>(rng() % 1000000);
  }
  const auto graph = canopy::task_graph::from_parents(parent);
  std::vector<subtree_summary> out(n);
  canopy::cpu_scheduler scheduler(graph, canopy::scheduler_options{});
  const canopy::run_result r =
      scheduler.run(summarise{graph.pred_offsets().data(), graph.predecessors().data(), value.data(), out.data()});
  if (!r) return std::fprintf(stderr, "run failed: %s\n", r.message.c_str()), 3;

  std::vector<subtree_summary> expected(n);  // serial check: children have larger ids than parents
  for (int i = 0; i < n; ++i) expected[i] = {1, value[i]};
  for (int i = n - 1; i > 0; --i)
    expected[parent[i]] = {expected[parent[i]].count + expected[i].count, std::max(expected[parent[i]].max, expected[i].max)};
  for (int i = 0; i < n; ++i)
    if (out[i].count != expected[i].count || out[i].max != expected[i].max)
      return std::fprintf(stderr, "node %d: got (%d, %g), expected (%d, %g)\n", i, out[i].count, out[i].max,
                          expected[i].count, expected[i].max), 1;
  std::printf("%d subtrees on %d CPU workers: root count %d, max %g: PASS\n", n, scheduler.worker_count(), out[0].count, out[0].max);
}
