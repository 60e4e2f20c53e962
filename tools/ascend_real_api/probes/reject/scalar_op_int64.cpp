// Muls on int64: tensor-scalar arithmetic supports half / float / int16 / int32 only (static_assert).
#include "../reject_common.h"
REJECT_PROBE(probe) {
    (void)g;
    LocalTensor<int64_t> l = b.Get<int64_t>();
    Muls(l, l, (int64_t)2, 64);
}
