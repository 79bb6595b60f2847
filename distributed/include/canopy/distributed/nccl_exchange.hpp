// SPDX-License-Identifier: Apache-2.0
// The exchange over NCCL on device memory (built with CUDA when NCCL is found:
// CANOPY_DISTRIBUTED_HAVE_NCCL). One rank per GPU; the communicator is bootstrapped through MPI
// (rank 0's ncclUniqueId broadcast) and made non-blocking (ncclConfig_t::blocking = 0), so no NCCL
// call blocks the host: each collective returns once NCCL has enqueued it on the exchange's stream
// (its connections to the peers made, the first time), waiting for that at most `timeout`;
// synchronize() waits for the collectives while polling NCCL's asynchronous error and the same
// deadline. On an error or a passed deadline the communicator is aborted (ncclCommAbort) and the
// call throws (a passed deadline or NCCL's ncclRemoteError: peer_wait_error, so that the agreement
// names the rank that failed rather than this one, which only waited for it), so a failed or
// vanished peer ends in an exception on this rank, never in a hang;
// after an abort every call throws and the destructor frees nothing more. The destructor waits
// for the stream and finalises the communicator under the same deadline, aborting it when that
// passes. CUDA-aware MPI is not needed.
//
//   canopy::distributed::nccl_exchange ex(ctx, /*device*/ local_rank, stream);
//   ex.all_reduce(d_counts, n, element_type::u64, reduce_op::sum);
//   ex.synchronize();
#pragma once

#include <canopy/distributed/exchange.hpp>
#include <canopy/distributed/mpi_context.hpp>

#include <chrono>

struct CUstream_st;  // cudaStream_t, without the CUDA headers
struct ncclComm;     // ncclComm_t, without nccl.h

namespace canopy::distributed {

class nccl_exchange final : public exchange {
 public:
  // Collective over ctx's ranks. Selects `device` (cudaSetDevice) on this thread. `timeout`: the
  // longest a collective waits to be enqueued, synchronize() waits for the stream, and the
  // destructor for each of its steps, before the communicator is aborted; the set-up waits at
  // least 60 s (it connects the ranks). A failure on any rank: distributed_error on every rank.
  nccl_exchange(const mpi_context& ctx, int device, CUstream_st* stream = nullptr,
                std::chrono::milliseconds timeout = std::chrono::seconds(120));
  ~nccl_exchange() override;
  nccl_exchange(const nccl_exchange&) = delete;
  nccl_exchange& operator=(const nccl_exchange&) = delete;

  memory_space space() const noexcept override { return memory_space::device; }
  std::string_view name() const noexcept override { return "nccl"; }
  void all_reduce(void* data, std::size_t count, element_type type, reduce_op op) override;
  // Grouped ncclBroadcast, one per rank with a non-empty part (NCCL has no all-gather-v).
  void all_gather_v(const void* send, void* recv, std::span<const std::size_t> recv_counts,
                    std::size_t element_bytes) override;
  // Grouped ncclSend/ncclRecv with every peer that has data; this rank's own part by a device copy.
  void all_to_all_v(const void* send, std::span<const std::size_t> send_counts, void* recv,
                    std::span<const std::size_t> recv_counts, std::size_t element_bytes) override;
  void synchronize() override;

  // Ends the communicator at once (ncclCommAbort, waited for at most max(timeout, 10 s)): pending
  // kernels stop, later calls throw. For a rank that learned (through mpi_context::agree) that
  // another rank failed: after it, the stream holds no NCCL work that waits for a peer.
  void abort() noexcept;
  CUstream_st* stream() const noexcept { return stream_; }
  int device() const noexcept { return device_; }

 private:
  void check(int result, const char* what);  // throws (after an abort) unless success or in progress
  void usable(const char* what) const;        // throws once aborted
  // Polls ncclCommGetAsyncError until the last call's work is enqueued (ncclSuccess); aborts and
  // throws on an error or after `limit`.
  void wait_ready(const char* what, std::chrono::milliseconds limit);
  // ncclGroupStart, enqueue(note) (note(result, call) records the first failure), ncclGroupEnd,
  // then the checks and wait_ready.
  template <class Enqueue>
  void grouped(const char* what, Enqueue&& enqueue);
  ncclComm* comm_ = nullptr;
  CUstream_st* stream_ = nullptr;
  int device_ = 0;
  int rank_ = 0;
  int size_ = 1;
  std::chrono::milliseconds timeout_;
  bool aborted_ = false;
};

}  // namespace canopy::distributed
