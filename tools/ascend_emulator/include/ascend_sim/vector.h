// Vector (AIV) compute APIs on UB operands. Count form and, for the elementwise ops and
// Duplicate, the high-dimensional (mask, repeatTime, repeat params) form (§4.1).
// Arithmetic: half/bf16 are computed wide and rounded once (RNE); int16/int32 wrap.
// Rules: B8 (operand views), C11 (32 B alignment), F23 (repeat/mask params), F24 (dtypes),
// F25 (Compare count granularity), F26 (Gather aliasing), F27 (Gather offsets), A2 (Select scratch).
#pragma once
#include <vector>
#include "ascend_sim/tensor.h"
#include "ascend_sim/numeric.h"
#include "ascend_sim/data_copy.h"
#include "ascend_sim/tpipe.h"

namespace AscendC {
namespace simdetail {

template <typename T, typename... Us>
inline void checkDtype(const char* api) {
    if (!AscendSim::isOneOf<T, Us...>())
        AscendSim::violation("F24", api, AscendSim::fmt("element type %s is not supported by this API on A2", AscendSim::typeName<T>()));
}
#define ASCEND_SIM_ARITH_TYPES int16_t, half, int32_t, float

template <typename T>
inline void checkCountOperand(const LocalTensor<T>& t, uint64_t count, const char* api, const char* name) {
    checkUbAligned(t, api, name);
    if (count * sizeof(T) > t.simBytes)
        AscendSim::violation("B8", api, AscendSim::fmt("%s needs %llu %s elements but its view holds %u", name,
            (unsigned long long)count, AscendSim::typeName<T>(), t.GetSize()));
    AscendSim::hzAccess(AscendSim::PIPE_ID_V, t.simAddr, count * sizeof(T), std::strcmp(name, "dst") == 0, api);
}
inline void countStats(uint64_t count, size_t sz) {
    auto& s = AscendSim::stats();
    s.vecInstr += (count * sz + 255) / 256;
    s.vecElems += count;
}

// One IEEE-style op in T with a single rounding.
template <typename T, typename F>
inline T arith(T a, T b, F op) {
    if constexpr (std::is_same<T, float>::value) {
        return op(a, b);
    } else if constexpr (std::is_same<T, half>::value || std::is_same<T, bfloat16_t>::value) {
        return AscendSim::fromLD<T>(static_cast<AscendSim::LD>(op(static_cast<double>(static_cast<float>(a)),
                                                                   static_cast<double>(static_cast<float>(b)))));
    } else {
        using W = typename std::conditional<std::is_signed<T>::value, int64_t, uint64_t>::type;
        using U = typename std::make_unsigned<T>::type;
        return static_cast<T>(static_cast<U>(static_cast<uint64_t>(op(static_cast<W>(a), static_cast<W>(b)))));
    }
}
struct OpAdd { template <class X> X operator()(X a, X b) const { return a + b; } };
struct OpSub { template <class X> X operator()(X a, X b) const { return a - b; } };
struct OpMul {
    template <class X> X operator()(X a, X b) const {
        if constexpr (std::is_integral<X>::value) return static_cast<X>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
        else return a * b;
    }
};
struct OpDiv { template <class X> X operator()(X a, X b) const { return a / b; } };
struct OpMax { template <class X> X operator()(X a, X b) const { return a > b ? a : b; } };
struct OpMin { template <class X> X operator()(X a, X b) const { return a < b ? a : b; } };

// ---- high-dimensional addressing ----
struct MaskSpec { bool counter; uint64_t lo, hi; };
template <typename T>
inline MaskSpec maskFromCont(uint64_t m, bool isSetMask, const char* api) {
    auto& c = AscendSim::ctx();
    if (!isSetMask) return MaskSpec{c.maskCounter, c.maskLo, c.maskHi};
    uint64_t per = 256 / sizeof(T);
    if (m > per) AscendSim::violation("F23", api, AscendSim::fmt("continuous mask %llu > %llu elements per repeat",
                                                                 (unsigned long long)m, (unsigned long long)per));
    MaskSpec s{false, 0, 0};
    for (uint64_t i = 0; i < m; ++i) {
        if (i < 64) s.lo |= 1ull << i;
        else s.hi |= 1ull << (i - 64);
    }
    return s;
}
template <typename T>
inline MaskSpec maskFromBits(const uint64_t mask[], bool isSetMask) {
    auto& c = AscendSim::ctx();
    if (!isSetMask) return MaskSpec{c.maskCounter, c.maskLo, c.maskHi};
    return MaskSpec{false, mask[0], sizeof(T) == 2 ? mask[1] : 0};
}
struct Operand { uint32_t addr, bytes, blk, rep; const char* name; };

// Iterate the active lanes: fn(lane offsets per operand). Counter mode: the mask register
// holds an element count, repeats are derived from it (repeatTime is ignored).
template <typename T, size_t N, typename F>
inline void forLanes(const char* api, const MaskSpec& m, uint32_t repeatTime, const Operand (&ops)[N], F fn) {
    const uint32_t per = 256 / sizeof(T), perBlk = 32 / sizeof(T);
    if (ops[0].blk == 0) AscendSim::violation("F23", api, "dstBlkStride must not be 0");
    for (size_t k = 0; k < N; ++k)
        if (ops[k].addr % 32) AscendSim::violation("C11", api, AscendSim::fmt("UB %s address %u not 32-byte aligned", ops[k].name, ops[k].addr));
    uint64_t total = m.counter ? m.lo : 0;
    uint32_t reps = m.counter ? static_cast<uint32_t>((total + per - 1) / per) : repeatTime;
    uint64_t active = 0;
    uint32_t lastBlk[N];
    for (size_t k = 0; k < N; ++k) lastBlk[k] = UINT32_MAX;
    for (uint32_t r = 0; r < reps; ++r) {
        for (uint32_t lane = 0; lane < per; ++lane) {
            bool on = m.counter ? (static_cast<uint64_t>(r) * per + lane < total)
                                : (lane < 64 ? (m.lo >> lane) & 1 : (m.hi >> (lane - 64)) & 1);
            if (!on) continue;
            uint32_t off[N];
            for (size_t k = 0; k < N; ++k) {
                uint64_t o = static_cast<uint64_t>(r) * ops[k].rep * 32 + static_cast<uint64_t>(lane / perBlk) * ops[k].blk * 32 +
                             (lane % perBlk) * sizeof(T);
                if (o + sizeof(T) > ops[k].bytes)
                    AscendSim::violation("B8", api, AscendSim::fmt("repeat %u lane %u of %s touches byte %llu outside its %u-byte view",
                                                                   r, lane, ops[k].name, (unsigned long long)o, ops[k].bytes));
                off[k] = ops[k].addr + static_cast<uint32_t>(o);
                if (off[k] / 32 != lastBlk[k]) {
                    lastBlk[k] = off[k] / 32;
                    AscendSim::hzAccess(AscendSim::PIPE_ID_V, off[k], sizeof(T), k == 0, api);
                }
            }
            fn(off);
            active++;
        }
    }
    auto& s = AscendSim::stats();
    s.vecInstr += reps;
    s.vecElems += active;
}

template <typename T> inline T ubLoad(uint32_t addr) { T v; std::memcpy(&v, AscendSim::ubBase() + addr, sizeof(T)); return v; }
template <typename T> inline void ubStore(uint32_t addr, T v) { std::memcpy(AscendSim::ubBase() + addr, &v, sizeof(T)); }

template <typename T, typename Op>
inline void binaryCount(const char* api, const LocalTensor<T>& dst, const LocalTensor<T>& a, const LocalTensor<T>& b, int32_t count, Op op) {
    if (count <= 0) return;
    checkCountOperand(dst, count, api, "dst");
    checkCountOperand(a, count, api, "src0");
    checkCountOperand(b, count, api, "src1");
    std::vector<T> tmp(count);
    for (int32_t i = 0; i < count; ++i) tmp[i] = arith<T>(ubLoad<T>(a.simAddr + i * sizeof(T)), ubLoad<T>(b.simAddr + i * sizeof(T)), op);
    std::memcpy(AscendSim::ubBase() + dst.simAddr, tmp.data(), count * sizeof(T));
    countStats(count, sizeof(T));
}
template <typename T, typename Op>
inline void binaryHigh(const char* api, const LocalTensor<T>& dst, const LocalTensor<T>& a, const LocalTensor<T>& b, const MaskSpec& m,
                       uint8_t repeat, const BinaryRepeatParams& p, Op op) {
    Operand ops[3] = {{dst.simAddr, dst.simBytes, p.dstBlkStride, p.dstRepStride, "dst"},
                      {a.simAddr, a.simBytes, p.src0BlkStride, p.src0RepStride, "src0"},
                      {b.simAddr, b.simBytes, p.src1BlkStride, p.src1RepStride, "src1"}};
    forLanes<T>(api, m, repeat, ops, [&](const uint32_t* o) { ubStore<T>(o[0], arith<T>(ubLoad<T>(o[1]), ubLoad<T>(o[2]), op)); });
}
template <typename T, typename Op>
inline void scalarCount(const char* api, const LocalTensor<T>& dst, const LocalTensor<T>& a, T s, int32_t count, Op op) {
    if (count <= 0) return;
    checkCountOperand(dst, count, api, "dst");
    checkCountOperand(a, count, api, "src");
    for (int32_t i = 0; i < count; ++i)
        ubStore<T>(dst.simAddr + i * sizeof(T), arith<T>(ubLoad<T>(a.simAddr + i * sizeof(T)), s, op));
    countStats(count, sizeof(T));
}
template <typename T, typename Op>
inline void scalarHigh(const char* api, const LocalTensor<T>& dst, const LocalTensor<T>& a, T s, const MaskSpec& m, uint8_t repeat,
                       const UnaryRepeatParams& p, Op op) {
    Operand ops[2] = {{dst.simAddr, dst.simBytes, p.dstBlkStride, p.dstRepStride, "dst"},
                      {a.simAddr, a.simBytes, p.srcBlkStride, p.srcRepStride, "src"}};
    forLanes<T>(api, m, repeat, ops, [&](const uint32_t* o) { ubStore<T>(o[0], arith<T>(ubLoad<T>(o[1]), s, op)); });
}

}  // namespace simdetail

// ---------------- elementwise binary ops ----------------
#define ASCEND_SIM_BINARY(NAME, OP, ...)                                                                              \
    template <typename T, bool isSetMask = true>                                                                     \
    inline void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, const int32_t& count) { \
        simdetail::checkDtype<T, __VA_ARGS__>(#NAME);                                                                \
        simdetail::binaryCount<T>(#NAME, dst, src0, src1, count, simdetail::OP());                                   \
    }                                                                                                                \
    template <typename T, bool isSetMask = true>                                                                     \
    inline void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, uint64_t mask, \
                     const uint8_t repeatTime, const BinaryRepeatParams& p) {                                        \
        static_assert(AscendSim::isOneOf<T, __VA_ARGS__>(), "F24: element type not supported by " #NAME " on A2"); \
        simdetail::binaryHigh<T>(#NAME, dst, src0, src1, simdetail::maskFromCont<T>(mask, isSetMask, #NAME), repeatTime, p, simdetail::OP()); \
    }                                                                                                                \
    template <typename T, bool isSetMask = true>                                                                     \
    inline void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, const uint64_t mask[], \
                     const uint8_t repeatTime, const BinaryRepeatParams& p) {                                        \
        static_assert(AscendSim::isOneOf<T, __VA_ARGS__>(), "F24: element type not supported by " #NAME " on A2"); \
        simdetail::binaryHigh<T>(#NAME, dst, src0, src1, simdetail::maskFromBits<T>(mask, isSetMask), repeatTime, p, simdetail::OP()); \
    }
ASCEND_SIM_BINARY(Add, OpAdd, ASCEND_SIM_ARITH_TYPES)
ASCEND_SIM_BINARY(Sub, OpSub, ASCEND_SIM_ARITH_TYPES)
ASCEND_SIM_BINARY(Mul, OpMul, ASCEND_SIM_ARITH_TYPES)
ASCEND_SIM_BINARY(Max, OpMax, ASCEND_SIM_ARITH_TYPES)
ASCEND_SIM_BINARY(Min, OpMin, ASCEND_SIM_ARITH_TYPES)
ASCEND_SIM_BINARY(Div, OpDiv, half, float)

// ---------------- tensor-scalar ops ----------------
#define ASCEND_SIM_SCALAR(NAME, OP)                                                                                   \
    template <typename T, bool isSetMask = true>                                                                     \
    inline void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src, const T& scalar, const int32_t& count) { \
        static_assert(AscendSim::isOneOf<T, ASCEND_SIM_ARITH_TYPES>(), "F24: element type not supported by " #NAME " on A2"); \
        simdetail::scalarCount<T>(#NAME, dst, src, scalar, count, simdetail::OP());                                  \
    }                                                                                                                \
    template <typename T, bool isSetMask = true>                                                                     \
    inline void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src, const T& scalar, uint64_t mask, \
                     const uint8_t repeatTime, const UnaryRepeatParams& p) {                                         \
        static_assert(AscendSim::isOneOf<T, ASCEND_SIM_ARITH_TYPES>(), "F24: element type not supported by " #NAME " on A2"); \
        simdetail::scalarHigh<T>(#NAME, dst, src, scalar, simdetail::maskFromCont<T>(mask, isSetMask, #NAME), repeatTime, p, simdetail::OP()); \
    }                                                                                                                \
    template <typename T, bool isSetMask = true>                                                                     \
    inline void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src, const T& scalar, const uint64_t mask[], \
                     const uint8_t repeatTime, const UnaryRepeatParams& p) {                                         \
        static_assert(AscendSim::isOneOf<T, ASCEND_SIM_ARITH_TYPES>(), "F24: element type not supported by " #NAME " on A2"); \
        simdetail::scalarHigh<T>(#NAME, dst, src, scalar, simdetail::maskFromBits<T>(mask, isSetMask), repeatTime, p, simdetail::OP()); \
    }
ASCEND_SIM_SCALAR(Adds, OpAdd)
ASCEND_SIM_SCALAR(Muls, OpMul)
ASCEND_SIM_SCALAR(Maxs, OpMax)
ASCEND_SIM_SCALAR(Mins, OpMin)

// ---------------- Duplicate ----------------
// Scalar operands are deduced from both arguments and unsupported element types are rejected at
// compile time, as by the real headers (tools/ascend_real_api/probes/reject/).
template <typename T, bool isSetMask = true>
inline void Duplicate(const LocalTensor<T>& dst, const T& v, const int32_t& count) {
    static_assert(AscendSim::isOneOf<T, int16_t, uint16_t, half, bfloat16_t, int32_t, uint32_t, float>(),
                  "F24: element type not supported by Duplicate on A2");
    if (count <= 0) return;
    simdetail::checkCountOperand(dst, count, "Duplicate", "dst");
    for (int32_t i = 0; i < count; ++i) simdetail::ubStore<T>(dst.simAddr + i * sizeof(T), v);
    simdetail::countStats(count, sizeof(T));
}
template <typename T, bool isSetMask = true>
inline void Duplicate(const LocalTensor<T>& dst, const T& v, uint64_t mask, const uint8_t repeatTime,
                      const uint16_t dstBlockStride, const uint8_t dstRepeatStride) {
    static_assert(AscendSim::isOneOf<T, int16_t, uint16_t, half, bfloat16_t, int32_t, uint32_t, float>(),
                  "F24: element type not supported by Duplicate on A2");
    simdetail::Operand ops[1] = {{dst.simAddr, dst.simBytes, dstBlockStride, dstRepeatStride, "dst"}};
    simdetail::forLanes<T>("Duplicate", simdetail::maskFromCont<T>(mask, isSetMask, "Duplicate"), repeatTime, ops,
                           [&](const uint32_t* o) { simdetail::ubStore<T>(o[0], v); });
}
template <typename T, bool isSetMask = true>
inline void Duplicate(const LocalTensor<T>& dst, const T& v, const uint64_t mask[], const uint8_t repeatTime,
                      const uint16_t dstBlockStride, const uint8_t dstRepeatStride) {
    static_assert(AscendSim::isOneOf<T, int16_t, uint16_t, half, bfloat16_t, int32_t, uint32_t, float>(),
                  "F24: element type not supported by Duplicate on A2");
    simdetail::Operand ops[1] = {{dst.simAddr, dst.simBytes, dstBlockStride, dstRepeatStride, "dst"}};
    simdetail::forLanes<T>("Duplicate", simdetail::maskFromBits<T>(mask, isSetMask), repeatTime, ops,
                           [&](const uint32_t* o) { simdetail::ubStore<T>(o[0], v); });
}

// ---------------- mask register ----------------
template <typename T, MaskMode mode = MaskMode::NORMAL>
inline void SetVectorMask(const uint64_t maskHigh, const uint64_t maskLow) {
    auto& c = AscendSim::ctx();
    c.maskHi = maskHigh; c.maskLo = maskLow;
    if (mode == MaskMode::COUNTER) c.maskCounter = true;
}
template <typename T, MaskMode mode = MaskMode::NORMAL>
inline void SetVectorMask(int32_t len) {
    auto& c = AscendSim::ctx();
    if (c.maskCounter || mode == MaskMode::COUNTER) { c.maskLo = static_cast<uint64_t>(len); c.maskHi = 0; return; }
    simdetail::MaskSpec s = simdetail::maskFromCont<T>(static_cast<uint64_t>(len), true, "SetVectorMask");
    c.maskLo = s.lo; c.maskHi = s.hi;
}
inline void SetMaskCount() { AscendSim::ctx().maskCounter = true; }
inline void SetMaskNorm() { AscendSim::ctx().maskCounter = false; }
inline void ResetMask() { auto& c = AscendSim::ctx(); c.maskLo = c.maskHi = ~0ull; }

// ---------------- Compare / Compares: bitmap output, bit i%8 of byte i/8 ----------------
namespace simdetail {
template <typename T>
inline bool cmp(T a, T b, CMPMODE m) {
    AscendSim::LD x = AscendSim::toLD(a), y = AscendSim::toLD(b);
    switch (m) {
        case CMPMODE::LT: return x < y;
        case CMPMODE::GT: return x > y;
        case CMPMODE::EQ: return x == y;
        case CMPMODE::LE: return x <= y;
        case CMPMODE::GE: return x >= y;
        default: return x != y;
    }
}
template <typename T, typename U>
inline void comparePrologue(const char* api, const LocalTensor<U>& dst, const LocalTensor<T>& src, CMPMODE m, uint32_t count) {
    checkDtype<T, half, float, int32_t>(api);
    if (std::is_same<T, int32_t>::value && m != CMPMODE::EQ)
        AscendSim::violation("F24", api, "int32 compare supports only CMPMODE::EQ on A2");
    if ((static_cast<uint64_t>(count) * sizeof(T)) % 256 != 0)
        AscendSim::violation("F25", api, AscendSim::fmt("count %u x %zu bytes is not a multiple of 256 bytes (the NPU silently "
                                                        "skips the partial tail repeat)", count, sizeof(T)));
    checkCountOperand(src, count, api, "src0");
    checkUbAligned(dst, api, "dst");
    if (count / 8 > dst.simBytes)
        AscendSim::violation("B8", api, AscendSim::fmt("dst bitmap needs %u bytes, view holds %u", count / 8, dst.simBytes));
    AscendSim::hzAccess(AscendSim::PIPE_ID_V, dst.simAddr, count / 8, true, api);
}
}  // namespace simdetail

template <typename T, typename U>
inline void Compare(const LocalTensor<U>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, CMPMODE m, uint32_t count) {
    if (std::is_same<T, int32_t>::value) AscendSim::requireCannApi("Compare<int32_t>");
    simdetail::comparePrologue("Compare", dst, src0, m, count);
    simdetail::checkCountOperand(src1, count, "Compare", "src1");
    uint8_t* d = AscendSim::ubBase() + dst.simAddr;
    std::vector<uint8_t> bits(count / 8, 0);
    for (uint32_t i = 0; i < count; ++i)
        if (simdetail::cmp(simdetail::ubLoad<T>(src0.simAddr + i * sizeof(T)), simdetail::ubLoad<T>(src1.simAddr + i * sizeof(T)), m))
            bits[i / 8] |= static_cast<uint8_t>(1u << (i % 8));
    std::memcpy(d, bits.data(), bits.size());
    simdetail::countStats(count, sizeof(T));
}
namespace simdetail {
template <typename T, typename U>
inline void compareScalarImpl(const char* api, const LocalTensor<U>& dst, const LocalTensor<T>& src0, T scalar, CMPMODE m,
                              uint32_t count) {
    comparePrologue(api, dst, src0, m, count);
    std::vector<uint8_t> bits(count / 8, 0);
    for (uint32_t i = 0; i < count; ++i)
        if (cmp(ubLoad<T>(src0.simAddr + i * sizeof(T)), scalar, m)) bits[i / 8] |= static_cast<uint8_t>(1u << (i % 8));
    std::memcpy(AscendSim::ubBase() + dst.simAddr, bits.data(), bits.size());
    countStats(count, sizeof(T));
}
}  // namespace simdetail
// Same operation under two names: Compares is the newer spelling (rule J35 checks the targeted
// CANN release has it), CompareScalar the one every 8.x release declares.
template <typename T, typename U>
inline void Compares(const LocalTensor<U>& dst, const LocalTensor<T>& src0, const AscendSim::NoDeduce<T> scalar, CMPMODE m, uint32_t count) {
    AscendSim::requireCannApi("Compares");
    simdetail::compareScalarImpl("Compares", dst, src0, static_cast<T>(scalar), m, count);
}
template <typename T, typename U>
inline void CompareScalar(const LocalTensor<U>& dst, const LocalTensor<T>& src0, const AscendSim::NoDeduce<T> scalar, CMPMODE m, uint32_t count) {
    if (std::is_same<T, int32_t>::value) AscendSim::requireCannApi("CompareScalar<int32_t>");
    simdetail::compareScalarImpl("CompareScalar", dst, src0, static_cast<T>(scalar), m, count);
}

// ---------------- Select ----------------
// Mode 0 (VSEL_CMPMASK_SPR): every 256 B repeat reuses the first 256/sizeof(T) mask bits.
// Mode 1 (tensor-scalar) / mode 2 (tensor-tensor): bit i selects element i. Modes 1/2 use
// the top 8 KiB of UB as scratch on A2 (rule A2).
namespace simdetail {
template <typename T, typename U, typename Pick>
inline void selectImpl(const char* api, const LocalTensor<T>& dst, const LocalTensor<U>& selMask, const LocalTensor<T>& src0,
                       SELMODE mode, uint32_t count, Pick pick1) {
    checkDtype<T, half, float>(api);
    if (mode != SELMODE::VSEL_CMPMASK_SPR) {
        TPipe* p = AscendSim::ctx().livePipe;
        if (p && p->simUsed > TMP_UB_OFFSET)
            AscendSim::violation("A2", api, AscendSim::fmt("Select mode %d uses UB [184 KiB, 192 KiB) as scratch but the TPipe "
                                                           "allocated %u bytes (> 188416)", static_cast<int>(mode), p->simUsed));
    }
    if (count == 0) return;
    checkCountOperand(dst, count, api, "dst");
    checkCountOperand(src0, count, api, "src0");
    checkUbAligned(selMask, api, "selMask");
    const uint32_t per = 256 / sizeof(T);
    uint64_t maskBits = mode == SELMODE::VSEL_CMPMASK_SPR ? per : count;
    if ((maskBits + 7) / 8 > selMask.simBytes)
        AscendSim::violation("B8", api, AscendSim::fmt("selMask needs %llu bytes, view holds %u", (unsigned long long)((maskBits + 7) / 8), selMask.simBytes));
    AscendSim::hzAccess(AscendSim::PIPE_ID_V, selMask.simAddr, (maskBits + 7) / 8, false, api);
    const uint8_t* mb = AscendSim::ubBase() + selMask.simAddr;
    for (uint32_t i = 0; i < count; ++i) {
        uint32_t bit = mode == SELMODE::VSEL_CMPMASK_SPR ? i % per : i;
        bool take0 = (mb[bit / 8] >> (bit % 8)) & 1;
        T v = take0 ? ubLoad<T>(src0.simAddr + i * sizeof(T)) : pick1(i);
        ubStore<T>(dst.simAddr + i * sizeof(T), v);
    }
    countStats(count, sizeof(T));
}
}  // namespace simdetail
template <typename T, typename U>
inline void Select(const LocalTensor<T>& dst, const LocalTensor<U>& selMask, const LocalTensor<T>& src0, const LocalTensor<T>& src1,
                   SELMODE mode, uint32_t count) {
    if (mode == SELMODE::VSEL_TENSOR_SCALAR_MODE) AscendSim::violation("F24", "Select", "tensor src1 given with VSEL_TENSOR_SCALAR_MODE");
    if (count) simdetail::checkCountOperand(src1, count, "Select", "src1");
    simdetail::selectImpl("Select", dst, selMask, src0, mode, count,
                          [&](uint32_t i) { return simdetail::ubLoad<T>(src1.simAddr + i * sizeof(T)); });
}
template <typename T, typename U>
inline void Select(const LocalTensor<T>& dst, const LocalTensor<U>& selMask, const LocalTensor<T>& src0, AscendSim::NoDeduce<T> src1,
                   SELMODE mode, uint32_t count) {
    if (mode != SELMODE::VSEL_TENSOR_SCALAR_MODE) AscendSim::violation("F24", "Select", "scalar src1 requires VSEL_TENSOR_SCALAR_MODE");
    simdetail::selectImpl("Select", dst, selMask, src0, mode, count, [&](uint32_t) { return src1; });
}

// ---------------- Gather: dst[i] = *(T*)(src_bytes + srcBaseAddr + srcOffset[i]) ----------------
template <typename T>
inline void Gather(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LocalTensor<uint32_t>& srcOffset,
                   const uint32_t srcBaseAddr, const uint32_t count) {
    const char* api = "Gather";
    simdetail::checkDtype<T, int16_t, uint16_t, half, bfloat16_t, int32_t, uint32_t, float>(api);
    if (count == 0) return;
    simdetail::checkCountOperand(dst, count, api, "dst");
    simdetail::checkCountOperand(srcOffset, count, api, "srcOffset");
    simdetail::checkUbAligned(src, api, "src");
    if (dst.simAddr < src.simAddr + src.simBytes && src.simAddr < dst.simAddr + count * sizeof(T))
        AscendSim::violation("F26", api, "dst aliases src");
    std::vector<T> out(count);
    for (uint32_t i = 0; i < count; ++i) {
        uint64_t off = static_cast<uint64_t>(srcBaseAddr) + simdetail::ubLoad<uint32_t>(srcOffset.simAddr + i * 4);
        if (off % sizeof(T) != 0)
            AscendSim::violation("F27", api, AscendSim::fmt("offset[%u] = %llu bytes is not a multiple of sizeof(T)=%zu", i,
                                                            (unsigned long long)off, sizeof(T)));
        if (off + sizeof(T) > src.simBytes)
            AscendSim::violation("F27", api, AscendSim::fmt("offset[%u] = %llu bytes lies outside the %u-byte src view", i,
                                                            (unsigned long long)off, src.simBytes));
        AscendSim::hzAccess(AscendSim::PIPE_ID_V, src.simAddr + static_cast<uint32_t>(off), sizeof(T), false, api);
        out[i] = simdetail::ubLoad<T>(src.simAddr + static_cast<uint32_t>(off));
    }
    std::memcpy(AscendSim::ubBase() + dst.simAddr, out.data(), count * sizeof(T));
    simdetail::countStats(count, sizeof(T));
    AscendSim::stats().vecGatherInstr += (count * sizeof(T) + 255) / 256;
}

// ---------------- GatherMask (stream compaction) ----------------
// Normal mode (reduceMode=false): p.repeatTimes repeats of 256 B of src0 (block/repeat strides),
// pattern bits per repeat taken from src1Pattern at r*src1RepeatStride*32 bytes.
// Counter mode (reduceMode=true): repeatTimes*mask elements processed as one contiguous
// stream with contiguous pattern bits (A2 semantics as documented in §4.3; stride handling
// in counter mode is UNCONFIRMED and not emulated). rsvdCnt = number of kept elements.
namespace simdetail {
template <typename T, typename BitFn>
inline void gatherMaskImpl(const LocalTensor<T>& dst, const LocalTensor<T>& src0, bool reduceMode, uint32_t mask,
                           const GatherMaskParams& p, uint64_t& rsvdCnt, BitFn bit) {
    const char* api = "GatherMask";
    if (sizeof(T) != 2 && sizeof(T) != 4) AscendSim::violation("F24", api, "GatherMask supports 16- and 32-bit types only");
    checkUbAligned(dst, api, "dst");
    checkUbAligned(src0, api, "src0");
    const uint32_t per = 256 / sizeof(T), perBlk = 32 / sizeof(T);
    std::vector<T> out;
    if (!reduceMode) {
        for (uint32_t r = 0; r < p.repeatTimes; ++r)
            for (uint32_t lane = 0; lane < per; ++lane) {
                uint64_t o = static_cast<uint64_t>(r) * p.src0RepeatStride * 32 + (lane / perBlk) * p.src0BlockStride * 32ull +
                             (lane % perBlk) * sizeof(T);
                if (o + sizeof(T) > src0.simBytes)
                    AscendSim::violation("B8", api, AscendSim::fmt("repeat %u reads src0 byte %llu outside its %u-byte view (Normal "
                                                                   "mode reads whole 256-byte repeats)", r, (unsigned long long)o, src0.simBytes));
                if (lane % perBlk == 0) AscendSim::hzAccess(AscendSim::PIPE_ID_V, src0.simAddr + static_cast<uint32_t>(o), 32, false, api);
                if (bit(r, lane, static_cast<uint64_t>(r) * per + lane)) out.push_back(ubLoad<T>(src0.simAddr + static_cast<uint32_t>(o)));
            }
    } else {
        uint64_t total = static_cast<uint64_t>(p.repeatTimes) * mask;
        if (total * sizeof(T) > src0.simBytes)
            AscendSim::violation("B8", api, AscendSim::fmt("counter mode reads %llu elements, src0 view holds %u",
                                                           (unsigned long long)total, src0.GetSize()));
        AscendSim::hzAccess(AscendSim::PIPE_ID_V, src0.simAddr, total * sizeof(T), false, api);
        for (uint64_t j = 0; j < total; ++j)
            if (bit(0, static_cast<uint32_t>(j % per), j)) out.push_back(ubLoad<T>(src0.simAddr + static_cast<uint32_t>(j * sizeof(T))));
    }
    if (out.size() * sizeof(T) > dst.simBytes)
        AscendSim::violation("B8", api, AscendSim::fmt("%zu kept elements exceed the dst view of %u", out.size(), dst.GetSize()));
    AscendSim::hzAccess(AscendSim::PIPE_ID_V, dst.simAddr, out.size() * sizeof(T), true, api);
    if (!out.empty()) std::memcpy(AscendSim::ubBase() + dst.simAddr, out.data(), out.size() * sizeof(T));
    rsvdCnt = out.size();
    AscendSim::ctx().maskCounter = false;   // the API leaves the mask in Normal mode
    auto& s = AscendSim::stats();
    s.vecInstr += reduceMode ? 1 : p.repeatTimes;
    s.vecElems += reduceMode ? static_cast<uint64_t>(p.repeatTimes) * mask : static_cast<uint64_t>(p.repeatTimes) * per;
}
}  // namespace simdetail

template <typename T, typename U>
inline void GatherMask(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<U>& src1Pattern, const bool reduceMode,
                       const uint32_t mask, const GatherMaskParams& p, uint64_t& rsvdCnt) {
    if (sizeof(U) != sizeof(T)) AscendSim::violation("F24", "GatherMask", "pattern type must be u16 for 16-bit data, u32 for 32-bit data");
    const uint32_t per = 256 / sizeof(T);
    const uint8_t* pb = AscendSim::ubBase() + src1Pattern.simAddr;
    uint32_t pbytes = src1Pattern.simBytes;
    simdetail::gatherMaskImpl(dst, src0, reduceMode, mask, p, rsvdCnt, [&](uint32_t r, uint32_t lane, uint64_t j) {
        uint64_t bitIdx = reduceMode ? j : static_cast<uint64_t>(r) * p.src1RepeatStride * 256 + lane;
        (void)per;
        if (bitIdx / 8 >= pbytes)
            AscendSim::violation("B8", "GatherMask", AscendSim::fmt("pattern bit %llu outside the %u-byte pattern view",
                                                                   (unsigned long long)bitIdx, pbytes));
        if (bitIdx % 256 == 0 || (reduceMode && j == 0)) AscendSim::hzAccess(AscendSim::PIPE_ID_V, src1Pattern.simAddr + static_cast<uint32_t>(bitIdx / 8), 32, false, "GatherMask");
        return ((pb[bitIdx / 8] >> (bitIdx % 8)) & 1) != 0;
    });
}
template <typename T>
inline void GatherMask(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const uint8_t src1Pattern, const bool reduceMode,
                       const uint32_t mask, const GatherMaskParams& p, uint64_t& rsvdCnt) {
    if (src1Pattern < 1 || src1Pattern > 7) AscendSim::violation("F24", "GatherMask", "fixed pattern id must be 1..7");
    simdetail::gatherMaskImpl(dst, src0, reduceMode, mask, p, rsvdCnt, [&](uint32_t, uint32_t, uint64_t j) {
        switch (src1Pattern) {
            case 1: return j % 2 == 0;
            case 2: return j % 2 == 1;
            case 3: return j % 4 == 0;
            case 4: return j % 4 == 1;
            case 5: return j % 4 == 2;
            case 6: return j % 4 == 3;
            default: return true;
        }
    });
}

// ---------------- ReduceSum (count form): dst[0] = sum(src[0..count)) ----------------
// Accumulated exactly (long double) and rounded once to T; the hardware tree order is UNCONFIRMED.
template <typename T>
inline void ReduceSum(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LocalTensor<T>& sharedTmpBuffer, const int32_t count) {
    (void)sharedTmpBuffer;
    simdetail::checkDtype<T, half, float>("ReduceSum");
    if (count <= 0) return;
    simdetail::checkCountOperand(src, count, "ReduceSum", "src");
    simdetail::checkCountOperand(dst, 1, "ReduceSum", "dst");
    AscendSim::LD acc = 0;
    for (int32_t i = 0; i < count; ++i) acc += AscendSim::toLD(simdetail::ubLoad<T>(src.simAddr + i * sizeof(T)));
    simdetail::ubStore<T>(dst.simAddr, AscendSim::fromLD<T>(acc));
    simdetail::countStats(count, sizeof(T));
}

// ---------------- scalar helper ----------------
template <int countValue>
inline int64_t GetSFFValue(uint64_t v) {
    for (int i = 0; i < 64; ++i)
        if (static_cast<int>((v >> i) & 1) == countValue) return i;
    return -1;
}
template <int countValue>
inline int64_t ScalarGetSFFValue(uint64_t v) { return GetSFFValue<countValue>(v); }

}  // namespace AscendC
