// Fidelity: vector APIs (count and high-dim forms, masks, strides, Counter mode), Compare /
// Compares bitmaps, Select modes, Gather, GatherMask, ReduceSum, GetSFFValue.
// Checks run inside the (single-core) kernel; expected values come from the §4 semantics.
#include "sim_test.h"
#include <climits>
using namespace AscendC;

static float hf(uint16_t b) { return (float)half::fromBits(b); }

extern "C" __global__ __aicore__ void k_vec() {
    TPipe pipe;
    TBuf<TPosition::VECCALC> ba, bb, bc, bm;
    pipe.InitBuffer(ba, 4096);
    pipe.InitBuffer(bb, 4096);
    pipe.InitBuffer(bc, 4096);
    pipe.InitBuffer(bm, 1024);
    LocalTensor<float> fa = ba.Get<float>(), fb = bb.Get<float>(), fc = bc.Get<float>();
    LocalTensor<int32_t> ia = ba.Get<int32_t>(), ib = bb.Get<int32_t>(), ic = bc.Get<int32_t>();
    LocalTensor<int16_t> sa = ba.Get<int16_t>(), sb = bb.Get<int16_t>(), sc = bc.Get<int16_t>();
    LocalTensor<half> ha = ba.Get<half>(), hb = bb.Get<half>(), hc = bc.Get<half>();
    LocalTensor<uint8_t> mask = bm.Get<uint8_t>();

    // ---- count-form arithmetic, float ----
    for (int i = 0; i < 64; ++i) { fa.SetValue(i, i * 0.5f); fb.SetValue(i, 10.0f - i); }
    Add(fc, fa, fb, 64);
    for (int i = 0; i < 64; ++i) CHECK_EQ("add.f32", i, fc.GetValue(i), i * 0.5f + (10.0f - i));
    Sub(fc, fa, fb, 64);
    for (int i = 0; i < 64; ++i) CHECK_EQ("sub.f32", i, fc.GetValue(i), i * 0.5f - (10.0f - i));
    Mul(fc, fa, fb, 64);
    for (int i = 0; i < 64; ++i) CHECK_EQ("mul.f32", i, fc.GetValue(i), i * 0.5f * (10.0f - i));
    Max(fc, fa, fb, 64);
    for (int i = 0; i < 64; ++i) CHECK_EQ("max.f32", i, fc.GetValue(i), i * 0.5f > 10.0f - i ? i * 0.5f : 10.0f - i);
    Min(fc, fa, fb, 64);
    for (int i = 0; i < 64; ++i) CHECK_EQ("min.f32", i, fc.GetValue(i), i * 0.5f < 10.0f - i ? i * 0.5f : 10.0f - i);
    Div(fc, fa, fb, 8);
    for (int i = 0; i < 8; ++i) CHECK_EQ("div.f32", i, fc.GetValue(i), (i * 0.5f) / (10.0f - i));
    Adds(fc, fa, 3.0f, 64);
    for (int i = 0; i < 64; ++i) CHECK_EQ("adds.f32", i, fc.GetValue(i), i * 0.5f + 3.0f);
    Muls(fc, fa, -2.0f, 64);
    for (int i = 0; i < 64; ++i) CHECK_EQ("muls.f32", i, fc.GetValue(i), i * -1.0f);
    Maxs(fc, fb, 0.0f, 64);
    for (int i = 0; i < 64; ++i) CHECK_EQ("maxs.f32", i, fc.GetValue(i), 10 - i > 0 ? 10.0f - i : 0.0f);
    Mins(fc, fb, 0.0f, 64);
    for (int i = 0; i < 64; ++i) CHECK_EQ("mins.f32", i, fc.GetValue(i), 10 - i < 0 ? 10.0f - i : 0.0f);
    // count that is not a multiple of a repeat writes exactly count elements
    Duplicate(fc, -1.0f, 64);
    Adds(fc, fa, 1.0f, 13);
    for (int i = 0; i < 16; ++i) CHECK_EQ("adds.tail", i, fc.GetValue(i), i < 13 ? i * 0.5f + 1 : -1.0f);
    // in place
    Adds(fa, fa, 1.0f, 64);
    for (int i = 0; i < 64; ++i) CHECK_EQ("adds.inplace", i, fa.GetValue(i), i * 0.5f + 1);

    // ---- int32 / int16 wrap ----
    ia.SetValue(0, INT32_MAX); ib.SetValue(0, 1);
    ia.SetValue(1, INT32_MIN); ib.SetValue(1, -1);
    ia.SetValue(2, 65536);     ib.SetValue(2, 65536);
    for (int i = 3; i < 8; ++i) { ia.SetValue(i, i); ib.SetValue(i, -2 * i); }
    Add(ic, ia, ib, 8);
    CHECK_EQ("add.i32.wrap", 0, ic.GetValue(0), INT32_MIN);
    CHECK_EQ("add.i32.wrap", 1, ic.GetValue(1), INT32_MAX);
    for (int i = 3; i < 8; ++i) CHECK_EQ("add.i32", i, ic.GetValue(i), -i);
    Mul(ic, ia, ib, 8);
    CHECK_EQ("mul.i32.wrap", 2, ic.GetValue(2), 0);          // 2^32 wraps to 0
    for (int i = 3; i < 8; ++i) CHECK_EQ("mul.i32", i, ic.GetValue(i), -2 * i * i);
    Muls(ic, ia, 3, 8);
    for (int i = 3; i < 8; ++i) CHECK_EQ("muls.i32", i, ic.GetValue(i), 3 * i);
    Adds(ic, ia, -100, 8);
    for (int i = 3; i < 8; ++i) CHECK_EQ("adds.i32", i, ic.GetValue(i), i - 100);
    sa.SetValue(0, 32767); sb.SetValue(0, 1);
    Add(sc, sa, sb, 16);
    CHECK_EQ("add.i16.wrap", 0, sc.GetValue(0), -32768);

    // ---- half: one RNE rounding per op ----
    ha.SetValue(0, half::fromBits(0x3C00)); hb.SetValue(0, half::fromBits(0x1000));   // 1 + 2^-11: tie -> 1
    ha.SetValue(1, half::fromBits(0x3C01)); hb.SetValue(1, half::fromBits(0x1000));   // (1+2^-10)+2^-11: tie -> 1+2^-9
    ha.SetValue(2, half::fromBits(0x3C00)); hb.SetValue(2, half::fromBits(0x1001));   // just above the tie -> 1+2^-10
    ha.SetValue(3, half::fromBits(0x7BFF)); hb.SetValue(3, half::fromBits(0x5000));   // 65504 + 32 -> tie -> inf
    Add(hc, ha, hb, 16);
    CHECK_EQ("add.f16", 0, hc.GetValue(0).bits, 0x3C00);
    CHECK_EQ("add.f16", 1, hc.GetValue(1).bits, 0x3C02);
    CHECK_EQ("add.f16", 2, hc.GetValue(2).bits, 0x3C01);
    CHECK_EQ("add.f16.overflow", 3, hc.GetValue(3).bits, 0x7C00);
    ha.SetValue(0, half::fromBits(0x3E00)); hb.SetValue(0, half::fromBits(0x3E00));   // 1.5*1.5 = 2.25 exact
    ha.SetValue(1, half::fromBits(0x3C01)); hb.SetValue(1, half::fromBits(0x3C01));   // (1+u)^2 = 1+2u+u^2 -> 1+2u
    Mul(hc, ha, hb, 16);
    CHECK_EQ("mul.f16", 0, hc.GetValue(0).bits, 0x4080);
    CHECK_EQ("mul.f16", 1, hc.GetValue(1).bits, 0x3C02);
    Muls(hc, ha, half(2.0f), 16);
    CHECK_EQ("muls.f16", 0, hc.GetValue(0).bits, 0x4200);   // 3.0

    // ---- high-dim forms ----
    for (int i = 0; i < 256; ++i) { fa.SetValue(i, (float)i); fb.SetValue(i, 1000.0f); }
    Duplicate(fc, -1.0f, 256);
    Add(fc, fa, fb, 20, 2, BinaryRepeatParams());            // continuous mask 20, 2 repeats
    for (int i = 0; i < 192; ++i) {
        int lane = i % 64, rep = i / 64;
        float exp = (rep < 2 && lane < 20) ? (float)i + 1000.0f : -1.0f;
        CHECK_EQ("add.high.contmask", i, fc.GetValue(i), exp);
    }
    Duplicate(fc, -1.0f, 256);
    uint64_t bits[2] = {0x8000000000000005ull, 0};            // lanes 0, 2, 63
    Sub(fc, fa, fb, bits, 1, BinaryRepeatParams());
    for (int i = 0; i < 64; ++i) {
        float exp = (i == 0 || i == 2 || i == 63) ? (float)i - 1000.0f : -1.0f;
        CHECK_EQ("sub.high.bitmask", i, fc.GetValue(i), exp);
    }
    // strides: dst block stride 2, dst repeat stride 16 blocks, src default
    Duplicate(fc, -1.0f, 512 / 2);
    Adds(fc, fa, 0.5f, 16, 2, UnaryRepeatParams(2, 1, 16, 8));
    for (int r = 0; r < 2; ++r)
        for (int l = 0; l < 16; ++l) {
            int d = r * 128 + (l / 8) * 16 + l % 8;
            CHECK_EQ("adds.high.stride", d, fc.GetValue(d), (float)(r * 64 + l) + 0.5f);
        }
    CHECK_EQ("adds.high.gap", 8, fc.GetValue(8), -1.0f);
    CHECK_EQ("adds.high.gap", 64, fc.GetValue(64), -1.0f);
    // src block stride 0 re-reads the first block; src repeat stride 0 re-reads the same repeat
    Duplicate(fc, -1.0f, 256);
    Muls(fc, fa, 1.0f, 64, 2, UnaryRepeatParams(1, 0, 8, 0));
    for (int i = 0; i < 128; ++i) CHECK_EQ("muls.high.stride0", i, fc.GetValue(i), (float)(i % 8));
    // half with bits in mask[1] (lanes 64..127)
    for (int i = 0; i < 128; ++i) { ha.SetValue(i, half((float)i)); }
    Duplicate(hc, half(-1.0f), 128);
    uint64_t hbits2[2] = {1ull, 1ull << 5};                   // lanes 0 and 69
    Adds(hc, ha, half(1.0f), hbits2, 1, UnaryRepeatParams());
    for (int i = 0; i < 128; ++i) CHECK_EQ("adds.high.f16", i, (float)hc.GetValue(i), (i == 0 || i == 69) ? i + 1.0f : -1.0f);
    // Duplicate high-dim with block stride 2
    Duplicate(fc, 0.0f, 256);
    Duplicate(fc, 7.0f, 64, 1, 2, 8);
    for (int i = 0; i < 128; ++i) CHECK_EQ("dup.high", i, fc.GetValue(i), ((i / 8) % 2 == 0) ? 7.0f : 0.0f);
    // Counter mode with isSetMask=false: 70 elements over 2 repeats
    for (int i = 0; i < 128; ++i) fa.SetValue(i, (float)i);   // (ha aliased fa above)
    Duplicate(fc, -1.0f, 256);
    SetMaskCount();
    SetVectorMask<float, MaskMode::COUNTER>(0, 70);
    Adds<float, false>(fc, fa, 1.0f, MASK_PLACEHOLDER, 1, UnaryRepeatParams());
    SetMaskNorm();
    ResetMask();
    for (int i = 0; i < 80; ++i) CHECK_EQ("adds.counter", i, fc.GetValue(i), i < 70 ? i + 1.0f : -1.0f);
    // isSetMask=false in Normal mode uses the mask register
    SetVectorMask<float>(0, 0x3);
    Duplicate(fc, -1.0f, 64);
    Muls<float, false>(fc, fa, 2.0f, MASK_PLACEHOLDER, 1, UnaryRepeatParams());
    ResetMask();
    for (int i = 0; i < 4; ++i) CHECK_EQ("muls.maskreg", i, fc.GetValue(i), i < 2 ? 2.0f * i : -1.0f);

    // ---- Compare / Compares: bit i%8 of byte i/8 ----
    for (int i = 0; i < 64; ++i) { fa.SetValue(i, (float)i); fb.SetValue(i, (float)(63 - i)); }
    Compare(mask, fa, fb, CMPMODE::LT, 64);                 // i < 63-i  <=> i <= 31
    for (int i = 0; i < 8; ++i) CHECK_EQ("compare.lt.bytes", i, mask.GetValue(i), i < 4 ? 0xFF : 0x00);
    Compare(mask, fa, fb, CMPMODE::EQ, 64);                 // never equal (63 odd)
    for (int i = 0; i < 8; ++i) CHECK_EQ("compare.eq.bytes", i, mask.GetValue(i), 0);
    Compares(mask, fa, 5.0f, CMPMODE::GE, 64);              // bits 5..63
    CHECK_EQ("compares.ge", 0, mask.GetValue(0), 0xE0);
    CHECK_EQ("compares.ge", 1, mask.GetValue(1), 0xFF);
    Compares(mask, fa, 9.0f, CMPMODE::NE, 64);
    CHECK_EQ("compares.ne", 1, mask.GetValue(1), 0xFD);     // bit 1 of byte 1 = element 9
    for (int i = 0; i < 64; ++i) ia.SetValue(i, (i % 3 == 0) ? -1 : i);
    Compares(mask, ia, -1, CMPMODE::EQ, 64);                 // elements 0,3,6,... equal -1
    {
        uint64_t w = 0;
        for (int i = 0; i < 8; ++i) w |= (uint64_t)mask.GetValue(i) << (8 * i);
        uint64_t exp = 0;
        for (int i = 0; i < 64; i += 3) exp |= 1ull << i;
        CHECK_EQ("compares.i32.eq.lo", 0, (double)(w & 0xffffffffu), (double)(exp & 0xffffffffu));
        CHECK_EQ("compares.i32.eq.hi", 0, (double)(w >> 32), (double)(exp >> 32));
        CHECK_EQ("getsff0", 0, (double)GetSFFValue<0>(w), 1.0);   // first zero bit = element 1
        CHECK_EQ("getsff1", 0, (double)GetSFFValue<1>(w & ~1ull), 3.0);
        CHECK_EQ("getsff.none", 0, (double)GetSFFValue<1>(0), -1.0);
    }
    for (int i = 0; i < 128; ++i) { ha.SetValue(i, half((float)(i - 64))); }
    Compares(mask, ha, half(0.0f), CMPMODE::GT, 128);       // elements 65..127
    for (int i = 0; i < 16; ++i) CHECK_EQ("compares.f16.gt", i, mask.GetValue(i), i < 8 ? 0x00 : (i == 8 ? 0xFE : 0xFF));

    // ---- Select ----
    for (int i = 0; i < 128; ++i) { fa.SetValue(i, (float)i); fb.SetValue(i, (float)-i); }
    for (int i = 0; i < 16; ++i) mask.SetValue(i, (uint8_t)(i % 2 ? 0x0F : 0xF0));
    Select(fc, mask, fa, fb, SELMODE::VSEL_TENSOR_TENSOR_MODE, 128);
    for (int i = 0; i < 128; ++i) {
        int byte = i / 8, bit = i % 8;
        bool s0 = ((byte % 2 ? 0x0F : 0xF0) >> bit) & 1;
        CHECK_EQ("select.tt", i, fc.GetValue(i), s0 ? (float)i : (float)-i);
    }
    Select(fc, mask, fa, 42.0f, SELMODE::VSEL_TENSOR_SCALAR_MODE, 128);
    for (int i = 0; i < 128; ++i) {
        bool s0 = (((i / 8) % 2 ? 0x0F : 0xF0) >> (i % 8)) & 1;
        CHECK_EQ("select.ts", i, fc.GetValue(i), s0 ? (float)i : 42.0f);
    }
    for (int i = 0; i < 16; ++i) mask.SetValue(i, (uint8_t)(i < 8 ? (1u << (i % 8)) : 0xFF));
    Select(fc, mask, fa, fb, SELMODE::VSEL_CMPMASK_SPR, 128);   // every repeat reuses bits 0..63
    for (int i = 0; i < 128; ++i) {
        int lane = i % 64;
        bool s0 = ((1u << ((lane / 8) % 8)) >> (lane % 8)) & 1;
        CHECK_EQ("select.mode0", i, fc.GetValue(i), s0 ? (float)i : (float)-i);
    }

    // ---- Gather: byte offsets relative to src + srcBaseAddr ----
    LocalTensor<uint32_t> off = bc.Get<uint32_t>()[512];
    for (int i = 0; i < 20; ++i) fa.SetValue(i, 100.0f + i);
    for (int i = 0; i < 16; ++i) off.SetValue(i, (uint32_t)((15 - i) * 4));
    Gather(fb, fa, off, 0, 16);
    for (int i = 0; i < 16; ++i) CHECK_EQ("gather.rev", i, fb.GetValue(i), 100.0f + 15 - i);
    Gather(fb, fa, off, 8, 14);                             // base 8 bytes = 2 elements
    for (int i = 0; i < 14; ++i) CHECK_EQ("gather.base", i, fb.GetValue(i), 100.0f + 17 - i);
    for (int i = 0; i < 16; ++i) { ha.SetValue(i, half((float)i)); off.SetValue(i, (uint32_t)(i % 4) * 2); }
    Gather(hb, ha, off, 0, 16);
    for (int i = 0; i < 16; ++i) CHECK_EQ("gather.f16", i, (float)hb.GetValue(i), (float)(i % 4));

    // ---- GatherMask ----
    for (int i = 0; i < 128; ++i) ia.SetValue(i, 1000 + i);
    uint64_t cnt = 0;
    GatherMask(ib, ia, (uint8_t)1, false, 0, GatherMaskParams(1, 2, 8, 0), cnt);   // even elements, 2 repeats
    CHECK_EQ("gathermask.p1.cnt", 0, (double)cnt, 64.0);
    for (int i = 0; i < 64; ++i) CHECK_EQ("gathermask.p1", i, ib.GetValue(i), 1000 + 2 * i);
    GatherMask(ib, ia, (uint8_t)4, false, 0, GatherMaskParams(1, 1, 8, 0), cnt);   // element 1 of every 4
    CHECK_EQ("gathermask.p4.cnt", 0, (double)cnt, 16.0);
    for (int i = 0; i < 16; ++i) CHECK_EQ("gathermask.p4", i, ib.GetValue(i), 1000 + 4 * i + 1);
    LocalTensor<uint32_t> pat = bc.Get<uint32_t>()[768];
    pat.SetValue(0, 0x80000001u); pat.SetValue(1, 0x1u);    // lanes 0, 31, 32 (per repeat, src1RepeatStride 0)
    GatherMask(ib, ia, pat, false, 0, GatherMaskParams(1, 2, 8, 0), cnt);
    CHECK_EQ("gathermask.user.cnt", 0, (double)cnt, 6.0);
    const int expU[6] = {1000, 1031, 1032, 1064, 1095, 1096};
    for (int i = 0; i < 6; ++i) CHECK_EQ("gathermask.user", i, ib.GetValue(i), expU[i]);
    pat.SetValue(0, 0x0u); pat.SetValue(1, 0x0u); pat.SetValue(2, 0x3u);          // bits 64, 65 of the stream
    pat.SetValue(0, 0x10u);                                                        // bit 4
    GatherMask(ib, ia, pat, true, 70, GatherMaskParams(1, 1, 8, 8), cnt);          // counter mode, 70 elements
    CHECK_EQ("gathermask.counter.cnt", 0, (double)cnt, 3.0);
    CHECK_EQ("gathermask.counter", 0, ib.GetValue(0), 1004);
    CHECK_EQ("gathermask.counter", 1, ib.GetValue(1), 1064);
    CHECK_EQ("gathermask.counter", 2, ib.GetValue(2), 1065);

    // ---- ReduceSum ----
    for (int i = 0; i < 100; ++i) fa.SetValue(i, (float)i);
    ReduceSum(fc, fa, fb, 100);
    CHECK_EQ("reducesum.f32", 0, fc.GetValue(0), 4950.0f);
    for (int i = 0; i < 10; ++i) ha.SetValue(i, half(0.5f));
    ReduceSum(hc, ha, hb, 10);
    CHECK_EQ("reducesum.f16", 0, (float)hc.GetValue(0), 5.0f);
    (void)hf;
}

int main() {
    ICPU_RUN_KF(k_vec, 1);
    return finish("fid_vector");
}
