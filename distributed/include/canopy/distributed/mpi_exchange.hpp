// SPDX-License-Identifier: Apache-2.0
// The exchange over MPI on host memory (MPI_Allreduce, MPI_Allgatherv, MPI_Alltoallv). Counts
// travel as int, in a contiguous datatype of one element, so a rank may send up to 2^31 - 1
// elements (32 GiB of points) per collective.
#pragma once

#include <canopy/distributed/exchange.hpp>

#include <mpi.h>

namespace canopy::distributed {

class mpi_exchange final : public exchange {
 public:
  explicit mpi_exchange(MPI_Comm comm = MPI_COMM_WORLD) : comm_(comm) {}
  memory_space space() const noexcept override { return memory_space::host; }
  std::string_view name() const noexcept override { return "mpi"; }
  void all_reduce(void* data, std::size_t count, element_type type, reduce_op op) override;
  void all_gather_v(const void* send, void* recv, std::span<const std::size_t> recv_counts,
                    std::size_t element_bytes) override;
  void all_to_all_v(const void* send, std::span<const std::size_t> send_counts, void* recv,
                    std::span<const std::size_t> recv_counts, std::size_t element_bytes) override;
  void synchronize() override {}

 private:
  MPI_Comm comm_;
};

}  // namespace canopy::distributed
