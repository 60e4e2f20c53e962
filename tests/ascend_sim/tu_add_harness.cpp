// CPU-debug harness in the CANN style (only tikicpulib.h + the kernel declaration).
#include <cstdio>
#include <cstring>
#include "tikicpulib.h"
extern "C" __global__ __aicore__ void add_custom(GM_ADDR x, GM_ADDR y, GM_ADDR z, GM_ADDR workspace, GM_ADDR tiling);

int main() {
    const uint32_t total = 64 * 53;
    size_t bytes = total * sizeof(float);
    uint8_t* x = (uint8_t*)AscendC::GmAlloc(bytes);
    uint8_t* y = (uint8_t*)AscendC::GmAlloc(bytes);
    uint8_t* z = (uint8_t*)AscendC::GmAlloc(bytes);
    uint8_t* ws = (uint8_t*)AscendC::GmAlloc(32);
    uint8_t* tiling = (uint8_t*)AscendC::GmAlloc(sizeof(uint32_t));
    std::memcpy(tiling, &total, sizeof(total));
    for (uint32_t i = 0; i < total; ++i) { ((float*)x)[i] = (float)i; ((float*)y)[i] = 0.5f * i; }
    uint32_t blockDim = AscendSim::GetCoreNumAiv();
    AscendC::SetKernelMode(KernelMode::AIV_MODE);
    ICPU_RUN_KF(add_custom, blockDim, x, y, z, ws, tiling);
    int bad = 0;
    for (uint32_t i = 0; i < total; ++i) bad += ((float*)z)[i] != 1.5f * i;
    AscendC::GmFree(x); AscendC::GmFree(y); AscendC::GmFree(z); AscendC::GmFree(ws); AscendC::GmFree(tiling);
    std::printf("mismatches %d\n", bad);
    if (bad == 0) std::printf("ALL OK\n");
    return bad != 0;
}
