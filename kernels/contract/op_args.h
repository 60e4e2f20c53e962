// Host-side conversion of op arguments into the plain structs of kernels/common,
// with the argument checks every backend shares. Messages name the argument, the
// expectation and what came, because they surface as Python exceptions.
#pragma once
#include <torch/types.h>
#include <c10/util/Exception.h>
#include <optional>
#include <utility>
#include <sstream>
#include <string>
#include <vector>
#include "../common/conv_rules.h"

namespace mxs {

inline std::string list_str(c10::IntArrayRef v) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < v.size(); ++i) s << (i ? ", " : "") << v[i];
  s << "]";
  return s.str();
}

inline Grid make_grid(c10::IntArrayRef spatial_shape, int64_t batch_size) {
  const int64_t nd = static_cast<int64_t>(spatial_shape.size());
  TORCH_CHECK_VALUE(nd >= 1 && nd <= kMaxSpatialDims, "spatial_shape: expected 1 to ",
                    kMaxSpatialDims, " dimensions, got ", nd, " (", list_str(spatial_shape), ")");
  TORCH_CHECK_VALUE(batch_size >= 1, "batch_size: expected >= 1, got ", batch_size);
  Grid g;
  g.ndim = static_cast<int>(nd);
  for (int d = 0; d < g.ndim; ++d) {
    TORCH_CHECK_VALUE(spatial_shape[d] >= 1, "spatial_shape: expected every dimension >= 1, got ",
                      list_str(spatial_shape));
    g.shape[d] = spatial_shape[d];
  }
  TORCH_CHECK_VALUE(grid_fits_int64(g, batch_size), "spatial_shape: batch_size (", batch_size,
                    ") x prod(spatial_shape ", list_str(spatial_shape),
                    ") exceeds the int64 voxel-key range; use a smaller grid or batch");
  return g;
}

// Geometry values are at most 2^31 - 1, like the int32 coordinates they act on: larger
// ones describe no int32 grid, and this bound keeps every offset (kernel position x
// dilation) and output extent within int64 arithmetic.
constexpr int64_t kMaxGeometryValue = 0x7fffffffLL;
// Columns of a neighbor map (kernel offsets). 2^20 is far beyond any kernel in use
// (7x7x7 = 343) and still bounds the map a builder allocates to 4 MiB per voxel; it also
// keeps the product of kernel_size from overflowing.
constexpr int64_t kMaxKernelVolume = int64_t(1) << 20;

inline void fill_axis_arg(const char* name, c10::IntArrayRef v, int ndim, int64_t min_value,
                          int64_t* out) {
  TORCH_CHECK_VALUE(static_cast<int>(v.size()) == ndim, name, ": expected ", ndim,
                    " values (one per spatial axis), got ", list_str(v));
  for (int d = 0; d < ndim; ++d) {
    TORCH_CHECK_VALUE(v[d] >= min_value && v[d] <= kMaxGeometryValue, name, ": expected every value in [",
                      min_value, ", 2^31 - 1], got ", list_str(v));
    out[d] = v[d];
  }
}

// prod(kernel_size) of positive sizes, at most kMaxKernelVolume (checked by division, so the
// product itself cannot overflow).
inline int64_t checked_kernel_volume(c10::IntArrayRef kernel_size) {
  int64_t volume = 1;
  for (const int64_t k : kernel_size) {
    TORCH_CHECK_VALUE(k <= kMaxKernelVolume / volume, "kernel_size: ", list_str(kernel_size),
                      " has more than ", kMaxKernelVolume, " offsets (the columns of a neighbor map)");
    volume *= k;
  }
  return volume;
}

// `padding` is pads_begin; pads_end defaults to it (symmetric padding). The names in the
// messages are the op's argument names (padding_name: "padding" or "pads_begin").
inline ConvGeometry make_geometry(int ndim, c10::IntArrayRef kernel_size, c10::IntArrayRef stride,
                                  c10::IntArrayRef padding, c10::IntArrayRef dilation,
                                  at::OptionalIntArrayRef pads_end = c10::nullopt,
                                  const char* padding_name = "padding") {
  ConvGeometry g;
  g.ndim = ndim;
  fill_axis_arg("kernel_size", kernel_size, ndim, 1, g.kernel);
  fill_axis_arg("stride", stride, ndim, 1, g.stride);
  fill_axis_arg(padding_name, padding, ndim, 0, g.padding);
  fill_axis_arg("dilation", dilation, ndim, 1, g.dilation);
  if (pads_end.has_value())
    fill_axis_arg("pads_end", *pads_end, ndim, 0, g.pads_end);
  else
    for (int d = 0; d < ndim; ++d) g.pads_end[d] = g.padding[d];
  checked_kernel_volume(kernel_size);
  return g;
}

// The geometry of arguments checked elsewhere or following another library's rules (the output
// extent helpers of the Python layer): only the counts are checked; make_geometry checks values.
// pads_end defaults to padding (symmetric).
inline ConvGeometry geometry_of(c10::IntArrayRef kernel_size, c10::IntArrayRef stride, c10::IntArrayRef padding,
                                c10::IntArrayRef dilation, at::OptionalIntArrayRef pads_end = c10::nullopt) {
  ConvGeometry g{};
  g.ndim = static_cast<int>(kernel_size.size());
  TORCH_CHECK_VALUE(g.ndim >= 1 && g.ndim <= kMaxSpatialDims, "kernel_size: expected 1 to ", kMaxSpatialDims,
                    " dimensions, got ", g.ndim);
  TORCH_CHECK_VALUE(stride.size() == kernel_size.size() && padding.size() == kernel_size.size() &&
                        dilation.size() == kernel_size.size() &&
                        (!pads_end.has_value() || pads_end->size() == kernel_size.size()),
                    "stride, padding, dilation", pads_end.has_value() ? ", pads_end" : "", ": expected ", g.ndim,
                    " values each like kernel_size");
  for (int d = 0; d < g.ndim; ++d) {
    g.kernel[d] = kernel_size[d];
    g.stride[d] = stride[d];
    g.padding[d] = padding[d];
    g.pads_end[d] = pads_end.has_value() ? (*pads_end)[d] : padding[d];
    g.dilation[d] = dilation[d];
  }
  return g;
}

// Output grid of a strided conv: every axis non-empty and within int32 coordinates.
inline Grid conv_output_grid(const Grid& in, const ConvGeometry& g, c10::IntArrayRef spatial_shape) {
  Grid out;
  out.ndim = in.ndim;
  for (int d = 0; d < in.ndim; ++d) {
    out.shape[d] = conv_out_extent(in.shape[d], g.kernel[d], g.stride[d], g.padding[d], g.pads_end[d], g.dilation[d]);
    TORCH_CHECK_VALUE(out.shape[d] >= 1, "spatial_shape: the convolution output is empty on axis ", d,
                      " (spatial_shape ", list_str(spatial_shape), ", kernel_size ", g.kernel[d], ", stride ",
                      g.stride[d], ", padding ", g.padding[d],
                      g.pads_end[d] != g.padding[d] ? " (pads_end " + std::to_string(g.pads_end[d]) + ")" : "",
                      ", dilation ", g.dilation[d], " on that axis)");
    TORCH_CHECK_VALUE(out.shape[d] <= kMaxGeometryValue, "padding: the convolution output has ", out.shape[d],
                      " cells on axis ", d, ", more than int32 coordinates address (spatial_shape ",
                      list_str(spatial_shape), ", padding ", g.padding[d], ", stride ", g.stride[d], ")");
  }
  return out;
}

// The same, and every output voxel key (batch x output grid) within int64.
inline Grid conv_output_grid(const Grid& in, const ConvGeometry& g, c10::IntArrayRef spatial_shape,
                             int64_t batch_size) {
  const Grid out = conv_output_grid(in, g, spatial_shape);
  TORCH_CHECK_VALUE(grid_fits_int64(out, batch_size), "batch_size, padding: batch_size (", batch_size,
                    ") x the convolution's output grid exceeds the int64 voxel-key range");
  return out;
}

// Output grid of a transposed conv (geometry from make_geometry with "pads_begin"):
// output_padding per axis in [0, max(stride, dilation)) -- ONNX ConvTranspose and
// torch.nn.ConvTranspose allow only that, the cells it adds lying within one step of the
// last reachable one --, every axis non-empty and within int32 coordinates, every output
// key (batch x output grid) within int64.
inline Grid conv_transpose_output_grid(const Grid& in, const ConvGeometry& g, c10::IntArrayRef output_padding,
                                       c10::IntArrayRef spatial_shape, int64_t batch_size) {
  int64_t op[kMaxSpatialDims];
  fill_axis_arg("output_padding", output_padding, in.ndim, 0, op);
  Grid out;
  out.ndim = in.ndim;
  for (int d = 0; d < in.ndim; ++d) {
    TORCH_CHECK_VALUE(op[d] < g.stride[d] || op[d] < g.dilation[d], "output_padding: expected every value smaller "
                      "than the stride or the dilation of its axis (as ONNX ConvTranspose and torch conv_transpose "
                      "require), got ", list_str(output_padding), " on axis ", d, " with stride ", g.stride[d],
                      " and dilation ", g.dilation[d]);
    out.shape[d] = conv_transpose_out_extent(in.shape[d], g.kernel[d], g.stride[d], g.padding[d], g.pads_end[d],
                                             g.dilation[d], op[d]);
    TORCH_CHECK_VALUE(out.shape[d] >= 1, "pads_begin, pads_end: the transposed convolution output is empty on axis ",
                      d, " (spatial_shape ", list_str(spatial_shape), ", kernel_size ", g.kernel[d], ", stride ",
                      g.stride[d], ", pads_begin ", g.padding[d], ", pads_end ", g.pads_end[d], ", dilation ",
                      g.dilation[d], ", output_padding ", op[d], " on that axis)");
    TORCH_CHECK_VALUE(out.shape[d] <= kMaxGeometryValue, "spatial_shape, stride: the transposed convolution output "
                      "has ", out.shape[d], " cells on axis ", d, ", more than int32 coordinates address "
                      "(spatial_shape ", list_str(spatial_shape), ", stride ", g.stride[d], ", kernel_size ",
                      g.kernel[d], ", dilation ", g.dilation[d], ")");
  }
  TORCH_CHECK_VALUE(grid_fits_int64(out, batch_size), "batch_size, stride: batch_size (", batch_size,
                    ") x the transposed convolution's output grid exceeds the int64 voxel-key range");
  return out;
}

// name: the op's argument (indices, or build_conv_map_at's out_indices).
// Output grid of build_conv_map_at (a convolution evaluated at given output voxels), which its
// out_indices must lie in and their keys are packed on: out_spatial_shape when given (every axis
// in [1, 2^31 - 1]), else the outputs whose kernel window meets the input grid --
//   strided:    o*stride - pads_begin <= in - 1, i.e. floor((in - 1 + pads_begin) / stride) + 1 cells
//               (the strided conv's grid with pads_end = (kernel - 1)*dilation);
//   transposed: o <= (in - 1)*stride - pads_begin + (kernel - 1)*dilation, the transposed conv's
//               grid with pads_end = output_padding = 0 (rejected when pads_begin leaves it empty).
// Every output key (batch x grid) within int64. `g` comes from make_geometry with "pads_begin".
inline Grid conv_map_at_output_grid(const Grid& in, const ConvGeometry& g, at::OptionalIntArrayRef out_spatial_shape,
                                    bool transposed, int64_t batch_size) {
  Grid out;
  out.ndim = in.ndim;
  if (out_spatial_shape.has_value()) {
    fill_axis_arg("out_spatial_shape", *out_spatial_shape, in.ndim, 1, out.shape);
    TORCH_CHECK_VALUE(grid_fits_int64(out, batch_size), "out_spatial_shape: batch_size (", batch_size, ") x prod(",
                      list_str(*out_spatial_shape), ") exceeds the int64 voxel-key range");
    return out;
  }
  for (int d = 0; d < in.ndim; ++d) {
    out.shape[d] = transposed ? conv_transpose_out_extent(in.shape[d], g.kernel[d], g.stride[d], g.padding[d], 0,
                                                          g.dilation[d], 0)
                              : (in.shape[d] - 1 + g.padding[d]) / g.stride[d] + 1;
    TORCH_CHECK_VALUE(out.shape[d] >= 1, "pads_begin: no output of the transposed convolution reaches the grid on "
                      "axis ", d, " (pads_begin ", g.padding[d], " exceeds (in - 1)*stride + (kernel - 1)*dilation = ",
                      (in.shape[d] - 1) * g.stride[d] + (g.kernel[d] - 1) * g.dilation[d],
                      "); pass out_spatial_shape to name the output grid");
    TORCH_CHECK_VALUE(out.shape[d] <= kMaxGeometryValue, "out_spatial_shape: the output grid derived on axis ", d,
                      " has ", out.shape[d], " cells, more than int32 coordinates address; pass out_spatial_shape");
  }
  TORCH_CHECK_VALUE(grid_fits_int64(out, batch_size), "batch_size, pads_begin: batch_size (", batch_size,
                    ") x the derived output grid exceeds the int64 voxel-key range; pass out_spatial_shape");
  return out;
}

// name: the op's argument (indices, or build_conv_map_at's out_indices).
inline void check_indices(const at::Tensor& indices, int ndim, const char* name = "indices") {
  TORCH_CHECK_VALUE(indices.scalar_type() == at::kInt, name, ": expected dtype int32, got ",
                    indices.scalar_type());
  TORCH_CHECK_VALUE(indices.dim() == 2 && indices.size(1) == 1 + ndim, name, ": expected shape [N, ",
                    1 + ndim, "] (batch + ", ndim, " spatial coordinates), got ", indices.sizes());
}

// Rows of a neighbor map (input or output voxels) are int32 row numbers, -1 meaning none.
inline void check_row_count(int64_t n, const char* name = "indices") {
  TORCH_CHECK_VALUE(n < INT32_MAX, name, ": ", n,
                    " rows do not fit the int32 neighbor map; expected fewer than 2^31 - 1");
}

// check_indices, and rows that an int32 neighbor map can name.
inline void check_index_layout(const at::Tensor& indices, int ndim, const char* name = "indices") {
  check_indices(indices, ndim, name);
  check_row_count(indices.size(0), name);
}

// Every given tensor on the device of `reference`: a backend of several devices (CUDA,
// PrivateUse1) is dispatched to when ANY tensor argument is on its device, so a call mixing
// devices lands there and is rejected naming the argument.
using NamedTensor = std::pair<const char*, const at::Tensor*>;  // nullptr: an absent optional argument

inline void check_same_device(const char* reference_name, const at::Tensor& reference,
                              c10::ArrayRef<NamedTensor> tensors) {
  for (const auto& [name, t] : tensors)
    TORCH_CHECK_VALUE(t == nullptr || !t->defined() || t->device() == reference.device(), name,
                      ": expected a tensor on ", reference.device(), " like ", reference_name, ", got one on ",
                      t->device());
}

inline void check_float(const at::Tensor& t, const char* name) {
  const auto s = t.scalar_type();
  TORCH_CHECK_VALUE(s == at::kFloat || s == at::kDouble || s == at::kHalf || s == at::kBFloat16, name,
                    ": expected float32, float64, float16 or bfloat16, got ", s);
}

inline void check_map(const at::Tensor& nbr, const char* name) {
  TORCH_CHECK_VALUE(nbr.scalar_type() == at::kInt && nbr.dim() == 2, name,
                    ": expected an int32 neighbor map [M, K], got ", nbr.scalar_type(), " ",
                    nbr.sizes());
}

// Shared shape checks of gather_mm / gather_mm_backprop_filter.
inline void check_gather_operands(const at::Tensor& features, const at::Tensor& nbr,
                                  const std::optional<at::Tensor>& nbr_t, int64_t groups) {
  check_map(nbr, "nbr");
  TORCH_CHECK_VALUE(features.dim() == 2, "features: expected [N, C], got ", features.sizes());
  TORCH_CHECK_VALUE(groups >= 1, "groups: expected >= 1, got ", groups);
  if (!nbr_t.has_value()) return;  // symmetric map: nbr is its own transpose, offsets reversed
  check_map(*nbr_t, "nbr_t");
  TORCH_CHECK_VALUE(nbr_t->size(1) == nbr.size(1), "nbr_t: expected ", nbr.size(1),
                    " kernel offsets like nbr, got ", nbr_t->size(1));
}

// Channel counts of a gather_mm / gather_mm_backprop_filter call, per group.
struct GatherShape {
  int64_t groups, cin, cout, cin_g, cout_g, kvol;
};

// What both gathers check: devices, the operands' layout, float features and an operand
// (`operand_name`: gather_mm's weight, the filter gradient's grad) of the features' dtype.
inline void check_gather_call(const at::Tensor& features, const char* operand_name, const at::Tensor& operand,
                              const at::Tensor& nbr, const std::optional<at::Tensor>& nbr_t, int64_t groups) {
  check_same_device("features", features,
                    {{operand_name, &operand}, {"nbr", &nbr}, {"nbr_t", nbr_t.has_value() ? &*nbr_t : nullptr}});
  check_gather_operands(features, nbr, nbr_t, groups);
  check_float(features, "features");
  TORCH_CHECK_VALUE(operand.scalar_type() == features.scalar_type(), operand_name, ": expected dtype ",
                    features.scalar_type(), " like features, got ", operand.scalar_type());
}

// gather_mm(features [N, Cin], weight [K, Cin/groups, Cout], nbr [M, K]).
inline GatherShape check_gather_mm_args(const at::Tensor& features, const at::Tensor& weight, const at::Tensor& nbr,
                                        const std::optional<at::Tensor>& nbr_t, int64_t groups) {
  check_gather_call(features, "weight", weight, nbr, nbr_t, groups);
  TORCH_CHECK_VALUE(weight.dim() == 3 && weight.size(0) == nbr.size(1), "weight: expected [K=", nbr.size(1),
                    ", Cin/groups, Cout], got ", weight.sizes());
  GatherShape s{groups, features.size(1), weight.size(2), weight.size(1), 0, nbr.size(1)};
  TORCH_CHECK_VALUE(s.cin_g * groups == s.cin, "weight: expected Cin/groups = ", s.cin, "/", groups,
                    " input channels per group, got weight ", weight.sizes());
  TORCH_CHECK_VALUE(s.cout % groups == 0, "weight: out channels ", s.cout, " are not divisible by groups=", groups);
  s.cout_g = s.cout / groups;
  return s;
}

// gather_mm_backprop_filter(features [N, Cin], grad [M, Cout], nbr [M, K]).
inline GatherShape check_backprop_filter_args(const at::Tensor& features, const at::Tensor& grad,
                                              const at::Tensor& nbr, const std::optional<at::Tensor>& nbr_t,
                                              int64_t groups) {
  check_gather_call(features, "grad", grad, nbr, nbr_t, groups);
  TORCH_CHECK_VALUE(grad.dim() == 2 && grad.size(0) == nbr.size(0), "grad: expected [M=", nbr.size(0),
                    ", Cout], got ", grad.sizes());
  const int64_t cin = features.size(1), cout = grad.size(1);
  TORCH_CHECK_VALUE(cin % groups == 0 && cout % groups == 0, "groups: ", groups,
                    " must divide the input channels (", cin, ") and output channels (", cout, ")");
  return {groups, cin, cout, cin / groups, cout / groups, nbr.size(1)};
}

// Key difference of every kernel offset on a row-major grid of grid_shape (k in the order of
// kernel_offsets.h), from kernel_offset_key_delta (conv_rules.h). The caller's grid has
// batch x prod(grid_shape) within int64 (make_grid), which bounds every difference too.
inline std::vector<int64_t> key_deltas(c10::IntArrayRef kernel_size, c10::IntArrayRef dilation,
                                       c10::IntArrayRef grid_shape, bool centered) {
  const int ndim = static_cast<int>(kernel_size.size());
  const std::vector<int64_t> ones(ndim, 1), zeros(ndim, 0);
  const ConvGeometry g = make_geometry(ndim, kernel_size, ones, zeros, dilation);
  TORCH_CHECK_VALUE(static_cast<int>(grid_shape.size()) == ndim, "grid_shape: expected ", ndim,
                    " values (one per spatial axis), got ", list_str(grid_shape));
  Grid grid;
  grid.ndim = ndim;
  for (int d = 0; d < ndim; ++d) {
    TORCH_CHECK_VALUE(grid_shape[d] >= 1, "grid_shape: expected every dimension >= 1, got ", list_str(grid_shape));
    grid.shape[d] = grid_shape[d];
  }
  std::vector<int64_t> out(kernel_volume(g));
  for (int64_t k = 0; k < static_cast<int64_t>(out.size()); ++k) out[k] = kernel_offset_key_delta(g, grid, k, centered);
  return out;
}

}  // namespace mxs
