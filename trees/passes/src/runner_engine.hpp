// SPDX-License-Identifier: Apache-2.0
// The interface between upward_runner and its two engines (upward_runner.cpp: CPU, and the
// stub without CUDA; upward_runner_gpu.cu: GPU).
#pragma once

#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "canopy/passes/upward_runner.hpp"

namespace canopy::trees {

struct upward_runner::engine {
  engine(pass_backend b, pass_tasks t) : backend(b), tasks(t) {}
  virtual ~engine() = default;
  virtual canopy::run_result run(CUstream_st* stream) = 0;
  virtual timed_run run_timed() = 0;
  virtual void run_async(CUstream_st* stream) = 0;
  virtual canopy::run_result last_result() const = 0;
  virtual void set_tree(const device_octree&, device_payloads<float>&, CUstream_st*) {
    throw std::logic_error("upward_runner: set_tree needs a runner made from a device tree");
  }
  // built_device_octree is complete only where CUDA is (the gpu engine overrides this).
  virtual void set_built_tree(const built_device_octree&, device_payloads<float>&, CUstream_st*) {
    throw std::logic_error("upward_runner: set_tree needs a runner made from a device tree");
  }
  virtual void set_mode(canopy::mode m) = 0;
  virtual void poison() = 0;
  virtual std::vector<multipole<float>> download() const = 0;
  virtual const canopy::scheduler_options& options() const = 0;
  virtual int lanes() const = 0;
  virtual int grid() const = 0;
  virtual std::string describe() const = 0;
  virtual octree_ref device_tree() const { throw std::logic_error("upward_runner: device_tree() of a cpu pass"); }
  virtual multipole<float>* device_payloads_data() const {
    throw std::logic_error("upward_runner: device_payloads_data() of a cpu pass");
  }
  virtual std::span<const multipole<float>> host_payloads() const {
    throw std::logic_error("upward_runner: host_payloads() of a gpu pass");
  }

  const pass_backend backend;
  const pass_tasks tasks;
};

namespace detail {
/// The GPU engine (upward_runner_gpu.cu), or, in a build without CUDA, a std::runtime_error.
/// `device_tree`/`payloads`: the caller's, or null for the engine's own.
std::unique_ptr<upward_runner::engine> make_gpu_engine(const octree& tree, const device_octree* device_tree,
                                                       device_payloads<float>* payloads, const upward_options& options);
/// The GPU engine over a tree already on the device (its graph built by kernels), or, without
/// CUDA, a std::runtime_error.
std::unique_ptr<upward_runner::engine> make_device_tree_engine(const device_octree& device_tree, device_payloads<float>& payloads,
                                                               const upward_options& options, CUstream_st* stream);
}  // namespace detail

}  // namespace canopy::trees
