#include "reduce.hpp"

#include <cstdint>
#include <type_traits>

namespace ddprun::detail {
namespace {

// The loops are written so that the compiler vectorizes them: __restrict promises the one aliasing
// gloo uses (out == a) is handled by its own loop, so no runtime overlap checks are needed.

struct Sum {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;  // wrap around instead of undefined overflow
      return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    } else {
      return a + b;
    }
  }
};
struct Product {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    } else {
      return a * b;
    }
  }
};
struct Min {
  template <class T>
  static T apply(T a, T b) {
    return b < a ? b : a;
  }
};
struct Max {
  template <class T>
  static T apply(T a, T b) {
    return a < b ? b : a;
  }
};

/// Storage type -> the type arithmetic happens in, and the conversions between them.
template <class T>
struct Arithmetic {
  using type = T;
  static T load(T value) { return value; }
  static T store(T value) { return value; }
};
template <>
struct Arithmetic<BFloat16> {
  using type = float;
  static float load(BFloat16 value) { return to_float(value); }
  static BFloat16 store(float value) { return to_bfloat16(value); }
};
template <>
struct Arithmetic<Float16> {
  using type = float;
  static float load(Float16 value) { return to_float(value); }
  static Float16 store(float value) { return to_float16(value); }
};

template <class T, class Op>
void reduce_into(T* __restrict out, const T* __restrict b, std::size_t count) {
  using A = Arithmetic<T>;
  for (std::size_t i = 0; i < count; ++i) out[i] = A::store(Op::apply(A::load(out[i]), A::load(b[i])));
}

template <class T, class Op>
void reduce_apart(T* __restrict out, const T* __restrict a, const T* __restrict b, std::size_t count) {
  using A = Arithmetic<T>;
  for (std::size_t i = 0; i < count; ++i) out[i] = A::store(Op::apply(A::load(a[i]), A::load(b[i])));
}

template <class T, class Op>
void reduce(void* out, const void* a, const void* b, std::size_t count) {
  auto* typed_out = static_cast<T*>(out);
  const auto* typed_a = static_cast<const T*>(a);
  const auto* typed_b = static_cast<const T*>(b);
  if (out == a) {
    reduce_into<T, Op>(typed_out, typed_b, count);
  } else if (out == b) {  // the ops commute
    reduce_into<T, Op>(typed_out, typed_a, count);
  } else {
    reduce_apart<T, Op>(typed_out, typed_a, typed_b, count);
  }
}

template <class T>
ReduceFunction for_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      return &reduce<T, Sum>;
    case ReduceOp::product:
      return &reduce<T, Product>;
    case ReduceOp::min:
      return &reduce<T, Min>;
    case ReduceOp::max:
      return &reduce<T, Max>;
  }
  return nullptr;
}

template <class T>
void divide(void* data, std::size_t count, int divisor) {
  using A = Arithmetic<T>;
  using Math = typename A::type;
  auto* values = static_cast<T*>(data);
  const auto by = static_cast<Math>(divisor);
  for (std::size_t i = 0; i < count; ++i) values[i] = A::store(static_cast<Math>(A::load(values[i]) / by));
}

}  // namespace

ReduceFunction reduce_function(DataType type, ReduceOp op) {
  switch (type) {
    case DataType::float32:
      return for_op<float>(op);
    case DataType::float64:
      return for_op<double>(op);
    case DataType::bfloat16:
      return for_op<BFloat16>(op);
    case DataType::float16:
      return for_op<Float16>(op);
    case DataType::int32:
      return for_op<std::int32_t>(op);
    case DataType::int64:
      return for_op<std::int64_t>(op);
  }
  return nullptr;
}

void divide_in_place(Buffer buffer, int divisor) {
  switch (buffer.type) {
    case DataType::float32:
      return divide<float>(buffer.data, buffer.count, divisor);
    case DataType::float64:
      return divide<double>(buffer.data, buffer.count, divisor);
    case DataType::bfloat16:
      return divide<BFloat16>(buffer.data, buffer.count, divisor);
    case DataType::float16:
      return divide<Float16>(buffer.data, buffer.count, divisor);
    case DataType::int32:
      return divide<std::int32_t>(buffer.data, buffer.count, divisor);
    case DataType::int64:
      return divide<std::int64_t>(buffer.data, buffer.count, divisor);
  }
}

}  // namespace ddprun::detail
