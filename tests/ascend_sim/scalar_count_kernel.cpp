// Kernels of the scalar-block counter test (test_ascend_sim_scalar_count.py), in their own
// translation unit so that cpu_debug_build.sh -k instruments them as kernel code:
//   k_scalar_loop  the work is a scalar loop over every UB element (blocks must grow with n);
//   k_vector_only  the same amount of data through vector instructions only, per tile
//                  (blocks must depend on the number of tiles, never on the tile size).
#include "kernel_operator.h"
using namespace AscendC;

struct ScalarCountTiling {
    uint32_t n;      // elements of x
    uint32_t tile;   // elements per tile (k_vector_only), multiple of 64
};

// y[0] = number of positive x, y[1] = their sum: one GetValue and one branch per element.
extern "C" __global__ __aicore__ void k_scalar_loop(GM_ADDR x, GM_ADDR y, GM_ADDR tiling) {
    REGISTER_TILING_DEFAULT(ScalarCountTiling);
    GET_TILING_DATA_WITH_STRUCT(ScalarCountTiling, t, tiling);
    GlobalTensor<float> xg, yg;
    xg.SetGlobalBuffer((__gm__ float*)x, t.n);
    yg.SetGlobalBuffer((__gm__ float*)y, 8);
    TPipe pipe;
    TBuf<TPosition::VECCALC> inBuf, outBuf;
    pipe.InitBuffer(inBuf, t.n * sizeof(float));
    pipe.InitBuffer(outBuf, 32);
    LocalTensor<float> in = inBuf.Get<float>(), out = outBuf.Get<float>();
    DataCopy(in, xg, t.n);
    float count = 0.0f, sum = 0.0f;
    for (uint32_t i = 0; i < t.n; ++i) {
        const float v = in.GetValue(i);
        if (v > 0.0f) {
            count += 1.0f;
            sum += v;
        }
    }
    out.SetValue(0, count);
    out.SetValue(1, sum);
    DataCopy(yg, out, 8);
}

namespace {

// Per tile: c = Select(x > 0, (x + 1) * 2, 0) round-tripped through half, y = c reversed
// (Gather with host-given byte offsets), sums[tile * 8] = ReduceSum(c), plus a GatherMask of
// the even lanes (its result is discarded: it only adds one more API to the tile).
class VectorOnly {
public:
    __aicore__ inline void Run(GM_ADDR x, GM_ADDR offs, GM_ADDR y, GM_ADDR sums, const ScalarCountTiling& t) {
        const uint32_t tiles = t.n / t.tile, mine = tiles / GetBlockNum(), first = GetBlockIdx() * mine;
        tile_ = t.tile;
        xg_.SetGlobalBuffer((__gm__ float*)x, t.n);
        offg_.SetGlobalBuffer((__gm__ uint32_t*)offs, t.tile);
        yg_.SetGlobalBuffer((__gm__ float*)y, t.n);
        sumg_.SetGlobalBuffer((__gm__ float*)sums, tiles * 8);
        pipe_.InitBuffer(aBuf_, tile_ * 4);
        pipe_.InitBuffer(bBuf_, tile_ * 4);
        pipe_.InitBuffer(hBuf_, tile_ * 2);
        pipe_.InitBuffer(maskBuf_, tile_ / 8);
        pipe_.InitBuffer(offBuf_, tile_ * 4);
        pipe_.InitBuffer(sumBuf_, 32);
        pipe_.InitBuffer(tmpBuf_, tile_ * 4);
        DataCopy(offBuf_.Get<uint32_t>(), offg_, tile_);
        for (uint32_t i = 0; i < mine; ++i) Tile(first + i);
    }

private:
    __aicore__ inline void Tile(uint32_t k) {
        LocalTensor<float> a = aBuf_.Get<float>(), b = bBuf_.Get<float>(), s = sumBuf_.Get<float>();
        LocalTensor<float> tmp = tmpBuf_.Get<float>();
        LocalTensor<half> h = hBuf_.Get<half>();
        LocalTensor<uint8_t> mask = maskBuf_.Get<uint8_t>();
        DataCopy(a, xg_[(uint64_t)k * tile_], tile_);
        PipeBarrier<PIPE_ALL>();
        Adds(b, a, 1.0f, tile_);
        Muls(b, b, 2.0f, tile_);
        CompareScalar(mask, a, 0.0f, CMPMODE::GT, tile_);
        Select(b, mask, b, 0.0f, SELMODE::VSEL_TENSOR_SCALAR_MODE, tile_);
        Cast(h, b, RoundMode::CAST_NONE, tile_);
        Cast(b, h, RoundMode::CAST_NONE, tile_);
        Gather(a, b, offBuf_.Get<uint32_t>(), 0, tile_);
        ReduceSum(s, b, tmp, tile_);
        uint64_t kept = 0;
        GatherMask(tmp, b, (uint8_t)1, false, 0, GatherMaskParams(1, (uint16_t)(tile_ / 64), 8, 0), kept);
        PipeBarrier<PIPE_ALL>();
        DataCopy(yg_[(uint64_t)k * tile_], a, tile_);
        DataCopy(sumg_[(uint64_t)k * 8], s, 8);
        PipeBarrier<PIPE_ALL>();
    }

    TPipe pipe_;
    TBuf<TPosition::VECCALC> aBuf_, bBuf_, hBuf_, maskBuf_, offBuf_, sumBuf_, tmpBuf_;
    GlobalTensor<float> xg_, yg_, sumg_;
    GlobalTensor<uint32_t> offg_;
    uint32_t tile_ = 0;
};

}  // namespace

extern "C" __global__ __aicore__ void k_vector_only(GM_ADDR x, GM_ADDR offs, GM_ADDR y, GM_ADDR sums, GM_ADDR tiling) {
    REGISTER_TILING_DEFAULT(ScalarCountTiling);
    GET_TILING_DATA_WITH_STRUCT(ScalarCountTiling, t, tiling);
    VectorOnly op;
    op.Run(x, offs, y, sums, t);
}
