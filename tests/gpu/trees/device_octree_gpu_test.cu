// SPDX-License-Identifier: Apache-2.0
// device_octree / device_payloads / octree_ref: the device copies equal the host arrays, the ref
// works by value in a user's own kernel, ownership moves, bad input and CUDA failures throw typed
// errors; and the GPU test support's skip rule. Label `gpu`; the tests that need a device skip
// themselves without one.
#include <gtest/gtest.h>

#include <canopy/passes/device_octree.cuh>
#include <canopy/trees/generators.hpp>
#include <canopy/trees/multipole.hpp>
#include <canopy/trees/octree.hpp>

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "gpu_test.hpp"

namespace {

namespace ct = canopy::trees;

static_assert(std::is_trivially_copyable_v<ct::octree_ref>);
static_assert(!std::is_copy_constructible_v<ct::device_octree>);
static_assert(std::is_nothrow_move_constructible_v<ct::device_octree>);
static_assert(!std::is_copy_constructible_v<ct::device_payloads<float>>);
static_assert(std::is_nothrow_move_constructible_v<ct::device_payloads<float>>);

template <class T>
std::vector<T> download(const T* device, std::size_t n) {
  std::vector<T> host(n);
  if (n != 0) {
    const cudaError_t err = cudaMemcpy(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost);
    if (err != cudaSuccess) throw std::runtime_error(std::string("cudaMemcpy: ") + cudaGetErrorString(err));
  }
  return host;
}

// The test support's skip rule (gpu_test.hpp), with no device needed: only a missing device or a
// missing driver skips; any other CUDA error must fail the GPU tests instead of hiding them.
TEST(GpuTestSupport, OnlyAMissingDeviceOrDriverSkips) {
  EXPECT_TRUE(canopy::test::means_no_gpu(cudaErrorNoDevice, 0));
  EXPECT_TRUE(canopy::test::means_no_gpu(cudaErrorInsufficientDriver, 0));
  EXPECT_TRUE(canopy::test::means_no_gpu(cudaSuccess, 0));
  EXPECT_FALSE(canopy::test::means_no_gpu(cudaSuccess, 1));
  for (const cudaError_t broken : {cudaErrorUnknown, cudaErrorSystemDriverMismatch, cudaErrorInitializationError,
                                   cudaErrorDevicesUnavailable, cudaErrorCompatNotSupportedOnDevice})
    EXPECT_FALSE(canopy::test::means_no_gpu(broken, 0)) << cudaGetErrorName(broken);
}

bool same_points(const std::vector<ct::point>& a, const std::vector<ct::point>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].x != b[i].x || a[i].y != b[i].y || a[i].z != b[i].z || a[i].m != b[i].m) return false;
  return true;
}

void expect_device_copy(const ct::octree& tree, const ct::device_octree& d) {
  const ct::octree_ref r = d.ref();
  EXPECT_EQ(r.node_count, tree.node_count());
  EXPECT_EQ(r.leaf_count, static_cast<std::int32_t>(tree.leaves.size()));
  EXPECT_EQ(r.point_total, static_cast<std::int32_t>(tree.points.size()));
  EXPECT_EQ(r.depth, tree.depth);
  EXPECT_EQ(d.node_count(), r.node_count);
  EXPECT_EQ(d.leaf_count(), r.leaf_count);
  EXPECT_EQ(d.point_total(), r.point_total);
  EXPECT_EQ(d.depth(), r.depth);
  const auto n = static_cast<std::size_t>(tree.node_count());
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(r.points) % 16, 0u) << "points must allow 16-byte loads";
  EXPECT_TRUE(same_points(download(r.points, tree.points.size()), tree.points));
  EXPECT_EQ(download(r.parent, n), tree.parent);
  EXPECT_EQ(download(r.first_child, n), tree.first_child);
  EXPECT_EQ(download(r.child_count, n), tree.child_count);
  EXPECT_EQ(download(r.point_begin, n), tree.point_begin);
  EXPECT_EQ(download(r.point_count, n), tree.point_count);
  EXPECT_EQ(download(r.leaves, tree.leaves.size()), tree.leaves);
  EXPECT_EQ(download(r.level_offset, tree.level_offset.size()), tree.level_offset);
  const std::vector<std::int32_t> host_levels(d.level_offset().begin(), d.level_offset().end());
  EXPECT_EQ(host_levels, tree.level_offset);
}

// A user's own kernel over the ref, passed by value: every non-root node's point range lies in its
// parent's and every child names its parent. Counts violations.
__global__ void check_links(ct::octree_ref tree, int* violations) {
  const std::int32_t n = static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (n >= tree.node_count) return;
  bool ok = true;
  const std::int32_t p = tree.parent[n];
  if (n == 0) {
    ok = p == -1 && tree.point_begin[0] == 0 && tree.point_count[0] == tree.point_total;
  } else {
    ok = p >= 0 && p < n && tree.point_begin[p] <= tree.point_begin[n] &&
         tree.point_begin[n] + tree.point_count[n] <= tree.point_begin[p] + tree.point_count[p] &&
         tree.first_child[p] <= n && n < tree.first_child[p] + tree.child_count[p];
  }
  for (std::int32_t c = 0; c < tree.child_count[n]; ++c) ok = ok && tree.parent[tree.first_child[n] + c] == n;
  if (!ok) atomicAdd(violations, 1);
}

class device_octree_gpu : public canopy::test::gpu_test {};

TEST_F(device_octree_gpu, copies_equal_host_arrays) {
  for (const ct::octree& tree :
       {ct::build_complete_octree(0, 3, 7), ct::build_complete_octree(3, 5, 7),
        ct::build_octree(ct::generate_plummer(1001, 7)), ct::build_octree(std::vector<ct::point>{})}) {
    SCOPED_TRACE("nodes " + std::to_string(tree.node_count()));
    const ct::device_octree d(tree);
    expect_device_copy(tree, d);
  }
}

TEST_F(device_octree_gpu, ref_works_by_value_in_a_kernel) {
  const ct::octree tree = ct::build_octree(ct::generate_plummer(100000, 11), ct::build_options{8, 21});
  const ct::device_octree d(tree);
  canopy::device_buffer<int> violations(1);
  violations.fill_bytes(0);
  check_links<<<(d.node_count() + 255) / 256, 256>>>(d.ref(), violations.data());
  CANOPY_TEST_CUDA(cudaGetLastError());
  EXPECT_EQ(violations.download()[0], 0);
}

TEST_F(device_octree_gpu, moves_transfer_ownership) {
  const ct::octree tree = ct::build_complete_octree(2, 4, 3);
  ct::device_octree a(tree);
  const ct::octree_ref before = a.ref();
  ct::device_octree b(std::move(a));
  EXPECT_EQ(b.ref().points, before.points);
  EXPECT_EQ(b.ref().parent, before.parent);
  EXPECT_EQ(a.node_count(), 0);  // NOLINT(bugprone-use-after-move): moved-from is documented empty
  EXPECT_EQ(a.ref().points, nullptr);
  EXPECT_TRUE(a.level_offset().empty());
  ct::device_octree c;
  c = std::move(b);
  expect_device_copy(tree, c);
  c = ct::device_octree(ct::build_complete_octree(1, 2, 3));  // the old arrays are freed
  EXPECT_EQ(c.node_count(), 9);
}

TEST_F(device_octree_gpu, payloads_round_trip) {
  ct::device_payloads<float> p(5);
  EXPECT_EQ(p.size(), 5);
  EXPECT_EQ(p.bytes(), 5 * sizeof(ct::multipole<float>));
  std::vector<ct::multipole<float>> host(5, ct::multipole_identity<float>());
  for (std::size_t i = 0; i < host.size(); ++i) {
    host[i].count = static_cast<std::uint32_t>(i * 3);
    host[i].mass = static_cast<float>(i) + 0.5f;
    host[i].m2[5] = -static_cast<float>(i);
  }
  p.upload(host);
  const auto back = p.download();
  ASSERT_EQ(back.size(), host.size());
  for (std::size_t i = 0; i < host.size(); ++i) {
    EXPECT_EQ(back[i].count, host[i].count);
    EXPECT_EQ(back[i].mass, host[i].mass);
    EXPECT_EQ(back[i].m2[5], host[i].m2[5]);
    EXPECT_EQ(back[i].lo[0], host[i].lo[0]);
  }
  EXPECT_THROW(p.upload(std::vector<ct::multipole<float>>(4)), std::invalid_argument);
  ct::device_payloads<double> q(3);
  EXPECT_EQ(q.download().size(), 3u);
  ct::device_payloads<float> moved(std::move(p));
  EXPECT_EQ(moved.size(), 5);
  EXPECT_EQ(p.size(), 0);  // NOLINT(bugprone-use-after-move)
}

// ---- host-only behaviour: no device needed ------------------------------------------------------

TEST(device_octree_host, empty_owner_makes_no_cuda_calls) {
  const ct::device_octree d;
  const ct::octree_ref r = d.ref();
  EXPECT_EQ(r.node_count, 0);
  EXPECT_EQ(r.points, nullptr);
  const ct::device_octree from_default{ct::octree{}};
  EXPECT_EQ(from_default.node_count(), 0);
  const ct::device_payloads<float> none(0);
  EXPECT_TRUE(none.download().empty());
}

TEST(device_octree_host, malformed_octree_is_rejected_before_any_copy) {
  ct::octree tree = ct::build_complete_octree(1, 1, 1);
  ct::octree short_parent = tree;
  short_parent.parent.pop_back();
  EXPECT_THROW(ct::device_octree{short_parent}, std::invalid_argument);
  ct::octree bad_levels = tree;
  bad_levels.level_offset.push_back(9);
  EXPECT_THROW(ct::device_octree{bad_levels}, std::invalid_argument);
  ct::octree bad_total = tree;
  bad_total.level_offset.back() = 8;
  EXPECT_THROW(ct::device_octree{bad_total}, std::invalid_argument);
  EXPECT_THROW(ct::device_payloads<float>(-1), std::invalid_argument);
}

TEST(device_octree_host, cuda_failures_throw_typed_errors_with_location) {
  try {
    CANOPY_CUDA_TRY(cudaErrorInvalidValue);
    FAIL() << "no exception";
  } catch (const canopy::cuda_error& e) {
    EXPECT_EQ(e.cuda_code(), cudaErrorInvalidValue);
    const std::string what = e.what();
    EXPECT_NE(what.find("device_octree_gpu_test.cu:"), std::string::npos) << what;
    EXPECT_NE(what.find("cudaErrorInvalidValue"), std::string::npos) << what;
  }
  EXPECT_NO_THROW(CANOPY_CUDA_TRY(cudaSuccess));
}

}  // namespace
