// Fidelity: Cast. The harness only runs the kernel and prints raw input/output bits; the
// expected values are computed independently in test_fidelity.py (numpy / bit arithmetic).
// Output lines: CAST <src> <dst> <mode> <input as int/bits> <output as int/bits>
#include "sim_test.h"
#include <cmath>
#include <climits>
#include <vector>
#include <string>
using namespace AscendC;

template <typename D, typename S>
__aicore__ void castKernel(GM_ADDR src, GM_ADDR dst, uint32_t n, int mode) {
    TPipe pipe;
    TBuf<TPosition::VECCALC> bs, bd;
    pipe.InitBuffer(bs, 128 * sizeof(S));
    pipe.InitBuffer(bd, 128 * sizeof(D));
    LocalTensor<S> ls = bs.Get<S>();
    LocalTensor<D> ld = bd.Get<D>();
    GlobalTensor<S> gs;
    GlobalTensor<D> gd;
    gs.SetGlobalBuffer((__gm__ S*)src, n);
    gd.SetGlobalBuffer((__gm__ D*)dst, n);
    DataCopyPad(ls, gs, DataCopyExtParams(1, n * sizeof(S), 0, 0, 0), DataCopyPadExtParams<S>(false, 0, 0, S()));
    SetFlag<HardEvent::MTE2_V>(EVENT_ID0);
    WaitFlag<HardEvent::MTE2_V>(EVENT_ID0);
    Cast(ld, ls, static_cast<RoundMode>(mode), n);
    SetFlag<HardEvent::V_MTE3>(0);
    WaitFlag<HardEvent::V_MTE3>(0);
    DataCopyPad(gd, ld, DataCopyExtParams(1, n * sizeof(D), 0, 0, 0));
}

template <typename T> static std::string show(T v) {
    if constexpr (std::is_same<T, float>::value) { uint32_t u; std::memcpy(&u, &v, 4); return std::to_string(u); }
    else if constexpr (std::is_same<T, half>::value || std::is_same<T, bfloat16_t>::value) return std::to_string(v.bits);
    else return std::to_string((long long)v);
}

template <typename D, typename S>
static void run(const char* sn, const char* dn, const std::vector<S>& in, std::initializer_list<int> modes) {
    for (int mode : modes) {
        uint32_t n = (uint32_t)in.size();
        S* src = (S*)AscendC::GmAlloc(n * sizeof(S));
        D* dst = (D*)AscendC::GmAlloc(n * sizeof(D));
        for (uint32_t i = 0; i < n; ++i) src[i] = in[i];
        auto body = [&](GM_ADDR s, GM_ADDR d) { castKernel<D, S>(s, d, n, mode); };
        ICPU_RUN_KF(body, 1, (GM_ADDR)src, (GM_ADDR)dst);
        for (uint32_t i = 0; i < n; ++i)
            std::printf("CAST %s %s %d %s %s\n", sn, dn, mode, show(in[i]).c_str(), show(dst[i]).c_str());
        AscendC::GmFree(src);
        AscendC::GmFree(dst);
    }
}

static std::vector<float> floatInputs() {
    std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.0f, 0.1f, -0.1f, 3.14159f, -2.71828f, 1000.7f, -1000.3f,
                            1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, -(1.0f + 0x1p-11f), 1.0f + 0x1p-11f + 0x1p-20f,
                            2048.5f, 2049.5f, 65519.0f, 65520.0f, 70000.0f, -70000.0f, 0x1p-25f, 3 * 0x1p-25f,
                            1.5f * 0x1p-24f, 0x1p-30f, -0x1p-25f, 6.0e-5f, 1e-10f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f,
                            -2.5f, 2.4999f, -2.5001f, 123456.7f, -98765.4f, 1.00390625f, 1.01171875f, 1.0078125f,
                            -1.01171875f, 33.333f, 1e10f, -1e10f, 3e38f, INFINITY, -INFINITY};
    return v;
}

int main() {
    std::vector<float> f = floatInputs();
    run<half, float>("float", "half", f, {0, 1, 2, 3, 4, 5, 6});
    run<bfloat16_t, float>("float", "bf16", f, {1, 2, 3, 4, 5});
    std::vector<float> fi;
    for (float x : f) if (std::isfinite(x)) fi.push_back(x);
    run<int32_t, float>("float", "int32", fi, {1, 2, 3, 4, 5});
    run<int64_t, float>("float", "int64", fi, {1, 2, 3, 4, 5});
    run<float, float>("float", "float", fi, {1, 2, 3, 4, 5});
    std::vector<int32_t> iv = {0, 1, -1, 7, 16777216, 16777217, 16777219, -16777217, -16777219, 33554435,
                               INT32_MAX, INT32_MIN, 123456789, -987654321, 100000, 65537};
    run<float, int32_t>("int32", "float", iv, {0, 1, 2, 3, 4, 5});
    run<int64_t, int32_t>("int32", "int64", iv, {0});
    run<int16_t, int32_t>("int32", "int16", iv, {0});
    std::vector<int64_t> lv = {0, -1, 5, 1LL << 40, -(1LL << 40) - 1, (1LL << 53) + 1, INT64_MAX, INT64_MIN, 4294967297LL};
    run<int32_t, int64_t>("int64", "int32", lv, {0});
    run<float, int64_t>("int64", "float", lv, {0, 1, 2, 3, 4, 5});
    std::vector<half> hv;
    for (uint16_t b : {0x0000, 0x8000, 0x3C00, 0xBC00, 0x3E00, 0x4100, 0xC100, 0x3800, 0xB800, 0x7BFF, 0xFBFF,
                       0x0001, 0x03FF, 0x5BFF, 0x5A00, 0x5808, 0x7C00, 0xFC00, 0x4B00, 0x57FF})
        hv.push_back(half::fromBits(b));
    run<float, half>("half", "float", hv, {0});
    std::vector<half> hfin;
    for (half h : hv) if ((h.bits & 0x7C00) != 0x7C00) hfin.push_back(h);
    run<int32_t, half>("half", "int32", hfin, {1, 2, 3, 4, 5});
    run<int8_t, half>("half", "int8", hfin, {0, 1, 2, 3, 4, 5});
    run<uint8_t, half>("half", "uint8", hfin, {0, 1, 2, 3, 4, 5});
    std::vector<bfloat16_t> bv;
    for (uint16_t b : {0x0000, 0x3F80, 0xBF80, 0x3F81, 0x4049, 0x7F7F, 0x0001, 0xC2F7}) bv.push_back(bfloat16_t::fromBits(b));
    run<float, bfloat16_t>("bf16", "float", bv, {0});
    std::vector<int16_t> sv = {0, 1, -1, 2049, 2051, -2051, 32767, -32768, 4097};
    run<half, int16_t>("int16", "half", sv, {0});
    run<float, int16_t>("int16", "float", sv, {0});
    std::vector<int8_t> cv = {0, 1, -1, 127, -128, 42};
    run<half, int8_t>("int8", "half", cv, {0});
    std::vector<uint8_t> uv = {0, 1, 255, 128, 42};
    run<half, uint8_t>("uint8", "half", uv, {0});
    std::printf("CAST-DONE\n");
    return 0;
}
