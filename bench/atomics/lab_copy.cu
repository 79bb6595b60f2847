// SPDX-License-Identifier: Apache-2.0
// Seed 003, vectorised loads: copy n ints with int, int2 and int4 accesses (grid-stride, the
// seed's kernels), against cudaMemcpyDeviceToDevice and the copy
// bandwidth measured at start-up. Bytes counted: n * 4 read + n * 4 written.
#include "lab_common.cuh"

namespace canopy::bench::lab {

namespace {

// The seed hands the tail to the thread with idx == N/2 (N/4); with a capped grid-stride launch
// no such thread exists and the tail is never copied, so thread 0 takes it here.

__global__ void fill(int* data, std::uint32_t n) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = static_cast<int>(hash2(i, 41));
}

__global__ void copy_int(const int* in, int* out, std::uint32_t n) {
  for (std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = in[i];
}

__global__ void copy_int2(const int* in, int* out, std::uint32_t n) {
  const std::uint32_t idx = blockIdx.x * blockDim.x + threadIdx.x;
  for (std::uint32_t i = idx; i < n / 2; i += gridDim.x * blockDim.x)
    reinterpret_cast<int2*>(out)[i] = reinterpret_cast<const int2*>(in)[i];
  if (idx == 0 && n % 2 == 1) out[n - 1] = in[n - 1];
}

__global__ void copy_int4(const int* in, int* out, std::uint32_t n) {
  const std::uint32_t idx = blockIdx.x * blockDim.x + threadIdx.x;
  for (std::uint32_t i = idx; i < n / 4; i += gridDim.x * blockDim.x)
    reinterpret_cast<int4*>(out)[i] = reinterpret_cast<const int4*>(in)[i];
  const std::uint32_t remainder = n % 4;
  if (idx == 0 && remainder != 0)
    for (std::uint32_t k = n - remainder; k < n; ++k) out[k] = in[k];
}

__global__ void count_mismatches(const int* a, const int* b, std::uint32_t n, unsigned long long* mismatches) {
  for (std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    if (a[i] != b[i])
      cuda::atomic_ref<unsigned long long, cuda::thread_scope_device>(*mismatches).fetch_add(1ull, relaxed);
}

}  // namespace

void run_copy(context& ctx, std::uint64_t size) {
  const auto n = static_cast<std::uint32_t>(size);
  if (!fits_or_skip(ctx, "copy", size, 8.0 * static_cast<double>(size))) return;
  device_buffer<int> in(size), out(size);
  device_buffer<unsigned long long> mismatches(1);
  fill<<<blocks_for(size), block_size, 0, ctx.stream>>>(in.data(), n);
  CANOPY_CUDA_TRY(cudaGetLastError());
  const unsigned max_blocks = static_cast<unsigned>(ctx.device.sm_count) * 16u;

  auto reset = [&](cudaStream_t s) { CANOPY_CUDA_TRY(cudaMemsetAsync(out.data(), 0xff, out.bytes(), s)); };
  auto check = [&]() -> std::string {
    CANOPY_CUDA_TRY(cudaMemsetAsync(mismatches.data(), 0, sizeof(unsigned long long), ctx.stream));
    count_mismatches<<<max_blocks, block_size, 0, ctx.stream>>>(in.data(), out.data(), n, mismatches.data());
    CANOPY_CUDA_TRY(cudaGetLastError());
    const unsigned long long bad = download_one(mismatches);
    return bad == 0 ? std::string() : std::to_string(bad) + " elements differ from the source";
  };
  using copy_fn = void (*)(const int*, int*, std::uint32_t);
  auto make = [&](std::string name, bool baseline, copy_fn kernel, unsigned per_thread) {
    variant v;
    v.name = std::move(name);
    v.baseline = baseline;
    v.reset = reset;
    const unsigned grid = std::min(blocks_for(size / per_thread + 1), max_blocks);
    v.run = [&, kernel, grid](cudaStream_t s) { kernel<<<grid, block_size, 0, s>>>(in.data(), out.data(), n); };
    v.check = check;
    return v;
  };
  std::vector<variant> variants;
  variants.push_back(make("int", true, copy_int, 1));
  variants.push_back(make("int2", false, copy_int2, 2));
  variants.push_back(make("int4", false, copy_int4, 4));
  {
    variant v;
    v.name = "cudaMemcpy";
    v.reset = reset;
    v.run = [&](cudaStream_t s) {
      CANOPY_CUDA_TRY(cudaMemcpyAsync(out.data(), in.data(), in.bytes(), cudaMemcpyDeviceToDevice, s));
    };
    v.check = check;
    variants.push_back(std::move(v));
  }
  measure(ctx, experiment_spec{"copy", size, 8.0 * static_cast<double>(size)}, variants);
}

}  // namespace canopy::bench::lab
