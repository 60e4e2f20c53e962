// Writing to the tiling struct: GET_TILING_DATA* declares it const (the op compiler's generated form).
#include "kernel_operator.h"
using namespace AscendC;
struct ProbeTiling {
    int32_t rows;
    int32_t pad;
};
extern "C" __global__ __aicore__ void probe(GM_ADDR g, GM_ADDR tiling) {
    GET_TILING_DATA_WITH_STRUCT(ProbeTiling, t, tiling);
    t.rows = 1;
    GlobalTensor<int32_t> gi;
    gi.SetGlobalBuffer((__gm__ int32_t*)g, 64);
    gi.SetValue(0, t.rows);
}
