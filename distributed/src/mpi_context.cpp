// SPDX-License-Identifier: Apache-2.0
#include <canopy/distributed/mpi_context.hpp>

#include <utility>

namespace canopy::distributed {

distributed_error::distributed_error(int rank, std::string phase, std::string cause)
    : std::runtime_error("rank " + std::to_string(rank) + ": " + phase + ": " + cause),
      rank_(rank),
      phase_(std::move(phase)),
      cause_(std::move(cause)) {}

mpi_context::mpi_context(MPI_Comm comm) : comm_(comm) {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (!initialised) throw std::logic_error("canopy::distributed: MPI is not initialised (call MPI_Init first)");
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

void mpi_context::agree(std::string_view phase, std::exception_ptr local) const {
  // The rank to name, by one all-reduce that every rank reaches, whatever happened to it, because
  // failures were caught before it: the minimum of rank (a failure of its own), size + rank (a
  // peer_wait_error: it only waited for a rank that failed) and 2 size (no failure). A rank that
  // gave up waiting for the failed one reaches here too, and may be the lower rank: without the
  // offset its timeout would be the line, not the cause.
  int mine = 2 * size_;
  if (local) {
    mine = rank_;
    try {
      std::rethrow_exception(local);
    } catch (const peer_wait_error&) {
      mine = size_ + rank_;
    } catch (...) {
    }
  }
  int key = 2 * size_;
  MPI_Allreduce(&mine, &key, 1, MPI_INT, MPI_MIN, comm_);
  if (key == 2 * size_) return;
  const int first = key % size_;
  std::string cause;
  if (first == rank_) {
    try {
      std::rethrow_exception(local);
    } catch (const distributed_error& e) {
      cause = e.cause();
    } catch (const std::exception& e) {
      cause = e.what();
    } catch (...) {
      cause = "unknown exception";
    }
  }
  int length = static_cast<int>(cause.size());
  MPI_Bcast(&length, 1, MPI_INT, first, comm_);
  cause.resize(static_cast<std::size_t>(length));
  MPI_Bcast(cause.data(), length, MPI_CHAR, first, comm_);
  throw distributed_error(first, std::string(phase), cause);
}

std::uint64_t mpi_context::sum(std::uint64_t value) const {
  std::uint64_t total = 0;
  MPI_Allreduce(&value, &total, 1, MPI_UINT64_T, MPI_SUM, comm_);
  return total;
}

std::vector<std::uint64_t> mpi_context::all_gather(std::uint64_t value) const {
  std::vector<std::uint64_t> all(static_cast<std::size_t>(size_));
  MPI_Allgather(&value, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, comm_);
  return all;
}

std::vector<std::uint64_t> mpi_context::all_to_all(std::span<const std::uint64_t> send) const {
  if (send.size() != static_cast<std::size_t>(size_)) {
    throw std::invalid_argument("mpi_context::all_to_all: one value per rank expected");
  }
  std::vector<std::uint64_t> recv(static_cast<std::size_t>(size_));
  MPI_Alltoall(send.data(), 1, MPI_UINT64_T, recv.data(), 1, MPI_UINT64_T, comm_);
  return recv;
}

double mpi_context::max(double value) const {
  double r = 0;
  MPI_Allreduce(&value, &r, 1, MPI_DOUBLE, MPI_MAX, comm_);
  return r;
}

double mpi_context::min(double value) const {
  double r = 0;
  MPI_Allreduce(&value, &r, 1, MPI_DOUBLE, MPI_MIN, comm_);
  return r;
}

}  // namespace canopy::distributed
