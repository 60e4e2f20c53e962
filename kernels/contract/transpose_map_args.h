// Argument and value checks of transpose_map (schema: schema.cpp), shared by the CPU kernel
// (kernels/cpu/neighbor_map_cpu.cpp) and, through mx_sparse._C.contract (contract_bindings.cpp)
// and mx_sparse._core.contract, the accelerator's version (mx_sparse/_accelerator/neighbor_map.py):
// one set of messages. The value checks take what a backend found reading the map where its
// data lives.
#pragma once
#include <torch/types.h>
#include <c10/util/Exception.h>
#include <cstdint>
#include "op_args.h"

namespace mxs {

// transpose_map(nbr [M, K] int32, num_rows): num_rows input rows an int32 map can name.
inline void check_transpose_map_args(const at::Tensor& nbr, int64_t num_rows) {
  check_map(nbr, "nbr");
  TORCH_CHECK_VALUE(num_rows >= 0 && num_rows < INT32_MAX, "num_rows: expected 0 <= num_rows < 2^31 - 1, got ",
                    num_rows);
}

// bad_row: the first map row holding an entry outside [-1, num_rows), or m or more for none.
inline void check_transpose_map_rows(int64_t bad_row, int64_t m, int64_t num_rows) {
  TORCH_CHECK_VALUE(bad_row >= m, "nbr: row ", bad_row, " holds an input row outside [0, num_rows=", num_rows, ")");
}

// Map rows `earlier` < `row` both name (input_row, offset): no transpose exists.
[[noreturn]] inline void raise_named_twice(int64_t earlier, int64_t row, int64_t input_row, int64_t offset) {
  TORCH_CHECK_VALUE(false, "nbr: rows ", earlier, " and ", row, " both name input row ", input_row, " at offset ",
                    offset, "; a neighbor map names each (input row, offset) at most once");
}

}  // namespace mxs
