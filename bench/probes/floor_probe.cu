// SPDX-License-Identifier: Apache-2.0
// Tuning probe (not part of any suite): what the upward pass costs below the scheduler, on the
// Plummer trees of issue 17 (16M and 1M points, leaves of at most 32; the `canopy bench --dist
// plummer` trees) and the complete octrees of depth 8, 7 and 5 (8 points a leaf). Each line is one plain kernel (no scheduler, no
// dependency counter, no tree above the level it computes), stream time by CUDA events around the
// launch, median of the samples after 3 warm-ups:
//
//   read points        every point read once (float4, four loads in flight a thread, grid-stride):
//                      the floor of any pass that reads the points
//   leaves L=k         every leaf's moments (group_p2m on k lanes a leaf, the payload stored), all
//                      leaves in Morton order, one group a leaf: the leaf level alone, with the
//                      pass's own arithmetic and access pattern
//   leaves SoA L=k     the same arithmetic over the points as four float arrays (a copy made
//                      once, not timed): what the 16-byte point layout costs the leaf level
//   twig sources       the twig decomposition's sources (twigs and leaf groups: every point of the
//                      tree), each on a 16-lane group as twig_upward_ops runs them, with no
//                      scheduler: what the scheduler's source work costs by itself
//
// and, in the same process, the whole pass: continuation+twig with 1, 2 and 4 lanes a leaf
// (gpu_scheduler, launch and wait) and the level graph (the best baseline). Every leaf payload a kernel writes is checked against the
// double reference (count exact, mass and centre within 1e-4 relative), every whole pass with
// compare_payloads, before its time is printed. Usage: floor_probe [samples=30]
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <vector>

#include "baselines/baselines.cuh"
#include "canopy/gpu_scheduler.cuh"
#include "canopy/lane_group.cuh"
#include "canopy/passes/group_multipole.cuh"
#include "canopy/passes/twig_pass.hpp"
#include "probe_common.cuh"
#include "probe_trees.cuh"

namespace {

namespace ct = probe::ct;

__global__ void read_points(const float4* p, long long n, float* sink) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  float s = 0.f;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const float4 a = __ldg(p + i), b = __ldg(p + i + stride), c = __ldg(p + i + 2 * stride), d = __ldg(p + i + 3 * stride);
    s += (a.x + a.w) + (b.x + b.w) + (c.x + c.w) + (d.x + d.w);
  }
  for (; i < n; i += stride) s += __ldg(p + i).w;
  if (s == -1.2345f) *sink = s;  // keeps the loads; never true for these points
}

// One L-lane group a leaf, leaves in Morton order (octree_ref::leaves).
template <int L>
__global__ void leaves_p2m(ct::octree_ref t, ct::multipole<float>* out) {
  const auto g = canopy::lane_group<L>::here();
  const int k = static_cast<int>((static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) / L);
  if (k >= t.leaf_count) return;
  const std::int32_t leaf = __ldg(t.leaves + k);
  const ct::multipole<float> m = ct::group_p2m(g, t.points + __ldg(t.point_begin + leaf), __ldg(t.point_count + leaf));
  ct::group_store(g, out + leaf, m);
}

// The same from the points as four arrays (x, y, z, m; a copy made once, untimed): a lane reads
// 4-byte words where neighbouring lanes' leaves are ~10 points apart, instead of 16-byte points.
struct load_soa {
  const float4* base;  // the AoS array the task's pointer points into: gives the index
  const float* x;
  const float* y;
  const float* z;
  const float* m;
  __device__ float4 operator()(const float4* p) const {
    const auto i = p - base;
    return make_float4(__ldg(x + i), __ldg(y + i), __ldg(z + i), __ldg(m + i));
  }
};

__global__ void split_points(const float4* p, long long n, float* x, float* y, float* z, float* m) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float4 v = p[i];
  x[i] = v.x;
  y[i] = v.y;
  z[i] = v.z;
  m[i] = v.w;
}

template <int L>
__global__ void leaves_p2m_soa(ct::octree_ref t, load_soa load, ct::multipole<float>* out) {
  const auto g = canopy::lane_group<L>::here();
  const int k = static_cast<int>((static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) / L);
  if (k >= t.leaf_count) return;
  const std::int32_t leaf = __ldg(t.leaves + k);
  const ct::multipole<float> m =
      ct::group_p2m_with(g, load.base + __ldg(t.point_begin + leaf), __ldg(t.point_count + leaf), load);
  ct::group_store(g, out + leaf, m);
}

// One group a source task, as the scheduler would run it, with no scheduler around it.
template <class Ops>
__global__ void run_sources(Ops ops, const canopy::task_id* sources, int count) {
  constexpr int G = Ops::group_size;
  const auto g = canopy::lane_group<G>::here();
  const int k = static_cast<int>((static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) / G);
  if (k < count) ops(__ldg(sources + k), g);
}

int blocks_for(long long items, int per_block) { return static_cast<int>((items + per_block - 1) / per_block); }

// Leaves whose payload is off: count not exact, or mass or centre beyond 1e-4 relative.
long bad_leaves(const probe::tree_case& c) {
  const std::vector<ct::multipole<float>> got = c.out.download();
  long bad = 0;
  for (std::int32_t n = 0; n < c.tree.node_count(); ++n) {
    if (c.tree.child_count[static_cast<std::size_t>(n)] != 0) continue;
    const auto& g = got[static_cast<std::size_t>(n)];
    const auto& r = c.ref[static_cast<std::size_t>(n)];
    double extent = 0;
    for (int d = 0; d < 3; ++d) extent = std::max(extent, r.hi[d] - r.lo[d]);
    bool ok = g.count == r.count && std::abs(g.mass - r.mass) <= 1e-4 * std::abs(r.mass) + 1e-30;
    for (int d = 0; d < 3; ++d) ok = ok && std::abs(g.com[d] - r.com[d]) <= 1e-4 * (extent + std::abs(r.com[d])) + 1e-30;
    bad += ok ? 0 : 1;
  }
  return bad;
}

void line(const probe::tree_case& c, double copy, const char* what, bool ok, double us, double bytes) {
  std::printf("%-22s %-30s %s %9.1f us  %7.1f GB/s  %5.1f%% of copy (its own bytes)  %5.1f%% (the pass's bytes)\n",
              c.name.c_str(), what, ok ? "ok " : "BAD", us, ok ? bytes / us / 1e3 : 0.0, ok ? 100.0 * bytes / us / 1e3 / copy : 0.0,
              ok ? c.percent_of_copy(us, copy) : 0.0);
}

void measure(probe::tree_case& c, double copy, int samples) {
  const ct::octree_ref& t = c.t;
  const double point_bytes = static_cast<double>(t.point_total) * sizeof(ct::point);
  const double leaf_bytes = point_bytes + static_cast<double>(t.leaf_count) * sizeof(ct::multipole<float>);
  std::printf("%s: %d nodes, %d leaves, %d points, depth %d\n", c.name.c_str(), t.node_count, t.leaf_count, t.point_total, t.depth);

  canopy::device_buffer<float> sink(1);
  {
    const int grid = 132 * 8;
    line(c, copy, "read points", true,
         probe::median_us([&] { read_points<<<grid, 256>>>(reinterpret_cast<const float4*>(t.points), t.point_total, sink.data()); },
                          samples),
         point_bytes);
  }
  // A kernel that writes every leaf's payload: run once on poisoned payloads, its leaves checked,
  // then timed (only when every leaf is right).
  auto leaf_kernel = [&](const std::string& what, auto launch) {
    c.poison();
    launch();
    CANOPY_CUDA_TRY(cudaDeviceSynchronize());
    const long bad = bad_leaves(c);
    line(c, copy, what.c_str(), bad == 0, bad == 0 ? probe::median_us(launch, samples) : 0.0, leaf_bytes);
    if (bad != 0) std::printf("   %ld leaves wrong\n", bad);
  };
  auto leaves = [&](auto L, const char* what) {
    constexpr int lanes = decltype(L)::value;
    leaf_kernel(what, [&] { leaves_p2m<lanes><<<blocks_for(static_cast<long long>(t.leaf_count) * lanes, 256), 256>>>(t, c.out.data()); });
  };
  leaves(std::integral_constant<int, 1>{}, "leaves L=1");
  leaves(std::integral_constant<int, 2>{}, "leaves L=2");
  leaves(std::integral_constant<int, 4>{}, "leaves L=4");
  {
    const auto n = static_cast<std::size_t>(t.point_total);
    canopy::device_buffer<float> sx(n), sy(n), sz(n), sm(n);
    const auto* p4 = reinterpret_cast<const float4*>(t.points);
    split_points<<<blocks_for(static_cast<long long>(n), 256), 256>>>(p4, t.point_total, sx.data(), sy.data(), sz.data(), sm.data());
    const load_soa soa{p4, sx.data(), sy.data(), sz.data(), sm.data()};
    auto soa_leaves = [&](auto L, const char* what) {
      constexpr int lanes = decltype(L)::value;
      leaf_kernel(what, [&] {
        leaves_p2m_soa<lanes><<<blocks_for(static_cast<long long>(t.leaf_count) * lanes, 256), 256>>>(t, soa, c.out.data());
      });
    };
    soa_leaves(std::integral_constant<int, 1>{}, "leaves SoA L=1");
    soa_leaves(std::integral_constant<int, 2>{}, "leaves SoA L=2");
  }

  const probe::device_twigs twigs(c.tree);
  const std::vector<canopy::task_id>& src = twigs.tg.graph.sources();
  canopy::device_buffer<canopy::task_id> d_src(src);
  ct::with_twig_lanes(ct::upward_lanes(c.tree), [&](auto L) {
    const auto ops = probe::twig_ops<L()>(c, twigs);
    constexpr int G = std::decay_t<decltype(ops)>::group_size;
    leaf_kernel("twig sources (" + std::to_string(src.size()) + ")", [&] {
      run_sources<<<blocks_for(static_cast<long long>(src.size()) * G, 256), 256>>>(ops, d_src.data(), static_cast<int>(src.size()));
    });
    return 0;
  });
  // The whole pass with twig tasks on 1, 2 and 4 lanes a leaf (upward_lanes picks 2 below 16
  // points a leaf on average, 4 from 16, never 1).
  canopy::gpu_scheduler s(twigs.tg.graph, canopy::scheduler_options{});
  auto pass = [&](auto L) {
    const auto ops = probe::twig_ops<decltype(L)::value>(c, twigs);
    c.poison();
    const bool ok = s.run(ops).ok() && c.valid();
    const std::string what = "continuation+twig L=" + std::to_string(decltype(L)::value) + " (run)";
    line(c, copy, what.c_str(), ok, ok ? probe::median_us([&] { (void)s.run(ops); }, samples) : 0.0, c.bytes);
  };
  pass(std::integral_constant<int, 1>{});
  pass(std::integral_constant<int, 2>{});
  pass(std::integral_constant<int, 4>{});
  canopy::bench::baseline_runner runner(c.d, c.out);
  c.poison();
  runner.run(canopy::bench::baseline_kind::level_graph);
  CANOPY_CUDA_TRY(cudaDeviceSynchronize());
  const bool ok = c.valid();
  line(c, copy, "level-graph", ok, ok ? probe::median_us([&] { runner.run(canopy::bench::baseline_kind::level_graph); }, samples) : 0.0,
       c.bytes);
}

}  // namespace

int main(int argc, char** argv) {
  const int samples = probe::positive_arg(argc, argv, 1, 30, "floor_probe", "samples");
  const double copy = canopy::bench::measure_copy_bandwidth();
  std::printf("floor_probe: copy bandwidth %.0f GB/s; stream us (events around the launch), median of %d\n", copy, samples);
  for (const std::uint32_t n : {16'000'000u, 1'000'000u}) {
    probe::tree_case c("plummer " + std::to_string(n / 1'000'000) + "M leaf 32",
                       ct::build_octree(ct::generate_plummer(n, 1), ct::build_options{32, 21}));
    measure(c, copy, samples);
  }
  for (const int depth : {8, 7, 5}) {
    probe::tree_case c = probe::complete_case(depth);
    measure(c, copy, samples);
  }
}
