// MXS_CPU_PORTABLE=1 in the environment (read once, when the extension loads;
// values as env_switch.h parses them)
// keeps every CPU kernel on its portable C++ path: no AVX-512, AMX or POPCNT
// paths, whatever the CPU has. What a CPU without those extensions runs can then be
// tested on one that has them (tests/test_portable_kernels.py).
#pragma once
#include "env_switch.h"

namespace mxs {

inline bool portable_kernels_only() {
  // read by static initialisers too: not throwing (an invalid value fails the import instead)
  static const bool only = env_switch_nothrow("MXS_CPU_PORTABLE", false, true);
  return only;
}

}  // namespace mxs
