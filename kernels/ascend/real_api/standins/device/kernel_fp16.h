// mx_sparse stand-in for tikicpulib's CPU "half" type (see stub_def.h): declarations only.
#pragma once
#include <cstdint>
struct half {
    half() = default;
    half(float v);
    half(double v);
    half(int v);
    half(uint32_t v);
    half(int64_t v);
    half(uint64_t v);
    operator float() const;
    float ToFloat() const;
    uint16_t bits;
};
