// Python module entry of the compiled extension. Importing mx_sparse._C runs the
// static TORCH_LIBRARY registrations of every linked backend.
#include <torch/extension.h>

#include "cpu/large_tensor_pool.h"
#include "ops/op_args.h"
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
  // The output grids of the two conv map builders, with their argument checks (op_args.h):
  // the accelerator orchestration and the layers take them from here, so each check and
  // message exists once.
  m.def("conv_output_shape", [](const std::vector<int64_t>& spatial_shape, int64_t batch_size,
                                const std::vector<int64_t>& kernel_size, const std::vector<int64_t>& stride,
                                const std::vector<int64_t>& pads_begin, const std::vector<int64_t>& pads_end,
                                const std::vector<int64_t>& dilation) {
    const mxs::Grid in = mxs::make_grid(spatial_shape, batch_size);
    const mxs::ConvGeometry g = mxs::make_geometry(in.ndim, kernel_size, stride, pads_begin, dilation,
                                                   c10::IntArrayRef(pads_end));
    const mxs::Grid out = mxs::conv_output_grid(in, g, spatial_shape, batch_size);
    return std::vector<int64_t>(out.shape, out.shape + out.ndim);
  }, "Output spatial shape of a strided conv (checks the arguments like build_conv_map)");
  m.def("conv_transpose_output_shape", [](const std::vector<int64_t>& spatial_shape, int64_t batch_size,
                                          const std::vector<int64_t>& kernel_size, const std::vector<int64_t>& stride,
                                          const std::vector<int64_t>& pads_begin, const std::vector<int64_t>& pads_end,
                                          const std::vector<int64_t>& dilation,
                                          const std::vector<int64_t>& output_padding) {
    const mxs::Grid in = mxs::make_grid(spatial_shape, batch_size);
    const mxs::ConvGeometry g = mxs::make_geometry(in.ndim, kernel_size, stride, pads_begin, dilation,
                                                   c10::IntArrayRef(pads_end), "pads_begin");
    const mxs::Grid out = mxs::conv_transpose_output_grid(in, g, output_padding, spatial_shape, batch_size);
    return std::vector<int64_t>(out.shape, out.shape + out.ndim);
  }, "Output spatial shape of a transposed conv (checks the arguments like build_conv_transpose_map)");
}
