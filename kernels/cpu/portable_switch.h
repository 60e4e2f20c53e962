// MXS_CPU_PORTABLE=1 in the environment (read once, when the extension loads)
// keeps every CPU kernel on its portable C++ path: no AVX-512, AMX or POPCNT
// paths, whatever the CPU has. What a CPU without those extensions runs can then be
// tested on one that has them (tests/test_portable_kernels.py).
#pragma once
#include <cstdlib>
#include <cstring>

namespace mxs {

inline bool portable_kernels_only() {
  static const bool only = [] {
    const char* v = std::getenv("MXS_CPU_PORTABLE");
    return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
  }();
  return only;
}

}  // namespace mxs
