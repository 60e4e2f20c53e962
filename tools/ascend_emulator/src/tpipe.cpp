// TPipe / queue bookkeeping (rules A1, A3, A4, A5, A7, D15, D16).
#include "ascend_sim/tpipe.h"
#include <cstring>

namespace AscendC {
namespace simdetail {

const char* posName(TPosition p) {
    switch (p) {
        case TPosition::GM: return "GM";
        case TPosition::VECIN: return "VECIN";
        case TPosition::VECOUT: return "VECOUT";
        case TPosition::VECCALC: return "VECCALC";
        case TPosition::A1: return "A1";
        case TPosition::B1: return "B1";
        case TPosition::A2: return "A2";
        case TPosition::B2: return "B2";
        case TPosition::CO1: return "CO1";
        case TPosition::CO2: return "CO2";
        default: return "other";
    }
}
bool isUbPosition(TPosition p) {
    return p == TPosition::VECIN || p == TPosition::VECOUT || p == TPosition::VECCALC;
}

}  // namespace simdetail

using namespace AscendSim;
using simdetail::Block;

TPipe::TPipe() {
    CoreContext& c = ctx();
    if (c.livePipe != nullptr)
        violation("A5", "TPipe::TPipe", "a second TPipe was constructed while another is alive (call Destroy() first)");
    c.livePipe = this;
    c.pipesCreated++;
    // A7: UB content is undefined when a pipe starts; poison it so kernels cannot rely on zeros.
    std::memset(c.ub.data(), 0xA5, c.ub.size());
}

TPipe::~TPipe() {
    CoreContext* c = ctxOrNull();
    if (simAlive) {
        simCheckLeftovers();
        simAlive = false;
    }
    if (c && c->livePipe == this) c->livePipe = nullptr;
}

void TPipe::Reset() {
    CoreContext& c = ctx();
    for (int e = 0; e < HARD_EVENT_COUNT; ++e)   // the queues' hidden event ids go back to the pool
        for (int id = 0; id < 8; ++id)
            if (c.eventQueueHeld[e][id]) c.eventQueueHeld[e][id] = c.eventAllocated[e][id] = false;
    simBlocks.clear();
    simUsed = 0;
    simGeneration++;
    std::memset(simAllocatedPerPos, 0, sizeof(simAllocatedPerPos));
}

void TPipe::Destroy() {
    if (!simAlive) return;
    simCheckLeftovers();
    Reset();
    simAlive = false;
    CoreContext& c = ctx();
    if (c.livePipe == this) c.livePipe = nullptr;
}

int TPipe::simAllocBlocks(TPosition pos, int num, uint32_t len, const void* owner, const char* api) {
    if (!simAlive) violation("A5", api, "InitBuffer on a destroyed TPipe");
    if (ctx().livePipe != this) violation("A5", api, "InitBuffer on a TPipe that is not the live one");
    if (!simdetail::isUbPosition(pos))
        unsupported(api, fmt("position %s: only VECIN/VECOUT/VECCALC (UB) buffers are emulated", simdetail::posName(pos)));
    if (num < 1 || num > 64) violation("A3", api, fmt("num=%d outside [1,64]", num));
    if (len == 0) violation("A1", api, "len must be > 0");
    if (simBlocks.size() + num > 64)
        violation("A3", api, fmt("%zu buffer handles already exist; %d more exceed QBUF_MAX_LEN=64", simBlocks.size(), num));
    uint64_t rounded = (static_cast<uint64_t>(len) + 31) / 32 * 32;
    uint64_t total = simUsed + rounded * num;
    uint64_t cap = platform().ubSize;
    if (total > cap)
        violation("A1", api, fmt("UB overflow: %u bytes already allocated + %d x %llu bytes = %llu > UB size %llu",
                                 simUsed, num, (unsigned long long)rounded, (unsigned long long)total, (unsigned long long)cap));
    int first = static_cast<int>(simBlocks.size());
    for (int i = 0; i < num; ++i) {
        Block b;
        b.addr = simUsed; b.len = static_cast<uint32_t>(rounded); b.pos = pos; b.owner = owner;
        simBlocks.push_back(b);
        simUsed += static_cast<uint32_t>(rounded);
    }
    return first;
}

TEventID TPipe::simAllocEvent(int e) {
    CoreContext& c = ctx();
    for (int id = 0; id < 8; ++id)
        if (!c.eventAllocated[e][id]) { c.eventAllocated[e][id] = true; return static_cast<TEventID>(id); }
    violation("E17", "TPipe::AllocEventID", "all 8 event IDs of this HardEvent are allocated");
}
void TPipe::simReleaseEvent(int e, TEventID id) {
    if (id < 0 || id > 7) violation("E17", "TPipe::ReleaseEventID", fmt("event id %d outside [0,7]", id));
    ctx().eventAllocated[e][id] = false;
}
int TPipe::simTryAllocQueueEvent(int e) {
    CoreContext& c = ctx();
    for (int id = 0; id < 8; ++id)
        if (!c.eventAllocated[e][id] && !c.flagSet[e][id]) {
            c.eventAllocated[e][id] = c.eventQueueHeld[e][id] = true;
            return id;
        }
    return -1;
}
void TPipe::simReleaseQueueEvent(int e, int id) {
    if (id < 0) return;
    CoreContext& c = ctx();
    c.eventAllocated[e][id] = c.eventQueueHeld[e][id] = false;
}
TEventID TPipe::simFetchEvent(int e) {
    CoreContext& c = ctx();
    for (int id = 0; id < 8; ++id)
        if (!c.eventAllocated[e][id] && !c.flagSet[e][id]) {
            c.eventFetched[e][id] = true;
            return static_cast<TEventID>(id);
        }
    return 0;
}

void TPipe::simCheckLeftovers() {
    for (size_t i = 0; i < simBlocks.size(); ++i) {
        const Block& b = simBlocks[i];
        if (b.state != simdetail::FREE && simdetail::isUbPosition(b.pos) && b.owner != nullptr &&
            b.state != simdetail::FREE) {
            // TBuf blocks are never "allocated" in the queue sense; only queue blocks carry states.
            warning("D16", "TPipe::Destroy", fmt("queue buffer %zu (%s) still %s at pipe end", i,
                                                   simdetail::posName(b.pos), simdetail::stateName(b.state)));
        }
    }
}

TPipe* GetTPipePtr() { return ctx().livePipe; }

namespace simdetail {

Block& QueBase::blockOf(int handle) { return pipe->simBlocks[handle]; }

void QueBase::checkLive(const char* api) const {
    if (!pipe || firstHandle < 0) violation("D15", api, "queue used before TPipe::InitBuffer");
    if (!pipe->simAlive || gen != pipe->simGeneration || ctx().livePipe != pipe)
        violation("D15", api, "queue used after its TPipe was reset/destroyed");
}

int QueBase::alloc(TPosition pos, int depth, const char* api) {
    (void)depth;
    checkLive(api);
    int p = static_cast<int>(pos);
    for (int k = 0; k < num; ++k) {
        int idx = static_cast<int>((rr + k) % num);
        Block& b = blockOf(firstHandle + idx);
        if (b.state == FREE) {
            if (pipe->simAllocatedPerPos[p] >= 8)
                violation("A4", api, fmt("a 9th tensor would be allocated at position %s (QUE_MAX_EVENT = 8)", posName(pos)));
            pipe->simAllocatedPerPos[p]++;
            b.state = OCCUPIED;
            rr = static_cast<size_t>(idx + 1) % num;
            if (prodPipe >= 0) hzMerge(prodPipe, freeSnap[idx]);   // waits the Free event of this buffer
            if (freeEvent >= 0) { pipe->simReleaseQueueEvent(freeEvent, freeId[idx]); freeId[idx] = -1; }
            std::memset(ubBase() + b.addr, 0xA5, b.len);   // A7: fresh buffers are garbage
            return firstHandle + idx;
        }
    }
    violation("D15", api, fmt("no FREE buffer left in this queue (%d buffers, all allocated) - would hang on the NPU", num));
}

void QueBase::enque(int handle, int depth, const char* api) {
    checkLive(api);
    if (handle < firstHandle || handle >= firstHandle + num) violation("D15", api, "tensor does not belong to this queue");
    Block& b = blockOf(handle);
    if (b.state != OCCUPIED && b.state != DEQUE)
        violation("D15", api, fmt("tensor state is %s; EnQue needs an allocated (OCCUPIED/DEQUE) tensor", stateName(b.state)));
    if (static_cast<int>(fifo.size()) >= depth)
        violation("D15", api, fmt("queue already holds depth=%d tensors", depth));
    b.state = ENQUE;
    fifo.push_back(handle);
    if (prodPipe >= 0) enqSnap[handle - firstHandle] = hzSnapshot(prodPipe);
    if (enqEvent >= 0) enqId[handle - firstHandle] = pipe->simTryAllocQueueEvent(enqEvent);
}

int QueBase::deque(const char* api) {
    checkLive(api);
    if (fifo.empty()) violation("D15", api, "DeQue on an empty queue - would hang on the NPU");
    int h = fifo.front();
    fifo.pop_front();
    blockOf(h).state = DEQUE;
    if (consPipe >= 0) hzMerge(consPipe, enqSnap[h - firstHandle]);
    if (enqEvent >= 0) { pipe->simReleaseQueueEvent(enqEvent, enqId[h - firstHandle]); enqId[h - firstHandle] = -1; }
    return h;
}

void QueBase::free(int handle, TPosition pos, const char* api) {
    checkLive(api);
    if (handle < firstHandle || handle >= firstHandle + num) violation("D15", api, "tensor does not belong to this queue");
    Block& b = blockOf(handle);
    if (b.state == FREE) violation("D15", api, "FreeTensor of a tensor that is already FREE (double free)");
    if (b.state == ENQUE) violation("D15", api, "FreeTensor of a tensor that is still enqueued (DeQue it first)");
    b.state = FREE;
    pipe->simAllocatedPerPos[static_cast<int>(pos)]--;
    if (consPipe >= 0) freeSnap[handle - firstHandle] = hzSnapshot(consPipe);
    if (freeEvent >= 0 && freeId[handle - firstHandle] < 0)
        freeId[handle - firstHandle] = pipe->simTryAllocQueueEvent(freeEvent);
}

bool QueBase::hasIdle() const {
    for (int k = 0; k < num; ++k)
        if (pipe->simBlocks[firstHandle + k].state == FREE) return true;
    return false;
}

}  // namespace simdetail
}  // namespace AscendC
