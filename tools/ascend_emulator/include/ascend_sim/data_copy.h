// DataCopy / DataCopyPad between GM and UB with the exact §3.3 semantics:
//   DataCopy: blockLen and both strides in 32 B blocks.
//   DataCopyPad: blockLen in bytes; GM-side stride in bytes, UB-side stride in 32 B blocks;
//   each UB row occupies roundup(left*sz + blockLen + right*sz, 32) bytes.
// Rules: B8 (UB view), B9 (GM allocation), C11 (UB 32 B alignment), C12 (DataCopy length and
// GM element alignment), C13 (parameter ranges), C14 (stride units), G28 (atomic dtype).
#pragma once
#include "ascend_sim/tensor.h"

namespace AscendC {
namespace simdetail {

template <typename T>
inline void checkUbAligned(const LocalTensor<T>& t, const char* api, const char* operand) {
    if (t.simAddr % 32 != 0)
        AscendSim::violation("C11", api, AscendSim::fmt("UB %s address %u is not 32-byte aligned", operand, t.simAddr));
}

// UB footprint check; if the footprint only overflows because of the strides, the likely
// cause is a stride given in the wrong unit -> report C14, otherwise B8.
inline void checkUbFootprint(uint64_t extent, uint64_t extentNoStride, uint32_t viewBytes, const char* api,
                             const char* operand, const std::string& paramText) {
    if (extent <= viewBytes) return;
    if (extentNoStride <= viewBytes)
        AscendSim::violation("C14", api, AscendSim::fmt("UB %s footprint %llu bytes exceeds its %u-byte view only because of the "
            "strides (%s); UB-side strides are in 32-byte blocks, DataCopyPad GM-side strides in bytes",
            operand, (unsigned long long)extent, viewBytes, paramText.c_str()));
    AscendSim::violation("B8", api, AscendSim::fmt("UB %s footprint %llu bytes exceeds its %u-byte LocalTensor view (%s)",
        operand, (unsigned long long)extent, viewBytes, paramText.c_str()));
}

template <typename T>
inline T atomicCombine(T old, T v, int mode) {
    if (mode == 1) {
        if constexpr (std::is_same<T, half>::value || std::is_same<T, bfloat16_t>::value)
            return T(static_cast<float>(static_cast<double>(static_cast<float>(old)) + static_cast<float>(v)));
        else if constexpr (std::is_integral<T>::value)
            return static_cast<T>(static_cast<typename std::make_unsigned<T>::type>(old) +
                                  static_cast<typename std::make_unsigned<T>::type>(v));
        else
            return static_cast<T>(old + v);
    }
    if (mode == 2) return static_cast<float>(v) > static_cast<float>(old) ? v : old;
    return static_cast<float>(v) < static_cast<float>(old) ? v : old;
}

// Write n elements to GM honouring the core's atomic mode (G28).
template <typename T>
inline void gmStore(T* gm, const uint8_t* ub, uint64_t bytes, const char* api) {
    auto& c = AscendSim::ctx();
    if (c.atomicMode == 0) {
        std::memcpy(gm, ub, bytes);
        return;
    }
    if (std::strcmp(c.atomicType, AscendSim::typeName<T>()) != 0)
        AscendSim::violation("G28", api, AscendSim::fmt("atomic mode is set for %s but the copy moves %s elements",
                                                        c.atomicType, AscendSim::typeName<T>()));
    uint64_t n = bytes / sizeof(T);
    AscendSim::atomicLock();
    for (uint64_t i = 0; i < n; ++i) {
        T old, v;
        std::memcpy(&old, gm + i, sizeof(T));
        std::memcpy(&v, ub + i * sizeof(T), sizeof(T));
        T r = atomicCombine<T>(old, v, c.atomicMode);
        std::memcpy(gm + i, &r, sizeof(T));
    }
    AscendSim::atomicUnlock();
    c.stats.atomicBytes += bytes;
}

inline AscendSim::GmAccess storeKind() {
    return AscendSim::ctx().atomicMode ? AscendSim::GmAccess::AtomicWrite : AscendSim::GmAccess::Write;
}

inline void checkParams(const DataCopyParams& p, const char* api) {
    if (p.blockCount > 4095) AscendSim::violation("C13", api, AscendSim::fmt("blockCount %u > 4095", p.blockCount));
}
inline void checkExtParams(const DataCopyExtParams& p, size_t sz, const char* api) {
    if (p.blockCount > 4095) AscendSim::violation("C13", api, AscendSim::fmt("blockCount %u > 4095", p.blockCount));
    if (p.blockLen > 2097151) AscendSim::violation("C13", api, AscendSim::fmt("blockLen %u bytes > 2097151", p.blockLen));
    if (p.blockLen % sz != 0)
        AscendSim::violation("C13", api, AscendSim::fmt("blockLen %u bytes is not a multiple of sizeof(T)=%zu", p.blockLen, sz));
}
template <typename T>
inline void checkGmElemAligned(const T* gm, const char* api) {
    if (reinterpret_cast<uintptr_t>(gm) % sizeof(T) != 0)
        AscendSim::violation("C12", api, AscendSim::fmt("GM address %p is not aligned to sizeof(T)=%zu", (const void*)gm, sizeof(T)));
}
inline std::string paramText(const DataCopyParams& p) {
    return AscendSim::fmt("blockCount=%u blockLen=%u srcStride=%u dstStride=%u [32B blocks]", p.blockCount, p.blockLen,
                          p.srcStride, p.dstStride);
}
inline std::string paramText(const DataCopyExtParams& p) {
    return AscendSim::fmt("blockCount=%u blockLen=%u B srcStride=%u dstStride=%u", p.blockCount, p.blockLen, p.srcStride,
                          p.dstStride);
}
template <typename T>
inline uint32_t countToBlocks(uint32_t count, const char* api) {
    uint64_t bytes = static_cast<uint64_t>(count) * sizeof(T);
    if (bytes % 32 != 0)
        AscendSim::violation("C12", api, AscendSim::fmt("count %u x sizeof(%s)=%llu bytes is not a multiple of 32 "
            "(the NPU silently truncates; use DataCopyPad)", count, AscendSim::typeName<T>(), (unsigned long long)bytes));
    if (bytes / 32 > 65535) AscendSim::violation("C13", api, AscendSim::fmt("count %u is more than 65535 blocks", count));
    return static_cast<uint32_t>(bytes / 32);
}

}  // namespace simdetail

// ---------------- DataCopy GM -> UB ----------------
template <typename T>
inline void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const DataCopyParams& p) {
    const char* api = "DataCopy(GM->UB)";
    simdetail::checkParams(p, api);
    if (p.blockCount == 0 || p.blockLen == 0) return;
    simdetail::checkUbAligned(dst, api, "dst");
    simdetail::checkGmElemAligned(src.simGm, api);
    uint64_t row = p.blockLen * 32ull;
    simdetail::checkUbFootprint((p.blockCount - 1ull) * (p.blockLen + p.dstStride) * 32 + row, p.blockCount * row,
                                dst.simBytes, api, "dst", simdetail::paramText(p));
    const uint8_t* g = reinterpret_cast<const uint8_t*>(src.simGm);
    uint8_t* u = AscendSim::ubBase() + dst.simAddr;
    for (uint32_t i = 0; i < p.blockCount; ++i) {
        const uint8_t* gs = g + static_cast<uint64_t>(i) * (p.blockLen + p.srcStride) * 32;
        AscendSim::gmCheckAccess(gs, row, AscendSim::GmAccess::Read, api);
        AscendSim::hzAccess(AscendSim::PIPE_ID_MTE2, dst.simAddr + static_cast<uint32_t>(i * (p.blockLen + p.dstStride) * 32ull), row, true, api);
        std::memcpy(u + static_cast<uint64_t>(i) * (p.blockLen + p.dstStride) * 32, gs, row);
    }
    auto& s = AscendSim::stats();
    s.gmToUbBytes += row * p.blockCount; s.dmaCalls++;
}
template <typename T>
inline void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const uint32_t count) {
    uint32_t blocks = simdetail::countToBlocks<T>(count, "DataCopy(GM->UB)");
    DataCopy(dst, src, DataCopyParams(1, static_cast<uint16_t>(blocks), 0, 0));
}

// ---------------- DataCopy UB -> GM ----------------
template <typename T>
inline void DataCopy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyParams& p) {
    const char* api = "DataCopy(UB->GM)";
    simdetail::checkParams(p, api);
    if (p.blockCount == 0 || p.blockLen == 0) return;
    simdetail::checkUbAligned(src, api, "src");
    simdetail::checkGmElemAligned(dst.simGm, api);
    uint64_t row = p.blockLen * 32ull;
    simdetail::checkUbFootprint((p.blockCount - 1ull) * (p.blockLen + p.srcStride) * 32 + row, p.blockCount * row,
                                src.simBytes, api, "src", simdetail::paramText(p));
    uint8_t* g = reinterpret_cast<uint8_t*>(dst.simGm);
    const uint8_t* u = AscendSim::ubBase() + src.simAddr;
    for (uint32_t i = 0; i < p.blockCount; ++i) {
        uint8_t* gd = g + static_cast<uint64_t>(i) * (p.blockLen + p.dstStride) * 32;
        AscendSim::gmCheckAccess(gd, row, simdetail::storeKind(), api);
        AscendSim::hzAccess(AscendSim::PIPE_ID_MTE3, src.simAddr + static_cast<uint32_t>(i * (p.blockLen + p.srcStride) * 32ull), row, false, api);
        simdetail::gmStore(reinterpret_cast<T*>(gd), u + static_cast<uint64_t>(i) * (p.blockLen + p.srcStride) * 32, row, api);
    }
    auto& s = AscendSim::stats();
    s.ubToGmBytes += row * p.blockCount; s.dmaCalls++;
}
template <typename T>
inline void DataCopy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const uint32_t count) {
    uint32_t blocks = simdetail::countToBlocks<T>(count, "DataCopy(UB->GM)");
    DataCopy(dst, src, DataCopyParams(1, static_cast<uint16_t>(blocks), 0, 0));
}

// ---------------- DataCopy UB -> UB ----------------
template <typename T>
inline void DataCopy(const LocalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyParams& p) {
    const char* api = "DataCopy(UB->UB)";
    simdetail::checkParams(p, api);
    if (p.blockCount == 0 || p.blockLen == 0) return;
    simdetail::checkUbAligned(dst, api, "dst");
    simdetail::checkUbAligned(src, api, "src");
    uint64_t row = p.blockLen * 32ull;
    simdetail::checkUbFootprint((p.blockCount - 1ull) * (p.blockLen + p.dstStride) * 32 + row, p.blockCount * row,
                                dst.simBytes, api, "dst", simdetail::paramText(p));
    simdetail::checkUbFootprint((p.blockCount - 1ull) * (p.blockLen + p.srcStride) * 32 + row, p.blockCount * row,
                                src.simBytes, api, "src", simdetail::paramText(p));
    uint8_t* ub = AscendSim::ubBase();
    for (uint32_t i = 0; i < p.blockCount; ++i) {
        AscendSim::hzAccess(AscendSim::PIPE_ID_V, src.simAddr + static_cast<uint32_t>(i * (p.blockLen + p.srcStride) * 32ull), row, false, api);
        AscendSim::hzAccess(AscendSim::PIPE_ID_V, dst.simAddr + static_cast<uint32_t>(i * (p.blockLen + p.dstStride) * 32ull), row, true, api);
        std::memmove(ub + dst.simAddr + static_cast<uint64_t>(i) * (p.blockLen + p.dstStride) * 32,
                     ub + src.simAddr + static_cast<uint64_t>(i) * (p.blockLen + p.srcStride) * 32, row);
    }
    auto& s = AscendSim::stats();
    s.ubToUbBytes += row * p.blockCount; s.dmaCalls++;
}
template <typename T>
inline void DataCopy(const LocalTensor<T>& dst, const LocalTensor<T>& src, const uint32_t count) {
    uint32_t blocks = simdetail::countToBlocks<T>(count, "DataCopy(UB->UB)");
    DataCopy(dst, src, DataCopyParams(1, static_cast<uint16_t>(blocks), 0, 0));
}

// ---------------- DataCopyPad GM -> UB ----------------
template <typename T>
inline void DataCopyPad(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const DataCopyExtParams& p,
                        const DataCopyPadExtParams<T>& pad) {
    const char* api = "DataCopyPad(GM->UB)";
    const size_t sz = sizeof(T);
    simdetail::checkExtParams(p, sz, api);
    if (pad.leftPadding * sz > 32 || pad.rightPadding * sz > 32)
        AscendSim::violation("C13", api, AscendSim::fmt("left/right padding %u/%u elements exceed 32 bytes", pad.leftPadding,
                                                        pad.rightPadding));
    if (sz == 8 && pad.isPad) {
        T zero{};
        if (std::memcmp(&zero, &pad.paddingValue, sz) != 0)
            AscendSim::violation("C13", api, "paddingValue must be 0 for 64-bit element types");
    }
    if (p.blockCount == 0 || p.blockLen == 0) return;
    simdetail::checkUbAligned(dst, api, "dst");
    uint64_t left = pad.leftPadding * sz, right = pad.rightPadding * sz;
    uint64_t row = (left + p.blockLen + right + 31) / 32 * 32;
    uint64_t pitch = row + static_cast<uint64_t>(p.dstStride) * 32;
    simdetail::checkUbFootprint((p.blockCount - 1ull) * pitch + row, p.blockCount * row, dst.simBytes, api, "dst",
                                simdetail::paramText(p));
    const uint8_t* g = reinterpret_cast<const uint8_t*>(src.simGm);
    uint8_t* u = AscendSim::ubBase() + dst.simAddr;
    for (uint32_t i = 0; i < p.blockCount; ++i) {
        const uint8_t* gs = g + static_cast<uint64_t>(i) * (p.blockLen + p.srcStride);
        AscendSim::gmCheckAccess(gs, p.blockLen, AscendSim::GmAccess::Read, api);
        AscendSim::hzAccess(AscendSim::PIPE_ID_MTE2, dst.simAddr + static_cast<uint32_t>(i * pitch), row, true, api);
        uint8_t* r = u + i * pitch;
        if (pad.isPad) {
            for (uint64_t b = 0; b < row; b += sz) std::memcpy(r + b, &pad.paddingValue, sz);
        } else {
            std::memset(r, 0xA5, row);   // dummy bytes: undefined on the NPU
        }
        std::memcpy(r + left, gs, p.blockLen);
    }
    auto& s = AscendSim::stats();
    s.gmToUbBytes += static_cast<uint64_t>(p.blockLen) * p.blockCount; s.dmaCalls++;
}

// ---------------- DataCopyPad UB -> GM ----------------
template <typename T>
inline void DataCopyPad(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyExtParams& p) {
    const char* api = "DataCopyPad(UB->GM)";
    simdetail::checkExtParams(p, sizeof(T), api);
    if (p.blockCount == 0 || p.blockLen == 0) return;
    simdetail::checkUbAligned(src, api, "src");
    uint64_t row = (p.blockLen + 31ull) / 32 * 32;
    uint64_t pitch = row + static_cast<uint64_t>(p.srcStride) * 32;
    simdetail::checkUbFootprint((p.blockCount - 1ull) * pitch + row, p.blockCount * row, src.simBytes, api, "src",
                                simdetail::paramText(p));
    uint8_t* g = reinterpret_cast<uint8_t*>(dst.simGm);
    const uint8_t* u = AscendSim::ubBase() + src.simAddr;
    for (uint32_t i = 0; i < p.blockCount; ++i) {
        uint8_t* gd = g + static_cast<uint64_t>(i) * (p.blockLen + p.dstStride);
        AscendSim::gmCheckAccess(gd, p.blockLen, simdetail::storeKind(), api);
        AscendSim::hzAccess(AscendSim::PIPE_ID_MTE3, src.simAddr + static_cast<uint32_t>(i * pitch), p.blockLen, false, api);
        simdetail::gmStore(reinterpret_cast<T*>(gd), u + i * pitch, p.blockLen, api);
    }
    auto& s = AscendSim::stats();
    s.ubToGmBytes += static_cast<uint64_t>(p.blockLen) * p.blockCount; s.dmaCalls++;
}

// ---------------- legacy DataCopyPad forms (16-bit params, blockLen in bytes) ----------------
template <typename T>
inline void DataCopyPad(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const DataCopyParams& p,
                        const DataCopyPadParams& pad) {
    T v{};
    std::memcpy(&v, &pad.paddingValue, sizeof(T) < 8 ? sizeof(T) : 8);
    DataCopyPad(dst, src, DataCopyExtParams(p.blockCount, p.blockLen, p.srcStride, p.dstStride, 0),
                DataCopyPadExtParams<T>(pad.isPad, pad.leftPadding, pad.rightPadding, v));
}
template <typename T>
inline void DataCopyPad(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyParams& p) {
    DataCopyPad(dst, src, DataCopyExtParams(p.blockCount, p.blockLen, p.srcStride, p.dstStride, 0));
}

}  // namespace AscendC
