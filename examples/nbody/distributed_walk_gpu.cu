// SPDX-License-Identifier: Apache-2.0
// The distributed step's GPU walk (distributed_walk_gpu.hpp): upload, walk cells, group walk,
// forces downloaded. One stream; the buffers grow and are kept between steps.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <canopy/cuda/device_buffer.hpp>
#include <canopy/cuda/error.hpp>
#include <canopy/passes/octree_ref.hpp>

#include "distributed_walk_gpu.hpp"
#include "group_walk.cuh"

namespace nbody {

namespace {

namespace ct = canopy::trees;

constexpr int node_block = 256;
static_assert(sizeof(ct::point) == sizeof(float4) && alignof(ct::point) == alignof(float4));
static_assert(sizeof(walk_group) == sizeof(std::uint64_t));

template <class T>
void reserve(canopy::device_buffer<T>& b, std::size_t n) {
  if (b.size() < n) b = canopy::device_buffer<T>(std::max<std::size_t>(1, n + n / 4));
}

template <class T>
void upload_async(canopy::device_buffer<T>& b, const T* host, std::size_t n, cudaStream_t s) {
  reserve(b, n);
  if (n != 0) CANOPY_CUDA_TRY(cudaMemcpyAsync(b.data(), host, n * sizeof(T), cudaMemcpyHostToDevice, s));
}

class device_walker final : public gpu_walker {
 public:
  explicit device_walker(int local_rank) {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
      throw std::runtime_error("--backend gpu: no usable CUDA device on this rank");
    device_ = local_rank % devices;
    CANOPY_CUDA_TRY(cudaSetDevice(device_));
    CANOPY_CUDA_TRY(cudaStreamCreate(&stream_));
    CANOPY_CUDA_TRY(cudaEventCreate(&start_));
    CANOPY_CUDA_TRY(cudaEventCreate(&stop_));
    cudaDeviceProp prop{};
    CANOPY_CUDA_TRY(cudaGetDeviceProperties(&prop, device_));
    name_ = prop.name;
    blocks_ = group_walk_blocks();
    counters_ = canopy::device_buffer<std::int32_t>(2);
  }
  ~device_walker() override {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
    cudaStreamDestroy(stream_);
  }

  std::string describe() const override { return "device " + std::to_string(device_) + " (" + name_ + ")"; }

  void walk(const walk_tree& t, std::int32_t nodes, std::int32_t points, std::int32_t own,
            const std::vector<std::uint64_t>& groups, const walk_params& p, body_force* out,
            gpu_walk_times& times) override {
    if (nodes >= group_walk_max_nodes) throw std::runtime_error("gpu walk: more nodes than the walk packs (2^29)");
    CANOPY_CUDA_TRY(cudaSetDevice(device_));
    const auto n = static_cast<std::size_t>(nodes);
    CANOPY_CUDA_TRY(cudaEventRecord(start_, stream_));
    upload_async(first_child_, t.first_child, n, stream_);
    upload_async(child_count_, t.child_count, n, stream_);
    upload_async(point_begin_, t.point_begin, n, stream_);
    upload_async(point_count_, t.point_count, n, stream_);
    upload_async(payload_, t.payload, n, stream_);
    upload_async(points_, t.points, static_cast<std::size_t>(points), stream_);
    upload_async(groups_, reinterpret_cast<const walk_group*>(groups.data()), groups.size(), stream_);
    const std::int32_t counts[2] = {static_cast<std::int32_t>(groups.size()), 0};  // groups, next group
    CANOPY_CUDA_TRY(cudaMemcpyAsync(counters_.data(), counts, sizeof(counts), cudaMemcpyHostToDevice, stream_));
    reserve(cells_, n);
    reserve(forces_, static_cast<std::size_t>(std::max(own, 1)));
    CANOPY_CUDA_TRY(cudaEventRecord(stop_, stream_));
    CANOPY_CUDA_TRY(cudaEventSynchronize(stop_));  // the host arrays may change once this returns
    float ms = 0;
    CANOPY_CUDA_TRY(cudaEventElapsedTime(&ms, start_, stop_));
    times.upload_ms = ms;

    CANOPY_CUDA_TRY(cudaEventRecord(start_, stream_));
    const walk_tree view{points_.data(), first_child_.data(), child_count_.data(), point_begin_.data(),
                         point_count_.data(), payload_.data()};
    if (nodes > 0)
      make_walk_cells_kernel<<<static_cast<unsigned>((nodes + node_block - 1) / node_block), node_block, 0, stream_>>>(
          view, nodes, 1.0f / p.theta, cells_.data());
    CANOPY_CUDA_TRY(cudaGetLastError());
    if (!groups.empty())
      group_walk_kernel<<<blocks_, group_walk_warps * 32, 0, stream_>>>(
          cells_.data(), reinterpret_cast<const float4*>(points_.data()), groups_.data(), counters_.data(),
          counters_.data() + 1, p, forces_.data());
    CANOPY_CUDA_TRY(cudaGetLastError());
    CANOPY_CUDA_TRY(cudaEventRecord(stop_, stream_));
    if (own > 0)
      CANOPY_CUDA_TRY(cudaMemcpyAsync(out, forces_.data(), static_cast<std::size_t>(own) * sizeof(body_force),
                                      cudaMemcpyDeviceToHost, stream_));
    CANOPY_CUDA_TRY(cudaStreamSynchronize(stream_));
    CANOPY_CUDA_TRY(cudaEventElapsedTime(&ms, start_, stop_));
    times.walk_ms = ms;
  }

 private:
  int device_ = 0;
  std::string name_;
  unsigned blocks_ = 1;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  canopy::device_buffer<std::int32_t> first_child_{0}, child_count_{0}, point_begin_{0}, point_count_{0}, counters_{0};
  canopy::device_buffer<ct::multipole<float>> payload_{0};
  canopy::device_buffer<ct::point> points_{0};
  canopy::device_buffer<walk_group> groups_{0};
  canopy::device_buffer<walk_cell> cells_{0};
  canopy::device_buffer<body_force> forces_{0};
};

}  // namespace

std::unique_ptr<gpu_walker> make_gpu_walker(int local_rank) { return std::make_unique<device_walker>(local_rank); }

}  // namespace nbody
