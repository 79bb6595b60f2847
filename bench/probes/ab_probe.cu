// Tuning probe (not part of the suite): the twig pass alone, for A/B runs of two builds of the
// runtime headers in one device call: continuation and lockfree-tree over twig tasks at 128 and
// 256 threads on the probe trees (depth 5 with 200 samples, its spread between processes being
// ~3 us). Validated against the double reference before timing; warm medians of CUDA-event
// samples around run() (launch and wait). Build like twig_probe.cu; `ab_probe [max_depth]`.
#include <cuda_runtime.h>
#include <cstdio>
#include <string>
#include "common/gpu_timing.cuh"
#include "canopy/gpu_scheduler.cuh"
#include "canopy/trees/device_octree.cuh"
#include "canopy/trees/generators.hpp"
#include "canopy/trees/reference.hpp"
#include "canopy/trees/twig_pass.hpp"
#include "probe_timing.cuh"
#include "probe_trees.cuh"

namespace ct = canopy::trees;

int main(int argc, char** argv) {
  for_each_probe_case(argc, argv, [](probe_case& c, double copy) {
    auto& [name, tree, ref, d, out, t, bytes, reps] = c;
    const probe_twigs twigs(tree);
    ct::twig_task* const tasks = twigs.uploaded.data;
    const int samples = tree.node_count() < 100000 ? 200 : reps;
    for (int threads : {128, 256}) {
      canopy::scheduler_options o;
      o.threads_per_block = threads;
      canopy::gpu_scheduler s(twigs.tg.graph, o);
      ct::with_twig_lanes(ct::upward_lanes(tree), [&](auto L) {
        const ct::twig_upward_ops<float, L()> ops{tasks, t.points, t.first_child, t.child_count, t.point_begin,
                                                  t.point_count, out.data()};
        for (auto m : {canopy::mode::continuation, canopy::mode::lockfree_tree}) {
          s.set_mode(m);
          cudaMemset(out.data(), 0xff, sizeof(ct::multipole<float>) * tree.node_count());
          const auto r = s.run(ops);
          const bool ok = r.ok() && ct::compare_payloads<float>(tree, out.download(), ref).within_tolerance;
          const double us = ok ? median_us([&] { s.run(ops); }, samples) : -1;
          std::printf("%-20s twig %-13s T%d %s %9.1f us  %5.1f%% of copy\n", name.c_str(),
                      std::string(canopy::to_string(m)).c_str(), threads, ok ? "ok " : "BAD", us,
                      100.0 * bytes / (us * 1e-6) / 1e9 / copy);
        }
        return 0;
      });
    }
  });
}
