// The BatchNorm+ReLU row loops (batch_norm_relu_rows.h) compiled for AVX-512.
// Only called after the run-time CPU check in batch_norm_relu_cpu.cpp.
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512dq,avx512bw,fma")
#include "batch_norm_relu_rows.h"

namespace mxs {

const BatchNormRows<float>& batch_norm_rows_avx512_float() { return batch_norm_rows_here<float>(); }
const BatchNormRows<bf16_bits>& batch_norm_rows_avx512_bf16() { return batch_norm_rows_here<bf16_bits>(); }

}  // namespace mxs

#pragma GCC pop_options
#endif
