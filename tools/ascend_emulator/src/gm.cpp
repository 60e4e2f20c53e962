// GM registry: every GmAlloc allocation is recorded so DMA, scalar and matmul accesses can
// be checked against it (rule B9) and logged for the cross-core race check (rule E20).
#include "ascend_sim/runtime.h"
#include <map>
#include <mutex>
#include <cstdlib>
#include <cstring>
#include <algorithm>

namespace AscendSim {

namespace {
struct Registry {
    std::mutex m;
    std::map<uintptr_t, uint64_t> allocs;   // base -> bytes
};
Registry& reg() { static Registry r; return r; }
std::mutex g_atomic;
constexpr uint64_t kSlack = 64;   // physical slack so tolerated 32 B over-reads stay inside our memory
}  // namespace

void* gmAlloc(size_t bytes) {
    size_t total = (bytes + kSlack + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, total);
    if (!p) { std::fprintf(stderr, "ASCEND-SIM: GmAlloc(%zu) failed\n", bytes); std::_Exit(VIOLATION_EXIT_CODE + 1); }
    std::memset(p, 0xA5, total);   // GM content is undefined until the harness writes it
    std::lock_guard<std::mutex> lk(reg().m);
    reg().allocs[reinterpret_cast<uintptr_t>(p)] = bytes;
    return p;
}

void gmFree(void* p) {
    if (!p) return;
    {
        std::lock_guard<std::mutex> lk(reg().m);
        auto it = reg().allocs.find(reinterpret_cast<uintptr_t>(p));
        if (it == reg().allocs.end()) violation("B9", "GmFree", "pointer was not returned by GmAlloc");
        reg().allocs.erase(it);
    }
    std::free(p);
}

std::string gmDescribe(uintptr_t lo, uintptr_t hi) {
    std::lock_guard<std::mutex> lk(reg().m);
    auto it = reg().allocs.upper_bound(lo);
    if (it != reg().allocs.begin()) {
        --it;
        if (lo >= it->first && lo < it->first + it->second + 32)
            return fmt("[%llu,%llu) of the %llu-byte GmAlloc allocation at %p", (unsigned long long)(lo - it->first),
                       (unsigned long long)(hi - it->first), (unsigned long long)it->second, (void*)it->first);
    }
    return fmt("[%#lx,%#lx)", (unsigned long)lo, (unsigned long)hi);
}

void atomicLock() { g_atomic.lock(); }
void atomicUnlock() { g_atomic.unlock(); }

void GmLog::add(GmAccess k, uintptr_t lo, uintptr_t hi) {
    auto& v = iv[static_cast<int>(k)];
    if (!v.empty() && lo <= v.back().hi && hi >= v.back().lo) {
        v.back().lo = std::min(v.back().lo, lo);
        v.back().hi = std::max(v.back().hi, hi);
        return;
    }
    v.push_back({lo, hi});
}

void gmCheckPending(uintptr_t lo, uintptr_t hi, bool write, const char* api) {
    CoreContext& c = ctx();
    for (const PendingRegion& r : c.pending) {
        if (lo < r.hi && r.lo < hi && (r.isOutput || write)) {
            violation("E21", api, fmt("%s GM bytes %s that belong to the %s of Matmul object %d whose "
                                      "IterateAll<false> has not been waited (call WaitIterateAll() first)",
                                      write ? "writes" : "reads", gmDescribe(lo, hi).c_str(),
                                      r.isOutput ? "C output" : "A/B/bias input", r.mmId));
        }
    }
}

void gmCheckAccess(const void* p, uint64_t bytes, GmAccess kind, const char* api) {
    if (bytes == 0) return;
    uintptr_t a = reinterpret_cast<uintptr_t>(p);
    uintptr_t base = 0;
    uint64_t size = 0;
    bool found = false;
    {
        std::lock_guard<std::mutex> lk(reg().m);
        auto it = reg().allocs.upper_bound(a);
        if (it != reg().allocs.begin()) {
            --it;
            if (a >= it->first && a < it->first + it->second + 32) { base = it->first; size = it->second; found = true; }
        }
    }
    const char* what = kind == GmAccess::Read ? "read" : "write";
    if (!found)
        violation("B9", api, fmt("GM %s of %llu bytes at %p is not inside any GmAlloc allocation", what,
                                 (unsigned long long)bytes, p));
    uint64_t off = a - base;
    uint64_t end = off + bytes;
    if (end > size) {
        if (kind == GmAccess::Read && end - size < 32) {
            warning("B9", api, fmt("GM read [%llu,%llu) runs %llu bytes past the end of a %llu-byte allocation "
                                   "(tolerated 32-byte DMA rounding)", (unsigned long long)off, (unsigned long long)end,
                                   (unsigned long long)(end - size), (unsigned long long)size));
        } else {
            violation("B9", api, fmt("GM %s of bytes [%llu,%llu) relative to an allocation of %llu bytes (out of bounds)",
                                     what, (unsigned long long)off, (unsigned long long)end, (unsigned long long)size));
        }
        end = std::max<uint64_t>(size, off);
    }
    gmCheckPending(a, a + bytes, kind != GmAccess::Read, api);
    if (end > off) ctx().gmLog.add(kind, base + off, base + end);
}

}  // namespace AscendSim
