// Duplicate of int64: supported are 16- and 32-bit types (static_assert).
#include "../reject_common.h"
REJECT_PROBE(probe) {
    (void)g;
    LocalTensor<int64_t> l = b.Get<int64_t>();
    Duplicate(l, (int64_t)0, 64);
}
