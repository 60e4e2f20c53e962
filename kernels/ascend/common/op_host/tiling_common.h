// Plain-C++ helpers shared by the host tiling functions of the mx_sparse AscendC ops.
// No CANN dependency: the CANN glue (op_host/*_cann.cpp) fills AscendPlatform from
// platform_ascendc::PlatformAscendC and copies the resulting plain struct into the raw
// tiling buffer; the emulator harnesses fill it from AscendSim::platform().
#pragma once
#include <cstdint>

namespace mxs_ascend {

struct AscendPlatform {
    uint32_t aicNum = 0;   // GetCoreNumAic()
    uint32_t aivNum = 0;   // GetCoreNumAiv()
    uint64_t ubSize = 0;   // GetCoreMemSize(UB)
};

enum TilingStatus : int32_t {
    TILING_OK = 0,
    TILING_BAD_SHAPE = 1,     // negative / zero where not allowed
    TILING_BAD_PLATFORM = 2,  // no cores, UB too small
    TILING_CHANNELS_TOO_WIDE = 3,  // a channel row does not fit the UB double buffer
    TILING_BAD_DTYPE = 4,
};

// Kernel dtype keys (the tiling key selects the instantiation on device).
enum DTypeKey : int32_t { DT_KEY_FP32 = 0, DT_KEY_FP16 = 1, DT_KEY_BF16 = 2 };
inline int32_t DTypeSize(int32_t key) { return key == DT_KEY_FP32 ? 4 : (key == DT_KEY_FP16 || key == DT_KEY_BF16) ? 2 : 0; }

constexpr uint64_t kUbBlock = 32;
constexpr uint64_t kSysWorkspace = 16ull * 1024 * 1024;  // RESERVED_WORKSPACE on 2201
constexpr int64_t kMatmulMaxK = 65535;                     // ND Ka limit without intrinsicsCheck

inline int64_t CeilDiv(int64_t a, int64_t b) { return b == 0 ? 0 : (a + b - 1) / b; }
inline int64_t AlignUp(int64_t a, int64_t b) { return CeilDiv(a, b) * b; }
inline int64_t AlignDown(int64_t a, int64_t b) { return b == 0 ? 0 : a / b * b; }
inline int64_t Min64(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t Max64(int64_t a, int64_t b) { return a > b ? a : b; }

// Big/small core balancing: `items` split over `workers`; the first `items % workers`
// workers take one more. Returns [begin, end) of worker w.
struct Range { int64_t begin, end; };
inline Range SplitBigSmall(int64_t items, int64_t workers, int64_t w) {
    const int64_t base = items / workers, extra = items % workers;
    const int64_t b = w * base + (w < extra ? w : extra);
    return {b, b + base + (w < extra ? 1 : 0)};
}

}  // namespace mxs_ascend
