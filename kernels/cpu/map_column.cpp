// Portable and AVX-512 versions of map_column.h, picked once at load time.
#include "map_column.h"
#include "portable_switch.h"

#include "../common/mxs_qualifiers.h"  // kNoNeighbor

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace mxs {
namespace {

MapColumn compact_generic(const int32_t* tile, int64_t rows, int64_t kvol, int64_t k, int64_t n_in, int32_t* in_rows,
                          int32_t* tile_rows) {
  MapColumn col{0, -1};
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t i = tile[r * kvol + k];
    const bool valid = i >= 0 && i < n_in;
    if (!valid && i != kNoNeighbor && col.bad_row < 0) col.bad_row = r;
    // branch-free: valid entries come in no predictable pattern
    in_rows[col.count] = i;
    tile_rows[col.count] = static_cast<int32_t>(r);
    col.count += valid;
  }
  return col;
}

#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC push_options
#pragma GCC target("avx512f")
// 16 rows per step: gather the column entries, compare, and compress the valid
// ones (and their row numbers) to the front of a register before storing it.
MapColumn compact_avx512(const int32_t* tile, int64_t rows, int64_t kvol, int64_t k, int64_t n_in, int32_t* in_rows,
                         int32_t* tile_rows) {
  MapColumn col{0, -1};
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i offsets = _mm512_mullo_epi32(lane, _mm512_set1_epi32(static_cast<int32_t>(kvol)));
  const __m512i none = _mm512_set1_epi32(kNoNeighbor), limit = _mm512_set1_epi32(static_cast<int32_t>(n_in));
  for (int64_t r0 = 0; r0 < rows; r0 += 16) {
    const __mmask16 live = rows - r0 >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (rows - r0)) - 1u);
    const __m512i v = _mm512_mask_i32gather_epi32(none, live, offsets, tile + r0 * kvol + k, 4);
    const __mmask16 valid = _mm512_mask_cmplt_epi32_mask(_mm512_cmpge_epi32_mask(v, _mm512_setzero_si512()), v, limit);
    const __mmask16 corrupt = _mm512_mask_cmpneq_epi32_mask(__mmask16(~valid & live), v, none);
    if (corrupt && col.bad_row < 0) col.bad_row = r0 + __builtin_ctz(corrupt);
    const __m512i r = _mm512_add_epi32(lane, _mm512_set1_epi32(static_cast<int32_t>(r0)));
    _mm512_storeu_si512(in_rows + col.count, _mm512_maskz_compress_epi32(valid, v));
    _mm512_storeu_si512(tile_rows + col.count, _mm512_maskz_compress_epi32(valid, r));
    col.count += __builtin_popcount(valid);
  }
  return col;
}
#pragma GCC pop_options
const bool kUseAvx512 = __builtin_cpu_supports("avx512f") && !portable_kernels_only();
#endif

}  // namespace

MapColumn compact_map_column(const int32_t* tile, int64_t rows, int64_t kvol, int64_t k, int64_t n_in,
                             int32_t* in_rows, int32_t* tile_rows) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (kUseAvx512) return compact_avx512(tile, rows, kvol, k, n_in, in_rows, tile_rows);
#endif
  return compact_generic(tile, rows, kvol, k, n_in, in_rows, tile_rows);
}

}  // namespace mxs
