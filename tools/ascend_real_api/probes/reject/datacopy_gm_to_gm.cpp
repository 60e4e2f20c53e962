// DataCopy between two GlobalTensors: every DMA has a UB side.
#include "../reject_common.h"
REJECT_PROBE(probe) {
    (void)b;
    GlobalTensor<float> gf;
    gf.SetGlobalBuffer((__gm__ float*)g, 128);
    DataCopy(gf, gf[64], 64);
}
