// Python module entry of the compiled extension. Importing mx_sparse._C runs the
// static TORCH_LIBRARY registrations of every linked backend.
#include <torch/extension.h>

#include "ops/module_parts.h"
#include "ops/voxelize_args.h"
#include "ops/voxelize_generic.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "mx_sparse compiled operators (registered as torch.ops.mx_sparse.*)";
  mxs::register_env_switch_functions(m);  // first: a bad switch value fails the import
  mxs::register_cpu_info_functions(m);
  mxs::register_contract_functions(m);
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
}
