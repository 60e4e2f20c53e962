// Emulator version of CANN's CPU-debug entry points: a harness written for CANN's
// CPU-debug mode (ICPU_RUN_KF / GmAlloc / GmFree / SetKernelMode) compiles unchanged.
#pragma once
#include <cstddef>
#include "kernel_operator.h"

namespace AscendC {
inline void* GmAlloc(size_t bytes) { return AscendSim::gmAlloc(bytes); }
inline void GmFree(void* p) { AscendSim::gmFree(p); }
// AIV_MODE (default): blockDim vector cores. MIX_MODE: blockDim groups of 1 AIC + 2 AIV
// (2*blockDim AIV instances run the kernel; Matmul executes on their behalf).
inline void SetKernelMode(KernelMode m) { AscendSim::setKernelMode(m); }
}  // namespace AscendC

namespace AscendSim {
// Host-side queries of the configured SKU (ASCEND_SIM_SOC / ASCEND_SIM_AIC_NUM).
inline uint32_t GetCoreNumAic() { return platform().aicNum; }
inline uint32_t GetCoreNumAiv() { return platform().aivNum; }
inline uint64_t GetUbSize() { return platform().ubSize; }
}  // namespace AscendSim

#define ICPU_SET_TILING_KEY(key) ::AscendSim::setTilingKey(key)
#define ICPU_RUN_KF(func, blockdim, ...) ::AscendSim::launch(#func, (blockdim), [&]() { func(__VA_ARGS__); })
