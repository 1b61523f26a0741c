// libFuzzer target: layouts that parse, completed with defaults, through
// check_layout and is_valid_layout on a dense and a MoE model.
// Run: build-fuzz/tests/fuzz_layout_check tests/fuzz/corpus/layout -max_total_time=180
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tests/fuzz/fuzz_inputs.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const sextant::fuzz::LayoutCheckFixture fixture;
  sextant::fuzz::abort_on(sextant::fuzz::run_layout_check_input(
      std::string_view(reinterpret_cast<const char*>(data), size), fixture));
  return 0;
}
