// SPDX-License-Identifier: Apache-2.0
// Seed 002: the global maximum of A*B/C + D over four int arrays, one element per thread.
//   naive             one global atomicMax per element
//   less_naive        thread 0 snapshots the global maximum into shared memory; only elements
//                     above the snapshot issue a global atomicMax
//   smart             shared-memory tree reduction, one global atomicMax per block
//   smarter           the seed's: shared-memory atomicMax per thread, one global per block
//   hierarchical_max  canopy::atomics::hierarchical_max (warp reduction, one shared atomic per
//                     warp, one global per block)
#include <climits>

#include "canopy/atomics/hierarchical_max.hpp"
#include "lab_common.cuh"

namespace canopy::bench::lab {

namespace {

// A, B < 2^15 so A*B < 2^30 never overflows; C in [1, 1024]; D in [-2^20, 2^20).
__host__ __device__ int a_of(std::uint32_t i) { return static_cast<int>(hash2(i, 11) % 32768u); }
__host__ __device__ int b_of(std::uint32_t i) { return static_cast<int>(hash2(i, 12) % 32768u); }
__host__ __device__ int c_of(std::uint32_t i) { return 1 + static_cast<int>(hash2(i, 13) % 1024u); }
__host__ __device__ int d_of(std::uint32_t i) { return static_cast<int>(hash2(i, 14) % (1u << 21)) - (1 << 20); }

__global__ void generate(int* a, int* b, int* c, int* d, std::uint32_t n) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  a[i] = a_of(i);
  b[i] = b_of(i);
  c[i] = c_of(i);
  d[i] = d_of(i);
}

__global__ void set_int(int* target, int value) { *target = value; }

struct inputs {
  const int* a;
  const int* b;
  const int* c;
  const int* d;
  std::uint32_t n;
};

__device__ __forceinline__ int value_at(const inputs& in, std::uint32_t i) {
  return in.a[i] * in.b[i] / in.c[i] + in.d[i];
}

template <bool Count>
__global__ void naive_kernel(inputs in, int* result, unsigned long long* tally) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= in.n) return;
  global_ref<Count>(result, tally).fetch_max(value_at(in, i), relaxed);
}

template <bool Count>
__global__ void less_naive_kernel(inputs in, int* result, unsigned long long* tally) {
  __shared__ int snapshot;
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (threadIdx.x == 0) snapshot = cuda::atomic_ref<int, cuda::thread_scope_device>(*result).load(relaxed);
  __syncthreads();
  if (i >= in.n) return;
  const int v = value_at(in, i);
  if (v > snapshot) global_ref<Count>(result, tally).fetch_max(v, relaxed);
}

template <bool Count>
__global__ void smart_kernel(inputs in, int* result, unsigned long long* tally) {
  __shared__ int partial[block_size];
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  partial[threadIdx.x] = i < in.n ? value_at(in, i) : INT_MIN;
  __syncthreads();
  for (int stride = block_size / 2; stride > 0; stride /= 2) {
    if (static_cast<int>(threadIdx.x) < stride)
      partial[threadIdx.x] = max(partial[threadIdx.x], partial[threadIdx.x + stride]);
    __syncthreads();
  }
  if (threadIdx.x == 0) global_ref<Count>(result, tally).fetch_max(partial[0], relaxed);
}

template <bool Count>
__global__ void smarter_kernel(inputs in, int* result, unsigned long long* tally) {
  __shared__ int block_max;
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (threadIdx.x == 0) block_max = INT_MIN;
  __syncthreads();
  if (i < in.n)
    cuda::atomic_ref<int, cuda::thread_scope_block>(block_max).fetch_max(value_at(in, i), relaxed);
  __syncthreads();
  if (threadIdx.x == 0) global_ref<Count>(result, tally).fetch_max(block_max, relaxed);
}

template <bool Count>
__global__ void hierarchical_kernel(inputs in, int* result, unsigned long long* tally) {
  __shared__ canopy::atomics::hierarchical_max<int>::TempStorage temp;
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  const int v = i < in.n ? value_at(in, i) : INT_MIN;  // every thread joins the collective
  canopy::atomics::hierarchical_max<int>(temp).update(v, global_ref<Count>(result, tally), relaxed);
}

using kernel_fn = void (*)(inputs, int*, unsigned long long*);

}  // namespace

void run_max(context& ctx, std::uint64_t size) {
  const auto n = static_cast<std::uint32_t>(size);
  if (!fits_or_skip(ctx, "max", size, 16.0 * static_cast<double>(size))) return;
  device_buffer<int> a(size), b(size), c(size), d(size), result(1);
  device_buffer<unsigned long long> tally(1);
  generate<<<blocks_for(size), block_size, 0, ctx.stream>>>(a.data(), b.data(), c.data(), d.data(), n);
  CANOPY_CUDA_TRY(cudaGetLastError());
  const inputs in{a.data(), b.data(), c.data(), d.data(), n};

  const int expected_max = [&] {
    std::vector<int> best(hardware_workers(), INT_MIN);
    parallel_for(size, [&](std::uint64_t i0, std::uint64_t i1, unsigned w) {
      int m = INT_MIN;
      for (std::uint64_t i = i0; i < i1; ++i) {
        const auto u = static_cast<std::uint32_t>(i);
        m = std::max(m, a_of(u) * b_of(u) / c_of(u) + d_of(u));
      }
      best[w] = m;
    });
    return *std::max_element(best.begin(), best.end());
  }();

  auto make = [&](std::string name, bool baseline, kernel_fn plain, kernel_fn counted) {
    variant v;
    v.name = std::move(name);
    v.baseline = baseline;
    v.reset = [&](cudaStream_t s) { set_int<<<1, 1, 0, s>>>(result.data(), INT_MIN); };
    v.run = [&, plain](cudaStream_t s) { plain<<<blocks_for(size), block_size, 0, s>>>(in, result.data(), nullptr); };
    v.check = [&]() -> std::string {
      const int got = download_one(result);
      if (got == expected_max) return {};
      return "maximum " + std::to_string(got) + ", expected " + std::to_string(expected_max);
    };
    v.counted_run = [&, counted](cudaStream_t s) -> std::uint64_t {
      set_int<<<1, 1, 0, s>>>(result.data(), INT_MIN);
      CANOPY_CUDA_TRY(cudaMemsetAsync(tally.data(), 0, sizeof(unsigned long long), s));
      counted<<<blocks_for(size), block_size, 0, s>>>(in, result.data(), tally.data());
      CANOPY_CUDA_TRY(cudaGetLastError());
      CANOPY_CUDA_TRY(cudaStreamSynchronize(s));
      return download_one(tally);
    };
    return v;
  };
  std::vector<variant> variants;
  variants.push_back(make("naive", true, naive_kernel<false>, naive_kernel<true>));
  variants.push_back(make("less_naive", false, less_naive_kernel<false>, less_naive_kernel<true>));
  variants.push_back(make("smart", false, smart_kernel<false>, smart_kernel<true>));
  variants.push_back(make("smarter", false, smarter_kernel<false>, smarter_kernel<true>));
  variants.push_back(make("hierarchical_max", false, hierarchical_kernel<false>, hierarchical_kernel<true>));

  const experiment_spec spec{"max", size, 16.0 * static_cast<double>(size)};
  const auto counts = measure(ctx, spec, variants);
  const std::string per_block = "one per block: " + std::to_string(blocks_for(size));
  report_counts(ctx, spec, counts, "naive",
                {{"naive", "one per element: " + std::to_string(size)},
                 {"smart", per_block},
                 {"smarter", per_block},
                 {"hierarchical_max", per_block}});
}

}  // namespace canopy::bench::lab
