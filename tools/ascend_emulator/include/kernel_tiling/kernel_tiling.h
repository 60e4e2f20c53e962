// TCubeTiling as plain data (ADV: TCubeTiling结构体), field for field as in the header that CANN
// generates (kernel_tiling/kernel_tiling.h; checked against an installed CANN by tools/ascend_real_api/installed_cann_check.py:
// same names, offsets and size), because tiling structs embed it and are copied bytewise from host
// to device. The emulator's Matmul only needs the org/single shapes; the other fields are carried
// so host tiling code can fill them.
#pragma once
#include <cstdint>

struct TCubeTiling {
    int32_t usedCoreNum = 0;
    int32_t M = 0, N = 0, Ka = 0, Kb = 0;
    int32_t singleCoreM = 0, singleCoreN = 0, singleCoreK = 0;
    int32_t baseM = 0, baseN = 0, baseK = 0;
    int32_t depthA1 = 0, depthB1 = 0;
    int32_t stepM = 0, stepN = 0;
    int32_t isBias = 0;
    int32_t transLength = 0;
    int32_t iterateOrder = 0;
    int32_t shareMode = 0, shareL1Size = 0, shareL0CSize = 0, shareUbSize = 0;
    int32_t batchM = 0, batchN = 0, singleBatchM = 0, singleBatchN = 0;
    int32_t stepKa = 0, stepKb = 0;
    int32_t depthAL1CacheUB = 0, depthBL1CacheUB = 0;
    int32_t dbL0A = 0, dbL0B = 0, dbL0C = 0;
    int32_t ALayoutInfoB = 0, ALayoutInfoS = 0, ALayoutInfoN = 0, ALayoutInfoG = 0, ALayoutInfoD = 0;
    int32_t BLayoutInfoB = 0, BLayoutInfoS = 0, BLayoutInfoN = 0, BLayoutInfoG = 0, BLayoutInfoD = 0;
    int32_t CLayoutInfoB = 0, CLayoutInfoS1 = 0, CLayoutInfoN = 0, CLayoutInfoG = 0, CLayoutInfoS2 = 0;
    int32_t BatchNum = 0;
    int32_t mxTypePara = 0;
};
