// What the SubmMap kernel (sorted-key lookup) supports, checked before a launch with the messages
// of the map builders. Plain C++ (no CANN, no torch): called by the NPU binding's launch and by the
// CPU emulator's entry (tools/ascend_emulator), so both reject the same inputs the same way.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include "subm_map_tiling.h"

namespace mxs_ascend {

// kvol: number of key offsets K; group: offsets per staged key range (kernel_size[-1]).
inline void CheckSubmMapLimits(int64_t kvol, int64_t group) {
    if (kvol > kSubmMaxK)
        throw std::invalid_argument("kernel_size: the Ascend map kernel supports kernel volumes up to " +
                                    std::to_string(kSubmMaxK) + " (5x5x5), got " + std::to_string(kvol) +
                                    "; build this map on the CPU backend");
    if (kvol < 1 || group < 1 || kvol % group != 0)
        throw std::invalid_argument("group: expected a divisor of the " + std::to_string(kvol) +
                                    " key offsets (kernel_size[-1]), got " + std::to_string(group));
}

}  // namespace mxs_ascend
