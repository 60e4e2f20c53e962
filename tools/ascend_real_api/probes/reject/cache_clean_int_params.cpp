// DataCacheCleanAndInvalid takes CacheLine / DcciDst enum class template arguments, not integers.
#include "../reject_common.h"
REJECT_PROBE(probe) {
    (void)b;
    GlobalTensor<int32_t> gi;
    gi.SetGlobalBuffer((__gm__ int32_t*)g, 64);
    DataCacheCleanAndInvalid<int32_t, 0, 2>(gi);
}
