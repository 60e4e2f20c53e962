// mx_sparse._C functions about the CPU backend on this machine: which gather_mm kernel each
// dtype runs, and the large-tensor pool's statistics and settings (mx_sparse/runtime/cpu_memory.py).
#include <torch/extension.h>

#include <map>
#include <string>
#include "../module/module_parts.h"
#include "large_tensor_pool.h"

namespace mxs {
const char* gemm_float_isa();  // gemm_rows.h
bool amx_bf16_usable();        // gemm_rows_amx.h

namespace {
// Which CPU kernel each dtype's gather_mm runs on this machine (benchmarks and
// tests report it; float16 is always widened to float32).
std::map<std::string, std::string> cpu_gemm_kernels() {
  const std::string f32 = gemm_float_isa();
  return {{"float32", f32}, {"float16", f32}, {"bfloat16", amx_bf16_usable() ? "amx" : f32}};
}

std::map<std::string, int64_t> cpu_pool_stats() {
  const LargeTensorPoolStats s = large_tensor_pool_stats();
  return {{"live_bytes", s.live_bytes},         {"peak_live_bytes", s.peak_live_bytes},
          {"kept_bytes", s.kept_bytes},         {"touched_bytes", s.touched_bytes},
          {"reserved_bytes", s.reserved_bytes}, {"segments", s.segments},
          {"keep_limit_bytes", large_tensor_pool_keep_limit()}};
}
}  // namespace

void register_cpu_info_functions(pybind11::module_& m) {
  m.def("cpu_gemm_kernels", &cpu_gemm_kernels, "CPU gather_mm kernel per dtype on this machine");
  m.def("cpu_pool_stats", &cpu_pool_stats, "Bytes and counts of the CPU large-tensor pool");
  m.def("cpu_pool_release_cached", &large_tensor_pool_release_cached,
        "Return the CPU large-tensor pool's kept memory to the system");
  m.def("cpu_pool_set_keep_limit", &large_tensor_pool_set_keep_limit,
        "Bound (bytes) on the freed memory the pool keeps resident");
}

}  // namespace mxs
