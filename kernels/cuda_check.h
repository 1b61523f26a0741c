// Errors from the CUDA runtime, cuBLASLt and the launchers' argument checks.
//
// Library code throws; only tools/ turns an error into an exit code. Every
// CUDA call and every kernel launch in kernels/ goes through these checks, so a
// failure names the call, where it was made, and the library's own words.
// Device code never throws: a kernel that faults shows up as a CudaError at the
// next checked call on the host.
#pragma once

#include <stdexcept>
#include <string>

namespace sextant::kernels {

/// A CUDA runtime or library call failed.
/// what() reads "kernels/layernorm.cu:88: layernorm_forward_kernel launch:
/// cudaErrorInvalidConfiguration: invalid configuration argument".
class CudaError : public std::runtime_error {
 public:
  CudaError(std::string call, std::string file, int line, std::string status_name,
            std::string description);
  const std::string& call() const { return call_; }
  const std::string& file() const { return file_; }
  int line() const { return line_; }
  /// The library's name for the status, e.g. "cudaErrorInvalidValue".
  const std::string& status_name() const { return status_name_; }

 private:
  std::string call_;
  std::string file_;
  int line_;
  std::string status_name_;
};

/// A launcher was given arguments its kernel cannot handle (shape, alignment);
/// thrown before anything is launched. what() names the launcher and the values.
class KernelArgumentError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// Throws CudaError when `status` (a cudaError_t) is not cudaSuccess.
void check_cuda(int status, const char* call, const char* file, int line);

/// Checks the launch just made (cudaGetLastError): a bad grid, too much shared
/// memory, or an earlier asynchronous fault. Kernels run asynchronously, so a
/// fault inside this kernel is reported by a later check.
void check_launch(const char* kernel, const char* file, int line);

/// Throws KernelArgumentError("<launcher>: <what>") unless `ok`.
void require_argument(bool ok, const char* launcher, const std::string& what);

/// True when `pointer` is aligned to `bytes` (null counts as aligned).
bool is_aligned(const void* pointer, unsigned bytes);

}  // namespace sextant::kernels

#define SEXTANT_CUDA_CHECK(call) \
  ::sextant::kernels::check_cuda(static_cast<int>(call), #call, __FILE__, __LINE__)
#define SEXTANT_CHECK_LAUNCH(kernel) ::sextant::kernels::check_launch(kernel, __FILE__, __LINE__)
