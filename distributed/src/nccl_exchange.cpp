// SPDX-License-Identifier: Apache-2.0
#include <canopy/distributed/nccl_exchange.hpp>

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

namespace canopy::distributed {

namespace {

ncclDataType_t nccl_type(element_type t) {
  switch (t) {
    case element_type::u64: return ncclUint64;
    case element_type::f32: return ncclFloat32;
    case element_type::f64: return ncclFloat64;
  }
  return ncclChar;
}

ncclRedOp_t nccl_op(reduce_op op) {
  switch (op) {
    case reduce_op::sum: return ncclSum;
    case reduce_op::min: return ncclMin;
    case reduce_op::max: return ncclMax;
  }
  return ncclSum;
}

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("nccl_exchange: ") + what + ": " + cudaGetErrorString(e));
}

std::string seconds(std::chrono::milliseconds t) {
  char s[32];
  std::snprintf(s, sizeof s, "%.3g", static_cast<double>(t.count()) / 1000.0);
  return s;
}

// A wait that spins for its first millisecond (a collective usually ends in microseconds; a
// sleep's granularity would be its latency), then sleeps 50 us a poll.
class poller {
 public:
  explicit poller(std::chrono::milliseconds limit)
      : start_(std::chrono::steady_clock::now()), deadline_(start_ + limit) {}
  bool expired() const { return std::chrono::steady_clock::now() > deadline_; }
  void pause() const {
    if (std::chrono::steady_clock::now() - start_ < std::chrono::milliseconds(1)) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

 private:
  std::chrono::steady_clock::time_point start_, deadline_;
};

// The set-up of a communicator takes up to seconds on a busy machine (bootstrap, topology, the
// first connections): its deadline is never shorter than this, whatever the exchange's timeout.
constexpr std::chrono::milliseconds setup_floor = std::chrono::seconds(60);

}  // namespace

nccl_exchange::nccl_exchange(const mpi_context& ctx, int device, CUstream_st* stream, std::chrono::milliseconds timeout)
    : stream_(stream), device_(device), rank_(ctx.rank()), size_(ctx.size()), timeout_(timeout) {
  // Every rank reaches the broadcast even when its device is unusable, so none waits for it; the
  // failure is then agreed.
  std::exception_ptr failure;
  ncclUniqueId id{};
  try {
    cuda_check(cudaSetDevice(device), ("cudaSetDevice(" + std::to_string(device) + ")").c_str());
    if (rank_ == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  } catch (...) {
    failure = std::current_exception();
  }
  ctx.agree("NCCL set-up", failure);
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, ctx.comm());
  // A non-blocking communicator (NCCL's documented way to bound every wait): no NCCL call blocks
  // this thread; a call that returns ncclInProgress is finished when ncclCommGetAsyncError says
  // ncclSuccess, which wait_ready() polls against a deadline, aborting the communicator when it
  // passes. A blocking communicator hangs inside the call itself when a peer never joins: the
  // first collective on a communicator connects to its peers (NCCL connects lazily), and that
  // connection waits for the peer in the host call, before any deadline of synchronize() starts.
  try {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = nullptr;
    const ncclResult_t r = ncclCommInitRankConfig(&comm, size_, id, rank_, &config);
    comm_ = comm;  // set before the check, so that a failure aborts (frees) it
    check(r, "ncclCommInitRankConfig");
    wait_ready("ncclCommInitRankConfig", std::max(timeout_, setup_floor));
  } catch (...) {
    failure = std::current_exception();
  }
  try {
    ctx.agree("NCCL set-up", failure);
  } catch (...) {
    abort();  // another rank failed: this rank's communicator, if any, is no use
    throw;
  }
}

nccl_exchange::~nccl_exchange() {
  if (comm_ == nullptr || aborted_) return;
  // Bounded at every step: a peer that stopped leaves this rank's collectives (and a finalize,
  // which waits for the whole communicator to be quiescent) waiting forever; then abort instead.
  const poller stream_wait(timeout_);
  for (;;) {
    const cudaError_t e = cudaStreamQuery(stream_);
    if (e == cudaSuccess) break;
    ncclResult_t async = ncclSuccess;
    if (e != cudaErrorNotReady || ncclCommGetAsyncError(comm_, &async) != ncclSuccess ||
        (async != ncclSuccess && async != ncclInProgress) || stream_wait.expired()) {
      abort();
      return;
    }
    stream_wait.pause();
  }
  if (const ncclResult_t f = ncclCommFinalize(comm_); f != ncclSuccess && f != ncclInProgress) {
    abort();
    return;
  }
  const poller finalize_wait(timeout_);
  for (;;) {
    ncclResult_t state = ncclSuccess;
    if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess || (state != ncclSuccess && state != ncclInProgress) ||
        (state == ncclInProgress && finalize_wait.expired())) {
      abort();
      return;
    }
    if (state == ncclSuccess) break;
    finalize_wait.pause();
  }
  (void)ncclCommDestroy(comm_);
  comm_ = nullptr;
}

void nccl_exchange::check(int result, const char* what) {
  const auto r = static_cast<ncclResult_t>(result);
  if (r == ncclSuccess || r == ncclInProgress) return;
  std::string message = std::string("nccl_exchange: ") + what + ": " + ncclGetErrorString(r);
  if (comm_ != nullptr && !aborted_) {
    if (const char* last = ncclGetLastError(comm_); last != nullptr && *last != '\0') message += std::string(" (") + last + ")";
  }
  abort();
  // NCCL's own word for a peer that went away (a remote process exited, its connection broke):
  // this rank failed only because another did.
  if (r == ncclRemoteError) throw peer_wait_error(message);
  throw std::runtime_error(message);
}

void nccl_exchange::usable(const char* what) const {
  if (aborted_) throw std::runtime_error(std::string("nccl_exchange: ") + what + ": the communicator was aborted");
  if (comm_ == nullptr) throw std::runtime_error(std::string("nccl_exchange: ") + what + ": no communicator");
}

void nccl_exchange::wait_ready(const char* what, std::chrono::milliseconds limit) {
  const poller wait(limit);
  for (;;) {
    ncclResult_t state = ncclSuccess;
    check(ncclCommGetAsyncError(comm_, &state), "ncclCommGetAsyncError");
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) check(state, what);
    if (wait.expired()) {
      abort();
      throw peer_wait_error(std::string("nccl_exchange: ") + what + " did not complete within " + seconds(limit) +
                            " s (a peer stopped or never joined); communicator aborted");
    }
    wait.pause();
  }
}

void nccl_exchange::abort() noexcept {
  if (comm_ == nullptr || aborted_) return;
  aborted_ = true;
  // ncclCommAbort stops the communicator's kernels and threads and frees it. It should return at
  // once; it runs on a thread of its own all the same, and this one waits for it at most
  // abort_wait: an abort that never returns (a driver or NCCL bug) leaves its thread behind
  // rather than this rank hanging.
  struct shared {
    std::mutex m;
    std::condition_variable done_cv;
    bool done = false;
  };
  auto s = std::make_shared<shared>();
  ncclComm_t comm = comm_;
  const int device = device_;
  try {
    std::thread([s, comm, device] {
      (void)cudaSetDevice(device);
      (void)ncclCommAbort(comm);
      {
        std::lock_guard lock(s->m);
        s->done = true;
      }
      s->done_cv.notify_all();
    }).detach();
    std::unique_lock lock(s->m);
    const auto abort_wait = std::max(timeout_, std::chrono::milliseconds(std::chrono::seconds(10)));
    if (!s->done_cv.wait_for(lock, abort_wait, [&] { return s->done; })) {
      std::fprintf(stderr, "canopy::distributed: rank %d: ncclCommAbort did not return within %s s; going on without it\n",
                   rank_, seconds(abort_wait).c_str());
    }
  } catch (...) {
    (void)ncclCommAbort(comm);  // no thread to be had: abort on this one
  }
}

void nccl_exchange::all_reduce(void* data, std::size_t count, element_type type, reduce_op op) {
  if (count == 0) return;
  usable("ncclAllReduce");
  check(ncclAllReduce(data, data, count, nccl_type(type), nccl_op(op), comm_, stream_), "ncclAllReduce");
  wait_ready("ncclAllReduce", timeout_);
}

template <class Enqueue>
void nccl_exchange::grouped(const char* what, Enqueue&& enqueue) {
  usable(what);
  // An error inside the group is kept until the group is closed: the communicator is aborted only
  // after ncclGroupEnd, never with a group open on it.
  ncclResult_t first = ncclSuccess;
  const char* first_what = what;
  const auto note = [&](ncclResult_t r, const char* call) {
    if (first == ncclSuccess && r != ncclSuccess && r != ncclInProgress) {
      first = r;
      first_what = call;
    }
  };
  check(ncclGroupStart(), "ncclGroupStart");
  enqueue(note);
  const ncclResult_t end = ncclGroupEnd();
  check(first, first_what);
  check(end, "ncclGroupEnd");
  wait_ready(what, timeout_);
}

void nccl_exchange::all_gather_v(const void* send, void* recv, std::span<const std::size_t> recv_counts,
                                 std::size_t element_bytes) {
  std::size_t total = 0;
  for (const std::size_t c : recv_counts) total += c;
  if (total == 0) return;
  grouped("all-gather-v (grouped ncclBroadcast)", [&](const auto& note) {
    std::size_t offset = 0;
    for (std::size_t r = 0; r < recv_counts.size(); ++r) {
      const std::size_t bytes = recv_counts[r] * element_bytes;
      if (bytes != 0) {
        note(ncclBroadcast(send, static_cast<char*>(recv) + offset, bytes, ncclChar, static_cast<int>(r), comm_, stream_),
             "ncclBroadcast");
      }
      offset += bytes;
    }
  });
}

void nccl_exchange::all_to_all_v(const void* send, std::span<const std::size_t> send_counts, void* recv,
                                 std::span<const std::size_t> recv_counts, std::size_t element_bytes) {
  std::size_t send_at = 0, recv_at = 0, self_send = 0, self_recv = 0, self_bytes = 0;
  bool others = false;
  for (std::size_t r = 0; r < send_counts.size(); ++r) {
    if (static_cast<int>(r) != rank_ && (send_counts[r] != 0 || recv_counts[r] != 0)) others = true;
  }
  usable("all-to-all-v");
  const auto enqueue = [&](const auto& note) {
    for (std::size_t r = 0; r < send_counts.size(); ++r) {
      const std::size_t sb = send_counts[r] * element_bytes;
      const std::size_t rb = recv_counts[r] * element_bytes;
      if (static_cast<int>(r) == rank_) {
        self_send = send_at;
        self_recv = recv_at;
        self_bytes = sb;
      } else {
        if (sb != 0) {
          note(ncclSend(static_cast<const char*>(send) + send_at, sb, ncclChar, static_cast<int>(r), comm_, stream_),
               "ncclSend");
        }
        if (rb != 0) {
          note(ncclRecv(static_cast<char*>(recv) + recv_at, rb, ncclChar, static_cast<int>(r), comm_, stream_),
               "ncclRecv");
        }
      }
      send_at += sb;
      recv_at += rb;
    }
  };
  if (others) {
    grouped("all-to-all-v (grouped ncclSend/ncclRecv)", enqueue);
  } else {
    enqueue([](ncclResult_t, const char*) {});  // only this rank's own part: no NCCL call is made
  }
  if (self_bytes != 0) {
    cuda_check(cudaMemcpyAsync(static_cast<char*>(recv) + self_recv, static_cast<const char*>(send) + self_send,
                               self_bytes, cudaMemcpyDeviceToDevice, stream_),
               "cudaMemcpyAsync");
  }
}

void nccl_exchange::synchronize() {
  usable("synchronize");
  const poller wait(timeout_);
  for (;;) {
    const cudaError_t e = cudaStreamQuery(stream_);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) {
      abort();
      cuda_check(e, "stream");
    }
    ncclResult_t async = ncclSuccess;
    check(ncclCommGetAsyncError(comm_, &async), "ncclCommGetAsyncError");
    check(async, "asynchronous error");
    if (wait.expired()) {
      abort();
      throw peer_wait_error("nccl_exchange: a collective did not complete within " + seconds(timeout_) +
                            " s (a peer stopped); communicator aborted");
    }
    wait.pause();
  }
}

}  // namespace canopy::distributed
