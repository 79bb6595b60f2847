// SPDX-License-Identifier: Apache-2.0
// The benchmark's axes: the depth list, the variant names, the sizes of complete trees.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <climits>
#include <set>
#include <stdexcept>
#include <string>

#include "common/text.hpp"
#include "octree_bench.hpp"

namespace canopy::bench {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

int parse_depth(std::string_view item, std::string_view number, int max_depth) {
  number = trim(number);
  int value = -1;
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (number.empty() || ec != std::errc{} || end != number.data() + number.size())
    throw std::invalid_argument("--depths: '" + std::string(item) + "' is not a depth or a range like 1-8");
  if (value < 0 || value > max_depth)
    throw std::invalid_argument("--depths: depth " + std::string(number) + " is outside 0.." + std::to_string(max_depth));
  return value;
}

variant scheduler_variant(canopy::mode m, std::string_view backend, bool as_cpu_baseline) {
  variant v;
  v.mode = m;
  if (as_cpu_baseline) {
    v.name = "cpu:" + std::string(canopy::to_string(m));
    v.backend = backend_cpu;
    v.baseline = true;
  } else {
    v.name = std::string(canopy::to_string(m));
    v.backend = std::string(backend);
  }
  return v;
}

// The same mode over another task kind, e.g. twig tasks (a twig computes its leaves and itself in
// one task): "MODE+KIND".
variant kind_variant(canopy::mode m, std::string_view backend, trees::pass_tasks kind) {
  variant v = scheduler_variant(m, backend, false);
  if (kind == trees::pass_tasks::node) return v;
  v.name.append("+").append(trees::to_string(kind));
  v.tasks = kind;
  return v;
}

// The twig variants in the default set: the modes that were fastest with twigs on an H100
// (lockfree-tree at depth 8, continuation at depth 5, warp-rounds on the Plummer trees;
// bench/RESULTS.md).
constexpr canopy::mode default_twig_modes[] = {canopy::mode::lockfree_tree, canopy::mode::continuation,
                                               canopy::mode::warp_rounds};

variant reference_variant() { return variant{"reference", std::string(backend_host), true, std::nullopt}; }

variant gpu_baseline_variant(std::string_view name) {
  return variant{std::string(name), std::string(backend_gpu), true, std::nullopt};
}

}  // namespace

std::vector<int> parse_depth_list(std::string_view text, int max_depth) {
  if (trim(text).empty()) throw std::invalid_argument("--depths: empty list (give e.g. 1-8 or 3,5,7)");
  std::set<int> depths;
  for (std::string_view item : split(text, ',')) {
    const std::string_view shown = trim(item);
    if (shown.empty()) throw std::invalid_argument("--depths: empty item in '" + std::string(text) + "'");
    const auto dash = shown.find('-');
    if (dash == std::string_view::npos) {
      depths.insert(parse_depth(shown, shown, max_depth));
      continue;
    }
    const int lo = parse_depth(shown, shown.substr(0, dash), max_depth);
    const int hi = parse_depth(shown, shown.substr(dash + 1), max_depth);
    if (hi < lo) throw std::invalid_argument("--depths: range '" + std::string(shown) + "' runs backwards");
    for (int d = lo; d <= hi; ++d) depths.insert(d);
  }
  return {depths.begin(), depths.end()};
}

std::vector<variant> default_variants(std::string_view backend) {
  std::vector<variant> out;
  for (canopy::mode m : canopy::all_modes) out.push_back(scheduler_variant(m, backend, false));
  for (canopy::mode m : default_twig_modes) out.push_back(kind_variant(m, backend, trees::pass_tasks::twig));
  if (backend == backend_gpu) {
    for (std::string_view b : gpu_baseline_names) out.push_back(gpu_baseline_variant(b));
    out.push_back(reference_variant());
    out.push_back(scheduler_variant(canopy::mode::continuation, backend, true));
  } else {
    out.push_back(reference_variant());
  }
  return out;
}

std::vector<variant> parse_variant_list(std::string_view list, std::string_view backend) {
  if (backend != backend_gpu && backend != backend_cpu)
    throw std::invalid_argument("scheduler backend must be gpu or cpu, not '" + std::string(backend) + "'");
  if (trim(list).empty()) return default_variants(backend);
  std::vector<variant> out;
  auto add = [&](variant v) {
    if (std::none_of(out.begin(), out.end(), [&](const variant& o) { return o.name == v.name && o.backend == v.backend; }))
      out.push_back(std::move(v));
  };
  const auto defaults = default_variants(backend);
  for (std::string_view raw : split(list, ',')) {
    const std::string_view item = trim(raw);
    if (item.empty()) throw std::invalid_argument("--modes: empty item in '" + std::string(list) + "'");
    if (item == "all") {
      for (const variant& v : defaults) add(v);
    } else if (item == "modes") {
      for (canopy::mode m : canopy::all_modes) add(scheduler_variant(m, backend, false));
    } else if (item == "twigs") {
      for (canopy::mode m : canopy::all_modes) add(kind_variant(m, backend, trees::pass_tasks::twig));
    } else if (const auto plus = item.rfind('+');
               plus != std::string_view::npos && trees::parse_pass_tasks(item.substr(plus + 1))) {
      const std::string_view name = item.substr(0, plus);
      const auto tm = canopy::parse_mode(name);
      if (!tm) throw std::invalid_argument("--modes: '" + std::string(item) + "': unknown mode '" + std::string(name) + "'");
      add(kind_variant(*tm, backend, *trees::parse_pass_tasks(item.substr(plus + 1))));
    } else if (item == "baselines") {
      for (const variant& v : defaults)
        if (v.baseline) add(v);
    } else if (item == "reference") {
      add(reference_variant());
    } else if (const auto m = canopy::parse_mode(item)) {
      add(scheduler_variant(*m, backend, false));
    } else if (item == "cpu" || item.starts_with("cpu:")) {
      const std::string_view name = item == "cpu" ? std::string_view("continuation") : item.substr(4);
      const auto cm = canopy::parse_mode(name);
      if (!cm) throw std::invalid_argument("--modes: '" + std::string(item) + "': unknown mode '" + std::string(name) + "'");
      // On the cpu backend the modes already run there: cpu:MODE is MODE.
      add(scheduler_variant(*cm, backend, backend == backend_gpu));
    } else if (std::find(std::begin(gpu_baseline_names), std::end(gpu_baseline_names), item) !=
               std::end(gpu_baseline_names)) {
      add(gpu_baseline_variant(item));
    } else {
      std::string known;
      for (canopy::mode m : canopy::all_modes) known += std::string(canopy::to_string(m)) + ", ";
      for (std::string_view b : gpu_baseline_names) known += std::string(b) + ", ";
      known += "reference, cpu, cpu:MODE, ";
      for (trees::pass_tasks k : trees::all_pass_tasks)
        if (k != trees::pass_tasks::node) known += "MODE+" + std::string(trees::to_string(k)) + ", ";
      known += "modes, twigs, baselines, all";
      throw std::invalid_argument("--modes: unknown mode or baseline '" + std::string(item) + "' (known: " + known + ")");
    }
  }
  return out;
}

std::size_t upward_pass_bytes(const trees::octree& tree) noexcept {
  const auto nodes = static_cast<std::size_t>(tree.node_count());
  if (nodes == 0) return 0;
  return tree.points.size() * sizeof(trees::point) + (2 * nodes - 1) * sizeof(trees::multipole<float>);
}

long long complete_node_count(int depth) noexcept {
  if (depth < 0) return 0;
  if (depth > 20) return LLONG_MAX;
  return ((1LL << (3 * (depth + 1))) - 1) / 7;
}

long long complete_point_count(int depth, int per_leaf) noexcept {
  if (depth < 0 || per_leaf < 1) return 0;
  if (3 * depth > 62) return LLONG_MAX;
  const long long leaves = 1LL << (3 * depth);
  if (leaves > LLONG_MAX / per_leaf) return LLONG_MAX;
  return leaves * per_leaf;
}

}  // namespace canopy::bench
