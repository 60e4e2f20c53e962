// The packed neighbor-map format of pack_map / unpack_map (schema: schema.cpp) and its argument
// checks, shared by the CPU kernels (kernels/cpu/packed_map_cpu.cpp) and, through
// mx_sparse._C.contract (contract_bindings.cpp) and mx_sparse._core.contract, the accelerator's
// torch-operator version (mx_sparse/_accelerator/packed_map.py): one set of messages.
//
//   mask [M, ceil(K/16)] int16   bit j of mask[m, w] set where nbr[m, 16w + j] >= 0
//   values [P] int32             the present entries in row-major order
//   block_starts [blocks + 1]    index in values of the first entry of each block of 1024 rows
//
// The metadata checks take the tensors; the value checks take what a backend found reading them
// where their data lives (the CPU on the host, the accelerator in one device read), so each
// message is written once here and raised alike.
#pragma once
#include <torch/types.h>
#include <c10/util/Exception.h>
#include <algorithm>
#include <cstdint>
#include "op_args.h"

namespace mxs {

constexpr int64_t kPackRowsPerBlock = 1024;  // rows per block of block_starts: part of the format
constexpr int64_t kPackLanes = 16;           // offsets per mask word (int16)

inline int64_t pack_mask_words(int64_t kvol) { return (kvol + kPackLanes - 1) / kPackLanes; }
inline int64_t pack_blocks(int64_t rows) { return (rows + kPackRowsPerBlock - 1) / kPackRowsPerBlock; }

// pack_map(nbr): an int32 [M, K] map.
inline void check_pack_map_args(const at::Tensor& nbr) { check_map(nbr, "nbr"); }

// pack_map's one value check: bad_entry, the flat index (row * kvol + offset) of the first entry
// below -1 or -1 for none, holding bad_value.
inline void check_pack_map_entries(int64_t bad_entry, int64_t bad_value, int64_t kvol) {
  TORCH_CHECK_VALUE(bad_entry < 0, "nbr: entries must be input rows (>= 0) or -1 (no neighbor), got ", bad_value,
                    " at [", bad_entry / std::max<int64_t>(kvol, 1), ", ", bad_entry % std::max<int64_t>(kvol, 1),
                    "]");
}

// unpack_map(mask, values, block_starts, kvol): the layout of the three tensors, on one device.
inline void check_unpack_map_args(const at::Tensor& mask, const at::Tensor& values, const at::Tensor& block_starts,
                                  int64_t kvol) {
  TORCH_CHECK_VALUE(kvol > 0 && kvol <= kMaxKernelVolume, "kvol: expected a kernel volume in [1, ", kMaxKernelVolume,
                    "], got ", kvol);
  TORCH_CHECK_VALUE(mask.dim() == 2 && mask.scalar_type() == at::kShort && mask.size(1) == pack_mask_words(kvol),
                    "mask: expected int16 [M, ", pack_mask_words(kvol), "] for kvol=", kvol, ", got ",
                    mask.scalar_type(), " ", mask.sizes());
  const int64_t nblocks = pack_blocks(mask.size(0));
  TORCH_CHECK_VALUE(values.dim() == 1 && values.scalar_type() == at::kInt, "values: expected int32 [P], got ",
                    values.scalar_type(), " ", values.sizes());
  TORCH_CHECK_VALUE(block_starts.dim() == 1 && block_starts.scalar_type() == at::kLong &&
                        block_starts.size(0) == nblocks + 1,
                    "block_starts: expected int64 [", nblocks + 1, "] (one per ", kPackRowsPerBlock,
                    " rows, plus the end), got ", block_starts.scalar_type(), " ", block_starts.sizes());
  check_same_device("mask", mask, {{"values", &values}, {"block_starts", &block_starts}});
}

// The mask bits past kvol in each row's last word (pack_map never sets them; the two unpack loops
// of the CPU would count them differently).
inline uint16_t pack_spare_lanes(int64_t kvol) {
  const int64_t live = kvol - (pack_mask_words(kvol) - 1) * kPackLanes;
  return uint16_t(~(live >= kPackLanes ? 0xFFFFu : (1u << live) - 1u));
}

// unpack_map's value checks of block_starts, in this order: it runs from 0 (first) to the number
// of values (last, total), and decreasing_block -- the first block b with start[b] > start[b+1]
// -- is nblocks or more (none).
inline void check_unpack_map_starts(int64_t first, int64_t last, int64_t total, int64_t decreasing_block,
                                    int64_t nblocks) {
  TORCH_CHECK_VALUE(first == 0 && last == total, "block_starts: expected to run from 0 to ", total,
                    " (the number of values), got ", first, " .. ", last);
  TORCH_CHECK_VALUE(decreasing_block >= nblocks, "block_starts: expected non-decreasing, got a decrease at block ",
                    decreasing_block);
}

// unpack_map's value checks of mask, in this order: spare_row -- the first row setting a bit past
// kvol -- is m or more (none), and mismatch_block -- the first block whose set bits differ from
// its block_starts share -- is pack_blocks(m) or more (none).
inline void check_unpack_map_mask(int64_t spare_row, int64_t mismatch_block, int64_t m, int64_t kvol) {
  TORCH_CHECK_VALUE(spare_row >= m, "mask: row ", spare_row, " sets bits past kvol=", kvol,
                    " (offsets that do not exist)");
  TORCH_CHECK_VALUE(mismatch_block >= pack_blocks(m), "mask: the set bits of rows ",
                    mismatch_block * kPackRowsPerBlock, "..",
                    std::min(m, (mismatch_block + 1) * kPackRowsPerBlock) - 1,
                    " do not match their block_starts share of values");
}

}  // namespace mxs
