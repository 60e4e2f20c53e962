// Host tiling of gather_mm as plain C++ (no CANN): unit-tested in tests/ascend, called by the
// CANN glue (gather_mm_cann.cpp) and by the emulator harness.
#pragma once
#include <cstdint>
#include "tiling_common.h"
#include "gather_mm_tiling_data.h"
#include "gather_mm_weight_layout.h"

namespace mxs_ascend {

struct GatherMmShape {
    int64_t numOut = 0, numIn = 0;
    int64_t kvol = 0, cin = 0, cout = 0;
    int32_t dtypeKey = DT_KEY_FP32;
    int32_t weightLayout = GMM_WEIGHT_AS_IS;  // GatherMmWeightLayout: with GMM_WEIGHT_T*, the weight is [K, cout, cin]
};

// Budgets (bytes). Public so tests can reason about them.
constexpr int64_t kGmmSlabBudget = 1ll << 20;      // one gather slab per AIV (two are used)
constexpr int64_t kGmmMaxTileRows = 256;
constexpr int64_t kGmmMinTileRows = 16;            // wide K*cin rows may take the slab past its budget
constexpr int64_t kGmmCastChunk = 2048;            // fp32 elements per cast step (fp16/bf16, weight read transposed)

// Offsets that share one gather window: the kernel size of the last axis when the offsets are a
// cubic kernel (K = X^3, k row-major), else 1. A performance choice only: any value is exact.
int64_t WindowGroupOf(int64_t kvol);

// Fills `t`; returns TILING_OK or an error code. M == 0 yields usedAiv == 0 (nothing to launch).
int32_t GatherMmTiling(const GatherMmShape& s, const AscendPlatform& p, GatherMmTilingData& t);

// Total workspace bytes the launch needs (system 16 MiB + user).
uint64_t GatherMmWorkspaceBytes(const GatherMmTilingData& t);

}  // namespace mxs_ascend
