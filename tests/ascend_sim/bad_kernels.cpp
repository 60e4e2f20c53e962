// Deliberately wrong kernels: each case breaks exactly one A2 rule and the emulator must
// abort naming that rule (test_rules.py). Usage: bad_kernels <case>
#include "sim_test.h"
#include "lib/matmul_intf.h"
#include <string>
#include <map>
#include <functional>
#include <cstdlib>
using namespace AscendC;

#define KERNEL(name) extern "C" __global__ __aicore__ void name(GM_ADDR x, GM_ADDR y)
#define UNUSED (void)x; (void)y

// ---------------- A: capacity / allocation ----------------
KERNEL(a1_ub_overflow) { UNUSED; TPipe p; TQue<TPosition::VECIN, 1> q; p.InitBuffer(q, 2, 100 * 1024); }
KERNEL(a1_zero_len) { UNUSED; TPipe p; TBuf<> b; p.InitBuffer(b, 0); }
KERNEL(a2_select_scratch) {
    UNUSED; TPipe p; TBuf<> b, m;
    p.InitBuffer(b, 186 * 1024); p.InitBuffer(m, 1024);
    LocalTensor<float> t = b.Get<float>();
    LocalTensor<uint8_t> mk = m.Get<uint8_t>();
    Duplicate(t, 1.0f, 128);
    Duplicate(mk.ReinterpretCast<int16_t>(), (int16_t)0, 16);
    Select(t, mk, t[64], t[128], SELMODE::VSEL_TENSOR_TENSOR_MODE, 64);
}
KERNEL(a3_too_many_handles) { UNUSED; TPipe p; static thread_local TBuf<> b[65]; for (auto& x1 : b) p.InitBuffer(x1, 32); }
KERNEL(a3_num_zero) { UNUSED; TPipe p; TQue<TPosition::VECIN, 1> q; p.InitBuffer(q, 0, 64); }
KERNEL(a4_nine_tensors) {
    UNUSED; TPipe p; TQue<TPosition::VECIN, 16> q; p.InitBuffer(q, 10, 64);
    for (int i = 0; i < 9; ++i) q.AllocTensor<float>();
}
KERNEL(a5_two_pipes) { UNUSED; TPipe p1; TPipe p2; }
using MF = MatmulType<TPosition::GM, CubeFormat::ND, float>;
KERNEL(a5_matmul_after_initbuffer) {
    UNUSED; TPipe p; TBuf<> b; p.InitBuffer(b, 64);
    Matmul<MF, MF, MF> mm; TCubeTiling t;
    REGIST_MATMUL_OBJ(&p, GetSysWorkSpacePtr(), mm, &t);
}
KERNEL(a6_tbuf_get_too_big) { UNUSED; TPipe p; TBuf<> b; p.InitBuffer(b, 64); b.Get<float>(32); }
KERNEL(a6_getwithoffset_unaligned) { UNUSED; TPipe p; TBuf<> b; p.InitBuffer(b, 256); b.GetWithOffset<float>(4, 16); }

// ---------------- B: bounds ----------------
KERNEL(b8_datacopy_ub_overflow) {
    UNUSED; TPipe p; TBuf<> b; p.InitBuffer(b, 64);
    GlobalTensor<float> g; g.SetGlobalBuffer((__gm__ float*)x, 64);
    DataCopy(b.Get<float>(), g, 32);
}
KERNEL(b8_vector_overflow) {
    UNUSED; TPipe p; TBuf<> b; p.InitBuffer(b, 1024);
    LocalTensor<float> t = b.Get<float>(64);
    Adds(t, t, 1.0f, 128);
}
KERNEL(b8_gathermask_normal_tail) {
    UNUSED; TPipe p; TBuf<> b; p.InitBuffer(b, 4096);
    LocalTensor<int32_t> t = b.Get<int32_t>();
    uint64_t cnt;
    GatherMask(t[512], t[0].operator[](0).ReinterpretCast<int32_t>()[960], (uint8_t)1, false, 0, GatherMaskParams(1, 2, 8, 0), cnt);
}
KERNEL(b9_gm_write_oob) {
    UNUSED; TPipe p; TBuf<> b; p.InitBuffer(b, 128);
    GlobalTensor<float> g; g.SetGlobalBuffer((__gm__ float*)y);   // y holds 16 floats
    DataCopy(g, b.Get<float>(), 32);
}
KERNEL(b9_gm_read_far) {
    UNUSED; TPipe p; TBuf<> b; p.InitBuffer(b, 512);
    GlobalTensor<float> g; g.SetGlobalBuffer((__gm__ float*)y);
    DataCopyPad(b.Get<float>(), g, DataCopyExtParams(1, 32 * 4, 0, 0, 0), DataCopyPadExtParams<float>());
}
static float g_hostArray[64];
KERNEL(b9_not_gmalloc) {
    UNUSED; TPipe p; TBuf<> b; p.InitBuffer(b, 128);
    GlobalTensor<float> g; g.SetGlobalBuffer(g_hostArray);
    DataCopy(b.Get<float>(), g, 8);
}
KERNEL(b10_local_getvalue) { UNUSED; TPipe p; TBuf<> b; p.InitBuffer(b, 32); b.Get<float>().GetValue(8); }
KERNEL(b10_global_setvalue) {
    UNUSED; GlobalTensor<int32_t> g; g.SetGlobalBuffer((__gm__ int32_t*)x, 4); g.SetValue(4, 1);
}

// ---------------- C: alignment / DMA parameters ----------------
KERNEL(c11_unaligned_ub_dma) {
    UNUSED; TPipe p; TBuf<> b; p.InitBuffer(b, 256);
    GlobalTensor<float> g; g.SetGlobalBuffer((__gm__ float*)x, 64);
    DataCopy(b.Get<float>()[3], g, 8);
}
KERNEL(c11_unaligned_vector) {
    UNUSED; TPipe p; TBuf<> b; p.InitBuffer(b, 512);
    LocalTensor<float> t = b.Get<float>();
    Adds(t[1], t[16], 1.0f, 8);
}
KERNEL(c12_datacopy_len) {
    UNUSED; TPipe p; TBuf<> b; p.InitBuffer(b, 256);
    GlobalTensor<float> g; g.SetGlobalBuffer((__gm__ float*)x, 64);
    DataCopy(b.Get<float>(), g, 5);
}
KERNEL(c12_gm_misaligned) {
    UNUSED; TPipe p; TBuf<> b; p.InitBuffer(b, 256);
    GlobalTensor<float> g; g.SetGlobalBuffer((__gm__ float*)(x + 2), 8);
    DataCopy(b.Get<float>(), g, 8);
}
KERNEL(c13_blockcount) {
    UNUSED; TPipe p; TBuf<> b; p.InitBuffer(b, 256);
    GlobalTensor<float> g; g.SetGlobalBuffer((__gm__ float*)x, 64);
    DataCopy(b.Get<float>(), g, DataCopyParams(5000, 1, 0, 0));
}
KERNEL(c13_pad_too_wide) {
    UNUSED; TPipe p; TBuf<> b; p.InitBuffer(b, 256);
    GlobalTensor<float> g; g.SetGlobalBuffer((__gm__ float*)x, 64);
    DataCopyPad(b.Get<float>(), g, DataCopyExtParams(1, 16, 0, 0, 0), DataCopyPadExtParams<float>(true, 9, 0, 0.0f));
}
KERNEL(c13_blocklen_not_multiple) {
    UNUSED; TPipe p; TBuf<> b; p.InitBuffer(b, 256);
    GlobalTensor<float> g; g.SetGlobalBuffer((__gm__ float*)x, 64);
    DataCopyPad(b.Get<float>(), g, DataCopyExtParams(1, 6, 0, 0, 0), DataCopyPadExtParams<float>());
}
// 4 rows of 8 floats; the author wants 1 row of gap in UB and passes the gap in BYTES (32)
// where DataCopyPad's UB-side dstStride is in 32-byte blocks -> 32 blocks of gap.
KERNEL(c14_stride_units) {
    UNUSED; TPipe p; TBuf<> b; p.InitBuffer(b, 8 * 32);
    GlobalTensor<float> g; g.SetGlobalBuffer((__gm__ float*)x, 64);
    DataCopyPad(b.Get<float>(), g, DataCopyExtParams(4, 32, 0, 32, 0), DataCopyPadExtParams<float>());
}

// ---------------- D: queue discipline ----------------
KERNEL(d15_alloc_exhausted) {
    UNUSED; TPipe p; TQue<TPosition::VECIN, 1> q; p.InitBuffer(q, 1, 64);
    q.AllocTensor<float>(); q.AllocTensor<float>();
}
KERNEL(d15_deque_empty) { UNUSED; TPipe p; TQue<TPosition::VECIN, 1> q; p.InitBuffer(q, 1, 64); q.DeQue<float>(); }
KERNEL(d15_double_free) {
    UNUSED; TPipe p; TQue<TPosition::VECOUT, 1> q; p.InitBuffer(q, 1, 64);
    LocalTensor<float> t = q.AllocTensor<float>(); q.FreeTensor(t); q.FreeTensor(t);
}
KERNEL(d15_enque_over_depth) {
    UNUSED; TPipe p; TQue<TPosition::VECIN, 1> q; p.InitBuffer(q, 2, 64);
    LocalTensor<float> a = q.AllocTensor<float>(), b = q.AllocTensor<float>();
    q.EnQue(a); q.EnQue(b);
}
KERNEL(d15_free_other_queue) {
    UNUSED; TPipe p; TQue<TPosition::VECIN, 1> q1; TQue<TPosition::VECOUT, 1> q2;
    p.InitBuffer(q1, 1, 64); p.InitBuffer(q2, 1, 64);
    LocalTensor<float> a = q1.AllocTensor<float>(); q2.FreeTensor(a);
}
KERNEL(d15_free_enqueued) {
    UNUSED; TPipe p; TQue<TPosition::VECIN, 1> q; p.InitBuffer(q, 1, 64);
    LocalTensor<float> a = q.AllocTensor<float>(); q.EnQue(a); q.FreeTensor(a);
}

// ---------------- E: synchronization ----------------
KERNEL(e17_wait_without_set) { UNUSED; WaitFlag<HardEvent::MTE2_V>(0); }
KERNEL(e17_double_set) { UNUSED; SetFlag<HardEvent::V_MTE3>(1); SetFlag<HardEvent::V_MTE3>(1); }
KERNEL(e17_leftover_set) { UNUSED; SetFlag<HardEvent::MTE3_MTE2>(2); }
KERNEL(e17_bad_id) { UNUSED; SetFlag<HardEvent::MTE2_V>(8); }
KERNEL(e18_pipe_barrier_s) { UNUSED; PipeBarrier<PIPE_S>(); }
// every core writes the same 8 floats without atomics
KERNEL(e20_overlapping_writes) {
    UNUSED; TPipe p; TBuf<> b; p.InitBuffer(b, 32);
    Duplicate(b.Get<float>(), 1.0f, 8);
    PipeBarrier<PIPE_ALL>();
    GlobalTensor<float> g; g.SetGlobalBuffer((__gm__ float*)y, 16);
    DataCopy(g, b.Get<float>(), 8);
}
// core 0 writes a slot that core 1 reads in the same epoch (no SyncAll)
KERNEL(e20_read_other_core_write) {
    UNUSED; TPipe p; TBuf<> b; p.InitBuffer(b, 32);
    GlobalTensor<float> g; g.SetGlobalBuffer((__gm__ float*)y, 16);
    if (GetBlockIdx() == 0) { Duplicate(b.Get<float>(), 1.0f, 8); PipeBarrier<PIPE_ALL>(); DataCopy(g, b.Get<float>(), 8); }
    else DataCopy(b.Get<float>(), g, 8);
}
KERNEL(e20_syncall_missing_core) {
    UNUSED;
    if (GetBlockIdx() == 1) return;
    SyncAll();
}
KERNEL(e20_syncall_multiwave) { UNUSED; SyncAll(); }
KERNEL(e20_atomic_vs_plain) {
    UNUSED; TPipe p; TBuf<> b; p.InitBuffer(b, 32);
    Duplicate(b.Get<float>(), 1.0f, 8);
    PipeBarrier<PIPE_ALL>();
    GlobalTensor<float> g; g.SetGlobalBuffer((__gm__ float*)y, 16);
    if (GetBlockIdx() == 0) SetAtomicAdd<float>();
    DataCopy(g, b.Get<float>(), 8);
    SetAtomicNone();
}
template <int kind>
__aicore__ void asyncMatmulMisuse(GM_ADDR x, GM_ADDR y) {
    if (GetBlockIdx() != 0) return;
    TPipe p;
    Matmul<MF, MF, MF> mm;
    TCubeTiling t; t.M = 4; t.N = 4; t.Ka = t.Kb = 4; t.singleCoreM = t.singleCoreN = t.singleCoreK = 4;
    REGIST_MATMUL_OBJ(&p, GetSysWorkSpacePtr(), mm, &t);
    TBuf<> b; p.InitBuffer(b, 64);
    GlobalTensor<float> ga, gc;
    ga.SetGlobalBuffer((__gm__ float*)x, 16);
    gc.SetGlobalBuffer((__gm__ float*)y, 16);
    mm.SetTensorA(ga); mm.SetTensorB(ga);
    mm.IterateAll<false>(gc, 0, false, true);
    if (kind == 0) DataCopy(b.Get<float>(), gc, 8);          // reads C before WaitIterateAll
    if (kind == 1) DataCopy(ga, b.Get<float>(), 8);          // overwrites A before WaitIterateAll
    if (kind != 2) mm.WaitIterateAll();
}
KERNEL(e21_read_before_wait) { asyncMatmulMisuse<0>(x, y); }
KERNEL(e21_write_a_before_wait) { asyncMatmulMisuse<1>(x, y); }
KERNEL(e21_never_waited) { asyncMatmulMisuse<2>(x, y); }

// missing MTE2 -> V edge on TBuf memory
KERNEL(e19_missing_mte2_v) {
    UNUSED; TPipe p; TBuf<> b; p.InitBuffer(b, 256);
    GlobalTensor<float> g; g.SetGlobalBuffer((__gm__ float*)x, 64);
    DataCopy(b.Get<float>(), g, 64);
    Adds(b.Get<float>(), b.Get<float>(), 1.0f, 64);
}
// write-after-read: MTE2 refills a buffer the vector unit is still reading
KERNEL(e19_war_v_mte2) {
    UNUSED; TPipe p; TBuf<> b, c; p.InitBuffer(b, 256); p.InitBuffer(c, 256);
    GlobalTensor<float> g; g.SetGlobalBuffer((__gm__ float*)x, 64);
    DataCopy(b.Get<float>(), g, 64);
    SetFlag<HardEvent::MTE2_V>(0); WaitFlag<HardEvent::MTE2_V>(0);
    Adds(c.Get<float>(), b.Get<float>(), 1.0f, 64);
    DataCopy(b.Get<float>(), g, 64);
}
// a VECIN queue only orders MTE2 -> V; copying it straight out with MTE3 is unsynchronized
KERNEL(e19_vecin_read_by_mte3) {
    UNUSED; TPipe p; TQue<TPosition::VECIN, 1> q; p.InitBuffer(q, 1, 256);
    GlobalTensor<float> g, o; g.SetGlobalBuffer((__gm__ float*)x, 64); o.SetGlobalBuffer((__gm__ float*)y, 16);
    LocalTensor<float> t = q.AllocTensor<float>();
    DataCopy(t, g, 16);
    q.EnQue(t);
    t = q.DeQue<float>();
    DataCopy(o, t, 16);
    q.FreeTensor(t);
}
// VECOUT buffer reused: the vector unit overwrites it while MTE3 may still read (no Free/Alloc)
KERNEL(e19_vecout_reuse_without_free) {
    UNUSED; TPipe p; TQue<TPosition::VECOUT, 1> q; p.InitBuffer(q, 1, 256);
    GlobalTensor<float> o; o.SetGlobalBuffer((__gm__ float*)y, 16);
    LocalTensor<float> t = q.AllocTensor<float>();
    Duplicate(t, 1.0f, 16);
    q.EnQue(t);
    t = q.DeQue<float>();
    DataCopy(o, t, 16);
    Duplicate(t, 2.0f, 16);
}

// ---------------- F: vector API parameters (beyond the required list) ----------------
KERNEL(f23_mask_too_big) {
    UNUSED; TPipe p; TBuf<> b; p.InitBuffer(b, 1024);
    LocalTensor<float> t = b.Get<float>();
    Adds(t, t, 1.0f, 65, 1, UnaryRepeatParams());
}
KERNEL(f24_int32_compare_lt) {
    UNUSED; TPipe p; TBuf<> b, m; p.InitBuffer(b, 256); p.InitBuffer(m, 64);
    Compares(m.Get<uint8_t>(), b.Get<int32_t>(), 0, CMPMODE::LT, 64);
}
KERNEL(f24_cast_float_int32_none) {
    UNUSED; TPipe p; TBuf<> b, c; p.InitBuffer(b, 256); p.InitBuffer(c, 256);
    Cast(c.Get<int32_t>(), b.Get<float>(), RoundMode::CAST_NONE, 64);
}
KERNEL(f24_add_int64) {
    UNUSED; TPipe p; TBuf<> b; p.InitBuffer(b, 256);
    LocalTensor<int64_t> t = b.Get<int64_t>();
    Add(t, t, t, 8);
}
KERNEL(f25_compare_count) {
    UNUSED; TPipe p; TBuf<> b, m; p.InitBuffer(b, 512); p.InitBuffer(m, 64);
    Compares(m.Get<uint8_t>(), b.Get<float>(), 0.0f, CMPMODE::GT, 70);
}
KERNEL(f26_gather_alias) {
    UNUSED; TPipe p; TBuf<> b, o; p.InitBuffer(b, 256); p.InitBuffer(o, 64);
    LocalTensor<uint32_t> off = o.Get<uint32_t>();
    Duplicate(off, 0u, 8);
    Gather(b.Get<float>(), b.Get<float>(), off, 0, 8);
}
KERNEL(f27_gather_offset_unaligned) {
    UNUSED; TPipe p; TBuf<> b, d, o; p.InitBuffer(b, 256); p.InitBuffer(d, 64); p.InitBuffer(o, 64);
    LocalTensor<uint32_t> off = o.Get<uint32_t>();
    Duplicate(off, 2u, 8);
    Gather(d.Get<float>(), b.Get<float>(), off, 0, 8);
}

// ---------------- G: atomics ----------------
KERNEL(g28_atomic_type) { UNUSED; SetAtomicAdd<int64_t>(); }
KERNEL(g28_atomic_type_mismatch) {
    UNUSED; TPipe p; TBuf<> b; p.InitBuffer(b, 32);
    Duplicate(b.Get<int32_t>(), 1, 8);
    PipeBarrier<PIPE_ALL>();
    GlobalTensor<int32_t> g; g.SetGlobalBuffer((__gm__ int32_t*)y, 16);
    SetAtomicAdd<float>();
    DataCopy(g, b.Get<int32_t>(), 8);
}

// ---------------- H: launch geometry ----------------
KERNEL(h29_kernel) { UNUSED; }
KERNEL(h29_matmul_in_aiv_mode) {
    UNUSED; TPipe p; Matmul<MF, MF, MF> mm; TCubeTiling t;
    REGIST_MATMUL_OBJ(&p, GetSysWorkSpacePtr(), mm, &t);
}
KERNEL(h29_declared_mix_in_aiv) { UNUSED; KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2); }

// ---------------- more variants ----------------
KERNEL(d15_depth0_returning_alloc) { UNUSED; TPipe p; TQue<TPosition::VECIN, 0> q; p.InitBuffer(q, 1, 64); q.AllocTensor<float>(); }
KERNEL(d15_queue_after_destroy) {
    UNUSED; TPipe p; TQue<TPosition::VECIN, 1> q; p.InitBuffer(q, 1, 64);
    p.Destroy();
    TPipe p2;
    q.AllocTensor<float>();
}
KERNEL(c13_pad64_value) {
    UNUSED; TPipe p; TBuf<> b; p.InitBuffer(b, 64);
    GlobalTensor<int64_t> g; g.SetGlobalBuffer((__gm__ int64_t*)x, 8);
    DataCopyPad(b.Get<int64_t>(), g, DataCopyExtParams(1, 16, 0, 0, 0), DataCopyPadExtParams<int64_t>(true, 1, 0, 5));
}
KERNEL(f23_dst_blk_stride_zero) {
    UNUSED; TPipe p; TBuf<> b; p.InitBuffer(b, 1024);
    LocalTensor<float> t = b.Get<float>();
    Adds(t, t, 1.0f, 64, 1, UnaryRepeatParams(0, 1, 8, 8));
}
KERNEL(f26_cast_widening_inplace) {
    UNUSED; TPipe p; TBuf<> b; p.InitBuffer(b, 512);
    Cast(b.Get<float>(), b.Get<half>(), RoundMode::CAST_NONE, 64);
}
KERNEL(e21_second_async_without_wait) {
    UNUSED;
    if (GetBlockIdx() != 0) return;
    TPipe p; Matmul<MF, MF, MF> mm;
    TCubeTiling t; t.M = t.N = t.Ka = t.Kb = 4; t.singleCoreM = t.singleCoreN = t.singleCoreK = 4;
    REGIST_MATMUL_OBJ(&p, GetSysWorkSpacePtr(), mm, &t);
    GlobalTensor<float> ga, gc;
    ga.SetGlobalBuffer((__gm__ float*)x, 16);
    gc.SetGlobalBuffer((__gm__ float*)y, 16);
    mm.SetTensorA(ga); mm.SetTensorB(ga);
    mm.IterateAll<false>(gc, 0, false, true);
    mm.IterateAll<false>(gc, 0, false, true);
}
KERNEL(i32_single_shape_zero) {
    UNUSED; TPipe p; Matmul<MF, MF, MF> mm; TCubeTiling t;
    REGIST_MATMUL_OBJ(&p, GetSysWorkSpacePtr(), mm, &t);
    mm.SetSingleShape(0, 4, 4);
}

// ---------------- warnings ----------------
KERNEL(w_atomic_left_on) { UNUSED; SetAtomicAdd<float>(); }
// DataCopy of 8 floats from the last 20 bytes of a 64-byte allocation: a 12-byte over-read caused
// by 32-byte rounding -> warning (error with ASCEND_SIM_STRICT=1).
KERNEL(w_overread_small) {
    UNUSED; TPipe p; TBuf<> b; p.InitBuffer(b, 32);
    GlobalTensor<float> g; g.SetGlobalBuffer((__gm__ float*)y + 11);
    DataCopy(b.Get<float>(), g, 8);
}

// ---------------- J: the real runtime's rules (strict mode: ASCEND_SIM_STRICT=1) ----------------
// J33: a literal event id next to a TPipe, not taken from its pool
KERNEL(j33_literal_event_id) {
    UNUSED; TPipe p; TBuf<> b; p.InitBuffer(b, 256);
    GlobalTensor<float> g; g.SetGlobalBuffer((__gm__ float*)x, 64);
    DataCopy(b.Get<float>(), g, 64);
    SetFlag<HardEvent::MTE2_V>(EVENT_ID3); WaitFlag<HardEvent::MTE2_V>(EVENT_ID3);
}
// J33: the literal id is the one the VECIN queue's hidden EnQue event holds
KERNEL(j33_event_collides_with_queue) {
    UNUSED; TPipe p; TQue<TPosition::VECIN, 1> q; TBuf<> b; p.InitBuffer(q, 1, 256); p.InitBuffer(b, 256);
    GlobalTensor<float> g; g.SetGlobalBuffer((__gm__ float*)x, 64);
    LocalTensor<float> t = q.AllocTensor<float>();
    DataCopy(t, g, 64);
    q.EnQue(t);
    DataCopy(b.Get<float>(), g, 64);
    SetFlag<HardEvent::MTE2_V>(0); WaitFlag<HardEvent::MTE2_V>(0);
    t = q.DeQue<float>();
    q.FreeTensor(t);
}
// the same edges with ids from the pool: passes strict mode
KERNEL(ok_pool_event_ids) {
    UNUSED; TPipe p; TQue<TPosition::VECIN, 1> q; TBuf<> b; p.InitBuffer(q, 1, 256); p.InitBuffer(b, 256);
    GlobalTensor<float> g; g.SetGlobalBuffer((__gm__ float*)x, 64);
    LocalTensor<float> t = q.AllocTensor<float>();
    DataCopy(t, g, 64);
    q.EnQue(t);
    DataCopy(b.Get<float>(), g, 64);
    const TEventID f = p.FetchEventID(HardEvent::MTE2_V);
    SetFlag<HardEvent::MTE2_V>(f); WaitFlag<HardEvent::MTE2_V>(f);
    const TEventID a = p.AllocEventID<HardEvent::V_MTE2>();
    Adds(b.Get<float>(), b.Get<float>(), 1.0f, 64);
    SetFlag<HardEvent::V_MTE2>(a); WaitFlag<HardEvent::V_MTE2>(a);
    p.ReleaseEventID<HardEvent::V_MTE2>(a);
    t = q.DeQue<float>();
    q.FreeTensor(t);
}
// J34: the all-core barrier in a kernel whose AIC serves Matmul requests
template <bool AivOnly>
inline void syncAfterMatmul(GM_ADDR x) {
    TPipe p; Matmul<MF, MF, MF> mm;
    TCubeTiling t; t.M = t.N = t.Ka = t.Kb = 4; t.singleCoreM = t.singleCoreN = t.singleCoreK = 4;
    REGIST_MATMUL_OBJ(&p, GetSysWorkSpacePtr(), mm, &t);
    (void)x;
    mm.End();
    SyncAll<AivOnly>();
}
KERNEL(j34_syncall_false_after_matmul) { UNUSED; syncAfterMatmul<false>(x); }
KERNEL(ok_syncall_aiv_after_matmul) { UNUSED; syncAfterMatmul<true>(x); }
// J35: API forms newer than the targeted CANN (default 8.0)
KERNEL(j35_compares_before_9_0) {
    UNUSED; TPipe p; TBuf<> b, m; p.InitBuffer(b, 256); p.InitBuffer(m, 32);
    Duplicate(b.Get<float>(), 1.0f, 64);
    Compares(m.Get<uint8_t>(), b.Get<float>(), 1.0f, CMPMODE::EQ, 64);
}
KERNEL(j35_int32_comparescalar_before_8_2) {
    UNUSED; TPipe p; TBuf<> b, m; p.InitBuffer(b, 256); p.InitBuffer(m, 32);
    Duplicate(b.Get<int32_t>(), 1, 64);
    CompareScalar(m.Get<uint8_t>(), b.Get<int32_t>(), 1, CMPMODE::EQ, 64);
}
// the portable form: int32 0/1 flags compared as float (what unique_sorted_keys does)
KERNEL(ok_float_comparescalar) {
    UNUSED; TPipe p; TBuf<> b, f, m; p.InitBuffer(b, 256); p.InitBuffer(f, 256); p.InitBuffer(m, 32);
    Duplicate(b.Get<int32_t>(), 1, 64);
    Cast(f.Get<float>(), b.Get<int32_t>(), RoundMode::CAST_NONE, 64);
    CompareScalar(m.Get<uint8_t>(), f.Get<float>(), 1.0f, CMPMODE::EQ, 64);
}
// J36: a plain tiling struct read without registering it
struct JTiling { int32_t n; int32_t pad[7]; };
KERNEL(j36_tiling_not_registered) { (void)y; GET_TILING_DATA_WITH_STRUCT(JTiling, t, x); (void)t; }
KERNEL(ok_tiling_registered) {
    (void)y; REGISTER_TILING_DEFAULT(JTiling); GET_TILING_DATA_WITH_STRUCT(JTiling, t, x); (void)t;
}

// ---------------- I: matmul parameters ----------------
KERNEL(i32_transpose_without_istrans) {
    UNUSED; TPipe p; Matmul<MF, MF, MF> mm;
    TCubeTiling t; t.M = t.N = t.Ka = t.Kb = 4; t.singleCoreM = t.singleCoreN = t.singleCoreK = 4;
    REGIST_MATMUL_OBJ(&p, GetSysWorkSpacePtr(), mm, &t);
    GlobalTensor<float> ga; ga.SetGlobalBuffer((__gm__ float*)x, 16);
    mm.SetTensorA(ga, true);
}

int main(int argc, char** argv) {
    if (argc < 2) { std::fprintf(stderr, "usage: bad_kernels CASE\n"); return 2; }
    std::string c = argv[1];
    uint8_t* x = (uint8_t*)AscendC::GmAlloc(64 * sizeof(float));
    uint8_t* y = (uint8_t*)AscendC::GmAlloc(16 * sizeof(float));
    std::memset(x, 0, 256);
    std::memset(y, 0, 64);
    struct Case { std::function<void()> run; };
    const int aiv = (int)AscendSim::GetCoreNumAiv(), aic = (int)AscendSim::GetCoreNumAic();
    auto mix = [] { AscendC::SetKernelMode(KernelMode::MIX_MODE); };
#define SIMPLE(name) {#name, [&] { ICPU_RUN_KF(name, 1, x, y); }}
#define MULTI(name, n) {#name, [&] { ICPU_RUN_KF(name, n, x, y); }}
#define MIX(name, n) {#name, [&] { mix(); ICPU_RUN_KF(name, n, x, y); }}
    std::map<std::string, std::function<void()>> cases = {
        SIMPLE(a1_ub_overflow), SIMPLE(a1_zero_len), SIMPLE(a2_select_scratch), SIMPLE(a3_too_many_handles),
        SIMPLE(a3_num_zero), SIMPLE(a4_nine_tensors), SIMPLE(a5_two_pipes), MIX(a5_matmul_after_initbuffer, 1),
        SIMPLE(a6_tbuf_get_too_big), SIMPLE(a6_getwithoffset_unaligned),
        SIMPLE(b8_datacopy_ub_overflow), SIMPLE(b8_vector_overflow), SIMPLE(b8_gathermask_normal_tail),
        SIMPLE(b9_gm_write_oob), SIMPLE(b9_gm_read_far), SIMPLE(b9_not_gmalloc), SIMPLE(b10_local_getvalue),
        SIMPLE(b10_global_setvalue),
        SIMPLE(c11_unaligned_ub_dma), SIMPLE(c11_unaligned_vector), SIMPLE(c12_datacopy_len), SIMPLE(c12_gm_misaligned),
        SIMPLE(c13_blockcount), SIMPLE(c13_pad_too_wide), SIMPLE(c13_blocklen_not_multiple), SIMPLE(c14_stride_units),
        SIMPLE(d15_alloc_exhausted), SIMPLE(d15_deque_empty), SIMPLE(d15_double_free), SIMPLE(d15_enque_over_depth),
        SIMPLE(d15_free_other_queue), SIMPLE(d15_free_enqueued),
        SIMPLE(e17_wait_without_set), SIMPLE(e17_double_set), SIMPLE(e17_leftover_set), SIMPLE(e17_bad_id),
        SIMPLE(e18_pipe_barrier_s), SIMPLE(e19_missing_mte2_v), SIMPLE(e19_war_v_mte2), SIMPLE(e19_vecin_read_by_mte3),
        SIMPLE(e19_vecout_reuse_without_free), MULTI(e20_overlapping_writes, 4), MULTI(e20_read_other_core_write, 2),
        MULTI(e20_syncall_missing_core, 4), MULTI(e20_syncall_multiwave, aiv + 1), MULTI(e20_atomic_vs_plain, 2),
        MIX(e21_read_before_wait, 1), MIX(e21_write_a_before_wait, 1), MIX(e21_never_waited, 1),
        SIMPLE(f23_mask_too_big), SIMPLE(f24_int32_compare_lt), SIMPLE(f24_cast_float_int32_none), SIMPLE(f24_add_int64),
        SIMPLE(f25_compare_count), SIMPLE(f26_gather_alias), SIMPLE(f27_gather_offset_unaligned),
        SIMPLE(g28_atomic_type), SIMPLE(g28_atomic_type_mismatch),
        {"h29_blockdim_zero", [&] { ICPU_RUN_KF(h29_kernel, 0, x, y); }},
        {"h29_blockdim_too_large", [&] { ICPU_RUN_KF(h29_kernel, 65536, x, y); }},
        {"h29_mix_too_many_blocks", [&] { mix(); ICPU_RUN_KF(h29_kernel, aic + 1, x, y); }},
        SIMPLE(h29_matmul_in_aiv_mode), SIMPLE(h29_declared_mix_in_aiv),
        MIX(i32_transpose_without_istrans, 1), SIMPLE(w_overread_small),
        SIMPLE(d15_depth0_returning_alloc), SIMPLE(d15_queue_after_destroy), SIMPLE(c13_pad64_value),
        SIMPLE(f23_dst_blk_stride_zero), SIMPLE(f26_cast_widening_inplace), MIX(e21_second_async_without_wait, 1),
        MIX(i32_single_shape_zero, 1), SIMPLE(w_atomic_left_on),
        SIMPLE(j33_literal_event_id), SIMPLE(j33_event_collides_with_queue), SIMPLE(ok_pool_event_ids),
        MIX(j34_syncall_false_after_matmul, 1), MIX(ok_syncall_aiv_after_matmul, 1),
        SIMPLE(j35_compares_before_9_0), SIMPLE(j35_int32_comparescalar_before_8_2), SIMPLE(ok_float_comparescalar),
        SIMPLE(j36_tiling_not_registered), SIMPLE(ok_tiling_registered),
    };
    if (c == "--list") {
        for (auto& kv : cases) std::printf("%s\n", kv.first.c_str());
        return 0;
    }
    auto it = cases.find(c);
    if (it == cases.end()) { std::fprintf(stderr, "unknown case %s\n", c.c_str()); return 2; }
    it->second();
    std::printf("NO VIOLATION DETECTED\n");
    return 0;
}
