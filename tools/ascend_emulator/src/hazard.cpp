// Rule E19: missing intra-core synchronization between the V, MTE2 and MTE3 pipes on UB.
// See runtime.h for the model. Tracked at 32-byte block granularity (the UB access unit).
#include "ascend_sim/runtime.h"
#include <algorithm>

namespace AscendSim {

const char* pipeName(int p) {
    static const char* n[] = {"S", "V", "MTE2", "MTE3"};
    return p >= 0 && p < SIM_PIPES ? n[p] : "?";
}

static const char* syncHint(int from, int to) {
    static thread_local std::string h;
    h = fmt("SetFlag/WaitFlag<HardEvent::%s_%s>, a TQue EnQue/DeQue or Free/Alloc edge, or PipeBarrier<PIPE_ALL>",
            pipeName(from), pipeName(to));
    return h.c_str();
}

void hzAccess(int pipe, uint32_t addr, uint64_t bytes, bool write, const char* api) {
    CoreContext& c = ctx();
    HazardState& h = c.hz;
    if (!h.enabled || bytes == 0 || pipe == PIPE_ID_S) return;
    if (h.blk.empty()) h.blk.resize(c.ub.size() / 32 + 1);
    uint32_t t = ++h.clock[pipe];
    uint64_t b0 = addr / 32, b1 = (addr + bytes + 31) / 32;
    for (uint64_t b = b0; b < b1 && b < h.blk.size(); ++b) {
        HazardState::Blk& k = h.blk[b];
        if (k.wPipe >= 0 && k.wPipe != pipe && k.wTime > h.known[pipe][k.wPipe])
            violation("E19", api, fmt("%s %s UB bytes [%llu,%llu) written by %s (%s) without synchronization; needs %s",
                                      pipeName(pipe), write ? "overwrites" : "reads", (unsigned long long)(b * 32),
                                      (unsigned long long)(b * 32 + 32), pipeName(k.wPipe), k.wApi, syncHint(k.wPipe, pipe)));
        if (write) {
            for (int q = 1; q < SIM_PIPES; ++q)
                if (q != pipe && k.rTime[q] > h.known[pipe][q])
                    violation("E19", api, fmt("%s overwrites UB bytes [%llu,%llu) still being read by %s (%s) without "
                                              "synchronization (WAR); needs %s", pipeName(pipe), (unsigned long long)(b * 32),
                                              (unsigned long long)(b * 32 + 32), pipeName(q), k.rApi[q], syncHint(q, pipe)));
            k.wPipe = static_cast<int8_t>(pipe);
            k.wTime = t;
            k.wApi = api;
        } else {
            k.rTime[pipe] = t;
            k.rApi[pipe] = api;
        }
    }
}

// A scalar access: the compiler inserts X->S before it and S->Y after it for every pipe that
// touches these bytes, so all earlier accesses to the block are ordered before later ones.
void hzScalarTouch(uint32_t addr, uint32_t bytes) {
    CoreContext& c = ctx();
    HazardState& h = c.hz;
    if (!h.enabled || h.blk.empty()) return;
    for (uint64_t b = addr / 32; b < (addr + bytes + 31ull) / 32 && b < h.blk.size(); ++b) h.blk[b] = HazardState::Blk{};
}

PipeSnapshot hzSnapshot(int pipe) {
    HazardState& h = ctx().hz;
    PipeSnapshot s;
    for (int q = 0; q < SIM_PIPES; ++q) s.t[q] = h.known[pipe][q];
    s.t[pipe] = h.clock[pipe];
    s.valid = true;
    return s;
}

void hzMerge(int pipe, const PipeSnapshot& s) {
    if (!s.valid) return;
    HazardState& h = ctx().hz;
    for (int q = 0; q < SIM_PIPES; ++q) h.known[pipe][q] = std::max(h.known[pipe][q], s.t[q]);
}

void hzBarrierAll() {
    HazardState& h = ctx().hz;
    for (int p = 0; p < SIM_PIPES; ++p)
        for (int q = 0; q < SIM_PIPES; ++q) h.known[p][q] = h.clock[q];
}

}  // namespace AscendSim
