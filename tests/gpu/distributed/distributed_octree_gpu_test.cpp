// SPDX-License-Identifier: Apache-2.0
// The GPU path of canopy::distributed (device_distributed_octree over nccl_exchange, one rank per
// GPU) against the single-process pass over the union of the points: the check of the CPU test
// (distributed_check.hpp), over the same adversarial distributions, plus bad input on one rank.
// Run under mpiexec -n 2 and 4 on a machine with as many GPUs (CTest, label gpu); every test
// skips when this rank has no device.
#include "distributed_check.hpp"

#include <canopy/cuda/device_buffer.hpp>
#include <canopy/distributed/device_distributed_octree.hpp>
#include <canopy/distributed/nccl_exchange.hpp>
#include <canopy/distributed/watchdog.hpp>
#include <canopy/trees/generators.hpp>

#include <cuda_runtime.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>

namespace cd = canopy::distributed;
namespace ct = canopy::trees;
using namespace distributed_check;

namespace {

// The longest the whole program may run on a rank before its watchdog ends it (and mpiexec the
// others) with a line naming the rank: a hang the tests did not foresee still ends, in an error.
constexpr auto program_limit = std::chrono::seconds(240);

// One NCCL communicator for the whole program (its set-up costs a few hundred ms), on a stream of
// this rank's device; null when any rank has no device.
struct gpu_world {
  std::unique_ptr<cd::watchdog> dog;
  cudaStream_t stream = nullptr;
  std::unique_ptr<cd::nccl_exchange> ex;
};

gpu_world& world() {
  static gpu_world w = [] {
    gpu_world g;
    const cd::mpi_context ctx(MPI_COMM_WORLD);
    g.dog = std::make_unique<cd::watchdog>(ctx, program_limit);
    g.dog->enter("distributed_octree_gpu_test");
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
    if (ctx.min(devices) == 0) return g;
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
    int local_rank = 0;
    MPI_Comm_rank(local, &local_rank);
    MPI_Comm_free(&local);
    const int device = local_rank % devices;
    (void)cudaSetDevice(device);
    (void)cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking);
    g.ex = std::make_unique<cd::nccl_exchange>(ctx, device, g.stream, std::chrono::seconds(60));
    return g;
  }();
  return w;
}

// Whether `stream` drains within `limit` (polled; never an unbounded wait).
bool drains(cudaStream_t stream, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    const cudaError_t e = cudaStreamQuery(stream);
    if (e == cudaSuccess) return true;
    if (e != cudaErrorNotReady || std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

// cudaDeviceSynchronize, waited for at most `limit` (on a thread of its own, left behind when it
// does not return): whether it returned cudaSuccess in time.
bool device_idle(int device, std::chrono::milliseconds limit) {
  struct shared {
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    cudaError_t result = cudaSuccess;
  };
  auto s = std::make_shared<shared>();
  std::thread([s, device] {
    (void)cudaSetDevice(device);
    const cudaError_t e = cudaDeviceSynchronize();
    {
      std::lock_guard lock(s->m);
      s->done = true;
      s->result = e;
    }
    s->cv.notify_all();
  }).detach();
  std::unique_lock lock(s->m);
  return s->cv.wait_for(lock, limit, [&] { return s->done; }) && s->result == cudaSuccess;
}

struct device_run {
  cd::distributed_octree tree;
  cd::distributed_moments moments;
};

// The device path, its results brought to the host in distributed_octree's form.
device_run run_on_device(const cd::mpi_context& ctx, const std::vector<ct::point>& mine,
                         const cd::decomposition_options& o) {
  canopy::device_buffer<ct::point> points(mine);
  cd::device_distributed_octree d;
  d.build(ctx, *world().ex, points.data(), mine.size(), o);
  ct::upward_options pass;
  pass.backend = ct::pass_backend::gpu;
  pass.tasks = ct::default_pass_tasks(pass.backend);
  device_run r;
  r.moments.top = d.upward(ctx, *world().ex, pass);
  r.moments.local = d.download_local_payloads();
  r.tree.top = d.top();
  r.tree.local = d.download_local();
  r.tree.branches = d.branches();
  return r;
}

coverage check(const std::vector<ct::point>& all, const distribution& start, const cd::decomposition_options& o) {
  return distributed_check::check_against_single_process(all, start, o, run_on_device);
}

class DistributedOctreeGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!world().ex) GTEST_SKIP() << "a rank has no CUDA device";
  }
  void TearDown() override {
    if (world().ex) {
      EXPECT_TRUE(device_idle(world().ex->device(), std::chrono::seconds(30))) << "the device did not drain in 30 s";
      EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    }
  }
};

}  // namespace

TEST_F(DistributedOctreeGpu, PlummerInBlocks) { check(ct::generate_plummer(200000, 7), by_blocks, leaf(32)); }

TEST_F(DistributedOctreeGpu, AllPointsStartOnOneRank) { check(ct::generate_plummer(50000, 11), all_on_last, leaf(16)); }

TEST_F(DistributedOctreeGpu, DeepSubtreesUnderLargeBuckets) {
  check(ct::generate_uniform(100000, 37), round_robin, leaf(8, 5000));
}

TEST_F(DistributedOctreeGpu, NoPointsAnywhere) { check({}, by_blocks, leaf(8)); }

TEST_F(DistributedOctreeGpu, FewerPointsThanRanks) { check(ct::generate_uniform(3, 5), round_robin, leaf(1)); }

TEST_F(DistributedOctreeGpu, IdenticalPointsAcrossARankBoundary) {
  std::vector<ct::point> all = ct::generate_uniform(6000, 9);
  all.insert(all.begin() + 3000, 9000, ct::point{0.5f, 0.5f, 0.5f, 0.001f});
  check(all, by_blocks, leaf(8));
}

TEST_F(DistributedOctreeGpu, EachRankHoldsOneCell) {
  std::vector<ct::point> all;
  for (int c = 0; c < 4; ++c) all.insert(all.end(), 2000, ct::point{0.1f + 0.25f * c, 0.3f, 0.7f - 0.1f * c, 1.0f});
  check(all, round_robin, leaf(8));
}

// The exchange contract of the CPU test, over NCCL on device memory.
TEST_F(DistributedOctreeGpu, NcclExchangeKeepsTheContract) {
  check_exchange_contract(
      *world().ex,
      [](const void* from, std::size_t n) {
        canopy::device_buffer<std::byte> b(n);
        if (n != 0) {
          EXPECT_EQ(cudaMemcpy(b.data(), from, n, cudaMemcpyHostToDevice), cudaSuccess);
        }
        return b;
      },
      [](canopy::device_buffer<std::byte>& b, void* to, std::size_t n) {
        if (n != 0) {
          EXPECT_EQ(cudaMemcpy(to, b.data(), n, cudaMemcpyDeviceToHost), cudaSuccess);
        }
      });
}

TEST_F(DistributedOctreeGpu, BadInputOnOneRankStopsEveryRank) {
  const cd::mpi_context ctx(MPI_COMM_WORLD);
  std::vector<ct::point> mine = ct::generate_uniform(1000, 29 + static_cast<std::uint64_t>(ctx.rank()));
  const int bad = ctx.size() - 1;
  if (ctx.rank() == bad) mine[7].z = std::numeric_limits<float>::infinity();
  canopy::device_buffer<ct::point> points(mine);
  cd::device_distributed_octree d;
  try {
    d.build(ctx, *world().ex, points.data(), mine.size(), leaf(8));
    ADD_FAILURE() << "no error";
  } catch (const cd::distributed_error& e) {
    EXPECT_EQ(e.rank(), bad);
    EXPECT_NE(e.cause().find("point 7"), std::string::npos) << e.what();
  }
}

// A rank that never joins a collective: rank 0's all-reduce on a fresh communicator waits for its
// peers (NCCL connects them on a communicator's first collective), gives up at the exchange's
// deadline and aborts the communicator, and the agreement names rank 0 on every rank; every rank
// then aborts its own communicator, and the stream drains. Each wait is bounded; the whole test
// must end within a few deadlines. On a communicator and stream of its own (it ends aborted), and
// last.
TEST_F(DistributedOctreeGpu, AMissingPeerEndsInAnErrorNotAHang) {
  const cd::mpi_context ctx(MPI_COMM_WORLD);
  if (ctx.size() < 2) GTEST_SKIP() << "needs two ranks";
  const auto start = std::chrono::steady_clock::now();
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  cd::nccl_exchange ex(ctx, world().ex->device(), stream, std::chrono::seconds(2));
  canopy::device_buffer<std::uint64_t> value(1);
  try {
    ctx.phase("lonely all-reduce", [&] {
      if (ctx.rank() == 0) {
        ex.all_reduce(value.data(), 1, cd::element_type::u64, cd::reduce_op::sum);
        ex.synchronize();  // rank 1 never comes
      }
    });
    ADD_FAILURE() << "no error";
  } catch (const cd::distributed_error& e) {
    EXPECT_EQ(e.rank(), 0);
    EXPECT_NE(e.cause().find("did not complete within"), std::string::npos) << e.what();
  }
  ex.abort();  // rank 0's is aborted already; the others' communicators have lost their peer
  const bool drained = drains(stream, std::chrono::seconds(20));
  EXPECT_TRUE(drained) << "the aborted collective still runs 20 s after the abort";
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 60.0) << "the missing peer took " << seconds << " s to end in an error";
  if (drained) (void)cudaStreamDestroy(stream);  // else left: destroying it could wait for the kernel
}

int main(int argc, char** argv) {
  return run_all_tests_under_mpi(argc, argv, [] {
    gpu_world& w = world();
    w.ex.reset();  // bounded: it waits for the stream and the finalisation at most its timeout
    if (w.stream != nullptr) (void)cudaStreamDestroy(w.stream);
    if (w.dog) {
      w.dog->leave();
      w.dog.reset();
    }
  });
}
