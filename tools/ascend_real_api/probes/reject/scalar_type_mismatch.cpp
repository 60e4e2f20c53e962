// Adds with an int literal on a float tensor: the scalar's type must be the tensor's (deduced from both).
#include "../reject_common.h"
REJECT_PROBE(probe) {
    (void)g;
    LocalTensor<float> f = b.Get<float>();
    Adds(f, f, 1, 64);
}
