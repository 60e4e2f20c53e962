// transpose_map with tensor operators, for backends with no kernel of their own for it (the NPU
// binding): the CPU kernel's contract, checks and messages, with one host read for the checks
// (plus one for the message on the error path). Exposed as mx_sparse._C.transpose_map_generic
// so that it is executed, and compared with the CPU kernel, on CPU tensors in the test suite.
#pragma once
#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include "op_args.h"

namespace mxs {

inline at::Tensor transpose_map_generic(const at::Tensor& nbr_in, int64_t num_rows) {
  check_map(nbr_in, "nbr");
  TORCH_CHECK_VALUE(num_rows >= 0 && num_rows < INT32_MAX, "num_rows: expected 0 <= num_rows < 2^31 - 1, got ",
                    num_rows);
  const at::Tensor nbr = nbr_in.contiguous();
  const int64_t m = nbr.size(0), kvol = nbr.size(1), cells = num_rows * kvol;
  TORCH_CHECK_VALUE(m < INT32_MAX, "indices: ", m, " rows do not fit the int32 neighbor map; expected fewer than "
                    "2^31 - 1");
  if (m == 0 || kvol == 0) return at::full({num_rows, kvol}, -1, nbr.options());
  const auto opts = nbr.options().dtype(at::kLong);
  const at::Tensor rows = at::arange(m, opts);
  const at::Tensor row_of = rows.unsqueeze(1).expand({m, kvol});
  const at::Tensor none = at::full({}, m, opts);
  const at::Tensor bad = nbr.lt(-1).logical_or(nbr.ge(num_rows)).any(1);
  const at::Tensor live = nbr.ge(0).logical_and(nbr.lt(num_rows));
  const at::Tensor cell = at::where(live, nbr.to(at::kLong) * kvol + at::arange(kvol, opts), at::full({}, cells, opts));
  // the lowest row naming each (input row, offset) cell, m for none (one extra cell absorbs the
  // absent entries); a map names each cell at most once, or no transpose exists: a row naming a
  // cell that a lower row names already is the duplicate reported
  at::Tensor first = at::full({cells + 1}, m, opts);
  first.scatter_reduce_(0, cell.reshape(-1), row_of.reshape(-1), "amin");
  const at::Tensor twice = live.logical_and(row_of.gt(first.take(cell)));
  const at::Tensor found =
      at::stack({at::where(bad, rows, none).min(), at::where(twice.any(1), rows, none).min()}).to(at::kCPU);
  const int64_t bad_row = found[0].item<int64_t>(), dup_row = found[1].item<int64_t>();
  TORCH_CHECK_VALUE(bad_row == m, "nbr: row ", bad_row, " holds an input row outside [0, num_rows=", num_rows, ")");
  if (dup_row < m) {
    const at::Tensor at_cell = at::where(twice.select(0, dup_row), cell.select(0, dup_row), at::full({}, cells, opts)).min();
    const at::Tensor pair = at::stack({at_cell, first.take(at_cell)}).to(at::kCPU);
    const int64_t c = pair[0].item<int64_t>(), earlier = pair[1].item<int64_t>();
    TORCH_CHECK_VALUE(false, "nbr: rows ", earlier, " and ", dup_row, " both name input row ", c / kvol,
                      " at offset ", c % kvol, "; a neighbor map names each (input row, offset) at most once");
  }
  // each cell named once at most: its only row is the transpose
  const at::Tensor named = first.narrow(0, 0, cells);
  return at::where(named.lt(m), named, at::full({}, -1, opts)).to(at::kInt).view({num_rows, kvol});
}

}  // namespace mxs
