// SPDX-License-Identifier: Apache-2.0
#include <canopy/distributed/mpi_exchange.hpp>

#include <climits>
#include <stdexcept>
#include <string>
#include <vector>

namespace canopy::distributed {

namespace {

MPI_Datatype mpi_type(element_type t) {
  switch (t) {
    case element_type::u64: return MPI_UINT64_T;
    case element_type::f32: return MPI_FLOAT;
    case element_type::f64: return MPI_DOUBLE;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op mpi_op(reduce_op op) {
  switch (op) {
    case reduce_op::sum: return MPI_SUM;
    case reduce_op::min: return MPI_MIN;
    case reduce_op::max: return MPI_MAX;
  }
  return MPI_OP_NULL;
}

// One element as an MPI type, freed on scope exit.
class element {
 public:
  explicit element(std::size_t bytes) {
    MPI_Type_contiguous(static_cast<int>(bytes), MPI_BYTE, &type_);
    MPI_Type_commit(&type_);
  }
  ~element() { MPI_Type_free(&type_); }
  element(const element&) = delete;
  element& operator=(const element&) = delete;
  MPI_Datatype get() const { return type_; }

 private:
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
};

// Counts and displacements as MPI's ints; a count beyond them is refused, not truncated.
void to_ints(std::span<const std::size_t> counts, std::vector<int>& n, std::vector<int>& at, const char* what) {
  n.resize(counts.size());
  at.resize(counts.size());
  std::size_t offset = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    if (counts[r] > INT_MAX || offset > INT_MAX) {
      throw std::length_error(std::string("mpi_exchange::") + what + ": more than 2^31 - 1 elements to or from one rank");
    }
    n[r] = static_cast<int>(counts[r]);
    at[r] = static_cast<int>(offset);
    offset += counts[r];
  }
}

}  // namespace

void mpi_exchange::all_reduce(void* data, std::size_t count, element_type type, reduce_op op) {
  if (count > INT_MAX) throw std::length_error("mpi_exchange::all_reduce: more than 2^31 - 1 elements");
  MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count), mpi_type(type), mpi_op(op), comm_);
}

void mpi_exchange::all_gather_v(const void* send, void* recv, std::span<const std::size_t> recv_counts,
                                std::size_t element_bytes) {
  int rank = 0;
  MPI_Comm_rank(comm_, &rank);
  std::vector<int> n, at;
  to_ints(recv_counts, n, at, "all_gather_v");
  const element e(element_bytes);
  MPI_Allgatherv(send, n[static_cast<std::size_t>(rank)], e.get(), recv, n.data(), at.data(), e.get(), comm_);
}

void mpi_exchange::all_to_all_v(const void* send, std::span<const std::size_t> send_counts, void* recv,
                                std::span<const std::size_t> recv_counts, std::size_t element_bytes) {
  std::vector<int> sn, sat, rn, rat;
  to_ints(send_counts, sn, sat, "all_to_all_v");
  to_ints(recv_counts, rn, rat, "all_to_all_v");
  const element e(element_bytes);
  MPI_Alltoallv(send, sn.data(), sat.data(), e.get(), recv, rn.data(), rat.data(), e.get(), comm_);
}

}  // namespace canopy::distributed
