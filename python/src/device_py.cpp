// SPDX-License-Identifier: Apache-2.0
// Device arrays without copies (CANOPY_GPU builds only): points already on the GPU (CuPy, PyTorch,
// anything with __dlpack__; __cuda_array_interface__ through its pointer) are built into an
// octree on the device (device_octree_builder) and run through the gpu upward pass there; the
// tree and the payloads stay on the device and are handed back as DLPack views that keep the
// result alive. A build without CUDA binds nothing here (canopy.has_gpu_backend() is False).
#include "canopy_py.hpp"

#if CANOPY_PY_HAVE_GPU
#include <cuda_runtime.h>
#include <nanobind/stl/unique_ptr.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "canopy/cuda/error.hpp"
#include "canopy/passes/device_octree.cuh"
#include "canopy/passes/device_octree_builder.cuh"
#include "canopy/passes/upward_runner.hpp"
#include "canopy/trees/errors.hpp"
#include "canopy/trees/multipole.hpp"
#endif

namespace canopy::python {

#if CANOPY_PY_HAVE_GPU

namespace {

namespace trees = canopy::trees;

// Everything a device pass leaves on the device; the views handed to Python point into it.
struct device_pass {
  trees::built_device_octree built;
  trees::device_payloads<float> payloads;
  int device_id = 0;
  std::string device, tasks;
  double elapsed_us = 0;
};

using device_points_in = nb::ndarray<const float, nb::ndim<2>, nb::c_contig, nb::device::cuda>;
template <class T>
using device_view = nb::ndarray<const T, nb::device::cuda>;

// The device that holds `ptr`; input_error for host memory (a NumPy array belongs on the host
// path, which copies nothing either).
int device_of(const void* ptr) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, ptr) != cudaSuccess) {
    (void)cudaGetLastError();
    throw trees::input_error("points", "not a CUDA device pointer");
  }
  if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged)
    throw trees::input_error("points", "the array is not in device memory (pass host arrays to accumulate())");
  return a.device;
}

std::unique_ptr<device_pass> run_device_pass(const float* data, std::size_t n, const trees::build_options& build,
                                             const std::string& tasks, const canopy::scheduler_options& scheduler) {
  require_backend("gpu");
  // The builder reads whole 16-byte points (float4 loads).
  if (reinterpret_cast<std::uintptr_t>(data) % alignof(trees::point) != 0)
    throw trees::input_error("points", "device points must be 16-byte aligned (an (n, 4) float32 array from its start)");
  trees::pass_tasks kind = trees::default_pass_tasks(trees::pass_backend::gpu);
  if (tasks != "auto") {
    const auto t = trees::parse_pass_tasks(tasks);
    if (!t) throw trees::input_error("tasks", "unknown task kind '" + tasks + "' (auto, node, twig, bucket)");
    kind = *t;
  }
  auto r = std::make_unique<device_pass>();
  r->device_id = n == 0 ? 0 : device_of(data);
  // Work on the points' device, and give the calling thread its current device back afterwards
  // (CuPy or PyTorch code on this thread relies on it).
  int previous_device = 0;
  CANOPY_CUDA_TRY(cudaGetDevice(&previous_device));
  struct restore_device {
    int device;
    ~restore_device() { (void)cudaSetDevice(device); }
  } restore{previous_device};
  CANOPY_CUDA_TRY(cudaSetDevice(r->device_id));
  trees::device_octree_builder builder;
  // An empty input has no device pointer to read; the builder makes the one-node tree of it.
  builder.build_into(reinterpret_cast<const trees::point*>(data), n, build, r->built);
  r->payloads = trees::device_payloads<float>(r->built.tree.node_count());
  trees::upward_options o;
  o.backend = trees::pass_backend::gpu;
  o.tasks = kind;
  o.scheduler = scheduler;
  trees::upward_runner pass(r->built.tree, r->payloads, o);
  throw_if_failed(pass.run(), "gpu");  // warm: module load, occupancy query, first touch
  pass.poison();                       // the payloads kept come from a run that wrote every node
  const trees::timed_run t = pass.run_timed();
  throw_if_failed(t.result, "gpu");
  CANOPY_CUDA_TRY(cudaDeviceSynchronize());
  r->elapsed_us = t.elapsed_us;
  r->device = pass.describe();
  r->tasks = std::string(trees::to_string(kind));
  return r;
}

// A strided view of one field of the payload records (17 four-byte words each).
template <class T>
device_view<T> payload_field(const device_pass& r, std::size_t offset, std::size_t columns) {
  static_assert(sizeof(trees::multipole<float>) % 4 == 0 && sizeof(T) == 4);
  const auto n = static_cast<std::size_t>(r.built.tree.node_count());
  const auto* base = reinterpret_cast<const std::byte*>(r.payloads.data()) + offset;
  const std::int64_t record = sizeof(trees::multipole<float>) / 4;
  const std::size_t shape[2] = {n, columns};
  const std::int64_t strides[2] = {record, 1};
  return device_view<T>(base, columns == 1 ? 1 : 2, shape, nb::handle(), strides, nb::dtype<T>(),
                        static_cast<int>(nb::device::cuda::value), r.device_id);
}

template <class T>
device_view<T> tree_array(const device_pass& r, const T* data, std::size_t n) {
  const std::size_t shape[1] = {n};
  return device_view<T>(data, 1, shape, nb::handle(), nullptr, nb::dtype<T>(), static_cast<int>(nb::device::cuda::value), r.device_id);
}

}  // namespace

void bind_device(nb::module_& m) {
  using P = trees::multipole<float>;
  constexpr auto ref = nb::rv_policy::reference_internal;
  nb::class_<device_pass>(m, "DevicePass", "An octree built and accumulated on the GPU; arrays stay on the device")
      .def_prop_ro("node_count", [](const device_pass& r) { return r.built.tree.node_count(); })
      .def_prop_ro("leaf_count", [](const device_pass& r) { return r.built.tree.leaf_count(); })
      .def_prop_ro("point_count", [](const device_pass& r) { return r.built.tree.point_total(); })
      .def_prop_ro("depth", [](const device_pass& r) { return r.built.tree.depth(); })
      .def_prop_ro("device_id", [](const device_pass& r) { return r.device_id; })
      .def_prop_ro("device", [](const device_pass& r) { return r.device; })
      .def_prop_ro("tasks", [](const device_pass& r) { return r.tasks; })
      .def_prop_ro("elapsed_us", [](const device_pass& r) { return r.elapsed_us; })
      .def_prop_ro("count", [](const device_pass& r) { return payload_field<std::uint32_t>(r, offsetof(P, count), 1); }, ref)
      .def_prop_ro("mass", [](const device_pass& r) { return payload_field<float>(r, offsetof(P, mass), 1); }, ref)
      .def_prop_ro("com", [](const device_pass& r) { return payload_field<float>(r, offsetof(P, com), 3); }, ref)
      .def_prop_ro("m2", [](const device_pass& r) { return payload_field<float>(r, offsetof(P, m2), 6); }, ref)
      .def_prop_ro("lo", [](const device_pass& r) { return payload_field<float>(r, offsetof(P, lo), 3); }, ref)
      .def_prop_ro("hi", [](const device_pass& r) { return payload_field<float>(r, offsetof(P, hi), 3); }, ref)
      .def_prop_ro("parent", [](const device_pass& r) {
        return tree_array(r, r.built.tree.ref().parent, static_cast<std::size_t>(r.built.tree.node_count()));
      }, ref)
      .def_prop_ro("first_child", [](const device_pass& r) {
        return tree_array(r, r.built.tree.ref().first_child, static_cast<std::size_t>(r.built.tree.node_count()));
      }, ref)
      .def_prop_ro("child_count", [](const device_pass& r) {
        return tree_array(r, r.built.tree.ref().child_count, static_cast<std::size_t>(r.built.tree.node_count()));
      }, ref)
      .def_prop_ro("point_begin", [](const device_pass& r) {
        return tree_array(r, r.built.tree.ref().point_begin, static_cast<std::size_t>(r.built.tree.node_count()));
      }, ref)
      .def_prop_ro("point_count_per_node", [](const device_pass& r) {
        return tree_array(r, r.built.tree.ref().point_count, static_cast<std::size_t>(r.built.tree.node_count()));
      }, ref)
      .def_prop_ro("level", [](const device_pass& r) {
        return tree_array<std::uint8_t>(r, r.built.level.data(), static_cast<std::size_t>(r.built.tree.node_count()));
      }, ref)
      .def_prop_ro("permutation", [](const device_pass& r) {
        return tree_array<std::int32_t>(r, r.built.permutation.data(), static_cast<std::size_t>(r.built.tree.point_total()));
      }, ref)
      .def_prop_ro("points", [](const device_pass& r) {
        const std::size_t shape[2] = {static_cast<std::size_t>(r.built.tree.point_total()), 4};
        return device_view<float>(reinterpret_cast<const float*>(r.built.tree.ref().points), 2, shape, nb::handle(),
                                  nullptr, nb::dtype<float>(), static_cast<int>(nb::device::cuda::value), r.device_id);
      }, ref)
      // The host copies the comparison with the reference needs: (octree, float payload records).
      .def("download", [](const device_pass& r) {
        trees::octree tree;
        std::vector<P> payloads;
        {
          nb::gil_scoped_release unlocked;
          tree = r.built.download();
          payloads = r.payloads.download();
          payloads.resize(static_cast<std::size_t>(r.built.tree.node_count()));
        }
        return nb::make_tuple(std::move(tree), owned_records(std::move(payloads)));
      });

  m.def("device_accumulate", [](const device_points_in& points, int max_leaf, int max_depth, const std::string& tasks,
                                const std::string& mode, const std::string& push_policy, int blocks, int threads,
                                std::int32_t queue_capacity, double deadline_ms) {
    if (points.shape(1) != 4) throw trees::input_error("points", "device points must have shape (n, 4) float32");
    const auto scheduler = scheduler_options_from(mode, push_policy, blocks, threads, queue_capacity, deadline_ms);
    nb::gil_scoped_release unlocked;
    return run_device_pass(points.data(), points.shape(0), {max_leaf, max_depth}, tasks, scheduler);
  }, nb::arg("points"), nb::arg("max_leaf"), nb::arg("max_depth"), nb::arg("tasks"), CANOPY_PY_SCHEDULER_ARGS);
  // __cuda_array_interface__ (no DLPack): the Python layer checked shape (n, 4), typestr <f4 and
  // C order, and passes the pointer and the interface's stream (version 3: the producer's work on
  // that stream may still be writing the array; 0 here = none given, data ready). The pass runs on
  // the legacy default stream, which does not wait for non-blocking streams or the per-thread
  // default stream, so the producer's stream is synchronised first.
  m.def("device_accumulate_pointer", [](std::uintptr_t pointer, std::size_t n, std::uintptr_t producer_stream,
                                        int max_leaf, int max_depth, const std::string& tasks,
                                        const std::string& mode, const std::string& push_policy, int blocks,
                                        int threads, std::int32_t queue_capacity, double deadline_ms) {
    const auto scheduler = scheduler_options_from(mode, push_policy, blocks, threads, queue_capacity, deadline_ms);
    nb::gil_scoped_release unlocked;
    if (producer_stream != 0) {
      // The interface's encoding: 1 the legacy default stream, 2 the per-thread default stream.
      const cudaStream_t s = producer_stream == 1   ? cudaStreamLegacy
                             : producer_stream == 2 ? cudaStreamPerThread
                                                    : reinterpret_cast<cudaStream_t>(producer_stream);
      CANOPY_CUDA_TRY(cudaStreamSynchronize(s));
    }
    return run_device_pass(reinterpret_cast<const float*>(pointer), n, {max_leaf, max_depth}, tasks, scheduler);
  }, nb::arg("pointer"), nb::arg("n"), nb::arg("stream"), nb::arg("max_leaf"), nb::arg("max_depth"), nb::arg("tasks"),
     CANOPY_PY_SCHEDULER_ARGS);
}

#else

void bind_device(nb::module_&) {}

#endif

}  // namespace canopy::python
