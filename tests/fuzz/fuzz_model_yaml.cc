// libFuzzer target: arbitrary bytes as a model, GPU, cluster and profile YAML.
// Run: build-fuzz/tests/fuzz_model_yaml tests/fuzz/corpus/model -max_total_time=180
#include <cstddef>
#include <cstdint>
#include <string>

#include "tests/fuzz/fuzz_inputs.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  sextant::fuzz::abort_on(
      sextant::fuzz::run_yaml_input(std::string(reinterpret_cast<const char*>(data), size)));
  return 0;
}
