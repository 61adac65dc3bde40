#pragma once
/// Element types and reductions of collectives, and the typed buffer views they work on.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ddprun {

enum class DataType { float32, float64, bfloat16, float16, int32, int64 };
/// avg: the sum divided by the number of ranks; for integer types the division truncates toward
/// zero (C++ integer division), for bfloat16/float16 it is done in float and rounded once.
enum class ReduceOp { sum, avg, min, max, product };

std::size_t size_of(DataType type);
std::string_view name_of(DataType type);  ///< "float32", "bfloat16", ...
std::string_view name_of(ReduceOp op);    ///< "sum", "avg", ...

/// A non-owning view of `count` elements of `type` at `data`: host memory for the gloo backend,
/// device memory for nccl.
struct Buffer {
  void* data = nullptr;
  std::size_t count = 0;
  DataType type = DataType::float32;
  std::size_t bytes() const { return count * size_of(type); }
};

/// bfloat16 and float16 as 16-bit storage (the runtime converts through float to reduce).
struct BFloat16 {
  std::uint16_t bits = 0;
};
struct Float16 {
  std::uint16_t bits = 0;
};

/// Conversions with PyTorch's rounding (c10::BFloat16, c10::Half): round to nearest even; a NaN
/// stays a NaN; float16 overflows to infinity and keeps subnormals.
constexpr float to_float(BFloat16 value) { return std::bit_cast<float>(static_cast<std::uint32_t>(value.bits) << 16); }
constexpr BFloat16 to_bfloat16(float value) {
  auto bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return BFloat16{0x7fc0};  // NaN: rounding could make it inf
  std::uint32_t rounding_bias = 0x7fffu + ((bits >> 16) & 1u);
  return BFloat16{static_cast<std::uint16_t>((bits + rounding_bias) >> 16)};
}

constexpr float to_float(Float16 value) {
  // Shift the half's exponent and mantissa into a float's, then rescale by 2^-112 so the exponent
  // bias (15 -> 127) comes out right; subnormals go through a float subtraction instead.
  const std::uint32_t word = static_cast<std::uint32_t>(value.bits) << 16;
  const std::uint32_t sign = word & 0x80000000u;
  const std::uint32_t doubled = word + word;  // the sign shifted out
  const float normal = std::bit_cast<float>((doubled >> 4) + (0xe0u << 23)) * 0x1.0p-112f;
  const float subnormal = std::bit_cast<float>((doubled >> 17) | (126u << 23)) - 0.5f;
  const std::uint32_t magnitude =
      doubled < (1u << 27) ? std::bit_cast<std::uint32_t>(subnormal) : std::bit_cast<std::uint32_t>(normal);
  return std::bit_cast<float>(sign | magnitude);
}
constexpr Float16 to_float16(float value) {
  // Let the FPU round: scaling the magnitude up then down makes values beyond half's range infinite
  // and adding a power of two chosen from the exponent leaves exactly the half's bits, rounded to
  // nearest even, in the float's low mantissa.
  const std::uint32_t word = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t doubled = word + word;
  const std::uint32_t sign = word & 0x80000000u;
  float magnitude = value < 0 ? -value : value;
  float base = (magnitude * 0x1.0p+112f) * 0x1.0p-110f;
  std::uint32_t bias = doubled & 0xff000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = std::bit_cast<float>((bias >> 1) + 0x07800000u) + base;
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(base);
  const std::uint32_t exponent_bits = (bits >> 13) & 0x00007c00u;
  const std::uint32_t mantissa_bits = bits & 0x00000fffu;
  const std::uint32_t nonsign = exponent_bits + mantissa_bits;
  return Float16{static_cast<std::uint16_t>((sign >> 16) | (doubled > 0xff000000u ? 0x7e00u : nonsign))};
}

template <class T>
constexpr DataType data_type_of();
template <> constexpr DataType data_type_of<float>() { return DataType::float32; }
template <> constexpr DataType data_type_of<double>() { return DataType::float64; }
template <> constexpr DataType data_type_of<BFloat16>() { return DataType::bfloat16; }
template <> constexpr DataType data_type_of<Float16>() { return DataType::float16; }
template <> constexpr DataType data_type_of<std::int32_t>() { return DataType::int32; }
template <> constexpr DataType data_type_of<std::int64_t>() { return DataType::int64; }

/// Buffer over a typed array: `buffer_of(values.data(), values.size())`.
template <class T>
Buffer buffer_of(T* data, std::size_t count) {
  return Buffer{static_cast<void*>(data), count, data_type_of<T>()};
}

}  // namespace ddprun
