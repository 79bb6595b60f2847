// SPDX-License-Identifier: Apache-2.0
// custom_tasks.cpp on the GPU: the same payload and operation, now `__device__`, run by one
// persistent kernel. Managed memory keeps the example short (the scheduler needs only that the
// operation's pointers are valid on the device). Exits 77 (a skipped test) without a device.
#include <canopy/gpu_scheduler.cuh>
#include <canopy/task_graph.hpp>

#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

struct subtree_summary {
  int count;
  float max;
};

struct summarise {  // trivially copyable: passed to the kernel by value
  const std::int32_t* child_offsets;
  const canopy::task_id* children;
  const float* value;
  subtree_summary* out;
  __device__ void operator()(canopy::task_id t) const {
    subtree_summary s{1, value[t]};
    for (std::int32_t i = child_offsets[t]; i < child_offsets[t + 1]; ++i)
      s = {s.count + out[children[i]].count, fmaxf(s.max, out[children[i]].max)};
    out[t] = s;
  }
};

template <class T>
T* managed_copy(const std::vector<T>& v) {
  T* p = nullptr;
  cudaMallocManaged(&p, v.size() * sizeof(T));
  std::copy(v.begin(), v.end(), p);
  return p;
}

int main() {
  if (!canopy::gpu_available()) return std::puts("no CUDA device: skipped"), 77;
  const int n = 100000;
  std::mt19937 rng(42);
  std::vector<canopy::task_id> parent(n, canopy::no_task);
  std::vector<float> value(n);
  for (int i = 0; i < n; ++i) {
    if (i > 0) parent[i] = static_cast<canopy::task_id>(rng() % i);
    value[i] = static_cast<float>(rng() % 1000000);
  }
  const auto graph = canopy::task_graph::from_parents(parent);
  subtree_summary* out = managed_copy(std::vector<subtree_summary>(n));
  const summarise ops{managed_copy(graph.pred_offsets()), managed_copy(graph.predecessors()), managed_copy(value), out};
  canopy::gpu_scheduler scheduler(graph, canopy::scheduler_options{});
  if (const canopy::run_result r = scheduler.run(ops); !r) return std::fprintf(stderr, "run failed: %s\n", r.message.c_str()), 3;

  std::vector<subtree_summary> expected(n);  // serial check: children have larger ids than parents
  for (int i = 0; i < n; ++i) expected[i] = {1, value[i]};
  for (int i = n - 1; i > 0; --i)
    expected[parent[i]] = {expected[parent[i]].count + expected[i].count, std::max(expected[parent[i]].max, expected[i].max)};
  for (int i = 0; i < n; ++i)
    if (out[i].count != expected[i].count || out[i].max != expected[i].max)
      return std::fprintf(stderr, "node %d: got (%d, %g), expected (%d, %g)\n", i, out[i].count, out[i].max,
                          expected[i].count, expected[i].max), 1;
  std::printf("%d subtrees on the GPU: root count %d, max %g: PASS\n", n, out[0].count, out[0].max);
}
