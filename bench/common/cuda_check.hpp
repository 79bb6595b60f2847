// CUDA runtime error checking for host code: CANOPY_CUDA_CHECK(expr) throws canopy::bench::cuda_error
// with "file:line: expr: cudaErrorName: description". Host-only (g++ or nvcc), needs cuda_runtime.h.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace canopy::bench {

class cuda_error : public std::runtime_error {
 public:
  cuda_error(cudaError_t code, const std::string& what) : std::runtime_error(what), code_(code) {}
  cudaError_t code() const noexcept { return code_; }

 private:
  cudaError_t code_;
};

[[noreturn]] inline void throw_cuda_error(cudaError_t code, const char* expr, const char* file, int line) {
  throw cuda_error(code, std::string(file) + ":" + std::to_string(line) + ": " + expr + ": " +
                             cudaGetErrorName(code) + ": " + cudaGetErrorString(code));
}

}  // namespace canopy::bench

#define CANOPY_CUDA_CHECK(expr)                                                                  \
  do {                                                                                           \
    const cudaError_t canopy_cuda_check_err_ = (expr);                                           \
    if (canopy_cuda_check_err_ != cudaSuccess)                                                   \
      ::canopy::bench::throw_cuda_error(canopy_cuda_check_err_, #expr, __FILE__, __LINE__);       \
  } while (0)
