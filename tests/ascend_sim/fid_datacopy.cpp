// Fidelity: DataCopy / DataCopyPad (all stride and padding forms), UB->UB copy,
// GlobalTensor scalar access, atomics per dtype. Layouts follow ASCENDC_REFERENCE.md §3.3.
#include "sim_test.h"
#include <climits>
using namespace AscendC;

// --- strided DataCopy in both directions (units: 32 B blocks) ---
extern "C" __global__ __aicore__ void k_copy(GM_ADDR g, GM_ADDR out1, GM_ADDR out2, GM_ADDR ubdump) {
    TPipe pipe;
    TBuf<TPosition::VECCALC> buf;
    pipe.InitBuffer(buf, 96 * sizeof(int32_t));
    LocalTensor<int32_t> ub = buf.Get<int32_t>();
    GlobalTensor<int32_t> gg, go1, go2, gd;
    gg.SetGlobalBuffer((__gm__ int32_t*)g, 64);
    go1.SetGlobalBuffer((__gm__ int32_t*)out1, 24);
    go2.SetGlobalBuffer((__gm__ int32_t*)out2, 48);
    gd.SetGlobalBuffer((__gm__ int32_t*)ubdump, 96);
    Duplicate(ub, -7, 96);
    PipeBarrier<PIPE_ALL>();   // V -> MTE2 on TBuf memory needs a manual edge
    // 3 rows of 1 block (8 int32); GM gap 1 block, UB gap 2 blocks
    DataCopy(ub, gg, DataCopyParams(3, 1, 1, 2));
    SetFlag<HardEvent::MTE2_MTE3>(0);
    WaitFlag<HardEvent::MTE2_MTE3>(0);
    DataCopy(gd, ub, 96);                                  // raw UB dump
    DataCopy(go1, ub, DataCopyParams(3, 1, 2, 0));         // gather the rows back, contiguous
    DataCopy(go2, ub, DataCopyParams(3, 1, 2, 1));         // GM gap of 1 block between rows
}

// --- DataCopyPad GM->UB with padding and strides, then UB->GM ---
extern "C" __global__ __aicore__ void k_pad(GM_ADDR g, GM_ADDR ubdump, GM_ADDR out) {
    TPipe pipe;
    TBuf<TPosition::VECCALC> buf;
    pipe.InitBuffer(buf, 64 * sizeof(float));
    LocalTensor<float> ub = buf.Get<float>();
    GlobalTensor<float> gg, gd, go;
    gg.SetGlobalBuffer((__gm__ float*)g, 100);
    gd.SetGlobalBuffer((__gm__ float*)ubdump, 64);
    go.SetGlobalBuffer((__gm__ float*)out, 18);
    Duplicate(ub, 99.0f, 64);
    SetFlag<HardEvent::V_MTE2>(1);
    WaitFlag<HardEvent::V_MTE2>(1);
    // blockLen 20 B (5 floats), GM stride 8 B, UB stride 1 block, pad 2 left + 1 right with -1
    DataCopyPad(ub, gg, DataCopyExtParams(3, 20, 8, 1, 0), DataCopyPadExtParams<float>(true, 2, 1, -1.0f));
    PipeBarrier<PIPE_ALL>();
    DataCopy(gd, ub, 64);
    // UB->GM: rows of 20 B read from 32 B-aligned UB rows with 1 block UB stride, GM stride 4 B
    DataCopyPad(go, ub, DataCopyExtParams(3, 20, 1, 4, 0));
}

// --- DataCopyPad with half, int64 and the legacy 16-bit parameter form ---
extern "C" __global__ __aicore__ void k_pad2(GM_ADDR gh, GM_ADDR oh, GM_ADDR g64, GM_ADDR o64, GM_ADDR o16) {
    TPipe pipe;
    TBuf<TPosition::VECCALC> b1, b2, b3;
    pipe.InitBuffer(b1, 64);
    pipe.InitBuffer(b2, 64);
    pipe.InitBuffer(b3, 64);
    GlobalTensor<half> ghh, ohh;
    ghh.SetGlobalBuffer((__gm__ half*)gh, 7);
    ohh.SetGlobalBuffer((__gm__ half*)oh, 7);
    LocalTensor<half> uh = b1.Get<half>();
    // 2 rows of 3 halves (6 B), GM stride 2 B (skip 1 half), right pad 1 with 5.0 -> row 32 B
    DataCopyPad(uh, ghh, DataCopyExtParams(2, 6, 2, 0, 0), DataCopyPadExtParams<half>(true, 0, 1, half(5.0f)));
    PipeBarrier<PIPE_ALL>();
    // write both rows contiguously: row0 -> oh[0..3), row1 -> oh[3..6)
    DataCopyPad(ohh, uh, DataCopyExtParams(2, 6, 0, 0, 0));
    GlobalTensor<int64_t> gl, ol;
    gl.SetGlobalBuffer((__gm__ int64_t*)g64, 3);
    ol.SetGlobalBuffer((__gm__ int64_t*)o64, 8);
    LocalTensor<int64_t> ul = b2.Get<int64_t>();
    DataCopyPad(ul, gl, DataCopyExtParams(1, 24, 0, 0, 0), DataCopyPadExtParams<int64_t>(true, 1, 0, 0));
    PipeBarrier<PIPE_ALL>();
    DataCopy(ol, ul, 8);
    // legacy form: DataCopyParams with blockLen in bytes + DataCopyPadParams
    GlobalTensor<int16_t> g16, o16g;
    g16.SetGlobalBuffer((__gm__ int16_t*)gh, 7);
    o16g.SetGlobalBuffer((__gm__ int16_t*)o16, 16);
    LocalTensor<int16_t> u16 = b3.Get<int16_t>();
    DataCopyPad(u16, g16, DataCopyParams(1, 4, 0, 0), DataCopyPadParams(true, 2, 0, 0x1234));
    PipeBarrier<PIPE_ALL>();
    DataCopy(o16g, u16, 16);
}

// --- atomics per dtype: UB->GM read-add-write in T ---
template <typename T>
__aicore__ void atomicOne(GM_ADDR out, T v, uint32_t n, int mode) {
    TPipe pipe;
    TBuf<TPosition::VECCALC> buf;
    pipe.InitBuffer(buf, 64);
    LocalTensor<T> ub = buf.Get<T>();
    for (uint32_t i = 0; i < n; ++i) ub.SetValue(i, v);
    GlobalTensor<T> go;
    go.SetGlobalBuffer((__gm__ T*)out, n);
    if (mode == 1) SetAtomicAdd<T>();
    if (mode == 2) SetAtomicMax<T>();
    if (mode == 3) SetAtomicMin<T>();
    DataCopyPad(go, ub, DataCopyExtParams(1, n * sizeof(T), 0, 0, 0));
    SetAtomicNone();
}
extern "C" __global__ __aicore__ void k_atomic(GM_ADDR f, GM_ADDR h, GM_ADDR i32, GM_ADDR i16, GM_ADDR i8, GM_ADDR bf, GM_ADDR fmax, GM_ADDR fmin) {
    atomicOne<float>(f, 0.5f, 4, 1);
    atomicOne<half>(h, half(0.00048828125f), 2, 1);   // 2^-11
    atomicOne<int32_t>(i32, 1, 2, 1);
    atomicOne<int16_t>(i16, 1, 2, 1);
    atomicOne<int8_t>(i8, 1, 2, 1);
    atomicOne<bfloat16_t>(bf, bfloat16_t(0.00390625f), 2, 1);   // 2^-8
    atomicOne<float>(fmax, 2.0f, 2, 2);
    atomicOne<float>(fmin, 2.0f, 2, 3);
}
// all cores atomically add their (blockIdx+1) into the same 8 floats
extern "C" __global__ __aicore__ void k_atomic_multi(GM_ADDR out) {
    TPipe pipe;
    TBuf<TPosition::VECCALC> buf;
    pipe.InitBuffer(buf, 32);
    LocalTensor<float> ub = buf.Get<float>();
    Duplicate(ub, static_cast<float>(GetBlockIdx() + 1), 8);
    PipeBarrier<PIPE_ALL>();
    GlobalTensor<float> go;
    go.SetGlobalBuffer((__gm__ float*)out, 8);
    SetAtomicAdd<float>();
    DataCopy(go, ub, 8);
    SetAtomicNone();
}

// --- MTE2 -> scalar -> MTE3 on TBuf memory: ordered by the compiler's automatic S edges ---
extern "C" __global__ __aicore__ void k_scalar_sync(GM_ADDR g, GM_ADDR out) {
    TPipe pipe;
    TBuf<TPosition::VECCALC> buf;
    pipe.InitBuffer(buf, 64);
    LocalTensor<int32_t> a = buf.Get<int32_t>();
    GlobalTensor<int32_t> gg, go;
    gg.SetGlobalBuffer((__gm__ int32_t*)g, 64);
    go.SetGlobalBuffer((__gm__ int32_t*)out, 8);
    DataCopy(a, gg, 8);
    for (int i = 0; i < 8; ++i) a.SetValue(i, a.GetValue(i) * 2);
    DataCopy(go, a, 8);
}

// --- UB->UB copy and GlobalTensor scalar access ---
extern "C" __global__ __aicore__ void k_misc(GM_ADDR g, GM_ADDR out) {
    TPipe pipe;
    TBuf<TPosition::VECCALC> buf;
    pipe.InitBuffer(buf, 128 * sizeof(int32_t));
    LocalTensor<int32_t> a = buf.Get<int32_t>();
    GlobalTensor<int32_t> gg, go;
    gg.SetGlobalBuffer((__gm__ int32_t*)g, 64);
    go.SetGlobalBuffer((__gm__ int32_t*)out, 64);
    Duplicate(a, 0, 128);
    PipeBarrier<PIPE_ALL>();
    DataCopy(a, gg, 16);
    PipeBarrier<PIPE_ALL>();
    DataCopy(a[64], a, DataCopyParams(2, 1, 0, 1));   // UB->UB: rows of 8 to a[64..72) and a[80..88)
    PipeBarrier<PIPE_ALL>();
    DataCopy(go, a[64], 32);
    go.SetValue(40, gg.GetValue(3) * 10);
}

int main() {
    // k_copy
    int32_t* g = gmNew<int32_t>(64, 0);
    for (int i = 0; i < 64; ++i) g[i] = i;
    int32_t* o1 = gmNew<int32_t>(24, -1);
    int32_t* o2 = gmNew<int32_t>(48, -1);
    int32_t* ud = gmNew<int32_t>(96, 0);
    ICPU_RUN_KF(k_copy, 1, (GM_ADDR)g, (GM_ADDR)o1, (GM_ADDR)o2, (GM_ADDR)ud);
    // UB row i (8 ints) starts at i*(1+2)*8 = 24i and holds GM g[16i .. 16i+8)
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 24; ++j) CHECK_EQ("copy.ub", i * 24 + j, ud[i * 24 + j], j < 8 ? 16 * i + j : -7);
    for (int j = 72; j < 96; ++j) CHECK_EQ("copy.ub.tail", j, ud[j], -7);
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 8; ++j) CHECK_EQ("copy.out1", i * 8 + j, o1[i * 8 + j], 16 * i + j);
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 16; ++j) CHECK_EQ("copy.out2", i * 16 + j, o2[i * 16 + j], j < 8 ? 16 * i + j : -1);

    // k_pad
    float* gf = gmNew<float>(100, 0.f);
    for (int i = 0; i < 100; ++i) gf[i] = (float)i;
    float* fd = gmNew<float>(64, 0.f);
    float* fo = gmNew<float>(18, -5.f);
    ICPU_RUN_KF(k_pad, 1, (GM_ADDR)gf, (GM_ADDR)fd, (GM_ADDR)fo);
    // row = roundup(2*4 + 20 + 1*4, 32) = 32 B = 8 floats, pitch = 32 + 1*32 = 64 B = 16 floats.
    // GM row i starts at byte i*(20+8) = float 7i. UB: [-1,-1, g, g, g, g, g, -1] then 8 untouched (99).
    for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 16; ++j) {
            float exp = j < 2 ? -1.f : (j < 7 ? (float)(7 * i + j - 2) : (j == 7 ? -1.f : 99.f));
            CHECK_EQ("pad.ub", i * 16 + j, fd[i * 16 + j], exp);
        }
    }
    for (int j = 48; j < 64; ++j) CHECK_EQ("pad.ub.tail", j, fd[j], 99.f);
    // UB->GM: row i read at byte i*(32 + 32), 20 B each, GM row i at byte i*(20+4) = float 6i.
    const float expOut[18] = {-1, -1, 0, 1, 2, -5, -1, -1, 7, 8, 9, -5, -1, -1, 14, 15, 16, -5};
    for (int j = 0; j < 18; ++j) CHECK_EQ("pad.out", j, fo[j], expOut[j]);

    // k_pad2
    half* gh = gmNew<half>(7, half(0.f));
    for (int i = 0; i < 7; ++i) gh[i] = half((float)(i + 1));
    half* oh = gmNew<half>(7, half(-2.f));
    int64_t* g64 = gmNew<int64_t>(3, 0);
    g64[0] = 1LL << 40; g64[1] = -3; g64[2] = 7;
    int64_t* o64 = gmNew<int64_t>(8, 0);
    int16_t* o16 = gmNew<int16_t>(16, 0);
    ICPU_RUN_KF(k_pad2, 1, (GM_ADDR)gh, (GM_ADDR)oh, (GM_ADDR)g64, (GM_ADDR)o64, (GM_ADDR)o16);
    // rows read at GM half 0 and 4 (6 B + 2 B stride): {1,2,3} and {5,6,7}
    const float expH[7] = {1, 2, 3, 5, 6, 7, -2};
    for (int j = 0; j < 7; ++j) CHECK_EQ("pad2.half", j, (float)oh[j], expH[j]);
    // int64: left pad 1 element of 0, then the 3 values
    const int64_t expL[4] = {0, 1LL << 40, -3, 7};
    for (int j = 0; j < 4; ++j) CHECK_EQ("pad2.i64", j, (double)o64[j], (double)expL[j]);
    // legacy: 4 bytes = 2 int16 from the half bits, 2 pad elements of 0x1234 on the left
    CHECK_EQ("pad2.legacy", 0, o16[0], 0x1234);
    CHECK_EQ("pad2.legacy", 1, o16[1], 0x1234);
    CHECK_EQ("pad2.legacy", 2, (uint16_t)o16[2], 0x3C00);   // half 1.0
    CHECK_EQ("pad2.legacy", 3, (uint16_t)o16[3], 0x4000);   // half 2.0

    // k_atomic
    float* af = gmNew<float>(4, 1.0f);
    half* ah = gmNew<half>(2, half(1.0f));
    ah[1] = half::fromBits(0x3C01);   // 1 + 2^-10
    int32_t* ai = gmNew<int32_t>(2, INT32_MAX);
    ai[1] = -5;
    int16_t* as = gmNew<int16_t>(2, (int16_t)32767);
    int8_t* ab = gmNew<int8_t>(2, (int8_t)127);
    ab[1] = 3;
    bfloat16_t* abf = gmNew<bfloat16_t>(2, bfloat16_t(1.0f));
    abf[1] = bfloat16_t::fromBits(0x3F81);   // 1 + 2^-7
    float* amax = gmNew<float>(2, 1.0f);
    amax[1] = 3.0f;
    float* amin = gmNew<float>(2, 1.0f);
    amin[1] = 3.0f;
    ICPU_RUN_KF(k_atomic, 1, (GM_ADDR)af, (GM_ADDR)ah, (GM_ADDR)ai, (GM_ADDR)as, (GM_ADDR)ab, (GM_ADDR)abf, (GM_ADDR)amax, (GM_ADDR)amin);
    for (int j = 0; j < 4; ++j) CHECK_EQ("atomic.f32", j, af[j], 1.5f);
    CHECK_EQ("atomic.f16.tie_to_even_down", 0, hbits(ah[0]), 0x3C00);   // 1 + 2^-11 is a tie -> 1.0
    CHECK_EQ("atomic.f16.tie_to_even_up", 1, hbits(ah[1]), 0x3C02);     // 1+2^-10+2^-11 tie -> 1+2^-9
    CHECK_EQ("atomic.i32.wrap", 0, ai[0], INT32_MIN);
    CHECK_EQ("atomic.i32", 1, ai[1], -4);
    CHECK_EQ("atomic.i16.wrap", 0, as[0], -32768);
    CHECK_EQ("atomic.i8.wrap", 0, ab[0], -128);
    CHECK_EQ("atomic.i8", 1, ab[1], 4);
    CHECK_EQ("atomic.bf16.tie", 0, abf[0].bits, 0x3F80);     // 1 + 2^-8 tie -> 1.0
    CHECK_EQ("atomic.bf16.tie_up", 1, abf[1].bits, 0x3F82);  // 1+2^-7+2^-8 tie -> 1+2^-6
    CHECK_EQ("atomic.max", 0, amax[0], 2.0f);
    CHECK_EQ("atomic.max", 1, amax[1], 3.0f);
    CHECK_EQ("atomic.min", 0, amin[0], 1.0f);
    CHECK_EQ("atomic.min", 1, amin[1], 2.0f);

    float* am = gmNew<float>(8, 0.0f);
    ICPU_RUN_KF(k_atomic_multi, 8, (GM_ADDR)am);
    for (int j = 0; j < 8; ++j) CHECK_EQ("atomic.multicore", j, am[j], 36.0f);   // 1+2+...+8

    // k_misc
    int32_t* mo = gmNew<int32_t>(64, -9);
    ICPU_RUN_KF(k_misc, 1, (GM_ADDR)g, (GM_ADDR)mo);
    // a[64..72) = g[0..8), a[72..80) = 0 (gap), a[80..88) = g[8..16), a[88..96) = 0
    for (int j = 0; j < 32; ++j) {
        int exp = j < 8 ? j : (j < 16 ? 0 : (j < 24 ? j - 8 : 0));
        CHECK_EQ("misc.ub2ub", j, mo[j], exp);
    }
    CHECK_EQ("misc.setvalue", 40, mo[40], 30);
    CHECK_EQ("misc.untouched", 41, mo[41], -9);
    int32_t* so = gmNew<int32_t>(8, 0);
    ICPU_RUN_KF(k_scalar_sync, 1, (GM_ADDR)g, (GM_ADDR)so);
    for (int j = 0; j < 8; ++j) CHECK_EQ("scalar_sync", j, so[j], 2 * j);
    return finish("fid_datacopy");
}
