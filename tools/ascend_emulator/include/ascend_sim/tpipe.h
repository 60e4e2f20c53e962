// TPipe / TQue / TBuf: UB allocation and queue discipline (rules A1, A3-A7, D15, D16).
// Blocks are carved consecutively from UB offset 0 (§2.3). Each block carries a state
// (FREE / OCCUPIED / ENQUE / DEQUE) so queue misuse that would hang or corrupt on the
// NPU aborts here.
#pragma once
#include <vector>
#include <deque>
#include "ascend_sim/tensor.h"

namespace AscendC {

class TPipe;

namespace simdetail {
enum BlockState : uint8_t { FREE = 0, OCCUPIED, ENQUE, DEQUE };
inline const char* stateName(int s) {
    static const char* n[] = {"FREE", "OCCUPIED", "ENQUE", "DEQUE"};
    return n[s];
}
struct Block {
    uint32_t addr = 0, len = 0;
    TPosition pos = TPosition::VECCALC;
    uint8_t state = FREE;
    const void* owner = nullptr;
};
const char* posName(TPosition p);
bool isUbPosition(TPosition p);
}  // namespace simdetail

class TPipe {
public:
    TPipe();
    ~TPipe();
    TPipe(const TPipe&) = delete;
    TPipe& operator=(const TPipe&) = delete;

    template <class Q>
    bool InitBuffer(Q& que, uint8_t num, uint32_t len) {
        que.simAttach(this, simAllocBlocks(que.simPosition(), num, len, &que, "TPipe::InitBuffer(TQue)"), num);
        return true;
    }
    template <class B>
    bool InitBuffer(B& buf, uint32_t len) {
        buf.simAttach(this, simAllocBlocks(buf.simPosition(), 1, len, &buf, "TPipe::InitBuffer(TBuf)"));
        return true;
    }
    void Reset();
    void Destroy();
    void Init() {}

    template <HardEvent e> TEventID AllocEventID() { return simAllocEvent(static_cast<int>(e)); }
    template <HardEvent e> void ReleaseEventID(TEventID id) { simReleaseEvent(static_cast<int>(e), id); }
    template <HardEvent e> TEventID FetchEventID() { return simFetchEvent(static_cast<int>(e)); }
    TEventID FetchEventID(HardEvent e) { return simFetchEvent(static_cast<int>(e)); }

    // ---- emulator internals ----
    std::vector<simdetail::Block> simBlocks;
    uint32_t simUsed = 0;         // UB bytes handed out by InitBuffer
    uint32_t simGeneration = 0;   // bumped by Reset/Destroy: stale queues are detected
    int simAllocatedPerPos[static_cast<int>(TPosition::MAX) + 1] = {};
    bool simAlive = true;
    int simAllocBlocks(TPosition pos, int num, uint32_t len, const void* owner, const char* api);
    TEventID simAllocEvent(int e);
    void simReleaseEvent(int e, TEventID id);
    TEventID simFetchEvent(int e);
    int simTryAllocQueueEvent(int e);      // a TQue's hidden event id (-1 when the pool is empty)
    void simReleaseQueueEvent(int e, int id);
    void simCheckLeftovers();      // D16 warnings at kernel end / Destroy
};

TPipe* GetTPipePtr();

namespace simdetail {
// Shared, non-templated queue logic (see tpipe.cpp).
class QueBase {
public:
    TPipe* pipe = nullptr;
    uint32_t gen = 0;
    int firstHandle = -1, num = 0;
    size_t rr = 0;
    std::deque<int> fifo;
    // hidden TQue events (rule E19): producer/consumer pipes and per-buffer snapshots
    int prodPipe = -1, consPipe = -1;
    std::vector<AscendSim::PipeSnapshot> enqSnap, freeSnap;
    // event ids of the hidden EnQue (producer -> consumer) and Free (consumer -> producer) events,
    // taken from the pipe's pool as the real TQue does (rule J33); -1 = none held
    int enqEvent = -1, freeEvent = -1;
    std::vector<int> enqId, freeId;
    void simAttach(TPipe* p, int first, int n) {
        pipe = p; gen = p->simGeneration; firstHandle = first; num = n; rr = 0; fifo.clear();
        enqSnap.assign(n, AscendSim::PipeSnapshot{});
        freeSnap.assign(n, AscendSim::PipeSnapshot{});
        enqId.assign(n, -1);
        freeId.assign(n, -1);
    }
    Block& blockOf(int handle);
    void checkLive(const char* api) const;
    int alloc(TPosition pos, int depth, const char* api);
    void enque(int handle, int depth, const char* api);
    int deque(const char* api);
    void free(int handle, TPosition pos, const char* api);
    bool hasIdle() const;
};
}  // namespace simdetail

template <TPosition SRC, TPosition DST, int32_t DEPTH, auto MASK = 0>
class TQueBind : public simdetail::QueBase {
public:
    // VECIN: GM->UB producer MTE2, consumer V; VECOUT: producer V, consumer MTE3;
    // VECIN->VECOUT binding: MTE2 -> MTE3 (IMPL kernel_event.h GetQueEvt).
    TQueBind() {
        auto ev = [](HardEvent e) { return static_cast<int>(e); };
        if (SRC == TPosition::VECIN && DST == TPosition::VECIN) {
            prodPipe = AscendSim::PIPE_ID_MTE2; consPipe = AscendSim::PIPE_ID_V;
            enqEvent = ev(HardEvent::MTE2_V); freeEvent = ev(HardEvent::V_MTE2);
        } else if (SRC == TPosition::VECOUT && DST == TPosition::VECOUT) {
            prodPipe = AscendSim::PIPE_ID_V; consPipe = AscendSim::PIPE_ID_MTE3;
            enqEvent = ev(HardEvent::V_MTE3); freeEvent = ev(HardEvent::MTE3_V);
        } else if (SRC == TPosition::VECIN && DST == TPosition::VECOUT) {
            prodPipe = AscendSim::PIPE_ID_MTE2; consPipe = AscendSim::PIPE_ID_MTE3;
            enqEvent = ev(HardEvent::MTE2_MTE3); freeEvent = ev(HardEvent::MTE3_MTE2);
        }
    }
    static constexpr TPosition simPosition() { return SRC == TPosition::GM ? DST : SRC; }
    template <typename T>
    LocalTensor<T> AllocTensor() {
        if (DEPTH == 0) AscendSim::violation("D15", "TQue::AllocTensor", "returning AllocTensor<T>() needs depth != 0");
        return view<T>(alloc(simPosition(), DEPTH, "TQue::AllocTensor"));
    }
    template <typename T>
    void AllocTensor(LocalTensor<T>& t) {
        if (DEPTH != 0) AscendSim::violation("D15", "TQue::AllocTensor", "in-place AllocTensor(LocalTensor&) needs depth == 0");
        t = view<T>(alloc(simPosition(), DEPTH, "TQue::AllocTensor"));
    }
    template <typename T>
    bool EnQue(const LocalTensor<T>& t) {
        if (t.simOwner != this)
            AscendSim::violation("D15", "TQue::EnQue", "tensor does not belong to this queue");
        enque(t.simBufId, DEPTH, "TQue::EnQue");
        return true;
    }
    template <typename T>
    LocalTensor<T> DeQue() {
        if (DEPTH == 0) AscendSim::violation("D15", "TQue::DeQue", "returning DeQue<T>() needs depth != 0");
        return view<T>(deque("TQue::DeQue"));
    }
    template <typename T>
    void DeQue(LocalTensor<T>& t) { t = view<T>(deque("TQue::DeQue")); }
    template <typename T>
    void FreeTensor(LocalTensor<T>& t) {
        if (t.simOwner != this)
            AscendSim::violation("D15", "TQue::FreeTensor", "tensor does not belong to this queue");
        free(t.simBufId, simPosition(), "TQue::FreeTensor");
    }
    bool VacantInQue() const { return static_cast<int>(fifo.size()) < DEPTH; }
    bool HasTensorInQue() const { return !fifo.empty(); }
    int32_t GetTensorCountInQue() const { return static_cast<int32_t>(fifo.size()); }
    bool HasIdleBuffer() const { return hasIdle(); }
    void FreeAllEvent() {}

private:
    template <typename T>
    LocalTensor<T> view(int handle) {
        simdetail::Block& b = blockOf(handle);
        LocalTensor<T> t;
        t.simAddr = b.addr; t.simBytes = b.len; t.simPos = simPosition(); t.simBufId = handle; t.simOwner = this;
        return t;
    }
};

template <TPosition POS, int32_t DEPTH, auto MASK = 0>
using TQue = TQueBind<POS, POS, DEPTH, MASK>;

template <TPosition POS = TPosition::VECCALC>
class TBuf {
public:
    TPipe* pipe = nullptr;
    uint32_t gen = 0;
    int handle = -1;
    static constexpr TPosition simPosition() { return POS; }
    void simAttach(TPipe* p, int h) { pipe = p; gen = p->simGeneration; handle = h; }

    template <typename T>
    LocalTensor<T> Get() { return getView<T>(0, UINT32_MAX, "TBuf::Get"); }
    template <typename T>
    LocalTensor<T> Get(uint32_t len) {
        return getView<T>(0, static_cast<uint64_t>(len) * sizeof(T), "TBuf::Get");
    }
    template <typename T>
    LocalTensor<T> GetWithOffset(uint32_t size, uint32_t bufOffset) {
        if (bufOffset % 32 != 0)
            AscendSim::violation("A6", "TBuf::GetWithOffset", AscendSim::fmt("bufOffset %u is not 32-byte aligned", bufOffset));
        return getView<T>(bufOffset, static_cast<uint64_t>(size) * sizeof(T), "TBuf::GetWithOffset");
    }

private:
    template <typename T>
    LocalTensor<T> getView(uint32_t off, uint64_t bytes, const char* api) {
        if (!pipe || handle < 0) AscendSim::violation("A6", api, "TBuf used before TPipe::InitBuffer");
        if (!pipe->simAlive || gen != pipe->simGeneration || GetTPipePtr() != pipe)
            AscendSim::violation("A5", api, "TBuf used after its TPipe was reset/destroyed");
        const simdetail::Block& b = pipe->simBlocks[handle];
        if (bytes == UINT32_MAX) bytes = b.len;
        if (off + bytes > b.len)
            AscendSim::violation("A6", api, AscendSim::fmt("requested %llu bytes at offset %u but the TBuf holds %u bytes",
                (unsigned long long)bytes, off, b.len));
        LocalTensor<T> t;
        t.simAddr = b.addr + off; t.simBytes = static_cast<uint32_t>(bytes); t.simPos = POS; t.simBufId = handle; t.simOwner = this;
        return t;
    }
};

}  // namespace AscendC
