// Harness of scalar_count_kernel.cpp (CANN CPU-debug style):
//   scalar_count scalar N            k_scalar_loop on 1 core
//   scalar_count vector N TILE CORES k_vector_only on CORES vector cores (N/TILE tiles, split evenly)
// Checks the kernel results against host loops and prints "ALL OK"; the counters go to
// ASCEND_SIM_STATS, set by the test.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include "tikicpulib.h"

struct ScalarCountTiling { uint32_t n; uint32_t tile; };
extern "C" __global__ __aicore__ void k_scalar_loop(GM_ADDR x, GM_ADDR y, GM_ADDR tiling);
extern "C" __global__ __aicore__ void k_vector_only(GM_ADDR x, GM_ADDR offs, GM_ADDR y, GM_ADDR sums, GM_ADDR tiling);

namespace {

// small integers of both signs (exact in half and float); period 16 divides every test size, so
// the data-dependent branch of k_scalar_loop is taken the same fraction of times for every n
float input(uint32_t i) { return static_cast<float>(static_cast<int>(i % 16) - 7); }

uint8_t* tilingGm(uint32_t n, uint32_t tile) {
    ScalarCountTiling t{n, tile};
    auto* p = static_cast<uint8_t*>(AscendC::GmAlloc(sizeof(t)));
    std::memcpy(p, &t, sizeof(t));
    return p;
}

int runScalar(uint32_t n) {
    auto* x = static_cast<float*>(AscendC::GmAlloc(n * 4));
    auto* y = static_cast<float*>(AscendC::GmAlloc(32));
    float count = 0, sum = 0;
    for (uint32_t i = 0; i < n; ++i) {
        x[i] = input(i);
        if (x[i] > 0) { count += 1; sum += x[i]; }
    }
    ICPU_RUN_KF(k_scalar_loop, 1, (uint8_t*)x, (uint8_t*)y, tilingGm(n, 0));
    if (y[0] != count || y[1] != sum) {
        std::printf("k_scalar_loop: got %g %g expected %g %g\n", y[0], y[1], count, sum);
        return 1;
    }
    return 0;
}

int runVector(uint32_t n, uint32_t tile, uint32_t cores) {
    const uint32_t tiles = n / tile;
    auto* x = static_cast<float*>(AscendC::GmAlloc(n * 4));
    auto* offs = static_cast<uint32_t*>(AscendC::GmAlloc(tile * 4));
    auto* y = static_cast<float*>(AscendC::GmAlloc(n * 4));
    auto* sums = static_cast<float*>(AscendC::GmAlloc(tiles * 32));
    for (uint32_t i = 0; i < n; ++i) x[i] = input(i);
    for (uint32_t i = 0; i < tile; ++i) offs[i] = (tile - 1 - i) * 4;   // reverse the tile
    ICPU_RUN_KF(k_vector_only, cores, (uint8_t*)x, (uint8_t*)offs, (uint8_t*)y, (uint8_t*)sums, tilingGm(n, tile));
    int bad = 0;
    for (uint32_t k = 0; k < tiles; ++k) {
        float s = 0;
        for (uint32_t i = 0; i < tile; ++i) {
            const float xi = x[k * tile + i], c = xi > 0 ? (xi + 1) * 2 : 0;
            s += c;
            bad += y[k * tile + (tile - 1 - i)] != c;
        }
        bad += sums[k * 8] != s;
    }
    if (bad) std::printf("k_vector_only: %d mismatches\n", bad);
    return bad != 0;
}

}  // namespace

int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "";
    int rc = 2;
    if (mode == "scalar" && argc == 3) rc = runScalar(std::strtoul(argv[2], nullptr, 10));
    if (mode == "vector" && argc == 5)
        rc = runVector(std::strtoul(argv[2], nullptr, 10), std::strtoul(argv[3], nullptr, 10),
                       std::strtoul(argv[4], nullptr, 10));
    if (rc == 2) std::fprintf(stderr, "usage: scalar_count scalar N | vector N TILE CORES\n");
    if (rc == 0) std::printf("ALL OK\n");
    return rc;
}
