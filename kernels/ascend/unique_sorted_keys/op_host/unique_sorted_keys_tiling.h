// Host side of the unique-of-sorted-keys kernel (UniqueSortedKeys) as plain C++ (no CANN).
//
// Input: C sorted int64 keys, INT64_MAX sentinels last (the sorted output of ConvOutKeys).
// Output: the distinct non-sentinel keys, dense and sorted, in ukeys[0:M), and M in count[0].
// Two phases in one launch: each core compacts its contiguous share of the keys into its own
// workspace region and publishes its count; after SyncAll every core reads the counts before it
// (its output offset) and copies its region there. The workspace holds C keys + one 32-byte
// count slot per core.
#pragma once
#include <cstdint>
#include "tiling_common.h"
#include "unique_sorted_keys_tiling_data.h"

namespace mxs_ascend {

constexpr int64_t kUskMaxTile = 1024;

int32_t UniqueSortedKeysTiling(int64_t numKeys, const AscendPlatform& p, UniqueSortedKeysTilingData& t);
int64_t UniqueSortedKeysUbBytes(int64_t T, int64_t usedAiv);
// total workspace (system + user) of a launch
uint64_t UniqueSortedKeysWorkspaceBytes(const UniqueSortedKeysTilingData& t);

}  // namespace mxs_ascend
