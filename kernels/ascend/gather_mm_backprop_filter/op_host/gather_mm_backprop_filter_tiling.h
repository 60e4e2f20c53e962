// Host tiling of gather_mm_backprop_filter as plain C++ (no CANN).
#pragma once
#include <cstdint>
#include "../../common/op_host/tiling_common.h"
#include "gather_mm_backprop_filter_tiling_data.h"

namespace mxs_ascend {

struct GatherMmBpfShape {
    int64_t numOut = 0, numIn = 0;
    int64_t kvol = 0, cin = 0, cout = 0;
    int32_t dtypeKey = DT_KEY_FP32;
};

constexpr int64_t kBpfSlabBudget = 1ll << 20;   // bytes of one gather slab
constexpr int64_t kBpfMaxTileRows = 1024;       // also bounds the strided nbr UB buffer (32 B per row)
constexpr int64_t kBpfMinCinBlock = 16;
constexpr int64_t kBpfCastChunk = 2048;         // fp32 elements per cast / reduce step
constexpr int64_t kBpfFillBudget = 64 * 1024;  // one UB fill buffer
constexpr int64_t kBpfMinPartRows = 256;        // a row range of a split item has at least this many rows
constexpr int64_t kBpfPartialBudget = 256ll << 20;  // bytes of fp32 partials in the workspace

int32_t GatherMmBpfTiling(const GatherMmBpfShape& s, const AscendPlatform& p, GatherMmBpfTilingData& t);
uint64_t GatherMmBpfWorkspaceBytes(const GatherMmBpfTilingData& t);
// Rows [begin, end) of part `part` of an item (big/small split of M over P parts).
inline Range GatherMmBpfPartRows(const GatherMmBpfTilingData& t, int64_t part) {
    return SplitBigSmall(t.numOut, t.numParts, part);
}

}  // namespace mxs_ascend
