// libFuzzer target: arbitrary bytes as a --layout spec (parse_layout, and the
// to_spec round trip of what parses).
// Run: build-fuzz/tests/fuzz_layout_parser tests/fuzz/corpus/layout -max_total_time=180
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tests/fuzz/fuzz_inputs.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  sextant::fuzz::abort_on(
      sextant::fuzz::run_layout_input(std::string_view(reinterpret_cast<const char*>(data), size)));
  return 0;
}
