// What the AscendC UniqueSortedKeys kernel (primitive _unique_sorted_keys) supports, checked
// before every launch by the NPU binding and the CPU emulator's entry (MXS_NPU_ON_CPU=1). Plain
// C++: "" when supported, else the ValueError message. The count output is int32.
#pragma once
#include <cstdint>
#include <string>

namespace mxs_ascend {

inline std::string UniqueSortedKeysLimits(int64_t num_keys) {
    if (num_keys < INT32_MAX) return "";
    return "sorted_keys: the Ascend unique kernel counts in int32, supports fewer than 2^31 - 1 keys, got " +
           std::to_string(num_keys);
}

}  // namespace mxs_ascend
