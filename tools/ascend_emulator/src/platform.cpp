// SKU description (§1.1). Host tiling code queries the same numbers through
// AscendSim::platform() so tests can run at 24/48, 20/40 and tiny core counts.
#include "ascend_sim/runtime.h"
#include <cstdlib>
#include <cstring>
#include <cstdio>

namespace AscendSim {

static Platform makePlatform() {
    Platform p{"Ascend910B2", 24, 48, 196608};
    const char* soc = std::getenv("ASCEND_SIM_SOC");
    if (soc && *soc) {
        std::string s(soc);
        if (s == "Ascend910B1" || s == "Ascend910B2" || s == "Ascend910B2C") { p.aicNum = 24; }
        else if (s == "Ascend910B3" || s == "Ascend910B4" || s == "Ascend910B4-1") { p.aicNum = 20; }
        else {
            std::fprintf(stderr, "ASCEND-SIM: unknown ASCEND_SIM_SOC=%s (expected Ascend910B1..B4)\n", soc);
            std::_Exit(VIOLATION_EXIT_CODE + 1);
        }
        p.soc = s;
    }
    const char* n = std::getenv("ASCEND_SIM_AIC_NUM");
    if (n && *n) {
        long v = std::strtol(n, nullptr, 10);
        if (v < 1 || v > 64) {
            std::fprintf(stderr, "ASCEND-SIM: ASCEND_SIM_AIC_NUM=%s outside [1,64]\n", n);
            std::_Exit(VIOLATION_EXIT_CODE + 1);
        }
        p.aicNum = static_cast<uint32_t>(v);
    }
    p.aivNum = 2 * p.aicNum;
    return p;
}

const Platform& platform() {
    static const Platform p = makePlatform();
    return p;
}

}  // namespace AscendSim
