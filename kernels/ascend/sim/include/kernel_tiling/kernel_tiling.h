// TCubeTiling as plain data (ADV: TCubeTiling结构体). The emulator's Matmul only needs the
// org/single shapes; the base/step/depth fields are carried so host tiling code can fill them.
#pragma once
#include <cstdint>

struct TCubeTiling {
    int32_t usedCoreNum = 1;
    int32_t M = 0, N = 0, Ka = 0, Kb = 0;
    int32_t singleCoreM = 0, singleCoreN = 0, singleCoreK = 0;
    int32_t baseM = 128, baseN = 256, baseK = 64;
    int32_t depthA1 = 1, depthB1 = 1;
    int32_t stepM = 1, stepN = 1;
    int32_t isBias = 0;
    int32_t transLength = 0;
    int32_t iterateOrder = 0;
    int32_t shareMode = 0, shareL1Size = 0, shareL0CSize = 0, shareUbSize = 0;
    int32_t batchM = 1, batchN = 1, singleBatchM = 1, singleBatchN = 1;
    int32_t stepKa = 1, stepKb = 1;
    int32_t depthAL1CacheUB = 0, depthBL1CacheUB = 0;
    int32_t dbL0A = 2, dbL0B = 2, dbL0C = 1;
    int32_t reserved[8] = {};
};
