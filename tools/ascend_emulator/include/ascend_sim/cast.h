// Cast with the A2 (src, dst, RoundMode) table of §4.3 (rule F24 rejects other pairs).
// CAST_NONE means RINT for lossy conversions and exact otherwise. Float->integer results
// saturate and NaN -> 0 (UNCONFIRMED hardware details). Widening in place is rejected (F26).
#pragma once
#include "ascend_sim/vector.h"

namespace AscendC {
namespace simdetail {

template <typename D, typename S>
inline bool castAllowed(RoundMode m) {
    using namespace AscendSim;
    const bool none = m == RoundMode::CAST_NONE;
    const bool r5 = m == RoundMode::CAST_RINT || m == RoundMode::CAST_FLOOR || m == RoundMode::CAST_CEIL ||
                    m == RoundMode::CAST_ROUND || m == RoundMode::CAST_TRUNC;
    if (std::is_same<S, half>::value && std::is_same<D, float>::value) return none;
    if (std::is_same<S, float>::value && std::is_same<D, half>::value) return none || r5 || m == RoundMode::CAST_ODD;
    if (std::is_same<S, float>::value && std::is_same<D, int32_t>::value) return r5;
    if (std::is_same<S, int32_t>::value && std::is_same<D, float>::value) return none || r5;
    if (std::is_same<S, float>::value && std::is_same<D, bfloat16_t>::value) return r5;
    if (std::is_same<S, bfloat16_t>::value && std::is_same<D, float>::value) return none;
    if (std::is_same<S, half>::value && std::is_same<D, int32_t>::value) return r5;
    if (std::is_same<S, int32_t>::value && std::is_same<D, int64_t>::value) return none;
    if (std::is_same<S, int64_t>::value && std::is_same<D, int32_t>::value) return none;
    if (std::is_same<S, int64_t>::value && std::is_same<D, float>::value) return none || r5;
    if (std::is_same<S, float>::value && std::is_same<D, int64_t>::value) return r5;
    if (std::is_same<S, int16_t>::value && (std::is_same<D, half>::value || std::is_same<D, float>::value)) return none;
    if (std::is_same<S, half>::value && (std::is_same<D, int8_t>::value || std::is_same<D, uint8_t>::value)) return none || r5;
    if ((std::is_same<S, int8_t>::value || std::is_same<S, uint8_t>::value) && std::is_same<D, half>::value) return none;
    if (std::is_same<S, int32_t>::value && std::is_same<D, int16_t>::value) return none;
    if (std::is_same<S, float>::value && std::is_same<D, float>::value) return r5;   // round to integral value
    return false;
}

template <typename D, typename S>
inline D castOne(S v, RoundMode m) {
    using namespace AscendSim;
    if constexpr (std::is_same<S, int64_t>::value && std::is_same<D, int32_t>::value) {
        return static_cast<D>(static_cast<uint32_t>(static_cast<uint64_t>(v)));   // keeps the low 32 bits (UNCONFIRMED)
    } else if constexpr (std::is_same<S, int32_t>::value && std::is_same<D, int16_t>::value) {
        return static_cast<D>(static_cast<uint16_t>(static_cast<uint32_t>(v)));   // keeps the low 16 bits (UNCONFIRMED)
    } else if constexpr (std::is_same<S, float>::value && std::is_same<D, float>::value) {
        return static_cast<float>(roundInt(toLD(v), m));
    } else {
        return fromLD<D>(toLD(v), m == RoundMode::CAST_NONE ? RoundMode::CAST_RINT : m);
    }
}

}  // namespace simdetail

template <typename T, typename U>
inline void Cast(const LocalTensor<T>& dst, const LocalTensor<U>& src, const RoundMode& roundMode, const uint32_t count) {
    const char* api = "Cast";
    if (!simdetail::castAllowed<T, U>(roundMode))
        AscendSim::violation("F24", api, AscendSim::fmt("Cast %s -> %s with RoundMode %d is not in the A2 table",
                                                        AscendSim::typeName<U>(), AscendSim::typeName<T>(), static_cast<int>(roundMode)));
    if (count == 0) return;
    simdetail::checkCountOperand(dst, count, api, "dst");
    simdetail::checkCountOperand(src, count, api, "src");
    if (sizeof(T) > sizeof(U) && dst.simAddr < src.simAddr + count * sizeof(U) && src.simAddr < dst.simAddr + count * sizeof(T))
        AscendSim::violation("F26", api, "widening Cast with overlapping src/dst corrupts data");
    std::vector<T> out(count);
    for (uint32_t i = 0; i < count; ++i) out[i] = simdetail::castOne<T, U>(simdetail::ubLoad<U>(src.simAddr + i * sizeof(U)), roundMode);
    std::memcpy(AscendSim::ubBase() + dst.simAddr, out.data(), count * sizeof(T));
    simdetail::countStats(count, sizeof(T) > sizeof(U) ? sizeof(T) : sizeof(U));
}

}  // namespace AscendC
