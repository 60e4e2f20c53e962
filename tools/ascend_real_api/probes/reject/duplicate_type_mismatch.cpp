// Duplicate of an int literal into a float tensor: the value's type must be the tensor's.
#include "../reject_common.h"
REJECT_PROBE(probe) {
    (void)g;
    LocalTensor<float> f = b.Get<float>();
    Duplicate(f, 0, 64);
}
