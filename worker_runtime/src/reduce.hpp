#pragma once
/// The CPU reduction kernels of the gloo backend: element-wise `out = a op b` per type and op, in
/// the shape gloo's AllreduceOptions::Func wants, and avg's final division.
#include <cstddef>

#include "ddprun/types.hpp"

namespace ddprun::detail {

/// out[i] = a[i] op b[i] for i < count. `out` is either `a` itself or disjoint from both inputs (as
/// gloo calls it). avg reduces as sum (divide_in_place finishes it). Integer sum and product wrap
/// around (two's complement) instead of being undefined; min/max of a NaN is unspecified.
using ReduceFunction = void (*)(void* out, const void* a, const void* b, std::size_t count);
ReduceFunction reduce_function(DataType type, ReduceOp op);

/// Every element of `buffer` divided by `divisor` (> 0): IEEE division for float32/float64,
/// through float with one rounding for bfloat16/float16, truncation toward zero for integers.
void divide_in_place(Buffer buffer, int divisor);

}  // namespace ddprun::detail
