// Python module entry of the compiled extension. Importing mx_sparse._C runs the
// static TORCH_LIBRARY registrations of every linked backend.
#include <torch/extension.h>

#include "cpu/env_switch.h"
#include "cpu/large_tensor_pool.h"
#include "ops/index_checks_generic.h"
#include "ops/transpose_map_generic.h"
#include "ops/voxelize_args.h"
#include "ops/voxelize_generic.h"

namespace mxs {
const char* gemm_float_isa();  // kernels/cpu/gemm_rows.h
bool amx_bf16_usable();        // kernels/cpu/gemm_rows_amx.h
}  // namespace mxs

namespace {
// Which CPU kernel each dtype's gather_mm runs on this machine (benchmarks and
// tests report it; float16 is always widened to float32).
std::map<std::string, std::string> cpu_gemm_kernels() {
  const std::string f32 = mxs::gemm_float_isa();
  return {{"float32", f32}, {"float16", f32}, {"bfloat16", mxs::amx_bf16_usable() ? "amx" : f32}};
}

std::vector<std::string> compiled_backends() {
  std::vector<std::string> b{"cpu"};
#ifdef MXS_WITH_CUDA
  b.push_back("cuda");
#endif
#ifdef MXS_WITH_NPU
  b.push_back("npu");
#endif
  return b;
}

// mxs::parse_switch with its c10::ValueError raised as Python's ValueError (also while the
// module initialises, before torch's translators would see it); raw == nullptr: unset.
bool checked_switch(const char* name, const char* raw, bool fallback) {
  try {
    return mxs::parse_switch(name, raw, fallback);
  } catch (const c10::ValueError& e) {
    throw py::value_error(e.what_without_backtrace());
  }
}

std::map<std::string, int64_t> cpu_pool_stats() {
  const mxs::LargeTensorPoolStats s = mxs::large_tensor_pool_stats();
  return {{"live_bytes", s.live_bytes},         {"peak_live_bytes", s.peak_live_bytes},
          {"kept_bytes", s.kept_bytes},         {"touched_bytes", s.touched_bytes},
          {"reserved_bytes", s.reserved_bytes}, {"segments", s.segments},
          {"keep_limit_bytes", mxs::large_tensor_pool_keep_limit()}};
}
}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "mx_sparse compiled operators (registered as torch.ops.mx_sparse.*)";
  // The kernels read these switches on first use; a value env_switch.h does not accept fails
  // the import here (ValueError naming the variable), not some later kernel call.
  for (const char* name : {"MXS_CPU_PORTABLE", "MXS_DISABLE_AMX", "MXS_CPU_POOL"}) checked_switch(name, std::getenv(name), false);
  m.def("env_switch", [](const std::string& name, bool fallback) {
    return checked_switch(name.c_str(), std::getenv(name.c_str()), fallback);
  }, "The on/off environment switch `name` (1/true/on/yes, 0/false/off/no; unset or empty: fallback); "
     "ValueError naming it for any other value", py::arg("name"), py::arg("fallback") = false);
  m.def("parse_switch", [](const std::string& name, std::optional<std::string> value, bool fallback) {
    return checked_switch(name.c_str(), value ? value->c_str() : nullptr, fallback);
  }, "env_switch's rules applied to `value` (None: unset)", py::arg("name"), py::arg("value"),
        py::arg("fallback") = false);
  m.def("compiled_backends", &compiled_backends, "Backends compiled into this build");
  m.def("cpu_gemm_kernels", &cpu_gemm_kernels, "CPU gather_mm kernel per dtype on this machine");
  m.def("cpu_pool_stats", &cpu_pool_stats, "Bytes and counts of the CPU large-tensor pool");
  m.def("cpu_pool_release_cached", &mxs::large_tensor_pool_release_cached,
        "Return the CPU large-tensor pool's kept memory to the system");
  m.def("cpu_pool_set_keep_limit", &mxs::large_tensor_pool_set_keep_limit,
        "Bound (bytes) on the freed memory the pool keeps resident");
  m.def("voxel_grid_extent", [](const std::vector<double>& voxel_size, const std::vector<double>& range) {
    const mxs::VoxelGrid g = mxs::make_voxel_grid(voxel_size, range);
    return std::vector<int64_t>(g.extent, g.extent + g.ndim);
  }, "Cells per point axis (x, y, z, ...) of the voxelization grid; checks the arguments like the ops");
  // The CUDA / NPU voxelization (torch operators), callable on CPU tensors for tests.
  m.def("voxelize_dynamic_generic", [](const at::Tensor& points, const std::optional<at::Tensor>& batch,
                                       const std::vector<double>& voxel_size, const std::vector<double>& range) {
    return mxs::voxelize_dynamic_generic(points, batch, voxel_size, range);
  });
  m.def("voxelize_hard_generic", [](const at::Tensor& points, const std::optional<at::Tensor>& batch,
                                    const std::vector<double>& voxel_size, const std::vector<double>& range,
                                    int64_t max_points, int64_t max_voxels) {
    return mxs::voxelize_hard_generic(points, batch, voxel_size, range, max_points, max_voxels);
  });
  // The NPU map builders' index checks (torch operators), callable on CPU tensors for tests.
  m.def("check_index_values_generic", [](const at::Tensor& indices, const std::vector<int64_t>& spatial_shape,
                                         int64_t batch_size) {
    const mxs::Grid grid = mxs::make_grid(spatial_shape, batch_size);
    mxs::check_indices(indices, grid.ndim);
    mxs::check_index_values_generic(indices, spatial_shape, batch_size);
  }, "Raises the CPU map builders' ValueError for rows outside the grid or duplicate voxels");
  m.def("transpose_map_generic", &mxs::transpose_map_generic,
        "The NPU binding's transpose_map (torch operators), callable on CPU tensors for tests");
}
