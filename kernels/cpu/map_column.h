// One column of a neighbor-map tile, compacted: for map rows r in [0, rows) of
// `tile` (row stride kvol), the rows whose entry in column k names an input row
// in [0, n_in), in ascending r. The output stationary loop of gather_mm calls it
// once per (output tile, offset), so it is vectorised where the CPU allows.
#pragma once
#include <cstdint>

namespace mxs {

struct MapColumn {
  int64_t count;    // entries written to in_rows / tile_rows
  int64_t bad_row;  // first r whose entry is neither -1 nor a valid row, or -1
};

// in_rows and tile_rows need room for rows + 16 entries (vector stores may
// write past `count`).
MapColumn compact_map_column(const int32_t* tile, int64_t rows, int64_t kvol, int64_t k, int64_t n_in,
                             int32_t* in_rows, int32_t* tile_rows);

}  // namespace mxs
