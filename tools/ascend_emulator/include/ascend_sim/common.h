// Basic AscendC vocabulary: qualifier macros, enums, constants, parameter structs.
// Values follow ASCENDC_REFERENCE.md §1.4, §2, §3.1, §4.
#pragma once
#include <cstdint>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include "ascend_sim/half.h"
#include <cstdio>

#ifndef __aicore__
#define __aicore__
#endif
#ifndef __global__
#define __global__
#endif
#ifndef __gm__
#define __gm__
#endif
#ifndef __inline__
#define __inline__ inline
#endif
typedef uint8_t* GM_ADDR;

// On the emulator only the AIV side of a mix kernel executes user code; the AIC work
// (Matmul) is executed synchronously on behalf of the calling AIV.
#define ASCEND_IS_AIV (true)
#define ASCEND_IS_AIC (false)
#ifndef __NPU_ARCH__
#define __NPU_ARCH__ 2201
#endif
#ifndef ASCENDC_CPU_DEBUG
#define ASCENDC_CPU_DEBUG 1
#endif

// Global in CANN: harnesses write KernelMode::AIV_MODE, kernels KERNEL_TYPE_AIV_ONLY.
enum class KernelMode { MIX_MODE = 0, AIC_MODE, AIV_MODE };
enum KernelMetaType {
    KERNEL_TYPE_AIV_ONLY, KERNEL_TYPE_AIC_ONLY, KERNEL_TYPE_MIX_AIV_1_0, KERNEL_TYPE_MIX_AIC_1_0,
    KERNEL_TYPE_MIX_AIC_1_1, KERNEL_TYPE_MIX_AIC_1_2, KERNEL_TYPE_MAX
};

namespace AscendC {

enum class TPosition : uint8_t {
    GM, A1, A2, B1, B2, C1, C2, CO1, CO2, VECIN, VECOUT, VECCALC, LCM = VECCALC, SPM, SHM = SPM, TSCM,
    C2PIPE2GM, C2PIPE2LOCAL, MAX
};
using QuePosition = TPosition;

enum class HardEvent : uint8_t {
    MTE2_MTE1, MTE1_MTE2, MTE1_M, M_MTE1, MTE2_V, V_MTE2, MTE3_V, V_MTE3, M_V, V_M, V_V, MTE3_MTE1, MTE1_MTE3,
    MTE1_V, MTE2_M, M_MTE2, V_MTE1, M_FIX, FIX_M, MTE3_MTE2, MTE2_MTE3, S_V, V_S, S_MTE2, MTE2_S, S_MTE3,
    MTE3_S, MTE2_FIX, FIX_MTE2, FIX_S, M_S, FIX_MTE3, MAX
};
constexpr int HARD_EVENT_COUNT = static_cast<int>(HardEvent::MAX);
using TEventID = int8_t;

enum class RoundMode : uint8_t { CAST_NONE = 0, CAST_RINT, CAST_FLOOR, CAST_CEIL, CAST_ROUND, CAST_TRUNC, CAST_ODD };
enum class CMPMODE : uint8_t { LT = 0, GT, EQ, LE, GE, NE };
enum class SELMODE : uint8_t { VSEL_CMPMASK_SPR = 0, VSEL_TENSOR_SCALAR_MODE, VSEL_TENSOR_TENSOR_MODE };
enum class MaskMode : uint8_t { NORMAL = 0, COUNTER };

using ::KernelMode;
using ::KernelMetaType;
using std::printf;   // AscendC::printf for kernel debugging prints

// Granularity constants (IMPL utils/kernel_utils_constants.h).
constexpr int32_t ONE_BLK_SIZE = 32;
constexpr int32_t ONE_REPEAT_BYTE_SIZE = 256;
constexpr int32_t MAX_REPEAT_TIMES = 255;
constexpr int32_t B32_BYTE_SIZE = 4;
constexpr int32_t B16_BYTE_SIZE = 2;
constexpr int32_t B32_DATA_NUM_PER_BLOCK = 8;
constexpr int32_t B16_DATA_NUM_PER_BLOCK = 16;
constexpr int32_t B32_DATA_NUM_PER_REPEAT = 64;
constexpr int32_t B16_DATA_NUM_PER_REPEAT = 128;
constexpr int32_t ONE_REPEAT_FLOAT_SIZE = 64;
constexpr uint64_t FULL_MASK = 0xffffffffffffffffULL;
constexpr uint64_t MASK_PLACEHOLDER = 0;
constexpr uint32_t TOTAL_UB_SIZE = 196608;
constexpr uint32_t TMP_UB_OFFSET = 184 * 1024;
constexpr uint64_t RESERVED_WORKSPACE = 16ULL * 1024 * 1024;

// ---- DMA parameter structs (§3.1) ----
struct DataCopyParams {
    uint16_t blockCount = 1;
    uint16_t blockLen = 0;
    uint16_t srcStride = 0;
    uint16_t dstStride = 0;
    DataCopyParams() = default;
    DataCopyParams(uint16_t count, uint16_t len, uint16_t srcStride_, uint16_t dstStride_)
        : blockCount(count), blockLen(len), srcStride(srcStride_), dstStride(dstStride_) {}
};
struct DataCopyExtParams {
    uint16_t blockCount = 1;
    uint32_t blockLen = 0;
    uint32_t srcStride = 0;
    uint32_t dstStride = 0;
    uint32_t rsv = 0;
    DataCopyExtParams() = default;
    DataCopyExtParams(uint16_t count, uint32_t len, uint32_t srcStride_, uint32_t dstStride_, uint32_t rsv_ = 0)
        : blockCount(count), blockLen(len), srcStride(srcStride_), dstStride(dstStride_), rsv(rsv_) {}
};
template <typename T>
struct DataCopyPadExtParams {
    bool isPad = false;
    uint8_t leftPadding = 0;
    uint8_t rightPadding = 0;
    T paddingValue{};
    DataCopyPadExtParams() = default;
    DataCopyPadExtParams(bool isPad_, uint8_t left, uint8_t right, T value)
        : isPad(isPad_), leftPadding(left), rightPadding(right), paddingValue(value) {}
};
struct DataCopyPadParams {  // legacy 16-bit form
    bool isPad = false;
    uint8_t leftPadding = 0;
    uint8_t rightPadding = 0;
    uint64_t paddingValue = 0;
    DataCopyPadParams() = default;
    DataCopyPadParams(bool isPad_, uint8_t left, uint8_t right, uint64_t value)
        : isPad(isPad_), leftPadding(left), rightPadding(right), paddingValue(value) {}
};

// ---- vector repeat parameter structs (§4.1), units: 32 B blocks ----
struct UnaryRepeatParams {
    uint16_t dstBlkStride = 1, srcBlkStride = 1;
    uint8_t dstRepStride = 8, srcRepStride = 8;
    UnaryRepeatParams() = default;
    UnaryRepeatParams(uint16_t dB, uint16_t sB, uint8_t dR, uint8_t sR)
        : dstBlkStride(dB), srcBlkStride(sB), dstRepStride(dR), srcRepStride(sR) {}
};
struct BinaryRepeatParams {
    uint8_t dstBlkStride = 1, src0BlkStride = 1, src1BlkStride = 1;
    uint8_t dstRepStride = 8, src0RepStride = 8, src1RepStride = 8;
    BinaryRepeatParams() = default;
    BinaryRepeatParams(uint8_t dB, uint8_t s0B, uint8_t s1B, uint8_t dR, uint8_t s0R, uint8_t s1R)
        : dstBlkStride(dB), src0BlkStride(s0B), src1BlkStride(s1B), dstRepStride(dR), src0RepStride(s0R),
          src1RepStride(s1R) {}
};
struct GatherMaskParams {
    uint8_t src0BlockStride = 1;
    uint16_t repeatTimes = 0;
    uint16_t src0RepeatStride = 8;
    uint8_t src1RepeatStride = 1;
    GatherMaskParams() = default;
    GatherMaskParams(uint8_t s0B, uint16_t rep, uint16_t s0R, uint8_t s1R)
        : src0BlockStride(s0B), repeatTimes(rep), src0RepeatStride(s0R), src1RepeatStride(s1R) {}
};

}  // namespace AscendC

// Event id constants (global in CANN): SetFlag<HardEvent::MTE2_V>(EVENT_ID0).
enum event_t { EVENT_ID0 = 0, EVENT_ID1, EVENT_ID2, EVENT_ID3, EVENT_ID4, EVENT_ID5, EVENT_ID6, EVENT_ID7 };

// pipe_t is a global enum in CANN (legacy pipe_barrier(PIPE_x) spelling).
enum pipe_t { PIPE_S = 0, PIPE_V, PIPE_M, PIPE_MTE1, PIPE_MTE2, PIPE_MTE3, PIPE_ALL, PIPE_FIX };

namespace AscendSim {
template <typename T> struct Identity { using type = T; };
template <typename T> using NoDeduce = typename Identity<T>::type;

template <typename T> inline const char* typeName() {
    if (std::is_same<T, float>::value) return "float";
    if (std::is_same<T, half>::value) return "half";
    if (std::is_same<T, bfloat16_t>::value) return "bfloat16_t";
    if (std::is_same<T, double>::value) return "double";
    if (std::is_same<T, int8_t>::value) return "int8_t";
    if (std::is_same<T, uint8_t>::value) return "uint8_t";
    if (std::is_same<T, int16_t>::value) return "int16_t";
    if (std::is_same<T, uint16_t>::value) return "uint16_t";
    if (std::is_same<T, int32_t>::value) return "int32_t";
    if (std::is_same<T, uint32_t>::value) return "uint32_t";
    if (std::is_same<T, int64_t>::value) return "int64_t";
    if (std::is_same<T, uint64_t>::value) return "uint64_t";
    return "unknown";
}
template <typename T, typename... Us> constexpr bool isOneOf() { return (std::is_same<T, Us>::value || ...); }
}  // namespace AscendSim
