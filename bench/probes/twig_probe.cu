// Tuning probe (not part of the suite): node tasks (upward_pass.hpp) against twig tasks
// (twig_pass.hpp) and the baselines, on the trees of probe_trees.hpp; every result is
// validated against the double reference before it is timed (warm medians, CUDA events around
// run(), i.e. launch and wait). Build after the gpu preset:
//   nvcc -O3 -std=c++20 --expt-relaxed-constexpr -arch=sm_90 -Xcompiler -static-libstdc++ \
//     -Xcompiler -static-libgcc -Iruntime/include -Itrees/include -Ibench tools/dev/twig_probe.cu \
//     build/gpu/bench/baselines/libcanopy_bench_baselines.a build/gpu/trees/libcanopy_trees.a \
//     build/gpu/runtime/libcanopy_runtime.a -o build/gpu/twig_probe     # then: twig_probe [max_depth]
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>
#include "baselines/baselines.cuh"
#include "common/gpu_timing.cuh"
#include "canopy/gpu_scheduler.cuh"
#include "canopy/trees/device_octree.cuh"
#include "canopy/trees/generators.hpp"
#include "canopy/trees/reference.hpp"
#include "canopy/trees/twig_pass.hpp"
#include "canopy/trees/upward_pass.hpp"
#include "probe_timing.cuh"
#include "probe_trees.cuh"

namespace ct = canopy::trees;

int main(int argc, char** argv) {
  for_each_probe_case(argc, argv, [](probe_case& c, double copy) {
    auto& [name, tree, ref, d, out, t, bytes, reps] = c;
    auto report = [&](const std::string& what, bool ok, double us) {
      std::printf("%-20s %-34s %s %10.1f us  %5.1f%% of copy\n", name.c_str(), what.c_str(), ok ? "ok " : "BAD", us,
                  100.0 * bytes / (us * 1e-6) / 1e9 / copy);
    };
    auto check = [&] { return ct::compare_payloads<float>(tree, out.download(), ref).within_tolerance; };
    auto poison = [&] { cudaMemset(out.data(), 0xff, sizeof(ct::multipole<float>) * tree.node_count()); };
    {
      canopy::bench::baseline_runner runner(d, out);
      for (auto k : canopy::bench::all_baseline_kinds) {
        poison();
        runner.run(k); cudaDeviceSynchronize();
        const bool ok = check();
        report(std::string(canopy::bench::to_string(k)), ok, median_us([&] { runner.run(k); cudaStreamSynchronize(nullptr); }, reps));
      }
    }
    const auto modes = {canopy::mode::lockfree_tree, canopy::mode::lockfree, canopy::mode::continuation};
    {
      canopy::gpu_scheduler s(ct::make_upward_graph(tree), canopy::scheduler_options{});
      ct::with_upward_lanes(ct::upward_lanes(tree), [&](auto L) {
        const ct::upward_ops<float, L()> ops{t.points, t.first_child, t.child_count, t.point_begin, t.point_count, out.data()};
        for (auto m : modes) {
          s.set_mode(m);
          poison();
          const auto r = s.run(ops);
          const bool ok = r.ok() && check();
          report("node tasks " + std::string(canopy::to_string(m)) + " L" + std::to_string(L()), ok,
                 ok ? median_us([&] { s.run(ops); }, reps) : -1);
        }
        return 0;
      });
    }
    {
      const ct::twig_graph tg = ct::make_twig_graph(tree);
      const device_twig_tasks uploaded(tg.tasks);
      ct::twig_task* const tasks = uploaded.data;
      std::printf("%-20s twig graph: %d tasks (%d twigs) for %d nodes\n", name.c_str(), tg.graph.task_count(), tg.twig_count,
                  tree.node_count());
      for (int threads : {128, 256, 512}) {
        canopy::scheduler_options o; o.threads_per_block = threads;
        canopy::gpu_scheduler s(tg.graph, o);
        ct::with_twig_lanes(ct::upward_lanes(tree), [&](auto L) {
          const ct::twig_upward_ops<float, L()> ops{tasks, t.points, t.first_child, t.child_count, t.point_begin,
                                                    t.point_count, out.data()};
          for (auto m : modes) {
            s.set_mode(m);
            poison();
            const auto r = s.run(ops);
            const bool ok = r.ok() && check();
            report("twig tasks " + std::string(canopy::to_string(m)) + " L" + std::to_string(L()) + " T" + std::to_string(threads),
                   ok, ok ? median_us([&] { s.run(ops); }, reps) : -1);
            if (!r.ok()) std::printf("   %s\n", r.message.c_str());
          }
          return 0;
        });
      }
      if (tree.node_count() < 100000) {
        // A small tree: does a smaller grid (a cheaper launch) pay?
        for (int threads : {128, 256})
          for (int blocks : {33, 66, 132, 264}) {
            canopy::scheduler_options o; o.threads_per_block = threads; o.blocks = blocks;
            canopy::gpu_scheduler s(tg.graph, o);
            s.set_mode(canopy::mode::continuation);
            ct::with_twig_lanes(ct::upward_lanes(tree), [&](auto L) {
              const ct::twig_upward_ops<float, L()> ops{tasks, t.points, t.first_child, t.child_count, t.point_begin,
                                                        t.point_count, out.data()};
              poison();
              const auto r = s.run(ops);
              const bool ok = r.ok() && check();
              report("twig continuation T" + std::to_string(threads) + " B" + std::to_string(blocks), ok,
                     ok ? median_us([&] { s.run(ops); }, reps) : -1);
              return 0;
            });
          }
      }
    }
  });
}
