// SPDX-License-Identifier: Apache-2.0
// Host side of the upward-pass baselines: launch configuration, graph capture, the runner.
// The kernels are in detail/upward_kernels.cuh.
#include "baselines/baselines.cuh"
#include "baselines/detail/upward_kernels.cuh"

#include <algorithm>
#include <bit>
#include <cctype>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <canopy/cuda/event.hpp>

namespace canopy::bench {

namespace {

using trees::multipole;
using trees::octree_ref;

// Checks the options and replaces group_size 0 by auto_group_size; child_batch 0 stays "auto",
// decided per launch by batch_for.
baseline_options resolve(const octree_ref& tree, const baseline_options& requested) {
  const int g = requested.group_size;
  if (g < 0 || g > 32 || (g != 0 && !std::has_single_bit(static_cast<unsigned>(g))))
    throw std::invalid_argument("baselines: group_size must be 0 (auto) or 1, 2, 4, 8, 16, 32, not " +
                                std::to_string(g));
  const int b = requested.child_batch;
  if (b != 0 && b != 1 && b != 2 && b != 4)
    throw std::invalid_argument("baselines: child_batch must be 0 (auto), 1, 2 or 4, not " + std::to_string(b));
  const int m = requested.merge_group_size;
  if (m < 0 || m > 32 || (m != 0 && !std::has_single_bit(static_cast<unsigned>(m))))
    throw std::invalid_argument("baselines: merge_group_size must be 0 (auto) or 1, 2, 4, 8, 16, 32, not " +
                                std::to_string(m));
  baseline_options r = requested;
  if (r.group_size == 0) r.group_size = auto_group_size(tree);
  if (r.merge_group_size == 0) r.merge_group_size = 8;
  return r;
}

// SMs of the current device, remembered per thread for the last device asked about (launches of
// the level baseline ask once per level).
int sm_count() {
  thread_local int cached_device = -1, cached_sms = 0;
  int device = 0;
  CANOPY_CUDA_TRY(cudaGetDevice(&device));
  if (device != cached_device) {
    CANOPY_CUDA_TRY(cudaDeviceGetAttribute(&cached_sms, cudaDevAttrMultiProcessorCount, device));
    cached_device = device;
  }
  return cached_sms;
}

// Batch 4 holds three more payloads per thread (G = 1: 104 registers instead of 64, ptxas -v on
// sm_90): two blocks of 256 per SM instead of four. Worth it only when the launch cannot fill the
// device at that occupancy anyway; there the dependent latency is all that counts.
int batch_for(const baseline_options& options, std::int64_t threads) {
  if (options.child_batch != 0) return options.child_batch;
  return threads <= std::int64_t{2} * sm_count() * detail::block_size ? 4 : 1;
}

template <int G, class F>
void with_batch(int batch, F& f) {
  constexpr int cap = detail::children_per_lane<G> < 4 ? detail::children_per_lane<G> : 4;
  if constexpr (cap >= 4) {
    if (batch >= 4) return f(std::integral_constant<int, G>{}, std::integral_constant<int, 4>{});
  }
  if constexpr (cap >= 2) {
    if (batch >= 2) return f(std::integral_constant<int, G>{}, std::integral_constant<int, 2>{});
  }
  return f(std::integral_constant<int, G>{}, std::integral_constant<int, 1>{});
}

// Calls f(integral_constant<G>, integral_constant<Batch>) with the batch capped at what a lane of
// a G-lane group can use, so only distinct kernels are instantiated.
template <class F>
void with_shape(int group_size, int batch, F&& f) {
  switch (group_size) {
    case 1: return with_batch<1>(batch, f);
    case 2: return with_batch<2>(batch, f);
    case 4: return with_batch<4>(batch, f);
    case 8: return with_batch<8>(batch, f);
    case 16: return with_batch<16>(batch, f);
    case 32: return with_batch<32>(batch, f);
    default: throw std::invalid_argument("baselines: unsupported group size " + std::to_string(group_size));
  }
}

unsigned blocks_for(std::int64_t groups, int group_size) {
  const std::int64_t threads = groups * group_size;
  return static_cast<unsigned>((threads + detail::block_size - 1) / detail::block_size);
}

void check_level_offset(const octree_ref& tree, std::span<const std::int32_t> level_offset) {
  if (tree.node_count == 0) return;
  if (level_offset.size() != static_cast<std::size_t>(tree.depth) + 2 || level_offset.front() != 0 ||
      level_offset.back() != tree.node_count)
    throw std::invalid_argument("launch_level_kernels: level_offset must have depth + 2 entries from 0 to node_count "
                                "(use device_octree::level_offset())");
}

}  // namespace

std::string_view to_string(baseline_kind kind) noexcept {
  switch (kind) {
    case baseline_kind::level_kernels: return "level-kernels";
    case baseline_kind::level_graph: return "level-graph";
    case baseline_kind::last_arriver: return "last-arriver";
  }
  return "unknown";
}

baseline_kind parse_baseline_kind(std::string_view name) {
  std::string normal;
  for (const char c : name) normal += c == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const baseline_kind kind : all_baseline_kinds)
    if (normal == to_string(kind)) return kind;
  throw std::invalid_argument("unknown baseline '" + std::string(name) +
                              "' (expected level-kernels, level-graph or last-arriver)");
}

int auto_group_size(const octree_ref& tree) noexcept {
  // About four points per lane: large leaves get groups of 8 (each step of a group reads one full
  // 128-byte line of points), leaves of one or two points one thread each, where neighbouring
  // threads' leaves are neighbouring points and a warp's loads coalesce anyway.
  if (tree.leaf_count <= 0) return 1;
  const double mean_leaf = static_cast<double>(tree.point_total) / tree.leaf_count;
  int g = 1;
  while (g < 8 && 4.0 * (2 * g) <= mean_leaf) g *= 2;
  return g;
}

std::size_t upward_pass_bytes(const octree_ref& tree) noexcept {
  if (tree.node_count <= 0) return 0;
  const auto nodes = static_cast<std::size_t>(tree.node_count);
  return static_cast<std::size_t>(tree.point_total) * sizeof(trees::point) +
         (2 * nodes - 1) * sizeof(multipole<float>);
}

// ---- (a) one launch per level ------------------------------------------------------------------

void launch_level_kernels(const octree_ref& tree, std::span<const std::int32_t> level_offset, multipole<float>* out,
                          cudaStream_t stream, const baseline_options& options) {
  check_level_offset(tree, level_offset);
  const baseline_options o = resolve(tree, options);
  if (tree.node_count == 0) return;
  if (o.layout == level_layout::per_level) {
    for (std::size_t level = level_offset.size() - 1; level-- > 0;) {
      const std::int32_t begin = level_offset[level], end = level_offset[level + 1];
      if (end <= begin) continue;
      const std::int64_t groups = end - begin;
      with_shape(o.group_size, batch_for(o, groups * o.group_size), [&](auto g, auto b) {
        constexpr int G = decltype(g)::value, B = decltype(b)::value;
        detail::mixed_level_kernel<G, B><<<blocks_for(groups, G), detail::block_size, 0, stream>>>(tree, begin, end, out);
      });
      CANOPY_CUDA_TRY(cudaGetLastError());
    }
    return;
  }
  with_shape(o.group_size, 1, [&](auto g, auto) {
    constexpr int G = decltype(g)::value;
    detail::leaf_kernel<G><<<blocks_for(tree.node_count, G), detail::block_size, 0, stream>>>(tree, out);
  });
  CANOPY_CUDA_TRY(cudaGetLastError());
  // The deepest level holds only leaves; every level above it holds an internal node (the path to
  // a deepest leaf).
  for (std::size_t level = level_offset.size() - 2; level-- > 0;) {
    const std::int32_t begin = level_offset[level], end = level_offset[level + 1];
    if (end <= begin) continue;
    const std::int64_t groups = end - begin;
    with_shape(o.merge_group_size, batch_for(o, groups * o.merge_group_size), [&](auto g, auto b) {
      constexpr int G = decltype(g)::value, B = decltype(b)::value;
      detail::level_kernel<G, B><<<blocks_for(groups, G), detail::block_size, 0, stream>>>(tree, begin, end, out);
    });
    CANOPY_CUDA_TRY(cudaGetLastError());
  }
}

// ---- (b) the same launches in a CUDA graph ---------------------------------------------------

level_graph::level_graph(const octree_ref& tree, std::span<const std::int32_t> level_offset, multipole<float>* out,
                         const baseline_options& options) {
  check_level_offset(tree, level_offset);
  const baseline_options o = resolve(tree, options);
  if (tree.node_count == 0) return;

  // Capture on a private stream: the legacy default stream cannot be captured, and thread-local
  // capture mode keeps other threads' CUDA calls out of this graph.
  cudaStream_t capture = nullptr;
  CANOPY_CUDA_TRY(cudaStreamCreateWithFlags(&capture, cudaStreamNonBlocking));
  try {
    CANOPY_CUDA_TRY(cudaStreamBeginCapture(capture, cudaStreamCaptureModeThreadLocal));
    try {
      launch_level_kernels(tree, level_offset, out, capture, o);
    } catch (...) {
      cudaGraph_t partial = nullptr;
      (void)cudaStreamEndCapture(capture, &partial);
      if (partial != nullptr) (void)cudaGraphDestroy(partial);
      throw;
    }
    CANOPY_CUDA_TRY(cudaStreamEndCapture(capture, &graph_));
    CANOPY_CUDA_TRY(cudaGraphInstantiate(&exec_, graph_, 0));
    // Upload now so that the first replay does not pay for it.
    CANOPY_CUDA_TRY(cudaGraphUpload(exec_, capture));
    CANOPY_CUDA_TRY(cudaStreamSynchronize(capture));
  } catch (...) {
    (void)cudaStreamDestroy(capture);
    release();
    throw;
  }
  CANOPY_CUDA_TRY(cudaStreamDestroy(capture));
  kernel_count_ = 1;  // the leaves
  for (std::size_t level = 0; level + 2 < level_offset.size(); ++level)
    kernel_count_ += level_offset[level + 1] > level_offset[level] ? 1 : 0;
}

level_graph::level_graph(level_graph&& other) noexcept
    : graph_(std::exchange(other.graph_, nullptr)),
      exec_(std::exchange(other.exec_, nullptr)),
      kernel_count_(std::exchange(other.kernel_count_, 0)) {}

level_graph& level_graph::operator=(level_graph&& other) noexcept {
  if (this != &other) {
    release();
    graph_ = std::exchange(other.graph_, nullptr);
    exec_ = std::exchange(other.exec_, nullptr);
    kernel_count_ = std::exchange(other.kernel_count_, 0);
  }
  return *this;
}

level_graph::~level_graph() { release(); }

void level_graph::release() noexcept {
  if (exec_ != nullptr) (void)cudaGraphExecDestroy(exec_);
  if (graph_ != nullptr) (void)cudaGraphDestroy(graph_);
  exec_ = nullptr;
  graph_ = nullptr;
  kernel_count_ = 0;
}

void level_graph::launch(cudaStream_t stream) const {
  if (exec_ == nullptr) return;
  CANOPY_CUDA_TRY(cudaGraphLaunch(exec_, stream));
}

// ---- (c) last arriver climbs -----------------------------------------------------------------

void launch_last_arriver(const octree_ref& tree, std::int32_t* arrivals, multipole<float>* out, cudaStream_t stream,
                         const baseline_options& options) {
  const baseline_options o = resolve(tree, options);
  if (tree.leaf_count == 0) return;
  if (arrivals == nullptr) throw std::invalid_argument("launch_last_arriver: no arrival counters");
  const std::int64_t groups = tree.leaf_count;
  with_shape(o.group_size, batch_for(o, groups * o.group_size), [&](auto g, auto b) {
    constexpr int G = decltype(g)::value, B = decltype(b)::value;
    detail::last_arriver_kernel<G, B><<<blocks_for(groups, G), detail::block_size, 0, stream>>>(tree, arrivals, out);
  });
  CANOPY_CUDA_TRY(cudaGetLastError());
}

last_arriver::last_arriver(std::int32_t node_count)
    : arrivals_(static_cast<std::size_t>(node_count < 0 ? 0 : node_count)) {
  if (arrivals_.size() == 0) return;
  arrivals_.fill_bytes(0);
  // Complete before a run on any stream (a non-blocking stream does not wait for the default one).
  CANOPY_CUDA_TRY(cudaStreamSynchronize(nullptr));
}

void last_arriver::launch(const octree_ref& tree, multipole<float>* out, cudaStream_t stream,
                          const baseline_options& options) {
  if (static_cast<std::size_t>(tree.node_count) > arrivals_.size())
    throw std::invalid_argument("last_arriver::launch: counters for " + std::to_string(arrivals_.size()) +
                                " nodes, tree has " + std::to_string(tree.node_count));
  launch_last_arriver(tree, arrivals_.data(), out, stream, options);
}

// ---- runner ------------------------------------------------------------------------------------

baseline_runner::baseline_runner(const trees::device_octree& tree, trees::device_payloads<float>& payloads,
                                 const baseline_options& options)
    : tree_(tree.ref()),
      level_offset_(tree.level_offset().begin(), tree.level_offset().end()),
      out_(payloads.data()) {
  if (payloads.size() != tree.node_count())
    throw std::invalid_argument("baseline_runner: " + std::to_string(payloads.size()) + " payloads for " +
                                std::to_string(tree.node_count()) + " nodes");
  options_ = resolve(tree_, options);
  last_arriver_ = last_arriver(tree_.node_count);
  if (options_.layout != level_layout::automatic || tree_.node_count == 0) {
    if (options_.layout == level_layout::automatic) options_.layout = level_layout::leaves_first;
    graph_ = level_graph(tree_, level_offset_, out_, options_);
    return;
  }
  // Tuned on the tree, as its user would: both layouts captured and timed, the faster kept.
  cudaStream_t s = nullptr;
  CANOPY_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  try {
    canopy::cuda_event start, stop;
    float best_ms = 0;
    for (const level_layout layout : {level_layout::leaves_first, level_layout::per_level}) {
      baseline_options o = options_;
      o.layout = layout;
      level_graph g(tree_, level_offset_, out_, o);
      std::vector<float> ms;
      for (int i = 0; i < 10; ++i) {
        start.record(s);
        g.launch(s);
        stop.record(s);
        stop.synchronize();
        if (i >= 3) ms.push_back(canopy::elapsed_ms(start, stop));
      }
      std::sort(ms.begin(), ms.end());
      const float median = ms[ms.size() / 2];
      if (!graph_.kernel_count() || median < best_ms) {
        best_ms = median;
        graph_ = std::move(g);
        options_.layout = layout;
      }
    }
  } catch (...) {
    (void)cudaStreamDestroy(s);
    throw;
  }
  CANOPY_CUDA_TRY(cudaStreamDestroy(s));
}

void baseline_runner::run(baseline_kind kind, cudaStream_t stream) {
  switch (kind) {
    case baseline_kind::level_kernels: return launch_level_kernels(tree_, level_offset_, out_, stream, options_);
    case baseline_kind::level_graph: return graph_.launch(stream);
    case baseline_kind::last_arriver: return last_arriver_.launch(tree_, out_, stream, options_);
  }
  throw std::invalid_argument("baseline_runner::run: unknown baseline kind");
}

}  // namespace canopy::bench
