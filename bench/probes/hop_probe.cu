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
// and the arrival's memory orders (what arrive_each in canopy/detail/dependency.hpp rests on),
// each a chain as above:
//   atomic release         fetch_sub(release): what an arrival that is not the last one needs
//   atomic rel + acq fence fetch_sub(release), then atomic_thread_fence(acquire): the last arriver
//   store+arrive rel(+acq) store+arrive with those two orders instead of acq_rel
//   2 arrivals acq_rel     a DAG task's two successors resolved one after the other, acq_rel each
//   2 arrivals pipelined   one release fence, both relaxed fetch_subs issued together, one acquire
//                          fence: what arrive_each does for a lane with several successors
//   2 arrivals, 2 lanes    lanes 0 and 1 each arrive at one counter acq_rel, together: what a
//                          climbing lane group does with a DAG task's successors
//   l1 reload after X      a line brought into L1 by __ldg, loaded again by __ldg after each atomic
//                          X: whether X's acquire drops it from the SM's L1 (an L2 round trip).
//                          The read-only path only; plain loads were not measured
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

// How an arrival orders memory: relaxed (no order), acq_rel (the scheduler's single arrival),
// release (an arrival that is not the last), release then an acquire fence (the last).
enum class order { relaxed, acq_rel, release, release_acquire };

__device__ __forceinline__ int arrive_as(order o, int* c) {
  cuda::atomic_ref<int, cuda::thread_scope_device> a(*c);
  switch (o) {
    case order::relaxed: return atomicAdd(c, 1);
    case order::acq_rel: return a.fetch_sub(1, cuda::std::memory_order_acq_rel);
    case order::release: return a.fetch_sub(1, cuda::std::memory_order_release);
    default: {
      const int v = a.fetch_sub(1, cuda::std::memory_order_release);
      cuda::atomic_thread_fence(cuda::std::memory_order_acquire, cuda::thread_scope_device);
      return v;
    }
  }
}

template <order O>
__global__ void atomic_chain(int* counters, int mask, int steps, std::uint64_t* ns, std::uint32_t* sink) {
  int i = 0;
  const std::uint64_t t0 = probe::global_timer_ns();
  for (int k = 0; k < steps; ++k) {
    int* c = counters + (static_cast<unsigned>(i) * 7919u & static_cast<unsigned>(mask)) * line_words;
    i = arrive_as(O, c);
  }
  const std::uint64_t t1 = probe::global_timer_ns();
  *ns = t1 - t0;
  *sink = static_cast<std::uint32_t>(i);
}

// A DAG task's two successors: acq_rel arrivals one after the other (Pipelined false), or one
// release fence, both relaxed fetch_subs issued before either result is used, one acquire fence.
template <bool Pipelined>
__global__ void two_arrivals(int* counters, int mask, int steps, std::uint64_t* ns, std::uint32_t* sink) {
  int i = 0;
  const std::uint64_t t0 = probe::global_timer_ns();
  for (int k = 0; k < steps; ++k) {
    int* c0 = counters + (static_cast<unsigned>(i) * 7919u & static_cast<unsigned>(mask)) * line_words;
    int* c1 = counters + ((static_cast<unsigned>(i) * 7919u + 977u) & static_cast<unsigned>(mask)) * line_words;
    if constexpr (Pipelined) {
      cuda::atomic_thread_fence(cuda::std::memory_order_release, cuda::thread_scope_device);
      const int a = cuda::atomic_ref<int, cuda::thread_scope_device>(*c0).fetch_sub(1, cuda::std::memory_order_relaxed);
      const int b = cuda::atomic_ref<int, cuda::thread_scope_device>(*c1).fetch_sub(1, cuda::std::memory_order_relaxed);
      cuda::atomic_thread_fence(cuda::std::memory_order_acquire, cuda::thread_scope_device);
      i = a + b;
    } else {
      const int a = arrive_as(order::acq_rel, c0);
      i = a + arrive_as(order::acq_rel, c1);
    }
  }
  const std::uint64_t t1 = probe::global_timer_ns();
  *ns = t1 - t0;
  *sink = static_cast<std::uint32_t>(i);
}

// Two lanes, one acq_rel arrival each, at the same time; the chain goes on from both results.
__global__ void two_lanes(int* counters, int mask, int steps, std::uint64_t* ns, std::uint32_t* sink) {
  const int lane = static_cast<int>(threadIdx.x);
  if (lane >= 2) return;
  int i = 0;
  const std::uint64_t t0 = probe::global_timer_ns();
  for (int k = 0; k < steps; ++k) {
    int* c = counters + ((static_cast<unsigned>(i) * 7919u + static_cast<unsigned>(lane) * 977u) & static_cast<unsigned>(mask)) * line_words;
    const int v = arrive_as(order::acq_rel, c);
    i = v + __shfl_xor_sync(0x3u, v, 1);
  }
  const std::uint64_t t1 = probe::global_timer_ns();
  if (lane == 0) {
    *ns = t1 - t0;
    *sink = static_cast<std::uint32_t>(i);
  }
}

// An arrival, then a load of one of 8 lines that an earlier pass brought into L1 (__ldg), its
// value choosing the next counter: per step the arrival plus an L1 hit (~30 ns) or, when the
// arrival's acquire invalidated L1, an L2 round trip.
template <order O>
__global__ void l1_after(const std::uint32_t* lines, int* counters, int mask, int steps, std::uint64_t* ns,
                         std::uint32_t* sink) {
  std::uint32_t v = 0;
  for (int k = 0; k < 8; ++k) v += __ldg(lines + k * line_words);  // into L1
  int i = static_cast<int>(v);
  const std::uint64_t t0 = probe::global_timer_ns();
  for (int k = 0; k < steps; ++k) {
    int* c = counters + (static_cast<unsigned>(i) * 7919u & static_cast<unsigned>(mask)) * line_words;
    const int got = arrive_as(O, c);
    i = got + static_cast<int>(__ldg(lines + (static_cast<unsigned>(got) & 7u) * line_words));
  }
  const std::uint64_t t1 = probe::global_timer_ns();
  *ns = t1 - t0;
  *sink = static_cast<std::uint32_t>(i);
}

// The scheduler's arrival: the 16 lanes store m at out[slot], the group barrier orders their
// stores, lane 0 decrements counter `slot` acq_rel; every lane returns the counter's old value.
template <order O = order::acq_rel>
__device__ int publish_and_arrive(const canopy::lane_group<16>& g, ct::multipole<float>* out, int* counters,
                                  unsigned slot, const ct::multipole<float>& m) {
  ct::group_store(g, out + slot, m);
  g.sync();
  int got = 0;
  if (g.rank == 0) got = arrive_as(O, counters + slot * line_words);
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

// 16 lanes store a payload to slot k, then lane 0 arrives at counter k (order O), chained through
// the atomic's result.
template <order O>
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
    i = publish_and_arrive<O>(g, out, counters, slot, m);
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
  const int steps = probe::positive_arg(argc, argv, 1, 20000, "hop_probe", "steps");
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
  const int cmask = counter_count - 1;
  auto chain_of = [&](const char* what, auto kernel, int threads) {
    std::printf("  %-22s %8.1f\n", what,
                ns_per_step([&](auto* ns, auto* s, int) { kernel<<<1, threads>>>(counters.data(), cmask, steps, ns, s); }, steps));
  };
  chain_of("atomic relaxed", atomic_chain<order::relaxed>, 1);
  chain_of("atomic acq_rel", atomic_chain<order::acq_rel>, 1);
  chain_of("atomic release", atomic_chain<order::release>, 1);
  chain_of("atomic rel + acq fence", atomic_chain<order::release_acquire>, 1);
  chain_of("2 arrivals acq_rel", two_arrivals<false>, 1);
  chain_of("2 arrivals pipelined", two_arrivals<true>, 1);
  chain_of("2 arrivals, 2 lanes", two_lanes, 32);
  {
    canopy::device_buffer<std::uint32_t> lines(std::vector<std::uint32_t>(8 * line_words, 0u));
    auto l1_of = [&](const char* what, auto kernel) {
      std::printf("  %-22s %8.1f\n", what, ns_per_step([&](auto* ns, auto* s, int) {
        kernel<<<1, 1>>>(lines.data(), counters.data(), cmask, steps, ns, s);
      }, steps));
    };
    l1_of("l1 reload after relaxed", l1_after<order::relaxed>);
    l1_of("l1 reload after acq_rel", l1_after<order::acq_rel>);
    l1_of("l1 reload after release", l1_after<order::release>);
    l1_of("l1 reload after rel+acq", l1_after<order::release_acquire>);
  }
  canopy::device_buffer<ct::multipole<float>> out(counter_count);
  auto store_arrive_of = [&](const char* what, auto kernel) {
    std::printf("  %-22s %8.1f\n", what, ns_per_step([&](auto* ns, auto* s, int) {
      kernel<<<1, 32>>>(out.data(), counters.data(), cmask, steps, ns, s);
    }, steps));
  };
  store_arrive_of("store+arrive acq_rel", store_arrive<order::acq_rel>);
  store_arrive_of("store+arrive release", store_arrive<order::release>);
  store_arrive_of("store+arrive rel+acq", store_arrive<order::release_acquire>);

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
