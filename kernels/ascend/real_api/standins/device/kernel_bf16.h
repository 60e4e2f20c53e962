// mx_sparse stand-in for tikicpulib's CPU "bfloat16_t" type (see stub_def.h): declarations only.
#pragma once
#include <cstdint>
struct bfloat16_t {
    bfloat16_t() = default;
    bfloat16_t(float v);
    bfloat16_t(double v);
    bfloat16_t(int v);
    operator float() const;
    float ToFloat() const;
    uint16_t bits;
};
