// cudaMalloc/cudaFree against the stream-ordered pool for set-up-sized buffers.
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <vector>
static double now_ms() { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
int main() {
  cudaFree(0);
  cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  const double gb[] = {0.0625, 0.5, 1, 2.5, 5};
  for (double g : gb) {
    size_t bytes = size_t(g * (1ull << 30));
    for (int rep = 0; rep < 3; ++rep) {
      void* p = nullptr;
      double t0 = now_ms(); cudaMalloc(&p, bytes); double t1 = now_ms();
      cudaMemsetAsync(p, 0, bytes, s); cudaStreamSynchronize(s);
      double t2 = now_ms(); cudaFree(p); double t3 = now_ms();
      std::printf("cudaMalloc %.3f GB: malloc %.3f ms, free %.3f ms\n", g, t1 - t0, t3 - t2);
    }
  }
  cudaMemPool_t pool; cudaDeviceGetDefaultMemPool(&pool, 0);
  uint64_t thr = UINT64_MAX; cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &thr);
  for (double g : gb) {
    size_t bytes = size_t(g * (1ull << 30));
    for (int rep = 0; rep < 3; ++rep) {
      void* p = nullptr;
      double t0 = now_ms(); cudaMallocAsync(&p, bytes, s); cudaStreamSynchronize(s); double t1 = now_ms();
      cudaMemsetAsync(p, 0, bytes, s); cudaStreamSynchronize(s);
      double t2 = now_ms(); cudaFreeAsync(p, s); cudaStreamSynchronize(s); double t3 = now_ms();
      std::printf("pool %.3f GB: malloc %.3f ms, free %.3f ms\n", g, t1 - t0, t3 - t2);
    }
  }
  // A step's worth: 20 buffers of mixed sizes, allocated then freed, twice.
  for (int mode = 0; mode < 2; ++mode) for (int rep = 0; rep < 3; ++rep) {
    std::vector<void*> v;
    double t0 = now_ms();
    for (int i = 0; i < 20; ++i) { void* p; size_t b = size_t((i % 5 == 0 ? 2.5 : 0.25) * (1ull << 30)); if (mode) cudaMallocAsync(&p, b, s); else cudaMalloc(&p, b); v.push_back(p); }
    for (void* p : v) { if (mode) cudaFreeAsync(p, s); else cudaFree(p); }
    cudaStreamSynchronize(s);
    std::printf("%s: 20 buffers (4 of 2.5 GB, 16 of 0.25 GB) allocated and freed: %.3f ms\n", mode ? "pool" : "cudaMalloc", now_ms() - t0);
  }
  std::printf("last error: %s\n", cudaGetErrorString(cudaGetLastError()));
}
