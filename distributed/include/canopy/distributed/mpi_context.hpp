// SPDX-License-Identifier: Apache-2.0
// The ranks of a distributed run and their host-side coordination through MPI: who we are, small
// control collectives on host memory (counts, sizes), and the agreement that turns a failure on
// one rank into the same error on every rank instead of a hang in the next collective.
//
//   MPI_Init(&argc, &argv);
//   canopy::distributed::mpi_context ctx(MPI_COMM_WORLD);
//   ctx.phase("read", [&] { points = read_my_part(); });   // throws distributed_error on every rank
//                                                            // when any rank's work threw
//
// The caller initialises and finalises MPI; the context only borrows the communicator.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <exception>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace canopy::distributed {

// A failure of one rank, seen by all: what() is "rank <rank>: <phase>: <cause>".
class distributed_error : public std::runtime_error {
 public:
  distributed_error(int rank, std::string phase, std::string cause);
  int rank() const noexcept { return rank_; }
  const std::string& phase() const noexcept { return phase_; }
  const std::string& cause() const noexcept { return cause_; }

 private:
  int rank_;
  std::string phase_;
  std::string cause_;
};

// A failure of this rank that is only the consequence of another rank's: a wait for a peer that
// passed its deadline, a peer that closed its connection (nccl_exchange throws it). agree() names
// such a rank only when no rank failed for a cause of its own, so that the line names the rank
// that failed, not a lower rank that only waited for it.
class peer_wait_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class mpi_context {
 public:
  explicit mpi_context(MPI_Comm comm = MPI_COMM_WORLD);
  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  MPI_Comm comm() const noexcept { return comm_; }

  // Every rank states whether its part of `phase` failed (`local` null when it did not). When any
  // did, every rank throws the same distributed_error, naming the lowest rank that failed for a
  // cause of its own (else, when every failure is a peer_wait_error, the lowest of those) and its
  // exception's message; otherwise every rank returns. One all-reduce (and one broadcast of the
  // message on failure): the step before each collective phase, so that no rank enters a
  // collective that another rank will never reach.
  void agree(std::string_view phase, std::exception_ptr local) const;

  // Runs `work` on this rank, then agree()s on its outcome: work() returns on every rank or
  // throws distributed_error on every rank. A distributed_error from inside work() (a phase or a
  // collective set-up within it) was agreed already by every rank, some of them perhaps in this
  // phase's own agreement: it passes through, with no second agreement that those ranks would
  // never join.
  template <class Work>
  void phase(std::string_view name, Work&& work) const {
    std::exception_ptr failure;
    try {
      work();
    } catch (const distributed_error&) {
      throw;
    } catch (...) {
      failure = std::current_exception();
    }
    agree(name, failure);
  }

  // Control collectives on host memory (MPI_COMM's order; every rank calls them).
  std::uint64_t sum(std::uint64_t value) const;
  std::vector<std::uint64_t> all_gather(std::uint64_t value) const;
  // recv[r] = what rank r put in its send[this rank]; send.size() == size().
  std::vector<std::uint64_t> all_to_all(std::span<const std::uint64_t> send) const;
  // Largest of every rank's value (phase times).
  double max(double value) const;
  double min(double value) const;

 private:
  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace canopy::distributed
