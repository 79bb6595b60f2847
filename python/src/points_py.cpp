// SPDX-License-Identifier: Apache-2.0
// Points and octrees: the generators, every point file the library reads (and its two written
// formats), and the host octree, whose arrays Python sees as read-only NumPy views (no copies)
// that keep the tree alive.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "canopy/trees/errors.hpp"
#include "canopy/trees/generators.hpp"
#include "canopy/trees/octree.hpp"
#include "canopy/trees/point_io.hpp"
#include "canopy/trees/threads.hpp"
#include "canopy_py.hpp"

namespace canopy::python {

namespace {

namespace trees = canopy::trees;
using points_in = nb::ndarray<const float, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

nb::ndarray<nb::numpy, float> points_array(std::vector<trees::point>&& points) {
  const std::size_t n = points.size();
  return owned_array<float>(std::move(points), {n, 4});
}

// The Python layer hands (n, 4) float32 C-ordered arrays; copied into points (16-byte aligned,
// which a NumPy buffer need not be).
std::vector<trees::point> points_from(const points_in& a, const char* source) {
  if (a.shape(1) != 4)
    throw trees::input_error(source, "points must have shape (n, 4) (x, y, z, m), not (n, " + std::to_string(a.shape(1)) + ")");
  std::vector<trees::point> out(a.shape(0));
  if (!out.empty()) std::memcpy(out.data(), a.data(), out.size() * sizeof(trees::point));
  return out;
}

trees::read_options read_options_from(const std::string& family, int gadget_type) {
  trees::read_options o;
  o.family = trees::parse_tipsy_family(family);  // input_error naming the family
  if (gadget_type < -1 || gadget_type > 5)
    throw trees::input_error("type", "a Gadget particle type is 0..5 (or None for all), not " + std::to_string(gadget_type));
  o.gadget_type = gadget_type;
  return o;
}

// Read-only views of the tree's arrays; reference_internal ties each to the Octree object.
template <class T>
nb::ndarray<nb::numpy, const T, nb::ndim<1>> view(const std::vector<T>& v) {
  return nb::ndarray<nb::numpy, const T, nb::ndim<1>>(v.data(), {v.size()});
}

// A node's cell as two (nodes, 3) views of the double box array: lo then hi, stride 6.
nb::ndarray<nb::numpy, const double, nb::ndim<2>> cell_view(const trees::octree& t, bool hi) {
  static_assert(sizeof(trees::box) == 6 * sizeof(double));
  const double* base = t.bounds.empty() ? nullptr : (hi ? t.bounds.front().hi : t.bounds.front().lo);
  return nb::ndarray<nb::numpy, const double, nb::ndim<2>>(base, {t.bounds.size(), 3}, nb::handle(), {6, 1});
}

}  // namespace

void bind_points(nb::module_& m) {
  constexpr auto ref = nb::rv_policy::reference_internal;

  m.def("set_host_threads", &trees::set_host_threads, nb::arg("count"),
        "Threads for generating and building (0 = all cores); results never depend on it");
  m.def("host_threads", &trees::host_threads);

  m.def("generate", [](const std::string& dist, std::size_t n, std::uint64_t seed, int clusters) {
    const trees::distribution d = trees::parse_distribution(dist);  // input_error for an unknown name
    std::vector<trees::point> p;
    {
      nb::gil_scoped_release unlocked;
      switch (d) {
        case trees::distribution::uniform: p = trees::generate_uniform(n, seed); break;
        case trees::distribution::plummer: p = trees::generate_plummer(n, seed); break;
        case trees::distribution::clusters: p = trees::generate_clusters(n, seed, clusters); break;
        case trees::distribution::lattice:
          throw trees::input_error("generate: dist", "lattice points take depth and per_leaf: use generate_lattice");
      }
    }
    return points_array(std::move(p));
  }, nb::arg("dist"), nb::arg("n"), nb::arg("seed"), nb::arg("clusters"));
  m.def("generate_lattice", [](int depth, int per_leaf, std::uint64_t seed) {
    std::vector<trees::point> p;
    {
      nb::gil_scoped_release unlocked;
      p = trees::generate_lattice(depth, per_leaf, seed);
    }
    return points_array(std::move(p));
  }, nb::arg("depth"), nb::arg("per_leaf"), nb::arg("seed"));

  m.def("read_points", [](const std::string& path, const std::string& family, int gadget_type) {
    const trees::read_options o = read_options_from(family, gadget_type);
    std::vector<trees::point> p;
    {
      nb::gil_scoped_release unlocked;
      p = trees::read_points(path, o);
    }
    return points_array(std::move(p));
  }, nb::arg("path"), nb::arg("family"), nb::arg("gadget_type"));
  m.def("parse_points", [](nb::bytes data, const std::string& family, int gadget_type, const std::string& source) {
    const trees::read_options o = read_options_from(family, gadget_type);
    const std::span<const std::byte> bytes(static_cast<const std::byte*>(data.data()), data.size());
    std::vector<trees::point> p;
    {
      nb::gil_scoped_release unlocked;  // `data` is immutable and kept alive by the caller's frame
      p = trees::parse_points(bytes, o, source);
    }
    return points_array(std::move(p));
  }, nb::arg("data"), nb::arg("family"), nb::arg("gadget_type"), nb::arg("source"));
  m.def("detect_format", [](const std::string& path) { return std::string(trees::to_string(trees::detect_point_format(path))); },
        nb::arg("path"));
  m.def("write_points", [](const std::string& path, const points_in& a) {
    const auto p = points_from(a, "write_points");
    nb::gil_scoped_release unlocked;
    trees::write_points(path, p);
  }, nb::arg("path"), nb::arg("points"));

  nb::class_<trees::octree>(m, "Octree", "The host octree (octree.hpp): level-ordered structure of arrays")
      .def_ro("depth", &trees::octree::depth)
      .def_prop_ro("node_count", &trees::octree::node_count)
      .def_prop_ro("leaf_count", [](const trees::octree& t) { return t.leaves.size(); })
      .def_prop_ro("point_count", [](const trees::octree& t) { return t.points.size(); })
      .def_prop_ro("level_offset", [](const trees::octree& t) { return view(t.level_offset); }, ref)
      .def_prop_ro("parent", [](const trees::octree& t) { return view(t.parent); }, ref)
      .def_prop_ro("first_child", [](const trees::octree& t) { return view(t.first_child); }, ref)
      .def_prop_ro("child_count", [](const trees::octree& t) { return view(t.child_count); }, ref)
      .def_prop_ro("point_begin", [](const trees::octree& t) { return view(t.point_begin); }, ref)
      .def_prop_ro("point_count_per_node", [](const trees::octree& t) { return view(t.point_count); }, ref)
      .def_prop_ro("level", [](const trees::octree& t) { return view(t.level); }, ref)
      .def_prop_ro("leaves", [](const trees::octree& t) { return view(t.leaves); }, ref)
      .def_prop_ro("cell_lo", [](const trees::octree& t) { return cell_view(t, false); }, ref)
      .def_prop_ro("cell_hi", [](const trees::octree& t) { return cell_view(t, true); }, ref)
      .def_prop_ro("points", [](const trees::octree& t) {
        const float* base = t.points.empty() ? nullptr : &t.points.front().x;
        return nb::ndarray<nb::numpy, const float, nb::ndim<2>>(base, {t.points.size(), 4});
      }, ref)
      .def("check", [](const trees::octree& t) {
        nb::gil_scoped_release unlocked;
        trees::check_invariants(t);
      }, "Checks the layout invariants; raises canopy.InvariantError naming the first bad node");

  m.def("build_octree", [](const points_in& a, int max_leaf, int max_depth) {
    nb::gil_scoped_release unlocked;  // `a` stays alive (the caller holds it) and is only read
    const auto p = points_from(a, "build_octree");
    return trees::build_octree(p, trees::build_options{max_leaf, max_depth});
  }, nb::arg("points"), nb::arg("max_leaf"), nb::arg("max_depth"));
  m.def("complete_octree", [](int depth, int per_leaf, std::uint64_t seed) {
    nb::gil_scoped_release unlocked;
    return trees::build_complete_octree(depth, per_leaf, seed);
  }, nb::arg("depth"), nb::arg("per_leaf"), nb::arg("seed"));
}

}  // namespace canopy::python
