// Tiny check helpers for emulator fidelity harnesses. Expected values in the harnesses are
// written from the API semantics in ASCENDC_REFERENCE.md, never read back from the emulator.
#pragma once
#include <cstdio>
#include <cstring>
#include <cstdint>
#include "tikicpulib.h"

static int g_fail = 0, g_checks = 0;
template <typename A, typename B>
static void checkEq(const char* what, long idx, A got, B exp) {
    ++g_checks;
    if (!(static_cast<double>(got) == static_cast<double>(exp))) {
        if (g_fail < 40) std::printf("FAIL %s[%ld]: got %.10g expected %.10g\n", what, idx, (double)got, (double)exp);
        ++g_fail;
    }
}
#define CHECK_EQ(what, idx, got, exp) checkEq(what, (long)(idx), got, exp)
static int finish(const char* name) {
    std::printf("%s: %d checks, %d failures\n", name, g_checks, g_fail);
    if (g_fail == 0) std::printf("ALL OK\n");
    return g_fail ? 1 : 0;
}
template <typename T>
static T* gmNew(size_t n, T fill) {
    T* p = static_cast<T*>(AscendC::GmAlloc(n * sizeof(T)));
    for (size_t i = 0; i < n; ++i) p[i] = fill;
    return p;
}
static inline uint16_t hbits(half h) { return h.bits; }
