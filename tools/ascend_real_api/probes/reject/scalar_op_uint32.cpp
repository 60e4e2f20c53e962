// Mins on uint32: tensor-scalar arithmetic supports half / float / int16 / int32 only (static_assert).
#include "../reject_common.h"
REJECT_PROBE(probe) {
    (void)g;
    LocalTensor<uint32_t> u = b.Get<uint32_t>();
    Mins(u, u, (uint32_t)1, 64);
}
