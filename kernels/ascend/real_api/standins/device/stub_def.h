// mx_sparse stand-in for the CPU-debug "stub_def.h" of CANN's tikicpulib (a closed library that is
// not part of the asc-devkit snapshot). Written for kernels/ascend/real_api/real_api_check.py only:
// it DECLARES what the open AscendC headers expect from the closed piece in the ASCENDC_CPU_DEBUG
// configuration -- address-space qualifiers, pipe/event enums, scalar types, launch globals -- so
// that our kernels can be type-checked against the real API. Nothing here is ever linked or run;
// enum values are placeholders (only the names matter to a type check).
#pragma once
#include <cassert>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

// Address-space and function qualifiers of the device compiler: nothing on a host compiler.
#define __aicore__
#define __global__
#define __host__
#define __gm__
#define __ubuf__
#define __cbuf__
#define __ca__
#define __cb__
#define __cc__
#define __fbuf__
#define __ssbuf__
#define __simd_callee__
#define __simd_vf__
#define __BLOCK_LOCAL__
#define __WORKGROUP_LOCAL__
#define __sync_alias__
#define __check_sync_alias__
#define __inout_pipe__(...)
#define __in_pipe__(...)
#define __out_pipe__(...)
#define __disable_kernel_type_autoinfer__
// kernel_macros.h defines these only outside the CPU-debug configuration
#define ASCENDC_HOST
#define ASCENDC_AICORE
#define ASCENDC_HOST_AICORE

// Pipes, events, and the enum operands of the intrinsics.
enum pipe_t { PIPE_S, PIPE_V, PIPE_M, PIPE_MTE1, PIPE_MTE2, PIPE_MTE3, PIPE_ALL, PIPE_MTE4, PIPE_MTE5, PIPE_V2, PIPE_FIX, PIPE_NUM };
enum event_t { EVENT_ID0, EVENT_ID1, EVENT_ID2, EVENT_ID3, EVENT_ID4, EVENT_ID5, EVENT_ID6, EVENT_ID7 };
enum mem_dsb_t { DSB_ALL, DSB_DDR, DSB_UB, DSB_SEQ };
enum mem_t { MEM_L0A, MEM_L0B, MEM_L0C, MEM_BIAS };
enum pad_t { PAD_NONE };
enum cache_line_t { SINGLE_CACHE_LINE, ENTIRE_DATA_CACHE };
enum dcci_dst_t { CACHELINE_ALL, CACHELINE_UB, CACHELINE_OUT, CACHELINE_ATOMIC };
enum atomic_type_t { ATOMIC_TYPE_PLACEHOLDER };
enum atomic_op_t { ATOMIC_OP_PLACEHOLDER };
enum addr_cal_mode_t { inc, dec };
enum Order_t { VALUE_INDEX, INDEX_VALUE, ONLY_VALUE, ONLY_INDEX };
enum ub_addr8_t { VA0, VA1, VA2, VA3, VA4, VA5, VA6, VA7 };
enum vpart_t { L128, H128 };
enum class QuantMode_t {
    NoQuant, F322F16, F322BF16, DEQF16, VDEQF16, REQ8, VREQ8, REQ4, VREQ4, DEQS16, VDEQS16,
    QF322B8_PRE, VQF322B8_PRE, QF322F16_PRE, VQF322F16_PRE, QF322BF16_PRE, VQF322BF16_PRE,
    QS322BF16_PRE, VQS322BF16_PRE, QF322HIF8_PRE, VQF322HIF8_PRE, QF322HIF8_PRE_HYBRID,
    VQF322HIF8_PRE_HYBRID, QF322FP8_PRE, VQF322FP8_PRE, QF322F32_PRE, VQF322F32_PRE,
    QF162B8_PRE, VQF162B8_PRE, QF162S4_PRE, VQF162S4_PRE, QF162S16_PRE, VQF162S16_PRE
};

// Register types of the register-level API (declared by the public headers for every arch).
struct vector_bool {};
struct vector_align {};
struct vector_address {};

// 4- and 8-bit float storage types.
struct fp4x2_e1m2_t { uint8_t bits; };
struct fp4x2_e2m1_t { uint8_t bits; };
struct fp8_e4m3fn_t { uint8_t bits; };
struct fp8_e5m2_t { uint8_t bits; };
struct fp8_e8m0_t { uint8_t bits; };
struct hifloat8_t { uint8_t bits; };

#include "kernel_fp16.h"
#include "kernel_bf16.h"

// Launch state of the CPU-debug runtime.
extern int64_t block_idx;
extern int64_t block_num;
extern int64_t sub_block_idx;
extern int32_t g_taskRation;
extern uint64_t g_fixpipeNdNzParam;
enum class KernelMode { MIX_MODE, AIC_MODE, AIV_MODE, MIX_AIC_1_1 };
extern KernelMode g_kernelMode;
namespace AscendC {
constexpr int32_t AIC_TYPE = 1;
constexpr int32_t AIV_TYPE = 2;
extern bool g_isVdeq;
}  // namespace AscendC
