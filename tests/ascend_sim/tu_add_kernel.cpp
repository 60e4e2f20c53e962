// A CANN-style vector kernel in its own translation unit (double-buffered TQue pipeline over
// tiles, big/small core split); built together with tu_add_harness.cpp.
#include "kernel_operator.h"
using namespace AscendC;

constexpr int32_t BUFFER_NUM = 2;
constexpr int32_t TILE = 64;

class KernelAdd {
public:
    __aicore__ inline void Init(GM_ADDR x, GM_ADDR y, GM_ADDR z, uint32_t total) {
        uint32_t cores = GetBlockNum(), idx = GetBlockIdx();
        uint32_t tiles = total / TILE, base = tiles / cores, big = tiles % cores;
        myTiles = base + (idx < big ? 1 : 0);
        uint32_t first = idx * base + (idx < big ? idx : big);
        xg.SetGlobalBuffer((__gm__ float*)x + first * TILE, myTiles * TILE);
        yg.SetGlobalBuffer((__gm__ float*)y + first * TILE, myTiles * TILE);
        zg.SetGlobalBuffer((__gm__ float*)z + first * TILE, myTiles * TILE);
        pipe.InitBuffer(inX, BUFFER_NUM, TILE * sizeof(float));
        pipe.InitBuffer(inY, BUFFER_NUM, TILE * sizeof(float));
        pipe.InitBuffer(outZ, BUFFER_NUM, TILE * sizeof(float));
    }
    __aicore__ inline void Process() {
        for (uint32_t i = 0; i < myTiles; ++i) {
            LocalTensor<float> a = inX.AllocTensor<float>(), b = inY.AllocTensor<float>();
            DataCopy(a, xg[i * TILE], TILE);
            DataCopy(b, yg[i * TILE], TILE);
            inX.EnQue(a); inY.EnQue(b);
            a = inX.DeQue<float>(); b = inY.DeQue<float>();
            LocalTensor<float> c = outZ.AllocTensor<float>();
            Add(c, a, b, TILE);
            outZ.EnQue<float>(c);
            inX.FreeTensor(a); inY.FreeTensor(b);
            c = outZ.DeQue<float>();
            DataCopy(zg[i * TILE], c, TILE);
            outZ.FreeTensor(c);
        }
    }
private:
    TPipe pipe;
    TQue<QuePosition::VECIN, BUFFER_NUM> inX, inY;
    TQue<QuePosition::VECOUT, BUFFER_NUM> outZ;
    GlobalTensor<float> xg, yg, zg;
    uint32_t myTiles = 0;
};

extern "C" __global__ __aicore__ void add_custom(GM_ADDR x, GM_ADDR y, GM_ADDR z, GM_ADDR workspace, GM_ADDR tiling) {
    (void)workspace;
    uint32_t total;
    std::memcpy(&total, tiling, sizeof(total));
    KernelAdd op;
    op.Init(x, y, z, total);
    op.Process();
}
