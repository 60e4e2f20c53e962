// Launch: every launched core instance runs as its own std::thread with a private
// CoreContext (UB arena, TPipe pointer, event table, atomic mode, mask, GM access log).
// Threads make SyncAll possible and expose order dependence; the race check (rule E20)
// does not depend on the interleaving: per core, GM byte ranges read / written /
// atomically written are logged between SyncAll epochs and compared across cores at each
// SyncAll and at the end of the launch.
#include "ascend_sim/runtime.h"
#include "ascend_sim/tpipe.h"
#include <thread>
#include <mutex>
#include <condition_variable>
#include <memory>
#include <algorithm>
#include <random>
#include <cstdlib>
#include <cstdio>
#include <map>

namespace AscendSim {

namespace {
thread_local CoreContext* t_ctx = nullptr;
AscendC::KernelMode g_mode = AscendC::KernelMode::AIV_MODE;
uint64_t g_tilingKey = 0;

struct LaunchState {
    std::mutex m;
    std::condition_variable cv;
    int64_t instances = 0;
    bool multiWave = false;
    int64_t arrived = 0;
    uint64_t generation = 0;
    int64_t exited = 0;
    std::vector<std::unique_ptr<CoreContext>> cores;
};
LaunchState* g_launch = nullptr;
const char* g_kernelName = "-";

const char* kindName(int k) { return k == 0 ? "reads" : (k == 1 ? "writes" : "atomically writes"); }

struct Entry { uintptr_t lo, hi; int64_t core; int kind; };

// Cross-core race check over the logs of all cores for one epoch.
void checkRaces(const char* where) {
    std::vector<Entry> all;
    for (auto& cp : g_launch->cores) {
        CoreContext& c = *cp;
        for (int k = 0; k < 3; ++k) {
            auto v = c.gmLog.iv[k];
            std::sort(v.begin(), v.end(), [](const GmInterval& a, const GmInterval& b) { return a.lo < b.lo; });
            std::vector<GmInterval> merged;
            for (auto& x : v) {
                if (!merged.empty() && x.lo <= merged.back().hi) merged.back().hi = std::max(merged.back().hi, x.hi);
                else merged.push_back(x);
            }
            for (auto& x : merged) all.push_back({x.lo, x.hi, c.blockIdx, k});
        }
    }
    std::sort(all.begin(), all.end(), [](const Entry& a, const Entry& b) { return a.lo < b.lo; });
    std::vector<Entry> active;
    for (const Entry& e : all) {
        active.erase(std::remove_if(active.begin(), active.end(), [&](const Entry& a) { return a.hi <= e.lo; }),
                     active.end());
        for (const Entry& a : active) {
            if (a.core == e.core) continue;
            if (a.kind == 0 && e.kind == 0) continue;          // read / read
            if (a.kind == 2 && e.kind == 2) continue;          // atomic / atomic
            uintptr_t lo = std::max(a.lo, e.lo), hi = std::min(a.hi, e.hi);
            violation("E20", where,
                      fmt("cross-core GM race: core %lld %s and core %lld %s the same GM bytes %s in one "
                          "SyncAll epoch (needs SyncAll between them, disjoint ranges, or atomic accumulation)",
                          (long long)a.core, kindName(a.kind), (long long)e.core, kindName(e.kind),
                          gmDescribe(lo, hi).c_str()));
        }
        active.push_back(e);
    }
    for (auto& cp : g_launch->cores) cp->gmLog.clear();
}

void coreExitChecks(CoreContext& c) {
    for (int e = 0; e < AscendC::HARD_EVENT_COUNT; ++e)
        for (int id = 0; id < 8; ++id)
            if (c.flagSet[e][id])
                violation("E17", "kernel exit", fmt("SetFlag(event %d, id %d) was never consumed by a WaitFlag", e, id));
    if (c.pendingNeedsWait && !c.pending.empty())
        violation("E21", "kernel exit", "IterateAll<false>(..., waitIterateAll=true) was never followed by WaitIterateAll()");
    if (c.atomicMode != 0) warning("D16", "kernel exit", "atomic mode still enabled at kernel end (call SetAtomicNone())");
    if (c.maskCounter) warning("D16", "kernel exit", "mask left in Counter mode at kernel end");
}

void writeStats(const char* name, int64_t blockDim, bool mix) {
    const char* path = std::getenv("ASCEND_SIM_STATS");
    if (!path || !*path) return;
    FILE* f = std::fopen(path, "a");
    if (!f) return;
    CoreStats tot;
    auto row = [](const CoreStats& s) {
        return fmt("\"gm_to_ub_bytes\": %llu, \"ub_to_gm_bytes\": %llu, \"ub_to_ub_bytes\": %llu, \"dma_calls\": %llu, "
                   "\"vector_instr\": %llu, \"vector_elems\": %llu, \"cube_flops\": %llu, \"matmul_calls\": %llu, "
                   "\"scalar_gm_get\": %llu, \"scalar_gm_set\": %llu, \"scalar_ub_get\": %llu, \"scalar_ub_set\": %llu, "
                   "\"atomic_bytes\": %llu, \"sync_all\": %llu, \"scalar_blocks\": %llu, "
                   "\"vector_gather_instr\": %llu, \"matmul_gm_bytes\": %llu",
                   (unsigned long long)s.gmToUbBytes, (unsigned long long)s.ubToGmBytes, (unsigned long long)s.ubToUbBytes,
                   (unsigned long long)s.dmaCalls, (unsigned long long)s.vecInstr, (unsigned long long)s.vecElems,
                   (unsigned long long)s.cubeFlops, (unsigned long long)s.matmulCalls, (unsigned long long)s.scalarGmGet,
                   (unsigned long long)s.scalarGmSet, (unsigned long long)s.scalarUbGet, (unsigned long long)s.scalarUbSet,
                   (unsigned long long)s.atomicBytes, (unsigned long long)s.syncAll,
                   (unsigned long long)s.scalarBlocks, (unsigned long long)s.vecGatherInstr,
                   (unsigned long long)s.matmulGmBytes);
    };
    std::string cores;
    for (auto& cp : g_launch->cores) {
        const CoreStats& s = cp->stats;
        tot.gmToUbBytes += s.gmToUbBytes; tot.ubToGmBytes += s.ubToGmBytes; tot.ubToUbBytes += s.ubToUbBytes;
        tot.dmaCalls += s.dmaCalls; tot.vecInstr += s.vecInstr; tot.vecElems += s.vecElems; tot.cubeFlops += s.cubeFlops;
        tot.matmulCalls += s.matmulCalls; tot.scalarGmGet += s.scalarGmGet; tot.scalarGmSet += s.scalarGmSet;
        tot.scalarUbGet += s.scalarUbGet; tot.scalarUbSet += s.scalarUbSet; tot.atomicBytes += s.atomicBytes;
        tot.syncAll += s.syncAll;
        tot.scalarBlocks += s.scalarBlocks;
        tot.vecGatherInstr += s.vecGatherInstr; tot.matmulGmBytes += s.matmulGmBytes;
        if (!cores.empty()) cores += ", ";
        cores += fmt("{\"core\": %lld, ", (long long)cp->blockIdx) + row(s) + "}";
    }
    std::fprintf(f, "{\"kernel\": \"%s\", \"block_dim\": %lld, \"mode\": \"%s\", \"soc\": \"%s\", \"total\": {%s}, "
                    "\"cores\": [%s]}\n",
                 name, (long long)blockDim, mix ? "MIX_AIC_1_2" : "AIV_ONLY", platform().soc.c_str(), row(tot).c_str(),
                 cores.c_str());
    std::fclose(f);
}
}  // namespace

CoreContext& ctx() {
    if (!t_ctx) {
        std::fprintf(stderr, "ASCEND-SIM: AscendC kernel API called outside ICPU_RUN_KF\n");
        std::_Exit(VIOLATION_EXIT_CODE + 1);
    }
    return *t_ctx;
}
CoreContext* ctxOrNull() { return t_ctx; }
const char* currentKernelName() { return g_kernelName; }
uint8_t* ubBase() { return ctx().ub.data(); }

void setKernelMode(AscendC::KernelMode m) {
    if (m == AscendC::KernelMode::AIC_MODE)
        unsupported("SetKernelMode", "AIC_MODE (cube-only kernels) is not emulated; use MIX_MODE with the Matmul API");
    g_mode = m;
}
void setTilingKey(uint64_t k) { g_tilingKey = k; }

void declareKernelType(int type) {
    CoreContext& c = ctx();
    bool wantsMix = type == ::KERNEL_TYPE_MIX_AIC_1_2 || type == ::KERNEL_TYPE_MIX_AIC_1_1 ||
                    type == ::KERNEL_TYPE_MIX_AIC_1_0 || type == ::KERNEL_TYPE_AIC_ONLY;
    if (wantsMix != c.mix)
        violation("H29", "KERNEL_TASK_TYPE_DEFAULT",
                  fmt("kernel declares a %s type but was launched in %s (AscendC::SetKernelMode)",
                      wantsMix ? "cube/mix" : "vector-only", c.mix ? "MIX_MODE" : "AIV_MODE"));
}

void syncAll(const char* api) {
    CoreContext& c = ctx();
    LaunchState& L = *g_launch;
    if (L.multiWave)
        violation("E20", api, fmt("SyncAll in a launch of %lld core instances > %u physical vector cores: would deadlock",
                                  (long long)L.instances, platform().aivNum));
    std::unique_lock<std::mutex> lk(L.m);
    if (L.exited > 0)
        violation("E20", api, fmt("%lld core(s) already returned without reaching this SyncAll: deadlock on the NPU",
                                  (long long)L.exited));
    c.syncAllCount++;
    c.stats.syncAll++;
    hzBarrierAll();   // SyncAll drains the core's pipes
    uint64_t gen = L.generation;
    if (++L.arrived == L.instances) {
        checkRaces(api);
        L.arrived = 0;
        L.generation++;
        L.cv.notify_all();
    } else {
        L.cv.wait(lk, [&] { return L.generation != gen; });
    }
}

void launch(const char* name, int64_t blockDim, const std::function<void()>& body) {
    const Platform& P = platform();
    g_kernelName = name;
    bool mix = g_mode == AscendC::KernelMode::MIX_MODE;
    if (blockDim < 1 || blockDim > 65535)
        violation("H29", "ICPU_RUN_KF", fmt("blockDim %lld outside [1, 65535]", (long long)blockDim));
    if (mix && blockDim > static_cast<int64_t>(P.aicNum))
        violation("H29", "ICPU_RUN_KF", fmt("mix kernel launched with blockDim %lld > %u physical AIC cores (%s)",
                                            (long long)blockDim, P.aicNum, P.soc.c_str()));
    LaunchState L;
    g_launch = &L;
    g_kernelName = name;
    L.instances = mix ? 2 * blockDim : blockDim;
    int64_t wave = static_cast<int64_t>(P.aivNum);
    const char* serial = std::getenv("ASCEND_SIM_SERIAL");
    if (serial && serial[0] == '1') wave = 1;
    L.multiWave = L.instances > wave;
    std::vector<int64_t> order(L.instances);
    for (int64_t i = 0; i < L.instances; ++i) order[i] = i;
    const char* seed = std::getenv("ASCEND_SIM_SEED");
    if (seed && *seed) {
        std::mt19937_64 rng(std::strtoull(seed, nullptr, 10));
        std::shuffle(order.begin(), order.end(), rng);
    }
    for (int64_t i = 0; i < L.instances; ++i) {
        auto c = std::make_unique<CoreContext>();
        c->kernelName = name;
        c->mix = mix;
        c->blockIdx = i;
        c->blockNum = blockDim;
        c->subBlockIdx = mix ? (i % 2) : 0;
        c->taskRatio = mix ? 2 : 1;
        c->ub.assign(P.ubSize, 0xA5);
        c->tilingKey = g_tilingKey;
        const char* hzEnv = std::getenv("ASCEND_SIM_HAZARDS");
        c->hz.enabled = !(hzEnv && hzEnv[0] == '0');
        L.cores.push_back(std::move(c));
    }
    for (int64_t start = 0; start < L.instances; start += wave) {
        int64_t end = std::min(L.instances, start + wave);
        std::vector<std::thread> threads;
        for (int64_t j = start; j < end; ++j) {
            CoreContext* c = L.cores[order[j]].get();
            threads.emplace_back([c, &body, &L] {
                t_ctx = c;
                scalarCountBind(&c->stats.scalarBlocks);
                body();
                scalarCountBind(nullptr);
                coreExitChecks(*c);
                {
                    std::lock_guard<std::mutex> lk(L.m);
                    L.exited++;
                    if (L.arrived > 0)
                        violation("E20", "kernel exit",
                                  fmt("core returned while %lld core(s) wait in SyncAll: deadlock on the NPU",
                                      (long long)L.arrived));
                }
                t_ctx = nullptr;
            });
        }
        for (auto& t : threads) t.join();
    }
    checkRaces("kernel end");
    writeStats(name, blockDim, mix);
    g_launch = nullptr;
}

}  // namespace AscendSim
