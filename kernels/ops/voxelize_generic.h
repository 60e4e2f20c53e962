// Voxelization written with torch's own tensor operators (sort, cumsum,
// index_put, ...), for devices without a voxelization kernel of ours: it is the
// CUDA and the NPU (PrivateUse1) implementation of voxelize_hard / voxelize_dynamic.
// Exposed to Python as mx_sparse._C.voxelize_*_generic so tests run this exact
// code on CPU tensors and compare it with the CPU kernel.
#pragma once
#include <torch/types.h>
#include <optional>
#include <tuple>

namespace mxs {

std::tuple<at::Tensor, at::Tensor, at::Tensor> voxelize_dynamic_generic(
    const at::Tensor& points, const std::optional<at::Tensor>& batch, c10::ArrayRef<double> voxel_size,
    c10::ArrayRef<double> point_cloud_range);

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> voxelize_hard_generic(
    const at::Tensor& points, const std::optional<at::Tensor>& batch, c10::ArrayRef<double> voxel_size,
    c10::ArrayRef<double> point_cloud_range, int64_t max_points, int64_t max_voxels);

}  // namespace mxs
