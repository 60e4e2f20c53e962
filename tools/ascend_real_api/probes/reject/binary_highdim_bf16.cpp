// Add on bfloat16 in the high-dimensional (mask, repeat) form: half / float / int16 / int32 only (static_assert).
#include "../reject_common.h"
REJECT_PROBE(probe) {
    (void)g;
    LocalTensor<bfloat16_t> h = b.Get<bfloat16_t>();
    Add(h, h, h, (uint64_t)128, 1, BinaryRepeatParams());
}
