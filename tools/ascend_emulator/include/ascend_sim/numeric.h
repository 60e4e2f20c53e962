// Exact rounding helpers shared by the vector ops, Cast and Matmul.
// Every value of the emulated types (int64 included) is exact in x86 long double (64-bit
// significand), and a single IEEE op on two halves is exact in double, so "compute wide,
// round once with the requested mode" gives correctly rounded results.
#pragma once
#include <cmath>
#include <cfloat>
#include <climits>
#include <type_traits>
#include <limits>
#include "ascend_sim/common.h"

namespace AscendSim {

using LD = long double;

template <typename T> struct FloatFormat;   // precision p (incl. hidden bit), emin, max finite
template <> struct FloatFormat<float> { static constexpr int p = 24, emin = -126; static LD maxv() { return FLT_MAX; } };
template <> struct FloatFormat<half> { static constexpr int p = 11, emin = -14; static LD maxv() { return 65504.0L; } };
template <> struct FloatFormat<bfloat16_t> {
    static constexpr int p = 8, emin = -126;
    static LD maxv() { return std::ldexp(static_cast<LD>(255), 120); }   // 0x7F7F
};

template <typename T> constexpr bool isFloatLike() {
    return std::is_same<T, float>::value || std::is_same<T, half>::value || std::is_same<T, bfloat16_t>::value;
}

// Apply a rounding mode to a real number -> integer-valued long double.
inline LD roundIntRaw(LD q, AscendC::RoundMode m);
// IEEE keeps the sign of a zero result (e.g. RINT(-0.3) = -0).
inline LD roundInt(LD q, AscendC::RoundMode m) {
    LD r = roundIntRaw(q, m);
    return r == 0 ? std::copysign(static_cast<LD>(0), q) : r;
}
inline LD roundIntRaw(LD q, AscendC::RoundMode m) {
    using AscendC::RoundMode;
    switch (m) {
        case RoundMode::CAST_FLOOR: return std::floor(q);
        case RoundMode::CAST_CEIL: return std::ceil(q);
        case RoundMode::CAST_ROUND: return std::round(q);           // half away from zero
        case RoundMode::CAST_TRUNC: return std::trunc(q);
        case RoundMode::CAST_ODD: {                                   // round to odd
            LD t = std::trunc(q);
            if (t != q && std::fmod(t, 2.0L) == 0) t += (q > 0 ? 1 : -1);
            return t;
        }
        default: {                                                    // RINT / NONE: nearest, ties to even
            LD f = std::floor(q), d = q - f;
            if (d > 0.5L) return f + 1;
            if (d < 0.5L) return f;
            return std::fmod(f, 2.0L) == 0 ? f : f + 1;
        }
    }
}

// Round x to the binary format of T with mode m; returns the exact representable value
// (or +-inf / +-max on overflow, following IEEE directed-rounding rules).
template <typename T>
inline LD roundToFormat(LD x, AscendC::RoundMode m) {
    using F = FloatFormat<T>;
    using AscendC::RoundMode;
    if (x == 0 || std::isnan(x) || std::isinf(x)) return x;
    int e = std::ilogb(x);
    if (e < F::emin) e = F::emin;
    LD quantum = std::ldexp(1.0L, e - (F::p - 1));
    LD r = roundInt(x / quantum, m) * quantum;
    if (std::fabs(r) > F::maxv()) {
        bool pos = r > 0;
        bool toInf = m == RoundMode::CAST_NONE || m == RoundMode::CAST_RINT || m == RoundMode::CAST_ROUND ||
                     (m == RoundMode::CAST_CEIL && pos) || (m == RoundMode::CAST_FLOOR && !pos);
        if (toInf) return pos ? HUGE_VALL : -HUGE_VALL;
        return pos ? F::maxv() : -F::maxv();
    }
    return r;
}

template <typename T> inline LD toLD(T v) {
    if constexpr (isFloatLike<T>()) return static_cast<LD>(static_cast<float>(v));
    else return static_cast<LD>(v);
}

// Convert x (any real) to T with rounding mode m. Integers saturate (UNCONFIRMED on HW), NaN -> 0.
template <typename T>
inline T fromLD(LD x, AscendC::RoundMode m = AscendC::RoundMode::CAST_RINT) {
    if constexpr (isFloatLike<T>()) {
        LD r = roundToFormat<T>(x, m);
        return T(static_cast<float>(r));   // exact: r is representable in T (and in float)
    } else if constexpr (std::is_floating_point<T>::value) {
        return static_cast<T>(x);
    } else {
        if (std::isnan(x)) return T(0);
        LD r = roundInt(x, m);
        LD lo = static_cast<LD>(std::numeric_limits<T>::min()), hi = static_cast<LD>(std::numeric_limits<T>::max());
        if (r < lo) return std::numeric_limits<T>::min();
        if (r > hi) return std::numeric_limits<T>::max();
        return static_cast<T>(r);
    }
}

}  // namespace AscendSim
