// mx_sparse._C.contract: the checks and rules of op_args.h, pool_args.h, packed_map_args.h,
// transpose_map_args.h, batch_norm_relu_args.h, voxelize_args.h, key_packing.h and index_errors.h
// (and through them kernels/common) as Python functions, so that the Python layer, the compat
// surfaces and the accelerator launch code apply the same contract with the same messages as
// the C++ kernels instead of a copy (mx_sparse/_core/contract.py is their Python face). Every error
// is a TORCH_CHECK_VALUE, a ValueError in Python.
#include <torch/extension.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>
#include "batch_norm_relu_args.h"
#include "index_errors.h"
#include "key_packing.h"
#include "../module/module_parts.h"
#include "op_args.h"
#include "packed_map_args.h"
#include "pool_args.h"
#include "transpose_map_args.h"
#include "voxelize_args.h"

namespace mxs {
namespace {

using Values = std::vector<int64_t>;

at::OptionalIntArrayRef pads_end_ref(const std::optional<Values>& pads_end) {
  if (!pads_end.has_value()) return c10::nullopt;
  return c10::IntArrayRef(*pads_end);
}

Values grid_shape(const Values& spatial_shape, int64_t batch_size) {
  make_grid(spatial_shape, batch_size);
  return spatial_shape;
}

Values per_axis(const std::string& name, const Values& values, int64_t ndim, int64_t minimum) {
  Values out(values.size());
  fill_axis_arg(name.c_str(), values, static_cast<int>(ndim), minimum, out.data());
  return out;
}

// Unchecked extents of arguments the caller has checked (strides >= 1 still required, or
// the floor division would divide by zero). pads_end defaults to padding (symmetric).
Values conv_output_extent(const Values& shape, const Values& kernel, const Values& stride, const Values& padding,
                          const Values& dilation, const std::optional<Values>& pads_end) {
  const ConvGeometry g = geometry_of(kernel, stride, padding, dilation, pads_end_ref(pads_end));
  TORCH_CHECK_VALUE(shape.size() == kernel.size(), "spatial_shape: expected ", g.ndim, " values like kernel_size, got ",
                    list_str(shape));
  Values out(g.ndim);
  for (int d = 0; d < g.ndim; ++d) {
    TORCH_CHECK_VALUE(g.stride[d] >= 1, "stride: expected every value >= 1, got ", list_str(stride));
    out[d] = conv_out_extent(shape[d], g.kernel[d], g.stride[d], g.padding[d], g.pads_end[d], g.dilation[d]);
  }
  return out;
}

// _conv_out_keys' lattice per axis of checked arguments (strides and dilations >= 1): [slots
// (conv_out_slots), step (conv_lattice_step), gcd(stride, dilation)] for each axis.
std::vector<Values> conv_lattice_per_axis(const Values& kernel, const Values& stride, const Values& dilation) {
  TORCH_CHECK_VALUE(stride.size() == kernel.size() && dilation.size() == kernel.size(),
                    "kernel_size, stride, dilation: expected one value per axis each, got ", list_str(kernel), ", ",
                    list_str(stride), ", ", list_str(dilation));
  std::vector<Values> out(kernel.size());
  for (size_t d = 0; d < kernel.size(); ++d) {
    TORCH_CHECK_VALUE(stride[d] >= 1 && dilation[d] >= 1, "stride, dilation: expected every value >= 1, got ",
                      list_str(stride), ", ", list_str(dilation));
    out[d] = {conv_out_slots(kernel[d], stride[d], dilation[d]), conv_lattice_step(stride[d], dilation[d]),
              gcd_positive(stride[d], dilation[d])};
  }
  return out;
}

Values conv_transpose_output_extent(const Values& shape, const Values& kernel, const Values& stride,
                                    const Values& pads_begin, const Values& pads_end, const Values& dilation,
                                    const Values& output_padding) {
  const ConvGeometry g = geometry_of(kernel, stride, pads_begin, dilation, c10::IntArrayRef(pads_end));
  TORCH_CHECK_VALUE(shape.size() == kernel.size() && output_padding.size() == kernel.size(),
                    "spatial_shape, output_padding: expected ", g.ndim, " values each like kernel_size");
  Values out(g.ndim);
  for (int d = 0; d < g.ndim; ++d)
    out[d] = conv_transpose_out_extent(shape[d], g.kernel[d], g.stride[d], g.padding[d], g.pads_end[d],
                                       g.dilation[d], output_padding[d]);
  return out;
}

// The checked output grid of a strided conv (conv_output_grid) of checked arguments; the
// geometry is checked like build_conv_map's (pads_end: its optional argument).
Values conv_output_shape(const Values& shape, const Values& kernel, const Values& stride, const Values& padding,
                         const Values& dilation, int64_t batch_size, const std::optional<Values>& pads_end) {
  const Grid in = make_grid(shape, batch_size);
  const ConvGeometry g = make_geometry(in.ndim, kernel, stride, padding, dilation, pads_end_ref(pads_end));
  const Grid out = conv_output_grid(in, g, shape, batch_size);
  return Values(out.shape, out.shape + out.ndim);
}

// The checked output grid of a transposed conv (conv_transpose_output_grid), with
// build_conv_transpose_map's argument names and checks.
Values conv_transpose_output_shape(const Values& shape, const Values& kernel, const Values& stride,
                                   const Values& pads_begin, const Values& pads_end, const Values& dilation,
                                   const Values& output_padding, int64_t batch_size) {
  const Grid in = make_grid(shape, batch_size);
  const ConvGeometry g = make_geometry(in.ndim, kernel, stride, pads_begin, dilation, c10::IntArrayRef(pads_end),
                                       "pads_begin");
  const Grid out = conv_transpose_output_grid(in, g, output_padding, shape, batch_size);
  return Values(out.shape, out.shape + out.ndim);
}

// The output grid build_conv_map_at checks out_indices against (conv_map_at_output_grid), with
// its argument names and checks.
Values conv_map_at_output_shape(const Values& shape, const Values& kernel, const Values& stride,
                                const Values& pads_begin, const Values& dilation, int64_t batch_size, bool transposed,
                                const std::optional<Values>& out_spatial_shape) {
  const Grid in = make_grid(shape, batch_size);
  const ConvGeometry g = make_geometry(in.ndim, kernel, stride, pads_begin, dilation, c10::nullopt, "pads_begin");
  const Grid out = conv_map_at_output_grid(in, g, pads_end_ref(out_spatial_shape), transposed, batch_size);
  return Values(out.shape, out.shape + out.ndim);
}

void same_device(const std::string& reference_name, const at::Tensor& reference,
                 const std::vector<std::pair<std::string, std::optional<at::Tensor>>>& tensors) {
  std::vector<NamedTensor> named;
  for (const auto& [name, t] : tensors) named.emplace_back(name.c_str(), t.has_value() ? &*t : nullptr);
  check_same_device(reference_name.c_str(), reference, named);
}

std::pair<int64_t, int64_t> per_group(const GatherShape& s) { return {s.cin_g, s.cout_g}; }

}  // namespace

void register_contract_functions(pybind11::module_& module) {
  namespace py = pybind11;
  py::module_ m = module.def_submodule("contract", "The argument checks and rules every backend shares "
                                                   "(kernels/contract/op_args.h, kernels/common); see mx_sparse._core.contract");
  m.attr("INT32_MAX") = int64_t{INT32_MAX};
  m.attr("INT64_MAX") = int64_t{INT64_MAX};
  m.attr("MAX_SPATIAL_DIMS") = int64_t{kMaxSpatialDims};
  m.attr("MAX_GEOMETRY_VALUE") = kMaxGeometryValue;
  m.attr("MAX_KERNEL_VOLUME") = kMaxKernelVolume;
  m.def("grid", &grid_shape, py::arg("spatial_shape"), py::arg("batch_size"));
  m.def("per_axis", &per_axis, py::arg("name"), py::arg("values"), py::arg("ndim"), py::arg("minimum"));
  m.def("kernel_volume", [](const Values& k) { return checked_kernel_volume(k); }, py::arg("kernel_size"));
  m.def("conv_output_shape", &conv_output_shape, py::arg("shape"), py::arg("kernel"), py::arg("stride"),
        py::arg("padding"), py::arg("dilation"), py::arg("batch_size"), py::arg("pads_end") = py::none());
  m.def("conv_transpose_output_shape", &conv_transpose_output_shape, py::arg("shape"), py::arg("kernel"),
        py::arg("stride"), py::arg("pads_begin"), py::arg("pads_end"), py::arg("dilation"),
        py::arg("output_padding"), py::arg("batch_size"));
  m.def("conv_map_at_output_shape", &conv_map_at_output_shape, py::arg("shape"), py::arg("kernel"),
        py::arg("stride"), py::arg("pads_begin"), py::arg("dilation"), py::arg("batch_size"), py::arg("transposed"),
        py::arg("out_spatial_shape") = py::none());
  m.def("conv_output_extent", &conv_output_extent, py::arg("shape"), py::arg("kernel"), py::arg("stride"),
        py::arg("padding"), py::arg("dilation"), py::arg("pads_end") = py::none());
  m.def("conv_transpose_output_extent", &conv_transpose_output_extent);
  m.def("conv_lattice", &conv_lattice_per_axis);
  m.def("indices", [](const at::Tensor& t, int64_t ndim, const std::string& name) {
    check_index_layout(t, static_cast<int>(ndim), name.c_str());
  }, py::arg("t"), py::arg("ndim"), py::arg("name") = "indices");
  m.def("row_count", [](int64_t n, const std::string& name) { check_row_count(n, name.c_str()); }, py::arg("n"),
        py::arg("name") = "indices");
  m.def("neighbor_map", [](const at::Tensor& t, const std::string& name) { check_map(t, name.c_str()); });
  m.def("float_tensor", [](const at::Tensor& t, const std::string& name) { check_float(t, name.c_str()); });
  m.def("same_device", &same_device);
  m.def("voxel_grid_extent", [](const std::vector<double>& voxel_size, const std::vector<double>& range) {
    const VoxelGrid g = make_voxel_grid(voxel_size, range);
    return Values(g.extent, g.extent + g.ndim);
  }, "Cells per point axis (x, y, z, ...) of the voxelization grid; checks the arguments like the ops");
  m.def("pool_offset_dtype", &pool_offset_dtype, py::arg("kvol"));
  m.def("pool_operands", [](const at::Tensor& features, const at::Tensor& nbr) { check_pool_args(features, nbr); });
  m.def("pool_backward_operands", [](const at::Tensor& grad, const std::optional<at::Tensor>& argmax,
                                     const at::Tensor& nbr, int64_t num_rows) {
    check_pool_backward_args(grad, argmax.has_value() ? &*argmax : nullptr, nbr, num_rows);
  });
  m.attr("PACK_ROWS_PER_BLOCK") = kPackRowsPerBlock;
  m.attr("PACK_LANES") = kPackLanes;
  m.def("pack_map_operands", [](const at::Tensor& nbr) { check_pack_map_args(nbr); });
  m.def("pack_map_entries", &check_pack_map_entries, py::arg("bad_entry"), py::arg("bad_value"), py::arg("kvol"));
  m.def("unpack_map_operands", &check_unpack_map_args, py::arg("mask"), py::arg("values"), py::arg("block_starts"),
        py::arg("kvol"));
  m.def("unpack_map_starts", &check_unpack_map_starts, py::arg("first"), py::arg("last"), py::arg("total"),
        py::arg("decreasing_block"), py::arg("nblocks"));
  m.def("unpack_map_mask", &check_unpack_map_mask, py::arg("spare_row"), py::arg("mismatch_block"), py::arg("m"),
        py::arg("kvol"));
  m.def("batch_norm_relu_forward_operands", &check_batch_norm_relu_forward_args, py::arg("input"),
        py::arg("weight"), py::arg("bias"), py::arg("running_mean"), py::arg("running_var"), py::arg("batch_stats"),
        py::arg("half_ok") = false);
  m.def("scale_shift_relu_operands", &check_scale_shift_relu_args, py::arg("input"), py::arg("scale"),
        py::arg("shift"), py::arg("half_ok") = false);
  m.def("batch_norm_relu_backward_operands", &check_batch_norm_relu_backward_args, py::arg("grad"),
        py::arg("input"), py::arg("mean"), py::arg("invstd"), py::arg("weight"), py::arg("scale"), py::arg("shift"),
        py::arg("half_ok") = false);
  m.def("transpose_map_operands", &check_transpose_map_args, py::arg("nbr"), py::arg("num_rows"));
  m.def("transpose_map_rows", &check_transpose_map_rows, py::arg("bad_row"), py::arg("m"), py::arg("num_rows"));
  m.def("transpose_map_named_twice", &raise_named_twice, py::arg("earlier"), py::arg("row"), py::arg("input_row"),
        py::arg("offset"));
  m.def("gather_operands", [](const at::Tensor& features, const std::string& name, const at::Tensor& operand,
                              const at::Tensor& nbr, const std::optional<at::Tensor>& nbr_t, int64_t groups) {
    check_gather_call(features, name.c_str(), operand, nbr, nbr_t, groups);
  });
  m.def("gather_mm_shapes", [](const at::Tensor& features, const at::Tensor& weight, const at::Tensor& nbr,
                               const std::optional<at::Tensor>& nbr_t, int64_t groups) {
    return per_group(check_gather_mm_args(features, weight, nbr, nbr_t, groups));
  });
  m.def("backprop_filter_shapes", [](const at::Tensor& features, const at::Tensor& grad, const at::Tensor& nbr,
                                     const std::optional<at::Tensor>& nbr_t, int64_t groups) {
    return per_group(check_backprop_filter_args(features, grad, nbr, nbr_t, groups));
  });
  m.def("gather_mm_activation", &check_gather_mm_activation, py::arg("features"), py::arg("source"),
        py::arg("source_scale"), py::arg("source_shift"), py::arg("half_ok") = false);
  m.def("backprop_filter_activation", &check_backprop_filter_activation, py::arg("features"), py::arg("scale"),
        py::arg("shift"), py::arg("half_ok") = false);
  m.def("key_deltas", [](const Values& kernel_size, const Values& dilation, const Values& grid_shape, bool centered) {
    return key_deltas(kernel_size, dilation, grid_shape, centered);
  });
  m.def("pack_keys", [](const at::Tensor& indices, const Values& shape, const Values& shift, const Values& scale) {
    return pack_keys(indices, shape, shift, scale);
  });
  m.def("unpack_keys", [](const at::Tensor& keys, const Values& shape) { return unpack_keys(keys, shape); });
  m.def("map_row_error", [](const std::string& name, int64_t row, int64_t num_rows) {
    raise_map_row_error(name.c_str(), row, num_rows);
  }, py::arg("name"), py::arg("row"), py::arg("num_rows"));
  m.def("pool_entries", [](const std::string& name, int64_t lo, int64_t hi, int64_t num_rows) {
    check_pool_entries(name.c_str(), lo, hi, num_rows);
  }, py::arg("name"), py::arg("lo"), py::arg("hi"), py::arg("num_rows"));
  // the C++ kernels' spelling of a dtype in messages (Float, Long, ...), for the Python checks
  m.def("dtype_name", [](const at::Tensor& t) { return std::string(c10::toString(t.scalar_type())); });
  m.def("index_error", [](const at::Tensor& indices, const Values& spatial_shape, int64_t batch_size, int64_t bad_row,
                          int64_t dup_row, const std::string& name, const std::string& grid_name) {
    raise_index_error(indices, spatial_shape, batch_size, bad_row, dup_row, name.c_str(), grid_name.c_str());
  }, py::arg("indices"), py::arg("spatial_shape"), py::arg("batch_size"), py::arg("bad_row"), py::arg("dup_row"),
        py::arg("name") = "indices", py::arg("grid_name") = "spatial_shape");
}

}  // namespace mxs
