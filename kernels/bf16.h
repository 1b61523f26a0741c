// bfloat16 as the launcher headers see it: 16 bits of storage and host-side
// conversions, so code that includes a launcher header needs no CUDA header.
//
// Device code reinterprets these pointers as __nv_bfloat16 (same size, same
// bits); conversions round to nearest even, exactly as __float2bfloat16_rn does,
// so a host value computed with from_float matches the device's bit for bit.
#pragma once

#include <bit>
#include <cstdint>

namespace sextant::kernels {

/// One bfloat16 value: the top 16 bits of an IEEE-754 float.
struct Bf16 {
  std::uint16_t bits = 0;
};
static_assert(sizeof(Bf16) == 2, "Bf16 must be bit-compatible with __nv_bfloat16");

/// Exact: every bfloat16 is a float.
inline float to_float(Bf16 value) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(value.bits) << 16);
}

/// Round to nearest, ties to even; NaN stays a (quiet) NaN.
inline Bf16 from_float(float value) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(value);
  if ((u & 0x7fffffffu) > 0x7f800000u) return Bf16{static_cast<std::uint16_t>((u >> 16) | 0x0040u)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return Bf16{static_cast<std::uint16_t>(u >> 16)};
}

}  // namespace sextant::kernels
