// Emulator runtime: per-core context, rule reporting, GM registry checks, statistics,
// platform (SKU) description, launch. Implemented in src/*.cpp.
#pragma once
#include <cstdint>
#include <cstddef>
#include <string>
#include <vector>
#include <functional>
#include "ascend_sim/common.h"

namespace AscendC { class TPipe; }

namespace AscendSim {

// ---------------- rule reporting (src/rules.cpp) ----------------
// A violation prints
//   ASCEND-SIM RULE <id> violated in <API> (kernel <name>, core <idx>): <details>
// to stderr and terminates the process with exit code 86 (no core dump, distinctive).
constexpr int VIOLATION_EXIT_CODE = 86;
[[noreturn]] void violation(const char* rule, const char* api, const std::string& details);
void warning(const char* rule, const char* api, const std::string& details);  // fatal if ASCEND_SIM_STRICT=1
[[noreturn]] void unsupported(const char* api, const std::string& details);   // API subset not emulated
std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));

// ---------------- CANN release targeted (src/cann_version.cpp, rule J35) ----------------
// 100 * major + minor of ASCEND_SIM_CANN_VERSION (default 800: the oldest CANN the docs promise).
int targetCannVersion();
// Warns (fatal in strict mode) when `form` is newer than the targeted release.
void requireCannApi(const char* form);

// ---------------- platform (src/platform.cpp) ----------------
struct Platform {
    std::string soc;       // e.g. "Ascend910B2"
    uint32_t aicNum;       // cube cores
    uint32_t aivNum;       // vector cores (= 2 * aicNum on A2)
    uint64_t ubSize;       // 196608
};
// Reads ASCEND_SIM_SOC (Ascend910B1/B2 -> 24/48, Ascend910B3/B4/B4-1 -> 20/40; default B2)
// and ASCEND_SIM_AIC_NUM (override, e.g. 1 or 3 for tail-core tests; AIV = 2 * AIC).
const Platform& platform();

// ---------------- statistics (src/stats.cpp) ----------------
struct CoreStats {
    uint64_t gmToUbBytes = 0, ubToGmBytes = 0, ubToUbBytes = 0, dmaCalls = 0;
    uint64_t vecInstr = 0, vecElems = 0;
    uint64_t vecGatherInstr = 0;  // the part of vecInstr issued by Gather (its throughput is modelled apart)
    uint64_t cubeFlops = 0, matmulCalls = 0;
    uint64_t matmulGmBytes = 0;   // GM bytes a Matmul moves: A and B read, C written (read too with enAtomic)
    uint64_t scalarGmGet = 0, scalarGmSet = 0, scalarUbGet = 0, scalarUbSet = 0;
    uint64_t atomicBytes = 0, syncAll = 0;
    // Basic blocks executed by the kernel's own code (its scalar control flow); see src/scalar_count.cpp.
    uint64_t scalarBlocks = 0;
};

// ---------------- scalar-unit block counting (src/scalar_count.cpp) ----------------
// Kernel translation units are built with a callback at the start of every basic block that
// begins in the kernel's own source (cpu_debug_build.sh); the launch binds the running core's
// counter around the kernel body (nullptr = not counting).
void scalarCountBind(uint64_t* counter);

// ---------------- GM access log for the cross-core race check (rule E20) ----------------
enum class GmAccess : uint8_t { Read = 0, Write = 1, AtomicWrite = 2 };
struct GmInterval { uintptr_t lo, hi; };
struct GmLog {
    std::vector<GmInterval> iv[3];
    void add(GmAccess k, uintptr_t lo, uintptr_t hi);
    void clear() { for (auto& v : iv) v.clear(); }
};

// Pending asynchronous matmul (rule E21): GM regions that must not be touched until WaitIterateAll.
struct PendingRegion { uintptr_t lo, hi; bool isOutput; int mmId; };

// ---------------- intra-core pipe hazards (rule E19, src/hazard.cpp) ----------------
// Pipes of an AIV: S (scalar), V (vector), MTE2 (GM->UB), MTE3 (UB->GM). Each pipe keeps a
// vector clock; sync edges (SetFlag->WaitFlag, the hidden TQue events, PipeBarrier<PIPE_ALL>)
// propagate knowledge; a UB access that conflicts with an access of another pipe the
// accessing pipe does not know about is a missing synchronization. S accesses are not
// tracked (the compiler inserts every S<->X edge), V->V and same-pipe order is assumed.
enum SimPipe : int { PIPE_ID_S = 0, PIPE_ID_V = 1, PIPE_ID_MTE2 = 2, PIPE_ID_MTE3 = 3, PIPE_ID_NONE = -1 };
constexpr int SIM_PIPES = 4;
struct PipeSnapshot { uint32_t t[SIM_PIPES] = {0, 0, 0, 0}; bool valid = false; };
struct HazardState {
    bool enabled = true;
    uint32_t clock[SIM_PIPES] = {};
    uint32_t known[SIM_PIPES][SIM_PIPES] = {};
    struct Blk {
        uint32_t wTime = 0; int8_t wPipe = -1; const char* wApi = nullptr;
        uint32_t rTime[SIM_PIPES] = {}; const char* rApi[SIM_PIPES] = {};
    };
    std::vector<Blk> blk;             // one entry per 32-byte UB block
    PipeSnapshot flags[AscendC::HARD_EVENT_COUNT][8];
};
void hzAccess(int pipe, uint32_t ubAddr, uint64_t bytes, bool write, const char* api);
PipeSnapshot hzSnapshot(int pipe);
void hzScalarTouch(uint32_t ubAddr, uint32_t bytes);
void hzMerge(int pipe, const PipeSnapshot& s);
void hzBarrierAll();
const char* pipeName(int pipe);

// ---------------- per-core context (src/launch.cpp) ----------------
struct CoreContext {
    const char* kernelName = "?";
    int64_t blockIdx = 0;      // GetBlockIdx()
    int64_t blockNum = 1;      // GetBlockNum()
    int64_t subBlockIdx = 0;   // GetSubBlockIdx()
    int64_t taskRatio = 1;     // GetTaskRatio()
    bool mix = false;
    std::vector<uint8_t> ub;   // Unified Buffer, 196608 bytes
    AscendC::TPipe* livePipe = nullptr;
    int pipesCreated = 0;
    int matmulObjects = 0;
    bool matmulRegistered = false;
    // SetFlag/WaitFlag: pending set per (event, id); AllocEventID bookkeeping
    bool flagSet[AscendC::HARD_EVENT_COUNT][8] = {};
    bool eventAllocated[AscendC::HARD_EVENT_COUNT][8] = {};
    // rule J33: ids handed out by FetchEventID (valid until their WaitFlag), ids a TQue holds for
    // its hidden EnQue/Free events (taken from the same pool as AllocEventID)
    bool eventFetched[AscendC::HARD_EVENT_COUNT][8] = {};
    bool eventQueueHeld[AscendC::HARD_EVENT_COUNT][8] = {};
    // rule J36: the kernel entry registered its tiling struct (REGISTER_TILING_DEFAULT)
    bool tilingRegistered = false;
    // atomic mode: 0 none, 1 add, 2 max, 3 min; atomicType = typeName of T
    int atomicMode = 0;
    const char* atomicType = nullptr;
    // vector mask register
    uint64_t maskHi = FULL_MASK_INIT, maskLo = FULL_MASK_INIT;
    bool maskCounter = false;
    static constexpr uint64_t FULL_MASK_INIT = ~0ULL;
    // logs
    GmLog gmLog;
    std::vector<PendingRegion> pending;
    bool pendingNeedsWait = false;
    uint64_t syncAllCount = 0;
    CoreStats stats;
    HazardState hz;
    void* sysWorkspace = nullptr;
    uint64_t tilingKey = 0;
};
CoreContext& ctx();              // aborts if called outside an ICPU_RUN_KF launch
CoreContext* ctxOrNull();
const char* currentKernelName();
uint8_t* ubBase();

// ---------------- GM registry (src/gm.cpp) ----------------
void* gmAlloc(size_t bytes);
void gmFree(void* p);
// Checks [p, p+bytes) against the GmAlloc registry (rule B9) and logs it for the race check.
// Reads that run at most 31 bytes past an allocation (32 B DMA rounding) are warned, not rejected.
void gmCheckAccess(const void* p, uint64_t bytes, GmAccess kind, const char* api);
// Checks against pending async matmul regions (rule E21).
std::string gmDescribe(uintptr_t lo, uintptr_t hi);   // "[off,off) of the N-byte allocation at p"
void gmCheckPending(uintptr_t lo, uintptr_t hi, bool write, const char* api);
// Global lock for read-modify-write GM atomics (several core threads may add to the same bytes).
void atomicLock();
void atomicUnlock();

// ---------------- launch / cross-core sync (src/launch.cpp) ----------------
void setKernelMode(AscendC::KernelMode m);
void setTilingKey(uint64_t k);
void launch(const char* name, int64_t blockDim, const std::function<void()>& body);
void syncAll(const char* api);
void declareKernelType(int type);   // KERNEL_TASK_TYPE_DEFAULT consistency check

inline CoreStats& stats() { return ctx().stats; }

}  // namespace AscendSim
