// SPDX-License-Identifier: Apache-2.0
// What one dependent hop of a tree or a chain is made of, on this device, with no scheduler: the
// round trips a task that becomes ready through a dependency counter cannot avoid, each measured
// alone as a chain of N dependent steps by one warp (the rest of the GPU idle), and then together
// as the bare hop of an upward pass (load the task's record, load its 8 children's payloads,
// merge on 16 lanes, store, arrive at the parent's counter with acq_rel). Times are the chain's
// %globaltimer span over N, in ns per step; medians of 5 chains. Usage: hop_probe [steps]
//
//   l2 load        __ldcg pointer chase over 4 K lines (L2-resident after a warm pass)
//   dram load      __ldcg pointer chase over 256 MB (beyond L2: DRAM, plus TLB as it comes), each
//                  chain from another point of the cycle
//   atomic relaxed atomicAdd chain (each address from the last result), L2-resident counters
//   atomic acq_rel cuda::atomic_ref<int, thread_scope_device>::fetch_sub(acq_rel), same counters
//   store+arrive   16 lanes store a 68-byte payload, __syncwarp, lane 0 fetch_sub(acq_rel): the
//                  scheduler's arrival (the release waits for the stores)
//   bare hop       the whole hop above, entry record cold (DRAM) or warm (L2)
#include <cuda/atomic>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <vector>

#include "canopy/cuda/device_buffer.hpp"
#include "canopy/cuda/error.hpp"
#include "canopy/lane_group.cuh"
#include "canopy/passes/group_multipole.cuh"
#include "probe_common.cuh"

namespace ct = canopy::trees;

namespace {

constexpr int line_words = 32;  // one 128-byte line per step

// Pointer chase: next = ring[next * line_words]; one step a line.
__global__ void chase(const std::uint32_t* ring, std::uint32_t start, int steps, std::uint64_t* ns, std::uint32_t* sink) {
  std::uint32_t i = start;
  for (int k = 0; k < 64; ++k) i = __ldcg(ring + static_cast<std::size_t>(i) * line_words);  // warm start
  const std::uint64_t t0 = probe::global_timer_ns();
  for (int k = 0; k < steps; ++k) i = __ldcg(ring + static_cast<std::size_t>(i) * line_words);
  const std::uint64_t t1 = probe::global_timer_ns();
  *ns = t1 - t0;
  *sink = i;
}

template <bool AcqRel>
__global__ void atomic_chain(int* counters, int mask, int steps, std::uint64_t* ns, std::uint32_t* sink) {
  int i = 0;
  const std::uint64_t t0 = probe::global_timer_ns();
  for (int k = 0; k < steps; ++k) {
    int* c = counters + (static_cast<unsigned>(i) * 7919u & static_cast<unsigned>(mask)) * line_words;
    if constexpr (AcqRel) i = cuda::atomic_ref<int, cuda::thread_scope_device>(*c).fetch_sub(1, cuda::std::memory_order_acq_rel);
    else i = atomicAdd(c, 1);
  }
  const std::uint64_t t1 = probe::global_timer_ns();
  *ns = t1 - t0;
  *sink = static_cast<std::uint32_t>(i);
}

// The scheduler's arrival: the 16 lanes store m at out[slot], the group barrier orders their
// stores, lane 0 decrements counter `slot` acq_rel; every lane returns the counter's old value.
__device__ int publish_and_arrive(const canopy::lane_group<16>& g, ct::multipole<float>* out, int* counters,
                                  unsigned slot, const ct::multipole<float>& m) {
  ct::group_store(g, out + slot, m);
  g.sync();
  int got = 0;
  if (g.rank == 0)
    got = cuda::atomic_ref<int, cuda::thread_scope_device>(counters[slot * line_words]).fetch_sub(1, cuda::std::memory_order_acq_rel);
  return g.from_first(got);
}

// Lane 0 of the group writes the chain's span and its last value.
__device__ void report(const canopy::lane_group<16>& g, std::uint64_t t0, int i, std::uint64_t* ns, std::uint32_t* sink) {
  const std::uint64_t t1 = probe::global_timer_ns();
  if (g.rank == 0) {
    *ns = t1 - t0;
    *sink = static_cast<std::uint32_t>(i);
  }
}

// 16 lanes store a payload to slot k, then lane 0 arrives at counter k (acq_rel), chained through
// the atomic's result.
__global__ void store_arrive(ct::multipole<float>* out, int* counters, int mask, int steps, std::uint64_t* ns,
                             std::uint32_t* sink) {
  const auto g = canopy::lane_group<16>::here();
  if (threadIdx.x >= 16) return;
  ct::multipole<float> m = ct::multipole_identity<float>();
  int i = 0;
  const std::uint64_t t0 = probe::global_timer_ns();
  for (int k = 0; k < steps; ++k) {
    const unsigned slot = (static_cast<unsigned>(i + k) * 7919u) & static_cast<unsigned>(mask);
    m.count = static_cast<std::uint32_t>(k);
    i = publish_and_arrive(g, out, counters, slot, m);
  }
  report(g, t0, i, ns, sink);
}

// The bare hop of an upward pass on 16 lanes: the task's 16-byte record (entry = first child of 8),
// the 8 children's payloads through L2 (group_merge, one a lane on 8 of the 16), the merged payload
// stored, the parent's counter decremented acq_rel. The next task's record is chosen from the
// atomic's result, so every hop waits for the last.
__global__ void bare_hop(const int4* records, int record_mask, const ct::multipole<float>* children,
                         ct::multipole<float>* out, int* counters, int mask, int steps, std::uint64_t* ns,
                         std::uint32_t* sink) {
  const auto g = canopy::lane_group<16>::here();
  if (threadIdx.x >= 16) return;
  int i = 0;
  const std::uint64_t t0 = probe::global_timer_ns();
  for (int k = 0; k < steps; ++k) {
    const unsigned t = (static_cast<unsigned>(i + k) * 2654435761u) & static_cast<unsigned>(record_mask);
    const int4 rec = __ldg(records + t);
    const ct::multipole<float> r = ct::group_merge<16, 1>(g, children + rec.y, rec.z, ct::load_through_l2{});
    i = publish_and_arrive(g, out, counters, t & static_cast<unsigned>(mask), r);
  }
  report(g, t0, i, ns, sink);
}

// A random cycle through `lines` lines (word 0 of each names the next); `order` is the cycle.
std::vector<std::uint32_t> random_ring(std::size_t lines, std::uint32_t seed, std::vector<std::uint32_t>* cycle = nullptr) {
  std::vector<std::uint32_t> order(lines);
  std::iota(order.begin(), order.end(), 0u);
  std::shuffle(order.begin() + 1, order.end(), std::mt19937(seed));
  std::vector<std::uint32_t> ring(lines * line_words, 0u);
  for (std::size_t k = 0; k < lines; ++k) ring[order[k] * line_words] = order[(k + 1) % lines];
  if (cycle != nullptr) *cycle = std::move(order);
  return ring;
}

// launch(ns, sink, rep): chain number `rep` (0 warms and is not counted).
template <class Launch>
double ns_per_step(Launch&& launch, int steps) {
  canopy::device_buffer<std::uint64_t> ns(1);
  canopy::device_buffer<std::uint32_t> sink(1);
  std::vector<double> v;
  for (int rep = 0; rep < 6; ++rep) {
    launch(ns.data(), sink.data(), rep);
    CANOPY_CUDA_TRY(cudaDeviceSynchronize());
    if (rep > 0) v.push_back(static_cast<double>(ns.download()[0]) / steps);  // the first warms
  }
  return probe::median(v);
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 20000;
  if (steps < 1) {
    std::fprintf(stderr, "hop_probe: steps must be a positive integer (got '%s')\n", argv[1]);
    return 2;
  }
  cudaDeviceProp prop{};
  CANOPY_CUDA_TRY(cudaGetDeviceProperties(&prop, 0));
  std::printf("hop_probe: %s, %d steps a chain, ns per step (median of 5 chains)\n", prop.name, steps);

  const auto small = random_ring(4096, 1);
  canopy::device_buffer<std::uint32_t> l2ring(small);
  std::printf("  l2 load          %8.1f\n", ns_per_step([&](auto* ns, auto* s, int) { chase<<<1, 1>>>(l2ring.data(), 0, steps, ns, s); }, steps));
  {
    // Each chain starts elsewhere on the cycle, so that no chain finds lines an earlier one left in L2.
    std::vector<std::uint32_t> cycle;
    const auto big = random_ring((256u << 20) / 128, 2, &cycle);
    canopy::device_buffer<std::uint32_t> dram(big);
    std::printf("  dram load        %8.1f\n", ns_per_step([&](auto* ns, auto* s, int rep) {
      chase<<<1, 1>>>(dram.data(), cycle[(static_cast<std::size_t>(rep) * 300007u) % cycle.size()], steps, ns, s);
    }, steps));
  }
  constexpr int counter_count = 4096;
  canopy::device_buffer<int> counters(std::vector<int>(counter_count * line_words, 1 << 30));
  std::printf("  atomic relaxed   %8.1f\n", ns_per_step([&](auto* ns, auto* s, int) { atomic_chain<false><<<1, 1>>>(counters.data(), counter_count - 1, steps, ns, s); }, steps));
  std::printf("  atomic acq_rel   %8.1f\n", ns_per_step([&](auto* ns, auto* s, int) { atomic_chain<true><<<1, 1>>>(counters.data(), counter_count - 1, steps, ns, s); }, steps));
  canopy::device_buffer<ct::multipole<float>> out(counter_count);
  std::printf("  store+arrive     %8.1f\n", ns_per_step([&](auto* ns, auto* s, int) { store_arrive<<<1, 32>>>(out.data(), counters.data(), counter_count - 1, steps, ns, s); }, steps));

  // Children: 64 K payloads (4.4 MB, L2-resident once read); records: cold (16 M records, 256 MB)
  // or warm (4 K records, 64 KB).
  constexpr int child_count = 1 << 16;
  std::vector<ct::multipole<float>> kids(child_count);
  std::mt19937 rng(3);
  for (auto& m : kids) {
    m = ct::multipole_identity<float>();
    m.count = 8;
    m.mass = 1.f;
    for (int d = 0; d < 3; ++d) {
      m.com[d] = static_cast<float>(rng() % 1000) * 1e-3f;
      m.lo[d] = m.com[d] - 0.01f;
      m.hi[d] = m.com[d] + 0.01f;
    }
  }
  canopy::device_buffer<ct::multipole<float>> children(kids);
  for (const int records_log2 : {12, 24}) {
    const std::size_t n = std::size_t{1} << records_log2;
    std::vector<int4> recs(n);
    for (std::size_t k = 0; k < n; ++k) recs[k] = make_int4(0, static_cast<int>((rng() % (child_count / 8)) * 8), 8, 0);
    canopy::device_buffer<int4> records(recs);
    std::printf("  bare hop (%s) %8.1f\n", records_log2 == 12 ? "warm" : "cold",
                ns_per_step([&](auto* ns, auto* s, int) {
                  bare_hop<<<1, 32>>>(records.data(), static_cast<int>(n - 1), children.data(), out.data(), counters.data(),
                                      counter_count - 1, steps, ns, s);
                }, steps));
  }
  return 0;
}
