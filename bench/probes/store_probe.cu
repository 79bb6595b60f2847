// SPDX-License-Identifier: Apache-2.0
// Tuning probe (not part of any suite): twig tasks whose 8 leaf payloads are staged in shared
// memory and written by the whole group as one contiguous block (8 x 17 words, 16 lanes per
// store instruction), against the library's twig ops (each leaf's 2 lanes write its own payload:
// 9 store instructions that each touch 8 partly written sectors; 16 tasks per group, as the
// library runs them) and the same ops with 8 tasks per group. Blocks of 128 threads only (static
// shared memory for 8 groups). Validated against the double reference before timing, on the
// sweep trees (probe_trees.cuh).
// Usage: store_probe [max_depth=8]   (below 8 the depth-8 tree is left out)
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "canopy/gpu_scheduler.cuh"
#include "canopy/passes/group_multipole.cuh"
#include "canopy/passes/twig_pass.hpp"
#include "probe_common.cuh"
#include "probe_trees.cuh"

namespace ct = canopy::trees;

template <int TPG>
struct twig_tpg : ct::twig_upward_ops<float, 2> {
  static constexpr int tasks_per_group = TPG;
};

template <int TPG>
struct twig_staged {
  static constexpr int group_size = 16;
  static constexpr int tasks_per_group = TPG;
  ct::twig_upward_ops<float, 2> base;
  __host__ __device__ void operator()(canopy::task_id t) const { base(t); }
  __device__ void prefetch(canopy::task_id t, canopy::prefetch_stage s) const { base.prefetch(t, s); }
  template <int G>
  __device__ void operator()(canopy::task_id t, const canopy::lane_group<G>& g) const {
    if constexpr (G != 16) {
      base(t, g);
    } else {
      // Only twigs are staged; plain nodes and leaf groups run as twig_upward_ops does.
      if (!base.tasks[t].is_twig()) { base(t, g); return; }
      const std::int32_t entry = __ldg(&base.tasks[t].entry);
      constexpr int L = 2;
      __shared__ std::uint32_t stage[8][8 * 17];  // 128 threads: 8 groups
      std::uint32_t* mine = stage[threadIdx.x / G];
      const std::int32_t node = ~entry, first = __ldg(base.arrays.first_child + node), children = __ldg(base.arrays.child_count + node);
      const int c = g.rank / L;
      ct::multipole<float> r = ct::multipole_identity<float>();
      g.sync();  // the group's previous task has copied its stage out
      if (c < children) {
        const canopy::lane_group<L> sub = canopy::lane_group<L>::here();
        r = ct::group_p2m(sub, base.arrays.points + __ldg(base.arrays.point_begin + first + c), __ldg(base.arrays.point_count + first + c));
        [&]<int... B>(std::integer_sequence<int, B...>) {
          (([&] {
             const int k = B * L + sub.rank;
             const std::uint32_t v = ct::multipole_word_at<B * L, L>(r, k);
             if (k < 17) mine[c * 17 + k] = v;
           }()), ...);
        }(std::make_integer_sequence<int, 9>{});
      }
      g.sync();
      auto* dst = reinterpret_cast<std::uint32_t*>(base.arrays.payload + first);
      for (int k = g.rank; k < children * 17; k += G) dst[k] = mine[k];
      ct::group_store(g, base.arrays.payload + node, ct::group_combine<L>(g, r));
    }
  }
};

int main(int argc, char** argv) {
  probe::for_each_sweep_case(argc > 1 ? std::atoi(argv[1]) : 8, [](probe::tree_case& c, double copy) {
    const probe::device_twigs twigs(c.tree);
    const ct::twig_upward_ops<float, 2> base = probe::twig_ops<2>(c, twigs);
    auto go = [&](const char* what, auto ops, canopy::mode m) {
      canopy::scheduler_options o;
      o.threads_per_block = 128;
      o.mode = m;
      canopy::gpu_scheduler s(twigs.tg.graph, o);
      c.poison();
      const auto r = s.run(ops);
      const bool ok = r.ok() && c.valid();
      const double us = ok ? probe::median_us([&] { s.run(ops); }, c.reps) : -1;
      std::printf("%-20s %-26s %-13s %s %9.1f us  %5.1f%% of copy\n", c.name.c_str(), what, canopy::to_string(m).data(),
                  ok ? "ok " : "BAD", us, ok ? c.percent_of_copy(us, copy) : 0.0);
    };
    for (auto m : {canopy::mode::continuation, canopy::mode::lockfree_tree}) {
      go("twig (library, tpg 16)", base, m);
      go("twig tpg 8", twig_tpg<8>{base}, m);
      go("twig staged tpg 8", twig_staged<8>{base}, m);
      go("twig staged tpg 16", twig_staged<16>{base}, m);
    }
  });
}
