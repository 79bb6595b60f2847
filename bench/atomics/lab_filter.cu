// SPDX-License-Identifier: Apache-2.0
// Seeds 003/004: filtering (stream compaction): copy the positive elements of src to dst, in any
// order. One element per thread; variants differ in how each kept element gets its slot.
//   global_atomic    one global atomicAdd per kept element
//   block_aggregate  shared-memory atomics, one global atomic per block (seed 003's
//                    filter_shared_k) via canopy::atomics::block_aggregate
//   warp_aggregated  canopy::atomics::warp_aggregated_increment under the `if` (atomicAggInc)
//   warp_reserve     canopy::atomics::warp_reserve(want = kept), the queue-push form
//   cub_select_if    cub::DeviceSelect::If (order-preserving, decoupled look-back scan)
#include <cub/device/device_select.cuh>

#include <atomic>

#include "canopy/atomics/block_aggregated.hpp"
#include "canopy/atomics/warp_aggregated.hpp"
#include "lab_common.cuh"

namespace canopy::bench::lab {

namespace {

__host__ __device__ bool kept(std::uint32_t i) { return (hash2(i, 21) & 1u) != 0; }

// Each value names its index (positive when kept), so the output can be checked as a set:
// every kept element exactly once, nothing else, in any order.
__global__ void generate(int* src, std::uint32_t n) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) src[i] = kept(i) ? static_cast<int>(i + 1) : -static_cast<int>(i + 1);
}

struct positive {
  __host__ __device__ bool operator()(int v) const { return v > 0; }
};

template <bool Count>
__global__ void global_atomic_kernel(const int* src, int* dst, std::uint32_t n, unsigned* count,
                                     unsigned long long* tally) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int v = src[i];
  if (v > 0) dst[global_ref<Count>(count, tally).fetch_add(1u, relaxed)] = v;
}

template <bool Count>
__global__ void block_aggregate_kernel(const int* src, int* dst, std::uint32_t n, unsigned* count,
                                       unsigned long long* tally) {
  __shared__ canopy::atomics::block_aggregate<unsigned>::TempStorage temp;
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  const int v = i < n ? src[i] : 0;
  const unsigned slot =
      canopy::atomics::block_aggregate<unsigned>(temp).increment_if(v > 0, global_ref<Count>(count, tally), relaxed);
  if (v > 0) dst[slot] = v;
}

template <bool Count>
__global__ void warp_aggregated_kernel(const int* src, int* dst, std::uint32_t n, unsigned* count,
                                       unsigned long long* tally) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int v = src[i];
  if (v > 0) dst[canopy::atomics::warp_aggregated_increment(global_ref<Count>(count, tally), relaxed)] = v;
}

template <bool Count>
__global__ void warp_reserve_kernel(const int* src, int* dst, std::uint32_t n, unsigned* count,
                                    unsigned long long* tally) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int v = src[i];
  const auto r = canopy::atomics::warp_reserve(global_ref<Count>(count, tally), v > 0, relaxed);
  if (v > 0) dst[r.index] = v;
}

using kernel_fn = void (*)(const int*, int*, std::uint32_t, unsigned*, unsigned long long*);

struct oracle {
  std::uint64_t kept = 0, warps_with = 0, blocks_with = 0;
  oracle& operator+=(const oracle& o) {
    kept += o.kept;
    warps_with += o.warps_with;
    blocks_with += o.blocks_with;
    return *this;
  }
};

}  // namespace

void run_filter(context& ctx, std::uint64_t size) {
  const auto n = static_cast<std::uint32_t>(size);
  if (!fits_or_skip(ctx, "filter", size, 8.0 * static_cast<double>(size))) return;
  device_buffer<int> src(size), dst(size);
  device_buffer<unsigned> count(1);
  device_buffer<int> cub_count(1);
  device_buffer<unsigned long long> tally(1);
  generate<<<blocks_for(size), block_size, 0, ctx.stream>>>(src.data(), n);
  CANOPY_CUDA_TRY(cudaGetLastError());
  std::size_t cub_temp_bytes = 0;
  CANOPY_CUDA_TRY(cub::DeviceSelect::If(nullptr, cub_temp_bytes, src.data(), dst.data(), cub_count.data(),
                                          static_cast<std::int64_t>(size), positive{}, ctx.stream));
  device_buffer<unsigned char> cub_temp(cub_temp_bytes);

  const std::uint64_t blocks = blocks_for(size);
  const oracle expect = parallel_sum<oracle>(blocks, [size](std::uint64_t b0, std::uint64_t b1) {
    oracle o;
    for (std::uint64_t b = b0; b < b1; ++b) {
      bool block_any = false;
      for (std::uint64_t w = b * block_size; w < std::min(size, (b + 1) * block_size); w += 32) {
        bool warp_any = false;
        for (std::uint64_t i = w; i < std::min(size, w + 32); ++i)
          if (kept(static_cast<std::uint32_t>(i))) {
            ++o.kept;
            warp_any = true;
          }
        o.warps_with += warp_any ? 1 : 0;
        block_any = block_any || warp_any;
      }
      o.blocks_with += block_any ? 1 : 0;
    }
    return o;
  });

  // dst is cleared before every run (0 is never a valid output), so a variant cannot pass on
  // what the previous one left behind.
  auto reset = [&](cudaStream_t s) {
    CANOPY_CUDA_TRY(cudaMemsetAsync(count.data(), 0, sizeof(unsigned), s));
    CANOPY_CUDA_TRY(cudaMemsetAsync(cub_count.data(), 0, sizeof(int), s));
    CANOPY_CUDA_TRY(cudaMemsetAsync(dst.data(), 0, dst.bytes(), s));
  };
  auto check_output = [&](std::uint64_t got) -> std::string {
    if (got != expect.kept)
      return "selected " + std::to_string(got) + " elements, expected " + std::to_string(expect.kept);
    const std::vector<int> out = dst.download();
    std::vector<unsigned char> seen(size, 0);
    std::atomic<std::uint64_t> bad{0}, first_bad{~std::uint64_t{0}};
    parallel_for(got, [&](std::uint64_t k0, std::uint64_t k1, unsigned) {
      for (std::uint64_t k = k0; k < k1; ++k) {
        const int v = out[k];
        const bool valid = v > 0 && static_cast<std::uint64_t>(v) <= size && kept(static_cast<std::uint32_t>(v - 1)) &&
                           std::atomic_ref<unsigned char>(seen[static_cast<std::size_t>(v - 1)]).exchange(1) == 0;
        if (!valid) {
          bad.fetch_add(1);
          std::uint64_t expected_first = ~std::uint64_t{0};
          first_bad.compare_exchange_strong(expected_first, k);
        }
      }
    });
    if (bad.load() == 0) return {};
    return std::to_string(bad.load()) + " output slots hold a missing, duplicated or wrong element (first at " +
           std::to_string(first_bad.load()) + ")";
  };

  auto make = [&](std::string name, bool baseline, kernel_fn plain, kernel_fn counted) {
    variant v;
    v.name = std::move(name);
    v.baseline = baseline;
    v.reset = reset;
    v.run = [&, plain](cudaStream_t s) {
      plain<<<blocks_for(size), block_size, 0, s>>>(src.data(), dst.data(), n, count.data(), nullptr);
    };
    v.check = [&]() { return check_output(download_one(count)); };
    v.counted_run = [&, counted](cudaStream_t s) -> std::uint64_t {
      reset(s);
      CANOPY_CUDA_TRY(cudaMemsetAsync(tally.data(), 0, sizeof(unsigned long long), s));
      counted<<<blocks_for(size), block_size, 0, s>>>(src.data(), dst.data(), n, count.data(), tally.data());
      CANOPY_CUDA_TRY(cudaGetLastError());
      CANOPY_CUDA_TRY(cudaStreamSynchronize(s));
      return download_one(tally);
    };
    return v;
  };
  std::vector<variant> variants;
  variants.push_back(make("global_atomic", true, global_atomic_kernel<false>, global_atomic_kernel<true>));
  variants.push_back(make("block_aggregate", false, block_aggregate_kernel<false>, block_aggregate_kernel<true>));
  variants.push_back(make("warp_aggregated", false, warp_aggregated_kernel<false>, warp_aggregated_kernel<true>));
  variants.push_back(make("warp_reserve", false, warp_reserve_kernel<false>, warp_reserve_kernel<true>));
  {
    variant v;
    v.name = "cub_select_if";
    v.reset = reset;
    v.run = [&](cudaStream_t s) {
      std::size_t bytes = cub_temp_bytes;
      CANOPY_CUDA_TRY(cub::DeviceSelect::If(cub_temp.data(), bytes, src.data(), dst.data(), cub_count.data(),
                                              static_cast<std::int64_t>(size), positive{}, s));
    };
    v.check = [&]() {
      const int got = download_one(cub_count);
      return got < 0 ? std::string("negative count") : check_output(static_cast<std::uint64_t>(got));
    };
    variants.push_back(std::move(v));
  }

  const experiment_spec spec{"filter", size, 4.0 * static_cast<double>(size) + 4.0 * static_cast<double>(expect.kept)};
  const auto counts = measure(ctx, spec, variants);
  const std::string per_warp = "lower bound, one per warp with a kept element: " + std::to_string(expect.warps_with);
  report_counts(ctx, spec, counts, "global_atomic",
                {{"global_atomic", "one per kept element: " + std::to_string(expect.kept)},
                 {"block_aggregate", "one per block with a kept element: " + std::to_string(expect.blocks_with)},
                 {"warp_aggregated", per_warp},
                 {"warp_reserve", per_warp}});
}

}  // namespace canopy::bench::lab
