// Rule J35: AscendC API forms that the targeted CANN release does not ship.
//
// The emulator implements the union of the API forms the kernels may use; a form that first
// appears in a later AscendC release compiles here but not against an older CANN's headers. The
// targeted release comes from ASCEND_SIM_CANN_VERSION ("8.0", "8.5", "9.0", ...); the default is
// the oldest release mx_sparse's documentation promises (docs/en/ascend.md: CANN 8.0).
#include "ascend_sim/runtime.h"
#include <cstdio>
#include <cstdlib>

namespace AscendSim {

namespace {
struct ApiSince {
    const char* api;       // the form as the kernel spells it
    int major, minor;      // first CANN release whose AscendC headers/docs have it
    const char* note;      // what to write instead on older releases
};
// Sources: ASCENDC_REFERENCE.md §2.6 and the AscendC API reference of each release (Compares with
// a tensor-and-scalar signature is declared from the 9.0 headers on; CompareScalar on int32 is
// documented from 8.2 on, 8.0/8.1 list half/float only).
const ApiSince kTable[] = {
    {"Compares", 9, 0, "use CompareScalar (declared in every 8.x release)"},
    {"CompareScalar<int32_t>", 8, 2, "compare the int32 0/1 lanes as float (Cast, then CompareScalar<float>)"},
    {"Compare<int32_t>", 8, 2, "compare the int32 lanes as float (Cast, then Compare<float>)"},
};
}  // namespace

int targetCannVersion() {
    static const int v = [] {
        const char* s = std::getenv("ASCEND_SIM_CANN_VERSION");
        int major = 8, minor = 0;
        if (s && *s && std::sscanf(s, "%d.%d", &major, &minor) < 1) {
            std::fprintf(stderr, "ASCEND-SIM: ASCEND_SIM_CANN_VERSION=%s is not MAJOR.MINOR (e.g. 8.0)\n", s);
            std::_Exit(VIOLATION_EXIT_CODE + 1);
        }
        return major * 100 + minor;
    }();
    return v;
}

void requireCannApi(const char* form) {
    for (const ApiSince& a : kTable) {
        if (std::string(a.api) != form) continue;
        const int need = a.major * 100 + a.minor, have = targetCannVersion();
        if (have < need)
            warning("J35", form,
                    fmt("first available in CANN %d.%d; the targeted CANN is %d.%d (ASCEND_SIM_CANN_VERSION): %s",
                        a.major, a.minor, have / 100, have % 100, a.note));
        return;
    }
}

}  // namespace AscendSim
