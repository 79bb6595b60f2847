// SPDX-License-Identifier: Apache-2.0
// `canopy bench build` on the GPU (build_bench.hpp).
#include <cuda_runtime.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include "build_bench.hpp"
#include "canopy/cuda/device.hpp"
#include "canopy/cuda/device_buffer.hpp"
#include "canopy/cuda/error.hpp"
#include "canopy/cuda/event.hpp"
#include "canopy/passes/device_octree_builder.cuh"
#include "canopy/passes/device_pass_graphs.cuh"
#include "common/gpu_timing.cuh"

namespace canopy::bench {

namespace {

using clock_type = std::chrono::steady_clock;
double ms_since(clock_type::time_point t0) { return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count(); }

}  // namespace

build_report run_build_bench(const std::vector<build_case>& cases, const build_bench_options& o) {
  if (!gpu_available()) throw std::runtime_error("bench build: no usable CUDA device");
  build_report report;
  report.device = gpu_name();
  report.copy_gb_per_s = measure_copy_bandwidth();
  cudaStream_t stream = nullptr;
  CANOPY_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cuda_event a, b;
  for (const build_case& c : cases) {
    build_result r;
    r.label = c.label;
    r.points = c.points.size();
    // The host build: its tree is the check, its time the comparison.
    std::vector<double> host_ms;
    trees::octree host;
    for (int i = 0; i < o.host_reps; ++i) {
      const auto t0 = clock_type::now();
      host = trees::build_octree(c.points, c.options);
      host_ms.push_back(ms_since(t0));
    }
    r.host_ms = summarize(host_ms);
    r.nodes = host.node_count();
    r.leaves = static_cast<std::int32_t>(host.leaves.size());
    r.depth = host.depth;

    const device_buffer<trees::point> d_points(c.points);
    trees::device_octree_builder builder;
    trees::built_device_octree built;
    device_graph_workspace ws;
    builder.build_into(d_points.data(), c.points.size(), c.options, built, stream);
    if (const std::string d = trees::structure_difference(built.download(stream), host); !d.empty())
      throw std::runtime_error("bench build: " + c.label + ": the GPU tree differs from the host's: " + d);
    r.checked = true;

    std::vector<double> build_stream, build_e2e, node_graph, trusted_graph, twig_graph, pipeline, pipeline_stream, pipeline_checked;
    std::vector<double> ph[6];
    builder.set_phase_timing(true);
    device_task_graph piped;  // the pipeline's graph, rebuilt into every step as a simulation would
    for (int i = 0; i < o.warmup + o.reps; ++i) {
      CANOPY_CUDA_TRY(cudaStreamSynchronize(stream));
      const auto t0 = clock_type::now();
      a.record(stream);
      builder.build_into(d_points.data(), c.points.size(), c.options, built, stream);
      b.record(stream);
      CANOPY_CUDA_TRY(cudaStreamSynchronize(stream));
      const double e2e = ms_since(t0);
      const double stream_ms = elapsed_ms(a, b);
      a.record(stream);
      const device_task_graph g = trees::make_device_upward_graph(built.tree.ref(), stream, &ws);  // waits for its counts
      b.record(stream);
      CANOPY_CUDA_TRY(cudaStreamSynchronize(stream));
      const double pipe = ms_since(t0);
      const double node_ms = elapsed_ms(a, b);
      a.record(stream);
      const trees::device_twig_graph tg = trees::make_device_twig_graph(built.tree.ref(), stream, &ws);
      b.record(stream);
      CANOPY_CUDA_TRY(cudaStreamSynchronize(stream));
      const double twig_ms = elapsed_ms(a, b);
      a.record(stream);
      const device_task_graph trusted = trees::make_device_upward_graph(built, stream);  // no host wait
      b.record(stream);
      CANOPY_CUDA_TRY(cudaStreamSynchronize(stream));
      const double trusted_ms = elapsed_ms(a, b);
      // The pipeline as a simulation step runs it: build, then the builder's graph, one stream.
      const auto t1 = clock_type::now();
      a.record(stream);
      builder.build_into(d_points.data(), c.points.size(), c.options, built, stream);
      trees::make_device_upward_graph(built, piped, stream);  // reuses the last step's arrays
      b.record(stream);
      CANOPY_CUDA_TRY(cudaStreamSynchronize(stream));
      const double pipe_e2e = ms_since(t1);
      if (g.task_count() != host.node_count() || tg.graph.task_count() <= 0 || trusted.task_count() != host.node_count() ||
          piped.task_count() != host.node_count() || piped.source_count() != g.source_count())
        throw std::runtime_error("bench build: " + c.label + ": a device task graph has the wrong size");
      if (i < o.warmup) continue;
      if (const auto p = builder.last_phase_times()) {
        const double v[6] = {p->box, p->keys, p->sort, p->gather, p->spans, p->nodes};
        for (int k = 0; k < 6; ++k) ph[k].push_back(v[k]);
      }
      build_e2e.push_back(e2e);
      build_stream.push_back(stream_ms);
      node_graph.push_back(node_ms);
      trusted_graph.push_back(trusted_ms);
      twig_graph.push_back(twig_ms);
      pipeline_checked.push_back(pipe);
      pipeline.push_back(pipe_e2e);
      pipeline_stream.push_back(elapsed_ms(a, b));
    }
    // After the timed builds: the last one must still be the host's tree.
    if (const std::string d = trees::structure_difference(built.download(stream), host); !d.empty())
      throw std::runtime_error("bench build: " + c.label + ": a timed GPU build differs from the host's: " + d);
    {  // ... and the pipeline's graph the checked one of that tree, device array for device array
      const device_task_graph want = trees::make_device_upward_graph(built.tree.ref(), stream);
      CANOPY_CUDA_TRY(cudaEventSynchronize(piped.ready_event()));
      const auto copy = [](const std::int32_t* d, std::int32_t n) {
        std::vector<std::int32_t> h(static_cast<std::size_t>(n));
        if (n > 0) CANOPY_CUDA_TRY(cudaMemcpy(h.data(), d, h.size() * sizeof(std::int32_t), cudaMemcpyDeviceToHost));
        return h;
      };
      if (piped.task_count() != want.task_count() || piped.source_count() != want.source_count() ||
          piped.sink_count() != want.sink_count() ||
          copy(piped.parent(), piped.task_count()) != copy(want.parent(), want.task_count()) ||
          copy(piped.dependency_count(), piped.task_count()) != copy(want.dependency_count(), want.task_count()) ||
          copy(piped.sources(), piped.source_count()) != copy(want.sources(), want.source_count()))
        throw std::runtime_error("bench build: " + c.label + ": the builder's task graph differs from the checked one");
    }
    r.gpu_build_stream = summarize(build_stream);
    r.gpu_build_e2e = summarize(build_e2e);
    r.node_graph_stream = summarize(node_graph);
    r.trusted_graph_stream = summarize(trusted_graph);
    r.twig_graph_stream = summarize(twig_graph);
    r.pipeline_e2e = summarize(pipeline);
    r.pipeline_stream = summarize(pipeline_stream);
    r.pipeline_checked_e2e = summarize(pipeline_checked);
    if (!ph[0].empty()) {
      r.box = summarize(ph[0]);
      r.keys = summarize(ph[1]);
      r.sort = summarize(ph[2]);
      r.gather = summarize(ph[3]);
      r.spans = summarize(ph[4]);
      r.nodes_emit = summarize(ph[5]);
    }
    const double bytes = static_cast<double>(c.points.size()) * (2.0 * sizeof(trees::point) + sizeof(std::int32_t));
    r.floor_ms = bytes / (report.copy_gb_per_s * 1e9) * 1e3;
    r.workspace_bytes = builder.workspace_bytes();
    report.results.push_back(std::move(r));
  }
  CANOPY_CUDA_TRY(cudaStreamDestroy(stream));
  return report;
}

}  // namespace canopy::bench
