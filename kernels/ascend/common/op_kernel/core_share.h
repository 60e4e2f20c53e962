// Big/small balancing of work items over the AIV cores of a launch, shared by every kernel:
// core c takes one contiguous range, and the first `items % cores` cores take one item more.
#pragma once
#include "kernel_operator.h"

struct CoreShare {
    int64_t first;  // first item of this core
    int64_t count;  // items of this core
};

__aicore__ inline CoreShare ShareOfCore(int64_t items, int64_t cores, int64_t core)
{
    const int64_t base = items / cores, extra = items % cores;
    return {core * base + (core < extra ? core : extra), base + (core < extra ? 1 : 0)};
}
