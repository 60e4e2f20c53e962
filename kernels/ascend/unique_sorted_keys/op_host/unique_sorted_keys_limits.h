// What the UniqueSortedKeys kernel supports, checked before a launch. Plain C++ (no CANN, no
// torch): called by the NPU binding's launch and by the CPU emulator's entry (tools/ascend_emulator).
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

namespace mxs_ascend {

inline void CheckUniqueSortedKeysLimits(int64_t numKeys) {
    if (numKeys >= INT32_MAX)
        throw std::invalid_argument("sorted_keys: the Ascend unique kernel supports fewer than 2^31 - 1 keys, got " +
                                    std::to_string(numKeys));
}

}  // namespace mxs_ascend
