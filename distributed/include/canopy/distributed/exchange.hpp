// SPDX-License-Identifier: Apache-2.0
// The data collectives of the distributed octree, one interface with two engines: MPI on host
// memory (mpi_exchange.hpp; always built, what CI and the CPU backend use) and NCCL on device
// memory (nccl_exchange.hpp; built with CUDA when NCCL is found). The decomposition and the
// upward pass are written against this interface only, so CI tests the same exchange logic that
// the GPUs run.
//
// Buffers live in space(): host memory for MPI, device memory for NCCL. Counts are in elements of
// `element_bytes` bytes. Every rank calls every collective, in the same order, with the same
// recv counts (the callers learn them first through mpi_context's control collectives).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>

namespace canopy::distributed {

enum class memory_space { host, device };
enum class element_type { u64, f32, f64 };
enum class reduce_op { sum, min, max };

class exchange {
 public:
  virtual ~exchange() = default;
  // Where the buffers of the collectives below must live.
  virtual memory_space space() const noexcept = 0;
  // "mpi" or "nccl".
  virtual std::string_view name() const noexcept = 0;

  // Element-wise reduction over all ranks, in place.
  virtual void all_reduce(void* data, std::size_t count, element_type type, reduce_op op) = 0;
  // recv = every rank's send, concatenated in rank order; rank r sends recv_counts[r] elements.
  virtual void all_gather_v(const void* send, void* recv, std::span<const std::size_t> recv_counts,
                            std::size_t element_bytes) = 0;
  // send holds the elements for rank r at offset sum(send_counts[0..r)), recv those from rank r at
  // offset sum(recv_counts[0..r)); recv_counts[r] equals rank r's send_counts[this rank].
  virtual void all_to_all_v(const void* send, std::span<const std::size_t> send_counts, void* recv,
                            std::span<const std::size_t> recv_counts, std::size_t element_bytes) = 0;
  // Returns when the transfers enqueued so far are complete (NCCL: its stream; MPI: at once).
  virtual void synchronize() = 0;
};

// Typed forms: T is a trivially copyable record (point, multipole<float>).
template <class T>
void all_gather_v(exchange& ex, const T* send, T* recv, std::span<const std::size_t> recv_counts) {
  static_assert(std::is_trivially_copyable_v<T>);
  ex.all_gather_v(send, recv, recv_counts, sizeof(T));
}
template <class T>
void all_to_all_v(exchange& ex, const T* send, std::span<const std::size_t> send_counts, T* recv,
                  std::span<const std::size_t> recv_counts) {
  static_assert(std::is_trivially_copyable_v<T>);
  ex.all_to_all_v(send, send_counts, recv, recv_counts, sizeof(T));
}

}  // namespace canopy::distributed
