// Shared set-up of the reject probes (probes/reject/*.cpp): each probe is a kernel with ONE misuse
// of the AscendC API that the real asc-devkit headers reject at compile time; tools/ascend_real_api/installed_cann_check.py
// requires that the emulator rejects it at compile time too.
#pragma once
#include "kernel_operator.h"
using namespace AscendC;
#define REJECT_PROBE(name)                                                                        \
    __aicore__ inline void name##_body(TBuf<TPosition::VECCALC>& b, GM_ADDR g);                  \
    extern "C" __global__ __aicore__ void name(GM_ADDR g) {                                       \
        TPipe pipe;                                                                               \
        TBuf<TPosition::VECCALC> b;                                                               \
        pipe.InitBuffer(b, 8192);                                                                 \
        name##_body(b, g);                                                                        \
    }                                                                                             \
    __aicore__ inline void name##_body(TBuf<TPosition::VECCALC>& b, GM_ADDR g)
