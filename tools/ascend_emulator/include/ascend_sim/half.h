// IEEE binary16 (`half`) and bfloat16 (`bfloat16_t`) storage types for the emulator.
// Conversions from float round to nearest even (RNE), as the A2 vector unit does for
// half arithmetic. Scalar arithmetic on these types promotes to float (implicit
// conversion) and rounds once when the result is stored back; the vector APIs in
// vector.h compute in double and round once, which is exactly RNE per operation.
#pragma once
#include <cstdint>
#include <cstring>
#include <cmath>

namespace AscendSim {

inline uint32_t floatBits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float bitsFloat(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

// float -> binary16, round to nearest even, overflow -> inf, NaN kept quiet.
inline uint16_t floatToHalfBits(float f) {
    uint32_t x = floatBits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) {                       // inf or NaN
        return static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u));
    }
    if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to inf
    if (absx < 0x38800000u) {                         // result is subnormal or zero (|f| < 2^-14)
        // value = absx as float; scale so that one half-subnormal ulp (2^-24) is 1.0
        float a = bitsFloat(absx) * 16777216.0f;        // exact (power-of-two scaling)
        float r = std::nearbyint(a);                    // default FP env rounding = RNE
        return static_cast<uint16_t>(sign | static_cast<uint32_t>(r));
    }
    // normal: keep 10 mantissa bits, RNE on the 13 dropped bits
    uint32_t mant = absx & 0x7fffffu;
    int32_t exp = static_cast<int32_t>(absx >> 23) - 127 + 15;
    uint32_t h = (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
    uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h += 1;   // carry may bump exponent: correct
    return static_cast<uint16_t>(sign | h);
}

inline float halfBitsToFloat(uint16_t h) {
    uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0) {
        float v = static_cast<float>(mant) * (1.0f / 16777216.0f);  // exact
        return sign ? -v : v;
    }
    if (exp == 31) return bitsFloat(sign | 0x7f800000u | (mant << 13));
    return bitsFloat(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

inline uint16_t floatToBf16Bits(float f) {
    uint32_t x = floatBits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN
    uint32_t lsb = (x >> 16) & 1u;
    x += 0x7fffu + lsb;                                  // RNE on the dropped 16 bits
    return static_cast<uint16_t>(x >> 16);
}
inline float bf16BitsToFloat(uint16_t b) { return bitsFloat(static_cast<uint32_t>(b) << 16); }

}  // namespace AscendSim

struct half {
    uint16_t bits = 0;
    half() = default;
    half(float f) : bits(AscendSim::floatToHalfBits(f)) {}
    operator float() const { return AscendSim::halfBitsToFloat(bits); }
    static half fromBits(uint16_t b) { half h; h.bits = b; return h; }
};

struct bfloat16_t {
    uint16_t bits = 0;
    bfloat16_t() = default;
    bfloat16_t(float f) : bits(AscendSim::floatToBf16Bits(f)) {}
    operator float() const { return AscendSim::bf16BitsToFloat(bits); }
    static bfloat16_t fromBits(uint16_t b) { bfloat16_t h; h.bits = b; return h; }
};
static_assert(sizeof(half) == 2 && sizeof(bfloat16_t) == 2, "16-bit storage types");
