// Gather with int32 offsets: the offset tensor is LocalTensor<uint32_t>.
#include "../reject_common.h"
REJECT_PROBE(probe) {
    (void)g;
    LocalTensor<int32_t> i = b.Get<int32_t>();
    Gather(i, i[64], i[128], (uint32_t)0, (uint32_t)64);
}
