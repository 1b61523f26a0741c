// The CUDA GPU a rank of `sextant run` trains on, checked before it is used:
// a machine without one (or without a driver that runs this CUDA runtime)
// is bad input for `run` — exit code 2 with one line saying so — on every
// path, one GPU or a rank a launcher started, never a CUDA error from
// cudaSetDevice. Built only with the CUDA toolkit.
#pragma once

#include <string>

namespace sextant::tools {

/// Checks that CUDA device `index` is visible to this process. Throws
/// sim::ConfigError naming `where` (an option, or the rank): "no CUDA GPU is
/// visible (<CUDA's reason>); `sextant run` needs one", or, when fewer are,
/// "<index_name> <index>: this machine has N GPU(s), indices 0-(N-1)".
void require_visible_gpu(const std::string& where, const std::string& index_name, int index);

}  // namespace sextant::tools
