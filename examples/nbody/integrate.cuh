// SPDX-License-Identifier: Apache-2.0
// Leapfrog's kick and drift on the device, for the one-GPU resident simulation (resident_gpu.cu)
// and the distributed device step (distributed_device_step.cu): velocities as float4 (x, y, z and
// a free fourth word), forces as the walk writes them (body_force) or as the FMM does
// (canopy::fmm::field<float>): any F with members ax, ay, az, phi.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include <cub/block/block_reduce.cuh>

#include <canopy/trees/point.hpp>

#include "tree_walk.hpp"

namespace nbody {

inline constexpr int body_block = 256;  // threads per block of the per-body and per-node kernels

// v += a half_dt, stored; returns the new velocity.
template <class F>
__device__ inline float4 kick(float4* vel, const F* f, std::int32_t i, float half_dt) {
  float4 v = vel[i];
  const F a = f[i];
  v.x += a.ax * half_dt;
  v.y += a.ay * half_dt;
  v.z += a.az * half_dt;
  vel[i] = v;
  return v;
}

// Kick v += a half_dt, then drift x += v dt (the first half of leapfrog's kick-drift-kick).
template <class F>
static __global__ void kick_drift_kernel(canopy::trees::point* pos, float4* vel, const F* f, std::int32_t n, float half_dt,
                                  float dt) {
  const std::int32_t i = static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  const float4 v = kick(vel, f, i, half_dt);
  canopy::trees::point p = pos[i];
  p.x += v.x * dt;
  p.y += v.y * dt;
  p.z += v.z * dt;
  pos[i] = p;
}

// Kick v += a half_dt; with `sums`, adds the block's kinetic energy and half its potential energy (0.5 m phi)
// to sums[0] and sums[1].
template <class F>
static __global__ void __launch_bounds__(body_block) kick_energy_kernel(const canopy::trees::point* pos, float4* vel, const F* f,
                                                                 std::int32_t n, float half_dt, double* sums) {
  using reduce = cub::BlockReduce<double, body_block>;
  __shared__ typename reduce::TempStorage storage;
  const std::int32_t i = static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  double kinetic = 0, potential = 0;
  if (i < n) {
    const float4 v = kick(vel, f, i, half_dt);
    const double m = pos[i].m;
    kinetic = 0.5 * m * (double(v.x) * v.x + double(v.y) * v.y + double(v.z) * v.z);
    potential = 0.5 * m * double(f[i].phi);
  }
  if (sums == nullptr) return;  // uniform across the grid
  const double k = reduce(storage).Sum(kinetic);
  __syncthreads();  // the temporary storage is reused
  const double w = reduce(storage).Sum(potential);
  if (threadIdx.x == 0) {
    atomicAdd(&sums[0], k);
    atomicAdd(&sums[1], w);
  }
}

}  // namespace nbody
