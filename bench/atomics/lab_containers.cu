// SPDX-License-Identifier: Apache-2.0
// Seed 000: count the containers whose float sum exceeds a limit. One thread per container
// (containers in CSR form: offsets + values). Variants differ only in how the count is gathered:
//   naive            one global atomic per container over the limit
//   seed_block_array the seed's code: a flag per thread in shared memory, thread 0 sums them and
//                    issues one global atomicAdd per block (even when the sum is 0)
//   block_aggregate  canopy::atomics::block_aggregate (shared atomics, one global per block)
//   warp_aggregated  canopy::atomics::warp_aggregated_increment under the `if` (one per warp)
#include <cub/device/device_scan.cuh>

#include <sstream>

#include "canopy/atomics/block_aggregated.hpp"
#include "canopy/atomics/warp_aggregated.hpp"
#include "lab_common.cuh"

namespace canopy::bench::lab {

namespace {

constexpr float limit = 2.0f;
constexpr std::uint32_t max_per_container = 8;  // 0..7 floats each, 3.5 on average

__host__ __device__ std::uint32_t element_count(std::uint32_t container) { return hash2(container, 1) % max_per_container; }

// Multiples of 0.5 in [-4, 4]: every partial sum of at most 7 is exact in float, so the device
// sum and the host oracle agree bit for bit whatever the compiler does.
__host__ __device__ float element(std::uint32_t container, std::uint32_t j) {
  return 0.5f * static_cast<float>(static_cast<int>(hash2(container, 100 + j) % 17) - 8);
}

__global__ void count_elements(std::uint32_t* counts, std::uint32_t n) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) counts[i] = element_count(i);
  if (i == n) counts[n] = 0;
}

__global__ void fill_elements(const std::uint32_t* offsets, float* values, std::uint32_t n) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  for (std::uint32_t k = offsets[i], j = 0; k < offsets[i + 1]; ++k, ++j) values[k] = element(i, j);
}

__device__ __forceinline__ bool over_limit(const std::uint32_t* offsets, const float* values, std::uint32_t i) {
  float sum = 0.0f;
  for (std::uint32_t k = offsets[i]; k < offsets[i + 1]; ++k) sum += values[k];
  return sum > limit;
}

template <bool Count>
__global__ void naive_kernel(const std::uint32_t* offsets, const float* values, std::uint32_t n, unsigned* result,
                             unsigned long long* tally) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  if (over_limit(offsets, values, i)) global_ref<Count>(result, tally).fetch_add(1u, relaxed);
}

template <bool Count>
__global__ void seed_block_array_kernel(const std::uint32_t* offsets, const float* values, std::uint32_t n,
                                        unsigned* result, unsigned long long* tally) {
  __shared__ unsigned flags[block_size];
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  flags[threadIdx.x] = i < n && over_limit(offsets, values, i) ? 1u : 0u;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned s = 0;
    for (int t = 0; t < block_size; ++t) s += flags[t];
    global_ref<Count>(result, tally).fetch_add(s, relaxed);
  }
}

template <bool Count>
__global__ void block_aggregate_kernel(const std::uint32_t* offsets, const float* values, std::uint32_t n,
                                       unsigned* result, unsigned long long* tally) {
  __shared__ canopy::atomics::block_aggregate<unsigned>::TempStorage temp;
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  const bool over = i < n && over_limit(offsets, values, i);  // every thread joins the collective
  canopy::atomics::block_aggregate<unsigned>(temp).increment_if(over, global_ref<Count>(result, tally), relaxed);
}

template <bool Count>
__global__ void warp_aggregated_kernel(const std::uint32_t* offsets, const float* values, std::uint32_t n,
                                       unsigned* result, unsigned long long* tally) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  if (over_limit(offsets, values, i))
    canopy::atomics::warp_aggregated_increment(global_ref<Count>(result, tally), relaxed);
}

using kernel_fn = void (*)(const std::uint32_t*, const float*, std::uint32_t, unsigned*, unsigned long long*);

struct oracle {
  std::uint64_t over = 0;         // containers over the limit
  std::uint64_t warps_with = 0;   // warps (32 consecutive containers) with at least one
  std::uint64_t blocks_with = 0;  // blocks (block_size consecutive) with at least one
  std::uint64_t blocks = 0;
  oracle& operator+=(const oracle& o) {
    over += o.over;
    warps_with += o.warps_with;
    blocks_with += o.blocks_with;
    blocks += o.blocks;
    return *this;
  }
};

oracle host_oracle(std::uint64_t n) {
  const std::uint64_t blocks = (n + block_size - 1) / block_size;
  return parallel_sum<oracle>(blocks, [n](std::uint64_t b0, std::uint64_t b1) {
    oracle o;
    for (std::uint64_t b = b0; b < b1; ++b) {
      bool block_any = false;
      for (std::uint64_t w = b * block_size; w < std::min(n, (b + 1) * block_size); w += 32) {
        bool warp_any = false;
        for (std::uint64_t i = w; i < std::min(n, w + 32); ++i) {
          const auto c = static_cast<std::uint32_t>(i);
          float sum = 0.0f;
          for (std::uint32_t j = 0; j < element_count(c); ++j) sum += element(c, j);
          if (sum > limit) {
            ++o.over;
            warp_any = true;
          }
        }
        o.warps_with += warp_any ? 1 : 0;
        block_any = block_any || warp_any;
      }
      o.blocks_with += block_any ? 1 : 0;
      ++o.blocks;
    }
    return o;
  });
}

}  // namespace

void run_containers(context& ctx, std::uint64_t size) {
  const auto n = static_cast<std::uint32_t>(size);
  // offsets (n+1) + scan input (n+1) + values (3.5 per container on average, 10% slack)
  if (!fits_or_skip(ctx, "containers", size, 8.0 * (size + 1) + 4.0 * 3.5 * 1.1 * size)) return;

  device_buffer<std::uint32_t> offsets(size + 1);
  device_buffer<float> values;
  {
    device_buffer<std::uint32_t> counts(size + 1);
    count_elements<<<blocks_for(size + 1), block_size, 0, ctx.stream>>>(counts.data(), n);
    CANOPY_CUDA_TRY(cudaGetLastError());
    std::size_t temp_bytes = 0;
    CANOPY_CUDA_TRY(cub::DeviceScan::ExclusiveSum(nullptr, temp_bytes, counts.data(), offsets.data(),
                                                    static_cast<std::int64_t>(size + 1), ctx.stream));
    device_buffer<unsigned char> temp(temp_bytes);
    CANOPY_CUDA_TRY(cub::DeviceScan::ExclusiveSum(temp.data(), temp_bytes, counts.data(), offsets.data(),
                                                    static_cast<std::int64_t>(size + 1), ctx.stream));
    CANOPY_CUDA_TRY(cudaStreamSynchronize(ctx.stream));
  }
  const std::uint32_t total = download_one(offsets, size);
  values = device_buffer<float>(total);
  fill_elements<<<blocks_for(size), block_size, 0, ctx.stream>>>(offsets.data(), values.data(), n);
  CANOPY_CUDA_TRY(cudaGetLastError());

  const oracle expect = host_oracle(size);
  device_buffer<unsigned> result(1);
  device_buffer<unsigned long long> tally(1);

  auto make = [&](std::string name, bool baseline, kernel_fn plain, kernel_fn counted) {
    variant v;
    v.name = std::move(name);
    v.baseline = baseline;
    v.reset = [&](cudaStream_t s) { CANOPY_CUDA_TRY(cudaMemsetAsync(result.data(), 0, sizeof(unsigned), s)); };
    v.run = [&, plain](cudaStream_t s) {
      plain<<<blocks_for(size), block_size, 0, s>>>(offsets.data(), values.data(), n, result.data(), nullptr);
    };
    v.check = [&]() -> std::string {
      const unsigned got = download_one(result);
      if (got == expect.over) return {};
      return "counted " + std::to_string(got) + " containers over the limit, expected " + std::to_string(expect.over);
    };
    v.counted_run = [&, counted](cudaStream_t s) -> std::uint64_t {
      CANOPY_CUDA_TRY(cudaMemsetAsync(result.data(), 0, sizeof(unsigned), s));
      CANOPY_CUDA_TRY(cudaMemsetAsync(tally.data(), 0, sizeof(unsigned long long), s));
      counted<<<blocks_for(size), block_size, 0, s>>>(offsets.data(), values.data(), n, result.data(), tally.data());
      CANOPY_CUDA_TRY(cudaGetLastError());
      CANOPY_CUDA_TRY(cudaStreamSynchronize(s));
      return download_one(tally);
    };
    return v;
  };
  std::vector<variant> variants;
  variants.push_back(make("naive", true, naive_kernel<false>, naive_kernel<true>));
  variants.push_back(make("seed_block_array", false, seed_block_array_kernel<false>, seed_block_array_kernel<true>));
  variants.push_back(make("block_aggregate", false, block_aggregate_kernel<false>, block_aggregate_kernel<true>));
  variants.push_back(make("warp_aggregated", false, warp_aggregated_kernel<false>, warp_aggregated_kernel<true>));

  const experiment_spec spec{"containers", size, 4.0 * (static_cast<double>(size) + 1) + 4.0 * total};
  const auto counts = measure(ctx, spec, variants);
  report_counts(ctx, spec, counts, "naive",
                {{"naive", "one per container over the limit: " + std::to_string(expect.over)},
                 {"seed_block_array", "one per block: " + std::to_string(expect.blocks)},
                 {"block_aggregate", "one per block with a hit: " + std::to_string(expect.blocks_with)},
                 {"warp_aggregated", "lower bound, one per warp with a hit: " + std::to_string(expect.warps_with)}});
}

}  // namespace canopy::bench::lab
