// GlobalTensor has no ReinterpretCast (LocalTensor has): a second GM view is a second SetGlobalBuffer.
#include "../reject_common.h"
REJECT_PROBE(probe) {
    GlobalTensor<int32_t> gi;
    gi.SetGlobalBuffer((__gm__ int32_t*)g, 64);
    GlobalTensor<float> gf = gi.ReinterpretCast<float>();
    LocalTensor<float> f = b.Get<float>();
    DataCopy(f, gf, 64);
}
