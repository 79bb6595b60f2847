// SPDX-License-Identifier: Apache-2.0
#include <canopy/distributed/nccl_exchange.hpp>

#include <cuda_runtime.h>
#include <nccl.h>

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
  try {
    ncclComm_t comm = nullptr;
    check(ncclCommInitRank(&comm, size_, id, rank_), "ncclCommInitRank");
    comm_ = comm;
  } catch (...) {
    failure = std::current_exception();
  }
  ctx.agree("NCCL set-up", failure);
}

nccl_exchange::~nccl_exchange() {
  if (comm_ == nullptr) return;
  if (aborted_) return;
  (void)cudaStreamSynchronize(stream_);
  (void)ncclCommDestroy(comm_);
}

void nccl_exchange::check(int result, const char* what) {
  const auto r = static_cast<ncclResult_t>(result);
  if (r == ncclSuccess || r == ncclInProgress) return;
  std::string message = std::string("nccl_exchange: ") + what + ": " + ncclGetErrorString(r);
  if (comm_ != nullptr) {
    if (const char* last = ncclGetLastError(comm_); last != nullptr && *last != '\0') message += std::string(" (") + last + ")";
  }
  abort();
  throw std::runtime_error(message);
}

void nccl_exchange::abort() noexcept {
  if (comm_ != nullptr && !aborted_) {
    (void)ncclCommAbort(comm_);
    aborted_ = true;
  }
}

void nccl_exchange::all_reduce(void* data, std::size_t count, element_type type, reduce_op op) {
  if (count == 0) return;
  check(ncclAllReduce(data, data, count, nccl_type(type), nccl_op(op), comm_, stream_), "ncclAllReduce");
}

void nccl_exchange::all_gather_v(const void* send, void* recv, std::span<const std::size_t> recv_counts,
                                 std::size_t element_bytes) {
  check(ncclGroupStart(), "ncclGroupStart");
  std::size_t offset = 0;
  for (std::size_t r = 0; r < recv_counts.size(); ++r) {
    const std::size_t bytes = recv_counts[r] * element_bytes;
    if (bytes != 0) {
      check(ncclBroadcast(send, static_cast<char*>(recv) + offset, bytes, ncclChar, static_cast<int>(r), comm_, stream_),
            "ncclBroadcast");
    }
    offset += bytes;
  }
  check(ncclGroupEnd(), "ncclGroupEnd");
}

void nccl_exchange::all_to_all_v(const void* send, std::span<const std::size_t> send_counts, void* recv,
                                 std::span<const std::size_t> recv_counts, std::size_t element_bytes) {
  std::size_t send_at = 0, recv_at = 0, self_send = 0, self_recv = 0, self_bytes = 0;
  check(ncclGroupStart(), "ncclGroupStart");
  for (std::size_t r = 0; r < send_counts.size(); ++r) {
    const std::size_t sb = send_counts[r] * element_bytes;
    const std::size_t rb = recv_counts[r] * element_bytes;
    if (static_cast<int>(r) == rank_) {
      self_send = send_at;
      self_recv = recv_at;
      self_bytes = sb;
    } else {
      if (sb != 0) {
        check(ncclSend(static_cast<const char*>(send) + send_at, sb, ncclChar, static_cast<int>(r), comm_, stream_),
              "ncclSend");
      }
      if (rb != 0) {
        check(ncclRecv(static_cast<char*>(recv) + recv_at, rb, ncclChar, static_cast<int>(r), comm_, stream_), "ncclRecv");
      }
    }
    send_at += sb;
    recv_at += rb;
  }
  check(ncclGroupEnd(), "ncclGroupEnd");
  if (self_bytes != 0) {
    cuda_check(cudaMemcpyAsync(static_cast<char*>(recv) + self_recv, static_cast<const char*>(send) + self_send,
                               self_bytes, cudaMemcpyDeviceToDevice, stream_),
               "cudaMemcpyAsync");
  }
}

void nccl_exchange::synchronize() {
  if (aborted_) throw std::runtime_error("nccl_exchange: the communicator was aborted");
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
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
    if (std::chrono::steady_clock::now() > deadline) {
      abort();
      throw std::runtime_error("nccl_exchange: a collective did not complete within " +
                               std::to_string(timeout_.count() / 1000.0) + " s (a peer stopped); communicator aborted");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

}  // namespace canopy::distributed
