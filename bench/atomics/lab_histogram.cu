// SPDX-License-Identifier: Apache-2.0
// A 256-bin histogram of bytes. The input is image-like: 3/4 of the elements follow a smooth
// gradient (runs of 4096 equal values), 1/4 are noise, so neighbouring lanes often share a bin.
// Own kernels use the same grid-stride launch (a few blocks per SM) so that per-block work is
// large enough for per-block histograms to pay off.
//   global_atomic               one global atomicAdd per element
//   warp_reduce_by_key          canopy::atomics::warp_reduce_by_key_add into the global bins
//   block_shared                per-block shared-memory histogram, 256 global atomics per block
//   block_shared_reduce_by_key  the same, filled with warp_reduce_by_key_add (block scope)
//   cub_histogram_even          cub::DeviceHistogram::HistogramEven (zeroes its own output)
#include <cub/device/device_histogram.cuh>

#include <array>

#include "canopy/atomics/reduce_by_key.hpp"
#include "lab_common.cuh"

namespace canopy::bench::lab {

namespace {

constexpr int bins = 256;

__host__ __device__ std::uint8_t sample(std::uint32_t i) {
  const std::uint32_t h = hash2(i, 31);
  return static_cast<std::uint8_t>((h & 3u) != 0 ? (i >> 12) & 255u : (h >> 8) & 255u);
}

__global__ void generate(std::uint8_t* data, std::uint32_t n) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = sample(i);
}

template <bool Count>
__global__ void global_atomic_kernel(const std::uint8_t* data, std::uint32_t n, unsigned* hist,
                                     unsigned long long* tally) {
  for (std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    global_ref<Count>(hist + data[i], tally).fetch_add(1u, relaxed);
}

template <bool Count>
__global__ void reduce_by_key_kernel(const std::uint8_t* data, std::uint32_t n, unsigned* hist, unsigned long long*) {
  for (std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    canopy::atomics::warp_reduce_by_key_add<cuda::thread_scope_device>(hist, static_cast<unsigned>(data[i]), 1u,
                                                                       relaxed);
}

template <bool Count, bool ByKey>
__global__ void block_shared_kernel(const std::uint8_t* data, std::uint32_t n, unsigned* hist,
                                    unsigned long long* tally) {
  __shared__ unsigned local[bins];
  for (int b = static_cast<int>(threadIdx.x); b < bins; b += static_cast<int>(blockDim.x)) local[b] = 0;
  __syncthreads();
  for (std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    if constexpr (ByKey)
      canopy::atomics::warp_reduce_by_key_add<cuda::thread_scope_block>(local, static_cast<unsigned>(data[i]), 1u,
                                                                        relaxed);
    else
      cuda::atomic_ref<unsigned, cuda::thread_scope_block>(local[data[i]]).fetch_add(1u, relaxed);
  }
  __syncthreads();
  for (int b = static_cast<int>(threadIdx.x); b < bins; b += static_cast<int>(blockDim.x))
    if (local[b] != 0) global_ref<Count>(hist + b, tally).fetch_add(local[b], relaxed);
}

using kernel_fn = void (*)(const std::uint8_t*, std::uint32_t, unsigned*, unsigned long long*);

}  // namespace

void run_histogram(context& ctx, std::uint64_t size) {
  const auto n = static_cast<std::uint32_t>(size);
  if (!fits_or_skip(ctx, "histogram", size, static_cast<double>(size))) return;
  device_buffer<std::uint8_t> data(size);
  device_buffer<unsigned> hist(bins);
  device_buffer<unsigned long long> tally(1);
  generate<<<blocks_for(size), block_size, 0, ctx.stream>>>(data.data(), n);
  CANOPY_CUDA_TRY(cudaGetLastError());
  std::size_t cub_temp_bytes = 0;
  CANOPY_CUDA_TRY(cub::DeviceHistogram::HistogramEven(nullptr, cub_temp_bytes, data.data(), hist.data(), bins + 1, 0,
                                                        bins, static_cast<std::int64_t>(size), ctx.stream));
  device_buffer<unsigned char> cub_temp(cub_temp_bytes);

  std::vector<std::array<std::uint64_t, bins>> partial(hardware_workers());
  parallel_for(size, [&](std::uint64_t i0, std::uint64_t i1, unsigned w) {
    partial[w].fill(0);
    for (std::uint64_t i = i0; i < i1; ++i) ++partial[w][sample(static_cast<std::uint32_t>(i))];
  });
  std::array<std::uint64_t, bins> expect{};
  for (const auto& p : partial)
    for (int b = 0; b < bins; ++b) expect[static_cast<std::size_t>(b)] += p[static_cast<std::size_t>(b)];

  const unsigned grid = std::min<unsigned>(blocks_for(size), static_cast<unsigned>(ctx.device.sm_count) * 4u);
  auto reset = [&](cudaStream_t s) { CANOPY_CUDA_TRY(cudaMemsetAsync(hist.data(), 0, hist.bytes(), s)); };
  auto check = [&]() -> std::string {
    const std::vector<unsigned> got = hist.download();
    for (int b = 0; b < bins; ++b)
      if (got[static_cast<std::size_t>(b)] != expect[static_cast<std::size_t>(b)])
        return "bin " + std::to_string(b) + " holds " + std::to_string(got[static_cast<std::size_t>(b)]) +
               ", expected " + std::to_string(expect[static_cast<std::size_t>(b)]);
    return {};
  };
  auto make = [&](std::string name, bool baseline, kernel_fn plain, kernel_fn counted) {
    variant v;
    v.name = std::move(name);
    v.baseline = baseline;
    v.reset = reset;
    v.run = [&, plain](cudaStream_t s) { plain<<<grid, block_size, 0, s>>>(data.data(), n, hist.data(), nullptr); };
    v.check = check;
    if (counted != nullptr)
      v.counted_run = [&, counted](cudaStream_t s) -> std::uint64_t {
        reset(s);
        CANOPY_CUDA_TRY(cudaMemsetAsync(tally.data(), 0, sizeof(unsigned long long), s));
        counted<<<grid, block_size, 0, s>>>(data.data(), n, hist.data(), tally.data());
        CANOPY_CUDA_TRY(cudaGetLastError());
        CANOPY_CUDA_TRY(cudaStreamSynchronize(s));
        return download_one(tally);
      };
    return v;
  };
  std::vector<variant> variants;
  variants.push_back(make("global_atomic", true, global_atomic_kernel<false>, global_atomic_kernel<true>));
  variants.push_back(make("warp_reduce_by_key", false, reduce_by_key_kernel<false>, nullptr));
  variants.push_back(make("block_shared", false, block_shared_kernel<false, false>, block_shared_kernel<true, false>));
  variants.push_back(make("block_shared_reduce_by_key", false, block_shared_kernel<false, true>,
                          block_shared_kernel<true, true>));
  {
    variant v;
    v.name = "cub_histogram_even";
    v.reset = reset;  // not needed by CUB (it zeroes the output itself); keeps the check honest
    v.run = [&](cudaStream_t s) {
      std::size_t bytes = cub_temp_bytes;
      CANOPY_CUDA_TRY(cub::DeviceHistogram::HistogramEven(cub_temp.data(), bytes, data.data(), hist.data(), bins + 1,
                                                            0, bins, static_cast<std::int64_t>(size), s));
    };
    v.check = check;
    variants.push_back(std::move(v));
  }
  const experiment_spec spec{"histogram", size, static_cast<double>(size)};
  const auto counts = measure(ctx, spec, variants);
  report_counts(ctx, spec, counts, "global_atomic",
                {{"block_shared", "at most 256 per block, " + std::to_string(grid) + " blocks"},
                 {"block_shared_reduce_by_key", "at most 256 per block, " + std::to_string(grid) + " blocks"}});
}

}  // namespace canopy::bench::lab
