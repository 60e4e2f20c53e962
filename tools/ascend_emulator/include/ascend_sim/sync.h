// Intra-core events (rule E17, E18; J33 in strict mode), cross-core SyncAll (E20; J34), atomics
// mode (G28), launch geometry queries (H29), workspace helpers.
#pragma once
#include "ascend_sim/tensor.h"

namespace AscendC {

namespace simdetail {
inline const char* eventName(HardEvent e) {
    static const char* n[] = {"MTE2_MTE1", "MTE1_MTE2", "MTE1_M", "M_MTE1", "MTE2_V", "V_MTE2", "MTE3_V", "V_MTE3", "M_V",
                              "V_M", "V_V", "MTE3_MTE1", "MTE1_MTE3", "MTE1_V", "MTE2_M", "M_MTE2", "V_MTE1", "M_FIX",
                              "FIX_M", "MTE3_MTE2", "MTE2_MTE3", "S_V", "V_S", "S_MTE2", "MTE2_S", "S_MTE3", "MTE3_S",
                              "MTE2_FIX", "FIX_MTE2", "FIX_S", "M_S", "FIX_MTE3"};
    return n[static_cast<int>(e)];
}
// Map an AIV HardEvent to (source pipe, destination pipe); cube events are not tracked.
inline bool eventPipes(HardEvent e, int& src, int& dst) {
    using namespace AscendSim;
    switch (e) {
        case HardEvent::MTE2_V: src = PIPE_ID_MTE2; dst = PIPE_ID_V; return true;
        case HardEvent::V_MTE2: src = PIPE_ID_V; dst = PIPE_ID_MTE2; return true;
        case HardEvent::MTE3_V: src = PIPE_ID_MTE3; dst = PIPE_ID_V; return true;
        case HardEvent::V_MTE3: src = PIPE_ID_V; dst = PIPE_ID_MTE3; return true;
        case HardEvent::MTE2_MTE3: src = PIPE_ID_MTE2; dst = PIPE_ID_MTE3; return true;
        case HardEvent::MTE3_MTE2: src = PIPE_ID_MTE3; dst = PIPE_ID_MTE2; return true;
        case HardEvent::S_V: src = PIPE_ID_S; dst = PIPE_ID_V; return true;
        case HardEvent::V_S: src = PIPE_ID_V; dst = PIPE_ID_S; return true;
        case HardEvent::S_MTE2: src = PIPE_ID_S; dst = PIPE_ID_MTE2; return true;
        case HardEvent::MTE2_S: src = PIPE_ID_MTE2; dst = PIPE_ID_S; return true;
        case HardEvent::S_MTE3: src = PIPE_ID_S; dst = PIPE_ID_MTE3; return true;
        case HardEvent::MTE3_S: src = PIPE_ID_MTE3; dst = PIPE_ID_S; return true;
        default: return false;
    }
}
inline void checkEventId(int id, const char* api) {
    if (id < 0 || id > 7) AscendSim::violation("E17", api, AscendSim::fmt("event id %d outside [0,7]", id));
}
// Rule J33: with TPipe/TQue, event ids come from the pipe's pool (AllocEventID, or FetchEventID right
// before the Set/Wait pair); a literal id can be the one a queue's hidden EnQue/Free event holds.
inline void checkEventFromPool(HardEvent e, int id, const char* api) {
    auto& c = AscendSim::ctx();
    const int ev = static_cast<int>(e);
    if (c.eventQueueHeld[ev][id])
        AscendSim::warning("J33", api, AscendSim::fmt("HardEvent::%s id %d is held by a TQue's hidden event: the two "
                                                      "Set/Wait pairs collide", eventName(e), id));
    else if (!c.eventAllocated[ev][id] && !c.eventFetched[ev][id])
        AscendSim::warning("J33", api, AscendSim::fmt("HardEvent::%s id %d was not taken from the pipe's pool "
                                                      "(TPipe::AllocEventID / FetchEventID)", eventName(e), id));
}
}  // namespace simdetail

// API calls execute immediately in program order on the emulator, so the flags only carry
// bookkeeping: Set twice without Wait, Wait without Set (deadlock) and leftovers are errors.
template <HardEvent E>
inline void SetFlag(int32_t id) {
    simdetail::checkEventId(id, "SetFlag");
    simdetail::checkEventFromPool(E, id, "SetFlag");
    auto& c = AscendSim::ctx();
    if (c.flagSet[static_cast<int>(E)][id])
        AscendSim::violation("E17", "SetFlag", AscendSim::fmt("HardEvent::%s id %d set twice without a WaitFlag in between",
                                                              simdetail::eventName(E), id));
    c.flagSet[static_cast<int>(E)][id] = true;
    int src, dst;
    if (simdetail::eventPipes(E, src, dst)) c.hz.flags[static_cast<int>(E)][id] = AscendSim::hzSnapshot(src);
}
template <HardEvent E>
inline void WaitFlag(int32_t id) {
    simdetail::checkEventId(id, "WaitFlag");
    auto& c = AscendSim::ctx();
    if (!c.flagSet[static_cast<int>(E)][id])
        AscendSim::violation("E17", "WaitFlag", AscendSim::fmt("HardEvent::%s id %d waited but never set: deadlock on the NPU",
                                                               simdetail::eventName(E), id));
    c.flagSet[static_cast<int>(E)][id] = false;
    c.eventFetched[static_cast<int>(E)][id] = false;  // a fetched id is only good for one Set/Wait pair
    int src, dst;
    if (simdetail::eventPipes(E, src, dst)) AscendSim::hzMerge(dst, c.hz.flags[static_cast<int>(E)][id]);
}
template <pipe_t P>
inline void PipeBarrier() {
    if (P == PIPE_S) AscendSim::violation("E18", "PipeBarrier", "PipeBarrier<PIPE_S> is invalid");
    if (P == PIPE_ALL) AscendSim::hzBarrierAll();
}
inline void pipe_barrier(pipe_t p) {
    if (p == PIPE_S) AscendSim::violation("E18", "pipe_barrier", "pipe_barrier(PIPE_S) is invalid");
    if (p == PIPE_ALL) AscendSim::hzBarrierAll();
}

template <bool isAIVOnly = true>
inline void SyncAll() {
    if (!isAIVOnly && !AscendSim::ctx().mix)
        AscendSim::violation("H29", "SyncAll", "SyncAll<false> (AIC+AIV) in a vector-only launch");
    // Rule J34: the emulator runs Matmul on the calling AIV; on the NPU the AIC sits in the Matmul
    // server loop (REGIST_MATMUL_OBJ) until the AIV clients quit, so it never reaches this barrier.
    if (!isAIVOnly && AscendSim::ctx().matmulRegistered)
        AscendSim::warning("J34", "SyncAll", "SyncAll<false> in a kernel that registered a Matmul object: the AIC "
                                             "serves Matmul requests and never arrives (deadlock); use the AIV-only SyncAll()");
    AscendSim::syncAll("SyncAll");
}
// Software SyncAll (GM + UB workspace form): same barrier semantics on the emulator.
inline void SyncAll(const GlobalTensor<int32_t>& gmWorkspace, const LocalTensor<int32_t>& ubWorkspace, int32_t usedCores = 0) {
    (void)gmWorkspace; (void)ubWorkspace;
    if (usedCores != 0 && usedCores != AscendSim::ctx().blockNum * AscendSim::ctx().taskRatio)
        AscendSim::unsupported("SyncAll", "software SyncAll with usedCores != all launched cores");
    AscendSim::syncAll("SyncAll(gm,ub)");
}

inline int64_t GetBlockIdx() { return AscendSim::ctx().blockIdx; }
inline int64_t GetBlockNum() { return AscendSim::ctx().blockNum; }
inline int64_t GetSubBlockIdx() { return AscendSim::ctx().subBlockIdx; }
inline int64_t GetTaskRatio() { return AscendSim::ctx().taskRatio; }

// ---- atomics (§1.6): only UB->GM DMAs and Matmul enAtomic outputs are affected ----
namespace simdetail {
template <typename T>
inline void setAtomic(int mode, const char* api) {
    if (!AscendSim::isOneOf<T, int8_t, int16_t, half, bfloat16_t, int32_t, float>())
        AscendSim::violation("G28", api, AscendSim::fmt("atomic type %s not supported on A2 (int8, int16, half, bf16, int32, float)",
                                                        AscendSim::typeName<T>()));
    auto& c = AscendSim::ctx();
    c.atomicMode = mode;
    c.atomicType = AscendSim::typeName<T>();
}
}  // namespace simdetail
template <typename T> inline void SetAtomicAdd() { simdetail::setAtomic<T>(1, "SetAtomicAdd"); }
template <typename T> inline void SetAtomicMax() { simdetail::setAtomic<T>(2, "SetAtomicMax"); }
template <typename T> inline void SetAtomicMin() { simdetail::setAtomic<T>(3, "SetAtomicMin"); }
inline void SetAtomicNone() { AscendSim::ctx().atomicMode = 0; AscendSim::ctx().atomicType = nullptr; }
inline void DisableDmaAtomic() { SetAtomicNone(); }

// Scalar GM writes go through a per-core DCache on the NPU; the emulator writes through.
// Template parameters as in the real API (enum classes, not integers).
enum class CacheLine : uint64_t { SINGLE_CACHE_LINE = 0, ENTIRE_DATA_CACHE };
enum class DcciDst : uint64_t { CACHELINE_ALL = 0, CACHELINE_UB, CACHELINE_OUT, CACHELINE_ATOMIC };
template <typename T, CacheLine entireType, DcciDst dcciDst>
inline void DataCacheCleanAndInvalid(const GlobalTensor<T>&) {}

// ---- workspace (§2.8) ----
inline GM_ADDR GetSysWorkSpacePtr() { return static_cast<GM_ADDR>(AscendSim::ctx().sysWorkspace); }
inline void SetSysWorkspace(GM_ADDR ws) { AscendSim::ctx().sysWorkspace = ws; }
inline GM_ADDR GetUserWorkspace(GM_ADDR ws) {
    if (ws == nullptr) return nullptr;
    AscendSim::ctx().sysWorkspace = ws;
    return ws + RESERVED_WORKSPACE;
}

}  // namespace AscendC
