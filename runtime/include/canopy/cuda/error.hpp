// SPDX-License-Identifier: Apache-2.0
// CUDA runtime errors as C++ exceptions: the one error type and check macro of every Canopy
// component (host code, g++ or nvcc).
//
//   CANOPY_CUDA_TRY(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
//   // throws canopy::cuda_error: "file.cu:42: cudaMemcpy(...): cudaErrorInvalidValue: invalid argument"
//
// cuda_error is a canopy::error with status::device_error, so a caller that handles the
// scheduler's typed errors handles these too; code() gives the cudaError_t.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "canopy/status.hpp"

namespace canopy {

class cuda_error : public error {
 public:
  cuda_error(cudaError_t code, const std::string& what) : error(status::device_error, what), cuda_code_(code) {}
  cudaError_t cuda_code() const noexcept { return cuda_code_; }

 private:
  cudaError_t cuda_code_;
};

/// "cudaErrorName: description" of `e`.
inline std::string cuda_message(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

namespace detail {
[[noreturn]] inline void throw_cuda_error(cudaError_t e, const char* call, const char* file, int line) {
  throw cuda_error(e, std::string(file) + ":" + std::to_string(line) + ": " + call + ": " + cuda_message(e));
}
}  // namespace detail

/// Throws cuda_error("what: cudaErrorName: description") when `e` is not cudaSuccess: for library
/// code whose messages name the operation rather than a source line.
inline void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw cuda_error(e, std::string(what) + ": " + cuda_message(e));
}

}  // namespace canopy

/// Evaluates `call` (an expression of type cudaError_t) once; throws canopy::cuda_error naming the
/// call, file and line when it failed.
#define CANOPY_CUDA_TRY(call)                                                              \
  do {                                                                                     \
    const cudaError_t canopy_cuda_try_err_ = (call);                                       \
    if (canopy_cuda_try_err_ != cudaSuccess)                                               \
      ::canopy::detail::throw_cuda_error(canopy_cuda_try_err_, #call, __FILE__, __LINE__); \
  } while (0)
