// Host tiling of gather_mm_backprop_filter as plain C++ (no CANN).
#pragma once
#include <cstdint>
#include "tiling_common.h"
#include "gather_mm_backprop_filter_tiling_data.h"

namespace mxs_ascend {

struct GatherMmBpfShape {
    int64_t numOut = 0, numIn = 0;
    int64_t kvol = 0, cin = 0, cout = 0;
    int32_t dtypeKey = DT_KEY_FP32;
};

constexpr int64_t kBpfCastChunk = 2048;            // fp32 elements per reduce / cast step
constexpr int64_t kBpfMinRowsPerAiv = 256;         // an AIV's partial covers at least this many rows
constexpr int64_t kBpfPartialBudget = 256ll << 20; // bytes of fp32 partials in the workspace

int32_t GatherMmBpfTiling(const GatherMmBpfShape& s, const AscendPlatform& p, GatherMmBpfTilingData& t);
uint64_t GatherMmBpfWorkspaceBytes(const GatherMmBpfTilingData& t);

}  // namespace mxs_ascend
