// Errors of collective communication: a failed NCCL call, a rank that did not
// arrive in time, ranks that disagree about a collective's arguments.
//
// Like kernels' CudaError, the message names what was being done and where:
// the collective and the group (`tp`, `dp`, `world`, ...), then the library's
// own words, so a failure on one of 1,024 ranks can be read without a debugger.
#pragma once

#include <stdexcept>
#include <string>

namespace sextant::engine::comm {

/// what() reads "all_reduce on group 'tp' (rank 1 of 2): ncclInvalidUsage: invalid usage
/// (...)" or "recv on group 'pp' (rank 0 of 2): timeout: no message from rank 1 within 60 s".
class CommError : public std::runtime_error {
 public:
  CommError(std::string collective, std::string group, int rank, int size,
            std::string status_name, const std::string& description);
  const std::string& collective() const { return collective_; }
  const std::string& group() const { return group_; }
  /// "ncclSystemError", "timeout", "mismatch", ...
  const std::string& status_name() const { return status_name_; }

 private:
  std::string collective_;
  std::string group_;
  std::string status_name_;
};

}  // namespace sextant::engine::comm
