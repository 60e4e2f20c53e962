// Rule reporting. One format for every violation so tests and tools can grep it:
//   ASCEND-SIM RULE <id> violated in <API> (kernel <name>, core <idx>): <details>
// The process then exits with code 86 (not abort(): no core dump, and a distinctive status).
#include "ascend_sim/runtime.h"
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace AscendSim {

static std::mutex g_reportMutex;

std::string fmt(const char* f, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, f);
    vsnprintf(buf, sizeof(buf), f, ap);
    va_end(ap);
    return buf;
}

static std::string where() {
    CoreContext* c = ctxOrNull();
    if (!c) return fmt("(kernel %s, host)", currentKernelName());
    return fmt("(kernel %s, core %lld)", c->kernelName, static_cast<long long>(c->blockIdx));
}

void violation(const char* rule, const char* api, const std::string& details) {
    std::lock_guard<std::mutex> lk(g_reportMutex);
    std::fprintf(stderr, "ASCEND-SIM RULE %s violated in %s %s: %s\n", rule, api, where().c_str(), details.c_str());
    std::fflush(stderr);
    std::fflush(stdout);
    std::_Exit(VIOLATION_EXIT_CODE);
}

static bool strictMode() {
    const char* s = std::getenv("ASCEND_SIM_STRICT");
    return s && s[0] == '1';
}

void warning(const char* rule, const char* api, const std::string& details) {
    if (strictMode()) violation(rule, api, details + " [strict mode]");
    static int printed = 0;
    std::lock_guard<std::mutex> lk(g_reportMutex);
    if (printed++ < 20)
        std::fprintf(stderr, "ASCEND-SIM WARNING %s in %s %s: %s\n", rule, api, where().c_str(), details.c_str());
}

void unsupported(const char* api, const std::string& details) {
    std::lock_guard<std::mutex> lk(g_reportMutex);
    std::fprintf(stderr, "ASCEND-SIM UNSUPPORTED %s %s: %s (outside the emulated API subset)\n", api, where().c_str(),
                 details.c_str());
    std::fflush(stderr);
    std::_Exit(VIOLATION_EXIT_CODE + 1);
}

}  // namespace AscendSim
