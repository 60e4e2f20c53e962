// API probe for tools/ascend_real_api/installed_cann_check.py: every AscendC form that the emulator (tools/ascend_emulator)
// implements, written as a kernel would call it. It must compile against BOTH the emulator and the
// real asc-devkit headers; an API form that only one of them accepts is a divergence.
// Never run: the values are arbitrary, only the types matter.
#include "kernel_operator.h"
#include "lib/matmul_intf.h"

using namespace AscendC;

namespace {

template <typename T>
__aicore__ inline void Arithmetic(const LocalTensor<T>& a, const LocalTensor<T>& b, const LocalTensor<T>& c) {
    Add(a, b, c, 64);
    Sub(a, b, c, 64);
    Mul(a, b, c, 64);
    Max(a, b, c, 64);
    Min(a, b, c, 64);
    Adds(a, b, (T)1, 64);
    Muls(a, b, (T)2, 64);
    Maxs(a, b, (T)0, 64);
    Mins(a, b, (T)1, 64);
    Duplicate(a, (T)0, 64);
    // high-dim forms: continuous mask and bit mask, repeat parameters
    uint64_t bits[2] = {~0ull, 0};
    Add(a, b, c, (uint64_t)(256 / sizeof(T)), 2, BinaryRepeatParams(1, 1, 1, 8, 8, 8));
    Add(a, b, c, bits, 1, BinaryRepeatParams());
    Adds(a, b, (T)1, (uint64_t)(256 / sizeof(T)), 1, UnaryRepeatParams(1, 1, 8, 8));
    Adds(a, b, (T)1, bits, 1, UnaryRepeatParams());
    Duplicate(a, (T)0, (uint64_t)(256 / sizeof(T)), 1, 1, 8);
    Duplicate(a, (T)0, bits, 1, 1, 8);
}

template <typename T>
__aicore__ inline void FloatOnly(const LocalTensor<T>& a, const LocalTensor<T>& b, const LocalTensor<uint8_t>& bits,
                                 const LocalTensor<T>& work) {
    Div(a, a, b, 64);
    Compare(bits, a, b, CMPMODE::LT, 256 / sizeof(T) * 2);
    CompareScalar(bits, a, (T)0, CMPMODE::GE, 256 / sizeof(T) * 2);
    CompareScalar(bits, a, (T)0, CMPMODE::GT, 256 / sizeof(T) * 2);
    Select(a, bits, a, b, SELMODE::VSEL_TENSOR_TENSOR_MODE, 64);
    Select(a, bits, a, (T)0, SELMODE::VSEL_TENSOR_SCALAR_MODE, 64);
    ReduceSum(a, b, work, 64);
}

template <typename T>
__aicore__ inline void GatherForms(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LocalTensor<uint32_t>& off,
                                   const LocalTensor<T>& pattern) {
    Gather(dst, src, off, (uint32_t)0, (uint32_t)64);
    uint64_t kept = 0;
    GatherMask(dst, src, (uint8_t)1, false, (uint32_t)0, GatherMaskParams(1, 1, 8, 0), kept);
    GatherMask(dst, src, pattern.template ReinterpretCast<typename std::conditional<sizeof(T) == 4, uint32_t, uint16_t>::type>(),
               true, (uint32_t)64, GatherMaskParams(1, 1, 8, 0), kept);
}

template <typename T>
__aicore__ inline void Copies(const LocalTensor<T>& ub, const LocalTensor<T>& ub2, const GlobalTensor<T>& gm) {
    DataCopy(ub, gm, 64);
    DataCopy(gm, ub, 64);
    DataCopy(ub, ub2, 64);
    DataCopy(ub, gm, DataCopyParams(2, 1, 0, 0));
    DataCopy(gm, ub, DataCopyParams(2, 1, 0, 0));
    DataCopy(ub, ub2, DataCopyParams(2, 1, 0, 0));
    DataCopyPad(ub, gm, DataCopyExtParams(2, 6 * sizeof(T), 0, 0, 0), DataCopyPadExtParams<T>(true, 1, 1, (T)0));
    DataCopyPad(gm, ub, DataCopyExtParams(2, 6 * sizeof(T), 0, 0, 0));
    DataCopyPad(ub, gm, DataCopyParams(1, 32, 0, 0), DataCopyPadParams(false, 0, 0, 0));
    DataCopyPad(gm, ub, DataCopyParams(1, 32, 0, 0));
    SetAtomicAdd<T>();
    SetAtomicMax<T>();
    SetAtomicMin<T>();
    SetAtomicNone();
}

class Probe {
    using A = MatmulType<TPosition::GM, CubeFormat::ND, half>;
    using At = MatmulType<TPosition::GM, CubeFormat::ND, half, true>;
    using C = MatmulType<TPosition::GM, CubeFormat::ND, float>;

public:
    Matmul<A, A, C, C> mm;
    Matmul<At, A, C, C> mmT;

    __aicore__ inline void Run(GM_ADDR gm, GM_ADDR workspace) {
        TBuf<TPosition::VECCALC> buf;
        TQue<TPosition::VECIN, 2> inQ;
        TQue<TPosition::VECOUT, 1> outQ;
        TQueBind<TPosition::VECIN, TPosition::VECOUT, 1> bindQ;
        pipe.InitBuffer(buf, 65536);
        pipe.InitBuffer(inQ, 2, 4096);
        pipe.InitBuffer(outQ, 1, 4096);
        pipe.InitBuffer(bindQ, 1, 4096);

        LocalTensor<float> f = buf.Get<float>();
        LocalTensor<half> h = buf.GetWithOffset<half>(2048, 8192);
        LocalTensor<int32_t> i = buf.Get<int32_t>(4096)[1024];
        LocalTensor<int16_t> s = buf.Get<int16_t>()[12288];
        LocalTensor<uint32_t> u = buf.Get<uint32_t>()[8192];
        LocalTensor<uint8_t> bits = buf.Get<uint8_t>()[40960];
        GlobalTensor<float> gf;
        gf.SetGlobalBuffer((__gm__ float*)gm, 4096);
        GlobalTensor<half> gh;
        gh.SetGlobalBuffer((__gm__ half*)gm, 4096);
        GlobalTensor<int32_t> gi;
        gi.SetGlobalBuffer((__gm__ int32_t*)gm, 4096);

        Arithmetic(f, f[64], f[128]);
        Arithmetic(h, h[128], h[256]);
        Arithmetic(i, i[64], i[128]);
        Arithmetic(s, s[128], s[256]);
        FloatOnly(f, f[64], bits, f[256]);
        FloatOnly(h, h[128], bits, h[512]);
        Compare(bits, i, i[64], CMPMODE::EQ, 128);
        CompareScalar(bits, i, (int32_t)-1, CMPMODE::EQ, 128);
        CompareScalar(bits, i, (int32_t)-1, CMPMODE::EQ, 128);
        Select(f, bits, f, f[64], SELMODE::VSEL_CMPMASK_SPR, 64);
        GatherForms(f, f[1024], u, f[2048]);
        GatherForms(h, h[2048], u, h[4096]);
        GatherForms(i, i[1024], u, i[2048]);
        Copies(f, f[1024], gf);
        Copies(h, h[2048], gh);
        Copies(i, i[1024], gi);
        Cast(f, h, RoundMode::CAST_NONE, 64);
        Cast(h, f, RoundMode::CAST_RINT, 64);
        Cast(f, i, RoundMode::CAST_NONE, 64);
        Cast(i, f, RoundMode::CAST_FLOOR, 64);
        Cast(i, f, RoundMode::CAST_CEIL, 64);
        Cast(i, f, RoundMode::CAST_ROUND, 64);
        Cast(i, f, RoundMode::CAST_TRUNC, 64);

        SetMaskCount();
        SetVectorMask<float, MaskMode::COUNTER>(0, 100);
        Adds<float, false>(f, f, 1.0f, MASK_PLACEHOLDER, 1, UnaryRepeatParams());
        SetMaskNorm();
        SetVectorMask<float, MaskMode::NORMAL>(0, ~0ull);
        ResetMask();
        int64_t sff = GetSFFValue<0>(h.GetSize());
        sff += ScalarGetSFFValue<1>((uint64_t)sff);

        LocalTensor<float> x = inQ.AllocTensor<float>();
        inQ.EnQue(x);
        x = inQ.DeQue<float>();
        int32_t scalar = i.GetValue(0);
        i.SetValue(1, scalar + (int32_t)x.GetSize() + (int32_t)x.GetLength());
        LocalTensor<int32_t> view = x.ReinterpretCast<int32_t>();
        view.SetSize(8);
        inQ.FreeTensor(x);
        LocalTensor<float> y = outQ.AllocTensor<float>();
        outQ.EnQue(y);
        y = outQ.DeQue<float>();
        outQ.FreeTensor(y);
        LocalTensor<float> z = bindQ.AllocTensor<float>();
        bindQ.EnQue(z);
        z = bindQ.DeQue<float>();
        bindQ.FreeTensor(z);
        bool idle = inQ.VacantInQue() && !inQ.HasTensorInQue() && inQ.GetTensorCountInQue() == 0 && inQ.HasIdleBuffer();
        gi.SetValue(0, gi.GetValue(1) + (idle ? 1 : 0));
        (void)gi.GetSize();

        TEventID ev = pipe.AllocEventID<HardEvent::MTE2_V>();
        pipe.ReleaseEventID<HardEvent::MTE2_V>(ev);
        SetFlag<HardEvent::MTE2_V>(0);
        WaitFlag<HardEvent::MTE2_V>(0);
        SetFlag<HardEvent::V_MTE3>(1);
        WaitFlag<HardEvent::V_MTE3>(1);
        SetFlag<HardEvent::MTE3_MTE2>(2);
        WaitFlag<HardEvent::MTE3_MTE2>(2);
        PipeBarrier<PIPE_V>();
        PipeBarrier<PIPE_ALL>();
        DataCacheCleanAndInvalid<int32_t, CacheLine::SINGLE_CACHE_LINE, DcciDst::CACHELINE_OUT>(gi);

        const int64_t who = GetBlockIdx() + GetBlockNum() + GetSubBlockIdx() + GetTaskRatio();
        gi.SetValue(2, (int32_t)who);
        SyncAll();
        SyncAll<false>();
        GM_ADDR user = GetUserWorkspace(workspace);

        mm.SetOrgShape(16, 16, 32);
        mm.SetOrgShape(16, 16, 32, 32);
        mm.SetSingleShape(16, 16, 32);
        mm.SetTail(16, 16, 32);
        mm.SetTensorA(gh);
        mm.SetTensorB(gh, true);
        mm.SetBias(gf);
        mm.DisableBias();
        mm.IterateAll(gf);
        mm.template IterateAll<false>(gf, 1, false, true);
        mm.WaitIterateAll();
        mm.End();
        mmT.SetTensorA(gh, true);
        GlobalTensor<half> ws;
        ws.SetGlobalBuffer((__gm__ half*)user, 64);
        mmT.SetTensorB(ws);
        mmT.IterateAll(gf);
        mmT.End();
        pipe.Reset();
        pipe.Destroy();
    }

    TPipe pipe;
};

}  // namespace

extern "C" __global__ __aicore__ void api_accept(GM_ADDR gm, GM_ADDR workspace, GM_ADDR tiling) {
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
    GET_TILING_DATA_WITH_STRUCT(TCubeTiling, t, tiling);
    Probe p;
    REGIST_MATMUL_OBJ(&p.pipe, GetSysWorkSpacePtr(), p.mm, &t, p.mmT, &t);
    p.Run(gm, workspace);
}
